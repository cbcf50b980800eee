//! How a call looks at a terminal or in a pipe: the result on stdout (pretty on a terminal, compact when
//! piped; a string result as plain text), progress and logs on stderr while the tool runs (a bar on a
//! terminal), or with `--events` the raw event stream as JSON lines.

use super::term::{self, CleanStream};
use awt_core::error::{CallError, Detail};
use awt_core::stream::Observer;
use awt_protocol::{Event, Level};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether stderr gets colour ([`term`]'s policy: `--color`, `NO_COLOR`, `CLICOLOR_FORCE`, a terminal).
pub fn color() -> bool {
    term::stderr_color()
}

/// Whether stderr can take a live display: a terminal that understands cursor movement (not `TERM=dumb`).
pub fn live_terminal() -> bool {
    static LIVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LIVE.get_or_init(|| {
        std::io::stderr().is_terminal() && std::env::var_os(awt_core::env_vars::TERM.name).is_none_or(|t| t != "dumb")
    })
}

/// `text` in `style` when stderr takes colour.
pub fn paint(style: anstyle::Style, text: &str) -> String {
    term::paint(style, text)
}

/// A warning on stderr, in yellow on a terminal.
pub fn warn(message: &str) {
    let _ = writeln!(
        std::io::stderr().lock(),
        "animaworks-tool: {} {message}",
        paint(term::YELLOW, "warning:")
    );
}

/// Control characters of a tool's text as visible escapes, so an event cannot move the cursor or recolour the
/// terminal, and a message stays on its line.
fn printable(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' => " ".to_owned(),
            c if c.is_control() => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// How long a call may run without any event before a spinner shows it is alive.
pub const SPINNER_AFTER: Duration = Duration::from_millis(1000);

/// Progress, logs and the tool's stderr while a call runs. On a terminal (not `TERM=dumb`): an indicatif bar or
/// spinner, cut to the terminal's width, redrawn below every log line; a spinner with the elapsed time appears
/// when a call sends nothing for [`SPINNER_AFTER`]. Elsewhere: plain lines, no escape codes.
pub struct Human {
    live: Option<Live>,
    last_progress: Option<Instant>,
    /// The clock as read for this read of stdout (cleared at each [`Observer::flush`]): one read a batch, not
    /// one an event (per event it was a large share of a fast stream's time).
    batch_now: Option<Instant>,
}

struct Live {
    bar: ProgressBar,
    /// Set once the bar is drawn (by a progress event, or by the spinner's timer).
    drawn: Arc<AtomicBool>,
    /// Dropped when the call ends: wakes the spinner's timer thread so it ends at once.
    stop: Option<std::sync::mpsc::Sender<()>>,
    /// The tool's stderr up to its last newline: a half line is held so the bar is not drawn into it.
    pending: Vec<u8>,
    counted: bool,
}

/// Progress is shown at most this often (the last step of a known total always shows): a tool may report
/// millions of steps, and a line each would cost more than the tool's work.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

impl Default for Human {
    fn default() -> Self {
        Human::new()
    }
}

fn spinner_style() -> ProgressStyle {
    let t = if color() {
        "{spinner:.cyan} {elapsed:.dim} {wide_msg}"
    } else {
        "{spinner} {elapsed} {wide_msg}"
    };
    ProgressStyle::with_template(t).unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn bar_style() -> ProgressStyle {
    let t = if color() {
        "{elapsed:.dim} [{bar:24.cyan}] {wide_msg}"
    } else {
        "{elapsed} [{bar:24}] {wide_msg}"
    };
    ProgressStyle::with_template(t)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl Human {
    /// The display for one call. The spinner's timer starts now.
    pub fn new() -> Human {
        Human {
            live: live_terminal().then(Live::start),
            last_progress: None,
            batch_now: None,
        }
    }

    /// Clear the display (the result or error follows on a clean line).
    pub fn finish(&mut self) {
        if let Some(live) = &mut self.live {
            live.stop.take();
            if !live.pending.is_empty() {
                let rest = std::mem::take(&mut live.pending);
                live.above(|err| {
                    let _ = err.write_all(&rest);
                    let _ = writeln!(err);
                });
            }
            live.bar.finish_and_clear();
        }
    }

    fn line(&mut self, text: &str) {
        match &self.live {
            Some(live) => live.above(|err| {
                let _ = writeln!(err, "{text}");
            }),
            None => {
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            }
        }
    }
}

impl Drop for Human {
    fn drop(&mut self) {
        if let Some(live) = &mut self.live {
            live.stop.take();
            live.bar.finish_and_clear();
        }
    }
}

impl Live {
    fn start() -> Live {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()).with_style(spinner_style());
        let drawn = Arc::new(AtomicBool::new(false));
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (b, d) = (bar.clone(), drawn.clone());
        // Why a thread and not a task: the display must not depend on the caller's runtime, and the thread only
        // waits (it ends as soon as the call does).
        let _ = std::thread::Builder::new().name("spinner".into()).spawn(move || {
            if stopped.recv_timeout(SPINNER_AFTER) == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                && !d.swap(true, Ordering::SeqCst)
            {
                b.set_message("waiting for the tool…");
                b.set_draw_target(ProgressDrawTarget::stderr());
                b.enable_steady_tick(Duration::from_millis(100));
                let _ = stopped.recv();
            }
        });
        Live {
            bar,
            drawn,
            stop: Some(stop),
            pending: Vec::new(),
            counted: false,
        }
    }

    fn show(&self) {
        if !self.drawn.swap(true, Ordering::SeqCst) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.bar.enable_steady_tick(Duration::from_millis(100));
        }
    }

    /// Write above the bar: it is cleared, the text written, and the bar drawn again below it.
    fn above(&self, f: impl FnOnce(&mut std::io::StderrLock)) {
        if self.drawn.load(Ordering::SeqCst) {
            self.bar.suspend(|| f(&mut std::io::stderr().lock()));
        } else {
            f(&mut std::io::stderr().lock());
        }
    }
}

fn level_name(level: &Level) -> (&'static str, anstyle::Style) {
    match level {
        Level::Debug => ("debug", term::DIM),
        Level::Info => ("info", term::CYAN),
        Level::Warning => ("warning", term::YELLOW),
        Level::Error => ("error", term::RED),
    }
}

impl Observer for Human {
    fn event(&mut self, event: &Event, _raw: &[u8]) {
        match event {
            Event::Progress {
                progress,
                total,
                message,
                ..
            } => {
                let last_step = total.is_some_and(|t| *progress >= t);
                let now = *self.batch_now.get_or_insert_with(Instant::now);
                if !last_step
                    && self
                        .last_progress
                        .is_some_and(|t| now.duration_since(t) < PROGRESS_EVERY)
                {
                    return;
                }
                self.last_progress = Some(now);
                let msg = message.as_deref().map(printable).unwrap_or_default();
                let count = match total {
                    Some(t) => format!("{progress}/{t}"),
                    None => format!("{progress}"),
                };
                match &mut self.live {
                    Some(live) => {
                        match total {
                            Some(t) if *t > 0.0 => {
                                if !live.counted {
                                    live.bar.set_style(bar_style());
                                    live.bar.set_length(1000);
                                    live.counted = true;
                                }
                                live.bar
                                    .set_position(((progress / t).clamp(0.0, 1.0) * 1000.0).round() as u64);
                            }
                            _ => {
                                if live.counted {
                                    live.bar.set_style(spinner_style());
                                    live.counted = false;
                                }
                            }
                        }
                        live.bar.set_message(format!("{count} {msg}"));
                        live.show();
                    }
                    None => {
                        let _ = writeln!(std::io::stderr().lock(), "progress {count} {msg}");
                    }
                }
            }
            Event::Log { level, message, .. } => {
                let (name, code) = level_name(level);
                let text = if self.live.is_some() {
                    format!("{} {}", paint(code, &format!("[{name}]")), printable(message))
                } else {
                    format!("[{name}] {message}")
                };
                self.line(&text);
            }
            Event::Partial { data, .. } => {
                let text = match data {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.line(&text);
            }
            _ => {}
        }
    }

    fn flush(&mut self) {
        self.batch_now = None;
    }

    fn stderr(&mut self, chunk: &[u8]) {
        let Some(live) = &mut self.live else {
            let _ = std::io::stderr().lock().write_all(chunk);
            return;
        };
        live.pending.extend_from_slice(chunk);
        let Some(end) = live.pending.iter().rposition(|b| *b == b'\n') else {
            // A long line with no end yet goes out as it is, rather than held without bound.
            if live.pending.len() > 64 * 1024 {
                let all = std::mem::take(&mut live.pending);
                live.above(|err| {
                    let _ = err.write_all(&all);
                    let _ = writeln!(err);
                });
            }
            return;
        };
        let lines: Vec<u8> = live.pending.drain(..=end).collect();
        // On a terminal what a tool writes is shown, never obeyed (escape sequences made visible).
        let lines = term::clean(&String::from_utf8_lossy(&lines)).into_owned();
        live.above(|err| {
            let _ = err.write_all(lines.as_bytes());
        });
    }
}

/// `--events`: every event line goes to stdout as the tool wrote it; the tool's stderr to stderr.
pub struct Events {
    out: std::io::BufWriter<std::io::Stdout>,
    saw_error: bool,
    /// The tool's stderr on a terminal: control sequences made visible (stdout, the event stream, stays exact).
    clean: Option<CleanStream>,
}

impl Default for Events {
    fn default() -> Self {
        Events::new()
    }
}

impl Events {
    pub fn new() -> Events {
        Events {
            out: std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout()),
            saw_error: false,
            clean: std::io::stderr().is_terminal().then(CleanStream::default),
        }
    }

    fn line(&mut self, raw: &[u8]) {
        let _ = self.out.write_all(raw.trim_ascii());
        let _ = self.out.write_all(b"\n");
    }

    /// The final event, printed once the runner has the call's outcome: a result only after the exit status
    /// was checked, with its content blocks (protocol.md §5.2) as the tool sent them, masked (the line was held
    /// to the output cap: a larger one ended the call `output_capped`); a runner error as an `error` event with
    /// `"source": "runner"`.
    pub fn finish(&mut self, outcome: &Result<Value, CallError>, content: Option<&[Value]>) {
        match outcome {
            Ok(v) => {
                let mut ev = serde_json::json!({"type": "result", "result": v});
                if let Some(c) = content {
                    ev["content"] = Value::from(c.to_vec());
                }
                self.line(ev.to_string().as_bytes())
            }
            Err(e) if e.code == awt_core::ErrorCode::ToolError && self.saw_error => {}
            Err(e) => {
                let mut o = e.to_json()["error"].clone();
                if let Value::Object(m) = &mut o {
                    m.insert("type".into(), "error".into());
                    if e.code != awt_core::ErrorCode::ToolError {
                        m.insert("source".into(), "runner".into());
                    }
                }
                self.line(o.to_string().as_bytes());
            }
        }
        let _ = self.out.flush();
        if let Some(c) = &mut self.clean {
            let _ = std::io::stderr().write_all(c.finish().as_bytes());
        }
    }
}

impl Observer for Events {
    fn event(&mut self, event: &Event, raw: &[u8]) {
        match event {
            // Printed by finish(), after the runner has checked the exit status.
            Event::Result { .. } => return,
            Event::Error { .. } => self.saw_error = true,
            _ => {}
        }
        self.line(raw);
    }
    fn unknown(&mut self, raw: &[u8]) {
        self.line(raw);
    }
    fn flush(&mut self) {
        let _ = self.out.flush();
    }
    fn stderr(&mut self, chunk: &[u8]) {
        match &mut self.clean {
            Some(c) => {
                let _ = std::io::stderr().write_all(c.push(chunk).as_bytes());
            }
            None => {
                let _ = std::io::stderr().write_all(chunk);
            }
        }
    }
}

/// Print a result on stdout.
pub fn print_result(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = match v {
        Value::String(s) => {
            let s = term::for_stdout(s);
            if s.ends_with('\n') {
                write!(out, "{s}")
            } else {
                writeln!(out, "{s}")
            }
        }
        _ if std::io::stdout().is_terminal() => {
            // Why clean JSON too: serde escapes C0 controls in strings but writes C1 and bidi characters as they are.
            writeln!(
                out,
                "{}",
                term::clean(&serde_json::to_string_pretty(v).unwrap_or_default())
            )
        }
        _ => writeln!(out, "{v}"),
    };
}

/// Print a failed call: a sentence on stderr, and the `{"error": …}` object on stdout for programs. When both
/// would land on the same terminal, the JSON object alone says it (once).
pub fn print_error(e: &CallError, json_on_stdout: bool) {
    print_error_with(e, json_on_stdout, true)
}

/// [`print_error`] after a call whose stderr was already shown live: its stderr tail is not repeated.
pub fn print_call_error(e: &CallError, json_on_stdout: bool) {
    print_error_with(e, json_on_stdout, false)
}

fn print_error_with(e: &CallError, json_on_stdout: bool, tail: bool) {
    let err_tty = std::io::stderr().is_terminal();
    let sentence = !(json_on_stdout && err_tty && std::io::stdout().is_terminal());
    if sentence {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "animaworks-tool: {} {}",
            paint(term::RED, &format!("{}:", e.code)),
            e.message
        );
        if let Some(h) = &e.hint {
            let _ = writeln!(err, "  {}", paint(term::DIM, &format!("hint: {h}")));
        }
        if let (true, true, Some(Value::String(t))) = (tail, err_tty, e.detail(Detail::StderrTail)) {
            let lines: Vec<&str> = t.lines().collect();
            let start = lines.len().saturating_sub(10);
            let _ = writeln!(err, "  stderr (last lines):");
            for l in &lines[start..] {
                let _ = writeln!(err, "    {}", printable(l));
            }
        }
    }
    if json_on_stdout {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", term::for_stdout(&e.to_json().to_string()));
    }
}
