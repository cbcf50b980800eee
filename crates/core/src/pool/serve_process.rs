//! One persistent worker: a `TOOL --serve` process in its own group, given one call at a time (protocol.md §9).
//! Its stderr is drained all the time by a task (a worker never blocks on a full pipe, even between calls); its
//! stdout is read only while a call is in flight.

use crate::dirs::Dirs;
use crate::discover::ToolFile;
use crate::error::{CallError, ErrorCode};
use crate::spawn::{self, Purpose};
use crate::stream::{self, Cancel, Ending, EventLines, Finished, Observer, Stdout, Tail, LINGER};
use awt_protocol::Event;
use awt_sys::process::{Child, ChildStdin, ChildStdout};
use awt_sys::reap::{end_group, signal_group, GroupGuard, GRACE};
use serde_json::Value;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, timeout_at, Instant};

/// How many stderr chunks wait for the call in flight before older ones are dropped (the tail keeps them).
const STDERR_QUEUE: usize = 64;

/// What a call asks of a worker.
pub struct Job<'a> {
    pub tool: &'a str,
    pub action: &'a str,
    pub call_id: &'a str,
    /// One request line (§4), newline included.
    pub request: Vec<u8>,
    pub deadline: Instant,
    pub timeout: Duration,
    pub max_output: u64,
    pub spill: &'a crate::spill::SpillTo,
}

/// What becomes of the worker after a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// In step with the protocol: it may take the next call.
    Keep,
    /// Dead, ended, or out of step: it must not be used again.
    Gone,
}

pub struct Worker {
    pub pid: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    stderr: mpsc::Receiver<Vec<u8>>,
    tail: Arc<Mutex<Tail>>,
    guard: GroupGuard,
    pub idle_since: Instant,
    /// Its sandbox (and private temp dir), kept as long as the worker lives.
    sandbox: crate::sandbox::Plan,
    /// Its credential broker's sink: which call the broker answers for.
    pub(crate) broker: Option<crate::broker::Shared>,
}

impl Worker {
    /// Start `TOOL --serve` with `env` (the worker's environment, not one call's).
    pub(crate) fn spawn(
        file: &ToolFile,
        dirs: &Dirs,
        env: &[(OsString, OsString)],
        cwd: Option<&Path>,
        sandbox: crate::sandbox::Plan,
        brokered: bool,
    ) -> Result<Worker, CallError> {
        // A `.py` worker's broker lives as long as the worker and answers for the call in flight.
        let shared = brokered.then(crate::broker::Shared::default);
        let mut env = env.to_vec();
        let mut broker = shared.clone().and_then(|s| crate::broker::start_into(s, &mut env));
        let hand: Vec<_> = broker.as_ref().and_then(|b| b.handover()).into_iter().collect();
        let started = spawn::start_tool_with(file, dirs, Purpose::Serve, &env, cwd, Some(&sandbox), &hand);
        drop(hand);
        if let Some(b) = broker.as_mut() {
            b.started();
        }
        let spawn::Started { mut child, pgid } = started?;
        let pid = pgid as u32;
        let guard = GroupGuard::new(pgid);
        let (stdin, stdout, mut stderr) = match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => {
                return Err(CallError::new(
                    ErrorCode::Internal,
                    "a worker was started without its pipes",
                ))
            }
        };
        let tail = Arc::new(Mutex::new(Tail::default()));
        let (tx, rx) = mpsc::channel(STDERR_QUEUE);
        let t = tail.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8 * 1024];
            loop {
                match stderr.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        t.lock().expect("tail lock").push(&buf[..n]);
                        let _ = tx.try_send(buf[..n].to_vec());
                    }
                }
            }
        });
        Ok(Worker {
            pid,
            child,
            stdin: Some(stdin),
            stdout,
            stderr: rx,
            tail,
            guard,
            idle_since: Instant::now(),
            sandbox,
            broker: shared.filter(|_| broker.is_some()),
        })
    }

    /// The audit line's description of the sandbox this worker runs under.
    pub fn sandbox_summary(&self) -> serde_json::Value {
        self.sandbox.summary()
    }

    /// Has the process exited (between calls)?
    pub fn exited(&mut self) -> bool {
        match self.child.try_wait() {
            Ok(None) => false,
            Ok(Some(_)) => {
                awt_sys::reap::disown(self.pid);
                true
            }
            Err(_) => true,
        }
    }

    fn tail_text(&self, m: &crate::policy::Masker) -> String {
        self.tail.lock().expect("tail lock").text_masked(m)
    }

    /// Give the worker one call. On any outcome but a clean final event the worker is ended before this returns.
    pub(crate) async fn call(
        &mut self,
        job: Job<'_>,
        obs: &mut dyn Observer,
        mut cancel: Cancel,
    ) -> (Result<Value, CallError>, Fate) {
        let started = Instant::now();
        while self.stderr.try_recv().is_ok() {}
        self.tail.lock().expect("tail lock").clear();
        let mut tagged = Tagged {
            inner: obs,
            want: job.call_id,
            wrong: None,
        };
        let mut lines = EventLines::new(job.max_output, job.spill, job.call_id);
        // Read into spare capacity, never zeroed (as stream::read_some): a zeroed 64 KiB per call cost page faults.
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut ending: Option<Ending> = None;
        let mut exit: Option<ExitStatus> = None;

        let written = match self.stdin.as_mut() {
            Some(stdin) => tokio::select! {
                r = stdin.write_all(&job.request) => r.is_ok(),
                _ = sleep_until(job.deadline) => { ending = Some(Ending::TimedOut); true }
                _ = cancel.cancelled() => { ending = Some(Ending::Cancelled); true }
            },
            None => false,
        };
        if ending.is_none() && written {
            loop {
                tokio::select! {
                    r = self.stdout.read_buf(&mut buf) => match r {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            lines.feed(&buf[..n], &mut tagged);
                            buf.clear();
                            if lines.ended() || tagged.wrong.is_some() { break; }
                        }
                    },
                    Some(chunk) = self.stderr.recv() => tagged.inner.stderr(&chunk),
                    s = awt_sys::reap::wait(&mut self.child) => { exit = Some(s.unwrap_or(ExitStatus::from_raw(1 << 8))); break; }
                    _ = sleep_until(job.deadline) => { ending = Some(Ending::TimedOut); break; }
                    _ = cancel.cancelled() => { ending = Some(Ending::Cancelled); break; }
                }
            }
        }
        if ending.is_none() && !lines.ended() && tagged.wrong.is_none() {
            // The worker died (or closed stdout) mid-call: read what it left, then its stderr to the end.
            let until = Instant::now() + LINGER;
            buf.clear();
            while let Ok(Ok(n)) = timeout_at(until, self.stdout.read_buf(&mut buf)).await {
                if n == 0 {
                    break;
                }
                lines.feed(&buf[..n], &mut tagged);
                buf.clear();
            }
            while let Ok(Some(chunk)) = timeout_at(until, self.stderr.recv()).await {
                tagged.inner.stderr(&chunk);
            }
            if exit.is_none() {
                exit = timeout_at(until, awt_sys::reap::wait(&mut self.child))
                    .await
                    .ok()
                    .and_then(Result::ok);
            }
        }
        let wrong = tagged.wrong.take();
        if ending.is_some() {
            lines.discard_spill();
        }
        let stdout = lines.finish(&mut tagged);
        let ended_cleanly =
            ending.is_none() && wrong.is_none() && exit.is_none() && matches!(stdout, Stdout::Events { last: Some(_) });
        if !ended_cleanly {
            self.end(GRACE).await;
        }
        let finished = |stdout| Finished {
            ending: ending.unwrap_or(Ending::Exited(ExitStatus::from_raw(0))),
            stdout,
            stderr_tail: self.tail_text(&job.spill.masker),
            duration: started.elapsed(),
            leftovers: false,
            masker: job.spill.masker.clone(),
        };
        let fate = if ended_cleanly { Fate::Keep } else { Fate::Gone };
        let result = if let Some(w) = wrong {
            stream::interpret(
                finished(Stdout::Bad(w)),
                job.tool,
                job.action,
                job.timeout,
                job.max_output,
            )
        } else if ending.is_none()
            && !matches!(
                stdout,
                Stdout::Events { last: Some(_) } | Stdout::Bad(_) | Stdout::Capped { .. }
            )
        {
            Err(self.crashed(&job, exit, started.elapsed()))
        } else {
            stream::interpret(finished(stdout), job.tool, job.action, job.timeout, job.max_output)
        };
        // A worker's limits are its whole life's: one that a limit ended says so (docs/limits.md).
        let result = result.map_err(|e| self.sandbox.limits.explain(e));
        (result, fate)
    }

    fn crashed(&self, job: &Job<'_>, exit: Option<ExitStatus>, took: Duration) -> CallError {
        let how = match exit.map(|s| (s.code(), s.signal())) {
            Some((_, Some(sig))) => format!("was killed by signal {sig}"),
            Some((Some(c), _)) => format!("exited with code {c}"),
            _ => "closed its stdout".to_owned(),
        };
        let mut e = CallError::new(
            ErrorCode::Crashed,
            format!(
                "{}.{}: its worker (pid {}) {how} before the call's final event",
                job.tool, job.action, self.pid
            ),
        )
        .hint("read stderr_tail; the next call starts a new worker")
        .with(crate::error::Detail::Tool, job.tool)
        .with(crate::error::Detail::Action, job.action)
        .with(crate::error::Detail::DurationMs, took.as_millis() as u64);
        if let Some(c) = exit.and_then(|s| s.code()) {
            e = e.with(crate::error::Detail::ExitCode, c);
        }
        if let Some(s) = exit.and_then(|s| s.signal()) {
            e = e.with(crate::error::Detail::Signal, s);
        }
        let tail = self.tail_text(&job.spill.masker);
        if !tail.is_empty() {
            e = e.with(crate::error::Detail::StderrTail, tail);
        }
        e
    }

    /// SIGTERM to the group, `grace`, SIGKILL; every member reaped.
    pub async fn end(&mut self, grace: Duration) {
        let pgid = self.guard.pgid;
        self.stdin = None;
        // Why the check: the main process may have been reaped already (`exited`); an empty group is left alone.
        if !awt_sys::reap::group_alive(pgid) {
            self.guard.disarm();
            return;
        }
        signal_group(pgid, libc::SIGTERM);
        if timeout_at(Instant::now() + grace, awt_sys::reap::wait(&mut self.child))
            .await
            .is_err()
        {
            signal_group(pgid, libc::SIGKILL);
            let _ = awt_sys::reap::wait(&mut self.child).await;
        }
        end_group(pgid, Duration::ZERO).await;
        self.guard.disarm();
    }

    /// Stop an idle worker: stdin closed means "exit" (§9); the group is ended if it does not.
    pub async fn retire(mut self) {
        self.stdin = None;
        let _ = timeout_at(Instant::now() + GRACE, awt_sys::reap::wait(&mut self.child)).await;
        self.end(GRACE).await;
    }
}

/// Passes on only the events of the call in flight; any other (or missing) `call_id` is a protocol error.
struct Tagged<'a> {
    inner: &'a mut dyn Observer,
    want: &'a str,
    wrong: Option<String>,
}

impl Tagged<'_> {
    fn check(&mut self, id: Option<&str>, raw: &[u8]) -> bool {
        if id == Some(self.want) {
            return true;
        }
        if self.wrong.is_none() {
            let line = String::from_utf8_lossy(&raw[..raw.len().min(120)]).into_owned();
            self.wrong = Some(match id {
                Some(other) => format!(
                    "the worker sent an event of call {other:?} during call {:?}: {line:?}",
                    self.want
                ),
                None => format!("the worker sent an event without \"call_id\" (protocol.md §9): {line:?}"),
            });
        }
        false
    }
}

impl Observer for Tagged<'_> {
    fn event(&mut self, event: &Event, raw: &[u8]) {
        if self.check(event.call_id(), raw) {
            self.inner.event(event, raw);
        }
    }
    fn unknown(&mut self, raw: &[u8]) {
        let v: Option<Value> = serde_json::from_slice(raw).ok();
        let id = v
            .as_ref()
            .and_then(|v| v.get("call_id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        if self.check(id.as_deref(), raw) {
            self.inner.unknown(raw);
        }
    }
    fn stderr(&mut self, chunk: &[u8]) {
        self.inner.stderr(chunk);
    }
    fn flush(&mut self) {
        self.inner.flush();
    }
}
