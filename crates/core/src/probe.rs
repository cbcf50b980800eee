//! Reading a tool's `--schemas`, through the cache; probes of changed tools run in parallel, each with its own
//! timeout.

use crate::cache::{self, FileKey, Probed};
use crate::dirs::Dirs;
use crate::discover::{Launch, ToolFile};
use crate::policy::env;
use crate::sandbox::ProbePlans;
use crate::spawn::{self, Purpose};
use crate::stream::{self, Cancel, Drive, Ending, Quiet, Stdout};
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

/// The two environments a probe may get.
#[derive(Debug, Clone, Default)]
pub struct ProbeEnv {
    /// For tools on the new protocol.
    pub clean: Vec<(OsString, OsString)>,
    /// For `.py` files that do not import tool-sdk-py (AnimaWorks modules): `legacy_env` decides.
    pub legacy: Vec<(OsString, OsString)>,
}

impl ProbeEnv {
    /// The environment of `file`'s `--schemas`.
    pub fn for_file(&self, file: &ToolFile) -> &[(OsString, OsString)] {
        if file.launch == Launch::Python && !env::imports_sdk(&file.path) {
            &self.legacy
        } else {
            &self.clean
        }
    }
}

/// How long `--schemas` may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
const PROBE_MAX_OUTPUT: u64 = 16 * 1024 * 1024;

/// How long a file's `--schemas` may take: [`PROBE_TIMEOUT`], or for an MCP server its handshake's deadline and
/// 10 s for listing (a server is a whole program starting, e.g. `npx` or a Python SDK import).
fn probe_timeout(file: &ToolFile) -> Duration {
    match &file.mcp {
        Some(decl) => crate::mcp_servers::handshake(&decl.spec) + PROBE_TIMEOUT,
        None => PROBE_TIMEOUT,
    }
}

/// Run `TOOL --schemas` now, ignoring the cache.
pub async fn probe(file: &ToolFile, dirs: &Dirs, env: &ProbeEnv) -> Probed {
    probe_with(file, dirs, env, None).await
}

/// [`probe`], one of a listing's: its plan may be one the listing made for an earlier probe.
async fn probe_with(file: &ToolFile, dirs: &Dirs, env: &ProbeEnv, plans: Option<&ProbePlans>) -> Probed {
    // A server is started to be listed: it gets what its declaration gives its calls.
    let server_sandbox = file.mcp.as_ref().map(|d| crate::mcp_servers::sandbox_for(d));
    let needs = match &server_sandbox {
        Some(s) => crate::sandbox::Needs::Call(Some(s)),
        None => crate::sandbox::Needs::Probe,
    };
    let memo = plans.filter(|_| matches!(needs, crate::sandbox::Needs::Probe));
    let planned = match memo {
        Some(plans) => crate::sandbox::for_probe(dirs, file, plans),
        None => crate::sandbox::for_process(dirs, file, needs),
    };
    let plan = match planned {
        Ok(p) => p,
        Err(e) => return planning_failed(e),
    };
    let mut started =
        spawn::start_tool_async(file, dirs, Purpose::Schemas, env.for_file(file), None, Some(&plan)).await;
    let mut plan = plan;
    // A plan the listing made earlier can name a path that was removed since (another anima's folder): the
    // listing forgets its plans, and this probe is planned afresh, not from the memo, and started once more.
    if let (Some(plans), Err(e), true) = (memo, &started, plan.remembered()) {
        if e.detail(crate::error::Detail::Reason).and_then(|r| r.as_str()) == Some(spawn::SANDBOX_SETUP_FAILED) {
            plans.clear();
            drop(plan);
            plan = match crate::sandbox::for_process(dirs, file, crate::sandbox::Needs::Probe) {
                Ok(p) => p,
                Err(e) => return planning_failed(e),
            };
            started =
                spawn::start_tool_async(file, dirs, Purpose::Schemas, env.for_file(file), None, Some(&plan)).await;
        }
    }
    let child = match started {
        Ok(c) => c,
        Err(e) => {
            return Probed::Failed {
                reason: format!("{}; {}", e.message, e.hint.unwrap_or_default()),
                stderr_tail: String::new(),
                spawn: true,
                timed_out: false,
            }
        }
    };
    let call_id = format!("probe-{}", std::process::id());
    let d = Drive {
        tool: &file.name,
        action: "--schemas",
        call_id: &call_id,
        request: None,
        events: false,
        timeout: probe_timeout(file),
        max_output: PROBE_MAX_OUTPUT,
        spill: crate::spill::SpillTo::never(),
    };
    let f = stream::drive(child, d, &mut Quiet, Cancel::never()).await;
    let tail = f.stderr_tail.clone();
    let out = read_probe(file, f, tail);
    // A server's listing that failed confined says so, as a failed call does, and names the key that grants more.
    match (out, &file.mcp) {
        (
            Probed::Failed {
                reason,
                stderr_tail,
                spawn,
                timed_out,
            },
            Some(decl),
        ) if plan.is_confined() => Probed::Failed {
            reason: format!(
                "{reason}; {}",
                crate::mcp_servers::confined_words(decl, &plan, &stderr_tail)
            ),
            stderr_tail,
            spawn,
            timed_out,
        },
        (out, _) => out,
    }
}

/// A finished `--schemas` as what it says, or why not.
fn read_probe(file: &ToolFile, f: stream::Finished, tail: String) -> Probed {
    let failed = |reason: String, stderr_tail: String| Probed::Failed {
        reason,
        stderr_tail,
        spawn: false,
        timed_out: false,
    };
    match (f.ending, f.stdout) {
        (Ending::TimedOut, _) => Probed::Failed {
            reason: format!("--schemas did not answer within {} s", probe_timeout(file).as_secs()),
            stderr_tail: tail,
            spawn: false,
            timed_out: true,
        },
        (Ending::Cancelled, _) => failed("--schemas was cancelled".into(), tail),
        // Before the exit status: past the cap the probe is ended, so it died of our signal.
        (_, Stdout::Capped { .. }) => failed(
            "--schemas printed more than the 16 MiB allowed; it was ended, and nothing was written to disk".into(),
            tail,
        ),
        (Ending::Exited(s), _) if !s.success() => {
            let how = match s.code() {
                Some(c) => format!("exited with code {c}"),
                None => "was killed by a signal".into(),
            };
            let last = tail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_owned();
            let why = if last.is_empty() {
                String::new()
            } else {
                format!(": {last}")
            };
            failed(format!("--schemas {how}{why}"), tail)
        }
        (_, Stdout::Value(bytes)) => match crate::manifest::parse(&file.name, &bytes) {
            Ok(mut m) => {
                if let Some(decl) = &file.mcp {
                    crate::mcp_servers::enforce(&mut m, decl);
                    m.refused.extend(crate::mcp_servers::bridge::notes(&bytes));
                }
                Probed::Ok(m)
            }
            Err(e) => failed(e.to_string(), tail),
        },
        (_, Stdout::Bad(why) | Stdout::Cut(why)) => failed(format!("--schemas: {why}"), tail),
        (_, Stdout::Events { .. }) => failed("--schemas was read as an event stream".into(), tail),
    }
}

/// Not cached (like a spawn failure): the settings can be fixed without touching the tool.
fn planning_failed(e: crate::error::CallError) -> Probed {
    Probed::Failed {
        reason: format!("{}; {}", e.message, e.hint.unwrap_or_default()),
        stderr_tail: String::new(),
        spawn: true,
        timed_out: false,
    }
}

/// Whether a result came from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obtained {
    Cache,
    Probe,
}

/// The cached manifest of `file`, when the file is unchanged since it was probed; no process is started.
pub fn cached(file: &ToolFile, dirs: &Dirs) -> Option<Probed> {
    cache::load(dirs, file, &FileKey::of(file, dirs).ok()?)
}

/// The manifest of `file`: from the cache when the file is unchanged, else probed and stored.
pub async fn manifest(file: &ToolFile, dirs: &Dirs, env: &ProbeEnv) -> (Probed, Obtained) {
    manifest_with(file, dirs, env, None, None, false).await
}

/// [`manifest`] of a file that [`cached`] just missed: only its entry file is looked at again (another process
/// may have probed it meanwhile), not its folder's pack, which the miss read.
pub async fn manifest_after_miss(file: &ToolFile, dirs: &Dirs, env: &ProbeEnv) -> (Probed, Obtained) {
    manifest_with(file, dirs, env, None, None, true).await
}

/// What a listing's probes store together, a batch at a time and the rest at its end ([`cache::store_many`]).
type Pending = std::sync::Mutex<Vec<(ToolFile, FileKey, Probed)>>;

async fn manifest_with(
    file: &ToolFile,
    dirs: &Dirs,
    env: &ProbeEnv,
    plans: Option<&ProbePlans>,
    pending: Option<&Pending>,
    after_miss: bool,
) -> (Probed, Obtained) {
    let key = match FileKey::of(file, dirs) {
        Ok(k) => k,
        Err(e) => {
            return (
                Probed::Failed {
                    reason: format!("cannot read {}: {e}", file.path.display()),
                    stderr_tail: String::new(),
                    spawn: false,
                    timed_out: false,
                },
                Obtained::Probe,
            )
        }
    };
    // In a listing, only the entry file: the listing has looked at the pack, and read again by each of 1,000
    // probes it would be read 1,000 times.
    let again = match pending.is_some() || after_miss {
        true => cache::load_entry_file(dirs, file, &key),
        false => cache::load(dirs, file, &key),
    };
    if let Some(p) = again {
        return (p, Obtained::Cache);
    }
    if let Some(left) = cache::timed_out_recently(dirs, file, &key) {
        let reason = format!(
            "--schemas did not answer within {} s; not tried again for {left} s (`animaworks-tool refresh` tries now)",
            probe_timeout(file).as_secs()
        );
        return (
            Probed::Failed {
                reason,
                stderr_tail: String::new(),
                spawn: false,
                timed_out: true,
            },
            Obtained::Probe,
        );
    }
    let probed = probe_with(file, dirs, env, plans).await;
    // Why not cache a timeout: it may be load on the machine, not the tool. It is remembered for a while instead.
    let timed_out = matches!(&probed, Probed::Failed { timed_out: true, .. });
    if timed_out {
        cache::remember_timeout(dirs, file, &key);
    }
    let transient = timed_out || matches!(&probed, Probed::Failed { spawn, .. } if *spawn);
    // Why compare the key again: a file changed during its probe must not be cached under the old identity.
    if !transient && FileKey::of(file, dirs).ok().as_ref() == Some(&key) {
        match pending {
            Some(p) => {
                // Written as the listing goes, a batch at a time: a listing stopped before its end keeps most.
                let batch = {
                    let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
                    p.push((file.clone(), key, probed.clone()));
                    (p.len() >= cache::PACK_BATCH).then(|| std::mem::take(&mut *p))
                };
                if let Some(b) = batch {
                    cache::store_many(dirs, &b);
                }
            }
            None => cache::store(dirs, file, &key, &probed),
        }
    }
    (probed, Obtained::Probe)
}

/// The runtime cold probes run on: the caller's when it has threads of its own, else one of as many threads as
/// cores, made at the first cold probe and kept for the process's life. Why: on a one-thread runtime every
/// probe's own work (its sandbox's plan, the cgroup, the start, reading its answer, the cache entry) was serial,
/// milliseconds a tool on that thread, and a cold listing of many sandboxed tools took as long as that thread's
/// work. Why kept: a tool's death signal follows the thread that started it
/// (`spawn::starters`), so a thread that ended would kill the tools it started.
pub(crate) fn probe_runtime() -> tokio::runtime::Handle {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let here = Handle::current();
    if here.runtime_flavor() != RuntimeFlavor::CurrentThread {
        return here;
    }
    static PROBES: std::sync::OnceLock<Option<tokio::runtime::Runtime>> = std::sync::OnceLock::new();
    let made = PROBES.get_or_init(|| {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .thread_name("probe")
            .enable_all()
            .build()
            .map_err(|e| tracing::warn!("no threads for probes, probing on the caller's: {e}"))
            .ok()
    });
    made.as_ref().map_or(here, |rt| rt.handle().clone())
}

/// Manifests of many files; cache misses are probed in parallel (at most `4 × cores`, at least 8, at once:
/// `width::start_width`), on the probe runtime's threads (as many as cores, kept for the process's life).
///
/// Cache hits are read first, in order on this thread: a task per file cost more than reading its entry (a
/// warm listing of many tools spent much of its time spawning and joining them).
pub async fn manifests(files: Vec<ToolFile>, dirs: &Dirs, env: &ProbeEnv) -> Vec<(ToolFile, Probed, Obtained)> {
    let mut lookup = cache::Lookup::new(dirs);
    let mut out: Vec<Option<(ToolFile, Probed, Obtained)>> = Vec::with_capacity(files.len());
    let mut misses = Vec::new();
    for file in files {
        let hit = FileKey::as_scanned(&file, dirs)
            .ok()
            .and_then(|key| lookup.load(&file, &key));
        match hit {
            Some(p) => out.push(Some((file, p, Obtained::Cache))),
            None => {
                misses.push((out.len(), file));
                out.push(None);
            }
        }
    }
    if misses.is_empty() {
        return out.into_iter().flatten().collect();
    }
    let width = crate::width::start_width();
    let sem = Arc::new(tokio::sync::Semaphore::new(width));
    let dirs = Arc::new(dirs.clone());
    let env = Arc::new(env.clone());
    let plans = Arc::new(ProbePlans::default());
    let pending = Arc::new((misses.len() >= cache::PACK_MIN).then(Pending::default));
    let on = probe_runtime();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, file) in misses {
        let (sem, dirs, env, plans, pending) = (sem.clone(), dirs.clone(), env.clone(), plans.clone(), pending.clone());
        tasks.spawn_on(
            async move {
                let _permit = sem.acquire_owned().await.expect("semaphore open");
                // Looks at the cache again: another runner may have probed it meanwhile.
                let (p, s) = manifest_with(&file, &dirs, &env, Some(&plans), pending.as_ref().as_ref(), false).await;
                (i, file, p, s)
            },
            &on,
        );
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok((i, f, p, s)) = r {
            out[i] = Some((f, p, s));
        }
    }
    tracing::debug!("cold listing: {} probes took a plan an earlier one made", plans.taken());
    if let Some(p) = pending.as_ref() {
        cache::store_many(&dirs, &p.lock().unwrap_or_else(|e| e.into_inner()));
    }
    out.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::probe_runtime;
    use tokio::runtime::{Builder, RuntimeFlavor};

    /// A one-thread caller (every command but `use-tool --serve`) gets threads for its cold probes: on its own
    /// thread, the probes' own work was serial (a cold listing slower than `xargs -P4`). A caller with threads keeps
    /// its own runtime, and the probes' runtime is made once.
    #[test]
    fn cold_probes_run_on_threads_not_on_a_one_thread_callers() {
        let one = Builder::new_current_thread().enable_all().build().unwrap();
        let (a, b) = one.block_on(async { (probe_runtime(), probe_runtime()) });
        assert_eq!(a.runtime_flavor(), RuntimeFlavor::MultiThread);
        assert_eq!(a.id(), b.id(), "one runtime for every cold listing of the process");
        let many = Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (own, got) = many.block_on(async { (tokio::runtime::Handle::current().id(), probe_runtime().id()) });
        assert_eq!(own, got);
        // Probes really run there: a task spawned on it runs while the caller's one thread waits for it.
        let ran_on = one.block_on(async {
            a.spawn(async { std::thread::current().name().map(str::to_owned) })
                .await
        });
        assert_eq!(ran_on.unwrap().as_deref(), Some("probe"));
    }
}
