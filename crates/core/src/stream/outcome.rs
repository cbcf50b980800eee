//! Turning a finished process into the call's result or one of the closed set of errors (protocol.md §5–7).

use super::decode::{self, quote_start};
use super::{Ending, Finished, Stdout};
use crate::error::{CallError, Detail, ErrorCode};
use awt_protocol::Event;
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

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
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
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
            .with(Detail::Tool, d_tool)
            .with(Detail::Action, d_action)
            .with(Detail::DurationMs, f.duration.as_millis() as u64);
        if !f.stderr_tail.is_empty() {
            e = e.with(Detail::StderrTail, f.stderr_tail.clone());
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
            e = e.with(Detail::ExitCode, c);
        }
        if let Some(s) = signal {
            e = e.with(Detail::Signal, s);
        }
        decorate(e)
    };
    let how = match (code, signal) {
        (_, Some(s)) => format!("was killed by {} ({s})", signal_name(s)),
        (Some(c), _) => format!("exited with code {c}"),
        _ => "ended".to_owned(),
    };
    match f.stdout {
        // Why not bad_output: a tool killed (by a limit, the OOM killer, a signal) while writing a line leaves
        // half of it, and that is not what went wrong.
        Stdout::Cut(_) if !status.success() => Err(crashed(format!("{how} in the middle of a line of its output"))),
        Stdout::Bad(why) | Stdout::Cut(why) => Err(decorate(
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
                    "read the file, or raise --max-output".to_owned(),
                ),
                (Some(p), true) => (
                    format!(
                        "{who}: the output passed the cap of {max_output} bytes and then the bound on what one call may \
                         write to disk; the call was ended after {bytes} bytes and only the first part is in {}",
                        p.display()
                    ),
                    format!("make the tool write less, or raise {}", crate::env_vars::MAX_SPILL.name),
                ),
                (None, _) => (
                    format!("{who}: the output passed the cap of {max_output} bytes; the call was ended"),
                    "make the tool write less, or raise --max-output".to_owned(),
                ),
            };
            let mut e = CallError::new(ErrorCode::OutputCapped, msg)
                .hint(hint)
                .with(Detail::Bytes, bytes);
            if let Some(p) = path {
                e = e.with(Detail::Path, p.to_string_lossy().into_owned());
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
                e = e.with(Detail::ToolCode, c);
            }
            if let Some(data) = error.data {
                e = e.with(Detail::Data, data);
            }
            Err(decorate(e))
        }
        Stdout::Events {
            last: Some(Event::Result { result, content, .. }),
        } => {
            if let Some(Err(why)) = content.as_deref().map(awt_protocol::content::check) {
                return Err(decorate(
                    CallError::new(ErrorCode::BadOutput, format!("{who}: {why}"))
                        .hint("a \"content\" block is one of MCP's content blocks, whole (protocol.md §5.2)"),
                ));
            }
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
                            format!("{who}: invalid UTF-8 on stdout: {}", quote_start(&b, &f.masker)),
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
                            e = e.with(Detail::ToolCode, c);
                        }
                        if let Some(data) = err.get("data") {
                            e = e.with(Detail::Data, data.clone());
                        }
                        if let Some(c) = code {
                            e = e.with(Detail::ExitCode, c);
                        }
                        return Err(decorate(e));
                    }
                }
            }
            let mut e = crashed(how);
            if !text.trim().is_empty() {
                // Masked whole, then cut: a secret cut first would leave its start unmasked.
                let cut = text.char_indices().nth(1000).map_or(text.len(), |(i, _)| i);
                e = e.with(Detail::StdoutHead, f.masker.head(&text, cut).0);
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
