//! Requests of MCP servers to their client: `sampling/createMessage`, `elicitation/create` (form mode) and
//! `roots/list`. A server's session declares to its server the capabilities of the front door's own MCP client
//! (the ones it declared to `animaworks-tool mcp`, [`ServerRequests::declared`]); such a request travels up
//! the session to the front, which asks its client ([`ServerRequests::answer`]). A session with no handler (the
//! CLI, `use-tool`) declares none: `roots/list` gets no roots, the others are refused.
//!
//! These requests belong to the session, not to a call (stdio says which request, if any, caused one), so the
//! handler is the front's, handed to the pipeline in [`crate::call::CallOptions::server_requests`] and part of
//! the session's key.
//!
//! Between the runner and its own bridge (internal to the session, not protocol.md): the bridge writes
//! `{"event": "request", "request_id": K, "method": M, "params": P}`; the runner answers with one line,
//! `{"reply": K, "result": R}` or `{"reply": K, "error": {"code": C, "message": S}}`. At most [`MAX_PENDING`]
//! requests of a session wait at once (more are refused at once), a reply is bounded by the bridge's line bound,
//! a reply to a request not waiting is ignored, and a request still waiting when the session ends is answered
//! with an error. A request the server cancels (`notifications/cancelled`: its call was cancelled) is said as
//! `{"event": "request_cancelled", "request_id": K}`, and the runner stops asking the client. The client's
//! `notifications/roots/list_changed` reaches each session that declared its roots as
//! `{"notify": "roots/list_changed"}`, which the bridge sends on to its server.

use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// The most requests of one session that wait for the client at once.
pub const MAX_PENDING: usize = 16;

/// JSON-RPC "method not found": what a capability that was not declared answers.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC "internal error": a request that could not reach the client, or whose answer could not come back.
pub const INTERNAL_ERROR: i64 = -32603;

/// The client capabilities a session declares to its server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Caps {
    pub sampling: bool,
    /// Form mode only.
    pub elicitation: bool,
    pub roots: bool,
}

impl Caps {
    pub fn any(self) -> bool {
        self.sampling || self.elicitation || self.roots
    }

    /// The names the bridge's description carries.
    pub fn names(self) -> Vec<&'static str> {
        [
            (self.sampling, "sampling"),
            (self.elicitation, "elicitation"),
            (self.roots, "roots"),
        ]
        .into_iter()
        .filter_map(|(on, n)| on.then_some(n))
        .collect()
    }

    pub fn from_names(names: &[String]) -> Caps {
        let has = |n: &str| names.iter().any(|x| x == n);
        Caps {
            sampling: has("sampling"),
            elicitation: has("elicitation"),
            roots: has("roots"),
        }
    }

    /// Does this set cover a request of `method`?
    pub fn covers(self, method: &str) -> bool {
        match method {
            "sampling/createMessage" => self.sampling,
            "elicitation/create" => self.elicitation,
            "roots/list" => self.roots,
            _ => false,
        }
    }
}

/// Why a forwarded request came to nothing: a JSON-RPC error for the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: i64,
    pub message: String,
}

/// The client's answer, when it comes.
pub type Answer = Pin<Box<dyn Future<Output = Result<Value, Refusal>> + Send>>;

/// A front door's MCP client, as the servers' sessions reach it.
pub trait ServerRequests: Send + Sync + 'static {
    /// What the client declared (only these are declared to servers).
    fn declared(&self) -> Caps;
    /// Ask the client `method` with `params` (already checked against [`ServerRequests::declared`], an
    /// elicitation's message already naming its server); the client's result object.
    fn answer(&self, method: &str, params: Value) -> Answer;
}

/// The handler a front door hands its calls; its identity is part of a session's key.
#[derive(Clone)]
pub struct ClientAsks(pub Arc<dyn ServerRequests>);

impl std::fmt::Debug for ClientAsks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientAsks({:?})", self.0.declared())
    }
}

impl ClientAsks {
    /// Who answers, and what: the part of a session's key.
    pub(crate) fn key(&self) -> (usize, Caps) {
        (Arc::as_ptr(&self.0) as *const () as usize, self.0.declared())
    }
}

/// A request line of the bridge (runner side).
#[derive(Debug, Deserialize)]
pub(crate) struct Forwarded {
    pub(crate) request_id: u64,
    pub(crate) method: String,
    #[serde(default)]
    pub(crate) params: Value,
}

/// What a bridge's line without a call id may say (runner side).
#[derive(Debug)]
pub(crate) enum FromBridge {
    Request(Forwarded),
    /// The server cancelled its request of this id.
    Cancelled(u64),
}

impl FromBridge {
    pub(crate) fn of(line: &[u8]) -> Option<FromBridge> {
        #[derive(Deserialize)]
        struct Event {
            event: String,
            #[serde(flatten)]
            rest: Value,
        }
        let e: Event = serde_json::from_slice(line).ok()?;
        match e.event.as_str() {
            "request" => serde_json::from_value(e.rest).ok().map(FromBridge::Request),
            "request_cancelled" => e.rest.get("request_id")?.as_u64().map(FromBridge::Cancelled),
            _ => None,
        }
    }
}

/// The line that tells a session's bridge that the client's roots changed.
pub(crate) const ROOTS_CHANGED: &[u8] = b"{\"notify\":\"roots/list_changed\"}\n";

/// The request line the bridge writes for the runner.
pub(crate) fn request_line(id: u64, method: &str, params: Value) -> Value {
    json!({"event": "request", "request_id": id, "method": method, "params": params})
}

/// The reply line the runner writes for the bridge (newline included): an answer past the bridge's line bound
/// becomes an error, so that the session goes on.
pub(crate) fn reply_line(id: u64, out: Result<Value, Refusal>) -> Vec<u8> {
    let v = match out {
        Ok(result) => json!({"reply": id, "result": result}),
        Err(r) => json!({"reply": id, "error": {"code": r.code, "message": r.message}}),
    };
    let mut line = serde_json::to_vec(&v).unwrap_or_default();
    if line.len() > super::bridge::MAX_LINE {
        let too = json!({"reply": id, "error": {"code": INTERNAL_ERROR, "message": format!(
            "the client's answer is longer than {} MiB", super::bridge::MAX_LINE / (1024 * 1024))}});
        line = serde_json::to_vec(&too).unwrap_or_default();
    }
    line.push(b'\n');
    line
}

/// The bridge's end: the server's requests waiting for the runner's reply.
pub(crate) struct Waiting {
    pub(crate) caps: Caps,
    next: AtomicU64,
    /// `None` once the session is ending: no request waits then.
    pending: Mutex<Option<HashMap<u64, Replier>>>,
}

type Replier = oneshot::Sender<Result<Value, Refusal>>;

/// Takes a request out of [`Waiting`] however its wait ends (answered, cancelled by the server, dropped).
struct Slot<'a>(&'a Waiting, u64);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0.pending.lock().expect("pending lock").as_mut() {
            p.remove(&self.1);
        }
    }
}

impl Waiting {
    pub(crate) fn new(caps: Caps) -> Waiting {
        Waiting {
            caps,
            next: AtomicU64::new(1),
            pending: Mutex::new(Some(HashMap::new())),
        }
    }

    /// Hand the request to the runner (`write` writes a line) and wait for its reply, or until `cancelled` (the
    /// server cancelled it), which the runner is told.
    pub(crate) async fn ask(
        &self,
        method: &str,
        params: Value,
        write: impl Fn(&Value),
        cancelled: impl Future<Output = ()>,
    ) -> Result<Value, Refusal> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().expect("pending lock");
            let Some(p) = pending.as_mut() else {
                return Err(ended());
            };
            if p.len() >= MAX_PENDING {
                return Err(Refusal {
                    code: INTERNAL_ERROR,
                    message: format!("{MAX_PENDING} requests of this server already wait for the client"),
                });
            }
            p.insert(id, tx);
        }
        let _slot = Slot(self, id);
        write(&request_line(id, method, params));
        tokio::select! {
            out = rx => out.unwrap_or_else(|_| Err(ended())),
            _ = cancelled => {
                write(&json!({"event": "request_cancelled", "request_id": id}));
                Err(Refusal {
                    code: INTERNAL_ERROR,
                    message: "cancelled by the server".into(),
                })
            }
        }
    }

    /// The runner's reply to request `id`; one to a request not waiting is ignored.
    pub(crate) fn reply(&self, id: u64, out: Result<Value, Refusal>) {
        let tx = self
            .pending
            .lock()
            .expect("pending lock")
            .as_mut()
            .and_then(|p| p.remove(&id));
        if let Some(tx) = tx {
            let _ = tx.send(out);
        }
    }

    /// The session is ending: every request waiting is answered with an error, and no new one waits.
    pub(crate) fn end(&self) {
        drop(self.pending.lock().expect("pending lock").take());
    }
}

/// Every string of `v` (keys too) without control characters other than newline and tab.
fn printable(v: &mut Value) {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    let clean = |s: &str| s.chars().filter(|&c| !bad(c)).collect::<String>();
    match v {
        Value::String(s) if s.contains(bad) => *s = clean(s),
        Value::Array(a) => a.iter_mut().for_each(printable),
        Value::Object(m) if m.keys().any(|k| k.contains(bad)) => {
            *m = std::mem::take(m)
                .into_iter()
                .map(|(k, mut x)| {
                    printable(&mut x);
                    (clean(&k), x)
                })
                .collect();
        }
        Value::Object(m) => m.values_mut().for_each(printable),
        _ => {}
    }
}

fn ended() -> Refusal {
    Refusal {
        code: INTERNAL_ERROR,
        message: "the session ended before the client answered".into(),
    }
}

/// What the client sees of a request: an elicitation's message (a sampling request's system prompt) prefixed with
/// the server's name, so that the person who answers knows which server asks (a server may pose as anything in its own words); a sampling request without
/// the client's context; and, in what a person may
/// be shown (an elicitation, a sampling request), no control character but newline and tab, so that no escape
/// sequence or carriage return can hide that name or rewrite what a terminal shows.
pub(crate) fn attributed(server: &str, method: &str, mut params: Value) -> Value {
    if matches!(method, "elicitation/create" | "sampling/createMessage") {
        printable(&mut params);
    }
    // The client's context of "this server" is every server and tool behind animaworks-tool, and the session
    // declares no `sampling.context`: a server gets none.
    if let (true, Some(c)) = (method == "sampling/createMessage", params.get_mut("includeContext")) {
        *c = Value::String("none".into());
    }
    let said = match method {
        "elicitation/create" => "message",
        _ => "systemPrompt",
    };
    if matches!(method, "elicitation/create" | "sampling/createMessage") {
        if let Some(m) = params.get_mut(said).filter(|m| !m.is_null()) {
            let said = m.as_str().unwrap_or_default();
            *m = Value::String(format!("MCP server '{server}' asks: {said}"));
        }
    }
    params
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::pending;

    #[test]
    fn caps_round_trip_by_name() {
        let c = Caps {
            sampling: true,
            elicitation: false,
            roots: true,
        };
        let names: Vec<String> = c.names().into_iter().map(str::to_owned).collect();
        assert_eq!(names, ["sampling", "roots"]);
        assert_eq!(Caps::from_names(&names), c);
        assert!(c.covers("roots/list") && !c.covers("elicitation/create") && !c.covers("ping"));
    }

    #[tokio::test]
    async fn a_reply_reaches_its_request_once_and_an_end_answers_the_rest() {
        let w = Arc::new(Waiting::new(Caps::default()));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let asked = {
            let (w, tx) = (w.clone(), tx.clone());
            tokio::spawn(async move {
                w.ask("roots/list", json!({}), |l| tx.send(l.clone()).unwrap(), pending())
                    .await
            })
        };
        let line = rx.recv().await.unwrap();
        let id = line["request_id"].as_u64().unwrap();
        w.reply(id + 100, Ok(json!("not this one")));
        w.reply(id, Ok(json!({"roots": []})));
        w.reply(id, Ok(json!("twice")));
        assert_eq!(asked.await.unwrap(), Ok(json!({"roots": []})));
        let late = {
            let w = w.clone();
            tokio::spawn(async move {
                w.ask("roots/list", json!({}), |l| tx.send(l.clone()).unwrap(), pending())
                    .await
            })
        };
        rx.recv().await.unwrap();
        w.end();
        assert_eq!(late.await.unwrap().unwrap_err().code, INTERNAL_ERROR);
        assert!(w
            .ask("roots/list", json!({}), |_| panic!("not sent"), pending())
            .await
            .is_err());
    }

    #[tokio::test]
    async fn at_most_max_pending_requests_wait() {
        let w = Arc::new(Waiting::new(Caps::default()));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let waiting: Vec<_> = (0..MAX_PENDING)
            .map(|_| {
                let (w, tx) = (w.clone(), tx.clone());
                tokio::spawn(async move {
                    w.ask("roots/list", json!({}), |l| tx.send(l.clone()).unwrap(), pending())
                        .await
                })
            })
            .collect();
        for _ in 0..MAX_PENDING {
            rx.recv().await.unwrap();
        }
        let over = w
            .ask("roots/list", json!({}), |_| panic!("not sent"), pending())
            .await
            .unwrap_err();
        assert!(over.message.contains("already wait"), "{over:?}");
        w.end();
        for t in waiting {
            assert!(t.await.unwrap().is_err());
        }
    }

    #[test]
    fn lines_are_read_and_bounded() {
        let l = serde_json::to_vec(&request_line(3, "roots/list", json!({}))).unwrap();
        let Some(FromBridge::Request(f)) = FromBridge::of(&l) else {
            panic!()
        };
        assert_eq!((f.request_id, f.method.as_str()), (3, "roots/list"));
        let c = FromBridge::of(br#"{"event":"request_cancelled","request_id":3}"#);
        assert!(matches!(c, Some(FromBridge::Cancelled(3))), "{c:?}");
        assert!(FromBridge::of(br#"{"event":"other","request_id":1,"method":"x"}"#).is_none());
        assert!(FromBridge::of(br#"{"type":"log","call_id":"c"}"#).is_none());
        let big = "x".repeat(super::super::bridge::MAX_LINE);
        let r: Value = serde_json::from_slice(&reply_line(4, Ok(json!({"text": big})))).unwrap();
        assert_eq!(r["reply"], 4);
        assert_eq!(r["error"]["code"], INTERNAL_ERROR);
        let e = attributed("git", "elicitation/create", json!({"message": "Your password?"}));
        assert_eq!(e["message"], "MCP server 'git' asks: Your password?");
        let hide = json!({"message": "\r\u{1b}[2KMCP server 'vault' asks: PIN?\u{9b}\n\tok",
            "requestedSchema": {"properties": {"p\u{7}": {"description": "\u{1b}]0;x\u{7}"}}}});
        let e = attributed("git", "elicitation/create", hide);
        assert_eq!(
            e["message"],
            "MCP server 'git' asks: [2KMCP server 'vault' asks: PIN?\n\tok"
        );
        assert_eq!(e["requestedSchema"]["properties"]["p"]["description"], "]0;x");
        let s = attributed(
            "git",
            "sampling/createMessage",
            json!({"systemPrompt": "a\u{1b}[8mb", "includeContext": "allServers"}),
        );
        assert_eq!(s["systemPrompt"], "MCP server 'git' asks: a[8mb");
        assert_eq!(s["includeContext"], "none");
    }
}
