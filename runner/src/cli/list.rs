//! `list`, `doctor` and `refresh`: every tool with its tier, path and actions, and every problem.

use awt_core::call::{Resolved, Runner};
use awt_core::discover::{Launch, Problem};
use awt_core::tier::Tier;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::Path;

/// One tool as `tools --json` shows it (and `doctor`, the text listing, through [`catalog`]).
#[derive(Serialize)]
struct ToolView<'a> {
    name: &'a str,
    tier: Tier,
    path: &'a Path,
    launch: Launch,
    version: &'a Option<String>,
    description: &'a Option<String>,
    events: bool,
    persistent: bool,
    cli: bool,
    actions: Vec<ActionView<'a>>,
}

#[derive(Serialize)]
struct ActionView<'a> {
    name: &'a str,
    schema_name: &'a str,
    description: &'a str,
    gated: bool,
    timeout_s: f64,
    background_eligible: bool,
    sandbox: &'a Option<awt_protocol::Sandbox>,
}

impl<'a> ToolView<'a> {
    fn of(r: &'a Resolved) -> ToolView<'a> {
        let (file, m) = (&r.file, &r.manifest);
        ToolView {
            name: &file.name,
            tier: file.tier,
            path: &file.path,
            launch: file.launch,
            version: &m.version,
            description: &m.description,
            events: m.events,
            persistent: m.persistent,
            cli: m.cli,
            actions: m
                .actions
                .iter()
                .map(|a| ActionView {
                    name: &a.name,
                    schema_name: &a.schema_name,
                    description: &a.description,
                    gated: a.profile.gated,
                    timeout_s: a.timeout_s(),
                    background_eligible: a.profile.background_eligible,
                    sandbox: &a.profile.sandbox,
                })
                .collect(),
        }
    }
}

/// Scan the tiers and read every manifest (cache misses probed in parallel); see [`awt_llm::catalog::manifests`].
pub async fn catalog(runner: &Runner) -> (Vec<Value>, Vec<Problem>, usize) {
    let (resolved, problems, probed) = awt_llm::catalog::manifests(runner).await;
    let tools = resolved
        .iter()
        .map(|r| serde_json::to_value(ToolView::of(r)).unwrap_or(Value::Null))
        .collect();
    (tools, problems, probed)
}

/// `tools --json`: serialized straight from the manifests into one buffer, written at once (a `Value` per tool
/// and stdout's line buffer cost a warm listing of many tools much of its time and a write per line).
async fn list_json(runner: &Runner) -> i32 {
    #[derive(Serialize)]
    struct Listing<'a> {
        tools: Vec<ToolView<'a>>,
        problems: &'a [Problem],
    }
    let (resolved, problems, _) = awt_llm::catalog::manifests(runner).await;
    let listing = Listing {
        tools: resolved.iter().map(ToolView::of).collect(),
        problems: &problems,
    };
    // Sized for the listing up front: grown by doubling, a large listing was copied over again on the way.
    let mut out = Vec::with_capacity(4096 + 512 * listing.tools.len());
    match serde_json::to_writer(&mut out, &listing) {
        Ok(()) => {}
        Err(e) => {
            tell!("animaworks-tool: cannot write the listing: {e}");
            return 1;
        }
    };
    out.push(b'\n');
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(&out);
    0
}

fn print_problems(problems: &[Problem]) {
    for p in problems {
        say!("  [{}] {}", p.kind, super::term::for_stdout(&p.message));
        if let Some(t) = &p.stderr_tail {
            let lines: Vec<&str> = t.lines().filter(|l| !l.trim().is_empty()).collect();
            for l in &lines[lines.len().saturating_sub(3)..] {
                say!("      | {}", super::term::for_stdout(l));
            }
        }
    }
}

pub async fn list(runner: &Runner, as_json: bool) -> i32 {
    if as_json {
        return list_json(runner).await;
    }
    let (tools, problems, _) = catalog(runner).await;
    if tools.is_empty() {
        say!("No tools found. Tier folders searched:");
        for (tier, dir) in runner.dirs.tier_dirs() {
            say!("  {tier:<8} {}", dir.display());
        }
    } else {
        let w = tools
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("").len())
            .max()
            .unwrap_or(4)
            .max(4);
        say!("{:w$}  {:8}  {:32}  PATH", "TOOL", "TIER", "ACTIONS");
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
            say!(
                "{:w$}  {:8}  {:32}  {}",
                t["name"].as_str().unwrap_or(""),
                t["tier"].as_str().unwrap_or(""),
                acts,
                t["path"].as_str().unwrap_or("")
            );
        }
    }
    if !problems.is_empty() {
        say!(
            "\n{} (`animaworks-tool doctor` exits non-zero while there are any):",
            plural(problems.len(), "Problem", "Problems")
        );
        print_problems(&problems);
    }
    if let Some((n, _)) = tier_note(runner) {
        say!("\nnote: {n}");
    }
    for w in permission_warnings(runner) {
        say!("warning: {}", super::term::for_stdout(&w));
    }
    0
}

/// The anima's `permissions.json` keys that nothing reads (a misspelt grant), each with where it is.
fn permission_warnings(runner: &Runner) -> Vec<String> {
    runner
        .permissions()
        .map(|p| awt_core::policy::permissions::unknown_keys(&p))
        .unwrap_or_default()
}

/// A tool named like a runner command (`check`, `share`, …): on the command line the command wins (an agent's
/// tool must not take over `permissions` or `share`); the warning says how to call the tool.
fn shadowed_by_commands(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .filter_map(|t| {
            let name = t["name"].as_str()?;
            (name == "call" || super::words::COMMANDS.contains(&name)).then(|| {
                format!(
                    "tool '{name}' ({}) is named like the runner's command `{name}`, which wins on the command line; \
                     call the tool as `animaworks-tool -- {name} …` (or `animaworks-tool call {name} <action>`); \
                     use-tool, MCP and submit reach it by its name",
                    t["path"].as_str().unwrap_or("")
                )
            })
        })
        .collect()
}

/// What `doctor` says of the sandbox: the kernel's support, the modes in force, a settings error.
fn sandbox_report(runner: &Runner) -> (Value, Option<String>) {
    use awt_core::sandbox::kernel;
    let k = kernel::support();
    let (settings, err) = match runner.settings_file() {
        Ok(s) => (Some(s.sandbox.clone()), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let proxy = k.pid_namespace
        && settings.as_ref().is_none_or(|s| s.pid_namespace)
        && awt_core::sandbox::netproxy::available();
    let mut report = kernel::report(&k);
    report.push(awt_core::netpolicy::doctor_line(proxy));
    let reads = awt_core::sandbox::reads_in_force(&k, settings.as_ref());
    report.push(awt_core::sandbox::doctor_line(reads));
    let (limits, _) = awt_core::resources::doctor(runner.settings_file().ok());
    let v = json!({
        "landlock_abi": k.landlock_abi,
        "seccomp": k.seccomp,
        "pid_namespace": k.pid_namespace,
        "needs_user_namespace": k.needs_user_namespace,
        "hosts": if proxy { "proxy" } else { "not_enforced" },
        "reads": reads.as_str(),
        "settings": settings,
        "limits": limits,
        "report": report,
    });
    (v, err)
}

/// The settings file's error for `doctor --json`: the file, the message, the key at fault and the closest real
/// key of a misspelt one.
fn settings_error_json(runner: &Runner) -> Value {
    match runner.settings_file() {
        Ok(_) => Value::Null,
        Err(e) => json!({"path": e.path, "message": e.to_string(), "key": e.key, "did_you_mean": e.did_you_mean}),
    }
}

/// "1 problem", "2 problems".
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The personal-tier note, and whether it is a problem: an anima dir that was named but does not exist is a
/// mistake (a typo, a forgotten export); no anima dir at all is a setup without personal tools.
fn tier_note(runner: &Runner) -> Option<(String, bool)> {
    let note = awt_core::suggest::personal_tier_note(&runner.dirs)?;
    let missing = runner.dirs.anima.as_ref().is_some_and(|a| !a.is_dir());
    Some((note, missing))
}

pub async fn doctor(runner: &Runner, as_json: bool) -> i32 {
    use awt_core::policy::env::EnvPolicy;
    let (tools, problems, _) = catalog(runner).await;
    let (sandbox, settings_error) = sandbox_report(runner);
    let note = tier_note(runner);
    let bad = !problems.is_empty() || settings_error.is_some() || note.as_ref().is_some_and(|n| n.1);
    let mut shadowed = shadowed_by_commands(&tools);
    shadowed.extend(permission_warnings(runner));
    // What reaches a tool from this caller, by policy: names only, never values.
    let settings = runner.env_settings().unwrap_or_default();
    let legacy = settings.policy(true);
    let names = |p| awt_core::policy::env::visible_names(std::env::vars_os(), p, &settings.passthrough);
    let credentials = credential_report(runner).await;
    let adapter = super::animaworks::doctor_lines(runner);
    let (approvals, approval_lines) = super::approvals::pending_report(&runner.dirs.data);
    if as_json {
        say!(
            "{}",
            json!({"ok": !bad, "tools": tools.len(), "problems": problems, "notes": note.iter().map(|n| &n.0).collect::<Vec<_>>(), "warnings": shadowed, "sandbox": sandbox, "sandbox_error": settings_error, "settings_error": settings_error_json(runner),
                   "credentials": credentials, "animaworks_adapter": adapter, "approvals_pending": approvals,
                   "environment": {"legacy_env": legacy.as_str(),
                                   "clean": names(EnvPolicy::Clean), "inherit": names(EnvPolicy::Inherit)}})
        );
    } else {
        if problems.is_empty() {
            say!(
                "{}: {}, no problems with the tools",
                if bad { "not ok" } else { "ok" },
                plural(tools.len(), "tool", "tools")
            );
        } else {
            say!(
                "{} ({} callable):",
                plural(problems.len(), "problem", "problems"),
                plural(tools.len(), "tool", "tools")
            );
            print_problems(&problems);
        }
        if let Some(e) = &settings_error {
            say!("settings: {e}");
        }
        if let Some((n, _)) = &note {
            say!("note: {n}");
        }
        for w in &shadowed {
            say!("warning: {}", super::term::for_stdout(w));
        }
        say!("environment (protocol.md §8):");
        say!("  tools on the new protocol: {}", runner.env_summary(EnvPolicy::Clean));
        say!("  AnimaWorks modules: {}", runner.env_summary(legacy));
        say!("credentials (docs/credentials.md):");
        if credentials.is_empty() {
            say!("  no tool declares one");
        }
        for c in &credentials {
            let names = |k: &str| {
                c[k].as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let refused = names("not_granted");
            say!(
                "  {} ({}): declares {}; {}",
                c["tool"].as_str().unwrap_or(""),
                c["tier"].as_str().unwrap_or(""),
                names("declared"),
                if refused.is_empty() {
                    "all granted".to_owned()
                } else {
                    format!("not granted: {refused}")
                }
            );
        }
        if !approval_lines.is_empty() {
            say!("approvals waiting for a human (`animaworks-tool approvals approve|deny <id>`):");
            for l in &approval_lines {
                say!("  {}", super::term::for_stdout(l));
            }
        }
        say!("sandbox:");
        for line in sandbox["report"].as_array().into_iter().flatten() {
            say!("  {}", line.as_str().unwrap_or(""));
        }
        for line in sandbox["limits"]["report"].as_array().into_iter().flatten() {
            say!("  {}", line.as_str().unwrap_or(""));
        }
        if let Some(s) = sandbox["settings"].as_object() {
            say!(
                "  modes: core {}, common {}, personal {}; where the kernel falls short: {}",
                s["core"],
                s["common"],
                s["personal"],
                s["unsupported"]
            );
        }
        for line in &adapter {
            say!("{line}");
        }
    }
    if bad {
        1
    } else {
        0
    }
}

/// Which tools declare which credentials, and which of them the anima's permissions grant (names only).
async fn credential_report(runner: &Runner) -> Vec<Value> {
    let (resolved, _, _) = awt_llm::catalog::manifests(runner).await;
    let perms = runner.permissions();
    let defaults = runner.settings().map(|s| s.credential_defaults).unwrap_or_default();
    let mut out = Vec::new();
    for r in resolved {
        let mut declared: Vec<&str> = r
            .manifest
            .credentials
            .iter()
            .chain(r.manifest.actions.iter().flat_map(|a| a.profile.credentials.iter()))
            .map(|d| d.name.as_str())
            .collect();
        declared.sort_unstable();
        declared.dedup();
        if declared.is_empty() {
            continue;
        }
        let g = awt_core::policy::grants::CredentialGrants::of(&perms, &r.file.name, r.file.tier, &defaults);
        let not: Vec<&str> = declared.iter().copied().filter(|n| !g.allows(n)).collect();
        out.push(
            json!({"tool": r.file.name, "tier": r.file.tier, "declared": declared, "not_granted": not,
                        "grant": not.iter().map(|n| g.grant_line(n)).collect::<Vec<_>>()}),
        );
    }
    out
}

pub async fn refresh(runner: &Runner) -> i32 {
    if let Err(e) = awt_core::cache::clear(&runner.dirs) {
        tell!(
            "animaworks-tool: cannot clear the schema cache at {}: {e}",
            runner.dirs.cache.display()
        );
        return awt_core::ErrorCode::Internal.exit_code();
    }
    let (tools, problems, probed) = catalog(runner).await;
    say!(
        "refreshed: probed {}, {} callable, {}",
        plural(probed, "tool", "tools"),
        tools.len(),
        plural(problems.len(), "problem", "problems")
    );
    0
}
