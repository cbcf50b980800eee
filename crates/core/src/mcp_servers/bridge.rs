//! The bridge: `animaworks-tool __mcp-bridge --spec-fd N [--schemas | --serve]` (the description of its server
//! handed over as a descriptor, [`super::spec_fd`]), a protocol-1 tool (protocol.md §1) that
//! starts one MCP server (stdio) as its child and speaks MCP to it.
//!
//! The pipeline starts the bridge as it starts any tool (its tier's sandbox, limits, process group, guardian), so
//! the server, its child, runs under the same confinement and dies with the call or the runner. The bridge only
//! translates: `--schemas` is `initialize` + `tools/list`; a request is `tools/call`; the server's progress and log
//! notifications become events; SIGTERM (a cancel, a deadline) sends `notifications/cancelled` before it exits.
//! Every decision (validation, gates, grants, masking, audit) stays in the pipeline.
//!
//! `--serve` is a session ([`crate::pool::session`]), not a §9 worker: requests are taken while others are in
//! flight, each a `tools/call` of its own id, and `{"cancel": call_id}` cancels one of them in the server. A
//! stdout line of the server that is not JSON-RPC is skipped and counted.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

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
    #[serde(default)]
    short_names: bool,
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

/// A JSON-RPC error answer of the server.
#[derive(Debug)]
enum Fault {
    /// The server answered with an error object.
    Rpc { code: i64, message: String },
    /// The server went away, timed out or spoke garbage: the call cannot go on.
    Broken(String),
    /// The runner asked the call to end (SIGTERM, or a cancel line of the session).
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

/// How many skipped stdout lines are quoted on stderr (the rest are only counted).
const STRAY_QUOTED: u64 = 3;

/// Where the server's notifications go: the calls in flight, by their progress token and call id.
#[derive(Default)]
struct Routes {
    /// call id (empty in a one-shot call) -> (the JSON-RPC id of its `tools/call`, its progress token)
    calls: BTreeMap<String, (u64, Value)>,
}

/// One MCP session with the server: requests of many calls in flight at once, each with its own id; a reader task
/// hands each answer to its request and each notification to its call.
struct Client {
    server: String,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Fault>>>>,
    next_id: AtomicU64,
    routes: Mutex<Routes>,
    /// Events carry the call id (`--serve`): more than one call may be in flight.
    tag: bool,
    /// An answer to a request after `initialize` came: a `list_changed` from now on is news.
    answered: AtomicBool,
    /// stdout lines that were not JSON-RPC, skipped.
    stray: AtomicU64,
}

impl Client {
    /// Start the server; its stdout is read by a task of its own until it closes.
    fn start(spec: &Spec, tag: bool) -> Result<(Arc<Client>, Child), String> {
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
        let client = Arc::new(Client {
            server: spec.name.clone(),
            stdin: tokio::sync::Mutex::new(child.stdin.take()),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            routes: Mutex::new(Routes::default()),
            tag,
            answered: AtomicBool::new(false),
            stray: AtomicU64::new(0),
        });
        tokio::spawn(client.clone().read_from(stdout));
        Ok((client, child))
    }

    async fn read_from(self: Arc<Self>, stdout: tokio::process::ChildStdout) {
        let mut r = BufReader::new(stdout);
        let why = loop {
            let line = match read_line(&mut r).await {
                Ok(Some(l)) => l,
                Ok(None) => {
                    break format!(
                        "the MCP server '{}' closed its output (it exited?) before answering",
                        self.server
                    )
                }
                Err(why) => break format!("the MCP server '{}' wrote {why}", self.server),
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(&line) {
                Ok(msg) if msg.is_object() => self.dispatch(msg).await,
                _ => {
                    // A banner or a stray print(): skipped, as the official SDKs do, and counted.
                    let n = self.stray.fetch_add(1, Ordering::Relaxed) + 1;
                    if n <= STRAY_QUOTED {
                        let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
                        eprintln!(
                            "MCP server '{}': skipped a stdout line that is not JSON-RPC: {shown:?}",
                            self.server
                        );
                    }
                }
            }
        };
        let pending: Vec<_> = self.pending.lock().expect("pending lock").drain().collect();
        for (_, tx) in pending {
            let _ = tx.send(Err(Fault::Broken(why.clone())));
        }
    }

    async fn dispatch(&self, msg: Value) {
        let method = msg.get("method").and_then(Value::as_str);
        match (msg.get("id"), method) {
            (Some(req_id), Some(server_method)) => {
                let answer = match server_method {
                    "ping" => json!({"jsonrpc": "2.0", "id": req_id, "result": {}}),
                    "roots/list" => json!({"jsonrpc": "2.0", "id": req_id, "result": {"roots": []}}),
                    other => json!({"jsonrpc": "2.0", "id": req_id, "error": {
                        "code": -32601, "message": format!("{other} is not offered by animaworks-tool")}}),
                };
                let _ = self.send(&answer).await;
            }
            (None, Some(note)) => self.note(note, msg.get("params").unwrap_or(&Value::Null)),
            (Some(id), None) => {
                let Some(id) = id.as_u64() else { return };
                // An answer to nothing we asked (or to a cancelled request) is ignored, as JSON-RPC allows.
                let Some(tx) = self.pending.lock().expect("pending lock").remove(&id) else {
                    return;
                };
                if id > 1 {
                    self.answered.store(true, Ordering::Relaxed);
                }
                let out = match msg.get("error") {
                    Some(e) => Err(Fault::Rpc {
                        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: e
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("no message")
                            .to_owned(),
                    }),
                    None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
                };
                let _ = tx.send(out);
            }
            _ => {}
        }
    }

    /// A notification of the server, as events of the calls it concerns.
    fn note(&self, method: &str, p: &Value) {
        let routes = self.routes.lock().expect("routes lock");
        let tagged = |call_id: &str, mut ev: Value| {
            if self.tag {
                ev["call_id"] = json!(call_id);
            }
            out_line(&ev);
        };
        match method {
            "notifications/progress" => {
                let token = p.get("progressToken");
                let Some((call_id, _)) = routes.calls.iter().find(|(_, (_, t))| Some(t) == token) else {
                    return;
                };
                let mut ev =
                    json!({"type": "progress", "progress": p.get("progress").and_then(Value::as_f64).unwrap_or(0.0)});
                if let Some(t) = p.get("total").and_then(Value::as_f64) {
                    ev["total"] = json!(t);
                }
                if let Some(m) = p.get("message").and_then(Value::as_str) {
                    ev["message"] = json!(m);
                }
                tagged(call_id, ev);
            }
            // Not tied to a call: every call in flight hears it.
            "notifications/message" => {
                let level = match p.get("level").and_then(Value::as_str).unwrap_or("info") {
                    "debug" => "debug",
                    "warning" => "warning",
                    "error" | "critical" | "alert" | "emergency" => "error",
                    _ => "info",
                };
                let text = match p.get("data").cloned().unwrap_or(Value::Null) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                for call_id in routes.calls.keys() {
                    tagged(call_id, json!({"type": "log", "level": level, "message": text}));
                }
            }
            // A server that announces its tools right after it started says nothing new.
            "notifications/tools/list_changed" if self.answered.load(Ordering::Relaxed) => {
                for call_id in routes.calls.keys() {
                    tagged(
                        call_id,
                        json!({"type": "log", "level": "info", "message": format!(
                            "the MCP server '{}' says its tools changed; `animaworks-tool refresh` reads them again",
                            self.server)}),
                    );
                }
            }
            _ => {}
        }
    }

    async fn send(&self, msg: &Value) -> Result<(), Fault> {
        let mut line = serde_json::to_vec(msg).expect("JSON");
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let Some(w) = stdin.as_mut() else {
            return Err(Fault::Broken(format!(
                "the MCP server '{}': its input is closed",
                self.server
            )));
        };
        w.write_all(&line)
            .await
            .map_err(|e| Fault::Broken(format!("cannot write to the MCP server '{}': {e}", self.server)))
    }

    async fn notify(&self, method: &str, params: Value) -> Result<(), Fault> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Send a request; its answer arrives on the receiver. `route`: the call (and progress token) whose
    /// notifications this request's are, noted before the request leaves.
    async fn ask(
        &self,
        method: &str,
        params: Value,
        route: Option<(&str, Value)>,
    ) -> Result<(u64, oneshot::Receiver<Result<Value, Fault>>), Fault> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        self.pending.lock().expect("pending lock").insert(id, tx);
        if let Some((call_id, token)) = route {
            self.routes
                .lock()
                .expect("routes lock")
                .calls
                .insert(call_id.to_owned(), (id, token));
        }
        if let Err(f) = self
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
        {
            self.pending.lock().expect("pending lock").remove(&id);
            return Err(f);
        }
        Ok((id, rx))
    }

    /// A request and its answer, within `within`.
    async fn request(&self, method: &str, params: Value, within: Duration) -> Result<Value, Fault> {
        let (id, rx) = self.ask(method, params, None).await?;
        match tokio::time::timeout(within, rx).await {
            Ok(Ok(out)) => out,
            Ok(Err(_)) => Err(Fault::Terminated),
            Err(_) => {
                self.pending.lock().expect("pending lock").remove(&id);
                Err(Fault::Broken(format!(
                    "the MCP server '{}' did not answer {method} within {} s",
                    self.server,
                    within.as_secs_f64()
                )))
            }
        }
    }

    /// Tell the server a request is no longer wanted (its answer, if any, is ignored).
    async fn cancel(&self, id: u64) {
        self.pending.lock().expect("pending lock").remove(&id);
        let _ = self
            .notify(
                "notifications/cancelled",
                json!({"requestId": id, "reason": "cancelled by the runner"}),
            )
            .await;
    }

    /// Cancel the `tools/call` of a call in flight.
    async fn cancel_call(&self, call_id: &str) {
        let id = self
            .routes
            .lock()
            .expect("routes lock")
            .calls
            .remove(call_id)
            .map(|(id, _)| id);
        if let Some(id) = id {
            self.cancel(id).await;
        }
    }

    /// Resolves when no call is in flight.
    async fn idle(&self) {
        while !self.routes.lock().expect("routes lock").calls.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Cancel every call in flight (the bridge is ending).
    async fn cancel_all(&self) {
        let ids: Vec<u64> = std::mem::take(&mut self.routes.lock().expect("routes lock").calls)
            .into_values()
            .map(|(id, _)| id)
            .collect();
        for id in ids {
            self.cancel(id).await;
        }
    }

    async fn initialize(&self, spec: &Spec) -> Result<Value, Fault> {
        let within = handshake(spec);
        let info = self
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_REVISION,
                    "capabilities": {},
                    "clientInfo": {"name": "animaworks-tool", "version": env!("CARGO_PKG_VERSION")},
                }),
                within,
            )
            .await?;
        self.notify("notifications/initialized", json!({})).await?;
        Ok(info)
    }

    /// Note the skipped lines once more at the end, when there were any.
    fn stray_note(&self) {
        let n = self.stray.load(Ordering::Relaxed);
        if n > 0 {
            eprintln!(
                "MCP server '{}': {n} stdout line(s) that are not JSON-RPC were skipped (a server writes only JSON-RPC to stdout; logs go to stderr)",
                self.server
            );
        }
    }
}

/// End the server: its input closed, a moment to exit, then killed.
async fn shut(client: &Client, mut child: Child) {
    drop(client.stdin.lock().await.take());
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
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = client.request("tools/list", params, handshake(spec)).await?;
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
    let mapped: String = mcp
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .collect();
    let mapped = mapped.trim_start_matches(['_', '-']).to_owned();
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

/// One request line from the runner: a call (§4), or, in `--serve`, `{"cancel": call_id}` for a call in flight.
#[derive(Debug, Deserialize)]
struct Request {
    #[serde(default)]
    args: Map<String, Value>,
    #[serde(default)]
    context: Context,
    #[serde(default)]
    cancel: Option<String>,
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
    let token = if call_id.is_empty() {
        json!(client.next_id.load(Ordering::Relaxed) + 1)
    } else {
        json!(call_id)
    };
    let params = json!({"name": tool, "arguments": req.args, "_meta": {"progressToken": token}});
    let (_, rx) = client.ask("tools/call", params, Some((&call_id, token))).await?;
    let out = rx.await;
    let was_routed = client
        .routes
        .lock()
        .expect("routes lock")
        .calls
        .remove(&call_id)
        .is_some();
    match out {
        // Cancelled (its sender dropped): the runner has ended the call already.
        Err(_) => Err(Fault::Terminated),
        Ok(_) if !was_routed => Err(Fault::Terminated),
        Ok(Ok(result)) => {
            out_line(&with_id(final_event(&result)));
            Ok(())
        }
        Ok(Err(Fault::Rpc { code, message })) => {
            out_line(&with_id(json!({
                "type": "error", "code": "tool_error",
                "message": format!("the MCP server '{}' refused the call: {message} (MCP error {code})", client.server),
            })));
            Ok(())
        }
        Ok(Err(f)) => Err(f),
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
            // The session's end: the calls in flight finish first (§9), unless the runner ends the bridge.
            Ok(None) => {
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
    client.stray_note();
    shut(&client, child).await;
    code
}

/// How long the server may take to start and answer `initialize`, and each `tools/list` page.
fn handshake(spec: &Spec) -> Duration {
    Duration::from_secs_f64(spec.handshake_s.unwrap_or(30.0).clamp(0.1, 600.0))
}
