//! The Postgres task store: one row per task in `awt_tasks`, shared by every machine.
//!
//! - **Hand-out.** [`worker`] claims the oldest pending task with `SELECT … FOR UPDATE SKIP LOCKED`; in the same
//!   transaction it takes a transaction advisory lock on the task's anima and counts that anima's running tasks,
//!   so the per-anima limit holds across all workers (the lock serialises claims of one anima; READ COMMITTED gives
//!   the count after the lock the latest committed state). The claim's commit is synchronous: no tool starts on a
//!   claim that is not on disk.
//! - **Leases.** A claim sets `worker` and `lease_until = now() + lease` (the database's clock); the worker renews
//!   it for its tasks every quarter lease. Any worker's rescuer finds running rows whose lease ended and marks them
//!   `lost`, or re-queues them when the action is idempotent and attempts remain. Every write a worker makes to a
//!   task it runs is fenced (`status = 'running' AND worker = me AND attempt = n`), so a worker that lost its lease
//!   can never write over the rescuer's outcome.
//! - **Never two live runs.** A worker that cannot renew its lease within half of it cancels its tools; a watchdog
//!   process kills a worker that stops answering (SIGSTOP, a hung runtime) at three quarters, and the guardian then
//!   kills its tools; the rescuer only acts after the whole lease.
//! - **Notifications.** A trigger sends `awt_pending` (work to claim), `awt_cancel` (a cancel request) and
//!   `awt_task` (a change of status, record, attempt, worker or cancel flag, for `jobs wait`; schema 4).
//! - **Notification files.** Whoever ends a task commits the final row with `notify_after` set, writes the anima's
//!   notification file, then clears it ([`notified`]). A row still owing its file past `notify_after` (one lease: its writer
//!   was killed in between) is written by any worker's rescuer ([`owed`]); the file is the same whoever writes it.
//!
//! The command-line side ([`PgStore`]) implements the synchronous [`TaskStore`] on a small runtime of its own (the
//! callers run inside a single-threaded runtime that must not block on itself).

pub mod schema;
pub mod worker;

use super::config::{Backend, TasksConfig};
use super::files::FileStore;
use super::{Census, ProcessId, Status, Task, TaskStore};
use awt_core::dirs::Dirs;
use awt_core::error::{CallError, ErrorCode};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use serde_json::Value;
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_postgres::{GenericClient, NoTls, Row};

/// How long one database operation of a command may take before it is reported as failing.
pub const OP_TIMEOUT: Duration = Duration::from_secs(15);

/// What went wrong, in words an operator can act on.
#[derive(Debug, Clone)]
pub enum StoreError {
    /// The schema is missing or older: `animaworks-tool jobs migrate` fixes it.
    NoSchema(String),
    /// The database cannot be reached or answered with an error.
    Db(String),
    Other(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::NoSchema(m) => write!(
                f,
                "{m}; run `animaworks-tool jobs migrate` (or start `animaworks-tool worker`)"
            ),
            StoreError::Db(m) | StoreError::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StoreError {}

impl StoreError {
    /// The store error inside an `io::Error`, if it is one.
    pub fn of(e: &io::Error) -> Option<&StoreError> {
        e.get_ref().and_then(|x| x.downcast_ref::<StoreError>())
    }

    pub fn to_call_error(&self) -> CallError {
        match self {
            StoreError::NoSchema(_) => CallError::new(ErrorCode::Internal, self.to_string())
                .hint("`animaworks-tool jobs migrate` creates the tables; workers apply it when they start"),
            StoreError::Db(_) => {
                CallError::new(ErrorCode::Internal, format!("the task database: {self}")).hint(format!(
                    "check \"tasks\".\"url\" in <data dir>/animaworks-tool.json (or ${}) and that the server is up",
                    awt_core::env_vars::TASKS_URL.name
                ))
            }
            StoreError::Other(_) => CallError::new(ErrorCode::Internal, self.to_string()),
        }
    }
}

impl From<StoreError> for io::Error {
    fn from(e: StoreError) -> io::Error {
        io::Error::other(e)
    }
}

/// A database error with its server message when there is one (tokio-postgres' own `Display` is terse).
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(x) = src {
                s.push_str(&format!(": {x}"));
                src = x.source();
            }
            s
        }
    }
}

pub(crate) fn db(e: tokio_postgres::Error) -> io::Error {
    StoreError::Db(describe(&e)).into()
}

pub(crate) fn pool_err(e: deadpool_postgres::PoolError) -> io::Error {
    let msg = match &e {
        deadpool_postgres::PoolError::Backend(b) => describe(b),
        other => other.to_string(),
    };
    StoreError::Db(format!("cannot connect: {msg}")).into()
}

/// A connection pool for `url`. Connections are made when first needed.
pub fn pool(url: &str, size: usize) -> Result<Pool, StoreError> {
    let mut cfg: tokio_postgres::Config = url
        .parse()
        .map_err(|e| StoreError::Other(format!("the task database URL is not valid: {e}")))?;
    cfg.connect_timeout(Duration::from_secs(5));
    if cfg.get_application_name().is_none() {
        cfg.application_name("animaworks-tool");
    }
    let mgr = Manager::from_config(
        cfg,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(mgr)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(10)))
        .create_timeout(Some(Duration::from_secs(6)))
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()
        .map_err(|e| StoreError::Other(format!("cannot set up the task database pool: {e}")))
}

/// The columns every read selects, in [`task_of`]'s order.
pub const COLUMNS: &str = "record, status, attempt, worker, extract(epoch from lease_until)::float8, cancel_requested";

/// A task from a row of [`COLUMNS`]: the record, with the columns (the truth for queue state) laid over it.
pub fn task_of(row: &Row) -> io::Result<Task> {
    let record: Value = row.get(0);
    let mut t: Task = serde_json::from_value(record)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("a task row is not a task: {e}")))?;
    let status: String = row.get(1);
    t.status = Status::parse(&status)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("unknown status {status:?}")))?;
    let attempt: i32 = row.get(2);
    t.queue.attempt = (attempt > 0).then_some(attempt as u32);
    t.queue.worker = row.get(3);
    t.queue.lease_until = if t.status == Status::Running { row.get(4) } else { None };
    Ok(t)
}

/// The record as stored: the queue state that lives in columns is left out of it.
pub fn record_of(t: &Task) -> Value {
    let mut t = t.clone();
    t.queue.attempt = None;
    t.queue.worker = None;
    t.queue.lease_until = None;
    serde_json::to_value(&t).unwrap_or(Value::Null)
}

/// Is `name` one folder name (an anima name from a row may be forged)?
pub fn safe_anima(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0') && name.len() <= 255
}

/// Where a task's anima keeps its notifications on this machine: the CLI's anima dir when it is that anima, else
/// `<animas dir>/<name>`.
pub fn anima_dir(dirs: &Dirs, animas: &std::path::Path, name: &str) -> Option<PathBuf> {
    if !safe_anima(name) {
        return None;
    }
    match &dirs.anima {
        Some(a) if dirs.anima_name().as_deref() == Some(name) => Some(a.clone()),
        _ => Some(animas.join(name)),
    }
}

/// The outcome a rescuer gives a task whose worker's lease ended.
pub fn rescued(t: &mut Task, cancel_requested: bool, max_attempts: u32) {
    let who = t.queue.worker.clone().unwrap_or_else(|| "?".into());
    let attempt = t.queue.attempt.unwrap_or(1);
    let detail = |t: &Task, code: &str, msg: &str, hint: &str| serde_json::json!({"code": code, "message": msg, "hint": hint, "tool": t.tool, "action": t.action});
    if cancel_requested {
        t.finish(Status::Cancelled);
        let msg = format!("cancelled; its worker {who} was lost before it stopped the task");
        t.error = Some(format!("cancelled: {msg}"));
        t.error_code = Some("cancelled".into());
        t.error_detail = Some(detail(t, "cancelled", &msg, "nothing to do"));
    } else if t.queue.idempotent && attempt < max_attempts {
        t.status = Status::Pending;
        t.started_at = None;
        t.updated_at = super::now_s();
        t.queue.waiting = Some(format!(
            "re-queued: its worker {who} was lost during attempt {attempt} of {max_attempts} (the action is idempotent)"
        ));
    } else {
        t.finish(Status::Lost);
        let why = if t.queue.idempotent {
            format!("after {attempt} attempts")
        } else {
            "and the action is not idempotent, so it is not run again".into()
        };
        let msg =
            format!("lost: its worker {who} stopped renewing its lease (killed, paused, or its machine is gone) {why}");
        t.error = Some(msg.clone());
        t.error_code = Some("lost".into());
        t.error_detail = Some(detail(
            t,
            "lost",
            &msg,
            "submit the task again; `animaworks-tool jobs show` has what was recorded",
        ));
    }
}

/// Rescue the running tasks whose lease ended; returns those that reached a final state (for notifications).
pub async fn rescue(pool: &Pool, max_attempts: u32, lease_s: f64) -> io::Result<Vec<Task>> {
    let mut c = pool.get().await.map_err(pool_err)?;
    let tx = c.transaction().await.map_err(db)?;
    let rows = tx
        .query(
            &format!(
                "SELECT {COLUMNS}, id FROM awt_tasks WHERE status = 'running' AND lease_until < now() \
                 ORDER BY lease_until LIMIT 200 FOR UPDATE SKIP LOCKED"
            ),
            &[],
        )
        .await
        .map_err(db)?;
    let mut finals = Vec::new();
    for row in &rows {
        let id: String = row.get(6);
        let cancel_requested: bool = row.get(5);
        let mut t = match task_of(row) {
            Ok(t) => t,
            Err(e) => {
                // A row that is not a task is set aside as lost rather than left to block a slot for ever.
                tx.execute(
                    "UPDATE awt_tasks SET status = 'lost', lease_until = NULL WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(db)?;
                tracing::warn!("task {id}: {e}");
                continue;
            }
        };
        rescued(&mut t, cancel_requested, max_attempts);
        let lease: Option<f64> = None;
        tx.execute(
            "UPDATE awt_tasks SET status = $2, record = $3, lease_until = to_timestamp($4), \
             worker = CASE WHEN $2 = 'pending' THEN NULL ELSE worker END, \
             notify_after = CASE WHEN $5 THEN now() + make_interval(secs => $6) END WHERE id = $1",
            &[
                &id,
                &t.status.as_str(),
                &record_of(&t),
                &lease,
                &t.status.is_final(),
                &lease_s,
            ],
        )
        .await
        .map_err(db)?;
        if t.status.is_final() {
            finals.push(t);
        }
    }
    tx.commit().await.map_err(db)?;
    Ok(finals)
}

/// Take the final rows whose notification file is overdue (their writer is gone): each is given another grace, so
/// that two rescuers do not write the same file at once, and is cleared by [`notified`] once written.
pub async fn owed(pool: &Pool, lease_s: f64) -> io::Result<Vec<Task>> {
    let c = pool.get().await.map_err(pool_err)?;
    let rows = c
        .query(
            &format!(
                "UPDATE awt_tasks SET notify_after = now() + make_interval(secs => $1) WHERE id IN \
                 (SELECT id FROM awt_tasks WHERE notify_after < now() ORDER BY notify_after LIMIT 200 \
                 FOR UPDATE SKIP LOCKED) RETURNING {COLUMNS}"
            ),
            &[&lease_s],
        )
        .await
        .map_err(db)?;
    Ok(rows.iter().filter_map(|r| task_of(r).ok()).collect())
}

/// The notification files of `ids` are written: their rows owe nothing more.
pub async fn notified(pool: &Pool, ids: &[String]) -> io::Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let c = pool.get().await.map_err(pool_err)?;
    c.execute("UPDATE awt_tasks SET notify_after = NULL WHERE id = ANY($1)", &[&ids])
        .await
        .map_err(db)?;
    Ok(())
}

/// Read one task (of `anima` when given).
pub async fn read(c: &impl GenericClient, id: &str, anima: Option<&str>) -> io::Result<Option<Task>> {
    let row = c
        .query_opt(
            &format!("SELECT {COLUMNS} FROM awt_tasks WHERE id = $1 AND ($2::text IS NULL OR anima = $2)"),
            &[&id, &anima],
        )
        .await
        .map_err(db)?;
    row.as_ref().map(task_of).transpose()
}

/// Write a notification into the anima's folder on this machine (the anima dirs are shared).
pub fn write_notification(dirs: &Dirs, animas: &std::path::Path, t: &Task) -> io::Result<()> {
    let dir = anima_dir(dirs, animas, &t.anima_name)
        .ok_or_else(|| io::Error::other(format!("the anima name {:?} is not a folder name", t.anima_name)))?;
    if !dir.is_dir() {
        return Err(io::Error::other(format!(
            "no anima dir {} on this machine",
            dir.display()
        )));
    }
    FileStore::for_anima(&dir).notify(t)
}

struct Listener {
    _client: tokio_postgres::Client,
    rx: std::sync::mpsc::Receiver<String>,
}

/// The command-line side of the Postgres store.
pub struct PgStore {
    rt: Option<tokio::runtime::Runtime>,
    pool: Pool,
    url: String,
    dirs: Dirs,
    animas: PathBuf,
    /// Only this anima's tasks are seen (an anima never sees another's).
    anima: Option<String>,
    max_attempts: u32,
    /// The lease, in seconds: also how long this command has to write a notification file it owes.
    lease_s: f64,
    listener: Mutex<Option<Listener>>,
}

impl Drop for PgStore {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl PgStore {
    /// The anima's tasks (every anima's, unscoped) whose row meets `filter` (SQL ending in `AND `, or empty), oldest
    /// first.
    fn select_tasks(&self, filter: &'static str) -> io::Result<Vec<Task>> {
        let (pool, anima) = (self.pool.clone(), self.scoped());
        self.block(async move {
            let c = pool.get().await.map_err(pool_err)?;
            let sql =
                format!("SELECT {COLUMNS} FROM awt_tasks WHERE {filter}($1::text IS NULL OR anima = $1) ORDER BY created_at, id");
            let rows = c.query(&sql, &[&anima]).await.map_err(db)?;
            Ok(rows.iter().filter_map(|r| task_of(r).ok()).collect())
        })
    }

    pub fn open(cfg: &TasksConfig, dirs: &Dirs) -> Result<PgStore, CallError> {
        let Backend::Postgres { url } = &cfg.backend else {
            return Err(CallError::new(ErrorCode::Internal, "not a postgres backend"));
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| CallError::new(ErrorCode::Internal, format!("cannot start: {e}")))?;
        let pool = {
            let _g = rt.enter();
            pool(url, 2)
        };
        let pool = match pool {
            Ok(p) => p,
            // Why: a runtime dropped inside the caller's runtime panics; it must go in the background.
            Err(e) => {
                rt.shutdown_background();
                return Err(e.to_call_error());
            }
        };
        Ok(PgStore {
            rt: Some(rt),
            pool,
            url: url.clone(),
            animas: dirs.data.join("animas"),
            anima: dirs.anima_name(),
            dirs: dirs.clone(),
            max_attempts: cfg.max_attempts,
            lease_s: cfg.lease.as_secs_f64(),
            listener: Mutex::new(None),
        })
    }

    /// Run `f` on the store's own runtime and wait for it (callers are inside another runtime).
    fn block<R: Send + 'static>(&self, f: impl Future<Output = io::Result<R>> + Send + 'static) -> io::Result<R> {
        let (tx, rx) = std::sync::mpsc::channel();
        let rt = self.rt.as_ref().expect("the runtime lives as long as the store");
        rt.spawn(async move {
            let out = match tokio::time::timeout(OP_TIMEOUT, f).await {
                Ok(r) => r,
                Err(_) => Err(StoreError::Db(format!("no answer within {} s", OP_TIMEOUT.as_secs())).into()),
            };
            let _ = tx.send(out);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(io::Error::other("the task database thread stopped")))
    }

    fn scoped(&self) -> Option<String> {
        self.anima.clone()
    }

    fn notify_finals(&self, finals: &[Task]) {
        let mut written = Vec::new();
        for t in finals {
            match write_notification(&self.dirs, &self.animas, t) {
                Ok(()) => written.push(t.task_id.clone()),
                Err(e) => tracing::warn!("cannot write the notification of task {}: {e}", t.task_id),
            }
        }
        let pool = self.pool.clone();
        // Not cleared (the database went away): a worker writes the same file again later.
        let _ = self.block(async move { notified(&pool, &written).await });
    }
}

impl TaskStore for PgStore {
    fn create(&self, task: &Task, _private_args: Option<&Value>) -> io::Result<()> {
        // The unmasked arguments never reach the database: the worker puts its own credentials back (secret_args).
        let pool = self.pool.clone();
        let t = task.clone();
        self.block(async move {
            let c = pool.get().await.map_err(pool_err)?;
            let (Some(tier), Some(sha)) = (t.queue.tool_tier.clone(), t.queue.tool_sha256.clone()) else {
                return Err(io::Error::other("the task does not say which tool file it was checked against"));
            };
            // One round trip: the row goes in only when the schema is the one this build needs.
            let inserted = c
                .execute(
                    "INSERT INTO awt_tasks (id, anima, status, created_at, tool, tier, tool_sha256, idempotent, record) \
                     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 \
                     WHERE (SELECT max(version) FROM awt_schema) = $10",
                    &[
                        &t.task_id,
                        &t.anima_name,
                        &t.status.as_str(),
                        &t.created_at,
                        &t.tool,
                        &tier,
                        &sha,
                        &t.queue.idempotent,
                        &record_of(&t),
                        &schema::VERSION,
                    ],
                )
                .await
                .map_err(|e| {
                    if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
                        io::Error::new(io::ErrorKind::AlreadyExists, format!("task {} exists", t.task_id))
                    } else if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) {
                        StoreError::NoSchema("the task database has no animaworks-tool schema".into()).into()
                    } else {
                        db(e)
                    }
                })?;
            if inserted == 0 {
                schema::check(&c).await?;
                return Err(io::Error::other("the task was not stored"));
            }
            Ok(())
        })
    }

    fn get(&self, id: &str) -> io::Result<Option<Task>> {
        if !super::valid_task_id(id) {
            return Ok(None);
        }
        let (pool, id, anima) = (self.pool.clone(), id.to_owned(), self.scoped());
        self.block(async move {
            let c = pool.get().await.map_err(pool_err)?;
            read(&**c, &id, anima.as_deref()).await
        })
    }

    fn list(&self) -> io::Result<Vec<Task>> {
        self.select_tasks("")
    }

    fn list_active(&self) -> io::Result<Vec<Task>> {
        // Only the unfinished rows leave the server (the partial indexes find them): a poll of `jobs list
        // --status pending,running` costs the active tasks, not every task kept.
        self.select_tasks("status IN ('pending', 'running') AND ")
    }

    fn update(&self, id: &str, f: &mut dyn FnMut(&mut Task) -> bool) -> io::Result<Option<Task>> {
        if !super::valid_task_id(id) {
            return Ok(None);
        }
        // The closure is not Send: read under a row lock, change here, write back in the same transaction.
        let rt = self.rt.as_ref().expect("runtime");
        let (pool, idc, anima, lease_s) = (self.pool.clone(), id.to_owned(), self.scoped(), self.lease_s);
        let (to_worker, from_here) = tokio::sync::oneshot::channel::<Option<Task>>();
        let (to_here, from_worker) = std::sync::mpsc::channel::<io::Result<Option<Task>>>();
        let to_here2 = to_here.clone();
        rt.spawn(async move {
            let out: io::Result<Option<Task>> = async {
                let mut c = pool.get().await.map_err(pool_err)?;
                let tx = c.transaction().await.map_err(db)?;
                let row = tx
                    .query_opt(
                        &format!(
                            "SELECT {COLUMNS} FROM awt_tasks WHERE id = $1 AND ($2::text IS NULL OR anima = $2) FOR UPDATE"
                        ),
                        &[&idc, &anima],
                    )
                    .await
                    .map_err(db)?;
                let current = row.as_ref().map(task_of).transpose()?;
                let _ = to_here2.send(Ok(current.clone()));
                let Ok(Some(changed)) = from_here.await else {
                    return Ok(current);
                };
                tx.execute(
                    "UPDATE awt_tasks SET status = $2, record = $3, \
                     lease_until = CASE WHEN $2 = 'running' THEN lease_until ELSE NULL END, \
                     notify_after = CASE WHEN $4 THEN now() + make_interval(secs => $5) END WHERE id = $1",
                    &[&idc, &changed.status.as_str(), &record_of(&changed), &changed.status.is_final(), &lease_s],
                )
                .await
                .map_err(db)?;
                tx.commit().await.map_err(db)?;
                Ok(Some(changed))
            }
            .await;
            let _ = to_here.send(out);
        });
        let first = from_worker
            .recv_timeout(OP_TIMEOUT)
            .map_err(|_| io::Error::from(StoreError::Db("no answer from the task database".into())))??;
        let Some(mut t) = first else {
            drop(to_worker);
            return Ok(None);
        };
        let changed = f(&mut t);
        let ended = changed && t.status.is_final();
        let _ = to_worker.send(changed.then_some(t));
        let out = from_worker
            .recv_timeout(OP_TIMEOUT)
            .map_err(|_| io::Error::from(StoreError::Db("no answer from the task database".into())))?;
        if let (true, Ok(Some(t))) = (ended, &out) {
            if let Err(e) = self.notify(t) {
                tracing::warn!("cannot write the notification of task {}: {e}", t.task_id);
            }
        }
        out
    }

    fn census(&self) -> io::Result<Census> {
        let (pool, anima, max, lease_s) = (self.pool.clone(), self.scoped(), self.max_attempts, self.lease_s);
        let (finals, pending, running) = self.block(async move {
            let finals = rescue(&pool, max, lease_s).await?;
            let c = pool.get().await.map_err(pool_err)?;
            let row = c
                .query_one(
                    "SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'running') \
                     FROM awt_tasks WHERE ($1::text IS NULL OR anima = $1)",
                    &[&anima],
                )
                .await
                .map_err(db)?;
            let (p, r): (i64, i64) = (row.get(0), row.get(1));
            Ok((finals, p as usize, r as usize))
        })?;
        self.notify_finals(&finals);
        Ok(Census {
            lost: finals.into_iter().filter(|t| t.status == Status::Lost).collect(),
            pending,
            // Workers poll the database; nothing is started from here.
            stale_pending: 0,
            running,
        })
    }

    fn claim(&self, _owner: &ProcessId, _limit: usize) -> io::Result<Option<Task>> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "tasks in Postgres are claimed by `animaworks-tool worker`",
        ))
    }

    fn private_args(&self, _id: &str) -> io::Result<Option<Value>> {
        Ok(None)
    }

    fn request_cancel(&self, id: &str) -> io::Result<()> {
        let (pool, id, anima) = (self.pool.clone(), id.to_owned(), self.scoped());
        self.block(async move {
            let c = pool.get().await.map_err(pool_err)?;
            c.execute(
                "UPDATE awt_tasks SET cancel_requested = true WHERE id = $1 AND ($2::text IS NULL OR anima = $2)",
                &[&id, &anima],
            )
            .await
            .map_err(db)?;
            Ok(())
        })
    }

    fn cancel_requested(&self, id: &str) -> bool {
        let (pool, id) = (self.pool.clone(), id.to_owned());
        self.block(async move {
            let c = pool.get().await.map_err(pool_err)?;
            let row = c
                .query_opt("SELECT cancel_requested FROM awt_tasks WHERE id = $1", &[&id])
                .await
                .map_err(db)?;
            Ok(row.map(|r| r.get::<_, bool>(0)).unwrap_or(false))
        })
        .unwrap_or(false)
    }

    fn release(&self, _id: &str) {}

    fn notify(&self, t: &Task) -> io::Result<()> {
        write_notification(&self.dirs, &self.animas, t)?;
        let (pool, ids) = (self.pool.clone(), vec![t.task_id.clone()]);
        let _ = self.block(async move { notified(&pool, &ids).await });
        Ok(())
    }

    fn remove(&self, id: &str) -> io::Result<()> {
        let (pool, id, anima) = (self.pool.clone(), id.to_owned(), self.scoped());
        self.block(async move {
            let c = pool.get().await.map_err(pool_err)?;
            c.execute(
                "DELETE FROM awt_tasks WHERE id = $1 AND ($2::text IS NULL OR anima = $2) \
                 AND status NOT IN ('pending', 'running')",
                &[&id, &anima],
            )
            .await
            .map_err(db)?;
            Ok(())
        })
    }

    fn location(&self) -> String {
        format!(
            "the task database{}",
            self.anima.as_ref().map(|a| format!(" (anima {a})")).unwrap_or_default()
        )
    }

    fn worker_alive(&self, t: &Task) -> bool {
        let (pool, id) = (self.pool.clone(), t.task_id.clone());
        self.block(async move {
            let c = pool.get().await.map_err(pool_err)?;
            let row = c
                .query_opt(
                    "SELECT status = 'running' AND lease_until >= now() FROM awt_tasks WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(db)?;
            Ok(row.map(|r| r.get::<_, bool>(0)).unwrap_or(false))
        })
        // A database that cannot be asked is no proof the worker is gone.
        .unwrap_or(true)
    }

    fn wait_change(&self, id: &str, max: Duration) {
        let mut guard = self.listener.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            let url = self.url.clone();
            match self.block(async move { listen(&url, &["awt_task"]).await }) {
                Ok((client, rx)) => {
                    *guard = Some(Listener { _client: client, rx });
                    // Subscribed now: the caller reads the task again before waiting.
                    return;
                }
                Err(e) => {
                    tracing::debug!("cannot listen for task changes: {e}");
                    drop(guard);
                    std::thread::sleep(max);
                    return;
                }
            }
        }
        let l = guard.as_ref().expect("set above");
        let until = Instant::now() + max;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match l.rx.recv_timeout(left) {
                Ok(p) if p == id => return,
                Ok(_) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    *guard = None;
                    return;
                }
            }
        }
    }
}

/// A connection that LISTENs on `channels`; their payloads arrive on the receiver until the client is dropped or
/// the connection breaks (then the sender is dropped).
pub async fn listen(
    url: &str,
    channels: &[&str],
) -> io::Result<(tokio_postgres::Client, std::sync::mpsc::Receiver<String>)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let client = listen_with(url, channels, move |_, payload| tx.send(payload).is_ok()).await?;
    Ok((client, rx))
}

/// A LISTEN connection that calls `on(channel, payload)` for each notification (from the runtime's thread) until
/// it returns false or the connection ends.
pub async fn listen_with(
    url: &str,
    channels: &[&str],
    mut on: impl FnMut(String, String) -> bool + Send + 'static,
) -> io::Result<tokio_postgres::Client> {
    use futures_util::StreamExt;
    let mut cfg: tokio_postgres::Config = url
        .parse()
        .map_err(|e| io::Error::from(StoreError::Other(format!("the task database URL is not valid: {e}"))))?;
    cfg.connect_timeout(Duration::from_secs(5));
    let (client, mut conn) = cfg.connect(NoTls).await.map_err(db)?;
    tokio::spawn(async move {
        let mut stream = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
        while let Some(m) = stream.next().await {
            match m {
                Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                    if !on(n.channel().to_owned(), n.payload().to_owned()) {
                        break;
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    let sql: String = channels.iter().map(|c| format!("LISTEN {c};")).collect();
    client.batch_execute(&sql).await.map_err(db)?;
    Ok(client)
}

/// `animaworks-tool jobs migrate`: apply pending migrations.
pub async fn migrate_now(url: &str) -> Result<Vec<i32>, StoreError> {
    let mut cfg: tokio_postgres::Config = url
        .parse()
        .map_err(|e| StoreError::Other(format!("the task database URL is not valid: {e}")))?;
    cfg.connect_timeout(Duration::from_secs(5));
    let (mut client, conn) = cfg.connect(NoTls).await.map_err(|e| StoreError::Db(describe(&e)))?;
    let driver = tokio::spawn(conn);
    let out = schema::migrate(&mut client)
        .await
        .map_err(|e| StoreError::Db(describe(&e)));
    drop(client);
    let _ = driver.await;
    out
}
