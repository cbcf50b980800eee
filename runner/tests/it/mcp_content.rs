//! Content blocks beside a result (protocol.md §5.2): the wire pinned by protocol.schema.json; a real MCP server
//! (runner/tests/mcp_servers/content_server.py, the official Python SDK) whose image, resource link and
//! annotations reach the official TypeScript SDK client through our `mcp` as they left the server; the command
//! line and `use-tool` describe an image instead of printing its base64, and save it on request; a secret in a
//! text block is masked; an oversize image and a broken block are refused with a clear error.

use crate::mcp_servers::python;
use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_servers/content_server.py");
const SECRET: &str = "ghp_contentSECRET12345678";

/// The content server declared as `pics`, its GITHUB_TOKEN credential granted (the caption carries it).
fn world() -> World {
    let w = World::new();
    let server = json!({"command": python(), "args": [SERVER],
        "credentials": [{"name": "github", "env": "GITHUB_TOKEN"}]});
    w.settings(&json!({"mcp_servers": {"pics": server}}).to_string());
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"github": {"api_key": SECRET}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"version": 1, "credentials": {"pics": ["github"]}}).to_string(),
    )
    .unwrap();
    w
}

fn schema_validator() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol.schema.json");
    let mut s: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    s["$ref"] = json!("#/$defs/event");
    jsonschema::validator_for(&s).unwrap()
}

#[test]
fn content_beside_a_result_is_pinned_by_the_schema_and_the_wire_types() {
    let v = schema_validator();
    let good = json!({"type": "result", "result": null, "content": [
        {"type": "text", "text": "t", "annotations": {"audience": ["user"]}},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "file:///a", "blob": "AA=="}},
        {"type": "resource_link", "uri": "file:///a", "name": "a"}]});
    assert!(v.is_valid(&good), "{good}");
    let ev: tool_sdk::protocol::Event = serde_json::from_value(good.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&ev).unwrap(),
        good,
        "the Rust wire type round-trips content"
    );
    for bad in [
        json!([{"type": "image", "data": "not base64", "mimeType": "image/png"}]),
        json!([{"type": "image", "data": "AAAA"}]),
        json!([{"type": "video"}]),
        json!([{"type": "resource", "resource": {"uri": "u", "text": "x", "blob": "AA=="}}]),
        json!([{"type": "resource_link", "uri": "u"}]),
        json!("text"),
    ] {
        let ev = json!({"type": "result", "result": null, "content": bad});
        assert!(!v.is_valid(&ev), "the schema accepts {ev}");
    }
}

/// A tool of any language may return blocks; a broken one is `bad_output` naming the block.
#[test]
fn any_tool_may_return_blocks_and_a_broken_block_is_bad_output() {
    let w = World::new();
    let schemas = r#"{"protocol": 1, "events": true, "actions": [{"name": "good"}, {"name": "broken"}]}"#;
    let body = r#"case "$req" in
  *'"name":"blocks_good"'*) echo '{"type":"result","result":"a dot","content":[{"type":"text","text":"a dot"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}' ;;
  *) echo '{"type":"result","result":null,"content":[{"type":"text","text":"x"},{"type":"image","data":"!!","mimeType":"image/png"}]}' ;;
esac"#;
    w.tool(&w.common(), "blocks.sh", &bash_tool(schemas, body));
    let o = w.run(&["blocks", "good"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "a dot\n[image/png, 8 B]\n", "described, not base64");
    let o = w.run(&["call", "blocks", "broken"]);
    assert_eq!(code(&o), 10, "{}", stdout(&o));
    let e = json(&o);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("content block 1: the \"data\" of a \"image\" block is not base64"),
        "{e}"
    );
    let got = mcp_session(
        &w,
        &[json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"blocks_good","arguments":{}}})],
    );
    assert_eq!(
        got[&2]["result"]["content"],
        json!([{"type":"text","text":"a dot"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]),
        "{}",
        got[&2]
    );
}

fn ts_client() -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client_ts");
    let has_node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let installed = dir
        .join("node_modules/@modelcontextprotocol/sdk/package.json")
        .is_file();
    if has_node && installed {
        return Some(dir.join("content.mjs"));
    }
    let why = if has_node {
        "the MCP TypeScript SDK is not installed: (cd runner/tests/mcp_client_ts && npm ci) or ./test.sh"
    } else {
        "node is not on PATH"
    };
    assert!(std::env::var("CI").map_or(true, |v| v != "true"), "CI=true: {why}");
    awt_sys::skipped!("{why}");
    None
}

fn ts_call(w: &World, script: &Path, tool: &str, args: Value) -> Value {
    let mut c = w.cmd();
    let prog = c.get_program().to_owned();
    let mut node = Command::new("node");
    node.arg(script).arg(prog).arg(tool).arg(args.to_string()).env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            node.env(k, v);
        }
    }
    c.stdin(std::process::Stdio::null());
    let o = node.output().unwrap();
    assert!(o.status.success(), "client failed:\n{}\n{}", stdout(&o), stderr(&o));
    json(&o)
}

#[test]
fn an_image_from_a_real_server_reaches_the_typescript_client_as_an_image_block() {
    let Some(script) = ts_client() else { return };
    let w = world();
    let v = ts_call(&w, &script, "pics_picture", json!({"width": 4000}));
    assert_eq!(v["errors"], json!([]), "{v}");
    let content = v["result"]["content"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(content.len(), 3, "{v}");
    let caption = content[0]["text"].as_str().unwrap();
    assert!(
        caption.starts_with("caption ") && !caption.contains("ghp_"),
        "masked: {caption}"
    );
    let img = &content[1];
    assert_eq!(img["type"], "image", "{img}");
    assert_eq!(img["mimeType"], "image/png");
    assert_eq!(img["annotations"], json!({"audience": ["user"], "priority": 0.5}));
    let data = awt_protocol_b64(img["data"].as_str().unwrap());
    assert!(data.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG arrives whole");
    assert!(data.len() > 4000 * 3, "{}", data.len());
    assert_eq!(
        content[2],
        json!({"type": "resource_link", "uri": "file:///tmp/red.png", "name": "red.png", "mimeType": "image/png"})
    );
    assert_ne!(v["result"]["isError"], true, "{v}");
    // The server's titles, not `<tool>.<action>`.
    let title = |name: &str| {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["title"].clone())
    };
    assert_eq!(title("pics_picture"), Some(json!("Draw a picture")), "{}", v["tools"]);
    let long = "pics_a_tool_with_a_name_long_enough_to_pass_a_clients_limit_with_its_prefix";
    assert_eq!(title(long), Some(json!("Long name")), "{}", v["tools"]);
}

fn holds(bytes: &[u8], what: &str) -> bool {
    bytes.windows(what.len()).any(|w| w == what.as_bytes())
}

fn awt_protocol_b64(s: &str) -> Vec<u8> {
    tool_sdk::protocol::content::decode_base64(s).expect("base64")
}

#[test]
fn the_cli_and_use_tool_describe_an_image_save_it_on_request_and_mask_the_caption() {
    let w = world();
    let o = w.run(&["pics", "picture", "--width", "4000"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("[image/png, 12 KB]"), "{out}");
    assert!(out.contains("[resource_link file:///tmp/red.png]"), "{out}");
    assert!(out.starts_with("caption ") && !out.contains("ghp_"), "masked: {out}");
    assert!(!out.contains("iVBOR"), "no base64: {out}");
    let dir = w.tmp.path().join("saved");
    let o = w.run(&["pics", "picture", "--save-content", dir.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let path = out
        .lines()
        .find_map(|l| l.strip_prefix("[image/png, 12 KB] saved to "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(std::fs::read(path).unwrap().starts_with(b"\x89PNG"), "{path}");

    let o = w.feed(
        &["use-tool"],
        &json!({"tool_name": "pics", "action": "picture", "args": {}}).to_string(),
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("[image/png, 12 KB]") && !text.contains("iVBOR") && !text.contains("ghp_"),
        "{text}"
    );
}

/// A secret inside a block's base64 (an image's `data`, a resource's `blob`) is not seen by masking strings: such
/// a block is left out, said so in its place, and never saved; a block without one beside it is kept.
#[test]
fn a_secret_encoded_in_a_blocks_base64_is_left_out_and_never_saved() {
    let w = world();
    let dir = w.tmp.path().join("saved");
    let o = w.run(&["pics", "encoded", "--save-content", dir.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("[a image block left out: it held a secret"), "{out}");
    assert!(out.contains("[a resource block left out: it held a secret"), "{out}");
    assert_eq!(out.matches("saved to ").count(), 1, "only the plain image is saved: {out}");
    for f in std::fs::read_dir(&dir).unwrap() {
        let bytes = std::fs::read(f.unwrap().path()).unwrap();
        assert!(!holds(&bytes, SECRET), "a saved file holds the secret");
    }

    let o = w.run(&["call", "pics", "encoded", "--events"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let events = stdout(&o);
    let result: Value = serde_json::from_str(events.lines().last().unwrap()).unwrap();
    let blocks = result["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 3, "{result}");
    for b in blocks {
        for field in [&b["data"], &b["resource"]["blob"]] {
            if let Some(b64) = field.as_str() {
                let bytes = awt_protocol_b64(b64);
                assert!(!holds(&bytes, SECRET), "{b}");
            }
        }
    }
    assert_eq!(blocks[2]["type"], "image", "the plain image is kept whole: {result}");
}

/// An image past the output cap (protocol.md §5.3) ends the call `output_capped`, naming the file and the cap;
/// no cut block is sent.
#[test]
fn an_image_past_the_output_cap_is_refused_whole_with_a_clear_error() {
    let w = world();
    let o = w.run(&["call", "pics", "picture", "--width", "100000", "--max-output", "65536"]);
    assert_eq!(code(&o), 12, "{}", stdout(&o));
    let e = json(&o);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("passed the cap of 65536 bytes"), "{msg}");
    assert!(!stdout(&o).contains("iVBOR"), "no part of the image is printed");
}

/// A server tool whose schema name would pass Claude Code's 64 characters (`mcp__animaworks__<name>`) is warned
/// of by `doctor`; `"short_names": true` offers it under a stable shorter name that calls the same MCP tool.
#[test]
fn a_long_tool_name_is_warned_by_doctor_and_shortened_stably_on_request() {
    let long = "a_tool_with_a_name_long_enough_to_pass_a_clients_limit_with_its_prefix";
    let w = world();
    let o = w.run(&["doctor"]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        text.contains(&format!("mcp__animaworks__pics_{long}"))
            && text.contains("past its limit of 64")
            && text.contains("\"short_names\": true"),
        "{text}"
    );
    let mut s: Value =
        serde_json::from_str(&std::fs::read_to_string(w.data.join("animaworks-tool.json")).unwrap()).unwrap();
    s["mcp_servers"]["pics"]["short_names"] = json!(true);
    w.settings(&s.to_string());
    let listed = |w: &World| -> Vec<String> {
        let o = w.run(&["schemas", "--format", "mcp"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v = json(&o);
        let tools = v
            .as_array()
            .cloned()
            .or_else(|| v["tools"].as_array().cloned())
            .unwrap_or_else(|| panic!("{v}"));
        tools
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    };
    let names = listed(&w);
    let short: Vec<&String> = names.iter().filter(|n| n.starts_with("pics_a_tool_with")).collect();
    assert_eq!(short.len(), 1, "{names:?}");
    let short = short[0].clone();
    assert!(short.len() + "mcp__animaworks__".len() <= 64, "{short}");
    assert_eq!(listed(&w), names, "the same names on every listing");
    let o = w.run(&["pics", short.strip_prefix("pics_").unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        json(&o),
        json!({"result": "ok"}),
        "the Python SDK's structured output of a str"
    );
    let o = w.run(&["doctor"]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!text.contains("past its limit of 64"), "{text}");
}

/// `check` warns of any tool's schema name that Claude Code would refuse behind its prefix.
#[test]
fn check_warns_of_a_schema_name_too_long_for_claude_code() {
    let w = World::new();
    let action = "an_action_whose_name_is_long_enough_to_pass_the_limit";
    let schemas = json!({"protocol": 1, "actions": [{"name": action, "description": "d"}, {"name": "short", "description": "d"}]});
    let path = w.tool(&w.common(), "lng.sh", &bash_tool(&schemas.to_string(), "echo ok"));
    let o = w.run(&["check", path.to_str().unwrap(), "--json"]);
    let report = json(&o);
    let warned: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"))
        .iter()
        .filter(|f| f["level"] == "warn" && f["message"].as_str().is_some_and(|m| m.contains("Claude Code")))
        .collect();
    assert_eq!(warned.len(), 1, "{report}");
    let m = warned[0]["message"].as_str().unwrap();
    assert!(
        m.contains(&format!("mcp__animaworks__lng_{action}")) && m.contains("64"),
        "{m}"
    );
}
