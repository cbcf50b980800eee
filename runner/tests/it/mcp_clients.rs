//! The MCP server driven by the official SDK clients, the TypeScript SDK (`tests/mcp_client_ts`, npm) and the
//! Python SDK (`tests/mcp_client/scenario.py`), through the same scenario: `tools/list` over two pages following
//! `nextCursor`, a call with progress, a call the client aborts (the tool's process group is gone afterwards),
//! invalid arguments and a gated refusal as `isError` results, `logging/setLevel` and a tool's `log` events as
//! `notifications/message`, and structured output with `format: date-time` the client validates.
//! Both scripts print one JSON object of what they saw; `check` holds both to the same assertions.

use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};

/// A tool `w`: greet (an output schema), steps (three progress events, then a result once the client has seen
/// them), hang (runs until ended; its pid goes to
/// hang.pid in its working directory, the anima dir), talk (log events at info and debug), purge (gated), stamp
/// (an output schema with `format: date-time` its result meets).
const W_TOOL: &str = r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol": 1, "events": true, "actions": [
 {"name": "greet", "description": "Say hello.", "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
  "output_schema": {"type": "object", "properties": {"greeting": {"type": "string"}}, "required": ["greeting"]}},
 {"name": "steps", "description": "Three progress steps."},
 {"name": "hang", "description": "Runs until ended."},
 {"name": "talk", "description": "Logs."},
 {"name": "purge", "description": "Deletes everything.", "profile": {"gated": true}},
 {"name": "stamp", "description": "A time.", "output_schema": {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}, "required": ["at"]}}
]}
JSON
exit 0; fi
req=$(cat)
case "$req" in
  *'"name":"w_greet"'*)
    who=$(echo "$req" | sed -E 's/.*"who":"([^"]*)".*/\1/')
    echo "{\"type\":\"result\",\"result\":{\"greeting\":\"hello, $who\"}}" ;;
  *'"name":"w_steps"'*)
    for i in 1 2 3; do echo "{\"type\":\"progress\",\"progress\":$i,\"total\":3,\"message\":\"step $i\"}"; done
    # The result waits until the client's progress callback has seen step 3 (it writes progress.seen): the TS
    # SDK drops progress that arrives with the response (typescript-sdk#2580), a race no server can avoid.
    for _ in $(seq 300); do [ -e progress.seen ] && break; sleep 0.1; done
    echo '{"type":"result","result":"done"}' ;;
  *'"name":"w_hang"'*)
    sleep 300 &
    echo $$ > hang.pid
    wait ;;
  *'"name":"w_talk"'*)
    echo '{"type":"log","level":"info","message":"hello log"}'
    echo '{"type":"log","level":"debug","message":"fine detail"}'
    echo '{"type":"result","result":"talked"}' ;;
  *'"name":"w_stamp"'*) echo '{"type":"result","result":{"at":"2026-12-01T10:00:00Z"}}' ;;
  *) echo '{"type":"result","result":null}' ;;
esac
"#;

/// 120 actions of a tool `many`, so that `tools/list` takes two pages of 100.
const MANY: usize = 120;

fn world() -> World {
    let w = World::new();
    w.tool(&w.common(), "w.sh", W_TOOL);
    let actions: Vec<Value> = (0..MANY).map(|i| json!({"name": format!("a{i:03}")})).collect();
    let schemas = json!({"protocol": 1, "actions": actions}).to_string();
    w.tool(
        &w.common(),
        "many.sh",
        &format!(
            "#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then cat <<'JSON'\n{schemas}\nJSON\nexit 0; fi\necho ok\n"
        ),
    );
    w
}

/// Runs `program args` with the world's environment (not the runner binary), stdin closed.
fn run_client(w: &World, program: &str, args: &[&str]) -> std::process::Output {
    let world_cmd = w.cmd();
    let mut c = Command::new(program);
    c.args(args).env_clear();
    for (k, v) in world_cmd.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    c.env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("MCP_TEST_PIDFILE", w.anima.join("hang.pid"))
        .env("MCP_TEST_PROGRESS_SEEN", w.anima.join("progress.seen"))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// What both clients must have seen.
fn check(client: &str, v: &Value) {
    // Two pages, the second reached through nextCursor; every action listed once.
    let pages = v["pages"].as_array().unwrap_or_else(|| panic!("{client}: {v}"));
    assert_eq!(pages.len(), 2, "{client}: page sizes {pages:?}");
    assert_eq!(pages[0], 100, "{client}: {pages:?}");
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "{client}: a tool listed twice: {names:?}");
    assert_eq!(
        names.iter().filter(|n| n.starts_with("many_a")).count(),
        MANY,
        "{client}"
    );
    for n in ["w_greet", "w_steps", "w_hang", "w_talk", "w_stamp"] {
        assert!(names.contains(&n), "{client}: {n} missing from {names:?}");
    }
    assert!(
        !names.contains(&"w_purge"),
        "{client}: a gated action without a grant is listed"
    );

    assert_eq!(
        v["greet"]["structuredContent"],
        json!({"greeting": "hello, Ada"}),
        "{client}"
    );
    assert_ne!(v["greet"]["isError"], true, "{client}");

    assert_eq!(v["steps"]["content"][0]["text"], "done", "{client}: {}", v["steps"]);
    // Numbers compared as numbers: JavaScript prints 1, Python 1.0.
    let progress: Vec<(f64, f64, &str)> = v["progress"]
        .as_array()
        .unwrap_or_else(|| panic!("{client}: {v}"))
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap(), p[2].as_str().unwrap()))
        .collect();
    assert_eq!(
        progress,
        [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")],
        "{client}"
    );

    // Invalid arguments and a gated refusal are results the client reads, not protocol errors.
    assert_eq!(v["invalid"]["raised"], false, "{client}: {}", v["invalid"]);
    assert_eq!(v["invalid"]["result"]["isError"], true, "{client}: {}", v["invalid"]);
    assert_eq!(
        v["invalid"]["result"]["_meta"]["animaworks-tool/error"]["pointer"], "/who",
        "{client}"
    );
    assert_eq!(v["gated"]["raised"], false, "{client}: {}", v["gated"]);
    assert_eq!(v["gated"]["result"]["isError"], true, "{client}: {}", v["gated"]);
    let e = &v["gated"]["result"]["_meta"]["animaworks-tool/error"];
    assert_eq!(e["code"], "permission_denied", "{client}: {e}");
    assert_eq!(e["key"], "w_purge", "{client}: {e}");

    // After logging/setLevel debug, both log events arrive with the tool's name as logger.
    let logs = v["logs"].as_array().unwrap();
    for want in [
        json!({"level": "info", "logger": "w", "data": "hello log"}),
        json!({"level": "debug", "logger": "w", "data": "fine detail"}),
    ] {
        assert!(logs.contains(&want), "{client}: {want} missing from {logs:?}");
    }

    // The client validated the date-time result against the output schema and accepted it.
    assert_eq!(v["stamp"]["raised"], false, "{client}: {}", v["stamp"]);
    assert_eq!(
        v["stamp"]["result"]["structuredContent"],
        json!({"at": "2026-12-01T10:00:00Z"}),
        "{client}"
    );
    assert_eq!(
        v["stamp_validated"], true,
        "{client}: the client held no output schema for w_stamp"
    );

    assert!(v["hang_pgid"].as_i64().unwrap_or(0) > 1, "{client}: {v}");
    assert_eq!(
        v["hang_group_gone"], true,
        "{client}: the aborted call's process group still runs"
    );
    assert_eq!(
        v["after_cancel"]["structuredContent"]["greeting"], "hello, again",
        "{client}"
    );
}

fn ts_client_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client_ts"))
}

/// Where test.sh installed the npm packages, or why the test cannot run. Without `node` there is nothing to run
/// (a skip); with `node` but no packages the test fails under CI=true, else it skips saying how to install them.
fn ts_client_ready() -> Option<&'static Path> {
    let dir = ts_client_dir();
    let has_node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let installed = dir
        .join("node_modules/@modelcontextprotocol/sdk/package.json")
        .is_file();
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if has_node && installed {
        return Some(dir);
    }
    let why = if has_node {
        "the MCP TypeScript SDK is not installed: (cd runner/tests/mcp_client_ts && npm ci) or ./test.sh"
    } else {
        "node is not on PATH"
    };
    assert!(!ci, "CI=true: {why}");
    awt_sys::skipped!("{why}");
    None
}

#[test]
fn mcp_server_with_the_typescript_sdk_client() {
    let Some(dir) = ts_client_ready() else { return };
    let w = world();
    let script = dir.join("scenario.mjs");
    let o = run_client(&w, "node", &[script.to_str().unwrap(), BIN]);
    assert!(o.status.success(), "client failed:\n{}\n{}", stdout(&o), stderr(&o));
    let v = json(&o);
    assert_eq!(v["sdk"], "1.32.2", "the pinned SDK version");
    check("typescript", &v);
    assert_eq!(v["client_errors"], json!([]), "the SDK reported protocol errors: {v}");
    assert_eq!(
        v["stamp_refuses_bad_date"], true,
        "the client's AJV asserts format: {v}"
    );
    assert!(
        v["hang_outcome"].as_str().is_some_and(|o| o.starts_with("rejected")),
        "the aborted call rejects in the client: {}",
        v["hang_outcome"]
    );
}

#[test]
fn mcp_server_with_the_python_sdk_client() {
    let has_mcp = Command::new("python3")
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_mcp,
        "the MCP Python SDK is needed: pip install -r runner/tests/mcp_client/requirements.txt (./test.sh does)"
    );
    let w = world();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client/scenario.py");
    let o = run_client(&w, "python3", &[script, BIN]);
    assert!(o.status.success(), "client failed:\n{}\n{}", stdout(&o), stderr(&o));
    let v = json(&o);
    assert_eq!(v["sdk"], "2.3.0", "the pinned SDK version");
    check("python", &v);
}
