//! A result that carries content blocks (protocol.md §5.2) on the command line: the text blocks, and a short
//! description of every other block (`[image/png, 12 KB]`, its file when `--save-content DIR` saved it), never
//! its base64. A structured value is printed as JSON on stdout as ever, the descriptions then go to stderr.

use super::render;
use serde_json::Value;
use std::path::Path;

pub fn print(v: &Value, blocks: &[Value], save: Option<&Path>) {
    match v {
        Value::String(_) | Value::Null => render::print_result(&Value::String(awt_llm::content::text(blocks, save))),
        _ => {
            render::print_result(v);
            let others: Vec<Value> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) != Some("text"))
                .cloned()
                .collect();
            if !others.is_empty() {
                tell!("{}", super::term::clean(&awt_llm::content::text(&others, save)));
            }
        }
    }
}

/// With `--events`: the non-text blocks written to files in `dir`, each said on stderr (stdout is the stream).
pub fn tell_saved(blocks: &[Value], dir: &Path) {
    let others: Vec<Value> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) != Some("text"))
        .cloned()
        .collect();
    if !others.is_empty() {
        tell!("{}", super::term::clean(&awt_llm::content::text(&others, Some(dir))));
    }
}
