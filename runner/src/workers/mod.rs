//! Persistent workers (protocol.md §9) for long-lived callers: the MCP server, `use-tool --serve`, the library.
//!
//! A [`WorkerPool`] set on a [`Runner`](crate::Runner) makes [`Runner::run`](crate::Runner::run) hand calls of
//! tools that declare `"persistent": true` and `"events": true` to a kept `TOOL --serve` process instead of
//! spawning one per call. Workers are keyed by tool file, file version and environment: a changed file or a
//! changed secret gets a new worker, never a stale one. Each worker takes one call at a time; concurrent calls to
//! one tool get more workers, up to `workers_per_tool`; a worker idle for `worker_idle_s` is stopped. A worker that
//! dies, misses a deadline, is cancelled or breaks the protocol is ended (its whole group) and never reused.

pub mod worker;

use crate::cache::FileKey;
use crate::call::{mask_error, Masking, Resolved, Runner};
use crate::error::{CallError, ErrorCode};
use crate::manifest::Action;
use crate::policy::credentials::{self, ResolvedCredential};
use crate::policy::env::RUNNER_CONFIG_FILE;
use crate::policy::Masker;
use crate::stream::{Cancel, Observer};
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::{sleep, sleep_until, Instant};
pub use worker::{Fate, Job, Worker};

/// How long a worker may sit idle before it is stopped, unless `worker_idle_s` says otherwise.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(10);
/// How many workers one tool may have at once, unless `workers_per_tool` says otherwise.
pub const DEFAULT_PER_TOOL: usize = 4;

/// The pool's limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolConfig {
    pub idle: Duration,
    pub per_tool: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            idle: DEFAULT_IDLE,
            per_tool: DEFAULT_PER_TOOL,
        }
    }
}

impl PoolConfig {
    /// Read `"worker_idle_s"` and `"workers_per_tool"` from `<data dir>/animaworks-tool.json`; an absent file or
    /// key means the default. The error names the file and the key.
    pub fn load(data_dir: &Path) -> Result<PoolConfig, String> {
        let path = data_dir.join(RUNNER_CONFIG_FILE);
        let text = match std::fs::read_to_string(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PoolConfig::default()),
            Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
            Ok(t) => t,
        };
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: invalid JSON: {e}", path.display()))?;
        let mut c = PoolConfig::default();
        match v.get("worker_idle_s") {
            None | Some(Value::Null) => {}
            Some(n) => match n.as_f64().filter(|s| s.is_finite() && *s >= 0.0) {
                Some(s) => c.idle = Duration::from_secs_f64(s),
                None => {
                    return Err(format!(
                        "{}: worker_idle_s must be a number of seconds ≥ 0, not {n}",
                        path.display()
                    ))
                }
            },
        }
        match v.get("workers_per_tool") {
            None | Some(Value::Null) => {}
            Some(n) => match n.as_u64().filter(|k| *k >= 1) {
                Some(k) => c.per_tool = k as usize,
                None => {
                    return Err(format!(
                        "{}: workers_per_tool must be an integer ≥ 1, not {n}",
                        path.display()
                    ))
                }
            },
        }
        Ok(c)
    }
}

/// Which workers may serve a call: same file, same file version, same environment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    path: PathBuf,
    version: String,
    env: u64,
}

#[derive(Default)]
struct Group {
    idle: Vec<Worker>,
    busy: usize,
}

#[derive(Default)]
struct State {
    groups: HashMap<Key, Group>,
    /// The newest version seen of each file; workers of older versions are retired.
    current: HashMap<PathBuf, String>,
}

struct Inner {
    config: PoolConfig,
    state: Mutex<State>,
    freed: Notify,
}

/// Kept workers, shared by every call of a long-lived runner. Dropping the pool kills its workers.
pub struct WorkerPool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl WorkerPool {
    pub fn new(config: PoolConfig) -> WorkerPool {
        WorkerPool {
            inner: Arc::new(Inner {
                config,
                state: Mutex::new(State::default()),
                freed: Notify::new(),
            }),
        }
    }

    /// A pool with the limits of `<data dir>/animaworks-tool.json`.
    pub fn from_settings(data_dir: &Path) -> Result<WorkerPool, CallError> {
        PoolConfig::load(data_dir).map(WorkerPool::new).map_err(|e| {
            CallError::new(ErrorCode::Internal, format!("cannot use the runner settings: {e}"))
                .hint("fix worker_idle_s / workers_per_tool in that file")
        })
    }

    pub fn config(&self) -> PoolConfig {
        self.inner.config
    }

    /// Process ids of the idle workers of the tool file at `path`.
    pub fn idle_pids(&self, path: &Path) -> Vec<u32> {
        let st = self.inner.state.lock().expect("pool lock");
        st.groups
            .iter()
            .filter(|(k, _)| k.path == path)
            .flat_map(|(_, g)| g.idle.iter().map(|w| w.pid))
            .collect()
    }

    /// Run one call of a persistent tool on a worker. `request` is the §4 line (newline included).
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        &self,
        runner: &Runner,
        resolved: &Resolved,
        act: &Action,
        call_id: &str,
        request: Vec<u8>,
        timeout: Duration,
        max_output: u64,
        obs: &mut dyn Observer,
        cancel: Cancel,
    ) -> Result<Value, CallError> {
        let deadline = Instant::now() + timeout;
        let tool = resolved.file.name.as_str();
        let secrets = worker_secrets(runner, resolved, act)?;
        let masker = Masker::new(secrets.iter().map(|s| s.value.as_str()));
        let env = runner.env("worker", 0, &secrets, runner.env_policy(resolved))?;
        let version = FileKey::of(&resolved.file, &runner.dirs)
            .ok()
            .and_then(|k| serde_json::to_string(&k).ok())
            .unwrap_or_default();
        let mut h = std::hash::DefaultHasher::new();
        env.hash(&mut h);
        runner.dirs.anima.hash(&mut h);
        runner.dirs.python.hash(&mut h);
        let key = Key {
            path: resolved.file.path.clone(),
            version,
            env: h.finish(),
        };
        let spawn = || Worker::spawn(&resolved.file, &runner.dirs, &env);
        let mut lease = match self.checkout(&key, spawn, deadline, cancel.clone()).await {
            Ok(l) => l,
            Err(e) => {
                return Err(mask_error(
                    e.with("tool", tool).with("action", act.name.clone()),
                    &masker,
                ))
            }
        };
        let job = Job {
            tool,
            action: &act.name,
            call_id,
            request,
            deadline,
            timeout,
            max_output,
            spill_dir: &runner.dirs.outputs_dir(),
        };
        let w = lease.worker.as_mut().expect("a lease holds its worker");
        let (out, fate) = if masker.is_empty() {
            w.call(job, obs, cancel).await
        } else {
            w.call(
                job,
                &mut Masking {
                    inner: obs,
                    masker: &masker,
                },
                cancel,
            )
            .await
        };
        lease.give_back(fate);
        match out {
            Ok(v) => Ok(masker.mask_value(&v)),
            Err(e) => Err(mask_error(e, &masker)),
        }
    }

    /// An idle worker of `key`, else a new one when the tool is under its limit, else wait for one to be freed.
    async fn checkout(
        &self,
        key: &Key,
        spawn: impl Fn() -> Result<Worker, CallError>,
        deadline: Instant,
        mut cancel: Cancel,
    ) -> Result<Lease, CallError> {
        loop {
            let freed = self.inner.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let mut dead = Vec::new();
            let reserved = {
                let mut st = self.inner.state.lock().expect("pool lock");
                dead.extend(st.retire_older(key));
                let g = st.groups.entry(key.clone()).or_default();
                let mut found = None;
                while let Some(mut w) = g.idle.pop() {
                    if w.exited() {
                        dead.push(w);
                    } else {
                        found = Some(w);
                        break;
                    }
                }
                let reserved = found.is_some() || g.busy < self.inner.config.per_tool;
                if reserved {
                    g.busy += 1;
                }
                if let Some(w) = found {
                    drop(st);
                    retire_all(dead);
                    return Ok(Lease {
                        worker: Some(w),
                        key: key.clone(),
                        pool: Arc::downgrade(&self.inner),
                        slot: true,
                    });
                }
                reserved
            };
            retire_all(dead);
            if reserved {
                let mut lease = Lease {
                    worker: None,
                    key: key.clone(),
                    pool: Arc::downgrade(&self.inner),
                    slot: true,
                };
                lease.worker = Some(spawn()?);
                return Ok(lease);
            }
            tokio::select! {
                _ = freed => {}
                _ = sleep_until(deadline) => {
                    return Err(CallError::new(
                        ErrorCode::Timeout,
                        format!("no worker of {} was free before the deadline ({} busy)", key.path.display(), self.inner.config.per_tool),
                    )
                    .hint("raise --timeout, or workers_per_tool in <data dir>/animaworks-tool.json"));
                }
                _ = cancel.cancelled() => {
                    return Err(CallError::new(ErrorCode::Cancelled, "the call was cancelled while waiting for a free worker"));
                }
            }
        }
    }
}

impl State {
    /// Note `key`'s version as the file's newest; hand back the idle workers of every other version.
    fn retire_older(&mut self, key: &Key) -> Vec<Worker> {
        if self.current.get(&key.path) == Some(&key.version) {
            return Vec::new();
        }
        self.current.insert(key.path.clone(), key.version.clone());
        let mut out = Vec::new();
        for (k, g) in self.groups.iter_mut() {
            if k.path == key.path && k.version != key.version {
                out.append(&mut g.idle);
            }
        }
        self.groups.retain(|_, g| g.busy > 0 || !g.idle.is_empty());
        out
    }
}

fn retire_all(workers: Vec<Worker>) {
    for w in workers {
        tokio::spawn(w.retire());
    }
}

/// One worker out of the pool for one call. Dropped while still holding it (the call's future was dropped),
/// the worker's group is killed (`GroupGuard`) and its slot freed.
struct Lease {
    worker: Option<Worker>,
    key: Key,
    pool: Weak<Inner>,
    /// Holds one of the key's busy slots.
    slot: bool,
}

impl Lease {
    fn give_back(&mut self, fate: Fate) {
        let Some(mut w) = self.worker.take() else { return };
        let Some(inner) = self.pool.upgrade() else { return };
        self.slot = false;
        let mut st = inner.state.lock().expect("pool lock");
        let current = st.current.get(&self.key.path) == Some(&self.key.version);
        let g = st.groups.entry(self.key.clone()).or_default();
        g.busy = g.busy.saturating_sub(1);
        if fate == Fate::Keep && current {
            w.idle_since = Instant::now();
            g.idle.push(w);
            tokio::spawn(stop_idle_later(Arc::downgrade(&inner), inner.config.idle));
        } else if fate == Fate::Keep {
            tokio::spawn(w.retire());
        }
        drop(st);
        inner.freed.notify_waiters();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.slot {
            return;
        }
        // Dropping the worker (if any) kills its group.
        if let Some(inner) = self.pool.upgrade() {
            if let Some(g) = inner.state.lock().expect("pool lock").groups.get_mut(&self.key) {
                g.busy = g.busy.saturating_sub(1);
            }
            inner.freed.notify_waiters();
        }
    }
}

async fn stop_idle_later(pool: Weak<Inner>, idle: Duration) {
    sleep(idle).await;
    let Some(inner) = pool.upgrade() else { return };
    let now = Instant::now();
    let mut stale = Vec::new();
    {
        let mut st = inner.state.lock().expect("pool lock");
        for g in st.groups.values_mut() {
            let (old, keep): (Vec<Worker>, Vec<Worker>) = g.idle.drain(..).partition(|w| now >= w.idle_since + idle);
            g.idle = keep;
            stale.extend(old);
        }
        st.groups.retain(|_, g| g.busy > 0 || !g.idle.is_empty());
    }
    retire_all(stale);
}

/// A worker serves every action of its tool, so it gets every secret the tool declares: those of the tool and
/// of this action must be found (as in a one-shot call); those of other actions are added when they are.
fn worker_secrets(runner: &Runner, r: &Resolved, act: &Action) -> Result<Vec<ResolvedCredential>, CallError> {
    runner.secrets(r, Some(act))?;
    let others: Vec<_> = r
        .manifest
        .actions
        .iter()
        .flat_map(|a| a.profile.credentials.iter())
        .map(|d| tool_sdk::protocol::CredentialDecl {
            required: false,
            ..d.clone()
        })
        .collect();
    let decls = r
        .manifest
        .credentials
        .iter()
        .chain(act.profile.credentials.iter())
        .chain(others.iter());
    let caller: HashMap<String, String> = std::env::vars().collect();
    credentials::resolve_all(&runner.dirs.data, runner.dirs.anima_name().as_deref(), caller, decls).map_err(|e| {
        CallError::new(ErrorCode::PermissionDenied, e.to_string())
            .hint("set the credential in one of the places named, then call again")
            .with("tool", r.file.name.clone())
            .with("reason", "credential_missing")
    })
}
