//! `submit` and `task …`: background tasks (see [`awt_tasks`]).

use crate::cli::render;
use awt_core::call::Runner;
use awt_core::error::{CallError, ErrorCode};
use awt_tasks::files::FileStore;
use awt_tasks::{self as tasks, now_s, submit as checks, Status, Task, TaskStore};
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
    /// Print one task's record as JSON (its result's image, audio and resource blocks described, not as base64).
    Show {
        id: String,
        /// Write each image, audio and resource block of the task's result to a new file in DIR, named in the
        /// record; without it such a block is only described ("[image/png, 12 KB]").
        #[arg(long, value_name = "DIR")]
        save_content: Option<std::path::PathBuf>,
    },
    /// Wait for a task to end; progress goes to stderr; exits with the task's outcome (the codes of a call).
    Wait {
        id: String,
        /// Give up waiting after this many seconds (exit 124, the task keeps running).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<f64>,
        /// Write each image, audio and resource block of the result to a new file in DIR, as a call's
        /// --save-content does; without it such a block is only described.
        #[arg(long, value_name = "DIR")]
        save_content: Option<std::path::PathBuf>,
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
    /// Create or upgrade the task database's schema (the Postgres backend; workers also do it when they start).
    Migrate,
    /// The detached worker `submit` starts (internal).
    #[command(hide = true)]
    Worker,
    /// The lease watchdog of `animaworks-tool worker` (internal).
    #[command(hide = true)]
    Watchdog,
}

/// `animaworks-tool worker`: run tasks of the Postgres store on this machine until SIGTERM.
#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// Tasks run at once by this worker (every anima together).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub concurrency: usize,
    /// Only this anima's tasks (repeatable, or comma-separated). Default: every anima.
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub anima: Vec<String>,
    /// Where the anima dirs are. Default: `<data dir>/animas`.
    #[arg(long, value_name = "DIR")]
    pub animas_dir: Option<std::path::PathBuf>,
}

pub async fn worker(runner: &Runner, a: WorkerArgs) -> i32 {
    tasks::pg::worker::run(
        runner,
        tasks::pg::worker::WorkerOptions {
            concurrency: a.concurrency,
            animas: a.anima,
            animas_dir: a.animas_dir.map(|p| awt_core::dirs::expand_home(&p)),
        },
    )
    .await
}

async fn migrate(runner: &Runner) -> i32 {
    let cfg = match tasks::config::load(runner) {
        Ok(c) => c,
        Err(e) => return fail(&CallError::new(ErrorCode::Usage, e.to_string())),
    };
    let tasks::config::Backend::Postgres { url } = cfg.backend else {
        return fail(
            &CallError::new(
                ErrorCode::Usage,
                "the tasks are kept in files here; there is no database to migrate",
            )
            .hint("set \"tasks\": {\"backend\": \"postgres\", \"url\": …} in <data dir>/animaworks-tool.json"),
        );
    };
    match tasks::pg::migrate_now(&url).await {
        Ok(applied) => {
            say!("{}", json!({"applied": applied, "version": tasks::pg::schema::VERSION}));
            0
        }
        Err(e) => fail(&e.to_call_error()),
    }
}

/// `jobs wait --timeout` ran out (the task goes on): an exit code of its own, apart from a call's codes (a task
/// that itself timed out exits 7), as timeout(1) does.
pub const WAIT_TIMED_OUT: i32 = 124;

fn fail(e: &CallError) -> i32 {
    render::print_error(e, !std::io::stdout().is_terminal());
    e.code.exit_code()
}

fn io_err(what: &str, e: std::io::Error) -> CallError {
    store_err(what, e)
}

fn store_err(what: &str, e: std::io::Error) -> CallError {
    if let Some(pg) = tasks::pg::StoreError::of(&e) {
        let mut c = pg.to_call_error();
        c.message = format!("{what}: {}", c.message);
        return c;
    }
    CallError::new(ErrorCode::Internal, format!("{what}: {e}"))
        .hint("check that the anima dir's state folder is readable and writable")
}

pub async fn submit(runner: &Runner, a: SubmitArgs) -> i32 {
    let checked = match checks::submit(runner, &a.tool, &a.rest, a.strict).await {
        Ok(c) => c,
        Err(e) => return super::legacy_refusal(&e, runner, &a.tool, &a.rest).unwrap_or_else(|| fail(&e)),
    };
    for line in &checked.said {
        tell!("{line}");
    }
    for w in &checked.warnings {
        render::warn(w);
    }
    // What AnimaWorks' submit prints, pretty as it prints it.
    let receipt = checked
        .task
        .submitted(awt_core::locale::Locale::of_data_dir(&runner.dirs.data));
    say!("{}", serde_json::to_string_pretty(&receipt).unwrap_or_default());
    if std::io::stderr().is_terminal() {
        let id = &checked.task.task_id;
        tell!(
            "{}",
            render::paint(
                super::term::DIM,
                &format!(
                    "follow it: `animaworks-tool jobs wait {id}` (progress, then the result) · `jobs show {id}` · `jobs cancel {id}`"
                )
            )
        );
    }
    0
}

pub async fn task(runner: &Runner, a: TaskArgs) -> i32 {
    match a.cmd {
        TaskCmd::Worker => return tasks::detached::run(runner).await,
        TaskCmd::Watchdog => return tasks::pg::worker::watchdog_main(),
        TaskCmd::Migrate => return migrate(runner).await,
        _ => {}
    }
    let store = match tasks::backend::open(runner) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let store = store.as_ref();
    if let Err(e) = store.kick(&runner.dirs) {
        return fail(&store_err(
            &format!("cannot look at the tasks in {}", store.location()),
            e,
        ));
    }
    let out = match a.cmd {
        TaskCmd::List { status, json } => list(store, &status, json),
        TaskCmd::Show { id, save_content } => full_id(store, &id).and_then(|id| get(store, &id)).map(|t| {
            let shown = awt_llm::background::shown(&t, save_content.as_deref());
            say!("{}", serde_json::to_string_pretty(&shown).unwrap_or_default());
            0
        }),
        TaskCmd::Wait {
            id,
            timeout,
            save_content,
        } => {
            match timeout
                .map(|s| awt_core::call::timeout_from_secs(s, "--timeout"))
                .transpose()
            {
                Ok(limit) => match full_id(store, &id) {
                    Ok(id) => wait(runner, store, &id, limit, save_content.as_deref()).await,
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        }
        TaskCmd::Cancel { id } => match full_id(store, &id) {
            Ok(id) => cancel(store, &id).await,
            Err(e) => Err(e),
        },
        TaskCmd::Prune { older_than } => prune(store, &older_than),
        TaskCmd::RunPending => run_pending(runner, store).await,
        TaskCmd::Worker | TaskCmd::Watchdog | TaskCmd::Migrate => unreachable!(),
    };
    out.unwrap_or_else(|e| fail(&e))
}

/// The full id of a task given by its id or a unique prefix of it (as git takes commits).
fn full_id(store: &dyn TaskStore, id: &str) -> Result<String, CallError> {
    if matches!(store.get(id), Ok(Some(_))) {
        return Ok(id.to_owned());
    }
    let mut ids: Vec<String> = store
        .list()
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.task_id)
        .collect();
    ids.sort();
    ids.dedup();
    let matching: Vec<&String> = ids.iter().filter(|i| !id.is_empty() && i.starts_with(id)).collect();
    match matching.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let near = awt_core::suggest::close(id, ids.iter().map(String::as_str));
            let mean = awt_core::suggest::did_you_mean(&near)
                .map(|d| format!("{d} "))
                .unwrap_or_default();
            Err(
                CallError::new(ErrorCode::Usage, format!("no task {id:?} in {}", store.location())).hint(format!(
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

fn get(store: &dyn TaskStore, id: &str) -> Result<Task, CallError> {
    match store.get(id) {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Err(
            CallError::new(ErrorCode::Usage, format!("no task {id:?} in {}", store.location()))
                .hint("`animaworks-tool jobs list` shows the tasks of this anima"),
        ),
        Err(e) => Err(io_err(&format!("cannot read task {id}"), e)),
    }
}

fn list(store: &dyn TaskStore, status: &[String], as_json: bool) -> Result<i32, CallError> {
    let mut want = Vec::new();
    for s in status {
        want.push(Status::parse(s.trim()).ok_or_else(|| {
            CallError::new(ErrorCode::Usage, format!("--status {s:?} is not a task state"))
                .hint("use pending, running, completed, failed, timeout, cancelled or lost")
        })?);
    }
    // Only unfinished tasks asked for: only their records are read (the file store's index).
    let all = if !want.is_empty() && want.iter().all(|s| !s.is_final()) {
        store.list_active()
    } else {
        store.list()
    }
    .map_err(|e| io_err("cannot list the tasks", e))?;
    let shown: Vec<Task> = all
        .into_iter()
        .filter(|t| want.is_empty() || want.contains(&t.status))
        .collect();
    if as_json {
        let records: Vec<Value> = shown.iter().map(|t| awt_llm::background::shown(t, None)).collect();
        say!("{}", serde_json::to_string(&records).unwrap_or_default());
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
async fn wait(
    runner: &Runner,
    store: &dyn TaskStore,
    id: &str,
    limit: Option<Duration>,
    save: Option<&std::path::Path>,
) -> Result<i32, CallError> {
    let started = Instant::now();
    let mut kicked = Instant::now();
    let mut shown: Option<tasks::Progress> = None;
    let mut pause = Duration::from_millis(20);
    let mut display = render::Human::new();
    loop {
        let mut t = get(store, id)?;
        if t.status == Status::Running && !store.worker_alive(&t) {
            let _ = store.census();
            t = get(store, id)?;
        }
        if t.progress.is_some() && t.progress != shown {
            if let Some(p) = &t.progress {
                let event = awt_protocol::Event::Progress {
                    progress: p.progress,
                    total: p.total,
                    message: p.message.clone(),
                    call_id: None,
                };
                awt_core::stream::Observer::event(&mut display, &event, b"");
            }
            shown = t.progress.clone();
        }
        if t.status.is_final() {
            display.finish();
            return Ok(outcome(&t, save));
        }
        // A task whose submitter's worker never started waits for a kick, which holds back for a grace period.
        if t.status == Status::Pending && kicked.elapsed() >= Duration::from_secs(1) {
            kicked = Instant::now();
            let _ = store.kick(&runner.dirs);
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
                tell!(
                    "animaworks-tool: {} {message}",
                    render::paint(super::term::YELLOW, "wait_timeout:")
                );
                tell!("  {}", render::paint(super::term::DIM, &format!("hint: {hint}")));
            }
            return Ok(WAIT_TIMED_OUT);
        }
        // The file store sleeps; Postgres wakes on the task's notification (at most a second, in case one is
        // missed).
        let left = limit
            .map(|l| l.saturating_sub(started.elapsed()))
            .unwrap_or(Duration::MAX);
        if store.is_local() {
            store.wait_change(id, pause.min(left));
            pause = (pause * 2).min(Duration::from_millis(200));
        } else {
            store.wait_change(id, Duration::from_secs(1).min(left));
        }
    }
}

/// Print a finished task as a call's outcome (its content blocks as a call shows them) and return its exit code.
fn outcome(t: &Task, save: Option<&std::path::Path>) -> i32 {
    match t.status {
        Status::Completed => {
            let v = t
                .result_value
                .clone()
                .unwrap_or_else(|| t.result.clone().map(Value::String).unwrap_or(Value::Null));
            match &t.content {
                Some(blocks) => super::content::print(&v, &tasks::content::read_back(blocks), save),
                None => render::print_result(&v),
            }
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
                tell!("animaworks-tool: {} {msg}", render::paint(super::term::RED, &head));
                if let Some(h) = detail.get("hint").and_then(Value::as_str) {
                    tell!("  {}", render::paint(super::term::DIM, &format!("hint: {h}")));
                }
            }
            t.exit_code()
        }
    }
}

async fn cancel(store: &dyn TaskStore, id: &str) -> Result<i32, CallError> {
    get(store, id)?;
    let c = tasks::cancel::cancel(store, id).await?;
    if let Some(r) = c.remark {
        tell!("animaworks-tool: {r}");
    }
    say!("{}", c.task.receipt());
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

fn prune(store: &dyn TaskStore, older_than: &str) -> Result<i32, CallError> {
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
        if t.status.is_final() && (ended < cutoff || t.ttl_expired(now_s())) {
            store
                .remove(&t.task_id)
                .map_err(|e| io_err(&format!("cannot delete task {}", t.task_id), e))?;
            pruned.push(t.task_id);
        }
    }
    say!("{}", json!({"pruned": pruned}));
    Ok(0)
}

async fn run_pending(runner: &Runner, store: &dyn TaskStore) -> Result<i32, CallError> {
    let anima = runner
        .dirs
        .anima
        .as_ref()
        .ok_or_else(|| CallError::new(ErrorCode::Usage, "run-pending needs an anima dir"))?;
    let pending_dir = FileStore::for_anima(anima).dir.join("pending");
    // Never through a link a tool could have left (another anima's descriptors would become this anima's tasks).
    awt_core::beneath::check(anima, pending_dir.strip_prefix(anima).unwrap_or(&pending_dir))
        .map_err(|e| io_err("cannot take over AnimaWorks' pending descriptors", e))?;
    let report = tasks::pending::take_over(runner, &pending_dir, store)
        .await
        .map_err(|e| io_err("cannot take over AnimaWorks' pending descriptors", e))?;
    for (file, reason, _) in &report.invalid {
        tell!("animaworks-tool: set aside {}: {reason}", file.display());
    }
    if !report.queued.is_empty() {
        if let Err(e) = store.start_worker(&runner.dirs) {
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
