//! `animaworks-tool worker`: one long-lived worker per machine for the Postgres store. It claims tasks (see the
//! module above for the claim, the lease and the rescue), runs each through [`execute`] — the call path of the file
//! store's worker and of a foreground call — and writes progress and outcome back, every write fenced by its lease.

use super::{pool_err, record_of, schema, task_of, StoreError, COLUMNS};
use crate::config::{self, Backend, TasksConfig};
use crate::detached::{execute, record, take_new_progress, Shared, TaskObserver, PROGRESS_EVERY};
use crate::{now_s, secret_args, tool_version, Kind, Status, Task};
use awt_core::call::Runner;
use awt_core::dirs::Dirs;
use awt_core::error::{CallError, ErrorCode};
use awt_core::stream::Cancel;
use deadpool_postgres::Pool;
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `animaworks-tool worker`'s options.
#[derive(Debug, Clone, Default)]
pub struct WorkerOptions {
    /// Tasks this worker runs at once (all animas together).
    pub concurrency: usize,
    /// Only these animas' tasks (all when empty).
    pub animas: Vec<String>,
    /// Where the anima dirs are (`<data dir>/animas` by default).
    pub animas_dir: Option<PathBuf>,
}

/// Why a worker ended a task's call itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// `jobs cancel`.
    User,
    /// SIGTERM and the drain time passed.
    Shutdown,
    /// The heartbeat found the task no longer ours (rescued, or cancelled by force).
    LeaseLost,
    /// The heartbeat could not reach the database for half a lease.
    LeaseDoubt,
}

struct Local {
    cancel: tokio::sync::watch::Sender<bool>,
    reason: Cell<Option<Stop>>,
    attempt: i32,
    /// The tool's call has not returned yet.
    tool_running: Cell<bool>,
}

struct Worker {
    me: String,
    /// The task key ([`crate::mac`]): a row runs only with a valid MAC made with it.
    key: crate::mac::Key,
    pool: Pool,
    url: String,
    cfg: TasksConfig,
    dirs: Dirs,
    animas: PathBuf,
    only: Option<Vec<String>>,
    limit: i64,
    running: RefCell<HashMap<String, Rc<Local>>>,
    wake: tokio::sync::Notify,
    done: tokio::sync::Notify,
    stopping: Cell<bool>,
    skip: RefCell<HashMap<String, Instant>>,
    /// When the last heartbeat (or claim) that the database confirmed was sent.
    last_ok: Cell<Instant>,
    watchdog: RefCell<Option<std::process::ChildStdin>>,
    /// Outcomes waiting for the write under way ([`finish`]), and whether one is.
    outcomes: RefCell<Vec<Outcome>>,
    writing: Cell<bool>,
    /// Tasks whose notification file this worker wrote: their rows are cleared in one write ([`flush_notified`]).
    notified: RefCell<Vec<String>>,
}

fn say(msg: impl AsRef<str>) {
    use std::io::Write as _;
    // A closed stderr is no reason to panic.
    let _ = writeln!(std::io::stderr().lock(), "animaworks-tool worker: {}", msg.as_ref());
}

fn host() -> String {
    let u = rustix::system::uname();
    let name = u.nodename().to_bytes();
    if name.is_empty() {
        "host".into()
    } else {
        String::from_utf8_lossy(name).into_owned()
    }
}

/// Run the worker until SIGTERM or SIGINT; returns the exit code.
pub async fn run(runner: &Runner, opts: WorkerOptions) -> i32 {
    let cfg = match config::load(runner) {
        Ok(c) => c,
        Err(e) => {
            say(e.to_string());
            return ErrorCode::Usage.exit_code();
        }
    };
    let Backend::Postgres { url } = cfg.backend.clone() else {
        say(format!(
            "the worker serves the Postgres task store; {} sets no \"tasks\": {{\"backend\": \"postgres\", \"url\": …}} \
             (and ${} is not set)",
            runner.dirs.data.join("animaworks-tool.json").display(),
            config::URL_ENV
        ));
        return ErrorCode::Usage.exit_code();
    };
    let concurrency = opts.concurrency.max(1);
    let pool = match super::pool(&url, concurrency + 4) {
        Ok(p) => p,
        Err(e) => {
            say(e.to_string());
            return ErrorCode::Usage.exit_code();
        }
    };
    match migrate(&pool).await {
        Ok(v) if !v.is_empty() => say(format!("applied schema migrations {v:?}")),
        Ok(_) => {}
        Err(e) => {
            say(format!("cannot prepare the task database: {e}"));
            return ErrorCode::Internal.exit_code();
        }
    }
    let limit = match runner.settings() {
        Ok(s) => s.max_running_tasks as i64,
        Err(e) => {
            say(e.to_string());
            return e.code.exit_code();
        }
    };
    let key = match crate::mac::key(&runner.dirs.data) {
        Ok(k) => k,
        Err(e) => {
            say(format!("cannot read the task key: {e}"));
            return ErrorCode::Internal.exit_code();
        }
    };
    let mut dirs = runner.dirs.clone();
    dirs.anima = None;
    let w = Rc::new(Worker {
        key,
        me: format!("{}:{}:{}", host(), std::process::id(), &crate::new_task_id()[..6]),
        pool,
        url,
        animas: opts.animas_dir.clone().unwrap_or_else(|| dirs.data.join("animas")),
        dirs,
        only: (!opts.animas.is_empty()).then(|| opts.animas.clone()),
        limit,
        cfg,
        running: RefCell::new(HashMap::new()),
        wake: tokio::sync::Notify::new(),
        done: tokio::sync::Notify::new(),
        stopping: Cell::new(false),
        skip: RefCell::new(HashMap::new()),
        last_ok: Cell::new(Instant::now()),
        watchdog: RefCell::new(None),
        outcomes: RefCell::new(Vec::new()),
        writing: Cell::new(false),
        notified: RefCell::new(Vec::new()),
    });
    say(format!(
        "{} serving {} with {concurrency} slots (per-anima limit {limit}, lease {} s)",
        w.me,
        w.only
            .as_ref()
            .map(|a| a.join(", "))
            .unwrap_or_else(|| "every anima".into()),
        w.cfg.lease.as_secs_f64()
    ));
    if w.cfg.watchdog {
        match start_watchdog() {
            Ok(stdin) => *w.watchdog.borrow_mut() = Some(stdin),
            Err(e) => say(format!(
                "cannot start the lease watchdog ({e}); a paused worker's tools keep running"
            )),
        }
    }
    let local = tokio::task::LocalSet::new();
    local.run_until(serve(w, concurrency)).await
}

async fn migrate(pool: &Pool) -> Result<Vec<i32>, StoreError> {
    let mut c = pool.get().await.map_err(|e| StoreError::Db(pool_err(e).to_string()))?;
    schema::migrate(&mut c)
        .await
        .map_err(|e| StoreError::Db(super::describe(&e)))
}

async fn serve(w: Rc<Worker>, concurrency: usize) -> i32 {
    let (stop_tx, mut stop) = tokio::sync::watch::channel(false);
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) {
            tokio::task::spawn_local(async move {
                tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
                let _ = stop_tx.send(true);
                std::future::pending::<()>().await
            });
        }
    }
    tokio::task::spawn_local(listen_loop(w.clone()));
    tokio::task::spawn_local(heartbeat_loop(w.clone()));
    tokio::task::spawn_local(rescue_loop(w.clone()));
    loop {
        if *stop.borrow() {
            break;
        }
        let mut claimed = false;
        let free = concurrency.saturating_sub(w.running.borrow().len());
        if free > 0 {
            match claim(&w, free).await {
                Ok(tasks) => {
                    claimed = !tasks.is_empty();
                    for t in tasks {
                        // In the running set at once: the next claim counts the free slots from it.
                        let (local, cancel) = Local::new(&t);
                        w.running.borrow_mut().insert(t.task_id.clone(), local.clone());
                        tokio::task::spawn_local(run_task(w.clone(), t, local, cancel));
                    }
                    w.refresh_watchdog();
                }
                Err(e) => {
                    say(format!("cannot claim: {e}"));
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        if claimed {
            continue;
        }
        tokio::select! {
            _ = w.wake.notified() => {}
            _ = w.done.notified() => {}
            _ = tokio::time::sleep(w.cfg.poll) => {}
            _ = stop.wait_for(|v| *v) => {}
        }
    }
    w.stopping.set(true);
    let n = w.running.borrow().len();
    if n > 0 {
        say(format!(
            "stopping: {n} running task(s) may finish within {} s",
            w.cfg.drain.as_secs_f64()
        ));
    }
    let deadline = Instant::now() + w.cfg.drain;
    while !w.running.borrow().is_empty() && Instant::now() < deadline {
        tokio::select! {
            _ = w.done.notified() => {}
            _ = tokio::time::sleep(deadline.saturating_duration_since(Instant::now())) => {}
        }
    }
    let left: Vec<Rc<Local>> = w.running.borrow().values().cloned().collect();
    for l in &left {
        stop_task(l, Stop::Shutdown);
    }
    // The calls end their tools' groups (SIGTERM, grace, SIGKILL) and release the tasks.
    while !w.running.borrow().is_empty() {
        w.done.notified().await;
    }
    flush_notified(&w).await;
    say("stopped");
    0
}

fn stop_task(l: &Local, why: Stop) {
    if l.reason.get().is_none() {
        l.reason.set(Some(why));
    }
    let _ = l.cancel.send(true);
}

impl Worker {
    fn dirs_for(&self, anima: &str) -> Option<Dirs> {
        if !super::safe_anima(anima) {
            return None;
        }
        let mut d = self.dirs.clone();
        d.anima = Some(self.animas.join(anima));
        Some(d)
    }

    fn tools_running(&self) -> bool {
        self.running.borrow().values().any(|l| l.tool_running.get())
    }

    /// Tell the watchdog when to kill this worker: three quarters of a lease after the last confirmed renewal,
    /// while any tool runs; never while none does.
    fn refresh_watchdog(&self) {
        let mut wd = self.watchdog.borrow_mut();
        let Some(stdin) = wd.as_mut() else { return };
        let line = if self.tools_running() {
            let deadline = self.last_ok.get() + self.cfg.lease.mul_f64(0.75);
            format!(
                "arm {}\n",
                deadline.saturating_duration_since(Instant::now()).as_millis()
            )
        } else {
            "disarm\n".to_owned()
        };
        if stdin.write_all(line.as_bytes()).is_err() {
            *wd = None;
        }
    }

    fn skipped(&self) -> Vec<String> {
        let mut s = self.skip.borrow_mut();
        // Why forget: the tool may be deployed here in the meantime.
        s.retain(|_, at| at.elapsed() < Duration::from_secs(10));
        s.keys().cloned().collect()
    }
}

/// Why a pending row cannot run here: this worker's checks of one claimed row (the row's own record, its anima's
/// folder, the tool file's version). `Ok` is the task to run.
fn check_row(w: &Worker, row: &tokio_postgres::Row) -> Result<Task, String> {
    let anima: String = row.get(7);
    match (task_of(row), w.dirs_for(&anima)) {
        (Err(e), _) => Err(format!("cannot read the task: {e}")),
        (Ok(_), None) => Err(format!("the anima name {anima:?} is not a folder name")),
        // The row's anima (which the claim filtered on) and the signed record's must be one: a task runs only as
        // its own anima, under that anima's folder and grants.
        (Ok(t), Some(_)) if t.anima_name != anima => Err(format!(
            "is a task of the anima {:?} in a row of {anima:?}; never run",
            t.anima_name
        )),
        (Ok(t), Some(d)) => match d.anima.as_ref().filter(|a| a.is_dir()) {
            None => Err(format!("has no anima dir {}", w.animas.join(&anima).display())),
            Some(_) if matches!(crate::mac::verify(&w.key, &t, None), crate::mac::Verdict::OtherKey(_)) => {
                Err("does not hold the task key this task was signed with (tasks.key, docs/background-tasks.md)".into())
            }
            Some(_) => tool_version::check(&d, &t).map(|_| t).map_err(|e| e.to_string()),
        },
    }
}

/// The claim's statements. [`CLAIM_LOCK`] takes each anima's advisory lock in the order given (name order, so two
/// workers' claims never wait on each other in a circle). [`CLAIM_TAKE`] is a statement of its own after it, so that its snapshot is
/// taken once the locks are held (READ COMMITTED): it counts each anima's running tasks as the last claim of that
/// anima committed them, and takes a row only while its rank within its anima is within the room left.
///
/// [`CLAIM_SELECT`] leaves out the animas already at their limit in its snapshot before it locks a row: a row lock
/// gives the transaction an id, and its commit then waits for the WAL to reach the disk. A claim woken by a freed
/// slot that another worker already took is then a read, not a write.
const CLAIM_SELECT: &str = "WITH at_limit AS (SELECT anima FROM awt_tasks WHERE status = 'running' \
     GROUP BY anima HAVING count(*) >= $5) \
     SELECT {COLUMNS}, id, anima, (SELECT count(*) FROM awt_tasks AS r \
     WHERE r.anima = awt_tasks.anima AND r.status = 'running') FROM awt_tasks WHERE status = 'pending' \
     AND ($1::text[] IS NULL OR anima = ANY($1)) AND NOT (id = ANY($2)) AND NOT (anima = ANY($3)) \
     AND anima NOT IN (SELECT anima FROM at_limit) \
     ORDER BY created_at, id LIMIT $4 FOR UPDATE SKIP LOCKED";
const CLAIM_LOCK: &str = "SELECT count(pg_advisory_xact_lock(hashtextextended('awt-anima:' || a, 0))) \
     FROM unnest($1::text[]) AS a";
const CLAIM_TAKE: &str = "WITH want AS (SELECT * FROM unnest($1::text[], $4::jsonb[], $5::text[], $6::int8[]) \
     AS u(id, rec, anima, rank)), \
     room AS (SELECT d.anima, $7::int8 - (SELECT count(*) FROM awt_tasks r WHERE r.anima = d.anima \
     AND r.status = 'running') AS left_ FROM (SELECT DISTINCT anima FROM want) AS d) \
     UPDATE awt_tasks AS a SET status = 'running', worker = $2, attempt = a.attempt + 1, \
     lease_until = now() + make_interval(secs => $3), record = want.rec \
     FROM want JOIN room USING (anima) WHERE a.id = want.id AND want.rank <= room.left_ \
     RETURNING a.id, a.attempt, extract(epoch from a.lease_until)::float8";

/// Claim up to `n` of the oldest tasks this worker can run, under the per-anima limit, in one transaction of two
/// round trips: `BEGIN` and the rows (`FOR UPDATE SKIP LOCKED LIMIT n`) in one; each anima's advisory lock, one
/// update of every row that fits under its anima's limit, and `COMMIT` in the other, pipelined, so that an anima's
/// lock is held for one round trip and the commit. Rows this worker cannot run are noted and skipped; rows past an
/// anima's limit stay pending.
async fn claim(w: &Worker, n: usize) -> std::io::Result<Vec<Task>> {
    let mut skip = w.skipped();
    let mut full: Vec<String> = Vec::new();
    let limit = i64::try_from(n.max(1)).unwrap_or(i64::MAX);
    for _ in 0..64 {
        let sent = Instant::now();
        let c = w.pool.get().await.map_err(pool_err)?;
        match claim_once(w, &c, &mut skip, &mut full, limit).await {
            Ok(Some(taken)) => {
                if !taken.is_empty() && !w.tools_running() {
                    w.last_ok.set(sent);
                }
                return Ok(taken);
            }
            Ok(None) => continue,
            Err(e) => {
                // The connection may be inside the transaction: it does not go back to the pool.
                drop(deadpool_postgres::Object::take(c));
                return Err(e);
            }
        }
    }
    Ok(Vec::new())
}

/// One claim transaction: the tasks taken, or `None` to look again (rows were noted, or an anima was full).
async fn claim_once(
    w: &Worker,
    c: &deadpool_postgres::Client,
    skip: &mut Vec<String>,
    full: &mut Vec<String>,
    limit: i64,
) -> std::io::Result<Option<Vec<Task>>> {
    let select = c
        .prepare_cached(&CLAIM_SELECT.replace("{COLUMNS}", COLUMNS))
        .await
        .map_err(super::db)?;
    let lock = c.prepare_cached(CLAIM_LOCK).await.map_err(super::db)?;
    let take = c.prepare_cached(CLAIM_TAKE).await.map_err(super::db)?;
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] = [&w.only, &*skip, &*full, &limit, &w.limit];
    // Pipelined: both are sent before the first answer is read.
    let (begun, rows) = tokio::join!(biased; c.batch_execute("BEGIN"), c.query(&select, &params));
    begun.map_err(super::db)?;
    let rows = match rows {
        Ok(r) => r,
        Err(e) => {
            let _ = c.batch_execute("ROLLBACK").await;
            return Err(super::db(e));
        }
    };
    if rows.is_empty() {
        c.batch_execute("COMMIT").await.map_err(super::db)?;
        return Ok(Some(Vec::new()));
    }
    let mut runnable: Vec<(String, Task)> = Vec::new();
    let mut noted = false;
    for row in &rows {
        let id: String = row.get(6);
        // An anima already at its limit as this snapshot saw it is not locked for: when the workers woken by one
        // freed slot all claim, only those that can take a row queue on the lock. A slot freed after this
        // snapshot sends its wake after it, so the next claim looks again.
        if row.get::<_, i64>(8) >= w.limit {
            let anima: String = row.get(7);
            if !full.contains(&anima) {
                full.push(anima);
            }
            continue;
        }
        // A row whose MAC is not the runner's is moved aside, never run (a tool that reached the database
        // cannot make a worker act as another anima).
        if let Ok(t) = task_of(row) {
            if let crate::mac::Verdict::Refused(why) = crate::mac::verify(&w.key, &t, None) {
                refuse(w, c, &t, &why).await?;
                continue;
            }
        }
        match check_row(w, row) {
            Ok(t) => runnable.push((row.get(7), t)),
            Err(why) => {
                let note = format!("worker {} {why}", w.me);
                c.execute(
                    "UPDATE awt_tasks SET record = jsonb_set(record, '{waiting}', to_jsonb($2::text)) \
                     WHERE id = $1 AND record->>'waiting' IS DISTINCT FROM $2",
                    &[&id, &note],
                )
                .await
                .map_err(super::db)?;
                w.skip.borrow_mut().insert(id.clone(), Instant::now());
                skip.push(id);
                noted = true;
            }
        }
    }
    if runnable.is_empty() {
        c.batch_execute("COMMIT").await.map_err(super::db)?;
        // Fewer rows than asked for: no other pending row was free to take, however many animas were full.
        let all_seen = (rows.len() as i64) < limit;
        return Ok(if noted || (!full.is_empty() && !all_seen) {
            None
        } else {
            Some(Vec::new())
        });
    }
    let mut animas: Vec<String> = runnable.iter().map(|(a, _)| a.clone()).collect();
    animas.sort_unstable();
    animas.dedup();
    let now = now_s();
    let mut rank: HashMap<String, i64> = HashMap::new();
    let mut ranks: Vec<i64> = Vec::with_capacity(runnable.len());
    for (anima, t) in runnable.iter_mut() {
        let r = rank.entry(anima.clone()).or_insert(0);
        *r += 1;
        ranks.push(*r);
        t.status = Status::Running;
        t.started_at = Some(now);
        t.updated_at = now;
        t.pid = None;
        t.pid_start_time = None;
        t.boot_id = None;
        t.progress = None;
        t.queue.waiting = None;
    }
    let ids: Vec<&str> = runnable.iter().map(|(_, t)| t.task_id.as_str()).collect();
    let records: Vec<Value> = runnable.iter().map(|(_, t)| record_of(t)).collect();
    let of: Vec<&str> = runnable.iter().map(|(a, _)| a.as_str()).collect();
    let lease = w.cfg.lease.as_secs_f64();
    let lock_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&animas];
    let take_params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] =
        [&ids, &w.me, &lease, &records, &of, &ranks, &w.limit];
    // Pipelined: the locks, the update and the commit go out together; the locks are held for one round trip.
    let (locked, updated, committed) = tokio::join!(
        biased;
        c.execute(&lock, &lock_params),
        c.query(&take, &take_params),
        c.batch_execute("COMMIT")
    );
    locked.map_err(super::db)?;
    let rows = updated.map_err(super::db)?;
    // After a failed statement the server ends the transaction at this COMMIT with a rollback.
    committed.map_err(super::db)?;
    let held: HashMap<String, (i32, Option<f64>)> = rows.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))).collect();
    let mut taken: Vec<Task> = Vec::with_capacity(held.len());
    for (anima, mut t) in runnable {
        let Some((attempt, lease_until)) = held.get(&t.task_id).copied() else {
            if !full.contains(&anima) {
                full.push(anima);
            }
            continue;
        };
        t.queue.attempt = Some(attempt as u32);
        t.queue.worker = Some(w.me.clone());
        t.queue.lease_until = lease_until;
        taken.push(t);
    }
    if taken.is_empty() && (noted || !full.is_empty()) {
        return Ok(None);
    }
    Ok(Some(taken))
}

/// Move a row whose MAC is not valid aside (`awt_tasks_refused`, with the reason), write its anima's audit line,
/// and say so: it is never run.
async fn refuse(w: &Worker, tx: &tokio_postgres::Client, t: &Task, why: &str) -> std::io::Result<()> {
    tx.execute(
        "WITH moved AS (DELETE FROM awt_tasks WHERE id = $1 RETURNING *) \
         INSERT INTO awt_tasks_refused (id, anima, reason, task) SELECT id, anima, $2, to_jsonb(moved) FROM moved",
        &[&t.task_id, &why],
    )
    .await
    .map_err(super::db)?;
    let dir = w.dirs_for(&t.anima_name).and_then(|d| d.anima);
    crate::mac::audit_refused(dir.as_deref(), t, why);
    say(format!(
        "refused task {} (moved to awt_tasks_refused): {why}",
        t.task_id
    ));
    Ok(())
}

/// The arguments with the worker's own credentials put back where the submitter's were (see [`secret_args`]).
pub async fn unmask(runner: &Runner, task: &Task) -> Result<Value, CallError> {
    let Some(tpl) = &task.queue.arg_secrets else {
        return Ok(task.tool_args.clone());
    };
    let action = match task.kind {
        Kind::Action => Some(task.action.as_str()),
        Kind::Cli => None,
    };
    let secrets = runner.declared_secrets(&task.tool, action).await?;
    secret_args::fill(&task.tool_args, tpl, &secrets)
}

impl Local {
    /// A claimed task's local state (its tool counts as running from the claim on), and its call's cancel.
    fn new(task: &Task) -> (Rc<Local>, Cancel) {
        let (tx, cancel) = Cancel::new();
        let local = Rc::new(Local {
            cancel: tx,
            reason: Cell::new(None),
            attempt: task.queue.attempt.unwrap_or(1) as i32,
            tool_running: Cell::new(true),
        });
        (local, cancel)
    }
}

/// Run a claimed task, already in `w.running` as `local`.
async fn run_task(w: Rc<Worker>, mut task: Task, local: Rc<Local>, cancel: Cancel) {
    let id = task.task_id.clone();
    let attempt = local.attempt;
    let runner = Runner::new(w.dirs_for(&task.anima_name).expect("checked at claim"));
    let shared = Arc::new(Mutex::new(Shared::default()));
    let mut obs = TaskObserver::new(shared.clone());
    let outcome =
        match unmask(&runner, &task).await {
            Err(e) => Err(e),
            Ok(args) => {
                let work = execute(&runner, &task, args, &mut obs, cancel);
                let progress =
                    async {
                        loop {
                            tokio::time::sleep(PROGRESS_EVERY).await;
                            let Some(p) = take_new_progress(&shared) else { continue };
                            let Ok(c) = w.pool.get().await else { continue };
                            let _ = c
                        .execute(
                            "UPDATE awt_tasks SET record = record || jsonb_build_object('progress', $4::jsonb, \
                             'updated_at', $5::float8) WHERE id = $1 AND status = 'running' AND worker = $2 \
                             AND attempt = $3",
                            &[&id, &w.me, &attempt, &serde_json::to_value(&p).unwrap_or(Value::Null), &now_s()],
                        )
                        .await;
                        }
                    };
                tokio::select! {
                    out = work => out,
                    _ = progress => unreachable!("the progress loop never ends"),
                }
            }
        };
    local.tool_running.set(false);
    w.refresh_watchdog();
    if let Some(p) = shared.lock().unwrap_or_else(|p| p.into_inner()).latest.clone() {
        task.progress = Some(p);
    }
    let reason = local.reason.get();
    let cancelled = matches!(&outcome, Err(e) if e.code == ErrorCode::Cancelled);
    let max = w.cfg.max_attempts as i32;
    match reason {
        Some(Stop::LeaseLost) => {
            say(format!("task {id}: lost its lease; the rescuer's outcome stands"));
        }
        Some(Stop::Shutdown) if cancelled => {
            if task.queue.idempotent && attempt < max {
                release(
                    &mut task,
                    format!("released: worker {} was stopped before the task ended", w.me),
                );
            } else {
                record(&mut task, &outcome, true);
            }
            finish(&w, &task, attempt).await;
        }
        Some(Stop::LeaseDoubt) if cancelled => {
            if task.queue.idempotent && attempt < max {
                release(
                    &mut task,
                    format!("released: worker {} lost contact with the database", w.me),
                );
            } else {
                task.queue.worker = Some(w.me.clone());
                super::rescued(&mut task, false, 0);
            }
            finish(&w, &task, attempt).await;
        }
        _ => {
            record(&mut task, &outcome, false);
            finish(&w, &task, attempt).await;
        }
    }
    w.running.borrow_mut().remove(&id);
    w.refresh_watchdog();
    w.done.notify_one();
}

fn release(t: &mut Task, why: String) {
    t.status = Status::Pending;
    t.started_at = None;
    t.progress = None;
    t.updated_at = now_s();
    t.queue.waiting = Some(why);
}

/// An outcome waiting to be written with others ([`finish`]).
struct Outcome {
    task: Task,
    attempt: i32,
    give_up: Instant,
    /// Whether the fenced write matched (the task was still this worker's); an error once it gave up.
    done: tokio::sync::oneshot::Sender<Result<bool, String>>,
}

/// Write the task's outcome, fenced by the claim; retried while the database is away (a restart), for at most a
/// few leases. A fence that no longer matches means the task was taken from this worker: its outcome stands.
/// Outcomes that arrive while one write is under way go together in the next (one round trip for many tasks).
async fn finish(w: &Rc<Worker>, t: &Task, attempt: i32) {
    let (done, result) = tokio::sync::oneshot::channel();
    w.outcomes.borrow_mut().push(Outcome {
        task: t.clone(),
        attempt,
        give_up: Instant::now() + w.cfg.lease * 4,
        done,
    });
    if !w.writing.replace(true) {
        // Its own task: the writer is no task's, so no task's slot waits for others' outcomes.
        tokio::task::spawn_local(write_outcomes(w.clone()));
    }
    match result.await {
        Ok(Ok(true)) => {
            if t.status.is_final() {
                write_notifications(w, std::slice::from_ref(t));
            }
        }
        Ok(Ok(false)) => say(format!(
            "task {}: no longer held by this worker (rescued or cancelled); its outcome here is dropped",
            t.task_id
        )),
        Ok(Err(e)) => say(format!("task {}: cannot write the outcome: {e}", t.task_id)),
        Err(_) => say(format!("task {}: its outcome was not written", t.task_id)),
    }
}

/// Write every queued outcome, in batches, until none is left.
async fn write_outcomes(w: Rc<Worker>) {
    struct Writing<'a>(&'a Cell<bool>);
    impl Drop for Writing<'_> {
        fn drop(&mut self) {
            self.0.set(false);
        }
    }
    let _writing = Writing(&w.writing);
    let mut pause = Duration::from_millis(100);
    let mut batch: Vec<Outcome> = Vec::new();
    loop {
        batch.append(&mut w.outcomes.borrow_mut());
        if batch.is_empty() {
            return;
        }
        let ids: Vec<&str> = batch.iter().map(|o| o.task.task_id.as_str()).collect();
        let attempts: Vec<i32> = batch.iter().map(|o| o.attempt).collect();
        let statuses: Vec<&str> = batch.iter().map(|o| o.task.status.as_str()).collect();
        let records: Vec<Value> = batch.iter().map(|o| record_of(&o.task)).collect();
        let finals: Vec<bool> = batch.iter().map(|o| o.task.status.is_final()).collect();
        let res = async {
            let c = w.pool.get().await.map_err(pool_err)?;
            let st = c.prepare_cached(
                "UPDATE awt_tasks AS a SET status = u.status, record = u.rec, lease_until = NULL, \
                 worker = CASE WHEN u.status = 'pending' THEN NULL ELSE a.worker END, \
                 notify_after = CASE WHEN u.fin THEN now() + make_interval(secs => $7) END \
                 FROM unnest($1::text[], $3::int4[], $4::text[], $5::jsonb[], $6::bool[]) AS u(id, attempt, status, rec, fin) \
                 WHERE a.id = u.id AND a.status = 'running' AND a.worker = $2 AND a.attempt = u.attempt \
                 RETURNING a.id",
            )
            .await
            .map_err(super::db)?;
            c.query(&st, &[&ids, &w.me, &attempts, &statuses, &records, &finals, &w.cfg.lease.as_secs_f64()])
                .await
                .map_err(super::db)
        }
        .await;
        match res {
            Ok(rows) => {
                let held: std::collections::HashSet<String> = rows.iter().map(|r| r.get(0)).collect();
                for o in batch.drain(..) {
                    let _ = o.done.send(Ok(held.contains(&o.task.task_id)));
                }
                pause = Duration::from_millis(100);
            }
            Err(e) => {
                let now = Instant::now();
                let (late, keep): (Vec<Outcome>, Vec<Outcome>) = batch.into_iter().partition(|o| now >= o.give_up);
                for o in late {
                    let _ = o.done.send(Err(e.to_string()));
                }
                batch = keep;
                tracing::debug!("cannot write {} outcome(s) yet: {e}", batch.len());
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
    }
}

async fn heartbeat_loop(w: Rc<Worker>) {
    let every = w.cfg.lease / 4;
    loop {
        tokio::time::sleep(every).await;
        let held: Vec<(String, i32)> = w
            .running
            .borrow()
            .iter()
            .map(|(id, l)| (id.clone(), l.attempt))
            .collect();
        if held.is_empty() {
            w.last_ok.set(Instant::now());
            continue;
        }
        let ids: Vec<String> = held.iter().map(|h| h.0.clone()).collect();
        let sent = Instant::now();
        let lease = w.cfg.lease.as_secs_f64();
        let res = tokio::time::timeout(every, async {
            let c = w.pool.get().await.map_err(pool_err)?;
            c.query(
                "UPDATE awt_tasks SET lease_until = now() + make_interval(secs => $2) \
                 WHERE worker = $1 AND status = 'running' AND id = ANY($3) RETURNING id, attempt, cancel_requested",
                &[&w.me, &lease, &ids],
            )
            .await
            .map_err(super::db)
        })
        .await;
        match res {
            Ok(Ok(rows)) => {
                w.last_ok.set(sent);
                let mine: HashMap<String, (i32, bool)> = rows
                    .iter()
                    .map(|r| (r.get::<_, String>(0), (r.get::<_, i32>(1), r.get::<_, bool>(2))))
                    .collect();
                for (id, attempt) in &held {
                    let Some(l) = w.running.borrow().get(id).cloned() else {
                        continue;
                    };
                    match mine.get(id) {
                        Some((a, _)) if a != attempt => stop_task(&l, Stop::LeaseLost),
                        None => stop_task(&l, Stop::LeaseLost),
                        Some((_, true)) => stop_task(&l, Stop::User),
                        Some((_, false)) => {}
                    }
                }
                w.refresh_watchdog();
            }
            Ok(Err(e)) => say(format!("cannot renew the lease: {e}")),
            Err(_) => say("cannot renew the lease: no answer"),
        }
        if w.last_ok.get().elapsed() > w.cfg.lease / 2 {
            let doubtful: Vec<Rc<Local>> = w
                .running
                .borrow()
                .values()
                .filter(|l| l.tool_running.get())
                .cloned()
                .collect();
            if !doubtful.is_empty() {
                say(format!(
                    "no lease renewal for half a lease: ending {} tool(s) before another worker may take them",
                    doubtful.len()
                ));
            }
            for l in doubtful {
                stop_task(&l, Stop::LeaseDoubt);
            }
        }
    }
}

async fn rescue_loop(w: Rc<Worker>) {
    let every = w.cfg.lease / 2;
    loop {
        // Why the jitter: workers started together should not all rescue at the same instant.
        let jitter = Duration::from_millis(u64::from(std::process::id() % 250));
        tokio::time::sleep(every + jitter).await;
        match super::rescue(&w.pool, w.cfg.max_attempts, w.cfg.lease.as_secs_f64()).await {
            Ok(finals) => write_notifications(&w, &finals),
            Err(e) => tracing::debug!("rescue: {e}"),
        }
        match super::owed(&w.pool, w.cfg.lease.as_secs_f64()).await {
            Ok(owed) => write_notifications(&w, &owed),
            Err(e) => tracing::debug!("owed notifications: {e}"),
        }
        flush_notified(&w).await;
    }
}

/// Write the notification files of tasks that ended; their rows are cleared at the next [`flush_notified`].
fn write_notifications(w: &Worker, finals: &[Task]) {
    for t in finals {
        match super::write_notification(&w.dirs, &w.animas, t) {
            Ok(()) => w.notified.borrow_mut().push(t.task_id.clone()),
            Err(e) => say(format!("cannot write the notification of {}: {e}", t.task_id)),
        }
    }
}

/// Clear the rows whose notification files were written (kept for the next try when the database is away).
async fn flush_notified(w: &Worker) {
    let ids = std::mem::take(&mut *w.notified.borrow_mut());
    if let Err(e) = super::notified(&w.pool, &ids).await {
        tracing::debug!("cannot clear {} notified task(s) yet: {e}", ids.len());
        w.notified.borrow_mut().extend(ids);
    }
}

async fn listen_loop(w: Rc<Worker>) {
    loop {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
        match super::listen_with(&w.url, &["awt_pending", "awt_cancel"], move |c, p| {
            tx.send((c, p)).is_ok()
        })
        .await
        {
            Ok(client) => {
                // Anything sent while we were not listening: look again.
                w.wake.notify_one();
                while let Some((channel, payload)) = rx.recv().await {
                    if channel == "awt_cancel" {
                        if let Some(l) = w.running.borrow().get(&payload).cloned() {
                            stop_task(&l, Stop::User);
                        }
                    } else {
                        w.wake.notify_one();
                    }
                }
                drop(client);
            }
            Err(e) => tracing::debug!("listen: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Start `animaworks-tool jobs watchdog` with a pipe to its stdin.
fn start_watchdog() -> std::io::Result<std::process::ChildStdin> {
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["jobs", "watchdog"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    let mut child = awt_sys::reap::start_owned(|| cmd.spawn(), |c| Some(c.id()))?;
    child.stdin.take().ok_or_else(|| std::io::Error::other("no stdin"))
}

/// `animaworks-tool jobs watchdog` (internal): kills its parent, the worker, when a deadline it was given passes
/// without a new one. The worker's guardian then kills its tools. Lines on stdin: `arm <ms>`, `disarm`.
pub fn watchdog_main() -> i32 {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use std::os::fd::AsFd;
    let Some(parent) = rustix::process::getppid() else {
        return 1;
    };
    let stdin = std::io::stdin();
    let mut deadline: Option<Instant> = None;
    let mut buf = Vec::new();
    loop {
        let timeout = deadline.map(|d| {
            let left = d.saturating_duration_since(Instant::now());
            Timespec {
                tv_sec: left.as_secs() as _,
                tv_nsec: left.subsec_nanos() as _,
            }
        });
        let mut pfd = [PollFd::new(&stdin, PollFlags::IN)];
        let n = match poll(&mut pfd, timeout.as_ref()) {
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return 1,
        };
        if n == 0 {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                // The pid is checked to be still our parent (not reused by another process).
                if rustix::process::getppid() == Some(parent) {
                    eprintln!(
                        "animaworks-tool worker: watchdog: the worker {} did not renew its lease in time (paused \
                         or hung); killing it so that its tools end before another worker takes its tasks",
                        parent.as_raw_pid()
                    );
                    let _ = rustix::process::kill_process(parent, rustix::process::Signal::KILL);
                }
                return 0;
            }
            continue;
        }
        let mut chunk = [0u8; 512];
        let r = match rustix::io::read(stdin.as_fd(), &mut chunk) {
            Ok(0) | Err(_) => return 0,
            Ok(r) => r,
        };
        buf.extend_from_slice(&chunk[..r]);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            let mut words = line.split_whitespace();
            match (words.next(), words.next().and_then(|m| m.parse::<u64>().ok())) {
                (Some("arm"), Some(ms)) => deadline = Some(Instant::now() + Duration::from_millis(ms)),
                (Some("disarm"), _) => deadline = None,
                _ => {}
            }
        }
        if buf.len() > 4096 {
            buf.clear();
        }
    }
}
