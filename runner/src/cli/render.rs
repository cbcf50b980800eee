//! How a call looks at a terminal or in a pipe: the result on stdout (pretty on a terminal, compact when
//! piped; a string result as plain text), progress and logs on stderr while the tool runs (a bar on a
//! terminal), or with `--events` the raw event stream as JSON lines.

use crate::error::CallError;
use crate::stream::Observer;
use serde_json::Value;
use std::io::{IsTerminal, Write};
use tool_sdk::protocol::{Event, Level};

pub struct Human {
    tty: bool,
    bar_shown: bool,
    last_progress: Option<std::time::Instant>,
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
        }
    }

    fn clear_bar(&mut self, err: &mut impl Write) {
        if self.bar_shown {
            let _ = write!(err, "\r\x1b[2K");
            self.bar_shown = false;
        }
    }

    /// A progress step that comes too soon after the last one shown (checked before stderr is locked: a tool may
    /// send millions).
    fn skip(&mut self, event: &Event) -> bool {
        let Event::Progress { progress, total, .. } = event else {
            return false;
        };
        let last_step = total.is_some_and(|t| *progress >= t);
        let now = std::time::Instant::now();
        if !last_step
            && self
                .last_progress
                .is_some_and(|t| now.duration_since(t) < PROGRESS_EVERY)
        {
            return true;
        }
        self.last_progress = Some(now);
        false
    }

    pub fn finish(&mut self) {
        let mut err = std::io::stderr().lock();
        self.clear_bar(&mut err);
    }
}

impl Observer for Human {
    fn event(&mut self, event: &Event, _raw: &[u8]) {
        if self.skip(event) {
            return;
        }
        let mut err = std::io::stderr().lock();
        match event {
            Event::Progress {
                progress,
                total,
                message,
                ..
            } => {
                let msg = message.as_deref().unwrap_or("");
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
                let _ = writeln!(err, "[{l}] {message}");
            }
            Event::Partial { data, .. } => {
                self.clear_bar(&mut err);
                match data {
                    Value::String(s) => {
                        let _ = writeln!(err, "{s}");
                    }
                    other => {
                        let _ = writeln!(err, "{other}");
                    }
                }
            }
            _ => {}
        }
    }

    fn stderr(&mut self, chunk: &[u8]) {
        let mut err = std::io::stderr().lock();
        self.clear_bar(&mut err);
        let _ = err.write_all(chunk);
    }
}

/// `--events`: every event line goes to stdout as the tool wrote it; the tool's stderr to stderr.
pub struct Events {
    out: std::io::BufWriter<std::io::Stdout>,
    saw_error: bool,
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
        let _ = std::io::stderr().write_all(chunk);
    }
}

/// Print a result on stdout.
pub fn print_result(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = match v {
        Value::String(s) => {
            if s.ends_with('\n') {
                write!(out, "{s}")
            } else {
                writeln!(out, "{s}")
            }
        }
        _ if std::io::stdout().is_terminal() => {
            writeln!(out, "{}", serde_json::to_string_pretty(v).unwrap_or_default())
        }
        _ => writeln!(out, "{v}"),
    };
}

/// Print a failed call: a sentence on stderr, and the `{"error": …}` object on stdout for programs.
pub fn print_error(e: &CallError, json_on_stdout: bool) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "animaworks-tool: {}: {}", e.code, e.message);
    if let Some(h) = &e.hint {
        let _ = writeln!(err, "  hint: {h}");
    }
    if let Some(Value::String(t)) = e.detail("stderr_tail") {
        if std::io::stderr().is_terminal() {
            let lines: Vec<&str> = t.lines().collect();
            let start = lines.len().saturating_sub(10);
            let _ = writeln!(err, "  stderr (last lines):");
            for l in &lines[start..] {
                let _ = writeln!(err, "    {l}");
            }
        }
    }
    if json_on_stdout {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", e.to_json());
    }
}
