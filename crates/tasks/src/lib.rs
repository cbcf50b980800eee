//! Background tasks: `submit` checks a call like a foreground one, writes a `pending` task and starts a detached
//! worker; the worker claims tasks in submit order while fewer than the per-anima limit run, runs each through
//! the call pipeline ([`detached::execute`]: a prepared call, or a legacy `cli_main` with captured output) with the task id as the call
//! id, streams progress into the task, and writes the outcome and an AnimaWorks notification.
//!
//! A task moves `pending → running → completed | failed | timeout | cancelled`; a `running` task whose worker is
//! gone (its pid is dead, or was reused: the start time or boot differs) becomes `lost` at the next look.
//!
//! The store is the [`TaskStore`] trait, chosen by `<data dir>/animaworks-tool.json` `"tasks"` ([`backend::open`]):
//! [`files::FileStore`] keeps one JSON file per task under `<anima dir>/state/background_tasks/` (one machine; a
//! detached worker per task slot; liveness by pid), [`pg::PgStore`] one row per task in Postgres, run by
//! `animaworks-tool worker` processes on any number of machines (liveness by lease). Both run a task's call through
//! the one [`detached::execute`].
//!
//! ## The path of one task
//! 1. [`submit::submit`] → [`submit::check`]: the call is prepared exactly as in the foreground (validated,
//!    permitted, confined), so a refusal comes before anything is queued.
//! 2. [`submit::enqueue`]: the task, signed by [`mac::sign`], is written by [`TaskStore::create`] (unmasked
//!    arguments apart, [`secret_args`]); a file store then starts a worker ([`queue::spawn_worker`]).
//! 3. The worker ([`detached::run`], or [`pg::worker::run`] for Postgres) takes it with [`TaskStore::claim`]
//!    under the per-anima limit and checks it with [`mac::verify`] (a forged task is refused and audited).
//! 4. [`detached::execute`] runs it through `awt_core`'s pipeline (a `PreparedCall`, the task id as call id),
//!    progress into the task; [`detached::record`] writes the outcome, [`TaskStore::notify`] AnimaWorks' notice.

#![forbid(unsafe_code)]

pub mod alive;
pub mod approvals;
pub mod backend;
pub mod cancel;
pub mod config;
pub mod content;
pub mod detached;
pub mod files;
pub mod identity;
pub mod legacy_warning;
pub mod mac;
pub mod pending;
pub mod pg;
pub mod queue;
pub mod secret_args;
pub mod submit;
pub mod tool_version;

use awt_core::dirs::Dirs;
use awt_core::error::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Running,
    Completed,
    Failed,
    Timeout,
    Cancelled,
    Lost,
}

impl Status {
    pub const ALL: [Status; 7] = [
        Status::Pending,
        Status::Running,
        Status::Completed,
        Status::Failed,
        Status::Timeout,
        Status::Cancelled,
        Status::Lost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Timeout => "timeout",
            Status::Cancelled => "cancelled",
            Status::Lost => "lost",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        !matches!(self, Status::Pending | Status::Running)
    }

    /// The word AnimaWorks' `TaskStatus` has for it (`pending`, `running`, `completed`, `failed`): its loader
    /// skips a file whose status is another word, so `timeout`, `cancelled` and `lost` are written as `failed`,
    /// and the finer word goes into the task's `outcome`.
    pub fn animaworks(self) -> &'static str {
        match self {
            Status::Pending | Status::Running | Status::Completed => self.as_str(),
            Status::Failed | Status::Timeout | Status::Cancelled | Status::Lost => "failed",
        }
    }
}

fn animaworks_status<S: serde::Serializer>(st: &Status, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(st.animaworks())
}

/// How the task calls its tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A structured action call (`tool_args` is the arguments object).
    Action,
    /// A legacy module's `cli_main(argv)` (`tool_args` is the argv, `-j` appended).
    Cli,
}

/// The last progress event of a running task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub progress: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub updated_at: f64,
}

/// The identity of a live process: pids are reused, so a pid alone never names a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessId {
    pub pid: i32,
    /// `/proc/<pid>/stat` field 22: clock ticks after boot.
    pub start_time: u64,
    pub boot_id: String,
}

/// One task, as stored. The first nine fields are AnimaWorks' own (its readers keep working); the rest are ours.
///
/// Stored `status` is AnimaWorks' word ([`Status::animaworks`]); `outcome` holds the finer one of a finished
/// task, and reading a task gives `status` that finer word again (see the `Serialize`/`Deserialize` impls).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct Task {
    pub task_id: String,
    pub anima_name: String,
    /// `tool:action` (AnimaWorks' form); `tool:cli` for a legacy argv.
    pub tool_name: String,
    /// The arguments, masked: an object for an action; for a legacy `cli_main`, AnimaWorks' shape
    /// `{"subcommand", "raw_args", "anima_dir"}` (older files: the argv as a list; see [`cli_argv`]).
    pub tool_args: Value,
    #[serde(serialize_with = "animaworks_status")]
    pub status: Status,
    /// Seconds since the Unix epoch, as AnimaWorks writes them.
    pub created_at: f64,
    pub completed_at: Option<f64>,
    /// The result as text (a JSON value is serialised), as AnimaWorks' readers expect.
    pub result: Option<String>,
    /// `code: message`.
    pub error: Option<String>,

    pub tool: String,
    pub action: String,
    pub kind: Kind,
    /// `--timeout` given at submit; else the action's own.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    #[serde(default)]
    pub max_output: Option<u64>,
    #[serde(default)]
    pub started_at: Option<f64>,
    pub updated_at: f64,
    /// The worker process running the task, with its start time and boot (pid reuse check).
    #[serde(default)]
    pub pid: Option<i32>,
    #[serde(default)]
    pub pid_start_time: Option<u64>,
    #[serde(default)]
    pub boot_id: Option<String>,
    /// Binds the worker to this task ([`identity`]): checked before the worker is ever signalled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_token: Option<String>,
    #[serde(default)]
    pub progress: Option<Progress>,
    /// The result as JSON, when it is JSON.
    #[serde(default)]
    pub result_value: Option<Value>,
    /// The result's content blocks (protocol.md §5.2), bounded as [`content::kept`] says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<Value>>,
    /// One of protocol.md §6's codes, or `lost`.
    #[serde(default)]
    pub error_code: Option<String>,
    /// The whole `error` object a foreground call would print.
    #[serde(default)]
    pub error_detail: Option<Value>,
    /// Where a result past the output cap was written.
    #[serde(default)]
    pub output_path: Option<String>,
    /// `submit`, or `animaworks-pending` for a descriptor taken over by `jobs run-pending`.
    #[serde(default)]
    pub source: Option<String>,
    /// How long the task and its result are kept after `created_at`, in milliseconds (an MCP task's `ttl`):
    /// `jobs prune` deletes a finished task whose ttl has run out, whatever its `--older-than`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// The finer outcome of a finished task: `completed`, `failed`, `timeout`, `cancelled` or `lost` (`status`
    /// on disk says only `completed` or `failed`, the words AnimaWorks knows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Status>,
    /// What a shared queue needs to hand the task to the right worker (see [`QueueInfo`]).
    #[serde(flatten)]
    pub queue: QueueInfo,
}

impl Serialize for Task {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let outcome = self.status.is_final().then_some(self.status);
        if self.outcome == outcome {
            Task::serialize(self, s)
        } else {
            Task::serialize(
                &Task {
                    outcome,
                    ..self.clone()
                },
                s,
            )
        }
    }
}

impl<'de> Deserialize<'de> for Task {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut t = Task::deserialize(d)?;
        if let Some(o) = t.outcome.filter(|o| o.is_final()) {
            t.status = o;
        }
        Ok(t)
    }
}

/// The first word of a legacy argv that is not a flag: AnimaWorks' `subcommand`.
pub fn subcommand_of(argv: &[String]) -> &str {
    argv.iter().find(|w| !w.starts_with('-')).map_or("", String::as_str)
}

/// A legacy task's `tool_args` in AnimaWorks' shape.
pub fn cli_tool_args(argv: &[String], anima_dir: &std::path::Path) -> Value {
    serde_json::json!({"subcommand": subcommand_of(argv), "raw_args": argv, "anima_dir": anima_dir})
}

/// The argv a legacy task runs: `raw_args` of AnimaWorks' shape (or an older file's list), with `-j` appended
/// as AnimaWorks' runner does. `None` when neither shape holds a list of strings.
pub fn cli_argv(tool_args: &Value) -> Option<Vec<String>> {
    let list = match tool_args {
        Value::Object(m) => m.get("raw_args")?,
        other => other,
    };
    let mut argv: Vec<String> = serde_json::from_value(list.clone()).ok()?;
    if !argv.iter().any(|w| w == "-j") {
        argv.push("-j".into());
    }
    Some(argv)
}

/// The fields of a task that matter when it may run on another machine: which tool file it was checked against,
/// whether it may run again, and who holds it. Empty on the file store except the tool's identity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueInfo {
    /// The tier of the tool file at submit (`core`, `common`, `personal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_tier: Option<String>,
    /// The SHA-256 of the tool file at submit; a worker with another file leaves the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_sha256: Option<String>,
    /// The action declares `idempotent`: a task whose worker was lost is run again (bounded), else marked lost.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
    /// How many times a worker has claimed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The worker holding the task (`host:pid:nonce`), on a shared queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// When the worker's lease ends unless renewed (seconds since the epoch, the database's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<f64>,
    /// Why a pending task has not started (e.g. no worker has this version of the tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// Where declared credentials sit inside the arguments (names only, never values), so that a worker on another
    /// machine can put its own resolved values back: see [`secret_args`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg_secrets: Option<Value>,
    /// `<key id>:<HMAC-SHA256>` over what the task runs, made by the submitting runner ([`mac`]); a worker runs
    /// only a task whose MAC it verifies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// The keyed digest of the unmasked arguments kept beside the task (the file store), covered by `mac`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_mac: Option<String>,
}

impl Task {
    /// A task just queued: pending, nothing run, `tool_name` in AnimaWorks' `tool:subcommand` form.
    pub fn pending(
        task_id: String,
        anima_name: String,
        tool: String,
        action: String,
        kind: Kind,
        tool_args: Value,
        source: &str,
    ) -> Task {
        let now = now_s();
        Task {
            task_id,
            anima_name,
            tool_name: if action.is_empty() {
                tool.clone()
            } else {
                format!("{tool}:{action}")
            },
            tool_args,
            status: Status::Pending,
            created_at: now,
            completed_at: None,
            result: None,
            error: None,
            tool,
            action,
            kind,
            timeout_s: None,
            max_output: None,
            started_at: None,
            updated_at: now,
            pid: None,
            pid_start_time: None,
            boot_id: None,
            worker_token: None,
            progress: None,
            result_value: None,
            content: None,
            error_code: None,
            error_detail: None,
            output_path: None,
            source: Some(source.to_owned()),
            ttl_ms: None,
            outcome: None,
            queue: QueueInfo::default(),
        }
    }

    /// Has the task's `ttl_ms` run out at `now` (seconds since the epoch)?
    pub fn ttl_expired(&self, now: f64) -> bool {
        self.ttl_ms
            .is_some_and(|ms| self.created_at + ms as f64 / 1000.0 <= now)
    }

    /// The exit code `jobs wait` ends with: the same as the call's.
    pub fn exit_code(&self) -> i32 {
        match self.status {
            Status::Completed => 0,
            Status::Lost => ErrorCode::Crashed.exit_code(),
            Status::Timeout => ErrorCode::Timeout.exit_code(),
            Status::Cancelled => ErrorCode::Cancelled.exit_code(),
            Status::Pending | Status::Running => ErrorCode::Timeout.exit_code(),
            Status::Failed => self
                .error_code
                .as_deref()
                .and_then(|c| ErrorCode::ALL.into_iter().find(|e| e.as_str() == c))
                .unwrap_or(ErrorCode::Internal)
                .exit_code(),
        }
    }

    /// The short form `submit` prints.
    pub fn receipt(&self) -> Value {
        serde_json::json!({"task_id": self.task_id, "status": self.status, "tool": self.tool, "action": self.action})
    }

    /// What AnimaWorks' `submit` prints: `task_id`, `status: "submitted"`, `tool`, `subcommand` (the action, or
    /// the legacy argv's first word) and a `message` in the configured language.
    pub fn submitted(&self, locale: awt_core::locale::Locale) -> Value {
        let subcommand = match self.kind {
            Kind::Action => self.action.as_str(),
            Kind::Cli => self.tool_args.get("subcommand").and_then(Value::as_str).unwrap_or(""),
        };
        serde_json::json!({
            "task_id": self.task_id,
            "status": "submitted",
            "tool": self.tool,
            "subcommand": subcommand,
            "message": locale.submitted(&self.task_id),
        })
    }

    /// The notification an anima reads (`state/background_notifications/<id>.md`), in AnimaWorks' layout:
    /// a title, then task id, tool, status and a summary (`[tool] completed: <first 200 characters>` or
    /// `[tool] failed: <error>`). A result past the output cap adds the path of the file that holds it.
    pub fn notification(&self, locale: awt_core::locale::Locale) -> String {
        let status = self.status.animaworks();
        let summary = match self.status {
            Status::Completed => {
                let r = self.result.as_deref().unwrap_or("");
                let cut = r.char_indices().nth(200).map_or(r.len(), |(i, _)| i);
                format!("[{}] completed: {}", self.tool_name, &r[..cut])
            }
            s if s.is_final() => format!("[{}] failed: {}", self.tool_name, self.error.as_deref().unwrap_or("")),
            _ => format!("[{}] {status}", self.tool_name),
        };
        let mut text = format!(
            "# {}\n\n{}",
            locale.task_title(self.status != Status::Completed, &self.tool_name),
            locale.task_lines(&self.task_id, &self.tool_name, status, &summary)
        );
        if let Some(p) = &self.output_path {
            text.push_str(&format!("\n{p}\n"));
        }
        text
    }

    pub fn finish(&mut self, status: Status) {
        let now = now_s();
        self.status = status;
        self.outcome = Some(status);
        self.completed_at = Some(now);
        self.updated_at = now;
    }
}

/// Result of looking at every task: running tasks whose worker is gone were marked lost.
#[derive(Debug, Default)]
pub struct Census {
    pub lost: Vec<Task>,
    pub pending: usize,
    /// Pending tasks untouched for [`queue::KICK_GRACE`]: the worker their submitter started should have taken
    /// them by then.
    pub stale_pending: usize,
    pub running: usize,
}

/// Where tasks are kept. Every method is safe against other processes using the same store at the same time.
pub trait TaskStore: Send + Sync {
    /// Store a new task. `private_args` are the unmasked arguments when masking changed them; only the worker
    /// reads them, and they are removed when the task ends.
    fn create(&self, task: &Task, private_args: Option<&Value>) -> io::Result<()>;
    /// [`TaskStore::create`], then make sure something will run the task ([`TaskStore::start_worker`], which
    /// the file store skips when a worker that will claim again is free for it). The inner error: stored, but
    /// nothing could be started.
    fn create_and_start(&self, task: &Task, private_args: Option<&Value>, dirs: &Dirs) -> io::Result<io::Result<()>> {
        self.create(task, private_args)?;
        Ok(self.start_worker(dirs))
    }
    fn get(&self, id: &str) -> io::Result<Option<Task>>;
    /// Every readable task (a file that cannot be read is skipped, never fatal to the listing).
    fn list(&self) -> io::Result<Vec<Task>>;
    /// The pending and running tasks, in submit order (the file store reads only their files).
    fn list_active(&self) -> io::Result<Vec<Task>> {
        Ok(self.list()?.into_iter().filter(|t| !t.status.is_final()).collect())
    }
    /// Change a task under the store's lock; `f` returns false to leave it unchanged. `None`: no such task.
    /// A change that ends the task writes its notification too, so that no kill in between can lose it: the file
    /// store writes it before the task file (a kill between the two leaves a running task whose process is gone,
    /// which the next look marks lost and notifies again); the Postgres row owes it until it is written.
    fn update(&self, id: &str, f: &mut dyn FnMut(&mut Task) -> bool) -> io::Result<Option<Task>>;
    /// Mark running tasks whose worker is gone `lost` (writing their notifications) and count the rest.
    fn census(&self) -> io::Result<Census>;
    /// Atomically: mark lost tasks, then if fewer than `limit` run, make the oldest pending task `running` under
    /// `owner` and return it.
    fn claim(&self, owner: &ProcessId, limit: usize) -> io::Result<Option<Task>>;
    fn private_args(&self, id: &str) -> io::Result<Option<Value>>;
    /// Ask the worker running `id` to stop it.
    fn request_cancel(&self, id: &str) -> io::Result<()>;
    fn cancel_requested(&self, id: &str) -> bool;
    /// Drop the private parts of a finished task (its unmasked arguments, its cancel request).
    fn release(&self, id: &str);
    /// Write the AnimaWorks notification of a finished task.
    fn notify(&self, task: &Task) -> io::Result<()>;
    /// Delete a finished task and everything kept for it.
    fn remove(&self, id: &str) -> io::Result<()>;

    /// Where the tasks are, for messages.
    fn location(&self) -> String;
    /// Is the worker holding this running task still there (a live pid here; an unexpired lease on a shared queue)?
    fn worker_alive(&self, t: &Task) -> bool;
    /// The worker did not answer a cancel: end it where this store can (a local pid). A shared queue cannot reach
    /// another machine; its worker finds the task taken from it at its next heartbeat and ends the tool there.
    fn kill_worker(&self, _t: &Task) -> String {
        "its worker (on another machine) ends the tool when it next renews its lease".to_owned()
    }
    /// Wait until task `id` may have changed, at most `max`.
    fn wait_change(&self, _id: &str, max: Duration) {
        std::thread::sleep(max);
    }
    /// After a look at the store: make sure pending tasks will be taken (the file store starts a local worker).
    fn kick(&self, _dirs: &Dirs) -> io::Result<()> {
        Ok(())
    }
    /// A task was just stored: start whatever runs it.
    fn start_worker(&self, _dirs: &Dirs) -> io::Result<()> {
        Ok(())
    }
    /// Tasks run on this machine only, by detached workers `submit` starts (the file store).
    fn is_local(&self) -> bool {
        false
    }
}

pub fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A task id: 12 hex digits, as AnimaWorks' `uuid4().hex[:12]`.
pub fn new_task_id() -> String {
    let mut b = [0u8; 6];
    let n = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
    if n.ok() != Some(b.len()) {
        let seed = awt_core::call::new_call_id();
        return seed.trim_start_matches("c-").to_owned();
    }
    awt_core::hex::encode(b)
}

/// Is `id` shaped like a task id? (Ids become file names, so nothing else is accepted.)
pub fn valid_task_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// This boot's id (read once a process: it cannot change while the process runs).
fn boot_id() -> String {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    })
    .clone()
}

/// `/proc/<pid>/stat` field 22, the process's start time in clock ticks after boot.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    // Field 3 (state) is the first after the command name; field 22 is 19 further on.
    let fields: Vec<&str> = after.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

impl ProcessId {
    pub fn of_self() -> ProcessId {
        let pid = std::process::id() as i32;
        ProcessId {
            pid,
            start_time: start_time(pid).unwrap_or(0),
            boot_id: boot_id(),
        }
    }

    /// Is this exact process still running (not a zombie, not a reused pid, not another boot)?
    pub fn alive(&self) -> bool {
        if !self.boot_id.is_empty() && self.boot_id != boot_id() {
            return false;
        }
        alive::alive(self.pid, self.start_time)
    }

    pub fn of_task(t: &Task) -> Option<ProcessId> {
        Some(ProcessId {
            pid: t.pid?,
            start_time: t.pid_start_time?,
            boot_id: t.boot_id.clone().unwrap_or_default(),
        })
    }
}
