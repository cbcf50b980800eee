//! What an LLM may see: every callable tool and, of each, the actions the permissions allow (a gated action
//! without its grant is left out, as the call pipeline's gate would refuse it).

use awt_core::cache::Probed;
use awt_core::call::{Resolved, Runner};
use awt_core::discover::{self, Problem};
use awt_core::manifest::ActionSpec;
use awt_core::policy::gate;
use awt_core::probe::{self, Obtained};

/// Every tool whose `--schemas` answered, with its manifest; every problem met; how many tools were probed (not
/// read from the cache). Cache misses are probed in parallel.
pub async fn manifests(runner: &Runner) -> (Vec<Resolved>, Vec<Problem>, usize) {
    let scan = discover::scan(&runner.dirs);
    let env = runner.probe_env().unwrap_or_default();
    let files: Vec<_> = scan.tools.into_values().collect();
    let mut problems = scan.problems;
    let mut tools = Vec::new();
    let mut probed = 0;
    for (file, result, source) in probe::manifests(files, &runner.dirs, &env).await {
        if source == Obtained::Probe {
            probed += 1;
        }
        match result {
            Probed::Ok(manifest) => {
                for why in &manifest.refused {
                    problems.push(Problem {
                        message: format!("{}: {why}", file.path.display()),
                        tool: file.name.clone(),
                        tier: file.tier,
                        path: file.path.clone(),
                        kind: "schema_name_refused",
                        stderr_tail: None,
                    });
                }
                if let Some(why) = &manifest.legacy_profile_error {
                    problems.push(Problem {
                        message: format!(
                            "{}: {why}; every action counts as gated until it is fixed",
                            file.path.display()
                        ),
                        tool: file.name.clone(),
                        tier: file.tier,
                        path: file.path.clone(),
                        kind: "profile_unreadable",
                        stderr_tail: None,
                    });
                }
                tools.push(Resolved { file, manifest })
            }
            Probed::Failed {
                reason, stderr_tail, ..
            } => problems.push(Problem {
                message: format!("{}: {reason}", file.path.display()),
                tool: file.name,
                tier: file.tier,
                path: file.path,
                kind: "schemas_failed",
                stderr_tail: (!stderr_tail.is_empty()).then_some(stderr_tail),
            }),
        }
    }
    claim_schema_names(&mut tools, &mut problems);
    problems.extend(permissions_problem(runner));
    (tools, problems, probed)
}

/// The anima's permissions file when it cannot be used: every call is refused while it stands, so every listing
/// says so rather than answer with fewer tools in silence.
pub fn permissions_problem(runner: &Runner) -> Option<Problem> {
    let e = runner.permissions().err()?;
    Some(Problem {
        message: format!(
            "{e}; every call of this anima is refused until it is fixed (`animaworks-tool permissions show` reads it)"
        ),
        tool: String::new(),
        tier: awt_core::policy::Tier::Personal,
        path: e.path,
        kind: "permissions_invalid",
        stderr_tail: None,
    })
}

/// A schema name belongs to one tool: core tools claim theirs first, then common, then personal, each tier in
/// name order. A later tool's action whose name is taken is left out (with a `schema_name_taken` problem), so
/// MCP `tools/list` and `tools/call`, `schemas` and `use-tool`'s catalogue all mean the same tool by a name.
fn claim_schema_names(tools: &mut [Resolved], problems: &mut Vec<Problem>) {
    let mut order: Vec<usize> = (0..tools.len()).collect();
    order.sort_by(|&a, &b| (tools[a].file.tier, &tools[a].file.name).cmp(&(tools[b].file.tier, &tools[b].file.name)));
    let mut taken: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for i in order {
        let r = &mut tools[i];
        let file = r.file.clone();
        r.manifest.actions.retain(|a| match taken.get(&a.schema_name) {
            Some(owner) => {
                problems.push(Problem {
                    message: format!(
                        "{}: action {:?} is left out: its schema name {:?} belongs to the tool {owner}",
                        file.path.display(),
                        a.name,
                        a.schema_name
                    ),
                    tool: file.name.clone(),
                    tier: file.tier,
                    path: file.path.clone(),
                    kind: "schema_name_taken",
                    stderr_tail: None,
                });
                false
            }
            None => {
                taken.insert(a.schema_name.clone(), file.name.clone());
                true
            }
        });
    }
}

/// One tool and those of its actions the caller may run.
#[derive(Debug, Clone)]
pub struct Entry {
    pub resolved: Resolved,
    pub actions: Vec<ActionSpec>,
}

impl Entry {
    pub fn name(&self) -> &str {
        &self.resolved.file.name
    }
}

/// The permitted catalogue, sorted by tool name; tools with no permitted action are left out.
pub async fn permitted(runner: &Runner) -> Vec<Entry> {
    let (tools, _, _) = manifests(runner).await;
    permitted_of(runner, tools)
}

/// The permitted part of already read manifests.
pub fn permitted_of(runner: &Runner, tools: Vec<Resolved>) -> Vec<Entry> {
    // Why not Runner::permit per action: the same decision, with the permissions file read once, not once per
    // action (tools/list over hundreds of actions).
    let perms = runner.permissions();
    let off = super::services::disabled(&runner.dirs.data);
    // An action that asks a human is offered too: calling it is how the anima asks.
    let approvals = runner.settings().map(|s| s.approvals.clone()).unwrap_or_default();
    tools
        .into_iter()
        .filter(|r| !off.contains(&r.file.name.as_str()))
        .filter_map(|r| {
            let actions: Vec<ActionSpec> = r
                .manifest
                .actions
                .iter()
                .filter(|a| {
                    let d = gate::decide(
                        &perms,
                        &r.file.name,
                        r.file.tier,
                        &a.name,
                        &awt_core::call::gate_of(&r, a),
                    );
                    awt_core::policy::approval::callable(&d, &perms, &approvals, r.file.tier)
                })
                .cloned()
                .collect();
            (!actions.is_empty()).then_some(Entry { resolved: r, actions })
        })
        .collect()
}

/// The first line of a description, at most 160 characters: what a compact catalogue shows.
pub fn one_line(description: &str) -> String {
    let first = description.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if first.chars().count() > 160 {
        let mut s: String = first.chars().take(159).collect();
        s.push('…');
        s
    } else {
        first.to_owned()
    }
}

/// A compact text catalogue: one line per tool, one indented line per action.
pub fn compact(entries: &[Entry]) -> String {
    let mut out = String::new();
    for e in entries {
        let d = one_line(e.resolved.manifest.description.as_deref().unwrap_or(""));
        if d.is_empty() {
            out.push_str(&format!("{}\n", e.name()));
        } else {
            out.push_str(&format!("{}: {d}\n", e.name()));
        }
        for a in &e.actions {
            let d = one_line(&a.description);
            if d.is_empty() {
                out.push_str(&format!("  {}\n", a.name));
            } else {
                out.push_str(&format!("  {} — {d}\n", a.name));
            }
        }
    }
    out
}
