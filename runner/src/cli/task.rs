//! `submit` and `task …`: background tasks (see [`crate::tasks`]).

use crate::call::Runner;
use crate::cli::render;
use crate::error::{CallError, ErrorCode};
use crate::tasks::files::FileStore;
use crate::tasks::{self, now_s, queue, submit as checks, ProcessId, Status, Task, TaskStore};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// `submit <tool> <action> [--param …|--json …]` or `submit <tool> <argv…>` for cli_main modules.
#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// Refuse (instead of warning) when the action is not background-eligible.
    #[arg(long)]
    pub strict: bool,
    pub tool: String,
    /// The action and its flags (as for a call, plus --timeout and --max-output), or a legacy module's argv.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

#[derive(Args, Debug)]
pub struct TaskArgs {
    #[command(subcommand)]
    pub cmd: TaskCmd,
}

#[derive(Subcommand, Debug)]
pub enum TaskCmd {
    /// List tasks, oldest first.
    List {
        /// Only tasks in these states (repeatable, or comma-separated): pending, running, completed, failed,
        /// timeout, cancelled, lost.
        #[arg(long, value_delimiter = ',')]
        status: Vec<String>,
        /// Every task as JSON (an array of task records).
        #[arg(long)]
        json: bool,
    },
    /// Print one task's record as JSON.
    Show { id: String },
    /// Wait for a task to end; progress goes to stderr; exits with the task's outcome (the codes of a call).
    Wait {
        id: String,
        /// Give up waiting after this many seconds (exit 124, the task keeps running).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
    },
    /// Cancel a pending or running task: its tool's whole process group is ended.
    Cancel { id: String },
    /// Delete finished tasks older than a duration (e.g. 7d, 12h, 30m, 90s).
    Prune {
        #[arg(long, value_name = "DURATION")]
        older_than: String,
    },
    /// Take over AnimaWorks' own queued descriptors (state/background_tasks/pending/*.json) and run them.
    RunPending,
    /// The detached worker `submit` starts (internal).
    #[command(hide = true)]
    Worker,
}

/// `jobs wait --timeout` ran out (the task goes on): an exit code of its own, apart from a call's codes (a task
/// that itself timed out exits 7), as timeout(1) does.
pub const WAIT_TIMED_OUT: i32 = 124;

fn fail(e: &CallError) -> i32 {
    render::print_error(e, !std::io::stdout().is_terminal());
    e.code.exit_code()
}

fn io_err(what: &str, e: std::io::Error) -> CallError {
    CallError::new(ErrorCode::Internal, format!("{what}: {e}"))
        .hint("check that the anima dir's state folder is readable and writable")
}

pub async fn submit(runner: &Runner, a: SubmitArgs) -> i32 {
    let checked = match checks::submit(runner, &a.tool, &a.rest, a.strict).await {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    for w in &checked.warnings {
        render::warn(w);
    }
    // What AnimaWorks' submit prints, pretty as it prints it.
    let receipt = checked
        .task
        .submitted(crate::locale::Locale::of_data_dir(&runner.dirs.data));
    say!("{}", serde_json::to_string_pretty(&receipt).unwrap_or_default());
    if std::io::stderr().is_terminal() {
        let id = &checked.task.task_id;
        tell!(
            "{}",
            render::paint(
                "2",
                &format!(
                    "follow it: `animaworks-tool jobs wait {id}` (progress, then the result) · `jobs show {id}` · `jobs cancel {id}`"
                )
            )
        );
    }
    0
}

pub async fn task(runner: &Runner, a: TaskArgs) -> i32 {
    if matches!(a.cmd, TaskCmd::Worker) {
        return tasks::worker::run(runner).await;
    }
    let store = match checks::store_of(runner) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let limit = match runner.settings() {
        Ok(s) => s.max_running_tasks,
        Err(e) => return fail(&e),
    };
    if let Err(e) = queue::kick_if_needed(&runner.dirs, &store, limit) {
        return fail(&io_err(
            &format!("cannot look at the tasks in {}", store.dir.display()),
            e,
        ));
    }
    let out = match a.cmd {
        TaskCmd::List { status, json } => list(&store, &status, json),
        TaskCmd::Show { id } => full_id(&store, &id).and_then(|id| get(&store, &id)).map(|t| {
            say!("{}", serde_json::to_string_pretty(&t).unwrap_or_default());
            0
        }),
        TaskCmd::Wait { id, timeout } => {
            match timeout.map(|s| crate::call::timeout_from_secs(s, "--timeout")).transpose() {
                Ok(limit) => match full_id(&store, &id) {
                    Ok(id) => wait(&store, &id, limit).await,
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        }
        TaskCmd::Cancel { id } => match full_id(&store, &id) {
            Ok(id) => cancel(&store, &id).await,
            Err(e) => Err(e),
        },
        TaskCmd::Prune { older_than } => prune(&store, &older_than),
        TaskCmd::RunPending => run_pending(runner, &store).await,
        TaskCmd::Worker => unreachable!(),
    };
    out.unwrap_or_else(|e| fail(&e))
}

/// The full id of a task given by its id or a unique prefix of it (as git takes commits).
fn full_id(store: &FileStore, id: &str) -> Result<String, CallError> {
    if matches!(store.get(id), Ok(Some(_))) {
        return Ok(id.to_owned());
    }
    let ids: Vec<String> = std::fs::read_dir(&store.dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_owned))
        .filter(|i| tasks::valid_task_id(i))
        .collect();
    let matching: Vec<&String> = ids.iter().filter(|i| !id.is_empty() && i.starts_with(id)).collect();
    match matching.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let near = crate::suggest::close(id, ids.iter().map(String::as_str));
            let mean = crate::suggest::did_you_mean(&near)
                .map(|d| format!("{d} "))
                .unwrap_or_default();
            Err(
                CallError::new(ErrorCode::Usage, format!("no task {id:?} in {}", store.dir.display())).hint(format!(
                    "{mean}`animaworks-tool jobs list` shows the tasks of this anima"
                )),
            )
        }
        many => Err(CallError::new(
            ErrorCode::Usage,
            format!(
                "task id prefix {id:?} is ambiguous: {}{}",
                many.iter().take(5).map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
                if many.len() > 5 { ", …" } else { "" }
            ),
        )
        .hint("give more of the id")),
    }
}

fn get(store: &FileStore, id: &str) -> Result<Task, CallError> {
    match store.get(id) {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Err(
            CallError::new(ErrorCode::Usage, format!("no task {id:?} in {}", store.dir.display()))
                .hint("`animaworks-tool jobs list` shows the tasks of this anima"),
        ),
        Err(e) => Err(io_err(&format!("cannot read task {id}"), e)),
    }
}

fn list(store: &FileStore, status: &[String], as_json: bool) -> Result<i32, CallError> {
    let mut want = Vec::new();
    for s in status {
        want.push(Status::parse(s.trim()).ok_or_else(|| {
            CallError::new(ErrorCode::Usage, format!("--status {s:?} is not a task state"))
                .hint("use pending, running, completed, failed, timeout, cancelled or lost")
        })?);
    }
    let all = store.list().map_err(|e| io_err("cannot list the tasks", e))?;
    let shown: Vec<Task> = all
        .into_iter()
        .filter(|t| want.is_empty() || want.contains(&t.status))
        .collect();
    if as_json {
        say!("{}", serde_json::to_string(&shown).unwrap_or_default());
        return Ok(0);
    }
    if shown.is_empty() {
        if want.is_empty() {
            say!("no tasks");
        } else {
            let names: Vec<&str> = want.iter().map(|s| s.as_str()).collect();
            say!("no tasks that are {}", names.join(" or "));
        }
        return Ok(0);
    }
    let now = now_s();
    say!(
        "{:<12}  {:<9}  {:<30}  {:>10}  PROGRESS",
        "TASK",
        "STATUS",
        "TOOL",
        "CREATED"
    );
    for t in &shown {
        let progress = t
            .progress
            .as_ref()
            .filter(|_| t.status == Status::Running)
            .map(|p| match p.total {
                Some(total) => format!("  {}/{}", p.progress, total),
                None => format!("  {}", p.progress),
            })
            .unwrap_or_default();
        say!(
            "{:<12}  {:<9}  {:<30}  {:>10}{progress}",
            t.task_id,
            t.status.as_str(),
            super::term::for_stdout(&t.tool_name),
            format!("{}s ago", (now - t.created_at).max(0.0) as u64)
        );
    }
    Ok(0)
}

/// Follow a task to its end with the display of a foreground call (its progress events come from the task file).
async fn wait(store: &FileStore, id: &str, limit: Option<Duration>) -> Result<i32, CallError> {
    let started = Instant::now();
    let mut shown: Option<tasks::Progress> = None;
    let mut pause = Duration::from_millis(20);
    let mut display = render::Human::new();
    loop {
        let mut t = get(store, id)?;
        if t.status == Status::Running && !ProcessId::of_task(&t).is_some_and(|p| p.alive()) {
            let _ = store.census();
            t = get(store, id)?;
        }
        if t.progress.is_some() && t.progress != shown {
            if let Some(p) = &t.progress {
                let event = tool_sdk::protocol::Event::Progress {
                    progress: p.progress,
                    total: p.total,
                    message: p.message.clone(),
                    call_id: None,
                };
                crate::stream::Observer::event(&mut display, &event, b"");
            }
            shown = t.progress.clone();
        }
        if t.status.is_final() {
            display.finish();
            return Ok(outcome(&t));
        }
        if limit.is_some_and(|l| started.elapsed() >= l) {
            display.finish();
            let waited = started.elapsed().as_secs_f64();
            let hint = format!("wait again with `animaworks-tool jobs wait {id}`; the task keeps going");
            let message = format!("task {id} is still {} after waiting {waited:.1} s", t.status.as_str());
            let out_tty = std::io::stdout().is_terminal();
            if !out_tty || !std::io::stderr().is_terminal() {
                say!(
                    "{}",
                    json!({"error": {"code": "wait_timeout", "message": message, "hint": hint, "task_id": id, "status": t.status.as_str()}})
                );
            }
            if !out_tty || std::io::stderr().is_terminal() {
                tell!("animaworks-tool: {} {message}", render::paint("33", "wait_timeout:"));
                tell!("  {}", render::paint("2", &format!("hint: {hint}")));
            }
            return Ok(WAIT_TIMED_OUT);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Print a finished task as a call's outcome and return its exit code.
fn outcome(t: &Task) -> i32 {
    match t.status {
        Status::Completed => {
            let v = t
                .result_value
                .clone()
                .unwrap_or_else(|| t.result.clone().map(Value::String).unwrap_or(Value::Null));
            render::print_result(&v);
            0
        }
        _ => {
            let detail = t
                .error_detail
                .clone()
                .unwrap_or_else(|| json!({"code": t.error_code, "message": t.error}));
            let msg = detail
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the task did not complete");
            let terminal = std::io::stdout().is_terminal();
            if !terminal || !std::io::stderr().is_terminal() {
                let mut detail = detail.clone();
                if let Some(o) = detail.as_object_mut() {
                    o.insert("task_id".into(), t.task_id.clone().into());
                    o.insert("status".into(), t.status.as_str().into());
                }
                say!("{}", json!({"error": detail}));
            }
            if !terminal || std::io::stderr().is_terminal() {
                let head = format!("task {} {}:", t.task_id, t.status.as_str());
                tell!("animaworks-tool: {} {msg}", render::paint("31", &head));
                if let Some(h) = detail.get("hint").and_then(Value::as_str) {
                    tell!("  {}", render::paint("2", &format!("hint: {h}")));
                }
            }
            t.exit_code()
        }
    }
}

async fn cancel(store: &FileStore, id: &str) -> Result<i32, CallError> {
    let t = get(store, id)?;
    let pending_cancelled = store
        .update(id, &mut |t| {
            if t.status != Status::Pending {
                return false;
            }
            t.finish(Status::Cancelled);
            t.error_code = Some("cancelled".into());
            t.error = Some("cancelled: cancelled before it started".into());
            t.error_detail = Some(json!({"code": "cancelled", "message": "cancelled before it started", "tool": t.tool, "action": t.action}));
            true
        })
        .map_err(|e| io_err("cannot update the task", e))?;
    if let Some(t) = pending_cancelled.filter(|t| t.status == Status::Cancelled && t.pid.is_none()) {
        store.release(id);
        let _ = store.notify(&t);
        say!("{}", t.receipt());
        return Ok(0);
    }
    let t = get(store, id).unwrap_or(t);
    if t.status.is_final() {
        tell!("animaworks-tool: task {id} has already ended ({})", t.status.as_str());
        say!("{}", t.receipt());
        return Ok(0);
    }
    let Some(_worker) = ProcessId::of_task(&t).filter(ProcessId::alive) else {
        let _ = store.census();
        let t = get(store, id)?;
        tell!(
            "animaworks-tool: task {id}'s worker is gone; the task is {}",
            t.status.as_str()
        );
        say!("{}", t.receipt());
        return Ok(0);
    };
    // The worker polls for this request and ends the tool's group: SIGTERM, grace, SIGKILL, every member reaped.
    store
        .request_cancel(id)
        .map_err(|e| io_err("cannot write the cancel request", e))?;
    let patience = crate::reap::GRACE + Duration::from_secs(3);
    let start = Instant::now();
    loop {
        let t = get(store, id)?;
        if t.status.is_final() {
            say!("{}", t.receipt());
            return Ok(0);
        }
        if start.elapsed() >= patience {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    // The worker did not answer: kill it, only when it is provably this task's worker (a task file may be
    // forged to name any process); its guardian then kills the tool's group.
    let how = match tasks::identity::proves_worker(&t) {
        Ok(pid) => {
            // SAFETY: plain kill(2) of a process just proven to be this task's worker.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            "its worker did not stop in time and was killed".to_owned()
        }
        Err(why) => {
            eprintln!("animaworks-tool: task {id}: the worker was not signalled: {why}");
            format!("its worker did not answer and was not signalled ({why})")
        }
    };
    let t = store
        .update(id, &mut |t| {
            if t.status != Status::Running {
                return false;
            }
            t.finish(Status::Cancelled);
            t.error_code = Some("cancelled".into());
            t.error = Some(format!("cancelled: {how}"));
            t.error_detail = Some(json!({"code": "cancelled", "message": format!("cancelled; {how}"), "tool": t.tool, "action": t.action}));
            true
        })
        .map_err(|e| io_err("cannot update the task", e))?
        .unwrap_or(t);
    store.release(id);
    let _ = store.notify(&t);
    say!("{}", t.receipt());
    Ok(0)
}

/// `7d`, `12h`, `30m`, `90s` or plain seconds.
pub fn parse_age(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => (&s[..i], c),
        _ => (s, 's'),
    };
    let n: f64 = num.parse().ok().filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let secs = match unit {
        's' => n,
        'm' => n * 60.0,
        'h' => n * 3600.0,
        'd' => n * 86400.0,
        'w' => n * 7.0 * 86400.0,
        _ => return None,
    };
    // Why try_from: `1e300d` is finite but no duration; it is not an age either.
    Duration::try_from_secs_f64(secs).ok()
}

fn prune(store: &FileStore, older_than: &str) -> Result<i32, CallError> {
    let age = parse_age(older_than).ok_or_else(|| {
        CallError::new(
            ErrorCode::Usage,
            format!("--older-than {older_than:?} is not a duration"),
        )
        .hint("e.g. 7d, 12h, 30m, 90s")
    })?;
    let cutoff = now_s() - age.as_secs_f64();
    let mut pruned = Vec::new();
    for t in store.list().map_err(|e| io_err("cannot list the tasks", e))? {
        let ended = t.completed_at.unwrap_or(t.updated_at);
        if t.status.is_final() && ended < cutoff {
            store
                .remove(&t.task_id)
                .map_err(|e| io_err(&format!("cannot delete task {}", t.task_id), e))?;
            pruned.push(t.task_id);
        }
    }
    say!("{}", json!({"pruned": pruned}));
    Ok(0)
}

async fn run_pending(runner: &Runner, store: &FileStore) -> Result<i32, CallError> {
    let report = tasks::pending::take_over(runner, store)
        .await
        .map_err(|e| io_err("cannot take over AnimaWorks' pending descriptors", e))?;
    for (file, reason, _) in &report.invalid {
        tell!("animaworks-tool: set aside {}: {reason}", file.display());
    }
    if !report.queued.is_empty() {
        if let Err(e) = queue::spawn_worker(&runner.dirs, store) {
            tell!("animaworks-tool: warning: cannot start a worker: {e}");
        }
    }
    let invalid: Vec<Value> = report
        .invalid
        .iter()
        .map(|(f, r, e)| json!({"file": f.to_string_lossy(), "reason": r, "error": e}))
        .collect();
    say!("{}", json!({"queued": report.queued, "invalid": invalid}));
    Ok(0)
}
