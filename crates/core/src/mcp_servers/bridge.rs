//! The bridge: `animaworks-tool __mcp-bridge --spec-fd N [--schemas | --serve]` (the description of its server
//! handed over as a descriptor, [`super::spec_fd`]), a protocol-1 tool (protocol.md §1) that
//! starts one MCP server (stdio) as its child and speaks MCP to it.
//!
//! The pipeline starts the bridge as it starts any tool (its tier's sandbox, limits, process group, guardian), so
//! the server, its child, runs under the same confinement and dies with the call or the runner. The bridge only
//! translates: `--schemas` is `initialize` + `tools/list`; a request is `tools/call`; the server's progress and log
//! notifications become events; SIGTERM (a cancel, a deadline) sends `notifications/cancelled` before it exits.
//! Every decision (validation, gates, grants, masking, audit) stays in the pipeline.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// The longest line read from the server or from the runner (a line past it is a fault, not a buffer).
pub const MAX_LINE: usize = 16 * 1024 * 1024;
/// The MCP revision the bridge asks for; servers answer with the one they speak, and only `tools` is used.
const PROTOCOL_REVISION: &str = "2025-11-25";
/// The most `tools/list` pages followed (a server that pages forever is cut off).
const MAX_PAGES: usize = 100;

#[derive(Debug, Deserialize)]
struct Spec {
    name: String,
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    handshake_s: Option<f64>,
    #[serde(default)]
    timeout_s: Option<f64>,
}

/// The bridge's `main`; the exit code of the process.
pub fn main(args: &[OsString]) -> i32 {
    let words: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let (spec, mode) = match words.as_slice() {
        [spec, rest @ ..] if rest.len() <= 2 => (spec, rest.first().map(String::as_str)),
        _ => {
            eprintln!("usage: animaworks-tool __mcp-bridge SPEC [--schemas|--serve] (started by the runner)");
            return 2;
        }
    };
    // The description is handed over as a descriptor (`--spec-fd N`), else given as the first argument.
    let handed;
    let (spec, mode) = match (spec.as_str(), mode) {
        (super::spec_fd::FLAG, Some(n)) if words.len() <= 3 => {
            let read = n.parse().map_err(|_| std::io::Error::other("not a descriptor number"));
            match read.and_then(super::spec_fd::read) {
                Ok(s) => handed = s,
                Err(e) => {
                    eprintln!("__mcp-bridge: cannot read the server's description from descriptor {n}: {e}");
                    return 2;
                }
            }
            (&handed, words.get(2).map(String::as_str))
        }
        _ if words.len() <= 2 => (spec, mode),
        _ => {
            eprintln!("usage: animaworks-tool __mcp-bridge SPEC [--schemas|--serve] (started by the runner)");
            return 2;
        }
    };
    let spec: Spec = match serde_json::from_str(spec) {
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
    rt.block_on(async move {
        match mode {
            Some("--schemas") => schemas(&spec).await,
            Some("--serve") => serve(&spec).await,
            None => one_call(&spec).await,
            Some(other) => {
                eprintln!("__mcp-bridge: unknown mode {other}");
                2
            }
        }
    })
}

/// A JSON-RPC error answer of the server.
#[derive(Debug)]
enum Fault {
    /// The server answered with an error object.
    Rpc { code: i64, message: String },
    /// The server went away, timed out or spoke garbage: the call cannot go on.
    Broken(String),
    /// The runner asked the call to end (SIGTERM).
    Terminated,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Rpc { code, message } => write!(f, "{message} (MCP error {code})"),
            Fault::Broken(why) => f.write_str(why),
            Fault::Terminated => f.write_str("ended by the runner"),
        }
    }
}

struct Conn {
    child: Child,
    stdin: Option<ChildStdin>,
    incoming: mpsc::Receiver<Result<Value, String>>,
    next_id: u64,
    term: tokio::signal::unix::Signal,
    server: String,
}

impl Conn {
    async fn start(spec: &Spec) -> Result<Conn, String> {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args)
            .envs(&spec.env)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the MCP server '{}' (`{}`): {e}", spec.name, spec.command))?;
        let stdout = child.stdout.take().expect("piped");
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            let mut r = BufReader::new(stdout);
            loop {
                let line = match read_line(&mut r).await {
                    Ok(Some(l)) => l,
                    Ok(None) => break,
                    Err(why) => {
                        let _ = tx.send(Err(why)).await;
                        break;
                    }
                };
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let msg = match serde_json::from_slice::<Value>(&line) {
                    Ok(v) => Ok(v),
                    Err(e) => Err(format!("the MCP server wrote a line that is not JSON-RPC: {e}")),
                };
                let stop = msg.is_err();
                if tx.send(msg).await.is_err() || stop {
                    break;
                }
            }
        });
        Ok(Conn {
            child,
            stdin,
            incoming: rx,
            next_id: 0,
            term,
            server: spec.name.clone(),
        })
    }

    async fn send(&mut self, msg: &Value) -> Result<(), Fault> {
        let mut line = serde_json::to_vec(msg).expect("JSON");
        line.push(b'\n');
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(Fault::Broken("the MCP server's input is closed".into()));
        };
        stdin
            .write_all(&line)
            .await
            .map_err(|e| Fault::Broken(format!("cannot write to the MCP server '{}': {e}", self.server)))
    }

    async fn notify(&mut self, method: &str, params: Value) -> Result<(), Fault> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Send a request and wait for its answer, handing every notification to `on_note` meanwhile and answering
    /// the server's own requests (`ping`, `roots/list`; anything else is refused as not offered).
    async fn request(
        &mut self,
        method: &str,
        params: Value,
        within: Option<Duration>,
        on_note: &mut dyn FnMut(&str, &Value),
    ) -> Result<Value, Fault> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let deadline = within.map(|d| tokio::time::Instant::now() + d);
        loop {
            let next = async {
                match deadline {
                    Some(at) => tokio::time::timeout_at(at, self.incoming.recv()).await.ok(),
                    None => Some(self.incoming.recv().await),
                }
            };
            let msg = tokio::select! {
                m = next => m,
                _ = self.term.recv() => {
                    let _ = self
                        .notify("notifications/cancelled", json!({"requestId": id, "reason": "cancelled by the runner"}))
                        .await;
                    return Err(Fault::Terminated);
                }
            };
            let msg = match msg {
                None => {
                    return Err(Fault::Broken(format!(
                        "the MCP server '{}' did not answer {method} within {} s",
                        self.server,
                        within.map(|d| d.as_secs_f64()).unwrap_or_default()
                    )))
                }
                Some(None) => {
                    return Err(Fault::Broken(format!(
                        "the MCP server '{}' closed its output (it exited?) before answering {method}",
                        self.server
                    )))
                }
                Some(Some(Err(why))) => return Err(Fault::Broken(why)),
                Some(Some(Ok(m))) => m,
            };
            let m_method = msg.get("method").and_then(Value::as_str);
            match (msg.get("id"), m_method) {
                (Some(req_id), Some(server_method)) => {
                    let answer = match server_method {
                        "ping" => json!({"jsonrpc": "2.0", "id": req_id, "result": {}}),
                        "roots/list" => json!({"jsonrpc": "2.0", "id": req_id, "result": {"roots": []}}),
                        other => json!({"jsonrpc": "2.0", "id": req_id, "error": {
                            "code": -32601, "message": format!("{other} is not offered by animaworks-tool")}}),
                    };
                    self.send(&answer).await?;
                }
                (None, Some(note)) => on_note(note, msg.get("params").unwrap_or(&Value::Null)),
                (Some(answer_id), None) if answer_id.as_u64() == Some(id) => {
                    if let Some(e) = msg.get("error") {
                        return Err(Fault::Rpc {
                            code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                            message: e
                                .get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("no message")
                                .to_owned(),
                        });
                    }
                    return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
                }
                // An answer to nothing we asked: ignored, as JSON-RPC allows.
                _ => {}
            }
        }
    }

    async fn initialize(&mut self, spec: &Spec) -> Result<Value, Fault> {
        let within = Duration::from_secs_f64(spec.handshake_s.unwrap_or(30.0).clamp(0.1, 600.0));
        let info = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_REVISION,
                    "capabilities": {},
                    "clientInfo": {"name": "animaworks-tool", "version": env!("CARGO_PKG_VERSION")},
                }),
                Some(within),
                &mut |_, _| {},
            )
            .await?;
        self.notify("notifications/initialized", json!({})).await?;
        Ok(info)
    }

    /// End the server: its input closed, a moment to exit, then killed.
    async fn shut(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(Duration::from_secs(2), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// A line of at most [`MAX_LINE`] bytes, without its newline; `None` at the end. A longer line is an error after
/// reading no more than the bound.
async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<Option<Vec<u8>>, String> {
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

fn out_line(v: &Value) {
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
    let mut conn = match Conn::start(spec).await {
        Ok(c) => c,
        Err(why) => {
            eprintln!("{why}");
            return 1;
        }
    };
    let info = match conn.initialize(spec).await {
        Ok(i) => i,
        Err(f) => {
            eprintln!("initialize: {f}");
            conn.shut().await;
            return 1;
        }
    };
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = match conn
            .request("tools/list", params, Some(Duration::from_secs(9)), &mut |_, _| {})
            .await
        {
            Ok(p) => p,
            Err(f) => {
                eprintln!("tools/list: {f}");
                conn.shut().await;
                return 1;
            }
        };
        if let Some(list) = page.get("tools").and_then(Value::as_array) {
            tools.extend(list.iter().cloned());
        }
        cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    conn.shut().await;
    let mut actions = Vec::new();
    for t in tools {
        let Some(name) = t.get("name").and_then(Value::as_str) else {
            continue;
        };
        if !action_name_ok(name) {
            eprintln!(
                "MCP tool '{name}' of server '{}' is left out: its name is not a valid action name (letters, digits, _ and -)",
                spec.name
            );
            continue;
        }
        let ann = t.get("annotations").cloned().unwrap_or(Value::Null);
        let hint = |k: &str| ann.get(k).and_then(Value::as_bool);
        let mut action = Map::new();
        action.insert("name".into(), name.into());
        let description = t
            .get("description")
            .and_then(Value::as_str)
            .or_else(|| t.get("title").and_then(Value::as_str))
            .unwrap_or("");
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
    }));
    0
}

/// One request line from the runner.
#[derive(Debug, Deserialize)]
struct Request {
    #[serde(default)]
    args: Map<String, Value>,
    #[serde(default)]
    context: Context,
}

#[derive(Debug, Default, Deserialize)]
struct Context {
    #[serde(default)]
    call_id: String,
    #[serde(default)]
    action: String,
}

/// Run one `tools/call`, writing its events; `Err` when the server is gone (the bridge then exits, and the
/// runner reports the call `crashed` with the server's stderr).
async fn call(conn: &mut Conn, req: Request, tag: bool) -> Result<(), Fault> {
    let call_id = req.context.call_id.clone();
    let with_id = |mut v: Value| {
        if tag {
            v["call_id"] = json!(call_id);
        }
        v
    };
    let token = if call_id.is_empty() {
        json!(conn.next_id + 1)
    } else {
        json!(call_id)
    };
    let params = json!({"name": req.context.action, "arguments": req.args, "_meta": {"progressToken": token}});
    let mut on_note = |method: &str, p: &Value| match method {
        "notifications/progress" if p.get("progressToken") == Some(&token) => {
            let mut ev =
                json!({"type": "progress", "progress": p.get("progress").and_then(Value::as_f64).unwrap_or(0.0)});
            if let Some(t) = p.get("total").and_then(Value::as_f64) {
                ev["total"] = json!(t);
            }
            if let Some(m) = p.get("message").and_then(Value::as_str) {
                ev["message"] = json!(m);
            }
            out_line(&with_id(ev));
        }
        "notifications/message" => {
            let level = match p.get("level").and_then(Value::as_str).unwrap_or("info") {
                "debug" => "debug",
                "warning" => "warning",
                "error" | "critical" | "alert" | "emergency" => "error",
                _ => "info",
            };
            let data = p.get("data").cloned().unwrap_or(Value::Null);
            let text = match data {
                Value::String(s) => s,
                other => other.to_string(),
            };
            out_line(&with_id(json!({"type": "log", "level": level, "message": text})));
        }
        "notifications/tools/list_changed" => out_line(&with_id(json!({
            "type": "log", "level": "info",
            "message": "the MCP server's tools changed; `animaworks-tool refresh` reads them again"}))),
        _ => {}
    };
    match conn.request("tools/call", params, None, &mut on_note).await {
        Ok(result) => {
            out_line(&with_id(final_event(&result)));
            Ok(())
        }
        Err(Fault::Rpc { code, message }) => {
            out_line(&with_id(json!({
                "type": "error", "code": "tool_error",
                "message": format!("the MCP server refused the call: {message} (MCP error {code})"),
            })));
            Ok(())
        }
        Err(f) => Err(f),
    }
}

/// A `tools/call` result as the call's final event: `isError` is the tool's error; `structuredContent` is the
/// value when present, else the text of the content (one string), else the content blocks as they are.
fn final_event(result: &Value) -> Value {
    let content = result.get("content").and_then(Value::as_array);
    let texts: Option<Vec<&str>> = content.map(|c| {
        c.iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect()
    });
    let all_text = content.is_some_and(|c| c.iter().all(|b| b.get("type").and_then(Value::as_str) == Some("text")));
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = texts
            .map(|t| t.join("\n"))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "the MCP tool reported an error".into());
        return json!({"type": "error", "code": "tool_error", "message": message});
    }
    let value = if let Some(s) = result.get("structuredContent") {
        s.clone()
    } else if all_text {
        json!(texts.unwrap_or_default().join("\n"))
    } else {
        result.get("content").cloned().unwrap_or(Value::Null)
    };
    json!({"type": "result", "result": value})
}

async fn started(spec: &Spec) -> Option<Conn> {
    let mut conn = match Conn::start(spec).await {
        Ok(c) => c,
        Err(why) => {
            eprintln!("{why}");
            return None;
        }
    };
    if let Err(f) = conn.initialize(spec).await {
        eprintln!("initialize: {f}");
        conn.shut().await;
        return None;
    }
    Some(conn)
}

fn parse_request(line: &[u8]) -> Result<Request, String> {
    serde_json::from_slice(line).map_err(|e| format!("the request is not valid: {e}"))
}

async fn one_call(spec: &Spec) -> i32 {
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
    let Some(mut conn) = started(spec).await else {
        return 1;
    };
    let code = match call(&mut conn, req, false).await {
        Ok(()) => 0,
        Err(Fault::Terminated) => 143,
        Err(f) => {
            eprintln!("{f}");
            1
        }
    };
    conn.shut().await;
    code
}

async fn serve(spec: &Spec) -> i32 {
    let Some(mut conn) = started(spec).await else {
        return 1;
    };
    let mut stdin = BufReader::new(tokio::io::stdin());
    let code = loop {
        let line = tokio::select! {
            l = read_line(&mut stdin) => l,
            _ = conn.term.recv() => break 143,
        };
        let req = match line {
            Ok(None) => break 0,
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
        match call(&mut conn, req, true).await {
            Ok(()) => {}
            Err(Fault::Terminated) => break 143,
            Err(f) => {
                eprintln!("{f}");
                break 1;
            }
        }
    };
    conn.shut().await;
    code
}
