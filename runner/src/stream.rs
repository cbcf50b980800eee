//! Driving one tool process: the request goes in, stdout and stderr are drained concurrently, events are passed
//! on as they arrive, the deadline and cancellation are watched, and the group is ended and reaped at the end.
//! [`interpret`] then turns what happened into a result or one of the closed set of errors (protocol.md §5–7).

mod decode;
mod progress;

pub use decode::MAX_DEPTH;

use crate::error::{CallError, ErrorCode};
use crate::spawn::Started;
use crate::policy::Masker;
use crate::reap::{end_group, signal_group, GroupGuard, GRACE};
use crate::spill::{Spill, SpillTo};
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};
use tool_sdk::protocol::{Event, Line};

/// How much of stderr is kept for errors.
pub const STDERR_TAIL: usize = 4096;
/// How long the runner keeps reading after the tool's main process exited while others still hold its stdout.
pub const LINGER: Duration = Duration::from_millis(300);

/// Receives what a tool reports while it runs. Every method has a default that ignores it.
pub trait Observer: Send {
    /// A known event (including the final one); `raw` is the line as the tool wrote it.
    fn event(&mut self, _event: &Event, _raw: &[u8]) {}
    /// An event of a type this runner does not know (protocol.md §10: ignored, passed on).
    fn unknown(&mut self, _raw: &[u8]) {}
    /// A chunk of the tool's stderr.
    fn stderr(&mut self, _chunk: &[u8]) {}
    /// Everything the tool wrote so far has been passed on: a buffering observer writes it out now. Called once
    /// per read of stdout, so a fast stream is written in large pieces and a slow one line by line.
    fn flush(&mut self) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}

/// A cancellation signal: the call ends (as `cancelled`) when the sender sends `true`. A dropped sender means
/// nobody can cancel any more.
#[derive(Clone)]
pub struct Cancel(Option<watch::Receiver<bool>>);

impl Cancel {
    pub fn never() -> Cancel {
        Cancel(None)
    }
    pub fn new() -> (watch::Sender<bool>, Cancel) {
        let (tx, rx) = watch::channel(false);
        (tx, Cancel(Some(rx)))
    }
    /// Resolves when the call is cancelled; never, when nobody can cancel.
    pub async fn cancelled(&mut self) {
        match &mut self.0 {
            None => std::future::pending().await,
            Some(rx) => {
                if rx.wait_for(|v| *v).await.is_err() {
                    // The sender is gone: nobody can cancel any more.
                    self.0 = None;
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

/// What the runner needs to drive one process.
pub struct Drive<'a> {
    pub tool: &'a str,
    pub action: &'a str,
    pub call_id: &'a str,
    /// Written to stdin, which is then closed.
    pub request: Option<Vec<u8>>,
    /// stdout is an event stream (§5.2) rather than one value (§5.1).
    pub events: bool,
    pub timeout: Duration,
    pub max_output: u64,
    /// Where output past the cap goes, bounded and masked ([`SpillTo::never`] for `--schemas`).
    pub spill: SpillTo,
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

/// What stdout held.
#[derive(Debug)]
pub enum Stdout {
    Value(Vec<u8>),
    Events {
        last: Option<Event>,
    },
    /// Past the cap. `path`: the file holding the output (none when it was never to be written); `full`: the
    /// output also passed the disk bound, so the call was ended and the file holds only its first part.
    Capped {
        path: Option<PathBuf>,
        bytes: u64,
        full: bool,
    },
    Bad(String),
}

/// Everything known about a finished process.
#[derive(Debug)]
pub struct Finished {
    pub ending: Ending,
    pub stdout: Stdout,
    pub stderr_tail: String,
    pub duration: Duration,
    /// Processes of the group were still running after the main process exited, and were ended.
    pub leftovers: bool,
}

/// The last [`STDERR_TAIL`] bytes of a stream.
#[derive(Debug, Default)]
pub struct Tail(Vec<u8>);

/// Bytes kept before the shown tail, so that a secret that straddles the tail's start is masked whole.
const TAIL_MARGIN: usize = 4096;

impl Tail {
    pub fn clear(&mut self) {
        self.0.clear();
    }
    pub fn push(&mut self, chunk: &[u8]) {
        self.0.extend_from_slice(chunk);
        if self.0.len() > 2 * (STDERR_TAIL + TAIL_MARGIN) {
            let cut = self.0.len() - (STDERR_TAIL + TAIL_MARGIN);
            self.0.drain(..cut);
        }
    }
    pub fn text(&self) -> String {
        let start = self.0.len().saturating_sub(STDERR_TAIL);
        String::from_utf8_lossy(&self.0[start..]).into_owned()
    }
    /// The tail with every secret masked; masked before it is cut, so no part of a secret (shorter than the
    /// margin) survives at its start.
    pub fn text_masked(&self, m: &Masker) -> String {
        if m.is_empty() {
            return self.text();
        }
        let masked = m.mask_str(&String::from_utf8_lossy(&self.0));
        let b = masked.as_bytes();
        let start = b.len().saturating_sub(STDERR_TAIL);
        String::from_utf8_lossy(&b[start..]).into_owned()
    }
}

/// Reads stdout as the protocol says, keeping at most `max` bytes in memory.
struct StdoutState<'a> {
    events: bool,
    max: u64,
    spill_to: &'a SpillTo,
    call_id: &'a str,
    value: Vec<u8>,
    line: Vec<u8>,
    spill: Option<Spill>,
    line_spilled: bool,
    capped: Option<(PathBuf, u64)>,
    /// Past the cap with nowhere to write (or the spill failed, or passed its bound): the call must end.
    overflow: Option<u64>,
    last: Option<Event>,
    bad: Option<String>,
}

fn quote_start(b: &[u8]) -> String {
    let cut = b.len().min(120);
    format!("{:?}", String::from_utf8_lossy(&b[..cut]))
}

impl<'a> StdoutState<'a> {
    fn new(events: bool, max: u64, spill_to: &'a SpillTo, call_id: &'a str) -> Self {
        StdoutState {
            events,
            max,
            spill_to,
            call_id,
            value: Vec::new(),
            line: Vec::new(),
            spill: None,
            line_spilled: false,
            capped: None,
            overflow: None,
            last: None,
            bad: None,
        }
    }

    /// The output can no longer be kept (never to be spilled, or the spill is full): stop reading, end the call.
    fn must_stop(&self) -> bool {
        self.overflow.is_some() || self.spill.as_ref().is_some_and(|s| s.full)
    }

    /// The call timed out or was cancelled: its partial spill is removed.
    fn discard_spill(&mut self) {
        if let Some(sp) = &mut self.spill {
            sp.discard();
        }
        self.spill = None;
        self.capped = None;
    }

    fn feed(&mut self, chunk: &[u8], obs: &mut dyn Observer) {
        if let Some(n) = &mut self.overflow {
            *n += chunk.len() as u64;
            return;
        }
        if !self.events {
            if let Some(sp) = &mut self.spill {
                sp.write(chunk);
            } else if (self.value.len() + chunk.len()) as u64 > self.max {
                self.start_spill();
                let held = std::mem::take(&mut self.value);
                if let Some(sp) = &mut self.spill {
                    sp.write(&held);
                    sp.write(chunk);
                }
            } else {
                self.value.extend_from_slice(chunk);
            }
            return;
        }
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', chunk) {
            let piece = &chunk[start..end];
            start = end + 1;
            if self.line_spilled {
                self.finish_spilled_line(piece);
            } else if (self.line.len() + piece.len()) as u64 > self.max {
                self.spill_line(piece);
                self.finish_spilled_line(&[]);
            } else if self.line.is_empty() {
                self.handle_line(piece, obs);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(piece);
                self.handle_line(&line, obs);
                line.clear();
                self.line = line;
            }
        }
        let rest = &chunk[start..];
        if !rest.is_empty() {
            if self.line_spilled {
                if let Some(sp) = &mut self.spill {
                    sp.write(rest);
                }
            } else if (self.line.len() + rest.len()) as u64 > self.max {
                self.spill_line(rest);
            } else {
                self.line.extend_from_slice(rest);
            }
        }
    }

    fn start_spill(&mut self) {
        if self.spill_to.dir.is_none() {
            self.overflow = Some(self.value.len() as u64 + self.line.len() as u64);
            self.value = Vec::new();
            self.line = Vec::new();
            return;
        }
        match self.spill_to.open(self.call_id, self.max) {
            Ok(s) => self.spill = Some(s),
            Err(e) => {
                self.bad = Some(format!(
                    "the output passed the cap of {} bytes and could not be written to {}: {e}",
                    self.max,
                    self.spill_to
                        .dir
                        .as_deref()
                        .unwrap_or(std::path::Path::new(""))
                        .display()
                ));
                self.overflow = Some(0);
            }
        }
    }

    fn spill_line(&mut self, piece: &[u8]) {
        if self.spill.is_none() {
            self.start_spill();
        }
        let held = std::mem::take(&mut self.line);
        if let Some(sp) = &mut self.spill {
            sp.write(&held);
            sp.write(piece);
        }
        self.line_spilled = true;
    }

    fn finish_spilled_line(&mut self, piece: &[u8]) {
        if let Some(sp) = &mut self.spill {
            sp.write(piece);
            sp.write(b"\n");
            self.capped = Some((sp.path.clone(), sp.bytes));
        }
        self.line_spilled = false;
    }

    fn handle_line(&mut self, line: &[u8], obs: &mut dyn Observer) {
        if self.bad.is_some() {
            return;
        }
        match decode::classify(line) {
            Line::Blank => {}
            Line::Event(ev) => {
                if self.last.is_some() {
                    self.bad = Some(format!("output after the final event: {}", quote_start(line)));
                    return;
                }
                obs.event(&ev, line);
                if ev.is_final() {
                    self.last = Some(ev);
                }
            }
            Line::Unknown(_) => obs.unknown(line),
            Line::NotProtocol(why) => {
                self.bad = Some(if why.contains("recursion limit exceeded") {
                    format!("{}: {}", decode::too_deep_message(), quote_start(line))
                } else if std::str::from_utf8(line).is_err() {
                    format!("invalid UTF-8 on stdout: {}", quote_start(line))
                } else {
                    format!("non-protocol output on stdout ({why}): {}", quote_start(line))
                });
            }
        }
    }

    fn finish(mut self, obs: &mut dyn Observer) -> Stdout {
        if let Some(sp) = &mut self.spill {
            sp.finish();
        }
        if let Some(bytes) = self.overflow.filter(|_| self.bad.is_none()) {
            return Stdout::Capped {
                path: None,
                bytes,
                full: true,
            };
        }
        if let Some(sp) = self.spill.as_ref().filter(|s| s.full) {
            return Stdout::Capped {
                path: Some(sp.path.clone()),
                bytes: sp.bytes,
                full: true,
            };
        }
        if self.events {
            if self.line_spilled {
                self.finish_spilled_line(&[]);
            } else if !self.line.is_empty() {
                let line = std::mem::take(&mut self.line);
                self.handle_line(&line, obs);
            }
            if let Some(b) = self.bad {
                return Stdout::Bad(b);
            }
            if let Some((path, bytes)) = self.capped {
                return Stdout::Capped {
                    path: Some(path),
                    bytes,
                    full: false,
                };
            }
            return Stdout::Events { last: self.last };
        }
        if let Some(b) = self.bad {
            return Stdout::Bad(b);
        }
        match self.spill {
            Some(sp) => Stdout::Capped {
                path: Some(sp.path),
                bytes: sp.bytes,
                full: false,
            },
            None => Stdout::Value(self.value),
        }
    }
}

/// One call's event lines from a persistent worker (protocol.md §9), read with the same rules and output cap as a
/// one-shot call's stdout. The worker's stdout outlives the call, so the caller feeds chunks and stops at
/// [`EventLines::ended`].
pub struct EventLines<'a>(StdoutState<'a>);

impl<'a> EventLines<'a> {
    pub fn new(max_output: u64, spill: &'a SpillTo, call_id: &'a str) -> Self {
        EventLines(StdoutState::new(true, max_output, spill, call_id))
    }
    /// The call timed out or was cancelled: its partial spill is removed.
    pub fn discard_spill(&mut self) {
        self.0.discard_spill();
    }
    pub fn feed(&mut self, chunk: &[u8], obs: &mut dyn Observer) {
        self.0.feed(chunk, obs);
        obs.flush();
    }
    /// A final event, a protocol error or a capped line was seen: the call is over.
    pub fn ended(&self) -> bool {
        self.0.last.is_some() || self.0.bad.is_some() || self.0.capped.is_some() || self.0.must_stop()
    }
    pub fn finish(self, obs: &mut dyn Observer) -> Stdout {
        self.0.finish(obs)
    }
}

async fn read_some<R: AsyncRead + Unpin>(r: &mut Option<R>, buf: &mut [u8]) -> usize {
    match r {
        Some(r) => r.read(buf).await.unwrap_or(0),
        None => 0,
    }
}

/// Run `child` (already spawned in its own group) to its end. Never returns before every process of its group is
/// gone.
pub async fn drive(process: Started, d: Drive<'_>, obs: &mut dyn Observer, mut cancel: Cancel) -> Finished {
    let started = Instant::now();
    let Started { mut child, pgid } = process;
    let mut guard = GroupGuard::new(pgid);
    if let (Some(mut stdin), Some(req)) = (child.stdin.take(), d.request) {
        // Why a task: a tool that never reads stdin must not stall the runner on a full pipe.
        tokio::spawn(async move {
            let _ = stdin.write_all(&req).await;
            let _ = stdin.shutdown().await;
        });
    } else {
        drop(child.stdin.take());
    }
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let (mut out_done, mut err_done) = (stdout.is_none(), stderr.is_none());
    let mut out_buf = vec![0u8; 64 * 1024];
    let mut err_buf = vec![0u8; 8 * 1024];
    let mut state = StdoutState::new(d.events, d.max_output, &d.spill, d.call_id);
    let mut tail = Tail(Vec::new());
    let deadline = started + d.timeout;
    let mut status: Option<ExitStatus> = None;
    let mut reason: Option<Ending> = None;
    let mut kill_at: Option<Instant> = None;
    let mut linger_until: Option<Instant> = None;
    let mut abandon_at: Option<Instant> = None;
    let mut leftovers = false;
    let far = Instant::now() + Duration::from_secs(86400 * 365);

    while !(out_done && err_done && status.is_some()) {
        tokio::select! {
            n = read_some(&mut stdout, &mut out_buf), if !out_done => {
                if n == 0 { out_done = true; stdout = None; } else { state.feed(&out_buf[..n], obs); obs.flush(); }
                if state.must_stop() && reason.is_none() && kill_at.is_none() {
                    // Why end the call: the output can be neither kept nor written (past the disk bound, or never
                    // to be spilled); closing stdout alone would not stop a tool that ignores SIGPIPE.
                    (out_done, stdout) = (true, None);
                    signal_group(pgid, libc::SIGTERM);
                    kill_at = Some(Instant::now() + GRACE);
                }
            }
            n = read_some(&mut stderr, &mut err_buf), if !err_done => {
                if n == 0 { err_done = true; stderr = None; } else { tail.push(&err_buf[..n]); obs.stderr(&err_buf[..n]); }
            }
            s = crate::reap::wait(&mut child), if status.is_none() => {
                match s {
                    Ok(s) => status = Some(s),
                    Err(_) => status = Some(ExitStatus::from_raw(1 << 8)),
                }
                if !(out_done && err_done) && reason.is_none() {
                    linger_until = Some(Instant::now() + LINGER);
                }
            }
            _ = sleep_until(deadline), if reason.is_none() => {
                reason = Some(Ending::TimedOut);
                signal_group(pgid, libc::SIGTERM);
                kill_at = Some(Instant::now() + GRACE);
            }
            _ = cancel.cancelled(), if reason.is_none() => {
                reason = Some(Ending::Cancelled);
                signal_group(pgid, libc::SIGTERM);
                kill_at = Some(Instant::now() + GRACE);
            }
            _ = sleep_until(kill_at.unwrap_or(far)), if kill_at.is_some() => {
                signal_group(pgid, libc::SIGKILL);
                kill_at = None;
                abandon_at = Some(Instant::now() + LINGER);
            }
            _ = sleep_until(abandon_at.unwrap_or(far)), if abandon_at.is_some() => {
                // Why: the group has had SIGKILL; whoever still holds stdout or stderr left the group (setsid) and
                // is out of reach, so waiting for its end of file would let the call outlive its deadline.
                abandon_at = None;
                (out_done, err_done) = (true, true);
                (stdout, stderr) = (None, None);
            }
            _ = sleep_until(linger_until.unwrap_or(far)), if linger_until.is_some() => {
                // The main process is gone but something in its group still holds stdout or stderr open.
                leftovers = true;
                linger_until = None;
                signal_group(pgid, libc::SIGTERM);
                kill_at = Some(Instant::now() + GRACE);
            }
        }
    }
    if crate::reap::group_alive(pgid) {
        if status.is_some() && reason.is_none() {
            leftovers = true;
        }
        end_group(pgid, if reason.is_some() { Duration::ZERO } else { GRACE }).await;
    }
    guard.disarm();
    crate::reap::reap_orphans();
    if reason.is_some() {
        state.discard_spill();
    }
    let stdout = state.finish(obs);
    let ending = reason.unwrap_or(Ending::Exited(status.expect("loop ends with a status")));
    Finished {
        ending,
        stdout,
        stderr_tail: tail.text_masked(&d.spill.masker),
        duration: started.elapsed(),
        leftovers,
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// Turn a finished process into the call's result or error (protocol.md §5, §6).
pub fn interpret(
    f: Finished,
    d_tool: &str,
    d_action: &str,
    timeout: Duration,
    max_output: u64,
) -> Result<Value, CallError> {
    let who = format!("{d_tool}.{d_action}");
    let decorate = |e: CallError| -> CallError {
        let mut e = e
            .with("tool", d_tool)
            .with("action", d_action)
            .with("duration_ms", f.duration.as_millis() as u64);
        if !f.stderr_tail.is_empty() {
            e = e.with("stderr_tail", f.stderr_tail.clone());
        }
        e
    };
    let status = match f.ending {
        Ending::TimedOut => {
            return Err(decorate(
                CallError::new(
                    ErrorCode::Timeout,
                    format!(
                        "{who} did not finish within {} s; its process group was ended",
                        fmt_secs(timeout)
                    ),
                )
                .hint("raise --timeout, or the action's timeout_s in its --schemas"),
            ))
        }
        Ending::Cancelled => {
            return Err(decorate(CallError::new(
                ErrorCode::Cancelled,
                format!("{who} was cancelled; its process group was ended"),
            )))
        }
        Ending::Exited(s) => s,
    };
    let code = status.code();
    let signal = status.signal();
    let crashed = |what: String| -> CallError {
        let mut e = CallError::new(ErrorCode::Crashed, format!("{who} {what}"))
            .hint("read stderr_tail; run the tool by hand with the same request to see more");
        if let Some(c) = code {
            e = e.with("exit_code", c);
        }
        if let Some(s) = signal {
            e = e.with("signal", s);
        }
        decorate(e)
    };
    let how = match (code, signal) {
        (_, Some(s)) => format!("was killed by {} ({s})", signal_name(s)),
        (Some(c), _) => format!("exited with code {c}"),
        _ => "ended".to_owned(),
    };
    match f.stdout {
        Stdout::Bad(why) => Err(decorate(
            CallError::new(ErrorCode::BadOutput, format!("{who}: {why}"))
                .hint("stdout belongs to the protocol: print logs to stderr (protocol.md §5)"),
        )),
        Stdout::Capped { path, bytes, full } => {
            let (msg, hint) = match (&path, full) {
                (Some(p), false) => (
                    format!(
                        "{who}: the output ({bytes} bytes) passed the cap of {max_output} bytes; all of it is in {}",
                        p.display()
                    ),
                    "read the file, or raise --max-output",
                ),
                (Some(p), true) => (
                    format!(
                        "{who}: the output passed the cap of {max_output} bytes and then the bound on what one call may \
                         write to disk; the call was ended after {bytes} bytes and only the first part is in {}",
                        p.display()
                    ),
                    "make the tool write less, or raise ANIMAWORKS_TOOL_MAX_SPILL",
                ),
                (None, _) => (
                    format!("{who}: the output passed the cap of {max_output} bytes; the call was ended"),
                    "make the tool write less, or raise --max-output",
                ),
            };
            let mut e = CallError::new(ErrorCode::OutputCapped, msg)
                .hint(hint)
                .with("bytes", bytes);
            if let Some(p) = path {
                e = e.with("path", p.to_string_lossy().into_owned());
            }
            Err(decorate(e))
        }
        Stdout::Events {
            last: Some(Event::Error { error, .. }),
        } => {
            let mut e = CallError::new(ErrorCode::ToolError, error.message);
            if let Some(h) = error.hint {
                e = e.hint(h);
            }
            if let Some(c) = error.code {
                e = e.with("tool_code", c);
            }
            if let Some(data) = error.data {
                e = e.with("data", data);
            }
            Err(decorate(e))
        }
        Stdout::Events {
            last: Some(Event::Result { result, .. }),
        } => {
            if status.success() {
                Ok(result)
            } else {
                Err(crashed(format!("{how} after its result")))
            }
        }
        Stdout::Events { .. } => {
            if status.success() {
                Err(decorate(
                    CallError::new(
                        ErrorCode::BadOutput,
                        format!("{who}: the tool exited without a final result"),
                    )
                    .hint("an event stream must end with one \"result\" or \"error\" event (protocol.md §5.2)"),
                ))
            } else {
                Err(crashed(format!("{how} without a final result")))
            }
        }
        Stdout::Value(bytes) => {
            let text = match String::from_utf8(bytes) {
                Ok(t) => t,
                Err(e) => {
                    let b = e.into_bytes();
                    return Err(decorate(
                        CallError::new(
                            ErrorCode::BadOutput,
                            format!("{who}: invalid UTF-8 on stdout: {}", quote_start(&b)),
                        )
                        .hint("print UTF-8 text or JSON"),
                    ));
                }
            };
            let parsed = serde_json::from_str::<Value>(&text);
            if status.success() && parsed.as_ref().is_err_and(decode::too_deep) {
                return Err(decorate(
                    CallError::new(ErrorCode::BadOutput, format!("{who}: {}", decode::too_deep_message()))
                        .hint("flatten the result (protocol.md §5)"),
                ));
            }
            let parsed = parsed.ok();
            if status.success() {
                return Ok(match parsed {
                    Some(v) => v,
                    None if text.trim().is_empty() => Value::Null,
                    None => Value::String(text.strip_suffix('\n').unwrap_or(&text).to_owned()),
                });
            }
            if let Some(Value::Object(mut obj)) = parsed {
                if let Some(Value::Object(err)) = obj.remove("error") {
                    if let Some(msg) = err.get("message").and_then(Value::as_str) {
                        let mut e = CallError::new(ErrorCode::ToolError, msg);
                        if let Some(h) = err.get("hint").and_then(Value::as_str) {
                            e = e.hint(h);
                        }
                        if let Some(c) = err.get("code").and_then(Value::as_str) {
                            e = e.with("tool_code", c);
                        }
                        if let Some(data) = err.get("data") {
                            e = e.with("data", data.clone());
                        }
                        if let Some(c) = code {
                            e = e.with("exit_code", c);
                        }
                        return Err(decorate(e));
                    }
                }
            }
            let mut e = crashed(how);
            if !text.trim().is_empty() {
                e = e.with("stdout_head", text.chars().take(1000).collect::<String>());
            }
            Err(e)
        }
    }
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s:.1}")
    }
}
