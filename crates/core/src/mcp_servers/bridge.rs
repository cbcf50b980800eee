//! The bridge: `animaworks-tool __mcp-bridge --spec-fd N [--schemas | --serve]` (the description of its server
//! handed over as a sealed descriptor only the runner makes, [`super::spec_fd`]), a protocol-1 tool (protocol.md §1) that
//! starts one MCP server (stdio) as its child and speaks MCP to it through rmcp's client (`client.rs`).
//!
//! The pipeline starts the bridge as it starts any tool (its tier's sandbox, limits, process group, guardian), so
//! the server, its child, runs under the same confinement and dies with the call or the runner. The bridge only
//! translates: `--schemas` is `initialize` + `tools/list`; a request is `tools/call`; the server's progress and log
//! notifications become events; SIGTERM (a cancel, a deadline) sends `notifications/cancelled` before it exits.
//! Every decision (validation, gates, grants, masking, audit) stays in the pipeline.
//!
//! `--serve` is a session ([`crate::pool::session`]), not a §9 worker: requests are taken while others are in
//! flight, each a `tools/call` of its own id, and `{"cancel": call_id}` cancels one of them in the server. A
//! stdout line of the server that is not JSON-RPC is skipped and counted. A session whose description names
//! client capabilities (`"forward"`) declares them to the server and hands the server's requests to the runner
//! ([`super::asks`]: `request` lines out, `reply` lines in).

use super::client::{Client, Fault};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// The longest line read from the server or from the runner (a line past it is a fault, not a buffer).
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// The most `tools/list` pages followed (a server that pages forever is cut off).
const MAX_PAGES: usize = 100;

#[derive(Debug, Deserialize)]
pub(super) struct Spec {
    pub(super) name: String,
    pub(super) command: String,
    #[serde(default)]
    pub(super) args: Vec<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    #[serde(default)]
    handshake_s: Option<f64>,
    #[serde(default)]
    timeout_s: Option<f64>,
    #[serde(default)]
    short_names: bool,
    /// The client capabilities a session declares to the server ([`super::asks`]).
    #[serde(default)]
    pub(super) forward: Vec<String>,
}

/// The bridge's `main`; the exit code of the process.
pub fn main(args: &[OsString]) -> i32 {
    let words: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    // The description is handed over only as a sealed descriptor the runner made (`--spec-fd N`, [`super::spec_fd`]).
    let (fd, mode) = match words.as_slice() {
        [flag, n] if flag == super::spec_fd::FLAG => (n, None),
        [flag, n, mode] if flag == super::spec_fd::FLAG => (n, Some(mode.as_str())),
        _ => {
            eprintln!(
                "usage: animaworks-tool __mcp-bridge --spec-fd N [--schemas|--serve] (started by the runner for a declared MCP server)"
            );
            return 2;
        }
    };
    let read = fd.parse().map_err(|_| std::io::Error::other("not a descriptor number"));
    let spec = match read.and_then(super::spec_fd::read) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("__mcp-bridge: cannot read the server's description from descriptor {fd}: {e}");
            return 2;
        }
    };
    let spec: Spec = match serde_json::from_str(&spec) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("__mcp-bridge: the server's description is not valid: {e}");
            return 2;
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("__mcp-bridge: cannot start: {e}");
            return 13;
        }
    };
    let code = rt.block_on(async move {
        match mode {
            Some("--schemas") => schemas(&spec).await,
            Some("--serve") => serve(&spec).await,
            None => one_call(&spec).await,
            Some(other) => {
                eprintln!("__mcp-bridge: unknown mode {other}");
                2
            }
        }
    });
    // Why not a plain drop: the runtime would wait for its blocking read of stdin, which the runner keeps open.
    rt.shutdown_background();
    code
}

/// End the server: its input closed, a moment to exit, then killed.
async fn shut(client: &Client, mut child: Child) {
    client.close().await;
    if tokio::time::timeout(Duration::from_secs(2), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// A line of at most [`MAX_LINE`] bytes, without its newline; `None` at the end. A longer line is an error after
/// reading no more than the bound.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<Option<Vec<u8>>, String> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf().await.map_err(|e| format!("cannot read: {e}"))?;
        if buf.is_empty() {
            return Ok((!line.is_empty()).then_some(line));
        }
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > MAX_LINE + 1 {
            return Err(format!("a line longer than {} MiB", MAX_LINE / (1024 * 1024)));
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if done {
            line.pop();
            return Ok(Some(line));
        }
    }
}

pub(super) fn out_line(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, v);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// Is `name` usable as an action name (protocol.md §3)?
fn action_name_ok(name: &str) -> bool {
    awt_protocol::names::is_name(name)
}

async fn schemas(spec: &Spec) -> i32 {
    let (client, child) = match Client::start(spec, false) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("{why}");
            return 1;
        }
    };
    let info = match client.initialize(spec).await {
        Ok(i) => i,
        Err(f) => {
            eprintln!("MCP server '{}': initialize: {f}", spec.name);
            client.stray_note();
            shut(&client, child).await;
            return 1;
        }
    };
    let tools = match list_tools(&client, spec).await {
        Ok(t) => t,
        Err(f) => {
            eprintln!("MCP server '{}': tools/list: {f}", spec.name);
            client.stray_note();
            shut(&client, child).await;
            return 1;
        }
    };
    client.stray_note();
    shut(&client, child).await;
    let stray = client.stray.load(Ordering::Relaxed);
    let (offered, mut notes) = offered(&tools, &spec.name, spec.short_names);
    if stray > 0 {
        notes.push(format!(
            "the MCP server '{}' wrote {stray} stdout line(s) that are not JSON-RPC while it was listed (skipped; a server writes only JSON-RPC to stdout, logs to stderr)",
            spec.name
        ));
    }
    let mut actions = Vec::new();
    for (name, t) in offered {
        let original = t.get("name").and_then(Value::as_str).unwrap_or_default();
        let ann = t.get("annotations").cloned().unwrap_or(Value::Null);
        let hint = |k: &str| ann.get(k).and_then(Value::as_bool);
        let mut action = Map::new();
        action.insert("name".into(), name.clone().into());
        if let Some(title) = t
            .get("title")
            .or_else(|| ann.get("title"))
            .and_then(Value::as_str)
        {
            action.insert("title".into(), title.into());
        }
        let mut description = t
            .get("description")
            .and_then(Value::as_str)
            .or_else(|| t.get("title").and_then(Value::as_str))
            .unwrap_or("")
            .to_owned();
        if name != original {
            description = format!("{description} (the MCP tool '{original}')")
                .trim_start()
                .to_owned();
        }
        action.insert("description".into(), description.into());
        action.insert(
            "input_schema".into(),
            t.get("inputSchema").cloned().unwrap_or(json!({"type": "object"})),
        );
        if let Some(o) = t.get("outputSchema") {
            action.insert("output_schema".into(), o.clone());
        }
        let read_only = hint("readOnlyHint") == Some(true);
        let mut profile = json!({
            "gated": !read_only,
            "background_eligible": true,
            "hints": {
                "read_only": read_only,
                // MCP's defaults: a tool is destructive and open-world unless it says otherwise.
                "destructive": !read_only && hint("destructiveHint") != Some(false),
                "idempotent": hint("idempotentHint") == Some(true),
                "open_world": hint("openWorldHint") != Some(false),
            },
        });
        if let Some(t) = spec.timeout_s {
            profile["timeout_s"] = json!(t);
        }
        action.insert("profile".into(), profile);
        actions.push(Value::Object(action));
    }
    let server = info.get("serverInfo").cloned().unwrap_or(Value::Null);
    let description = info
        .get("instructions")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("The MCP server `{}`.", spec.command));
    out_line(&json!({
        "protocol": 1,
        "name": spec.name,
        "version": server.get("version").and_then(Value::as_str),
        "description": description,
        "events": true,
        "persistent": true,
        "actions": actions,
        // Read by the runner's probe (and shown by `doctor`): what was left out or skipped, and why.
        "mcp_notes": notes,
    }));
    0
}

/// The bridge's `mcp_notes` of a `--schemas` document (bounded: a note is a line of `doctor`).
pub fn notes(doc: &[u8]) -> Vec<String> {
    #[derive(Deserialize)]
    struct Notes {
        #[serde(default)]
        mcp_notes: Vec<String>,
    }
    serde_json::from_slice::<Notes>(doc)
        .map(|n| n.mcp_notes.into_iter().take(100).collect())
        .unwrap_or_default()
}

/// Every tool of the server, each page of `tools/list`.
async fn list_tools(client: &Client, spec: &Spec) -> Result<Vec<Value>, Fault> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page = client.list_page(cursor.clone(), handshake(spec)).await?;
        if let Some(list) = page.get("tools").and_then(Value::as_array) {
            tools.extend(list.iter().cloned());
        }
        cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}

/// The action name of an MCP tool name: itself when valid (protocol.md §3), else each character that is not a
/// letter, digit, `_` or `-` made `_` (MCP allows `.` and `/`: `repo.search` is `repo_search`).
fn action_name_of(mcp: &str) -> Option<String> {
    if action_name_ok(mcp) {
        return Some(mcp.to_owned());
    }
    let mapped = super::names::mapped(mcp);
    action_name_ok(&mapped).then_some(mapped)
}

/// The tools offered as actions, under their action names, and what was left out and why. A tool that can run
/// only as a task (`execution.taskSupport: "required"`) is left out: the bridge does not drive tasks. A name
/// too long for a known client is warned of, or shortened when the entry says `short_names` ([`super::names`]).
fn offered<'a>(tools: &'a [Value], server: &str, short: bool) -> (Vec<(String, &'a Value)>, Vec<String>) {
    let mut out: Vec<(String, &Value)> = Vec::new();
    let mut notes = Vec::new();
    let originals: Vec<&str> = tools
        .iter()
        .filter_map(|t| t.get("name").and_then(Value::as_str))
        .collect();
    for t in tools {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        if t.pointer("/execution/taskSupport").and_then(Value::as_str) == Some("required") {
            notes.push(format!(
                "MCP tool '{name}' of server '{server}' is left out: it runs only as a task (execution.taskSupport \"required\"), which animaworks-tool does not drive"
            ));
            continue;
        }
        let Some(mut action) = action_name_of(name) else {
            notes.push(format!(
                "MCP tool '{name}' of server '{server}' is left out: no action name can be made of it (letters, digits, _ and -)"
            ));
            continue;
        };
        if !super::names::fits(server, &action) {
            match super::names::short(server, &action, name).filter(|_| short) {
                Some(s) => action = s,
                None => notes.push(super::names::warning(server, &action, name)),
            }
        }
        let taken = out
            .iter()
            .any(|(a, _)| awt_protocol::names::canon(a) == awt_protocol::names::canon(&action))
            || (action != name
                && originals
                    .iter()
                    .any(|o| awt_protocol::names::canon(o) == awt_protocol::names::canon(&action)));
        if taken {
            notes.push(format!(
                "MCP tool '{name}' of server '{server}' is left out: its action name '{action}' is another tool's"
            ));
            continue;
        }
        out.push((action, t));
    }
    (out, notes)
}

/// The MCP name of each action whose name is not its tool's own (read from `tools/list` once per bridge).
async fn renamed(client: &Client, spec: &Spec) -> HashMap<String, String> {
    let Ok(tools) = list_tools(client, spec).await else {
        return HashMap::new();
    };
    let (offered, _) = offered(&tools, &spec.name, spec.short_names);
    offered
        .into_iter()
        .filter_map(|(action, t)| {
            let name = t.get("name").and_then(Value::as_str)?;
            (name != action).then(|| (action, name.to_owned()))
        })
        .collect()
}

/// One request line from the runner: a call (§4), or, in `--serve`, `{"cancel": call_id}` for a call in flight,
/// or the reply to a request of the server (`{"reply": K, "result": R}` or `{"reply": K, "error": E}`), or
/// `{"notify": "roots/list_changed"}` (the client's roots changed).
#[derive(Debug, Deserialize)]
struct Request {
    #[serde(default)]
    args: Map<String, Value>,
    #[serde(default)]
    context: Context,
    #[serde(default)]
    cancel: Option<String>,
    #[serde(default)]
    reply: Option<u64>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<ReplyError>,
    #[serde(default)]
    notify: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ReplyError {
    code: i64,
    message: String,
}

#[derive(Debug, Default, Deserialize)]
struct Context {
    #[serde(default)]
    call_id: String,
    #[serde(default)]
    action: String,
}

/// Run one `tools/call`, writing its events; `Err` when the server is gone (the bridge then exits, and the
/// runner reports the call `crashed` with the server's stderr) or the call was cancelled (nothing is written).
async fn call(client: &Client, req: Request, names: &HashMap<String, String>) -> Result<(), Fault> {
    let call_id = req.context.call_id;
    let tool = names.get(&req.context.action).cloned().unwrap_or(req.context.action);
    let with_id = |mut v: Value| {
        if client.tag {
            v["call_id"] = json!(call_id);
        }
        v
    };
    match client.call_tool(&call_id, tool, req.args).await {
        Ok(result) => {
            out_line(&with_id(final_event(&result)));
            Ok(())
        }
        Err(Fault::Rpc { code, message }) => {
            out_line(&with_id(json!({
                "type": "error", "code": "tool_error",
                "message": format!("the MCP server '{}' refused the call: {message} (MCP error {code})", client.server),
            })));
            Ok(())
        }
        Err(f) => Err(f),
    }
}

/// A `tools/call` result as the call's final event: `isError` is the tool's error; `structuredContent` is the
/// value when present, else the text of the content (one string); blocks that say more than their text (images,
/// audio, resources, links, annotations) are passed on whole as the event's `content` ([`super::content`]).
fn final_event(result: &Value) -> Value {
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = match super::content::value(&json!({"content": result.get("content")})) {
            Value::String(t) if !t.is_empty() => t,
            _ => "the MCP tool reported an error".into(),
        };
        return json!({"type": "error", "code": "tool_error", "message": message});
    }
    let mut ev = json!({"type": "result", "result": super::content::value(result)});
    if let Some(blocks) = super::content::passed(result) {
        ev["content"] = Value::Array(blocks);
    }
    ev
}

async fn started(spec: &Spec, tag: bool) -> Option<(Arc<Client>, Child)> {
    let (client, child) = match Client::start(spec, tag) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("{why}");
            return None;
        }
    };
    if let Err(f) = client.initialize(spec).await {
        eprintln!("MCP server '{}': initialize: {f}", spec.name);
        client.stray_note();
        shut(&client, child).await;
        return None;
    }
    Some((client, child))
}

fn parse_request(line: &[u8]) -> Result<Request, String> {
    serde_json::from_slice(line).map_err(|e| format!("the request is not valid: {e}"))
}

fn sigterm() -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok()
}

async fn terminated(term: &mut Option<tokio::signal::unix::Signal>) {
    match term {
        Some(t) => {
            t.recv().await;
        }
        None => std::future::pending().await,
    }
}

async fn one_call(spec: &Spec) -> i32 {
    let mut term = sigterm();
    let mut stdin = BufReader::new(tokio::io::stdin());
    let req = match read_line(&mut stdin).await.map(|l| l.map(|l| parse_request(&l))) {
        Ok(Some(Ok(r))) => r,
        Ok(Some(Err(why))) | Err(why) => {
            eprintln!("{why}");
            return 2;
        }
        Ok(None) => {
            eprintln!("no request on stdin");
            return 2;
        }
    };
    let Some((client, mut child)) = started(spec, false).await else {
        return 1;
    };
    let names = renamed(&client, spec).await;
    let code = tokio::select! {
        out = call(&client, req, &names) => match out {
            Ok(()) => 0,
            Err(Fault::Terminated) => 143,
            Err(f) => {
                eprintln!("{f}");
                1
            }
        },
        _ = terminated(&mut term) => {
            client.cancel_all().await;
            143
        }
        s = child.wait() => {
            eprintln!("{}", exited(spec, s));
            1
        }
    };
    client.stray_note();
    shut(&client, child).await;
    code
}

fn exited(spec: &Spec, s: std::io::Result<std::process::ExitStatus>) -> String {
    match s {
        Ok(s) => format!("the MCP server '{}' exited ({s})", spec.name),
        Err(e) => format!("the MCP server '{}' was lost: {e}", spec.name),
    }
}

/// A session: calls arrive one a line and run concurrently, each a `tools/call` of its own id; a cancel line
/// cancels one call and the session goes on. The bridge ends when its input closes, on SIGTERM (every call in
/// flight told `notifications/cancelled` first), or when the server exits.
async fn serve(spec: &Spec) -> i32 {
    let mut term = sigterm();
    let Some((client, mut child)) = started(spec, true).await else {
        return 1;
    };
    let names = Arc::new(renamed(&client, spec).await);
    let mut stdin = BufReader::new(tokio::io::stdin());
    let code = loop {
        let line = tokio::select! {
            l = read_line(&mut stdin) => l,
            _ = terminated(&mut term) => {
                client.cancel_all().await;
                break 143;
            }
            s = child.wait() => {
                eprintln!("{}", exited(spec, s));
                break 1;
            }
        };
        let req = match line {
            // The session's end: the calls in flight finish first (§9), unless the runner ends the bridge; the
            // server's requests to the client can no longer be answered.
            Ok(None) => {
                client.asks.end();
                tokio::select! {
                    _ = client.idle() => {}
                    _ = terminated(&mut term) => client.cancel_all().await,
                    _ = child.wait() => {}
                }
                break 0;
            }
            Err(why) => {
                eprintln!("{why}");
                break 2;
            }
            Ok(Some(l)) => match parse_request(&l) {
                Ok(r) => r,
                Err(why) => {
                    eprintln!("{why}");
                    break 2;
                }
            },
        };
        if let Some(call_id) = &req.cancel {
            client.cancel_call(call_id).await;
            continue;
        }
        if let Some(id) = req.reply {
            let out = match req.error {
                Some(e) => Err(super::asks::Refusal {
                    code: e.code,
                    message: e.message,
                }),
                None => Ok(req.result.unwrap_or(Value::Null)),
            };
            client.asks.reply(id, out);
            continue;
        }
        if req.notify.as_deref() == Some("roots/list_changed") {
            client.roots_changed().await;
            continue;
        }
        let c = client.clone();
        let names = names.clone();
        tokio::spawn(async move {
            if let Err(f) = call(&c, req, &names).await {
                if !matches!(f, Fault::Terminated) {
                    eprintln!("{f}");
                }
            }
        });
    };
    client.asks.end();
    client.stray_note();
    shut(&client, child).await;
    code
}

/// How long the server may take to start and answer `initialize`, and each `tools/list` page.
pub(super) fn handshake(spec: &Spec) -> Duration {
    Duration::from_secs_f64(spec.handshake_s.unwrap_or(30.0).clamp(0.1, 600.0))
}
