//! How a call looks at a terminal or in a pipe: the result on stdout (pretty on a terminal, compact when
//! piped; a string result as plain text), progress and logs on stderr while the tool runs (a bar on a
//! terminal), or with `--events` the raw event stream as JSON lines.

use super::term::{self, CleanStream};
use crate::error::CallError;
use crate::stream::Observer;
use serde_json::Value;
use std::io::{IsTerminal, Write};
use tool_sdk::protocol::{Event, Level};

pub struct Human {
    tty: bool,
    bar_shown: bool,
    last_progress: Option<std::time::Instant>,
    /// On a terminal, the tool's stderr is shown with its control sequences made visible.
    clean: CleanStream,
}

/// Progress is shown at most this often (the last step of a known total always shows): a tool may report
/// millions of steps, and a line each would cost more than the tool's work.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

impl Default for Human {
    fn default() -> Self {
        Human::new()
    }
}

impl Human {
    pub fn new() -> Human {
        Human {
            tty: std::io::stderr().is_terminal(),
            bar_shown: false,
            last_progress: None,
            clean: CleanStream::default(),
        }
    }

    fn clear_bar(&mut self, err: &mut impl Write) {
        if self.bar_shown {
            let _ = write!(err, "\r\x1b[2K");
            self.bar_shown = false;
        }
    }

    pub fn finish(&mut self) {
        let mut err = std::io::stderr().lock();
        self.clear_bar(&mut err);
        let rest = self.clean.finish();
        let _ = err.write_all(rest.as_bytes());
    }

    /// What a tool said, as it may reach stderr: made harmless on a terminal, exact in a pipe.
    fn said<'a>(&self, s: &'a str) -> std::borrow::Cow<'a, str> {
        if self.tty {
            term::clean(s)
        } else {
            std::borrow::Cow::Borrowed(s)
        }
    }
}

impl Observer for Human {
    fn event(&mut self, event: &Event, _raw: &[u8]) {
        let mut err = std::io::stderr().lock();
        match event {
            Event::Progress {
                progress,
                total,
                message,
                ..
            } => {
                let last_step = total.is_some_and(|t| *progress >= t);
                let now = std::time::Instant::now();
                if !last_step
                    && self
                        .last_progress
                        .is_some_and(|t| now.duration_since(t) < PROGRESS_EVERY)
                {
                    return;
                }
                self.last_progress = Some(now);
                let msg = self.said(message.as_deref().unwrap_or(""));
                let count = match total {
                    Some(t) => format!("{progress}/{t}"),
                    None => format!("{progress}"),
                };
                if self.tty {
                    let bar = match total {
                        Some(t) if *t > 0.0 => {
                            let filled = ((progress / t).clamp(0.0, 1.0) * 24.0).round() as usize;
                            format!("[{}{}] ", "#".repeat(filled), " ".repeat(24 - filled))
                        }
                        _ => String::new(),
                    };
                    let _ = write!(err, "\r\x1b[2K{bar}{count} {msg}");
                    self.bar_shown = true;
                } else {
                    let _ = writeln!(err, "progress {count} {msg}");
                }
            }
            Event::Log { level, message, .. } => {
                self.clear_bar(&mut err);
                let l = match level {
                    Level::Debug => "debug",
                    Level::Info => "info",
                    Level::Warning => "warning",
                    Level::Error => "error",
                };
                let _ = writeln!(err, "[{l}] {}", self.said(message));
            }
            Event::Partial { data, .. } => {
                self.clear_bar(&mut err);
                match data {
                    Value::String(s) => {
                        let _ = writeln!(err, "{}", self.said(s));
                    }
                    other => {
                        let _ = writeln!(err, "{}", self.said(&other.to_string()));
                    }
                }
            }
            _ => {}
        }
    }

    fn stderr(&mut self, chunk: &[u8]) {
        let mut err = std::io::stderr().lock();
        self.clear_bar(&mut err);
        if self.tty {
            let _ = err.write_all(self.clean.push(chunk).as_bytes());
        } else {
            let _ = err.write_all(chunk);
        }
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
    /// was checked; a runner error as an `error` event with `"source": "runner"`.
    pub fn finish(&mut self, outcome: &Result<Value, CallError>) {
        match outcome {
            Ok(v) => self.line(
                serde_json::json!({"type": "result", "result": v})
                    .to_string()
                    .as_bytes(),
            ),
            Err(e) if e.code == crate::ErrorCode::ToolError && self.saw_error => {}
            Err(e) => {
                let mut o = e.to_json()["error"].clone();
                if let Value::Object(m) = &mut o {
                    m.insert("type".into(), "error".into());
                    if e.code != crate::ErrorCode::ToolError {
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

/// Print a failed call: a sentence on stderr, and the `{"error": …}` object on stdout for programs.
pub fn print_error(e: &CallError, json_on_stdout: bool) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "animaworks-tool: {}: {}", e.code, term::for_stderr(&e.message));
    if let Some(h) = &e.hint {
        let _ = writeln!(err, "  hint: {}", term::for_stderr(h));
    }
    if let Some(Value::String(t)) = e.detail("stderr_tail") {
        if std::io::stderr().is_terminal() {
            let lines: Vec<&str> = t.lines().collect();
            let start = lines.len().saturating_sub(10);
            let _ = writeln!(err, "  stderr (last lines):");
            for l in &lines[start..] {
                let _ = writeln!(err, "    {}", term::clean(l));
            }
        }
    }
    if json_on_stdout {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", term::for_stdout(&e.to_json().to_string()));
    }
}
