//! The line framing in front of the MCP session: every line the client sends gets an answer or reaches the
//! session. A line over [`lines::MAX_LINE`] (read to its end, never kept), a line that is not UTF-8 and a line
//! that is not JSON are answered here with a JSON-RPC error naming the fault (`-32600` for the first, `-32700`
//! for the others; `id` is the request's when it can be read, else `null`), and the server goes on. Every other
//! line is passed to rmcp unchanged, and rmcp's lines and these answers reach stdout whole, one at a time.

use crate::llm::lines::{self, Line};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The pipes rmcp reads and writes, and the task that writes stdout (it ends once rmcp has closed its side).
pub struct Front {
    pub to_session: DuplexStream,
    pub from_session: DuplexStream,
    pub writer: JoinHandle<()>,
}

/// Start the framing between `input`/`output` (the process's stdin/stdout) and the session.
pub fn start<R, W>(input: R, output: W, max_line: usize) -> Front
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let (session_in, mut feed) = tokio::io::duplex(1 << 20);
    let (session_out, drain) = tokio::io::duplex(1 << 20);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);

    let answers = tx.clone();
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
                    format!("request line of {n} bytes is over this server's bound of {max_line} bytes; it was dropped"),
                )),
                Line::Bytes(b) => match check(&b) {
                    None => {
                        if b.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        let mut b = b;
                        b.push(b'\n');
                        if feed.write_all(&b).await.is_err() {
                            break;
                        }
                        None
                    }
                    fault => fault,
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
    });

    tokio::spawn(async move {
        let mut r = tokio::io::BufReader::new(drain);
        loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
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

/// The error answer of a line that cannot reach the session, or `None` when it may.
fn check(b: &[u8]) -> Option<Vec<u8>> {
    match std::str::from_utf8(b) {
        Err(e) => Some(error(
            id_of(&String::from_utf8_lossy(b)),
            -32700,
            format!("Parse error: the line is not UTF-8 (invalid byte at offset {})", e.valid_up_to()),
        )),
        Ok(s) => match serde_json::from_str::<serde::de::IgnoredAny>(s) {
            Ok(_) => None,
            Err(e) => Some(error(Value::Null, -32700, format!("Parse error: the line is not JSON ({e})"))),
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
        assert!(check(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        let e: Value = serde_json::from_slice(&check(b"not json").unwrap()).unwrap();
        assert_eq!(e["error"]["code"], -32700);
        assert_eq!(e["id"], Value::Null);
        let e: Value = serde_json::from_slice(&check(b"{\"id\":7,\"x\":\"\xff\"}").unwrap()).unwrap();
        assert_eq!(e["error"]["code"], -32700);
        assert_eq!(e["id"], 7);
        assert!(e["error"]["message"].as_str().unwrap().contains("not UTF-8"));
    }
}
