//! The detached worker (`animaworks-tool jobs worker`, started by `submit`): claims the oldest pending task while
//! a slot is free, runs it, records the outcome and claims the next in one look, and waits [`LINGER`] for a new
//! task before it exits (staying in the store's index meanwhile, so that a submit starts no other worker). One worker runs one task at
//! a time, so the task's `pid` is its worker: if the worker dies, the guardian kills the tool's group and the task
//! is found `lost`.

use super::files::{FileStore, LINGER};
use super::{now_s, Kind, ProcessId, Progress, Status, Task, TaskStore};
use awt_core::call::{CallOptions, Runner};
use awt_core::error::{CallError, Detail, ErrorCode};
use awt_core::stream::{Cancel, Observer};
use awt_protocol::Event;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often progress is written at most, and how often a cancel request is looked for.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(250);
pub const CANCEL_POLL: Duration = Duration::from_millis(50);

/// Run tasks until none is pending or no slot is free. Returns the exit code.
pub async fn run(runner: &Runner) -> i32 {
    let store = match super::files::store_of(runner) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("animaworks-tool jobs worker: {e}");
            return e.code.exit_code();
        }
    };
    let limit = match runner.settings() {
        Ok(s) => s.max_running_tasks,
        Err(e) => {
            eprintln!("animaworks-tool jobs worker: {e}");
            return e.code.exit_code();
        }
    };
    let key = match super::mac::key(&runner.dirs.data) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("animaworks-tool jobs worker: cannot read the task key: {e}");
            return ErrorCode::Internal.exit_code();
        }
    };
    let me = ProcessId::of_self();
    let mut stop = stop_on_sigterm();
    let mut next: Option<Task> = None;
    loop {
        if *stop.borrow() {
            store.leave(&me);
            return 0;
        }
        let task = match next.take() {
            Some(t) => t,
            None => match next_task(&store, &me, limit, &mut stop).await {
                Ok(Some(t)) => t,
                Ok(None) => return 0,
                Err(e) => {
                    store.leave(&me);
                    eprintln!(
                        "animaworks-tool jobs worker: cannot claim a task in {}: {e}",
                        store.dir.display()
                    );
                    return ErrorCode::Internal.exit_code();
                }
            },
        };
        if let Some(why) = unsigned(&key, &store, &task, runner.dirs.anima_name().as_deref()) {
            eprintln!(
                "animaworks-tool jobs worker: refused task {} (moved aside): {why}",
                task.task_id
            );
            if let Err(e) = store.move_aside(&task.task_id) {
                eprintln!(
                    "animaworks-tool jobs worker: cannot move task {} aside: {e}",
                    task.task_id
                );
                store.leave(&me);
                return ErrorCode::Internal.exit_code();
            }
            super::mac::audit_refused(runner.dirs.anima.as_deref(), &task, &why);
            continue;
        }
        let id = task.task_id.clone();
        let done = run_one(runner, &store, task, stop.clone()).await;
        // The outcome and the next claim in one look (a worker asked to stop claims nothing: no slot is free).
        let room = if *stop.borrow() { 0 } else { limit };
        let mut rec = |t: &mut Task| {
            if t.status != Status::Running || t.pid != Some(me.pid) {
                return false;
            }
            if done.last_progress.is_some() {
                t.progress = done.last_progress.clone();
            }
            record(t, &done.outcome, done.stopped);
            true
        };
        match store.finish_and_claim(&id, &mut rec, &me, room) {
            // The look that ended the task wrote its notification.
            Ok((_, claimed)) => next = claimed,
            Err(e) => eprintln!("animaworks-tool jobs worker: cannot record the outcome of {id}: {e}"),
        }
    }
}

/// The next task to run: claimed at once, or when one comes within [`LINGER`] (the worker stays in the index
/// meanwhile, so a submit counts on it instead of starting another); `None`: the worker has left the index.
async fn next_task(
    store: &FileStore,
    me: &ProcessId,
    limit: usize,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<Option<Task>> {
    if let Some(t) = store.worker_claim(me, limit, false)? {
        return Ok(Some(t));
    }
    let until = Instant::now() + LINGER;
    let mut mark = store.index_mark();
    while Instant::now() < until {
        tokio::select! {
            _ = tokio::time::sleep(LOOK_EVERY) => {}
            _ = stop.wait_for(|v| *v) => break,
        }
        // A submit, a finished task (a free slot) or a cancel rewrites the index; nothing else needs a look.
        let now = store.index_mark();
        if now != mark {
            mark = now;
            if let Some(t) = store.worker_claim(me, limit, false)? {
                return Ok(Some(t));
            }
        }
    }
    if *stop.borrow() {
        store.leave(me);
        return Ok(None);
    }
    store.worker_claim(me, limit, true)
}

/// How often a lingering worker looks whether the index changed (one `stat`).
const LOOK_EVERY: Duration = Duration::from_millis(1);

/// Why a claimed task file must not run: only the runner's submit writes task files, and signs them
/// ([`super::mac`]); a file of the same anima's name written by anything else is refused (the anima of a file
/// store is the worker's own, so the task's anima name must be it too: a task of another anima, signed for it,
/// is never run here, whatever the file system put in this store).
fn unsigned(key: &super::mac::Key, store: &FileStore, t: &Task, anima: Option<&str>) -> Option<String> {
    if anima != Some(t.anima_name.as_str()) {
        return Some(format!(
            "it is a task of the anima {:?}, and this worker runs only those of {:?}",
            t.anima_name,
            anima.unwrap_or("")
        ));
    }
    let private = match store.private_args(&t.task_id) {
        Ok(p) => p,
        Err(e) => return Some(format!("its private arguments cannot be read: {e}")),
    };
    match super::mac::verify(key, t, private.as_ref()) {
        super::mac::Verdict::Valid => None,
        super::mac::Verdict::OtherKey(id) => Some(format!("it was signed with another task key ({id})")),
        super::mac::Verdict::Refused(why) => Some(why),
    }
}

fn stop_on_sigterm() -> tokio::sync::watch::Receiver<bool> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            return;
        };
        term.recv().await;
        let _ = tx.send(true);
        std::future::pending::<()>().await
    });
    rx
}

#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) latest: Option<Progress>,
    pub(crate) dirty: bool,
}

/// The latest progress, when it changed since it was last taken (`None`: nothing new to write).
pub(crate) fn take_new_progress(shared: &Mutex<Shared>) -> Option<Option<Progress>> {
    let mut s = shared.lock().unwrap_or_else(|p| p.into_inner());
    if !s.dirty {
        return None;
    }
    s.dirty = false;
    Some(s.latest.clone())
}

/// The shared progress, and the clock as read for this read of stdout (one read a batch, not one an event).
pub(crate) struct TaskObserver(Arc<Mutex<Shared>>, Option<f64>);

impl TaskObserver {
    pub(crate) fn new(shared: Arc<Mutex<Shared>>) -> TaskObserver {
        TaskObserver(shared, None)
    }
}

impl Observer for TaskObserver {
    fn event(&mut self, event: &Event, _raw: &[u8]) {
        if let Event::Progress {
            progress,
            total,
            message,
            ..
        } = event
        {
            let updated_at = *self.1.get_or_insert_with(now_s);
            let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
            s.latest = Some(Progress {
                progress: *progress,
                total: *total,
                message: message.clone(),
                updated_at,
            });
            s.dirty = true;
        }
    }
    fn flush(&mut self) {
        self.1 = None;
    }
}

/// What running a task gave, for the worker to record.
struct Done {
    outcome: Result<Ran, CallError>,
    stopped: bool,
    last_progress: Option<Progress>,
}

async fn run_one(runner: &Runner, store: &FileStore, task: Task, mut stop: tokio::sync::watch::Receiver<bool>) -> Done {
    let id = task.task_id.clone();
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut obs = TaskObserver::new(shared.clone());
    let (tx, cancel) = Cancel::new();
    let mut stopped = false;
    let outcome = {
        let args = match store.private_args(&task.task_id) {
            Ok(Some(v)) => v,
            _ => task.tool_args.clone(),
        };
        let work = execute(runner, &task, args, &mut obs, cancel);
        let watch = async {
            let mut last_write = Instant::now() - PROGRESS_EVERY;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(CANCEL_POLL) => {}
                    _ = stop.wait_for(|v| *v) => { stopped = true; let _ = tx.send(true); std::future::pending::<()>().await }
                }
                if store.cancel_requested(&id) {
                    let _ = tx.send(true);
                }
                if last_write.elapsed() >= PROGRESS_EVERY {
                    let Some(p) = take_new_progress(&shared) else { continue };
                    last_write = Instant::now();
                    let _ = store.update(&id, &mut |t| {
                        if t.status != Status::Running {
                            return false;
                        }
                        t.progress = p.clone();
                        t.updated_at = now_s();
                        true
                    });
                }
            }
        };
        tokio::select! {
            out = work => out,
            _ = watch => unreachable!("the watch loop never ends"),
        }
    };
    let last_progress = shared.lock().unwrap_or_else(|p| p.into_inner()).latest.clone();
    Done {
        outcome,
        stopped,
        last_progress,
    }
}

/// What a task's call gave: its value, and the content blocks of its result (protocol.md §5.2), if any.
pub type Ran = (Value, Option<Vec<Value>>);

/// Put a call's outcome into the task. Content blocks are kept (bounded, [`super::content::kept`]); a result that
/// is text or null is then kept as the call shows it, the text blocks with a description of every other block,
/// so that AnimaWorks' readers of `result` see the image was there, never its base64.
pub fn record(t: &mut Task, outcome: &Result<Ran, CallError>, stopped: bool) {
    match outcome {
        Ok((v, content)) => {
            t.finish(Status::Completed);
            t.result = Some(match (v, content) {
                (Value::String(_) | Value::Null, Some(c)) => super::content::as_text(c),
                (Value::String(s), None) => s.clone(),
                (other, _) => other.to_string(),
            });
            t.result_value = (!v.is_string()).then(|| v.clone());
            t.content = content
                .clone()
                .map(|c| super::content::kept(c, super::content::MAX_KEPT));
        }
        Err(e) => {
            let status = match e.code {
                ErrorCode::Timeout => Status::Timeout,
                ErrorCode::Cancelled => Status::Cancelled,
                _ => Status::Failed,
            };
            t.finish(status);
            let mut e = e.clone();
            if stopped && e.code == ErrorCode::Cancelled {
                e.message = format!("{} (the worker was asked to stop by SIGTERM)", e.message);
            }
            t.error = Some(error_text(&e));
            t.error_code = Some(e.code.as_str().to_owned());
            t.output_path = e.detail(Detail::Path).and_then(Value::as_str).map(str::to_owned);
            t.error_detail = e.to_json().get("error").cloned();
        }
    }
}

/// A failed task's error as the anima reads it in its notification: the code and message, and for a tool that
/// exited non-zero its own reason, the end of what it wrote on stderr (masked), as AnimaWorks' runner reports
/// `stderr.strip()` ("error: unrecognized arguments: -j"), not only "exited with code 2".
fn error_text(e: &CallError) -> String {
    let mut text = format!("{}: {}", e.code, e.message);
    let tail = e.detail(Detail::StderrTail).and_then(Value::as_str).map(str::trim);
    if let Some(tail) = tail.filter(|t| !t.is_empty() && e.code == ErrorCode::Crashed) {
        text.push_str(": ");
        text.push_str(tail);
    }
    text
}

/// Run one task's call: the one path both stores' workers take. `args` are the unmasked arguments (the file
/// store's private copy, or the masked ones with the worker's own credentials put back, on Postgres).
pub async fn execute(
    runner: &Runner,
    task: &Task,
    args: Value,
    obs: &mut dyn Observer,
    cancel: Cancel,
) -> Result<Ran, CallError> {
    let mut catch = awt_core::stream::content::Catch::new(obs);
    let v = run_call(runner, task, args, &mut catch, cancel).await?;
    Ok((v, catch.content()))
}

async fn run_call(
    runner: &Runner,
    task: &Task,
    args: Value,
    obs: &mut dyn Observer,
    cancel: Cancel,
) -> Result<Value, CallError> {
    let tool = runner.open(&task.tool).await?;
    let label = match task.kind {
        Kind::Action => task.action.as_str(),
        Kind::Cli => "cli",
    };
    // Why clamp: a task file may be forged; its number must neither panic the worker nor lose the task.
    let timeout = task
        .timeout_s
        .map(|t| awt_core::limits::clamp_seconds(t, awt_core::manifest::DEFAULT_TIMEOUT_S));
    let mut opts = CallOptions {
        timeout,
        max_output: task.max_output,
        call_id: Some(task.task_id.clone()),
        ..Default::default()
    };
    // An approved request's task runs on its approval, used here once; the gate checks the binding.
    if task.source.as_deref() == Some("approval") {
        match super::approvals::Approvals::open_for(runner).and_then(|a| a.redeem(&task.task_id)) {
            Ok(g) => opts.approval = awt_core::call::approve::Approval::Granted(g),
            Err(e) => return Err(tool.refuse(Some(label), args, e)),
        }
    }
    match task.kind {
        Kind::Action => {
            let Value::Object(map) = args else {
                let e = CallError::new(
                    ErrorCode::InvalidArguments,
                    "the task's arguments are not a JSON object",
                );
                return Err(tool.refuse(Some(label), args, e));
            };
            tool.action(&task.action)?.prepare(map, &opts)?.run(obs, cancel).await
        }
        Kind::Cli => {
            let argv = match super::cli_argv(&args) {
                Some(a) => a,
                None => {
                    let e = CallError::new(ErrorCode::InvalidArguments, "the task's argv is not a list of strings");
                    return Err(tool.refuse(Some(label), args, e));
                }
            };
            tool.prepare_cli(&argv, &opts)?.run_captured(obs, cancel).await
        }
    }
}
