//! MCP tasks (revision 2025-11-25, `basic/utilities/tasks`) over the runner's background tasks. rmcp 3.11 speaks
//! another shape of tasks (SEP-2663) and drops `params.task`, so these requests are answered in front of it
//! ([`crate::mcp_front::Intercept`]), and only in a session that negotiated 2025-11-25:
//!
//! - `tools/call` with `params.task` (`{"ttl": ms}`) on a background-eligible action submits a background task
//!   exactly as `submit` does ([`submit::submit_with`]) and answers `CreateTaskResult` at once; the task id is
//!   the one `jobs` shows, the ttl is kept in the task (`ttl_ms`, honoured by `jobs prune`).
//! - `tasks/get`, `tasks/result` (waits until the task has ended, then the `CallToolResult`), `tasks/list`
//!   (newest first, paged), `tasks/cancel` read and change the task store: any session, any process.
//! - `notifications/tasks/status` for the tasks this session created, while it lives: the store is looked at
//!   every [`POLL`] while one of them is open, not otherwise.

use super::{Server, ERROR_META};
use crate::mcp_front::{line, Answer, Intercept};
use awt_core::error::{CallError, ErrorCode};
use awt_tasks::{self as tasks, submit, Status, Task, TaskStore};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// The `_meta` key that ties a result to its task.
pub const RELATED: &str = "io.modelcontextprotocol/related-task";

/// How often the store is looked at for status notifications (and `pollInterval`).
pub const POLL: Duration = Duration::from_secs(1);

/// Tasks a `tasks/list` page holds.
const PAGE: usize = 100;

/// The one revision whose tasks these are.
const REVISION: &str = "2025-11-25";

/// The task side of one MCP session.
pub struct Tasks {
    server: Server,
    /// The revision the session negotiated (read from the session's `initialize` answer).
    revision: Mutex<Option<String>>,
    open: Arc<Mutex<Open>>,
    /// Becomes true when the client's input has ended.
    ended: tokio::sync::watch::Sender<bool>,
}

/// The open tasks this session created, and whether a watcher runs for them.
#[derive(Default)]
struct Open {
    /// Task id → the `[status, statusMessage]` last said of it.
    tasks: HashMap<String, Value>,
    watching: bool,
}

impl Tasks {
    pub fn new(server: Server) -> Tasks {
        Tasks {
            server,
            revision: Mutex::default(),
            open: Arc::default(),
            ended: tokio::sync::watch::Sender::new(false),
        }
    }

    fn speaks_tasks(&self) -> bool {
        self.revision.lock().expect("revision lock").as_deref() == Some(REVISION)
    }
}

impl Intercept for Tasks {
    fn takes(&self, method: &str, task: bool) -> bool {
        let ours = matches!(method, "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel")
            || (method == "tools/call" && task);
        ours && self.speaks_tasks()
    }

    fn answer(&self, method: &str, _id: Value, params: Value, out: mpsc::Sender<Vec<u8>>) -> Answer {
        let server = self.server.clone();
        let open = self.open.clone();
        let method = method.to_owned();
        let ended = self.ended.subscribe();
        Box::pin(async move {
            let got = match method.as_str() {
                "tools/call" => create(&server, &params, &open, out, ended).await,
                "tasks/get" => store(&server).and_then(|s| Ok(mcp_task(&find(s.as_ref(), &params)?))),
                "tasks/result" => result(&server, &params, ended).await,
                "tasks/list" => store(&server).and_then(|s| list(s.as_ref(), &params)),
                _ => cancel(&server, &params).await,
            };
            match got {
                Ok(v) => json!({"result": v}),
                Err(e) => json!({"error": e}),
            }
        })
    }

    fn input_ended(&self) {
        self.ended.send_replace(true);
    }

    fn amends(&self, method: &str) -> bool {
        method == "initialize" || (method == "tools/list" && self.speaks_tasks())
    }

    fn amend(&self, method: &str, answer: &mut Value) {
        let Some(result) = answer.get_mut("result").and_then(Value::as_object_mut) else {
            return;
        };
        if method == "initialize" {
            let rev = result.get("protocolVersion").and_then(Value::as_str).map(str::to_owned);
            let tasks = rev.as_deref() == Some(REVISION) && self.server.runner.dirs.anima.is_some();
            *self.revision.lock().expect("revision lock") = rev.filter(|_| tasks);
            if tasks {
                if let Some(caps) = result.get_mut("capabilities").and_then(Value::as_object_mut) {
                    caps.insert(
                        "tasks".into(),
                        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
                    );
                }
            }
            return;
        }
        let eligible = self.server.eligible.lock().expect("eligible lock").clone();
        if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
            for t in tools {
                let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
                if eligible.contains(name) {
                    t["execution"] = json!({"taskSupport": "optional"});
                }
            }
        }
    }
}

/// A JSON-RPC error object.
fn rpc(code: i64, message: impl Into<String>) -> Value {
    json!({"code": code, "message": message.into()})
}

/// A runner error as a JSON-RPC error (its error object in `data`).
fn rpc_of(e: &CallError) -> Value {
    serde_json::to_value(super::refusal(e)).unwrap_or_else(|_| rpc(-32603, e.to_string()))
}

fn store(server: &Server) -> Result<Box<dyn TaskStore>, Value> {
    tasks::backend::open(&server.runner).map_err(|e| rpc_of(&e))
}

/// The task `params.taskId` names; `-32602` when there is none such.
fn find(store: &dyn TaskStore, params: &Value) -> Result<Task, Value> {
    let Some(id) = params.get("taskId").and_then(Value::as_str) else {
        return Err(rpc(-32602, "params.taskId (a string) is required"));
    };
    match store.get(id) {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Err(rpc(
            -32602,
            format!("no task {id:?} in {}: use a taskId this server gave", store.location()),
        )),
        Err(e) => Err(rpc(-32603, format!("cannot read task {id}: {e}"))),
    }
}

fn time(secs: f64) -> String {
    let t = SystemTime::UNIX_EPOCH + Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or_default();
    awt_core::policy::audit::rfc3339_utc(t)
}

/// MCP's word for a task's status.
fn status(s: Status) -> &'static str {
    match s {
        Status::Pending | Status::Running => "working",
        Status::Completed => "completed",
        Status::Cancelled => "cancelled",
        Status::Failed | Status::Timeout | Status::Lost => "failed",
    }
}

/// What `statusMessage` says: the last progress of a running task, why a pending one waits, how one failed.
fn status_message(t: &Task) -> Option<String> {
    match t.status {
        Status::Pending => Some(
            t.queue
                .waiting
                .clone()
                .unwrap_or_else(|| "queued: waiting for a worker".into()),
        ),
        Status::Running => Some(match &t.progress {
            None => "running".into(),
            Some(p) => {
                let amount = match p.total {
                    Some(total) => format!("{}/{total}", p.progress),
                    None => format!("{}", p.progress),
                };
                match &p.message {
                    Some(m) => format!("{amount}: {m}"),
                    None => amount,
                }
            }
        }),
        Status::Completed => None,
        _ => t.error.clone().or_else(|| Some(t.status.as_str().to_owned())),
    }
}

/// A stored task as MCP's `Task`.
pub fn mcp_task(t: &Task) -> Value {
    let mut v = json!({
        "taskId": t.task_id,
        "status": status(t.status),
        "createdAt": time(t.created_at),
        "lastUpdatedAt": time(t.updated_at),
        "ttl": t.ttl_ms,
        "pollInterval": POLL.as_millis() as u64,
    });
    if let Some(m) = status_message(t) {
        v["statusMessage"] = Value::String(m);
    }
    v
}

/// A task-augmented `tools/call`: submit, answer `CreateTaskResult`, watch the task while the session lives.
async fn create(
    server: &Server,
    params: &Value,
    open: &Arc<Mutex<Open>>,
    out: mpsc::Sender<Vec<u8>>,
    ended: tokio::sync::watch::Receiver<bool>,
) -> Result<Value, Value> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
    let ttl = match params.get("task").and_then(|t| t.get("ttl")) {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| rpc(-32602, "params.task.ttl must be a whole number of milliseconds"))?,
        ),
    };
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return Err(rpc(-32602, "params.arguments must be an object")),
    };
    let Some((tool, action)) = server.lookup(name).await else {
        let e = CallError::new(ErrorCode::UnknownTool, format!("no permitted tool named {name:?}"))
            .hint("tools/list shows every tool this server offers");
        return Err(rpc_of(&server.runner.refuse_unknown(name, e)));
    };
    let listed = server.names.lock().expect("names lock").contains_key(name);
    // A listed action that is not background-eligible has no task; one not listed (refused) goes on to submit,
    // whose refusal names the grant.
    if listed && !server.eligible.lock().expect("eligible lock").contains(name) {
        return Err(rpc(
            -32601,
            format!(
                "{name} does not support task-augmented calls ({tool}.{action} is not background_eligible; its \
                 tools/list entry has no execution.taskSupport): call it without params.task"
            ),
        ));
    }
    let words = vec![action, "--json".to_owned(), args.to_string()];
    let checked = submit::submit_with(&server.runner, &tool, &words, false, |t| {
        t.source = Some("mcp".into());
        t.ttl_ms = ttl;
    })
    .await
    .map_err(|e| rpc_of(&e))?;
    let task = mcp_task(&checked.task);
    let mut o = open.lock().expect("open lock");
    o.tasks.insert(checked.task.task_id.clone(), said(&task));
    if !o.watching {
        o.watching = true;
        tokio::spawn(watch(server.clone(), open.clone(), out, ended));
    }
    drop(o);
    Ok(json!({"task": task}))
}

/// The part of a task a status notification is about.
fn said(task: &Value) -> Value {
    json!([task["status"], task.get("statusMessage")])
}

/// Send `notifications/tasks/status` when a task of this session changes; ends when none is open.
async fn watch(
    server: Server,
    open: Arc<Mutex<Open>>,
    out: mpsc::Sender<Vec<u8>>,
    mut ended: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        if !sleep_unless_ended(POLL, &mut ended).await {
            open.lock().expect("open lock").watching = false;
            return;
        }
        let ids: Vec<(String, Value)> = {
            let mut o = open.lock().expect("open lock");
            if o.tasks.is_empty() {
                o.watching = false;
                return;
            }
            o.tasks.clone().into_iter().collect()
        };
        let Ok(store) = tasks::backend::open(&server.runner) else {
            continue;
        };
        if store.is_local() {
            let _ = store.kick(&server.runner.dirs);
        }
        for (id, last) in ids {
            let t = match store.get(&id) {
                Ok(Some(t)) => t,
                Ok(None) => {
                    open.lock().expect("open lock").tasks.remove(&id);
                    continue;
                }
                Err(_) => continue,
            };
            let task = mcp_task(&t);
            let now = said(&task);
            if t.status.is_final() {
                open.lock().expect("open lock").tasks.remove(&id);
            } else {
                open.lock().expect("open lock").tasks.insert(id, now.clone());
            }
            if now != last {
                let note = json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task});
                if out.send(line(&note)).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// `tasks/result`: wait until the task has ended, then its `CallToolResult`.
/// Sleep `d`; false when the client's input ends first.
async fn sleep_unless_ended(d: Duration, ended: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    if *ended.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => !*ended.borrow(),
        _ = ended.changed() => false,
    }
}

async fn result(
    server: &Server,
    params: &Value,
    mut ended: tokio::sync::watch::Receiver<bool>,
) -> Result<Value, Value> {
    let store = store(server)?;
    let mut t = find(store.as_ref(), params)?;
    let mut looks = 0u32;
    while !t.status.is_final() {
        if !sleep_unless_ended(Duration::from_millis(200), &mut ended).await {
            return Err(rpc(
                -32603,
                format!(
                    "the session ended before task {} did; it goes on (tasks/result in a new session)",
                    t.task_id
                ),
            ));
        }
        looks += 1;
        // A pending task whose worker never came: the look that `jobs` takes starts one.
        if looks % 25 == 0 {
            let _ = store.kick(&server.runner.dirs);
        }
        t = find(store.as_ref(), params)?;
    }
    Ok(call_result(&t))
}

/// A finished task as the `CallToolResult` its call would have answered.
pub fn call_result(t: &Task) -> Value {
    let related = json!({"taskId": t.task_id});
    if t.status == Status::Completed {
        let text = match (&t.result_value, &t.result) {
            (Some(v), _) => crate::use_tool::result_text(v),
            (None, Some(r)) => r.clone(),
            (None, None) => String::new(),
        };
        // The blocks the call gave, as a direct call sends them; else the value as text.
        let content = match &t.content {
            Some(blocks) => Value::Array(awt_tasks::content::read_back(blocks)),
            None => json!([{"type": "text", "text": text}]),
        };
        let mut r = json!({"content": content, "isError": false, "_meta": {RELATED: related}});
        if let Some(v @ Value::Object(_)) = &t.result_value {
            r["structuredContent"] = v.clone();
        }
        return r;
    }
    let detail = t
        .error_detail
        .clone()
        .unwrap_or_else(|| json!({"code": t.error_code.as_deref().unwrap_or(t.status.as_str()), "message": t.error}));
    let text = match (
        detail.get("message").and_then(Value::as_str),
        detail.get("hint").and_then(Value::as_str),
    ) {
        (Some(m), Some(h)) => format!("{m} (hint: {h})"),
        (Some(m), None) => m.to_owned(),
        _ => t.error.clone().unwrap_or_else(|| t.status.as_str().to_owned()),
    };
    json!({"content": [{"type": "text", "text": text}], "isError": true,
        "_meta": {RELATED: related, ERROR_META: detail}})
}

fn list(store: &dyn TaskStore, params: &Value) -> Result<Value, Value> {
    let mut all = store
        .list()
        .map_err(|e| rpc(-32603, format!("cannot list the tasks in {}: {e}", store.location())))?;
    all.sort_by(|a, b| {
        b.created_at
            .total_cmp(&a.created_at)
            .then_with(|| a.task_id.cmp(&b.task_id))
    });
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(c) => match c.as_str().and_then(cursor_offset).filter(|&o| o < all.len()) {
            Some(o) => o,
            None => {
                return Err(rpc(
                    -32602,
                    format!("invalid cursor {c}: use the nextCursor of the previous tasks/list page"),
                ))
            }
        },
    };
    let end = (start + PAGE).min(all.len());
    let mut page = json!({"tasks": all[start..end].iter().map(mcp_task).collect::<Vec<_>>()});
    if end < all.len() {
        page["nextCursor"] = Value::String(format!("awtt.{end:x}"));
    }
    Ok(page)
}

fn cursor_offset(c: &str) -> Option<usize> {
    let hex = c.strip_prefix("awtt.")?;
    let o = usize::from_str_radix(hex, 16).ok().filter(|&o| o > 0)?;
    (format!("awtt.{o:x}") == c).then_some(o)
}

/// `tasks/cancel`: `-32602` for a task that has already ended, else the cancelled task.
async fn cancel(server: &Server, params: &Value) -> Result<Value, Value> {
    let store = store(server)?;
    let t = find(store.as_ref(), params)?;
    if t.status.is_final() {
        return Err(rpc(
            -32602,
            format!(
                "cannot cancel task {}: it has already ended ({})",
                t.task_id,
                t.status.as_str()
            ),
        ));
    }
    let c = tasks::cancel::cancel(store.as_ref(), &t.task_id)
        .await
        .map_err(|e| rpc_of(&e))?;
    Ok(mcp_task(&c.task))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(extra: Value) -> Task {
        let mut v = json!({"task_id": "0123456789ab", "anima_name": "a", "tool_name": "t:x", "tool_args": {},
            "status": "running", "created_at": 1.5, "completed_at": null, "result": null, "error": null,
            "tool": "t", "action": "x", "kind": "action", "updated_at": 2.25});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn stored_tasks_in_mcp_shape() {
        let t = mcp_task(&task(
            json!({"progress": {"progress": 1.0, "total": 4.0, "message": "warming up",
            "updated_at": 2.0}, "ttl_ms": 60000}),
        ));
        assert_eq!(
            t,
            json!({"taskId": "0123456789ab", "status": "working", "statusMessage": "1/4: warming up",
                "createdAt": "1970-01-01T00:00:01.500Z", "lastUpdatedAt": "1970-01-01T00:00:02.250Z",
                "ttl": 60000, "pollInterval": 1000})
        );
        for (stored, outcome, mcp) in [
            ("pending", None, "working"),
            ("completed", Some("completed"), "completed"),
            ("failed", Some("timeout"), "failed"),
            ("failed", Some("lost"), "failed"),
            ("failed", Some("cancelled"), "cancelled"),
        ] {
            let t = task(json!({"status": stored, "outcome": outcome}));
            assert_eq!(mcp_task(&t)["status"], mcp, "{stored} {outcome:?}");
            assert_eq!(mcp_task(&t)["ttl"], Value::Null);
        }
        let failed = task(
            json!({"status": "failed", "outcome": "failed", "error": "tool_error: no",
            "error_detail": {"code": "tool_error", "message": "no", "hint": "try yes"}}),
        );
        assert_eq!(mcp_task(&failed)["statusMessage"], "tool_error: no");
        let r = call_result(&failed);
        assert_eq!(r["isError"], true);
        assert_eq!(r["content"][0]["text"], "no (hint: try yes)");
        assert_eq!(r["_meta"][RELATED]["taskId"], "0123456789ab");
        assert_eq!(r["_meta"][ERROR_META]["code"], "tool_error");
        let img = json!({"type": "image", "data": "aGk=", "mimeType": "image/png"});
        let done = task(
            json!({"status": "completed", "outcome": "completed", "result": "a dot\n[image/png, 2 B]",
            "content": [{"type": "text", "text": "a dot"}, img]}),
        );
        assert_eq!(
            call_result(&done)["content"],
            json!([{"type": "text", "text": "a dot"}, img])
        );
    }

    #[test]
    fn cursors_are_only_those_given() {
        assert_eq!(cursor_offset("awtt.64"), Some(100));
        for bad in ["", "awtt.", "awtt.0", "awtt.064", "awtt.A", "awt1.64"] {
            assert_eq!(cursor_offset(bad), None, "{bad}");
        }
    }
}
