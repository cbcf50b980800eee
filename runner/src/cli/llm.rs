//! `use-tool`, `mcp` and `schemas`: LLMs as callers. The work is in [`awt_llm`]; this maps it to stdio and
//! exit codes.

use awt_core::call::Runner;
use awt_core::error::{CallError, ErrorCode};
use awt_core::stream::{Cancel, Quiet};
use awt_llm::providers::{self, Format};
use awt_llm::use_tool::{self, Answer, Limits};
use awt_llm::{catalog, mcp};
use clap::Args;
use serde_json::{json, Value};
use std::io::Write;
use std::time::Duration;

/// `use-tool --help`: the request and answer formats and the meta tools.
pub const USE_TOOL_HELP: &str = r#"Request (one JSON object on stdin; with --serve, one per line, and its "id" is echoed):
  {"tool_name": "<tool>", "action": "<action>", "args": {...}}
  or a provider's function call, named as `schemas` gave it (shortened names too):
  {"name": "<tool>_<action>", "input"|"arguments"|"args": {...}}
  or as its SDK hands it back (with --serve, the call's id is echoed):
  {"id": "call_...", "type": "function", "function": {"name": ..., "arguments": "{...}"}}   OpenAI
  {"functionCall": {"id"?: ..., "name": ..., "args": {...}}}                             Gemini's Part

Answer:
  success   the result as text: a string as it is, null as "(no output)", other JSON indented;
            past the cap it is cut and ends with "[Output truncated because it exceeded 50KB. ...]"
  failure   {"status": "error", "error_type": "InvalidArguments|PermissionDenied|UnknownTool|Timeout|
            Cancelled|ToolExecutionError", "message": ..., "suggestion"?: ..., "code": "<runner code>"}
            (the exit status is the runner code's; see animaworks-tool --help)
  --serve   one line per answer: {"status": "ok", "result": TEXT} or the error object, each as its call
            ends (up to 64 calls at once; "id" tells them apart; --ordered: one at a time, in order).
            A line over 16 MiB, not UTF-8 or not JSON gets a "usage" error answer, and the server goes on.

Meta tools (names no tool can take):
  {"tool_name": "help", "action": "list"}                                  the compact catalogue
  {"tool_name": "help", "action": "describe", "args": {"tool": T}}         one tool's full schemas
  {"tool_name": "help", "action": "describe", "args": {"tool": T, "action": A}}
  {"tool_name": "help", "action": "search", "args": {"query": "words"}}    catalogue lines that match
  {"tool_name": "task", "action": "submit", "args": {"tool": T, "action": A, "args": {...}}}
                                                                           run in the background (needs an anima)
  {"tool_name": "task", "action": "show", "args": {"task_id": ID}}         follow it

Example:
  echo '{"tool_name": "help", "action": "list"}' | animaworks-tool use-tool"#;

#[derive(Args, Debug)]
pub struct UseToolArgs {
    /// Read one request per line and answer one JSON line per request: {"status":"ok","result":TEXT} or the
    /// error object; a request's "id" is echoed.
    #[arg(long)]
    pub serve: bool,
    /// With --serve: answer one request at a time, in the order they came (the default answers each as it ends).
    #[arg(long, requires = "serve")]
    pub ordered: bool,
    /// Cap on the answer text in UTF-8 bytes (the original counts bytes). Default: "use_tool_max_chars" in
    /// `<data dir>/animaworks-tool.json`, else 50000.
    #[arg(long, value_name = "BYTES")]
    pub max_chars: Option<usize>,
    /// Deadline of every call in seconds (default: each action's timeout_s).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Write each image, audio and resource block of a result to a file in DIR (named after the call and the
    /// block) and name the file in the answer; without it such a block is only described ("[image/png, 12 KB]").
    #[arg(long, value_name = "DIR")]
    pub save_content: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
pub struct McpArgs {
    /// Deadline of every call in seconds (default: each action's timeout_s).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

#[derive(Args, Debug)]
pub struct SchemasArgs {
    /// The provider's shape.
    #[arg(long, value_enum, default_value = "animaworks")]
    pub format: Format,
    /// Print the use_tool schema (in --format's shape) and a compact catalogue instead of every schema.
    #[arg(long, conflicts_with = "stats")]
    pub use_tool: bool,
    /// Size of each tool's schemas in --format's shape: bytes, and tokens estimated as bytes / 4.
    #[arg(long)]
    pub stats: bool,
    /// With --stats: JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// OpenAI shapes: rewrite each schema for strict mode where that keeps its meaning (optional properties become
    /// nullable, objects are closed to their declared properties, `default` moves into the description); without
    /// it, only schemas that meet strict mode's rules unchanged get "strict": true. Anthropic: give "strict",
    /// rewritten the same way except that optional properties stay optional.
    #[arg(long)]
    pub strict: bool,
}

fn timeout(secs: Option<f64>) -> Result<Option<Duration>, CallError> {
    secs.map(|s| awt_core::call::timeout_from_secs(s, "--timeout"))
        .transpose()
}

/// Long-lived modes keep persistent workers (protocol.md §9) instead of a process per call.
fn with_workers(runner: &Runner) -> Result<Runner, CallError> {
    awt_sys::reap::reap_orphans_periodically();
    let mut r = runner.clone();
    r.pool = Some(std::sync::Arc::new(awt_core::pool::WorkerPool::new(
        awt_core::pool::PoolConfig::from_settings(runner.settings()?),
    )));
    Ok(r)
}

pub async fn use_tool(runner: &Runner, args: UseToolArgs) -> i32 {
    let limits = match timeout(args.timeout).and_then(|t| Ok((t, runner.settings()?.use_tool_max_chars))) {
        Ok((t, configured)) => Limits {
            max_bytes: args.max_chars.or(configured).unwrap_or(use_tool::DEFAULT_MAX_BYTES),
            timeout: t,
            save_content: args.save_content.clone(),
        },
        Err(e) => {
            tell!("animaworks-tool use-tool: {}", e.message);
            return e.code.exit_code();
        }
    };
    let cancel = super::signals::cancel_on_signals();
    if args.serve {
        return match with_workers(runner) {
            Ok(r) => serve(r, limits, cancel, args.ordered).await,
            Err(e) => {
                tell!("animaworks-tool use-tool: {e}");
                e.code.exit_code()
            }
        };
    }
    let mut input = Vec::new();
    let answer = match tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut input).await {
        Err(e) => use_tool::error_answer(&CallError::new(ErrorCode::Usage, format!("cannot read stdin: {e}"))),
        Ok(_) => match parse(&input) {
            Ok(req) => use_tool::answer(runner, &req, &limits, &mut Quiet, cancel).await,
            Err(e) => use_tool::error_answer(&e),
        },
    };
    let mut out = std::io::stdout().lock();
    match answer {
        Answer::Text(t) => {
            let _ = out.write_all(t.as_bytes());
            let _ = out.flush();
            0
        }
        Answer::Error(Value::String(text), code) => {
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
            code.exit_code()
        }
        Answer::Error(v, code) => {
            let _ = writeln!(out, "{}", use_tool::python_json(&v));
            code.exit_code()
        }
    }
}

fn parse(line: &[u8]) -> Result<use_tool::UseToolCall, CallError> {
    let v: Value = serde_json::from_slice(line).map_err(|e| {
        CallError::new(ErrorCode::Usage, format!("invalid use_tool request: not JSON ({e})"))
            .hint(r#"send {"tool_name": "<tool>", "action": "<action>", "args": {...}}"#)
    })?;
    use_tool::parse_request(&v)
}

/// Calls `use-tool --serve` runs at once; past this it reads no further line until one ends.
const SERVE_IN_FLIGHT: usize = 64;

/// One request per line, one answer per line as each call ends (`ordered`: one call at a time, in order). A line
/// the server cannot read (over [`awt_llm::lines::MAX_LINE`], not UTF-8, not JSON) gets a `usage` error answer
/// and the server goes on. A signal ends the running calls and then the loop.
async fn serve(runner: Runner, limits: Limits, cancel: Cancel, ordered: bool) -> i32 {
    use awt_llm::lines;
    let mut input = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Answered>(SERVE_IN_FLIGHT);
    let writer = tokio::spawn(async move {
        let mut cancelled = false;
        while let Some((answer, id)) = rx.recv().await {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", answer.to_line(id.as_ref()));
            let _ = out.flush();
            cancelled |= matches!(&answer, Answer::Error(_, ErrorCode::Cancelled));
        }
        cancelled
    });
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(if ordered { 1 } else { SERVE_IN_FLIGHT }));
    let mut stopped = cancel.clone();
    let mut status = 0;
    loop {
        let line = tokio::select! {
            l = lines::next(&mut input, lines::MAX_LINE) => l,
            _ = stopped.cancelled() => break,
        };
        let line = match line {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                tell!("animaworks-tool use-tool --serve: cannot read stdin: {e}");
                status = ErrorCode::Internal.exit_code();
                break;
            }
        };
        let (req, id) = match serve_request(line) {
            Some(r) => r,
            None => continue,
        };
        let req = match req {
            Ok(r) => r,
            Err(e) => {
                let _ = tx.send((use_tool::error_answer(&e), id)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().acquire_owned().await else {
            break;
        };
        let (runner, limits, cancel, tx) = (runner.clone(), limits.clone(), cancel.clone(), tx.clone());
        let call = tokio::spawn(async move {
            let answer = awt_llm::answered(use_tool::answer(&runner, &req, &limits, &mut Quiet, cancel))
                .await
                .unwrap_or_else(|e| use_tool::error_answer(&e));
            let _ = tx.send((answer, id)).await;
            drop(slot);
        });
        if ordered {
            let _ = call.await;
        }
    }
    // Every running call answers before the end.
    let _ = slots
        .acquire_many(if ordered { 1 } else { SERVE_IN_FLIGHT as u32 })
        .await;
    drop(tx);
    let cancelled = writer.await.unwrap_or(false);
    if cancelled {
        ErrorCode::Cancelled.exit_code()
    } else {
        status
    }
}

/// An answer and the id of its request.
type Answered = (Answer, Option<Value>);

/// A `--serve` line as a request and its id; `None` for a blank line.
fn serve_request(line: awt_llm::lines::Line) -> Option<(Result<use_tool::UseToolCall, CallError>, Option<Value>)> {
    use awt_llm::lines::Line;
    let bad = |what: String| {
        CallError::new(ErrorCode::Usage, format!("invalid use_tool request: {what}"))
            .hint(r#"send one JSON object per line: {"tool_name": "<tool>", "action": "<action>", "args": {...}}"#)
    };
    let bytes = match line {
        Line::TooLong(n) => {
            let max = awt_llm::lines::MAX_LINE;
            return Some((
                Err(bad(format!(
                    "a line of {n} bytes is over the bound of {max} bytes; it was dropped"
                ))),
                None,
            ));
        }
        Line::Bytes(b) => b,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => {
            let id = serde_json::from_str::<Value>(&String::from_utf8_lossy(&bytes))
                .ok()
                .and_then(|v| v.get("id").cloned());
            return Some((
                Err(bad(format!(
                    "the line is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ))),
                id,
            ));
        }
    };
    let parsed: Option<Value> = serde_json::from_str(text).ok();
    let id = parsed.as_ref().and_then(use_tool::request_id).cloned();
    Some((parse(text.as_bytes()), id))
}

pub async fn mcp(runner: &Runner, args: McpArgs) -> i32 {
    let t = match timeout(args.timeout) {
        Ok(t) => t,
        Err(e) => {
            tell!("animaworks-tool mcp: {}", e.message);
            return e.code.exit_code();
        }
    };
    let runner = match with_workers(runner) {
        Ok(r) => r,
        Err(e) => {
            tell!("animaworks-tool mcp: {e}");
            return e.code.exit_code();
        }
    };
    // Said for the tests and for whoever wonders how many calls' own work runs at once.
    tracing::debug!(
        "serving on {} runtime threads",
        tokio::runtime::Handle::current().metrics().num_workers()
    );
    match mcp::serve(
        runner,
        mcp::Options {
            timeout: t,
            ..Default::default()
        },
    )
    .await
    {
        Ok(()) => 0,
        Err(e) => {
            tell!("animaworks-tool mcp: {e}");
            ErrorCode::Internal.exit_code()
        }
    }
}

pub async fn schemas(runner: &Runner, args: SchemasArgs) -> i32 {
    // A permissions file that cannot be used leaves no action permitted: say so, never an empty list alone.
    if let Some(p) = catalog::permissions_problem(runner) {
        tell!("animaworks-tool schemas: {}", p.message);
        return 1;
    }
    let entries = catalog::permitted(runner).await;
    let mut out = std::io::stdout().lock();
    if args.use_tool {
        let tool = use_tool::schema();
        let shaped = match args.format {
            Format::Animaworks | Format::Anthropic => tool,
            Format::Openai => json!({"type": "function", "function": {
                "name": tool["name"], "description": tool["description"], "parameters": tool["input_schema"], "strict": false}}),
            Format::OpenaiResponses => {
                json!({"type": "function", "name": tool["name"], "description": tool["description"],
                "parameters": tool["input_schema"], "strict": false})
            }
            // `args` is a free-form object, which Gemini's Schema cannot say.
            Format::Gemini => json!({"name": tool["name"], "description": tool["description"],
                "parametersJsonSchema": tool["input_schema"]}),
            Format::Mcp => {
                json!({"name": tool["name"], "description": tool["description"], "inputSchema": tool["input_schema"]})
            }
        };
        let doc = json!({"tool": shaped, "catalog": catalog::compact(&entries)});
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return 0;
    }
    if args.stats {
        let sizes = providers::sizes(args.format, &entries);
        let total: usize = sizes.iter().map(|s| s.2).sum();
        if args.json {
            let tools: Vec<Value> = sizes
                .iter()
                .map(|(t, n, b)| json!({"tool": t, "actions": n, "bytes": b, "tokens_estimate": b / 4}))
                .collect();
            let doc = json!({"format": format!("{:?}", args.format).to_lowercase(), "token_estimate": "bytes / 4",
                "tools": tools, "total_bytes": total, "total_tokens_estimate": total / 4});
            let _ = writeln!(out, "{doc}");
        } else {
            let w = sizes.iter().map(|s| s.0.len()).max().unwrap_or(4).max(5);
            let _ = writeln!(out, "{:w$}  {:>7}  {:>9}  {:>8}", "TOOL", "ACTIONS", "BYTES", "~TOKENS");
            for (t, n, b) in &sizes {
                let _ = writeln!(out, "{t:w$}  {n:>7}  {b:>9}  {:>8}", b / 4);
            }
            let _ = writeln!(
                out,
                "{:w$}  {:>7}  {total:>9}  {:>8}",
                "total",
                sizes.iter().map(|s| s.1).sum::<usize>(),
                total / 4
            );
            let _ = writeln!(
                out,
                "(tokens estimated as bytes / 4; compact JSON in the {:?} shape)",
                args.format
            );
        }
        return 0;
    }
    let r = providers::render_with(args.format, &entries, providers::Options { strict: args.strict });
    let _ = writeln!(out, "{}", serde_json::to_string_pretty(&r.tools).unwrap_or_default());
    for (name, why) in &r.not_strict {
        tell!("not strict: {name}: {why}");
    }
    for (name, why) in &r.json_schema {
        tell!("as parametersJsonSchema: {name}: {why}");
    }
    for (name, given) in &r.shortened {
        tell!("shortened: {name} is given as {given} (use-tool maps it back)");
    }
    for (name, why) in &r.skipped {
        tell!("left out: {name}: {why}");
    }
    0
}
