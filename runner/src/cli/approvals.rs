//! `approvals list|show|approve|deny|prune`: a human's answers to gated calls that ask ([`awt_tasks::approvals`]), and
//! the terminal prompt of a call made at a terminal.

use crate::cli::term;
use awt_core::call::approve::{Approval, Request};
use awt_core::call::Runner;
use awt_core::error::CallError;
use awt_tasks::approvals::{Approvals, PruneOptions, Record, State};
use clap::{Args, Subcommand};
use serde_json::Value;
use std::io::IsTerminal;

#[derive(Args, Debug)]
pub struct ApprovalsArgs {
    #[command(subcommand)]
    pub cmd: ApprovalsCmd,
}

#[derive(Subcommand, Debug)]
pub enum ApprovalsCmd {
    /// Requests waiting for a human (every anima of the data dir), oldest first.
    List {
        /// Only this anima's requests.
        #[arg(long, value_name = "NAME")]
        anima: Option<String>,
        /// Decided requests too (approved, used, denied, expired).
        #[arg(long)]
        all: bool,
        /// As JSON (an array of requests).
        #[arg(long)]
        json: bool,
    },
    /// One request: the anima, tool, action, arguments (masked) and its state.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Approve a request: it runs once in the background, as its anima, with the arguments shown.
    Approve {
        id: String,
        /// Why (kept in the request and the audit log).
        #[arg(long)]
        reason: Option<String>,
        /// Who approves. Default: the OS user.
        #[arg(long)]
        by: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Remove decided requests (used, denied, expired): their files go, their audit lines stay. Requests that
    /// wait for a human, and approved ones not yet run, are never removed. The store also prunes by itself when
    /// its folder nears its bound.
    Prune {
        /// Only requests decided at least this long ago (e.g. 7d, 12h, 30m, 90s). Default: every decided one.
        #[arg(long, value_name = "DURATION")]
        older_than: Option<String>,
        /// Only this anima's requests.
        #[arg(long, value_name = "NAME")]
        anima: Option<String>,
        /// Say what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// As JSON: {"removed": [...], "strays": [...], "kept": {...}, "dry_run": ...}.
        #[arg(long)]
        json: bool,
    },
    /// Deny a request: it never runs; its anima is notified.
    Deny {
        id: String,
        /// Why (told to the anima, kept in the request and the audit log).
        #[arg(long)]
        reason: Option<String>,
        /// Who denies. Default: the OS user.
        #[arg(long)]
        by: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

fn fail(e: &CallError) -> i32 {
    crate::cli::render::print_error(e, false);
    e.code.exit_code()
}

fn line(r: &Record) -> String {
    let b = &r.binding;
    format!(
        "{}  {:<8}  {:<12} {}:{}  {}",
        r.id,
        r.status.as_str(),
        b.anima.as_deref().unwrap_or("-"),
        b.tool,
        b.action,
        r.args
    )
}

fn show_text(r: &Record) -> String {
    let v = r.public();
    let mut out = String::new();
    for k in [
        "id",
        "status",
        "created",
        "expires",
        "keys",
        "decided_by",
        "reason",
        "approve",
    ] {
        if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
            let s = x.as_str().map_or_else(|| x.to_string(), str::to_owned);
            out.push_str(&format!("{k}: {s}\n"));
        }
    }
    let b = &r.binding;
    out.push_str(&format!(
        "anima: {}\ntool: {} ({} tier, {})\naction: {}\narguments: {}\n",
        b.anima.as_deref().unwrap_or("-"),
        b.tool,
        b.tier,
        b.tool_path,
        b.action,
        serde_json::to_string_pretty(&r.args).unwrap_or_default()
    ));
    out
}

pub fn approvals(runner: &Runner, a: ApprovalsArgs) -> i32 {
    let store = match Approvals::open_for(runner) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    match a.cmd {
        ApprovalsCmd::List { anima, all, json } => {
            let list = match store.list() {
                Ok(l) => l,
                Err(e) => return fail(&e),
            };
            let list: Vec<Record> = list
                .into_iter()
                .filter(|r| all || r.status == State::Pending)
                .filter(|r| anima.is_none() || r.binding.anima == anima)
                .collect();
            if json {
                say!("{}", Value::Array(list.iter().map(Record::public).collect()));
            } else if list.is_empty() {
                tell!("no {}approval requests", if all { "" } else { "pending " });
            } else {
                for r in &list {
                    say!("{}", term::for_stdout(&line(r)));
                }
            }
            0
        }
        ApprovalsCmd::Show { id, json } => match store.get(&id) {
            Ok(r) if json => {
                say!("{}", serde_json::to_string_pretty(&r.public()).unwrap_or_default());
                0
            }
            Ok(r) => {
                say_raw!("{}", term::for_stdout(&show_text(&r)));
                0
            }
            Err(e) => fail(&e),
        },
        ApprovalsCmd::Approve { id, reason, by, json } => {
            if let Err(e) = store.get(&id).and_then(|r| not_the_asker(&r)) {
                return fail(&e);
            }
            let by = awt_tasks::approvals::operator(by.as_deref());
            match store.approve(runner, &id, &by, reason.as_deref()) {
                Ok((r, warnings)) => {
                    for w in warnings {
                        tell!("warning: {w}");
                    }
                    if json {
                        say!("{}", r.public());
                    } else {
                        say!("approved {id}: it runs once in the background as {} (task {id}; `animaworks-tool jobs show {id}` with that anima dir)",
                            r.binding.anima.as_deref().unwrap_or("-"));
                    }
                    0
                }
                Err(e) => fail(&e),
            }
        }
        ApprovalsCmd::Prune {
            older_than,
            anima,
            dry_run,
            json,
        } => prune(&store, older_than.as_deref(), anima, dry_run, json),
        ApprovalsCmd::Deny { id, reason, by, json } => {
            let by = awt_tasks::approvals::operator(by.as_deref());
            match store.deny(&id, &by, reason.as_deref()) {
                Ok(r) => {
                    if json {
                        say!("{}", r.public());
                    } else {
                        say!(
                            "denied {id}; {} is notified",
                            r.binding.anima.as_deref().unwrap_or("the anima")
                        );
                    }
                    0
                }
                Err(e) => fail(&e),
            }
        }
    }
}

fn prune(store: &Approvals, older_than: Option<&str>, anima: Option<String>, dry_run: bool, json: bool) -> i32 {
    let older_than_s = match older_than.map(|o| (o, crate::cli::task::parse_age(o))) {
        None => None,
        Some((_, Some(age))) => Some(age.as_secs_f64()),
        Some((o, None)) => {
            return fail(
                &CallError::new(
                    awt_core::error::ErrorCode::Usage,
                    format!("--older-than {o:?} is not a duration"),
                )
                .hint("e.g. 7d, 12h, 30m, 90s"),
            )
        }
    };
    let opts = PruneOptions {
        older_than_s,
        anima,
        dry_run,
    };
    let report = match store.prune(&opts) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if json {
        say!(
            "{}",
            serde_json::json!({
                "dry_run": dry_run,
                "removed": report.removed.iter().map(Record::public).collect::<Vec<_>>(),
                "strays": report.strays,
                "unverified": report.unverified,
                "kept": {"pending": report.kept_pending, "approved": report.kept_approved, "decided": report.kept_final},
            })
        );
        return 0;
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    if report.removed.is_empty() {
        say!("no decided requests to remove");
    } else {
        say!("{verb} {} decided request(s):", report.removed.len());
        for r in &report.removed {
            say!("  {}", term::for_stdout(&line(r)));
        }
    }
    if !report.strays.is_empty() {
        say!(
            "{verb} {} stray file(s) of no request: {}",
            report.strays.len(),
            report.strays.join(", ")
        );
    }
    say!(
        "kept: {} pending, {} approved not yet run, {} decided{}",
        report.kept_pending,
        report.kept_approved,
        report.kept_final,
        if opts.older_than_s.is_some() || opts.anima.is_some() {
            " (not selected)"
        } else {
            ""
        }
    );
    if !report.unverified.is_empty() {
        tell!(
            "warning: {} file(s) named like a request do not verify (not the runner's; left in place): {}",
            report.unverified.len(),
            report.unverified.join(", ")
        );
    }
    0
}

/// An approval is a human's: refused from inside a tool call, and from the environment of the anima that asked (an
/// agent's shell has its `ANIMAWORKS_ANIMA_DIR`). A speed bump, not a wall: an unconfined shell of the same OS user
/// could unset the variable, as it could edit permissions.json (docs/policy.md#approvals).
fn not_the_asker(r: &Record) -> Result<(), CallError> {
    use awt_core::env_vars::{ANIMA_DIR, CALL_ID};
    let refuse = |why: String| {
        Err(CallError::new(awt_core::error::ErrorCode::PermissionDenied, why)
            .hint("a human approves from their own shell, outside the anima's environment"))
    };
    if CALL_ID.get_os().is_some() {
        return refuse(format!(
            "approval request {} cannot be approved from inside a tool call (${} is set)",
            r.id, CALL_ID.name
        ));
    }
    let same = |a: &std::path::Path, b: &std::path::Path| {
        a == b
            || std::fs::canonicalize(a)
                .ok()
                .zip(std::fs::canonicalize(b).ok())
                .is_some_and(|(x, y)| x == y)
    };
    if let (Some(env), Some(asker)) = (ANIMA_DIR.get_os(), r.anima_dir.as_deref()) {
        if same(std::path::Path::new(&env), asker) {
            return refuse(format!(
                "approval request {} was asked by the anima whose environment this is (${} names {}): an anima does \
                 not approve its own request",
                r.id,
                ANIMA_DIR.name,
                asker.display()
            ));
        }
    }
    Ok(())
}

/// How a call made from this command line is approved: a prompt when a person is at a terminal (stdin and stderr
/// are terminals), else a filed request.
pub fn from_terminal() -> Approval {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Approval::Pending;
    }
    Approval::Prompt(std::sync::Arc::new(prompt))
}

fn prompt(req: &Request) -> bool {
    use std::io::{BufRead, Read, Write};
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "{} needs your approval to run once:\n{}",
        req.keys.join(", "),
        term::for_stderr(&req.summary())
    );
    let _ = write!(err, "Run it? [y/N] ");
    let _ = err.flush();
    drop(err);
    let mut answer = String::new();
    // At most one short line: a terminal sends a line at a time.
    let read = std::io::stdin().lock().take(256).read_line(&mut answer);
    read.is_ok() && matches!(answer.trim(), "y" | "Y" | "yes" | "Yes" | "YES")
}

/// Request ids with their state and call, for completion (pending first, at most 100).
pub fn completion_ids(data: &std::path::Path) -> Vec<(String, String)> {
    let Some(store) = Approvals::existing(data) else {
        return Vec::new();
    };
    let mut list = store.list().unwrap_or_default();
    list.sort_by_key(|r| r.status != State::Pending);
    list.truncate(100);
    list.into_iter()
        .map(|r| {
            let about = format!("{} {}:{}", r.status.as_str(), r.binding.tool, r.binding.action);
            (r.id, about)
        })
        .collect()
}

/// The pending requests of the data dir, for `doctor`: as JSON, and as lines.
pub fn pending_report(data: &std::path::Path) -> (Vec<Value>, Vec<String>) {
    let list = match Approvals::existing(data).map(|s| s.list()) {
        Some(Ok(l)) => l,
        Some(Err(e)) => {
            // Never "no pending requests" for a folder that could not be read.
            let msg = format!("approvals: {}", e.message);
            return (vec![serde_json::json!({"error": msg})], vec![msg]);
        }
        None => Vec::new(),
    };
    let list: Vec<Record> = list.into_iter().filter(|r| r.status == State::Pending).collect();
    (
        list.iter().map(Record::public).collect(),
        list.iter().map(line).collect(),
    )
}
