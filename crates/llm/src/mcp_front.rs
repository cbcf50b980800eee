//! The line framing in front of the MCP session: every line the client sends gets an answer or reaches the
//! session. A line over [`lines::MAX_LINE`] (read to its end, never kept), a line that is not UTF-8 and a line
//! that is not JSON are answered here with a JSON-RPC error naming the fault (`-32600` for the first, `-32700`
//! for the others; `id` is the request's when it can be read, else `null`), and the server goes on. Every other
//! line is passed to rmcp unchanged, and rmcp's lines and these answers reach stdout whole, one at a time.
//!
//! An [`Intercept`] may answer some requests itself (MCP tasks, which rmcp does not implement in 2025-11-25's
//! shape) and amend rmcp's answers to others (`initialize`, `tools/list`). Only those lines are parsed twice; the
//! rest cost what they did.

use crate::lines::{self, Line};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// An answer made outside the session.
pub type Answer = Pin<Box<dyn Future<Output = Value> + Send>>;

/// Requests answered in front of the session, and answers of the session amended on their way out.
pub trait Intercept: Send + Sync + 'static {
    /// Is a request of `method` (with a `params.task` or not) answered here?
    fn takes(&self, method: &str, task: bool) -> bool;
    /// The whole answer line's value (`result` or `error`) of a request taken. `out` sends notifications.
    fn answer(&self, method: &str, id: Value, params: Value, out: mpsc::Sender<Vec<u8>>) -> Answer;
    /// Does the session's answer to `method` need [`Intercept::amend`]?
    fn amends(&self, method: &str) -> bool;
    fn amend(&self, method: &str, answer: &mut Value);
    /// The client's input has ended: answers still waiting and watchers must end, so that stdout can close.
    fn input_ended(&self);
}

/// What the framing reads of a request line to route it: serde skips the rest unparsed.
#[derive(serde::Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    params: Option<PeekParams>,
}

#[derive(serde::Deserialize)]
struct PeekParams {
    #[serde(default)]
    task: Option<serde::de::IgnoredAny>,
}

/// A JSON line for the client.
pub fn line(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    b
}

/// The pipes rmcp reads and writes, and the task that writes stdout (it ends once rmcp has closed its side).
pub struct Front {
    pub to_session: DuplexStream,
    pub from_session: DuplexStream,
    pub writer: JoinHandle<()>,
}

/// Start the framing between `input`/`output` (the process's stdin/stdout) and the session.
pub fn start<R, W>(input: R, output: W, max_line: usize, hook: Option<Arc<dyn Intercept>>) -> Front
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (session_in, mut feed) = tokio::io::duplex(1 << 20);
    let (session_out, drain) = tokio::io::duplex(1 << 20);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);

    let answers = tx.clone();
    // Request ids whose answers the hook amends, with their method.
    let amend: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let amend_in = amend.clone();
    let hook_in = hook.clone();
    tokio::spawn(async move {
        let mut r = tokio::io::BufReader::with_capacity(64 * 1024, input);
        loop {
            let line = match lines::next(&mut r, max_line).await {
                Ok(Some(l)) => l,
                Ok(None) | Err(_) => break,
            };
            let fault = match line {
                Line::TooLong(n) => Some(error(
                    Value::Null,
                    -32600,
                    format!(
                        "request line of {n} bytes is over this server's bound of {max_line} bytes; it was dropped"
                    ),
                )),
                Line::Bytes(b) => match check(&b) {
                    Ok(routed) => {
                        if b.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        if let Some(h) = &hook_in {
                            if let Some((method, id, task)) = routed {
                                if h.takes(&method, task) {
                                    if let Ok(req) = serde_json::from_slice::<Value>(&b) {
                                        let params = req.get("params").cloned().unwrap_or(Value::Null);
                                        let fut = h.answer(&method, id.clone(), params, answers.clone());
                                        let out = answers.clone();
                                        tokio::spawn(async move {
                                            let mut v = fut.await;
                                            v["jsonrpc"] = json!("2.0");
                                            v["id"] = id;
                                            let _ = out.send(self::line(&v)).await;
                                        });
                                    }
                                    continue;
                                }
                                if h.amends(&method) && !id.is_null() {
                                    amend_in.lock().expect("amend lock").insert(id.to_string(), method);
                                }
                            }
                        }
                        let mut b = b;
                        b.push(b'\n');
                        if feed.write_all(&b).await.is_err() {
                            break;
                        }
                        None
                    }
                    Err(fault) => Some(fault),
                },
            };
            if let Some(f) = fault {
                if answers.send(f).await.is_err() {
                    break;
                }
            }
        }
        // End of input: the session sees it and ends.
        let _ = feed.shutdown().await;
        if let Some(h) = &hook_in {
            h.input_ended();
        }
    });

    tokio::spawn(async move {
        let mut r = tokio::io::BufReader::new(drain);
        loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = match &hook {
                        Some(h) if !amend.lock().expect("amend lock").is_empty() => amended(h.as_ref(), &amend, line),
                        _ => line,
                    };
                    if tx.send(line).await.is_err() {
                        break;
                    }
                }
            }
        }
    });

    let writer = tokio::spawn(async move {
        let mut out = output;
        while let Some(mut line) = rx.recv().await {
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
                break;
            }
        }
    });
    Front {
        to_session: session_in,
        from_session: session_out,
        writer,
    }
}

/// A session line, amended when it answers a request the hook asked for.
fn amended(h: &dyn Intercept, pending: &Mutex<HashMap<String, String>>, line: Vec<u8>) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(&line) else {
        return line;
    };
    if v.get("method").is_some() {
        return line;
    }
    let Some(id) = v.get("id").map(Value::to_string) else {
        return line;
    };
    let Some(method) = pending.lock().expect("amend lock").remove(&id) else {
        return line;
    };
    h.amend(&method, &mut v);
    self::line(&v)
}

/// The error answer of a line that cannot reach the session, or else the request's method, id (`null` for a
/// notification) and whether it has a `params.task` (`None` when the line is JSON but no request object).
fn check(b: &[u8]) -> Result<Option<(String, Value, bool)>, Vec<u8>> {
    match std::str::from_utf8(b) {
        Err(e) => Err(error(
            id_of(&String::from_utf8_lossy(b)),
            -32700,
            format!(
                "Parse error: the line is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )),
        Ok(s) => match serde_json::from_str::<Peek>(s) {
            Ok(p) => {
                let task = p.params.is_some_and(|p| p.task.is_some());
                Ok(p.method.map(|m| (m.into_owned(), p.id.unwrap_or(Value::Null), task)))
            }
            Err(_) => match serde_json::from_str::<serde::de::IgnoredAny>(s) {
                Ok(_) => Ok(None),
                Err(e) => Err(error(
                    Value::Null,
                    -32700,
                    format!("Parse error: the line is not JSON ({e})"),
                )),
            },
        },
    }
}

fn id_of(text: &str) -> Value {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .filter(|id| id.is_string() || id.is_number())
        .unwrap_or(Value::Null)
}

fn error(id: Value, code: i64, message: String) -> Vec<u8> {
    let mut b = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
        .unwrap_or_default();
    b.push(b'\n');
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_named() {
        assert_eq!(
            check(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap(),
            Some(("ping".to_owned(), json!(1), false))
        );
        assert_eq!(
            check(br#"{"id":"a","method":"tools/call","params":{"name":"x","task":{"ttl":5}}}"#).unwrap(),
            Some(("tools/call".to_owned(), json!("a"), true))
        );
        assert_eq!(check(b"[1, 2]").unwrap(), None);
        let e: Value = serde_json::from_slice(&check(b"not json").unwrap_err()).unwrap();
        assert_eq!(e["error"]["code"], -32700);
        assert_eq!(e["id"], Value::Null);
        let e: Value = serde_json::from_slice(&check(b"{\"id\":7,\"x\":\"\xff\"}").unwrap_err()).unwrap();
        assert_eq!(e["error"]["code"], -32700);
        assert_eq!(e["id"], 7);
        assert!(e["error"]["message"].as_str().unwrap().contains("not UTF-8"));
    }
}
