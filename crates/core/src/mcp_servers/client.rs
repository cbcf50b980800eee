//! The bridge's MCP client: rmcp's client session (handshake, request ids, answers, `notifications/cancelled`,
//! `ping`, the server's own requests) over a transport of ours ([`Lines`]) that reads the server's stdout.
//!
//! Why the transport is ours: every line is bounded ([`super::bridge::MAX_LINE`]; a longer one ends the session,
//! it is not a buffer); a line that is not JSON-RPC (a banner, a stray `print()`) is skipped, quoted and counted
//! for `doctor`; the raw `tools/list` page is kept (rmcp's typed `Tool` has no `execution`, which says whether a
//! tool runs only as a task); and the server's progress and log notifications become the call's events in the
//! order the server wrote them (rmcp hands each notification to a task of its own, which may run after the answer
//! it preceded, and a progress event after a call's final event is lost).

// rmcp marks sampling and roots deprecated for the 2026-07-28 draft (SEP-2577); 2025-11-25, which the bridge
// speaks, has them.
#![allow(deprecated)]

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientNotification, ClientRequest, CreateMessageRequestMethod, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationCapability, ErrorCode, ErrorData,
    FormElicitationCapability, Implementation, JsonRpcMessage, ListRootsResult, ListToolsRequest,
    PaginatedRequestParams, RequestId, RootsCapabilities, SamplingCapability,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, RoleClient, RunningService, RxJsonRpcMessage,
    ServiceError, TxJsonRpcMessage,
};
use rmcp::{ClientHandler, Peer};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;

use super::asks::{Caps, Waiting};
use super::bridge::{out_line, MAX_LINE};

/// Why a request came to nothing.
#[derive(Debug)]
pub(super) enum Fault {
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
/// The MCP revision the bridge asks for; servers answer with the one they speak, and only `tools` is used.
const PROTOCOL_REVISION: &str = "2025-11-25";

/// A call in flight: its request, its progress token, and how its waiter is told it was cancelled.
struct Route {
    id: RequestId,
    token: Value,
    cancelled: Option<oneshot::Sender<()>>,
}

/// What the transport and the client share.
struct Shared {
    server: String,
    tag: bool,
    /// call id (empty in a one-shot call) -> its route
    routes: Mutex<BTreeMap<String, Route>>,
    /// Answers read so far; after the first (`initialize`'s), a `list_changed` is news.
    answers: AtomicU64,
    stray: Arc<AtomicU64>,
    /// The ids of `tools/list` requests sent, and the raw results read for them.
    lists: Mutex<HashSet<RequestId>>,
    raw: Mutex<HashMap<RequestId, Value>>,
    /// Why the server's output ended, once it did.
    ended: Mutex<Option<String>>,
}

/// One MCP session with the server: requests of many calls in flight at once, each with its own id.
pub(super) struct Client {
    pub(super) server: String,
    /// Events carry the call id (`--serve`): more than one call may be in flight.
    pub(super) tag: bool,
    /// stdout lines that were not JSON-RPC, skipped.
    pub(super) stray: Arc<AtomicU64>,
    shared: Arc<Shared>,
    pipes: Mutex<Option<(ChildStdin, ChildStdout)>>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    peer: OnceLock<Peer<RoleClient>>,
    /// The server's requests to the client, waiting for the runner (a session's; none elsewhere).
    pub(super) asks: Arc<Waiting>,
}

impl Client {
    /// Start the server; the session begins with [`Client::initialize`]. Only a session (`tag`) forwards the
    /// server's requests to the client, when its description names the capabilities.
    pub(super) fn start(spec: &super::bridge::Spec, tag: bool) -> Result<(Arc<Client>, Child), String> {
        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args)
            .envs(&spec.env)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        awt_sys::process::term_ignored(cmd.as_std_mut());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the MCP server '{}' (`{}`): {e}", spec.name, spec.command))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stray = Arc::new(AtomicU64::new(0));
        let shared = Arc::new(Shared {
            server: spec.name.clone(),
            tag,
            routes: Mutex::new(BTreeMap::new()),
            answers: AtomicU64::new(0),
            stray: stray.clone(),
            lists: Mutex::new(HashSet::new()),
            raw: Mutex::new(HashMap::new()),
            ended: Mutex::new(None),
        });
        let client = Arc::new(Client {
            server: spec.name.clone(),
            tag,
            stray,
            shared,
            pipes: Mutex::new(Some((stdin, stdout))),
            service: tokio::sync::Mutex::new(None),
            peer: OnceLock::new(),
            asks: Arc::new(Waiting::new(if tag {
                Caps::from_names(&spec.forward)
            } else {
                Caps::default()
            })),
        });
        Ok((client, child))
    }

    /// `initialize` and `notifications/initialized`, within the spec's handshake time; the server's answer.
    pub(super) async fn initialize(&self, spec: &super::bridge::Spec) -> Result<Value, Fault> {
        let within = super::bridge::handshake(spec);
        let Some((stdin, stdout)) = self.pipes.lock().expect("pipes lock").take() else {
            return Err(Fault::Broken(format!(
                "the MCP server '{}' was already started",
                self.server
            )));
        };
        let transport = Lines {
            shared: self.shared.clone(),
            read: BufReader::new(stdout),
            line: Vec::new(),
            write: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
        };
        let handler = Handler {
            asks: self.asks.clone(),
        };
        let service = match tokio::time::timeout(within, rmcp::serve_client(handler, transport)).await {
            Err(_) => {
                return Err(Fault::Broken(format!(
                    "the MCP server '{}' did not answer initialize within {} s",
                    self.server,
                    within.as_secs_f64()
                )))
            }
            Ok(Err(e)) => return Err(Fault::Broken(self.ended().unwrap_or_else(|| e.to_string()))),
            Ok(Ok(s)) => s,
        };
        let info = service
            .peer_info()
            .map(|i| serde_json::to_value(&*i).unwrap_or(Value::Null))
            .unwrap_or(Value::Null);
        let _ = self.peer.set(service.peer().clone());
        *self.service.lock().await = Some(service);
        Ok(info)
    }

    fn peer(&self) -> Result<&Peer<RoleClient>, Fault> {
        self.peer
            .get()
            .ok_or_else(|| Fault::Broken(format!("the MCP server '{}' was not initialized", self.server)))
    }

    fn ended(&self) -> Option<String> {
        self.shared.ended.lock().expect("ended lock").clone()
    }

    fn fault(&self, e: ServiceError) -> Fault {
        match e {
            ServiceError::McpError(e) => Fault::Rpc {
                code: e.code.0 as i64,
                message: e.message.into_owned(),
            },
            ServiceError::Cancelled { .. } => Fault::Terminated,
            other => Fault::Broken(self.ended().unwrap_or_else(|| {
                format!(
                    "the MCP server '{}' closed its output (it exited?) before answering ({other})",
                    self.server
                )
            })),
        }
    }

    /// One page of `tools/list`, as the server wrote it.
    pub(super) async fn list_page(&self, cursor: Option<String>, within: Duration) -> Result<Value, Fault> {
        let peer = self.peer()?;
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::with_timeout(within))
            .await
            .map_err(|e| self.fault(e))?;
        let id = handle.id.clone();
        let typed = handle.await_response().await;
        let raw = self.shared.raw.lock().expect("raw lock").remove(&id);
        self.shared.lists.lock().expect("lists lock").remove(&id);
        match typed {
            Ok(typed) => Ok(raw.unwrap_or_else(|| serde_json::to_value(&typed).unwrap_or(Value::Null))),
            Err(ServiceError::Timeout { .. }) => Err(Fault::Broken(format!(
                "the MCP server '{}' did not answer tools/list within {} s",
                self.server,
                within.as_secs_f64()
            ))),
            Err(e) => Err(self.fault(e)),
        }
    }

    /// One `tools/call`: its result as the server wrote it, once it answers; its progress and logs are events of
    /// `call_id` meanwhile. `Fault::Terminated` when the call was cancelled ([`Client::cancel_call`]).
    pub(super) async fn call_tool(
        &self,
        call_id: &str,
        tool: String,
        args: Map<String, Value>,
    ) -> Result<Value, Fault> {
        let peer = self.peer()?;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(tool).with_arguments(args),
        ));
        let (tx, rx) = oneshot::channel();
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| self.fault(e))?;
        // Noted before the request leaves: the session's loop writes it only once this task yields (the bridge's
        // runtime has one thread), so no progress of it can come first.
        self.shared.routes.lock().expect("routes lock").insert(
            call_id.to_owned(),
            Route {
                id: handle.id.clone(),
                token: serde_json::to_value(&handle.progress_token).unwrap_or(Value::Null),
                cancelled: Some(tx),
            },
        );
        let out = tokio::select! {
            r = handle.await_response() => Some(r),
            _ = rx => None,
        };
        let was_routed = self
            .shared
            .routes
            .lock()
            .expect("routes lock")
            .remove(call_id)
            .is_some();
        match out {
            None => Err(Fault::Terminated),
            Some(_) if !was_routed => Err(Fault::Terminated),
            Some(Ok(result)) => Ok(serde_json::to_value(&result).unwrap_or(Value::Null)),
            Some(Err(e)) => Err(self.fault(e)),
        }
    }

    /// Tell the server that the client's roots changed, when the session declared them.
    pub(super) async fn roots_changed(&self) {
        if let (true, Ok(peer)) = (self.asks.caps.roots, self.peer()) {
            let _ = peer.notify_roots_list_changed().await;
        }
    }

    /// Tell the server a request is no longer wanted (its answer, if any, is ignored).
    async fn cancel(&self, route: Route) {
        if let Some(tx) = route.cancelled {
            let _ = tx.send(());
        }
        let Ok(peer) = self.peer() else { return };
        let note = CancelledNotification::new(CancelledNotificationParam::new(
            Some(route.id),
            Some("cancelled by the runner".into()),
        ));
        let _ = peer
            .send_notification(ClientNotification::CancelledNotification(note))
            .await;
    }

    /// Cancel the `tools/call` of a call in flight.
    pub(super) async fn cancel_call(&self, call_id: &str) {
        let route = self.shared.routes.lock().expect("routes lock").remove(call_id);
        if let Some(route) = route {
            self.cancel(route).await;
        }
    }

    /// Cancel every call in flight (the bridge is ending).
    pub(super) async fn cancel_all(&self) {
        let routes = std::mem::take(&mut *self.shared.routes.lock().expect("routes lock"));
        for route in routes.into_values() {
            self.cancel(route).await;
        }
    }

    /// Resolves when no call is in flight.
    pub(super) async fn idle(&self) {
        while !self.shared.routes.lock().expect("routes lock").is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// End the session: the server's input closed (it should exit; the caller waits for it, then kills it).
    pub(super) async fn close(&self) {
        drop(self.pipes.lock().expect("pipes lock").take());
        let service = self.service.lock().await.take();
        if let Some(service) = service {
            let _ = tokio::time::timeout(Duration::from_secs(2), service.cancel()).await;
        }
    }

    /// Note the skipped lines once more at the end, when there were any.
    pub(super) fn stray_note(&self) {
        let n = self.stray.load(Ordering::Relaxed);
        if n > 0 {
            eprintln!(
                "MCP server '{}': {n} stdout line(s) that are not JSON-RPC were skipped (a server writes only JSON-RPC to stdout; logs go to stderr)",
                self.server
            );
        }
    }
}

/// What the bridge answers the server's own requests: `ping` as rmcp does; `sampling/createMessage`,
/// `elicitation/create` (form mode) and `roots/list` go to the runner when the session declared them
/// ([`super::asks`]); else `roots/list` gets none and the others are refused (rmcp's default would decline an
/// elicitation, as if a user had).
struct Handler {
    asks: Arc<Waiting>,
}

impl Handler {
    /// The client's answer to `method`, by way of the runner; the server's cancellation ends the wait.
    async fn forward<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: Value,
        context: RequestContext<RoleClient>,
    ) -> Result<T, ErrorData> {
        match self.asks.ask(method, params, out_line, context.ct.cancelled()).await {
            Ok(v) => serde_json::from_value(v).map_err(|e| {
                ErrorData::internal_error(format!("the client's answer to {method} is not valid: {e}"), None)
            }),
            Err(r) => Err(ErrorData::new(
                ErrorCode(i32::try_from(r.code).unwrap_or(ErrorCode::INTERNAL_ERROR.0)),
                r.message,
                None,
            )),
        }
    }
}

fn not_offered(what: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("{what} is not offered by animaworks-tool"),
        None,
    )
}

impl ClientHandler for Handler {
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        if !self.asks.caps.sampling {
            return Err(ErrorData::method_not_found::<CreateMessageRequestMethod>());
        }
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.forward("sampling/createMessage", params, context).await
    }

    async fn list_roots(&self, context: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        if !self.asks.caps.roots {
            return Ok(ListRootsResult::default());
        }
        self.forward("roots/list", json!({}), context).await
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if !self.asks.caps.elicitation {
            return Err(not_offered("elicitation/create"));
        }
        if !matches!(request, ElicitRequestParams::FormElicitationParams { .. }) {
            return Err(not_offered("elicitation/create in url mode"));
        }
        let params = serde_json::to_value(request).unwrap_or(Value::Null);
        self.forward("elicitation/create", params, context).await
    }

    fn on_cancelled(
        &self,
        _params: CancelledNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        let caps = self.asks.caps;
        let mut declared = ClientCapabilities::default();
        if caps.sampling {
            declared.sampling = Some(SamplingCapability::default());
        }
        if caps.elicitation {
            let mut e = ElicitationCapability::default();
            e.form = Some(FormElicitationCapability::default());
            declared.elicitation = Some(e);
        }
        if caps.roots {
            let mut r = RootsCapabilities::default();
            r.list_changed = Some(true);
            declared.roots = Some(r);
        }
        let mut c = ClientConfig::new(
            declared,
            Implementation::new("animaworks-tool", env!("CARGO_PKG_VERSION")),
        );
        if let Ok(v) = serde_json::from_value(json!(PROTOCOL_REVISION)) {
            c.protocol_version = v;
        }
        c
    }
}

/// The transport: JSON-RPC lines to the server's stdin; its stdout read a bounded line at a time.
struct Lines {
    shared: Arc<Shared>,
    read: BufReader<ChildStdout>,
    /// The line being read (kept here: rmcp may drop a `receive` between two reads of one line).
    line: Vec<u8>,
    write: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
}

impl Lines {
    /// The next whole line, without its newline; `Err` at the end of the output or past [`MAX_LINE`].
    async fn next_line(&mut self) -> Result<Vec<u8>, String> {
        loop {
            let buf = self.read.fill_buf().await.map_err(|e| format!("cannot be read: {e}"))?;
            if buf.is_empty() {
                return Err("closed its output (it exited?) before answering".into());
            }
            let (take, done) = match memchr::memchr(b'\n', buf) {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if self.line.len() + take > MAX_LINE + 1 {
                return Err(format!("wrote a line longer than {} MiB", MAX_LINE / (1024 * 1024)));
            }
            self.line.extend_from_slice(&buf[..take]);
            self.read.consume(take);
            if done {
                let mut line = std::mem::take(&mut self.line);
                line.pop();
                return Ok(line);
            }
        }
    }

    /// A line that is not JSON-RPC: skipped, as the official SDKs do, and counted.
    fn stray(&self, line: &[u8]) {
        let n = self.shared.stray.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= STRAY_QUOTED {
            let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
            eprintln!(
                "MCP server '{}': skipped a stdout line that is not JSON-RPC: {shown:?}",
                self.shared.server
            );
        }
    }

    /// A notification of the server, as events of the calls it concerns.
    fn note(&self, method: &str, p: &Value) {
        let shared = &self.shared;
        let routes = shared.routes.lock().expect("routes lock");
        let tagged = |call_id: &str, mut ev: Value| {
            if shared.tag {
                ev["call_id"] = json!(call_id);
            }
            out_line(&ev);
        };
        match method {
            "notifications/progress" => {
                let token = p.get("progressToken");
                let Some((call_id, _)) = routes.iter().find(|(_, r)| Some(&r.token) == token) else {
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
                for call_id in routes.keys() {
                    tagged(call_id, json!({"type": "log", "level": level, "message": text}));
                }
            }
            // A server that announces its tools right after it started says nothing new.
            "notifications/tools/list_changed" if shared.answers.load(Ordering::Relaxed) > 1 => {
                for call_id in routes.keys() {
                    tagged(
                        call_id,
                        json!({"type": "log", "level": "info", "message": format!(
                            "the MCP server '{}' says its tools changed; `animaworks-tool refresh` reads them again",
                            shared.server)}),
                    );
                }
            }
            _ => {}
        }
    }
}

impl rmcp::transport::Transport<RoleClient> for Lines {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(r) = &item {
            if matches!(r.request, ClientRequest::ListToolsRequest(_)) {
                self.shared.lists.lock().expect("lists lock").insert(r.id.clone());
            }
        }
        let line = serde_json::to_vec(&item).map(|mut l| {
            l.push(b'\n');
            l
        });
        let write = self.write.clone();
        let server = self.shared.server.clone();
        async move {
            let line = line.map_err(std::io::Error::other)?;
            let mut w = write.lock().await;
            let Some(w) = w.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    format!("the MCP server '{server}': its input is closed"),
                ));
            };
            w.write_all(&line).await?;
            w.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let line = match self.next_line().await {
                Ok(l) => l,
                Err(why) => {
                    let mut ended = self.shared.ended.lock().expect("ended lock");
                    ended.get_or_insert_with(|| format!("the MCP server '{}' {why}", self.shared.server));
                    return None;
                }
            };
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let msg = match serde_json::from_slice::<Value>(&line) {
                Ok(m) if m.is_object() => m,
                _ => {
                    self.stray(&line);
                    continue;
                }
            };
            let method = msg.get("method").and_then(Value::as_str);
            match (msg.get("id"), method) {
                (
                    None,
                    Some(
                        note
                        @ ("notifications/progress" | "notifications/message" | "notifications/tools/list_changed"),
                    ),
                ) => {
                    self.note(note, msg.get("params").unwrap_or(&Value::Null));
                    continue;
                }
                (Some(id), None) => {
                    self.shared.answers.fetch_add(1, Ordering::Relaxed);
                    if let (Ok(id), Some(result)) = (serde_json::from_value::<RequestId>(id.clone()), msg.get("result"))
                    {
                        if self.shared.lists.lock().expect("lists lock").contains(&id) {
                            self.shared.raw.lock().expect("raw lock").insert(id, result.clone());
                        }
                    }
                }
                _ => {}
            }
            match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(msg) {
                Ok(m) => return Some(m),
                Err(_) => self.stray(&line),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.write.lock().await.take());
        Ok(())
    }
}
