//! Running a tool: the process entry ([`Tool::run`]) and the two stdin/stdout loops it drives, one call
//! ([`Tool::call_once`], §4-5) and a persistent worker ([`Tool::serve`], §9).

use std::io::{self, BufRead, IsTerminal, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::Value;

use crate::context::{Context, EventSink};
use crate::error::ToolError;
use crate::protocol::{Event, Request};
use crate::tool::Tool;

impl Tool {
    /// The whole `main` of a tool: reads the command line, runs what it asks, and exits.
    ///
    /// | command line | does |
    /// |---|---|
    /// | `--schemas` | prints [`Tool::schemas`] as JSON |
    /// | (none), stdin not a terminal | one call: reads one request line, writes its events ([`Tool::call_once`]) |
    /// | `--serve` | a persistent worker ([`Tool::serve`]) |
    /// | `--help`, `-h`, or none with stdin a terminal | prints [`Tool::help`] |
    /// | `--version`, `-V` | prints the name and version |
    ///
    /// Exit codes: 0 after a `result`, 1 after an `error` or when [`Tool::check`] fails, 2 for a command line
    /// it does not know (or a bare start on a terminal).
    ///
    /// Before it reads a request, `run` (on Unix) moves the protocol stream to a private copy of stdout and
    /// points file descriptor 1 at stderr, so a stray `println!` in a handler, or a child process that inherits
    /// stdout, lands in the log instead of breaking the event stream.
    pub fn run(self) -> ! {
        #[cfg(unix)]
        crate::credential::install_from_environment();
        let args: Vec<String> = std::env::args().skip(1).collect();
        let code = self.main(&args);
        std::process::exit(code)
    }

    fn main(&self, args: &[String]) -> i32 {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stdin = io::stdin();
        let wants_help = matches!(args.as_slice(), ["--help" | "-h" | "--version" | "-V"])
            || (args.is_empty() && stdin.is_terminal());
        if !wants_help {
            if let Err(problems) = self.check() {
                eprintln!("{}: this tool is declared wrongly:", self.name);
                for p in problems {
                    eprintln!("  - {p}");
                }
                return 1;
            }
        }
        match args.as_slice() {
            [] if stdin.is_terminal() => {
                print!("{}", self.help());
                2
            }
            [] => {
                let mut out = protocol_stdout();
                self.call_once(stdin.lock(), &mut out)
            }
            ["--schemas"] => {
                let doc = serde_json::to_string_pretty(&self.schemas()).expect("a schemas document serializes");
                println!("{doc}");
                0
            }
            ["--serve"] => {
                let mut out = protocol_stdout();
                match self.serve(stdin.lock(), &mut out) {
                    Ok(()) => 0,
                    Err(e) => {
                        eprintln!("{}: stdin failed: {e}", self.name);
                        1
                    }
                }
            }
            ["--help" | "-h"] => {
                print!("{}", self.help());
                0
            }
            ["--version" | "-V"] => {
                println!("{} {}", self.name, self.schemas().version.unwrap_or_default());
                0
            }
            other => {
                eprintln!("{}: unknown arguments {other:?}; try --help", self.name);
                2
            }
        }
    }

    /// One call (§4-5): reads the first non-blank line of `input` as the request, runs its action, and writes
    /// its events to `output`, ending with one final event. Returns the exit code: 0 after a `result`, 1 after
    /// an `error`.
    pub fn call_once(&self, mut input: impl BufRead, output: &mut dyn Write) -> i32 {
        let mut line = String::new();
        let read = loop {
            line.clear();
            match input.read_line(&mut line) {
                Ok(0) => break Err("stdin closed before a request arrived".to_owned()),
                Ok(_) if line.trim().is_empty() => continue,
                Ok(_) => break Ok(()),
                Err(e) => break Err(format!("could not read the request: {e}")),
            }
        };
        let request = read.and_then(|()| {
            serde_json::from_str::<Request>(&line).map_err(|e| format!("the request is not a protocol request: {e}"))
        });
        let ok = match request {
            Ok(request) => self.handle(&with_env(request), output, None),
            Err(message) => {
                EventSink::new(output, None).emit(error_event(ToolError::new(ToolError::BAD_REQUEST, message)));
                false
            }
        };
        if ok {
            0
        } else {
            1
        }
    }

    /// A persistent worker (§9): one request per line of `input`, handled in order; every event carries the
    /// request's `context.call_id`. Returns when `input` closes. A line that is not a request gets an `error`
    /// event (tagged with its call id if one can be found in it) and the worker goes on.
    pub fn serve(&self, mut input: impl BufRead, output: &mut dyn Write) -> io::Result<()> {
        let mut line = String::new();
        loop {
            line.clear();
            if input.read_line(&mut line)? == 0 {
                return Ok(());
            }
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Request>(&line) {
                Ok(request) => {
                    let id = request.context.call_id.clone();
                    self.handle(&request, output, Some(id));
                }
                Err(e) => {
                    let id = serde_json::from_str::<Value>(&line)
                        .ok()
                        .and_then(|v| v.pointer("/context/call_id").and_then(Value::as_str).map(str::to_owned));
                    let err = ToolError::new(
                        ToolError::BAD_REQUEST,
                        format!("the request is not a protocol request: {e}"),
                    );
                    EventSink::new(output, id).emit(error_event(err));
                }
            }
        }
    }

    /// Runs one request and writes its events, the last one final. `tag` is the call id every event carries
    /// (`--serve`), or `None`. Returns whether the call ended with a `result`.
    pub(crate) fn handle(&self, request: &Request, output: &mut dyn Write, tag: Option<String>) -> bool {
        let mut sink = EventSink::new(output, tag);
        let Some(action) = self.find_action(request) else {
            let names: Vec<&str> = self.actions.iter().map(|a| a.decl.name.as_str()).collect();
            let err = ToolError::new(
                ToolError::UNKNOWN_ACTION,
                format!("{} has no action {:?}", self.name, request.name),
            )
            .with_hint(format!("actions: {}", names.join(", ")));
            sink.emit(error_event(err));
            return false;
        };
        let mut call = request.context.clone();
        // The handler sees the action as declared, whatever spelling the request used (§3).
        call.action = action.decl.name.clone();
        if call.tool.is_empty() {
            call.tool = self.name.clone();
        }
        let mut ctx = Context::new(&call, sink);
        // Why AssertUnwindSafe: after a panic the handler's state is never looked at again by this call; the
        // panic becomes the call's final error event, and in --serve mode the next call starts afresh.
        let outcome = catch_unwind(AssertUnwindSafe(|| (action.handler)(request.args.clone(), &mut ctx)));
        let (event, ok) = match outcome {
            Ok(Ok(value)) => (Event::result(value), true),
            Ok(Err(err)) => (error_event(err), false),
            Err(payload) => {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string panic payload".to_owned());
                let err = ToolError::new(
                    ToolError::PANIC,
                    format!("the handler of {:?} panicked: {what}", action.decl.name),
                )
                .with_hint("a bug in the tool; its stderr has the panic location");
                (error_event(err), false)
            }
        };
        ctx.sink.emit(event);
        ok
    }
}

fn error_event(err: ToolError) -> Event {
    Event::Error {
        error: err.into(),
        call_id: None,
    }
}

/// Fills context fields the request left out from the environment the runner sets (§8), so that a request
/// typed by hand still sees the call id, anima and deadline.
fn with_env(mut request: Request) -> Request {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let c = &mut request.context;
    if c.call_id.is_empty() {
        c.call_id = env("ANIMAWORKS_CALL_ID").unwrap_or_default();
    }
    c.anima_name = c.anima_name.take().or_else(|| env("ANIMAWORKS_ANIMA_NAME"));
    c.anima_dir = c.anima_dir.take().or_else(|| env("ANIMAWORKS_ANIMA_DIR"));
    c.data_dir = c.data_dir.take().or_else(|| env("ANIMAWORKS_DATA_DIR"));
    c.deadline_ms = c
        .deadline_ms
        .or_else(|| env("ANIMAWORKS_DEADLINE_MS").and_then(|v| v.parse().ok()));
    request
}

/// The writer for the protocol stream.
///
/// Why (Unix): stdout belongs to the protocol, but a handler's `println!` or a child process it starts with
/// inherited stdio would write into the same pipe and break the stream. So the pipe is kept on a private,
/// close-on-exec duplicate, and file descriptor 1 is pointed at stderr, where stray output is only a log line.
/// Elsewhere the stream is plain stdout.
#[cfg(unix)]
fn protocol_stdout() -> Box<dyn Write> {
    use std::os::fd::AsFd;

    let _ = io::stdout().flush();
    // try_clone_to_owned duplicates with F_DUPFD_CLOEXEC, so child processes do not inherit the pipe.
    let Ok(private) = io::stdout().as_fd().try_clone_to_owned() else {
        return Box::new(io::stdout());
    };
    // dup2(2, 1): fd 1 replaced atomically by stderr.
    if rustix::stdio::dup2_stdout(io::stderr()).is_err() {
        return Box::new(io::stdout());
    }
    Box::new(std::fs::File::from(private))
}

#[cfg(not(unix))]
fn protocol_stdout() -> Box<dyn Write> {
    Box::new(io::stdout())
}
