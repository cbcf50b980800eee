//! Unit-testing a tool without spawning it: the request goes through the same code as a real call, over
//! in-memory pipes, and the events come back as a [`Transcript`].
//!
//! ```
//! # use tool_sdk::{Action, Context, NoArgs, Tool, ToolError};
//! let tool = Tool::new("demo").action(Action::new("ping", |_: NoArgs, ctx: &mut Context| {
//!     ctx.progress(1.0, Some(1.0));
//!     Ok::<_, ToolError>("pong")
//! }));
//! let t = tool_sdk::testing::call(&tool, "ping", serde_json::json!({}));
//! assert_eq!(t.unwrap_result(), "pong");
//! assert_eq!(t.progress().len(), 1);
//! ```
//!
//! Every helper also checks the stream against protocol.md §5.2 (each line a known event, exactly one final
//! event, last) and the tool against [`Tool::check`], and panics with the whole transcript when either fails.

use std::fmt;
use std::io::Cursor;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::protocol::{self, parse_line, Event, Level, Line, Request, ToolErrorBody};
use crate::tool::Tool;

/// The call id the helpers give requests they build.
pub const CALL_ID: &str = "test-call";

/// A request for `action` of `tool`, as the runner would send it: name `<tool>_<action>`, and a context with
/// the call id [`CALL_ID`], the tool and action names, and no anima, data dir or deadline. Change its
/// `context` to test a handler that reads them. Panics if `args` is not a JSON object.
pub fn request(tool: &Tool, action: &str, args: Value) -> Request {
    let Value::Object(args) = args else {
        panic!("arguments must be a JSON object, not {args}")
    };
    Request {
        name: format!("{}_{action}", tool.name()),
        args,
        context: protocol::RequestContext {
            call_id: CALL_ID.to_owned(),
            tool: tool.name().to_owned(),
            action: action.to_owned(),
            ..protocol::RequestContext::default()
        },
    }
}

/// Calls `action` with `args` as one call (§4-5) and returns its events.
pub fn call(tool: &Tool, action: &str, args: Value) -> Transcript {
    call_request(tool, &request(tool, action, args))
}

/// Sends `request` as one call (§4-5) and returns its events.
pub fn call_request(tool: &Tool, request: &Request) -> Transcript {
    assert_declared_well(tool);
    let mut stdin = serde_json::to_vec(request).expect("a request serializes");
    stdin.push(b'\n');
    let mut stdout = Vec::new();
    let code = tool.call_once(Cursor::new(stdin), &mut stdout);
    let lines = split_lines(&stdout);
    let events = lines.iter().map(|l| event_of(l, &lines)).collect();
    let t = Transcript {
        lines,
        events,
        exit_code: Some(code),
    };
    t.assert_one_final();
    let expected = if t.is_ok() { 0 } else { 1 };
    assert_eq!(code, expected, "exit code does not match the final event:\n{t}");
    t
}

/// Sends `requests` to one persistent worker (`--serve`, §9) and returns each call's events, in order. Checks
/// that every event carries its request's call id; give each request its own `context.call_id`.
pub fn serve(tool: &Tool, requests: &[Request]) -> Vec<Transcript> {
    assert_declared_well(tool);
    let mut stdin = Vec::new();
    for r in requests {
        serde_json::to_writer(&mut stdin, r).expect("a request serializes");
        stdin.push(b'\n');
    }
    let mut stdout = Vec::new();
    tool.serve(Cursor::new(stdin), &mut stdout)
        .expect("in-memory pipes do not fail");
    let all = split_lines(&stdout);
    let mut out: Vec<Transcript> = Vec::new();
    let mut current = Transcript {
        lines: Vec::new(),
        events: Vec::new(),
        exit_code: None,
    };
    let mut next = requests.iter();
    let mut want = next.next();
    for line in &all {
        let event = event_of(line, &all);
        let Some(request) = want else {
            panic!("an event after the last call ended:\n{}", all.join("\n"))
        };
        assert_eq!(
            event.call_id(),
            Some(request.context.call_id.as_str()),
            "an event of a --serve call without its call id:\n{}",
            all.join("\n")
        );
        let fin = event.is_final();
        current.lines.push(line.clone());
        current.events.push(event);
        if fin {
            out.push(std::mem::replace(
                &mut current,
                Transcript {
                    lines: Vec::new(),
                    events: Vec::new(),
                    exit_code: None,
                },
            ));
            want = next.next();
        }
    }
    assert!(
        want.is_none() && current.events.is_empty(),
        "a call did not end with a final event:\n{}",
        all.join("\n")
    );
    out
}

fn assert_declared_well(tool: &Tool) {
    if let Err(problems) = tool.check() {
        panic!(
            "tool {:?} is declared wrongly:\n  - {}",
            tool.name(),
            problems.join("\n  - ")
        );
    }
}

fn split_lines(stdout: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(stdout).expect("the event stream is UTF-8");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

fn event_of(line: &str, all: &[String]) -> Event {
    match parse_line(line.as_bytes()) {
        Line::Event(e) => e,
        other => panic!("not a protocol event line ({other:?}):\n{}", all.join("\n")),
    }
}

/// The events of one call, as written on stdout.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The stdout lines, blank lines left out.
    pub lines: Vec<String>,
    /// The lines, parsed.
    pub events: Vec<Event>,
    /// The exit code a real process would end with (one call); `None` in `--serve` mode.
    pub exit_code: Option<i32>,
}

impl Transcript {
    fn assert_one_final(&self) {
        let finals = self.events.iter().filter(|e| e.is_final()).count();
        assert!(
            finals == 1 && self.events.last().is_some_and(Event::is_final),
            "the stream must end with exactly one final event:\n{self}"
        );
    }

    /// The final event.
    pub fn final_event(&self) -> &Event {
        self.events.last().expect("a transcript has a final event")
    }

    /// Whether the call ended with a `result`.
    pub fn is_ok(&self) -> bool {
        matches!(self.final_event(), Event::Result { .. })
    }

    /// The result, if the call succeeded.
    pub fn result(&self) -> Option<&Value> {
        match self.final_event() {
            Event::Result { result, .. } => Some(result),
            _ => None,
        }
    }

    /// The error, if the call failed.
    pub fn error(&self) -> Option<&ToolErrorBody> {
        match self.final_event() {
            Event::Error { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The result; panics with the transcript if the call failed.
    #[track_caller]
    pub fn unwrap_result(&self) -> &Value {
        self.result().unwrap_or_else(|| panic!("the call failed:\n{self}"))
    }

    /// The result deserialized into `T`; panics if the call failed or the result is not a `T`.
    #[track_caller]
    pub fn result_as<T: DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.unwrap_result().clone())
            .unwrap_or_else(|e| panic!("the result does not deserialize: {e}\n{self}"))
    }

    /// The error; panics with the transcript if the call succeeded.
    #[track_caller]
    pub fn unwrap_error(&self) -> &ToolErrorBody {
        self.error().unwrap_or_else(|| panic!("the call succeeded:\n{self}"))
    }

    /// The error's code (`None` if the call succeeded or the error has none).
    pub fn error_code(&self) -> Option<&str> {
        self.error().and_then(|e| e.code.as_deref())
    }

    /// The `progress` events: `(progress, total, message)`.
    pub fn progress(&self) -> Vec<(f64, Option<f64>, Option<&str>)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Progress {
                    progress,
                    total,
                    message,
                    ..
                } => Some((*progress, *total, message.as_deref())),
                _ => None,
            })
            .collect()
    }

    /// The `log` events: `(level, message)`.
    pub fn logs(&self) -> Vec<(Level, &str)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Log { level, message, .. } => Some((*level, message.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The `partial` events' data.
    pub fn partials(&self) -> Vec<&Value> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Partial { data, .. } => Some(data),
                _ => None,
            })
            .collect()
    }
}

impl fmt::Display for Transcript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            writeln!(f, "  {line}")?;
        }
        if let Some(code) = self.exit_code {
            writeln!(f, "  (exit {code})")?;
        }
        Ok(())
    }
}
