//! A `tools/call` result as the bridge's final event (protocol.md §5.2): the value every caller gets, and the
//! content blocks an MCP client gets unchanged.

use serde_json::{json, Value};

/// The value of a successful result: `structuredContent` when present, else the text blocks joined (`null`
/// when there are none).
pub(super) fn value(result: &Value) -> Value {
    if let Some(s) = result.get("structuredContent") {
        return s.clone();
    }
    let texts: Vec<&str> = blocks(result)
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        Value::Null
    } else {
        json!(texts.join("\n"))
    }
}

/// The blocks to pass on as `content`: all of them, when any says more than its text (a block of another type,
/// or annotations); `None` when the value already says everything.
pub(super) fn passed(result: &Value) -> Option<Vec<Value>> {
    let blocks = blocks(result);
    let plain = |b: &Value| {
        b.get("type").and_then(Value::as_str) == Some("text")
            && b.as_object()
                .is_some_and(|o| o.keys().all(|k| k == "type" || k == "text"))
    };
    (!blocks.iter().all(plain)).then(|| blocks.to_vec())
}

fn blocks(result: &Value) -> &[Value] {
    result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}
