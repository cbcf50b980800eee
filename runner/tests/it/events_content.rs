//! `--events` is the raw event stream for programs (docs/command-line.md): its final `result` line carries the
//! result's content blocks (protocol.md §5.2) whole, masked, as the tool sent them, and it is bounded as every
//! event line is: past the output cap the call ends `output_capped` and no part of the block is printed.
//! `--save-content` writes the blocks to files beside the stream and names them on stderr.

use crate::support::*;
use serde_json::json;

const SCHEMAS: &str = r#"{"protocol": 1, "events": true, "actions": [{"name": "pic",
  "input_schema": {"type": "object", "properties": {"kb": {"type": "integer"}}}}]}"#;

/// A 4-byte PNG header stand-in, or `kb` KiB of zeros, as an image block beside a text block.
const BODY: &str = r#"kb=$(echo "$req" | sed -nE 's/.*"kb":([0-9]+).*/\1/p')
data=iVBORw==
[ -n "$kb" ] && data=$(head -c $((kb * 1024)) /dev/zero | base64 -w0)
echo '{"type":"progress","progress":1}'
printf '{"type":"result","result":"a dot","content":[{"type":"text","text":"a dot"},{"type":"image","data":"%s","mimeType":"image/png"}]}\n' "$data""#;

#[test]
fn events_end_with_the_result_and_its_content_blocks_bounded_by_the_output_cap() {
    let w = World::new();
    w.tool(&w.common(), "pics.sh", &bash_tool(SCHEMAS, BODY));
    let o = w.run(&["pics", "pic", "--events"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let lines: Vec<serde_json::Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{}", stdout(&o));
    assert_eq!(
        lines[1],
        json!({"type": "result", "result": "a dot", "content": [{"type": "text", "text": "a dot"},
            {"type": "image", "data": "iVBORw==", "mimeType": "image/png"}]})
    );

    let dir = w.tmp.path().join("saved");
    let o = w.run(&["pics", "pic", "--events", "--save-content", dir.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    let path = err
        .lines()
        .find_map(|l| l.strip_prefix("[image/png, 4 B] saved to "))
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(std::fs::read(path).unwrap(), b"\x89PNG");
    assert!(
        stdout(&o).ends_with("\"mimeType\":\"image/png\"}]}\n"),
        "{}",
        stdout(&o)
    );

    let o = w.run(&["call", "pics", "pic", "--kb", "96", "--max-output", "65536", "--events"]);
    assert_eq!(code(&o), 12, "{}", stdout(&o));
    let out = stdout(&o);
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["code"], "output_capped", "{out}");
    assert!(!out.contains("AAAAAAAA"), "no part of the image is printed: {out}");
}
