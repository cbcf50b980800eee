//! A result's content blocks (protocol.md §5.2) as text for a person or an LLM (the CLI, `use-tool`): a text
//! block is its text; any other block a short description (`[image/png, 12 KB]`), never its base64; with a
//! folder to save into (`--save-content DIR`), the block's bytes are written to a new file there, named in the text.

use awt_protocol::content::{describe, payload};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The blocks as lines of text, each non-text block described (and saved under `save`, when given).
pub fn text(blocks: &[Value], save: Option<&Path>) -> String {
    lines(blocks, save).join("\n")
}

/// [`text`], a string for each block.
pub fn lines(blocks: &[Value], save: Option<&Path>) -> Vec<String> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut lines = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let Some(d) = describe(b) else {
            lines.push(b.get("text").and_then(Value::as_str).unwrap_or_default().to_owned());
            continue;
        };
        let saved = match (save, payload(b)) {
            (Some(dir), Some((bytes, ext))) => match write_new(dir, &format!("content-{stamp}-{i}"), &ext, &bytes) {
                Ok(p) => format!(" saved to {}", p.display()),
                Err(e) => format!(" (not saved in {}: {e})", dir.display()),
            },
            _ => String::new(),
        };
        lines.push(format!("{d}{saved}"));
    }
    lines
}

/// The blocks as rmcp's content for an MCP client, each as it came; a block rmcp cannot represent is described
/// in a text block instead (the pipeline checked each block's shape: this is only a guard).
pub fn mcp_blocks(blocks: Vec<Value>) -> Vec<rmcp::model::ContentBlock> {
    blocks
        .into_iter()
        .map(|b| {
            let said = describe(&b).unwrap_or_default();
            serde_json::from_value(b).unwrap_or_else(|_| rmcp::model::ContentBlock::text(said))
        })
        .collect()
}

/// Write `bytes` to a file of `dir` that did not exist before (never over another file, nor through a link).
fn write_new(dir: &Path, stem: &str, ext: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    for n in 0..100 {
        let name = if n == 0 {
            format!("{stem}.{ext}")
        } else {
            format!("{stem}-{n}.{ext}")
        };
        let path = dir.join(name);
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut f) => {
                f.write_all(bytes)?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free file name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_and_descriptions_and_saved_files() {
        let blocks = [
            json!({"type": "text", "text": "a picture:"}),
            json!({"type": "image", "data": "aGk=", "mimeType": "image/png"}),
        ];
        assert_eq!(text(&blocks, None), "a picture:\n[image/png, 2 B]");
        let dir = std::env::temp_dir().join(format!("awt-content-{}", std::process::id()));
        let out = text(&blocks, Some(&dir));
        let path = out.rsplit("saved to ").next().unwrap();
        assert_eq!(std::fs::read(path).unwrap(), b"hi", "{out}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
