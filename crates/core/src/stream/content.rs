//! The content blocks of a call's final `result` event (protocol.md §5.2), as a front door receives them: the
//! pipeline checked them before the call succeeded ([`super::interpret`]) and masked every string in them on the
//! way ([`crate::call`]'s masking observer); [`Catch`] keeps them for the front door, and [`delivered`] makes sure
//! that masking did not leave a broken block behind.

use super::Observer;
use crate::policy::Masker;
use awt_protocol::Event;
use serde_json::{json, Value};

/// The blocks as they may be sent on: a block that masking broke (a secret inside base64 data) is replaced by a
/// text block that says so, never sent broken.
pub fn delivered(blocks: &[Value]) -> Vec<Value> {
    blocks
        .iter()
        .map(|b| match awt_protocol::content::check(std::slice::from_ref(b)) {
            Ok(()) => b.clone(),
            Err(_) => left_out(b),
        })
        .collect()
}

/// The text block sent in place of a block that held a secret.
fn left_out(b: &Value) -> Value {
    json!({"type": "text", "text": format!(
        "[a {} block left out: it held a secret, which was masked]",
        b.get("type").and_then(Value::as_str).unwrap_or("content"))})
}

/// `blocks` with each block whose base64 (an image's or audio's `data`, a resource's `blob`) decodes to bytes that
/// hold a secret replaced as [`delivered`] replaces a broken one; `None` when no block does. Masking strings
/// cannot see a secret once encoded, and `--save-content` or a client would decode it.
pub fn without_encoded_secrets(blocks: &[Value], masker: &Masker) -> Option<Vec<Value>> {
    let holds = |b: &Value| {
        let b64 = match b.get("type").and_then(Value::as_str) {
            Some("image" | "audio") => b.get("data"),
            Some("resource") => b.get("resource").and_then(|r| r.get("blob")),
            _ => None,
        };
        b64.and_then(Value::as_str)
            .and_then(awt_protocol::content::decode_base64)
            .is_some_and(|bytes| masker.found_in(&bytes))
    };
    if masker.is_empty() || !blocks.iter().any(holds) {
        return None;
    }
    Some(
        blocks
            .iter()
            .map(|b| if holds(b) { left_out(b) } else { b.clone() })
            .collect(),
    )
}

/// Passes every event on, and keeps the content of the final `result` event.
pub struct Catch<'a> {
    inner: &'a mut dyn Observer,
    content: Option<Vec<Value>>,
}

impl<'a> Catch<'a> {
    pub fn new(inner: &'a mut dyn Observer) -> Self {
        Catch { inner, content: None }
    }

    /// The result's content blocks, when it had any (use them only when the call succeeded).
    pub fn content(self) -> Option<Vec<Value>> {
        self.content
    }
}

impl Observer for Catch<'_> {
    fn event(&mut self, event: &Event, raw: &[u8]) {
        if let Event::Result { content: Some(c), .. } = event {
            self.content = Some(delivered(c));
        }
        self.inner.event(event, raw);
    }
    fn unknown(&mut self, raw: &[u8]) {
        self.inner.unknown(raw);
    }
    fn stderr(&mut self, chunk: &[u8]) {
        self.inner.stderr(chunk);
    }
    fn flush(&mut self) {
        self.inner.flush();
    }
}
