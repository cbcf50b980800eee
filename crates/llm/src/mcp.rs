//! An MCP server over stdio (rmcp): every permitted action is one MCP tool named by its schema name.
//!
//! - `tools/list`: the permitted catalogue ([`catalog::permitted`]) in MCP shape ([`providers::mcp_tool`]):
//!   input schema, output schema when it describes an object, annotations from the profile's hints.
//!   Paged ([`PAGE`] tools a page, opaque cursors; a cursor this server did not give is `-32602`). While the
//!   list is empty or cut short by an unusable permissions file, it and the `instructions` say why
//!   ([`Server::empty_hint`]).
//! - `tools/call`: resolve → validate → permit → run, as on every path. Every failure of the call (invalid
//!   arguments, a permission or sandbox refusal, a timeout, a crash, the tool's own error) is a result with
//!   `isError: true` (SEP-1303): the message and the suggestion as text, the runner's error object in
//!   `_meta["animaworks-tool/error"]`. Only a name this server does not offer is a JSON-RPC error (`-32602`).
//! - Progress events reach the client as `notifications/progress` when it sent a progress token; the tool's
//!   `log` events (and its stderr lines, at `debug`) as `notifications/message` at or above the level the client
//!   set (`logging/setLevel`; `info` until it does), with the tool's name as `logger`.
//! - `notifications/cancelled` ends the call's process group.
//! - A declared MCP server's own requests (`sampling/createMessage`, `elicitation/create`, `roots/list`) reach
//!   this server's client when it declared the capability (`client_asks`); its elicitations name the server.
//! - Tier folders (and the permissions file) are polled every second; a change sends
//!   `notifications/tools/list_changed`.
//! - Revisions: 2025-11-25 and older ([`REVISIONS`]). Bad lines (not JSON, not UTF-8, over 16 MiB) are answered
//!   by the line framing in front of rmcp (`llm/mcp_front.rs`).
//!
//! The whole surface as a client sees it: docs/mcp.md.

// rmcp marks logging deprecated for the 2026-07-28 draft (SEP-2577); 2025-11-25, which this server speaks, has it.
#![allow(deprecated)]

mod client_asks;
mod outbox;
mod tasks;

use crate::{background, catalog, providers, use_tool};
use awt_core::call::{CallOptions, Runner};
use awt_core::error::{CallError, Detail, ErrorCode};
use awt_core::stream::{Cancel, Observer};
use awt_protocol::Event;
use outbox::Note;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverResult, Implementation,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Tools a `tools/list` page holds.
pub const PAGE: usize = 100;

/// The MCP revisions this server implements (the newest first is what `initialize` prefers).
pub const REVISIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The `_meta` key of a failed call's runner error object.
pub const ERROR_META: &str = "animaworks-tool/error";

/// The `_meta` key of an empty `tools/list`'s reason.
pub const HINT_META: &str = "animaworks-tool/hint";

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
    /// The lowest level of `notifications/message` the client wants (`logging/setLevel`).
    level: Arc<Mutex<LoggingLevel>>,
    /// Why the last listing was empty.
    hint: Arc<Mutex<Option<String>>>,
    /// The schema names of background-eligible actions, from the last listing (MCP tasks: `taskSupport`).
    eligible: Arc<Mutex<HashSet<String>>>,
    /// Who answers the declared servers' requests to their client: this connection's client, once it is known.
    asks: Arc<std::sync::OnceLock<Option<awt_core::mcp_servers::asks::ClientAsks>>>,
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
            level: Arc::new(Mutex::new(LoggingLevel::Info)),
            hint: Arc::default(),
            eligible: Arc::default(),
            asks: Arc::default(),
        }
    }

    /// Why the server offers no tool, when it offers none, or why it offers fewer than it has (a permissions file
    /// that cannot be used): said on stderr at start, in `instructions` and in `tools/list`.
    pub fn empty_hint(&self) -> Option<String> {
        self.hint.lock().expect("hint lock").clone()
    }

    /// The permitted tools in MCP shape; also refreshes the name map used by calls.
    pub async fn tools(&self) -> Vec<Tool> {
        let snap = snapshot(&self.runner);
        if let Some((s, tools)) = self.listed.lock().expect("listed lock").as_ref() {
            if *s == snap {
                return tools.clone();
            }
        }
        let (all, problems, probed) = catalog::manifests(&self.runner).await;
        let found = all.len();
        let entries = catalog::permitted_of(&self.runner, all);
        let mut names = HashMap::new();
        let mut eligible = HashSet::new();
        let mut tools = Vec::new();
        for e in &entries {
            for a in &e.actions {
                if names.contains_key(&a.schema_name) {
                    continue;
                }
                names.insert(a.schema_name.clone(), (e.name().to_owned(), a.name.clone()));
                if a.profile.background_eligible {
                    eligible.insert(a.schema_name.clone());
                }
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
        let broken = problems.iter().find(|p| p.kind == "permissions_invalid").map(|p| p.message.clone());
        *self.hint.lock().expect("hint lock") =
            broken.or_else(|| tools.is_empty().then(|| empty_reason(&self.runner, found, &problems)));
        *self.names.lock().expect("names lock") = names;
        *self.eligible.lock().expect("eligible lock") = eligible;
        // Kept only when every manifest came from the schema cache: a probe that failed for a passing reason (a
        // timeout under load) is not cached, so the next listing must try again.
        *self.listed.lock().expect("listed lock") = (probed == 0).then(|| (snap, tools.clone()));
        tools
    }

    /// The offered tool name closest to a mistyped one.
    async fn closest_name(&self, name: &str) -> Option<String> {
        let offered = self.tools().await;
        awt_core::suggest::closest(name, offered.iter().map(|t| t.name.as_ref())).map(str::to_owned)
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
            return Ok(match background::answer(&self.runner, action, &args, None).await {
                Ok((v, blocks)) => {
                    // The record (its blocks described), then the task's own non-text blocks as blocks.
                    let others = blocks
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|b| b.get("type").and_then(Value::as_str) != Some("text"));
                    let mut all = vec![ContentBlock::text(use_tool::result_text(&v))];
                    all.extend(crate::content::mcp_blocks(others.collect()));
                    CallToolResult::success(all)
                }
                Err(e) => failure(&e),
            });
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
        let target = match r.open(&tool).await.and_then(|t| t.action(&action)) {
            Ok(t) => t,
            Err(e) => return Ok(failure(&e)),
        };
        let mut args: Map<String, Value> = req.arguments.unwrap_or_default();
        use_tool::drop_strict_nulls(&target.action().input_schema, &mut args);
        let opts = CallOptions {
            timeout: self.opts.timeout,
            server_requests: self.asks.get_or_init(|| client_asks::of(&ctx.peer)).clone(),
            ..Default::default()
        };
        let output_object = target
            .action()
            .output_schema
            .as_ref()
            .and_then(|o| o.get("type"))
            .and_then(Value::as_str)
            == Some("object");
        let call = match crate::elicit::prepare(r, target, &tool, &action, args, opts, &ctx.peer).await {
            Ok(c) => c,
            Err(e) => return Ok(failure(&e)),
        };

        let (cancel_tx, cancel) = Cancel::new();
        let ct = ctx.ct.clone();
        let watcher = tokio::spawn(async move {
            ct.cancelled().await;
            let _ = cancel_tx.send(true);
        });
        let outbox = Arc::new(outbox::Outbox::default());
        let (peer, theirs, logger) = (ctx.peer.clone(), outbox.clone(), tool.clone());
        let forwarder = tokio::spawn(async move {
            while let Some(n) = theirs.next(&logger).await {
                let _ = match n {
                    Note::Progress(p) => peer.notify_progress(p).await,
                    Note::Log(l) => peer.notify_logging_message(l).await,
                };
            }
        });
        let mut obs = Progress {
            token: ctx.meta.get_progress_token(),
            outbox,
            logger: tool.clone(),
            level: rank(*self.level.lock().expect("level lock")),
            stderr: Vec::new(),
            content: None,
        };
        let out = call.run(&mut obs, cancel).await;
        watcher.abort();
        let content = obs.content.take();
        drop(obs);
        // Progress goes out before the result.
        let _ = forwarder.await;
        Ok(match out {
            Ok(v) => {
                let blocks = match content {
                    Some(c) => crate::content::mcp_blocks(c),
                    None => vec![ContentBlock::text(use_tool::result_text(&v))],
                };
                let mut res = CallToolResult::success(blocks);
                // The pipeline has held the result to its output_schema: it conforms.
                if output_object && v.is_object() {
                    res.structured_content = Some(v);
                }
                res
            }
            Err(e) => failure(&e),
        })
    }
}

/// A failed call as MCP's tool-level error (SEP-1303): `isError: true`, the message and the suggestion as text
/// (the model reads them and can correct its call), the runner's error object (protocol.md §6) in `_meta`.
pub fn failure(e: &CallError) -> CallToolResult {
    let e = &awt_core::suggest::for_llm(e, awt_core::suggest::Reader::Mcp);
    let text = match &e.hint {
        Some(h) => format!("{} (hint: {h})", e.message),
        None => e.message.clone(),
    };
    let mut res = CallToolResult::error(vec![ContentBlock::text(text)]);
    let mut meta = Map::new();
    meta.insert(ERROR_META.into(), e.to_json()["error"].clone());
    res.meta = serde_json::from_value(Value::Object(meta)).ok();
    res
}

/// A name this server does not offer: the one `tools/call` fault that is a JSON-RPC error (`-32602`, as MCP
/// says for unknown tools); `data` is the runner's error object.
pub fn refusal(e: &CallError) -> ErrorData {
    let e = &awt_core::suggest::for_llm(e, awt_core::suggest::Reader::Mcp);
    tracing::warn!("refused: {e}");
    let code = match e.code {
        ErrorCode::Internal => rmcp::model::ErrorCode::INTERNAL_ERROR,
        _ => rmcp::model::ErrorCode::INVALID_PARAMS,
    };
    ErrorData::new(code, e.to_string(), Some(e.to_json()["error"].clone()))
}

/// Why a server offers nothing: no anima dir, no data dir, no tool found, or every tool failed or refused.
fn empty_reason(runner: &Runner, found: usize, problems: &[awt_core::discover::Problem]) -> String {
    let d = &runner.dirs;
    let mut why = Vec::new();
    match &d.anima {
        None => why.push(format!(
            "no anima dir: {} is not set (MCP clients often start servers without the caller's \
             environment; give it in the client's server entry, or pass --anima-dir)",
            awt_core::env_vars::ANIMA_DIR.name
        )),
        Some(a) if !a.is_dir() => why.push(format!("the anima dir {} does not exist", a.display())),
        Some(_) => {}
    }
    if !d.data.is_dir() {
        why.push(format!(
            "the data dir {} does not exist (set {} or pass --data-dir)",
            d.data.display(),
            awt_core::env_vars::DATA_DIR.name
        ));
    }
    if found == 0 {
        let dirs: Vec<String> = d
            .tier_dirs()
            .into_iter()
            .map(|(_, p)| p.display().to_string())
            .collect();
        match problems.first() {
            Some(p) => why.push(format!(
                "{} tool(s) could not be loaded, e.g. {}",
                problems.len(),
                p.message
            )),
            None => why.push(format!("no tool was found in {}", dirs.join(", "))),
        }
    } else {
        why.push(format!(
            "{found} tool(s) found, but the permissions allow none of their actions"
        ));
    }
    format!("This server offers no tools: {}.", why.join("; "))
}

/// The rank of a level, lowest first (MCP's order, RFC 5424's severities).
fn rank(l: LoggingLevel) -> u8 {
    match l {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// A stderr line longer than this is sent in pieces.
const STDERR_LINE: usize = 8 * 1024;

/// Forwards a tool's progress events to the client (when it asked for them with a progress token), and its log
/// events and stderr lines as `notifications/message` (what the observer sees is already masked).
struct Progress {
    token: Option<ProgressToken>,
    /// Bounded: a client that reads slower than the tool writes loses log messages (counted), never memory.
    outbox: Arc<outbox::Outbox>,
    logger: String,
    level: u8,
    stderr: Vec<u8>,
    /// The final result's content blocks (protocol.md §5.2), sent as the call's content.
    content: Option<Vec<Value>>,
}

impl Progress {
    fn log(&self, level: LoggingLevel, data: Value) {
        if rank(level) >= self.level {
            self.outbox.put(Note::Log(
                LoggingMessageNotificationParam::new(level, data).with_logger(&self.logger),
            ));
        }
    }

    fn stderr_line(&mut self, upto: usize) {
        let rest = self.stderr.split_off(upto);
        let line = std::mem::replace(&mut self.stderr, rest);
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if !text.is_empty() {
            self.log(LoggingLevel::Debug, Value::String(text.to_owned()));
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if !self.stderr.is_empty() {
            let n = self.stderr.len();
            self.stderr_line(n);
        }
        self.outbox.close();
    }
}

impl Observer for Progress {
    fn event(&mut self, event: &Event, _raw: &[u8]) {
        match event {
            Event::Result { content: Some(c), .. } => {
                self.content = Some(awt_core::stream::content::delivered(c));
            }
            Event::Log { level, message, .. } => {
                use awt_protocol::Level;
                let l = match level {
                    Level::Debug => LoggingLevel::Debug,
                    Level::Info => LoggingLevel::Info,
                    Level::Warning => LoggingLevel::Warning,
                    Level::Error => LoggingLevel::Error,
                };
                self.log(l, Value::String(message.clone()));
            }
            Event::Progress {
                progress,
                total,
                message,
                ..
            } => {
                let Some(token) = &self.token else { return };
                let mut p = ProgressNotificationParam::new(token.clone(), *progress);
                if let Some(t) = total {
                    p = p.with_total(*t);
                }
                if let Some(m) = message {
                    p = p.with_message(m.clone());
                }
                self.outbox.put(Note::Progress(p));
            }
            _ => {}
        }
    }

    fn stderr(&mut self, chunk: &[u8]) {
        if self.level > 0 {
            return;
        }
        self.stderr.extend_from_slice(chunk);
        while let Some(i) = self.stderr.iter().position(|&b| b == b'\n') {
            self.stderr_line(i + 1);
        }
        while self.stderr.len() > STDERR_LINE {
            self.stderr_line(STDERR_LINE);
        }
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let mut caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        caps.logging = Some(Map::new());
        let mut instructions =
            "Every tool action the anima may run, one MCP tool each (named <tool>_<action>).".to_owned();
        if let Some(h) = self.empty_hint() {
            instructions = format!("{h} {instructions}");
        }
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("animaworks-tool", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    /// `server/discover` belongs to 2026-07-28, which this server does not implement.
    async fn discover(&self, _context: RequestContext<RoleServer>) -> Result<DiscoverResult, ErrorData> {
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "server/discover is a 2026-07-28 method; this server speaks MCP 2025-11-25 and older: use initialize",
            None,
        ))
    }

    /// Sent on to the servers whose sessions declared this client's roots.
    async fn on_roots_list_changed(&self, _context: rmcp::service::NotificationContext<RoleServer>) {
        if let (Some(pool), Some(Some(asks))) = (&self.runner.pool, self.asks.get()) {
            pool.roots_changed(asks);
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.level.lock().expect("level lock") = request.level;
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools().await;
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => match cursor_offset(&c) {
                Some(o) if o < tools.len() => o,
                _ => {
                    return Err(ErrorData::invalid_params(
                        format!("invalid cursor {c:?}: use the nextCursor of the previous tools/list page"),
                        None,
                    ))
                }
            },
        };
        let end = (start + PAGE).min(tools.len());
        let mut page = json!({"tools": tools[start..end]});
        if end < tools.len() {
            page["nextCursor"] = Value::String(cursor(end));
        }
        if let Some(h) = self.empty_hint() {
            page["_meta"] = json!({HINT_META: h});
        }
        serde_json::from_value(page).map_err(|e| ErrorData::internal_error(format!("tools/list page: {e}"), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        crate::answered(self.call(request, context))
            .await
            .unwrap_or_else(|e| Err(refusal(&e)))
            .map(CallToolResponse::from)
    }
}

/// The cursor of the page starting at `offset`: opaque to clients (they must not build one).
fn cursor(offset: usize) -> String {
    format!("awt1.{offset:x}")
}

fn cursor_offset(c: &str) -> Option<usize> {
    let hex = c.strip_prefix("awt1.")?;
    if hex.is_empty() || hex.len() > 12 || !hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return None;
    }
    usize::from_str_radix(hex, 16).ok().filter(|&o| o > 0 && cursor(o) == c)
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
    // Listed once before the client asks: an empty server says why at start.
    server.tools().await;
    match server.empty_hint() {
        Some(h) => eprintln!("animaworks-tool mcp: {h}"),
        // An anima dir named but missing is a mistake (a typo, a client entry with a stale path), as the command
        // line says: said at start even when the other tiers offer tools.
        None => {
            if server.runner.dirs.anima.as_ref().is_some_and(|a| !a.is_dir()) {
                if let Some(note) = awt_core::suggest::personal_tier_note(&server.runner.dirs) {
                    eprintln!("animaworks-tool mcp: warning: {note}");
                }
            }
        }
    }
    let watch_runner = server.runner.clone();
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let hook: Arc<dyn super::mcp_front::Intercept> = Arc::new(tasks::Tasks::new(server.clone()));
    let front = super::mcp_front::start(stdin, stdout, super::lines::MAX_LINE, Some(hook));
    let service = server
        .serve((front.to_session, front.from_session))
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
    let _ = front.writer.await;
    out.map(|_| ()).map_err(ServeError::Stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_revisions_are_the_documented_ones() {
        let mut known: Vec<&str> = ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25)
            .iter()
            .map(|v| v.as_str())
            .collect();
        known.reverse();
        assert_eq!(known, REVISIONS);
    }

    #[test]
    fn cursors_are_only_those_given() {
        for o in [1, 100, 1000, 123_456] {
            assert_eq!(cursor_offset(&cursor(o)), Some(o));
        }
        for bad in [
            "",
            "awt1.",
            "awt1.0",
            "awt1.00a",
            "awt1.A",
            "awt1.-1",
            "100",
            "awt2.64",
            "awt1.1000000000000",
        ] {
            assert_eq!(cursor_offset(bad), None, "{bad}");
        }
    }
}
