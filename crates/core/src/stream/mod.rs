//! Driving one tool process: the request goes in, stdout and stderr are drained concurrently, events are passed
//! on as they arrive, the deadline and cancellation are watched (SIGTERM, grace, SIGKILL), and the group is ended
//! and reaped at the end. The §5 stdout decoder is [`decode`]'s; turning the end into a result or an error is
//! [`interpret`] ([`outcome`]).

pub mod content;
pub mod decode;
pub mod outcome;
mod progress;

pub use decode::{EventLines, Stdout};
pub use outcome::interpret;

use decode::StdoutState;

pub use decode::MAX_DEPTH;

use crate::policy::Masker;
use crate::spawn::Started;
use crate::spill::SpillTo;
use awt_protocol::Event;
use awt_sys::reap::{end_group, signal_group, GroupGuard, GRACE};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::{sleep_until, Instant};

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

/// Everything known about a finished process.
#[derive(Debug)]
pub struct Finished {
    pub ending: Ending,
    pub stdout: Stdout,
    pub stderr_tail: String,
    pub duration: Duration,
    /// Processes of the group were still running after the main process exited, and were ended.
    pub leftovers: bool,
    /// The call's secrets: excerpts of the output (`stdout_head`, a `bad_output` quote) are masked whole, then cut.
    pub masker: Masker,
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
        if start == 0 {
            return masked;
        }
        let shown = String::from_utf8_lossy(&b[start..]).into_owned();
        m.without_partial_start(&shown).to_owned()
    }
}

/// Read into `buf`'s spare capacity, which is never zeroed first: a zeroed 64 KiB buffer cost every call 16 page
/// faults for a reply of a few bytes.
async fn read_some<R: AsyncRead + Unpin>(r: &mut Option<R>, buf: &mut Vec<u8>) -> usize {
    buf.clear();
    match r {
        Some(r) => r.read_buf(buf).await.unwrap_or(0),
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
    let mut out_buf = Vec::with_capacity(64 * 1024);
    let mut err_buf = Vec::with_capacity(8 * 1024);
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
            s = awt_sys::reap::wait(&mut child), if status.is_none() => {
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
    if awt_sys::reap::group_alive(pgid) {
        if status.is_some() && reason.is_none() {
            leftovers = true;
        }
        end_group(pgid, if reason.is_some() { Duration::ZERO } else { GRACE }).await;
    }
    guard.disarm();
    awt_sys::reap::reap_orphans();
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
        masker: d.spill.masker.clone(),
    }
}
