//! An MCP server over stdio (rmcp): every permitted action is one MCP tool named by its schema name.
//!
//! - `tools/list`: the permitted catalogue ([`catalog::permitted`]) in MCP shape ([`providers::mcp_tool`]):
//!   input schema, output schema when it describes an object, annotations from the profile's hints.
//! - `tools/call`: resolve → validate → permit → run, as on every path. The runner's refusals (unknown tool or
//!   action, invalid arguments, permission denied, a malformed call) are JSON-RPC errors, with the runner's
//!   error object as `data`; everything that happened once the tool was started (its own error, a timeout, a
//!   crash, a cancellation) is an `isError` result whose text starts with the runner's code.
//! - Progress events reach the client as `notifications/progress` when it sent a progress token.
//! - `notifications/cancelled` ends the call's process group.
//! - Tier folders (and the permissions file) are polled every second; a change sends
//!   `notifications/tools/list_changed`.

use crate::call::{CallOptions, Runner};
use crate::error::{CallError, Detail, ErrorCode};
use crate::llm::{background, catalog, providers, use_tool};
use crate::stream::{Cancel, Observer};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tool_sdk::protocol::Event;

/// JSON-RPC code for a permission refusal (implementation-defined server error range).
pub const PERMISSION_DENIED: i32 = -32001;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Overrides every action's `timeout_s`.
    pub timeout: Option<Duration>,
    /// How often tier folders are checked for changes.
    pub poll: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: None,
            poll: Duration::from_secs(1),
        }
    }
}

/// The MCP handler: one per connection.
#[derive(Clone)]
pub struct Server {
    runner: Arc<Runner>,
    opts: Options,
    /// Schema name → (tool, action), from the last listing.
    names: Arc<Mutex<HashMap<String, (String, String)>>>,
    /// The last listing and the state of the folders it was made from.
    listed: Arc<Mutex<Option<Listing>>>,
}

/// A listing and the state of the folders it was made from.
type Listing = (Snapshot, Vec<Tool>);

/// The state of the tier folders and the permissions file ([`snapshot`]).
pub type Snapshot = Vec<(PathBuf, Option<(u64, u64, i64, i64, u64)>)>;

impl Server {
    pub fn new(runner: Runner, opts: Options) -> Server {
        Server {
            runner: Arc::new(runner),
            opts,
            names: Arc::default(),
            listed: Arc::default(),
        }
    }

    /// The permitted tools in MCP shape; also refreshes the name map used by calls.
    pub async fn tools(&self) -> Vec<Tool> {
        let snap = snapshot(&self.runner);
        if let Some((s, tools)) = self.listed.lock().expect("listed lock").as_ref() {
            if *s == snap {
                return tools.clone();
            }
        }
        let (all, _, probed) = catalog::manifests(&self.runner).await;
        let entries = catalog::permitted_of(&self.runner, all);
        let mut names = HashMap::new();
        let mut tools = Vec::new();
        for e in &entries {
            for a in &e.actions {
                if names.contains_key(&a.schema_name) {
                    continue;
                }
                names.insert(a.schema_name.clone(), (e.name().to_owned(), a.name.clone()));
                match serde_json::from_value::<Tool>(providers::mcp_tool(e, a)) {
                    Ok(t) => tools.push(t),
                    Err(err) => tracing::warn!("{} left out: {err}", a.schema_name),
                }
            }
        }
        if self.runner.dirs.anima.is_some() {
            for (name, description, schema) in background::actions() {
                let t = json!({"name": name, "description": description, "inputSchema": schema});
                if let Ok(t) = serde_json::from_value::<Tool>(t) {
                    tools.push(t);
                }
            }
        }
        *self.names.lock().expect("names lock") = names;
        // Kept only when every manifest came from the schema cache: a probe that failed for a passing reason (a
        // timeout under load) is not cached, so the next listing must try again.
        *self.listed.lock().expect("listed lock") = (probed == 0).then(|| (snap, tools.clone()));
        tools
    }

    /// The offered tool name closest to a mistyped one.
    async fn closest_name(&self, name: &str) -> Option<String> {
        let offered = self.tools().await;
        crate::suggest::closest(name, offered.iter().map(|t| t.name.as_ref())).map(str::to_owned)
    }

    async fn lookup(&self, name: &str) -> Option<(String, String)> {
        if let Some(v) = self.names.lock().expect("names lock").get(name).cloned() {
            return Some(v);
        }
        // A tool added since the last listing: list again once.
        self.tools().await;
        if let Some(v) = self.names.lock().expect("names lock").get(name).cloned() {
            return Some(v);
        }
        // Not listed, but maybe there and refused (a gated action without its grant): find it, so that the call
        // ends in the permission refusal that names the grant, not in "unknown tool".
        let (all, _, _) = catalog::manifests(&self.runner).await;
        all.iter().find_map(|r| {
            r.manifest
                .actions
                .iter()
                .find(|a| a.schema_name == name)
                .map(|a| (r.file.name.clone(), a.name.clone()))
        })
    }

    async fn call(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if let Some(action) = req
            .name
            .strip_prefix("task_")
            .filter(|_| background::actions().iter().any(|a| a.0 == req.name))
        {
            let args = req.arguments.clone().unwrap_or_default();
            let v = background::answer(&self.runner, action, &args)
                .await
                .map_err(|e| refusal(&e))?;
            return Ok(CallToolResult::success(vec![ContentBlock::text(
                use_tool::result_text(&v),
            )]));
        }
        let Some((tool, action)) = self.lookup(&req.name).await else {
            let near = self.closest_name(&req.name).await;
            let e = CallError::new(
                ErrorCode::UnknownTool,
                format!("no permitted tool named {:?}", req.name),
            )
            .hint("tools/list shows every tool this server offers");
            let e = near.map_or(e.clone(), |n| e.with(Detail::DidYouMean, n));
            return Err(refusal(&self.runner.refuse_unknown(&req.name, e)));
        };
        let r = &self.runner;
        let target = r
            .open(&tool)
            .await
            .and_then(|t| t.action(&action))
            .map_err(|e| refusal(&e))?;
        let mut args: Map<String, Value> = req.arguments.unwrap_or_default();
        use_tool::drop_strict_nulls(&target.action().input_schema, &mut args);
        let opts = CallOptions {
            timeout: self.opts.timeout,
            ..Default::default()
        };
        let output_object = target
            .action()
            .output_schema
            .as_ref()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str)
            == Some("object");
        let call = target.prepare(args, &opts).map_err(|e| refusal(&e))?;

        let (cancel_tx, cancel) = Cancel::new();
        let ct = ctx.ct.clone();
        let watcher = tokio::spawn(async move {
            ct.cancelled().await;
            let _ = cancel_tx.send(true);
        });
        let (ptx, mut prx) = tokio::sync::mpsc::unbounded_channel::<ProgressNotificationParam>();
        let peer = ctx.peer.clone();
        let forwarder = tokio::spawn(async move {
            while let Some(p) = prx.recv().await {
                let _ = peer.notify_progress(p).await;
            }
        });
        let mut obs = Progress {
            token: ctx.meta.get_progress_token(),
            tx: ptx,
        };
        let out = call.run(&mut obs, cancel).await;
        watcher.abort();
        drop(obs);
        // Progress goes out before the result.
        let _ = forwarder.await;
        Ok(match out {
            Ok(v) => {
                let mut res = CallToolResult::success(vec![ContentBlock::text(use_tool::result_text(&v))]);
                // The pipeline has held the result to its output_schema: it conforms.
                if output_object && v.is_object() {
                    res.structured_content = Some(v);
                }
                res
            }
            Err(e) if e.code == ErrorCode::ToolError => {
                let text = match &e.hint {
                    Some(h) => format!("{} (hint: {h})", e.message),
                    None => e.message.clone(),
                };
                CallToolResult::error(vec![ContentBlock::text(text)])
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
        })
    }
}

/// A runner refusal as a JSON-RPC error; `data` is the runner's error object (protocol.md §6).
pub fn refusal(e: &CallError) -> ErrorData {
    let e = &crate::suggest::for_llm(e, crate::suggest::Reader::Mcp);
    tracing::warn!("refused: {e}");
    let code = match e.code {
        ErrorCode::PermissionDenied => rmcp::model::ErrorCode(PERMISSION_DENIED),
        ErrorCode::Internal => rmcp::model::ErrorCode::INTERNAL_ERROR,
        _ => rmcp::model::ErrorCode::INVALID_PARAMS,
    };
    ErrorData::new(code, e.to_string(), Some(e.to_json()["error"].clone()))
}

/// Forwards a tool's progress events to the client (when it asked for them with a progress token).
struct Progress {
    token: Option<ProgressToken>,
    tx: tokio::sync::mpsc::UnboundedSender<ProgressNotificationParam>,
}

impl Observer for Progress {
    fn event(&mut self, event: &Event, _raw: &[u8]) {
        let (
            Some(token),
            Event::Progress {
                progress,
                total,
                message,
                ..
            },
        ) = (&self.token, event)
        else {
            return;
        };
        let mut p = ProgressNotificationParam::new(token.clone(), *progress);
        if let Some(t) = total {
            p = p.with_total(*t);
        }
        if let Some(m) = message {
            p = p.with_message(m.clone());
        }
        let _ = self.tx.send(p);
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("animaworks-tool", env!("CARGO_PKG_VERSION")))
        .with_instructions("Every tool action the anima may run, one MCP tool each (named <tool>_<action>).")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools().await))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        crate::llm::answered(self.call(request, context))
            .await
            .unwrap_or_else(|e| Err(refusal(&e)))
            .map(CallToolResponse::from)
    }
}

/// What identifies the state of the tier folders and the permissions file: each path's metadata, and every
/// entry of each folder with its identity.
pub fn snapshot(runner: &Runner) -> Snapshot {
    let id = |p: &std::path::Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size()))
    };
    let mut out = Vec::new();
    for (_, dir) in runner.dirs.tier_dirs() {
        out.push((dir.clone(), id(&dir)));
        if let Ok(rd) = std::fs::read_dir(&dir) {
            let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files {
                let i = id(&f);
                out.push((f, i));
            }
        }
    }
    if let Some(a) = &runner.dirs.anima {
        for f in ["permissions.json", "permissions.md"] {
            let p = a.join(f);
            out.push((p.clone(), id(&p)));
        }
    }
    out
}

/// Why the MCP server could not start or did not end cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The client's initialisation failed.
    #[error("MCP start failed: {0}")]
    Start(Box<rmcp::service::ServerInitializeError>),
    /// The server's task ended abnormally (a panic or a cancellation).
    #[error("MCP server stopped: {0}")]
    Stopped(tokio::task::JoinError),
}

/// Serve MCP on stdin/stdout until the client closes the connection.
pub async fn serve(runner: Runner, opts: Options) -> Result<(), ServeError> {
    let poll = opts.poll;
    let server = Server::new(runner, opts);
    let watch_runner = server.runner.clone();
    let service = server
        .serve(rmcp::transport::io::stdio_pipes())
        .await
        .map_err(|e| ServeError::Start(Box::new(e)))?;
    let peer = service.peer().clone();
    let watcher = tokio::spawn(async move {
        let mut last = snapshot(&watch_runner);
        loop {
            tokio::time::sleep(poll).await;
            let now = snapshot(&watch_runner);
            if now != last {
                last = now;
                if peer.notify_tool_list_changed().await.is_err() {
                    return;
                }
            }
        }
    });
    let out = service.waiting().await;
    watcher.abort();
    out.map(|_| ()).map_err(ServeError::Stopped)
}
