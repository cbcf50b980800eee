//! `list`, `doctor` and `refresh`: every tool with its tier, path and actions, and every problem.

use crate::call::Runner;
use crate::discover::Problem;
use serde_json::{json, Value};

/// Scan the tiers and read every manifest (cache misses probed in parallel); see [`crate::llm::catalog::manifests`].
pub async fn catalog(runner: &Runner) -> (Vec<Value>, Vec<Problem>, usize) {
    let (resolved, problems, probed) = crate::llm::catalog::manifests(runner).await;
    let tools = resolved
        .into_iter()
        .map(|r| {
            let (file, m) = (r.file, r.manifest);
            json!({
                "name": file.name,
                "tier": file.tier,
                "path": file.path,
                "launch": file.launch,
                "version": m.version,
                "description": m.description,
                "events": m.events,
                "persistent": m.persistent,
                "cli": m.cli,
                "actions": m.actions.iter().map(|a| json!({
                    "name": a.name,
                    "schema_name": a.schema_name,
                    "description": a.description,
                    "gated": a.profile.gated,
                    "timeout_s": a.timeout_s(),
                    "background_eligible": a.profile.background_eligible,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    (tools, problems, probed)
}

fn print_problems(problems: &[Problem]) {
    for p in problems {
        println!("  [{}] {}", p.kind, p.message);
        if let Some(t) = &p.stderr_tail {
            let lines: Vec<&str> = t.lines().filter(|l| !l.trim().is_empty()).collect();
            for l in &lines[lines.len().saturating_sub(3)..] {
                println!("      | {l}");
            }
        }
    }
}

pub async fn list(runner: &Runner, as_json: bool) -> i32 {
    let (tools, problems, _) = catalog(runner).await;
    if as_json {
        println!("{}", json!({"tools": tools, "problems": problems}));
        return 0;
    }
    if tools.is_empty() {
        println!("No tools found. Tier folders searched:");
        for (tier, dir) in runner.dirs.tier_dirs() {
            println!("  {tier:<8} {}", dir.display());
        }
    } else {
        let w = tools
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("").len())
            .max()
            .unwrap_or(4)
            .max(4);
        println!("{:w$}  {:8}  {:32}  PATH", "TOOL", "TIER", "ACTIONS");
        for t in &tools {
            let actions: Vec<&str> = t["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["name"].as_str())
                .collect();
            let mut acts = actions.join(",");
            if t["cli"] == true {
                acts = if acts.is_empty() {
                    "(cli)".into()
                } else {
                    format!("{acts} (cli)")
                };
            }
            println!(
                "{:w$}  {:8}  {:32}  {}",
                t["name"].as_str().unwrap_or(""),
                t["tier"].as_str().unwrap_or(""),
                acts,
                t["path"].as_str().unwrap_or("")
            );
        }
    }
    if !problems.is_empty() {
        println!(
            "\nProblems ({}; `animaworks-tool doctor` exits non-zero while there are any):",
            problems.len()
        );
        print_problems(&problems);
    }
    0
}

pub async fn doctor(runner: &Runner, as_json: bool) -> i32 {
    use crate::policy::env::EnvPolicy;
    let (tools, problems, _) = catalog(runner).await;
    // What reaches a tool from this caller, by policy: names only, never values.
    let settings = runner.env_settings().unwrap_or_default();
    let legacy = settings.policy(true);
    let names = |p| crate::policy::env::visible_names(std::env::vars_os(), p, &settings.passthrough);
    if as_json {
        println!(
            "{}",
            json!({"ok": problems.is_empty(), "tools": tools.len(), "problems": problems,
                   "environment": {"legacy_env": legacy.as_str(),
                                   "clean": names(EnvPolicy::Clean), "inherit": names(EnvPolicy::Inherit)}})
        );
    } else {
        if problems.is_empty() {
            println!("ok: {} tools, no problems", tools.len());
        } else {
            println!("{} problems ({} tools callable):", problems.len(), tools.len());
            print_problems(&problems);
        }
        println!("\nEnvironment (protocol.md §8):");
        println!("  tools on the new protocol: {}", runner.env_summary(EnvPolicy::Clean));
        println!("  AnimaWorks modules: {}", runner.env_summary(legacy));
    }
    if problems.is_empty() {
        0
    } else {
        1
    }
}

pub async fn refresh(runner: &Runner) -> i32 {
    if let Err(e) = crate::cache::clear(&runner.dirs) {
        eprintln!(
            "animaworks-tool: cannot clear the schema cache at {}: {e}",
            runner.dirs.cache.display()
        );
        return crate::ErrorCode::Internal.exit_code();
    }
    let (tools, problems, probed) = catalog(runner).await;
    println!(
        "refreshed: probed {probed} tools, {} callable, {} problems",
        tools.len(),
        problems.len()
    );
    0
}
