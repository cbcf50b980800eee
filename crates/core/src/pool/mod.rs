//! Persistent workers (protocol.md §9) for long-lived callers: the MCP server, `use-tool --serve`, the library.
//!
//! A [`WorkerPool`] set on a [`Runner`](crate::Runner) makes a [`PreparedCall`](crate::call::PreparedCall) hand calls of
//! tools that declare `"persistent": true` and `"events": true` to a kept `TOOL --serve` process instead of
//! spawning one per call. Workers are keyed by tool file, file version and environment: a changed file or a
//! changed secret gets a new worker, never a stale one. Each worker takes one call at a time; concurrent calls to
//! one tool get more workers, up to `workers_per_tool`; a worker idle for `worker_idle_s` is stopped. A worker that
//! dies, misses a deadline, is cancelled or breaks the protocol is ended (its whole group) and never reused.

pub mod serve_process;
pub mod session;

use crate::cache::FileKey;
use crate::dirs::Dirs;
use crate::discover::ToolFile;
use crate::error::{CallError, Detail, ErrorCode};
use crate::settings::Settings;
use crate::stream::{Cancel, Observer};
use serde_json::Value;
pub use serve_process::{Fate, Job, Worker};
use std::collections::HashMap;
use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::{sleep, sleep_until, Instant};

/// Which process a pooled call needs: the tool file, where it runs, and the worker's environment.
pub struct WorkerSpec<'a> {
    pub file: &'a ToolFile,
    pub dirs: &'a Dirs,
    pub env: &'a [(OsString, OsString)],
    pub cwd: Option<&'a Path>,
    /// The anima's sandbox grants, as a key: workers started under other grants are not reused.
    pub grants: u64,
    /// Plans a new worker's sandbox (the call pipeline's planning, for every action the worker may serve).
    pub plan: &'a (dyn Fn() -> Result<crate::sandbox::Plan, CallError> + Sync),
    /// Receives the sandbox of the worker that runs the call, for its audit line.
    pub sandbox_seen: &'a Mutex<Option<Value>>,
    /// What the worker's credential broker answers for this call (a `.py` tool's worker has one).
    pub(crate) broker: Option<(
        crate::broker::CallScope,
        crate::broker::Ledger,
        crate::policy::mask::LateSecrets,
    )>,
    /// Who answers an MCP server's requests to its client (its session declares what that client declared).
    pub asks: Option<&'a crate::mcp_servers::asks::ClientAsks>,
}

/// The pool's limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolConfig {
    pub idle: Duration,
    pub per_tool: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            idle: crate::settings::DEFAULT_WORKER_IDLE,
            per_tool: crate::settings::DEFAULT_WORKERS_PER_TOOL,
        }
    }
}

impl PoolConfig {
    /// `worker_idle_s` and `workers_per_tool` of the runner's settings.
    pub fn from_settings(s: &Settings) -> PoolConfig {
        PoolConfig {
            idle: s.worker_idle,
            per_tool: s.workers_per_tool,
        }
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
    /// MCP servers are sessions, not workers ([`session`]).
    sessions: Arc<session::Sessions>,
    /// The sandbox plans its calls made only to decide, each taken again while nothing it depends on changed.
    decisions: crate::sandbox::ProbePlans,
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
                sessions: Arc::default(),
                decisions: Default::default(),
            }),
        }
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

    /// The remembered plans of calls made only to decide ([`crate::sandbox::Needs::Decide`]).
    pub(crate) fn decisions(&self) -> &crate::sandbox::ProbePlans {
        &self.inner.decisions
    }

    /// How many of its calls took a remembered decision rather than planning their sandbox again.
    pub fn decisions_remembered(&self) -> usize {
        self.inner.decisions.taken()
    }

    /// Process ids of the live sessions of the MCP server `name`.
    pub fn session_pids(&self, name: &str) -> Vec<u32> {
        self.inner.sessions.pids(name)
    }

    /// The MCP client behind `asks` says its roots changed: the servers whose sessions declared them hear it.
    pub fn roots_changed(&self, asks: &crate::mcp_servers::asks::ClientAsks) {
        self.inner.sessions.roots_changed(asks)
    }

    /// Run one call of a persistent tool on a worker (an MCP server's on its session). `job.request` is the §4
    /// line (newline included). Masking and auditing are the caller's (the call pipeline's).
    pub(crate) async fn run(
        &self,
        spec: &WorkerSpec<'_>,
        job: Job<'_>,
        obs: &mut dyn Observer,
        cancel: Cancel,
    ) -> Result<Value, CallError> {
        if spec.file.launch == crate::discover::Launch::Mcp && spec.file.mcp.is_some() {
            return self.inner.sessions.run(spec, job, obs, cancel).await;
        }
        let version = FileKey::of(spec.file, spec.dirs)
            .ok()
            .and_then(|k| serde_json::to_string(&k).ok())
            .unwrap_or_default();
        let mut h = std::hash::DefaultHasher::new();
        spec.env.hash(&mut h);
        spec.dirs.anima.hash(&mut h);
        spec.dirs.python.hash(&mut h);
        spec.cwd.hash(&mut h);
        spec.grants.hash(&mut h);
        let key = Key {
            path: spec.file.path.clone(),
            version,
            env: h.finish(),
        };
        let brokered = spec.broker.is_some();
        let spawn = || Worker::spawn(spec.file, spec.dirs, spec.env, spec.cwd, (spec.plan)()?, brokered);
        let (tool, action) = (job.tool, job.action);
        let mut lease = self
            .checkout(&key, spawn, job.deadline, cancel.clone())
            .await
            .map_err(|e| e.with(Detail::Tool, tool).with(Detail::Action, action))?;
        let w = lease.worker.as_mut().expect("a lease holds its worker");
        *spec.sandbox_seen.lock().expect("sandbox slot lock") = Some(w.sandbox_summary());
        if let Some(b) = &w.broker {
            crate::broker::switch(b, spec.broker.clone());
        }
        let (out, fate) = w.call(job, obs, cancel).await;
        if let Some(b) = &w.broker {
            crate::broker::switch(b, None);
        }
        lease.give_back(fate);
        out
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
