//! MCP server sessions (docs/mcp-servers.md): a declared server is one MCP session, not a worker. Its bridge
//! (`__mcp-bridge SPEC --serve`) takes every call at once, each a `tools/call` of its own id, so the server's
//! state (a counter, a browser, a database connection) is the same for every call of the runner.
//!
//! One session per server and key (the pool's: the declaration, the environment with its secrets, the anima and
//! its grants), or up to the entry's `workers`. A session lives as long as the runner, or until it has been idle
//! for the entry's `idle_s`. It is started again only when its process exited, and the first call on the new one
//! hears so in a log event. A cancelled or timed-out call is cancelled in the server (the bridge sends
//! `notifications/cancelled`) and the session goes on; only the session's own end (runner gone, idle, exit)
//! ends its process group.
//!
//! Between the pool and the bridge: a request line (§4) starts a call, `{"cancel": call_id}` cancels one; every
//! event line carries its `call_id` and is handed to that call's reader. A line without one may be a request of
//! the server to its client, which the front door's handler answers ([`crate::mcp_servers::asks`]); the
//! handler is part of the key, so a session declares to its server exactly what that front's client declared.

use super::{Job, WorkerSpec};
use crate::error::{CallError, Detail, ErrorCode};
use crate::mcp_servers::asks::{self, Caps, ClientAsks, Forwarded, FromBridge, Refusal};
use crate::mcp_servers::bridge::read_line;
use crate::spawn;
use crate::stream::{self, Cancel, Ending, EventLines, Finished, Observer, Stdout, Tail, LINGER};
use awt_sys::process::{Child, ChildStdin, ChildStdout};
use awt_sys::reap::{end_group, GroupGuard, GRACE};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::{sleep, sleep_until, Instant};

/// Event lines of one call waiting for its reader; the session's reader waits when a call's reader is behind.
const CALL_QUEUE: usize = 256;

/// Which sessions may serve a call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    file: PathBuf,
    server: String,
    /// The declaration's digest: a changed declaration gets a new session.
    version: String,
    env: u64,
    /// Who answers the server's requests to its client, and what that client declared.
    asks: Option<(usize, Caps)>,
}

#[derive(Default)]
struct Slot {
    sessions: Vec<Arc<Session>>,
    /// Why the last session of this key ended, told to the first call of the next one.
    ended: Option<String>,
}

/// Every session of a long-lived runner. Dropping it ends them (each session's group guard).
#[derive(Default)]
pub struct Sessions {
    slots: Mutex<HashMap<Key, Slot>>,
}

/// What the session's reader shares with the calls.
struct Shared {
    /// The calls in flight by call id; `None` once the process has exited (no call may join it then).
    calls: Mutex<Option<HashMap<String, mpsc::Sender<Vec<u8>>>>>,
    tail: Mutex<Tail>,
    exit: Mutex<Option<ExitStatus>>,
    /// Ends the group when the session is dropped while its process runs (the runner ends, the session idled
    /// out or was replaced); disarmed by the reader once the group is ended and reaped.
    guard: Mutex<Option<GroupGuard>>,
    server: String,
    asks: Option<ClientAsks>,
    /// The session's secrets (its environment is part of its key): masked in what the server asks the client,
    /// as in its results.
    masker: crate::policy::mask::Masker,
}

/// The bridge's input: request, cancel and reply lines, each written whole.
type Input = Arc<tokio::sync::Mutex<Option<ChildStdin>>>;

struct Session {
    pid: u32,
    stdin: Input,
    shared: Arc<Shared>,
    sandbox: crate::sandbox::Plan,
    in_flight: AtomicUsize,
    last_used: Mutex<Instant>,
}

impl Drop for Session {
    fn drop(&mut self) {
        drop(self.shared.guard.lock().expect("guard lock").take());
    }
}

impl Session {
    fn start(spec: &WorkerSpec<'_>, masker: &crate::policy::mask::Masker) -> Result<Session, CallError> {
        let sandbox = (spec.plan)()?;
        let forward = spec.asks.map(|a| a.0.declared().names()).unwrap_or_default();
        let started = spawn::start_session(spec.file, spec.dirs, spec.env, spec.cwd, &sandbox, &forward);
        let spawn::Started { mut child, pgid } = started?;
        let (stdin, stdout, stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => {
                return Err(CallError::new(
                    ErrorCode::Internal,
                    "an MCP server session was started without its pipes",
                ))
            }
        };
        let shared = Arc::new(Shared {
            calls: Mutex::new(Some(HashMap::new())),
            tail: Mutex::new(Tail::default()),
            exit: Mutex::new(None),
            guard: Mutex::new(Some(GroupGuard::new(pgid))),
            server: spec.file.name.clone(),
            asks: spec.asks.cloned(),
            masker: masker.clone(),
        });
        let stdin: Input = Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        tokio::spawn(drain_stderr(shared.clone(), stderr));
        tokio::spawn(read_events(shared.clone(), child, stdout, pgid, stdin.clone()));
        Ok(Session {
            pid: pgid as u32,
            stdin,
            shared,
            sandbox,
            in_flight: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        })
    }

    fn gone(&self) -> bool {
        self.shared.calls.lock().expect("calls lock").is_none()
    }

    async fn write(&self, line: &[u8]) -> bool {
        let mut stdin = self.stdin.lock().await;
        match stdin.as_mut() {
            Some(w) => w.write_all(line).await.is_ok(),
            None => false,
        }
    }

    /// Why the session ended, for the error of a call it took down and the note of the next session.
    fn ended(&self) -> String {
        let how = match *self.shared.exit.lock().expect("exit lock") {
            Some(s) => match (s.code(), s.signal()) {
                (_, Some(sig)) => format!("was killed by signal {sig}"),
                (Some(c), _) => format!("exited with code {c}"),
                _ => "exited".to_owned(),
            },
            None => "closed its output".to_owned(),
        };
        format!("its session (pid {}) {how}", self.pid)
    }
}

async fn drain_stderr(shared: Arc<Shared>, mut stderr: awt_sys::process::ChildStderr) {
    let mut buf = vec![0u8; 8 * 1024];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => shared.tail.lock().expect("tail lock").push(&buf[..n]),
        }
    }
}

#[derive(Deserialize)]
struct Tagged<'a> {
    #[serde(borrow, default)]
    call_id: Option<std::borrow::Cow<'a, str>>,
}

/// The session's reader: each event line to its call, each request of the server to the front's handler, until
/// the bridge exits; then every call in flight learns it (its queue closes), the requests still waiting are
/// dropped (the bridge answers them with an error, or is gone), and what is left of the group is ended.
async fn read_events(shared: Arc<Shared>, mut child: Child, stdout: ChildStdout, pgid: i32, stdin: Input) {
    let mut r = BufReader::new(stdout);
    let mut exit = None;
    let mut answers = Answers::default();
    loop {
        tokio::select! {
            line = read_line(&mut r) => match line {
                Ok(Some(line)) => match route(&shared, line).await.and_then(|l| FromBridge::of(&l)) {
                    Some(FromBridge::Request(f)) => ask(&shared, &stdin, &mut answers, f),
                    Some(FromBridge::Cancelled(id)) => {
                        if let Some(h) = answers.asked.remove(&id) {
                            h.abort();
                        }
                    }
                    None => {}
                },
                Ok(None) | Err(_) => break,
            },
            s = awt_sys::reap::wait(&mut child) => {
                exit = s.ok();
                // What the bridge wrote before it exited still reaches its calls.
                let until = Instant::now() + LINGER;
                while let Ok(Ok(Some(line))) = tokio::time::timeout_at(until, read_line(&mut r)).await {
                    route(&shared, line).await;
                }
                break;
            }
        }
    }
    drop(answers);
    if exit.is_none() {
        exit = tokio::time::timeout(GRACE, awt_sys::reap::wait(&mut child))
            .await
            .ok()
            .and_then(Result::ok);
    }
    *shared.exit.lock().expect("exit lock") = exit;
    shared.calls.lock().expect("calls lock").take();
    end_group(pgid, GRACE).await;
    if let Some(mut g) = shared.guard.lock().expect("guard lock").take() {
        g.disarm();
    }
    drop(child);
}

/// An event line to its call; a line without a call id is handed back.
async fn route(shared: &Shared, mut line: Vec<u8>) -> Option<Vec<u8>> {
    let id = match serde_json::from_slice::<Tagged<'_>>(&line) {
        Ok(t) => t.call_id.map(|c| c.into_owned()),
        Err(_) => None,
    };
    let Some(id) = id else { return Some(line) };
    let tx = shared
        .calls
        .lock()
        .expect("calls lock")
        .as_ref()
        .and_then(|c| c.get(&id).cloned());
    if let Some(tx) = tx {
        line.push(b'\n');
        let _ = tx.send(line).await;
    }
    None
}

/// The server's requests being answered, by request id; dropped (the session ended), every one is abandoned.
#[derive(Default)]
struct Answers {
    set: tokio::task::JoinSet<()>,
    asked: HashMap<u64, tokio::task::AbortHandle>,
}

/// A request of the server to its client: to the front's handler when its client declared the capability (an
/// elicitation's message naming the server), else refused; the reply goes to the bridge whatever happens.
fn ask(shared: &Arc<Shared>, stdin: &Input, answers: &mut Answers, f: Forwarded) {
    while answers.set.try_join_next().is_some() {}
    answers.asked.retain(|_, h| !h.is_finished());
    let refused =
        |code, message: String| -> asks::Answer { Box::pin(std::future::ready(Err(Refusal { code, message }))) };
    let answer = match &shared.asks {
        _ if answers.set.len() >= asks::MAX_PENDING => refused(
            asks::INTERNAL_ERROR,
            format!(
                "{} requests of the MCP server '{}' already wait for the client",
                asks::MAX_PENDING,
                shared.server
            ),
        ),
        Some(a) if a.0.declared().covers(&f.method) => {
            noted(shared, &f.method);
            let params = shared.masker.mask_value(&f.params);
            a.0.answer(&f.method, asks::attributed(&shared.server, &f.method, params))
        }
        _ => refused(
            asks::METHOD_NOT_FOUND,
            format!("{} is not offered by animaworks-tool to this session", f.method),
        ),
    };
    let (id, stdin) = (f.request_id, stdin.clone());
    let h = answers.set.spawn(async move {
        let line = asks::reply_line(id, answer.await);
        if let Some(w) = stdin.lock().await.as_mut() {
            let _ = w.write_all(&line).await;
        }
    });
    answers.asked.insert(id, h);
}

/// That a server asked the client, said without what it asked (which may hold secrets): on the runner's log and
/// to every call in flight of the session.
fn noted(shared: &Shared, method: &str) {
    tracing::info!("the MCP server '{}' asked the client: {method}", shared.server);
    let calls = shared.calls.lock().expect("calls lock");
    for (call_id, tx) in calls.iter().flatten() {
        let ev = serde_json::json!({"type": "log", "level": "info", "call_id": call_id,
            "message": format!("the MCP server '{}' asked the MCP client: {method}", shared.server)});
        let mut line = serde_json::to_vec(&ev).expect("JSON");
        line.push(b'\n');
        let _ = tx.try_send(line);
    }
}

/// The session's part of a call in flight: counted while it runs, unregistered when it ends. A call whose future
/// is dropped before its end (its caller went away) is cancelled in the server all the same.
struct InFlight<'a> {
    session: &'a Arc<Session>,
    call_id: &'a str,
    idle: Option<Duration>,
    sessions: Weak<Sessions>,
    settled: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.settled {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let session = self.session.clone();
                let line = cancel_line(self.call_id);
                rt.spawn(async move { session.write(&line).await });
            }
        }
        if let Some(c) = self.session.shared.calls.lock().expect("calls lock").as_mut() {
            c.remove(self.call_id);
        }
        *self.session.last_used.lock().expect("last used lock") = Instant::now();
        if self.session.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let (Some(idle), Some(sessions)) = (self.idle, self.sessions.upgrade()) {
                tokio::spawn(stop_idle_later(sessions, idle));
            }
        }
    }
}

/// The line that cancels a call in flight of the session's bridge.
fn cancel_line(call_id: &str) -> Vec<u8> {
    let mut line = serde_json::to_vec(&serde_json::json!({"cancel": call_id})).expect("JSON");
    line.push(b'\n');
    line
}

async fn stop_idle_later(sessions: Arc<Sessions>, idle: Duration) {
    let weak = Arc::downgrade(&sessions);
    drop(sessions);
    sleep(idle).await;
    let Some(sessions) = weak.upgrade() else { return };
    let now = Instant::now();
    let mut stale = Vec::new();
    {
        let mut slots = sessions.slots.lock().expect("sessions lock");
        for slot in slots.values_mut() {
            let (old, keep): (Vec<_>, Vec<_>) = slot.sessions.drain(..).partition(|s| {
                s.in_flight.load(Ordering::Acquire) == 0 && now >= *s.last_used.lock().expect("last used lock") + idle
            });
            slot.sessions = keep;
            stale.extend(old);
        }
        slots.retain(|_, s| !s.sessions.is_empty() || s.ended.is_some());
    }
    for s in stale {
        tokio::spawn(retire(s));
    }
}

/// An idle session's end: its input closed (the bridge then ends the server), and the group ended after the grace.
async fn retire(s: Arc<Session>) {
    drop(s.stdin.lock().await.take());
    let deadline = Instant::now() + GRACE;
    while !s.gone() && Instant::now() < deadline {
        sleep(Duration::from_millis(20)).await;
    }
    drop(s);
}

impl Sessions {
    /// The session for this call: the least busy of its key, a new one while there are fewer than `workers` and
    /// all are busy, and a new one for one whose process exited (with the note of why).
    fn checkout(
        self: &Arc<Self>,
        key: &Key,
        workers: usize,
        spec: &WorkerSpec<'_>,
        masker: &crate::policy::mask::Masker,
    ) -> Result<(Arc<Session>, Option<String>), CallError> {
        let mut slots = self.slots.lock().expect("sessions lock");
        // A declaration that changed: the sessions of its older versions are no longer handed out.
        slots.retain(|k, _| {
            k == key || k.file != key.file || k.server != key.server || k.env != key.env || k.asks != key.asks
        });
        let slot = slots.entry(key.clone()).or_default();
        let mut note = None;
        slot.sessions.retain(|s| {
            if s.gone() {
                note = Some(s.ended());
                false
            } else {
                true
            }
        });
        if let Some(n) = note {
            slot.ended = Some(n);
        }
        let best = slot
            .sessions
            .iter()
            .min_by_key(|s| s.in_flight.load(Ordering::Acquire))
            .cloned();
        let session = match best {
            Some(s) if s.in_flight.load(Ordering::Acquire) == 0 || slot.sessions.len() >= workers => s,
            _ => {
                let s = Arc::new(Session::start(spec, masker)?);
                slot.sessions.push(s.clone());
                s
            }
        };
        session.in_flight.fetch_add(1, Ordering::AcqRel);
        Ok((session, slot.ended.take()))
    }

    /// Run one call of an MCP server on its session.
    pub(crate) async fn run(
        self: &Arc<Self>,
        spec: &WorkerSpec<'_>,
        mut job: Job<'_>,
        obs: &mut dyn Observer,
        mut cancel: Cancel,
    ) -> Result<Value, CallError> {
        let started = Instant::now();
        let decl = spec.file.mcp.as_ref().expect("an MCP server's declaration");
        let mut h = std::hash::DefaultHasher::new();
        spec.env.hash(&mut h);
        spec.dirs.anima.hash(&mut h);
        spec.cwd.hash(&mut h);
        spec.grants.hash(&mut h);
        let key = Key {
            file: spec.file.path.clone(),
            server: spec.file.name.clone(),
            version: decl.digest(),
            env: h.finish(),
            asks: spec.asks.map(ClientAsks::key),
        };
        let workers = decl.spec.workers.unwrap_or(1).max(1);
        let idle = decl.spec.idle_s.map(|s| Duration::from_secs_f64(s.clamp(0.1, 1e9)));
        let (session, restarted) = self
            .checkout(&key, workers, spec, &job.spill.masker)
            .map_err(|e| e.with(Detail::Tool, job.tool).with(Detail::Action, job.action))?;
        *spec.sandbox_seen.lock().expect("sandbox slot lock") = Some(session.sandbox.summary());
        let (tx, mut rx) = mpsc::channel(CALL_QUEUE);
        let joined = match session.shared.calls.lock().expect("calls lock").as_mut() {
            Some(c) => {
                c.insert(job.call_id.to_owned(), tx);
                true
            }
            None => false,
        };
        let mut in_flight = InFlight {
            session: &session,
            call_id: job.call_id,
            idle,
            sessions: Arc::downgrade(self),
            settled: !joined,
        };
        let mut lines = EventLines::new(job.max_output, job.spill, job.call_id);
        if let Some(why) = restarted {
            let note = serde_json::json!({"type": "log", "level": "warning", "call_id": job.call_id, "message": format!(
                "the MCP server '{}' was started again: {why}; what it held in memory is gone", job.tool)});
            let mut line = serde_json::to_vec(&note).expect("JSON");
            line.push(b'\n');
            lines.feed(&line, obs);
        }
        let mut ending: Option<Ending> = None;
        let mut lost = !joined;
        // The request is written whole even when the call ends meanwhile: a line cut short would run into the
        // next one, and the bridge, reading a line that is not a request, would end the session of every call.
        let mut writing = joined.then(|| {
            let (s, request) = (session.clone(), std::mem::take(&mut job.request));
            tokio::spawn(async move { s.write(&request).await })
        });
        if let Some(w) = writing.as_mut() {
            tokio::select! {
                ok = w => {
                    lost = !ok.unwrap_or(false);
                    writing = None;
                }
                _ = sleep_until(job.deadline) => ending = Some(Ending::TimedOut),
                _ = cancel.cancelled() => ending = Some(Ending::Cancelled),
            }
        }
        if ending.is_none() && !lost {
            loop {
                tokio::select! {
                    line = rx.recv() => match line {
                        Some(l) => {
                            lines.feed(&l, obs);
                            if lines.ended() { break; }
                        }
                        None => { lost = true; break; }
                    },
                    _ = sleep_until(job.deadline) => { ending = Some(Ending::TimedOut); break; }
                    _ = cancel.cancelled() => { ending = Some(Ending::Cancelled); break; }
                }
            }
        }
        let final_seen = lines.ended();
        if ending.is_some() {
            lines.discard_spill();
        }
        let stdout = lines.finish(obs);
        let clean = matches!(stdout, Stdout::Events { last: Some(_) });
        if !clean && !lost {
            // Cancelled, timed out, capped or out of step: the server is told, and the session goes on.
            match writing {
                // Told once its request is all written.
                Some(w) => {
                    let (s, line) = (session.clone(), cancel_line(job.call_id));
                    tokio::spawn(async move {
                        if w.await.unwrap_or(false) {
                            s.write(&line).await;
                        }
                    });
                }
                None => {
                    session.write(&cancel_line(job.call_id)).await;
                }
            }
        }
        in_flight.settled = true;
        let took = started.elapsed();
        let tail = || {
            session
                .shared
                .tail
                .lock()
                .expect("tail lock")
                .text_masked(&job.spill.masker)
        };
        let with = |e: CallError| {
            e.with(Detail::Tool, job.tool)
                .with(Detail::Action, job.action)
                .with(Detail::DurationMs, took.as_millis() as u64)
        };
        let result = match ending {
            Some(Ending::TimedOut) => Err(with(
                CallError::new(
                    ErrorCode::Timeout,
                    format!(
                        "{}.{} did not finish within {} s; the MCP server was told to cancel it (its session goes on)",
                        job.tool,
                        job.action,
                        job.timeout.as_secs_f64()
                    ),
                )
                .hint(format!(
                    "raise --timeout, or mcp_servers.{}.timeout_s in <data dir>/animaworks-tool.json",
                    job.tool
                )),
            )),
            Some(_) => Err(with(CallError::new(
                ErrorCode::Cancelled,
                format!(
                    "{}.{} was cancelled; the MCP server was told so (its session goes on)",
                    job.tool, job.action
                ),
            ))),
            None if lost && !final_seen => {
                // The bridge ended: wait (briefly) for its exit status, to say how.
                let until = Instant::now() + LINGER;
                while session.shared.exit.lock().expect("exit lock").is_none() && Instant::now() < until {
                    sleep(Duration::from_millis(10)).await;
                }
                let mut e = with(
                    CallError::new(
                        ErrorCode::Crashed,
                        format!(
                            "{}.{}: the MCP server ended ({}) before the call's final event",
                            job.tool,
                            job.action,
                            session.ended()
                        ),
                    )
                    .hint("read stderr_tail; the next call starts the server again"),
                );
                let t = tail();
                if !t.is_empty() {
                    e = e.with(Detail::StderrTail, t);
                }
                Err(e)
            }
            None => stream::interpret(
                Finished {
                    ending: Ending::Exited(ExitStatus::from_raw(0)),
                    stdout,
                    stderr_tail: tail(),
                    duration: took,
                    leftovers: false,
                    masker: job.spill.masker.clone(),
                },
                job.tool,
                job.action,
                job.timeout,
                job.max_output,
            ),
        };
        result.map_err(|e| session.sandbox.limits.explain(e))
    }

    /// The client of `asks` says its roots changed: every session that declared them to its server tells it.
    pub(crate) fn roots_changed(&self, asks: &ClientAsks) {
        let key = Some(asks.key()).filter(|(_, caps)| caps.roots);
        if key.is_none() {
            return;
        }
        let sessions: Vec<Arc<Session>> = {
            let slots = self.slots.lock().expect("sessions lock");
            let mine = slots.iter().filter(|(k, _)| k.asks == key);
            mine.flat_map(|(_, s)| s.sessions.iter().filter(|s| !s.gone()).cloned())
                .collect()
        };
        for s in sessions {
            tokio::spawn(async move { s.write(asks::ROOTS_CHANGED).await });
        }
    }

    /// Process ids of the live sessions of the server `name`.
    pub fn pids(&self, name: &str) -> Vec<u32> {
        let slots = self.slots.lock().expect("sessions lock");
        slots
            .iter()
            .filter(|(k, _)| k.server == name)
            .flat_map(|(_, s)| s.sessions.iter().filter(|s| !s.gone()).map(|s| s.pid))
            .collect()
    }
}
