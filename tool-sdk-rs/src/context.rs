//! What a handler sees of its call: [`Context`].

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::protocol::{self, Event, Level};

/// The call a handler is serving, and the way it sends progress, log and partial events while it works.
///
/// Events are written and flushed at once, one line each. Writing never fails a handler: if stdout is gone (the
/// runner ended the call), later events are dropped and the handler's result goes nowhere either.
pub struct Context<'a> {
    call: &'a protocol::RequestContext,
    pub(crate) sink: EventSink<'a>,
}

/// Where a call's events go: the protocol stream, tagged with the call id in `--serve` mode (§9).
pub(crate) struct EventSink<'a> {
    out: &'a mut dyn Write,
    /// `Some` in `--serve` mode: every event carries the call id.
    tag: Option<String>,
    broken: bool,
}

impl<'a> EventSink<'a> {
    pub(crate) fn new(out: &'a mut dyn Write, tag: Option<String>) -> Self {
        EventSink {
            out,
            tag,
            broken: false,
        }
    }

    /// Writes one event as one line and flushes it, so the runner sees it as it happens.
    pub(crate) fn emit(&mut self, mut event: Event) {
        if self.broken {
            return;
        }
        if let Some(id) = &self.tag {
            set_call_id(&mut event, id.clone());
        }
        // Serialize first, then write the whole line with one call, so a line is never left half written.
        let mut line = match serde_json::to_vec(&event) {
            Ok(line) => line,
            Err(e) => {
                eprintln!("tool-sdk: could not serialize an event: {e}");
                return;
            }
        };
        line.push(b'\n');
        if let Err(e) = self.out.write_all(&line).and_then(|()| self.out.flush()) {
            eprintln!("tool-sdk: stdout is gone, dropping further events: {e}");
            self.broken = true;
        }
    }
}

fn set_call_id(event: &mut Event, id: String) {
    match event {
        Event::Progress { call_id, .. }
        | Event::Log { call_id, .. }
        | Event::Partial { call_id, .. }
        | Event::Result { call_id, .. }
        | Event::Error { call_id, .. } => *call_id = Some(id),
    }
}

impl<'a> Context<'a> {
    pub(crate) fn new(call: &'a protocol::RequestContext, sink: EventSink<'a>) -> Self {
        Context { call, sink }
    }

    /// The whole context of the request (protocol.md §4), as the runner sent it.
    pub fn request_context(&self) -> &protocol::RequestContext {
        self.call
    }

    /// The unique id of this call.
    pub fn call_id(&self) -> &str {
        &self.call.call_id
    }

    /// The tool name the runner knows this tool by (its file stem).
    pub fn tool(&self) -> &str {
        &self.call.tool
    }

    /// The action being called.
    pub fn action(&self) -> &str {
        &self.call.action
    }

    /// The calling anima, when there is one.
    pub fn anima_name(&self) -> Option<&str> {
        self.call.anima_name.as_deref()
    }

    /// The calling anima's directory, when there is one. It is also the working directory (§8).
    pub fn anima_dir(&self) -> Option<&Path> {
        self.call.anima_dir.as_deref().map(Path::new)
    }

    /// The AnimaWorks data directory.
    pub fn data_dir(&self) -> Option<&Path> {
        self.call.data_dir.as_deref().map(Path::new)
    }

    /// The call's timeout in seconds, as the runner computed it.
    pub fn timeout_s(&self) -> Option<f64> {
        self.call.timeout_s
    }

    /// When the runner will end the call (SIGTERM to the process group, §7).
    pub fn deadline(&self) -> Option<SystemTime> {
        self.call.deadline_ms.map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
    }

    /// Time left before [`Context::deadline`]; zero once it has passed, `None` without a deadline.
    pub fn remaining(&self) -> Option<Duration> {
        let deadline = self.deadline()?;
        Some(deadline.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
    }

    /// Reports how far along the call is, e.g. `ctx.progress(2.0, Some(5.0))`. Non-finite numbers are not
    /// representable in JSON: a non-finite `progress` sends nothing, a non-finite `total` is left out.
    pub fn progress(&mut self, progress: f64, total: Option<f64>) {
        self.send_progress(progress, total, None);
    }

    /// [`Context::progress`] with a message.
    pub fn progress_msg(&mut self, progress: f64, total: Option<f64>, message: impl Into<String>) {
        self.send_progress(progress, total, Some(message.into()));
    }

    fn send_progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        if !progress.is_finite() {
            return;
        }
        let total = total.filter(|t| t.is_finite());
        self.sink.emit(Event::progress(progress, total, message));
    }

    /// Sends a line for the log.
    pub fn log(&mut self, level: Level, message: impl Into<String>) {
        self.sink.emit(Event::log(level, message));
    }

    /// A `debug` log line.
    pub fn debug(&mut self, message: impl Into<String>) {
        self.log(Level::Debug, message);
    }

    /// An `info` log line.
    pub fn info(&mut self, message: impl Into<String>) {
        self.log(Level::Info, message);
    }

    /// A `warning` log line.
    pub fn warn(&mut self, message: impl Into<String>) {
        self.log(Level::Warning, message);
    }

    /// Sends a piece of output shown as it arrives. It is not part of the result. A value that does not
    /// serialize is replaced by an `error` log line saying so.
    pub fn partial(&mut self, data: impl Serialize) {
        match serde_json::to_value(data) {
            Ok(data) => self.sink.emit(Event::Partial { data, call_id: None }),
            Err(e) => self.log(Level::Error, format!("a partial output did not serialize: {e}")),
        }
    }
}
