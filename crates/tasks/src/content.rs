//! A task's content blocks (protocol.md §5.2): kept in the task beside its result, so that reading the task back
//! gives what the call gave (an MCP client the blocks, a person their descriptions). What is kept is bounded
//! ([`kept`]); what is read back is checked again ([`read_back`]), since a task file or row may be forged.

use awt_protocol::content::{describe, MAX_BLOCKS};
use serde_json::{json, Value};

/// The most bytes of content blocks (as JSON) a task keeps: the default output cap, the most a direct call prints
/// with no `--max-output`. A task given a larger cap still keeps no more, so that a task file stays readable.
pub const MAX_KEPT: usize = awt_core::limits::DEFAULT_MAX_OUTPUT as usize;

/// The blocks as a task keeps them: in order, each whole while they fit in `max` bytes; a block past that is
/// replaced by a text block that describes it and says why it was left out.
pub fn kept(blocks: Vec<Value>, max: usize) -> Vec<Value> {
    let mut used = 0usize;
    blocks
        .into_iter()
        .map(|b| {
            let n = serde_json::to_string(&b).map_or(usize::MAX, |s| s.len());
            if used.saturating_add(n) <= max {
                used += n;
                return b;
            }
            let what = describe(&b).unwrap_or_else(|| format!("[text, {}]", awt_protocol::content::size(n)));
            json!({"type": "text", "text": format!(
                "{what} left out of the task: a task keeps at most {} of content blocks; the call run in \
                 the foreground gives it whole", awt_protocol::content::size(max))})
        })
        .collect()
}

/// A task's blocks as they may be handed on: at most [`MAX_BLOCKS`], and each one well formed (a broken one,
/// which only a forged task holds, becomes a text block saying so).
pub fn read_back(blocks: &[Value]) -> Vec<Value> {
    blocks[..blocks.len().min(MAX_BLOCKS)]
        .iter()
        .map(|b| match awt_protocol::content::check(std::slice::from_ref(b)) {
            Ok(()) => b.clone(),
            Err(why) => json!({"type": "text", "text": format!("[a block left out: {why}]")}),
        })
        .collect()
}

/// The blocks as one text: a text block's text, any other block's description (`[image/png, 12 KB]`).
pub fn as_text(blocks: &[Value]) -> String {
    blocks
        .iter()
        .map(|b| describe(b).unwrap_or_else(|| b.get("text").and_then(Value::as_str).unwrap_or_default().to_owned()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_past_the_bound_are_described_and_left_out() {
        let img = |n: usize| json!({"type": "image", "data": "A".repeat(n), "mimeType": "image/png"});
        let blocks = vec![json!({"type": "text", "text": "pics"}), img(4000), img(8)];
        assert_eq!(kept(blocks.clone(), 1 << 20), blocks, "all fit");
        let k = kept(blocks.clone(), 1000);
        assert_eq!(k[0], blocks[0]);
        let said = k[1]["text"].as_str().unwrap();
        assert!(said.starts_with("[image/png, 3 KB] left out of the task"), "{said}");
        assert!(said.contains("at most 1000 B"), "{said}");
        assert_eq!(k[2], blocks[2], "a later block that fits is kept");
        assert!(serde_json::to_string(&k).unwrap().len() < 1000 + 400);
        assert_eq!(as_text(&blocks[..2]), "pics\n[image/png, 3 KB]");
    }

    #[test]
    fn a_forged_block_is_not_handed_on() {
        let forged = vec![json!({"type": "image", "data": "!!", "mimeType": "image/png"}); MAX_BLOCKS + 5];
        let r = read_back(&forged);
        assert_eq!(r.len(), MAX_BLOCKS);
        assert!(r[0]["text"].as_str().unwrap().contains("not base64"), "{}", r[0]);
    }
}
