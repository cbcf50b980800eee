//! LLMs as callers: `use-tool` (one-shot and `--serve`), `schemas` in every provider shape, and the MCP server
//! driven by the official MCP Python SDK.

use crate::support::*;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

/// An event-stream tool `t` with: greet (output schema, hints), steps (progress), fail (tool error), hang (runs
/// until ended; writes its pid to hang.pid in its working directory, the anima dir), purge (gated), big (a
/// 60,000-byte string), free (open additionalProperties: not strict).
const T_TOOL: &str = r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol": 1, "description": "A test tool.\nSecond line.", "events": true, "actions": [
 {"name": "greet", "description": "Say hello.", "input_schema": {"type": "object", "properties": {"who": {"type": "string"}, "loud": {"type": "boolean"}}, "required": ["who"]},
  "output_schema": {"type": "object", "properties": {"greeting": {"type": "string"}}},
  "profile": {"hints": {"read_only": true, "idempotent": true}}},
 {"name": "steps", "description": "Three progress steps."},
 {"name": "fail", "description": "Always fails."},
 {"name": "hang", "description": "Runs until ended."},
 {"name": "purge", "description": "Deletes everything.", "profile": {"gated": true, "hints": {"destructive": true}}},
 {"name": "big", "description": "A large result."},
 {"name": "free", "description": "Takes anything.", "input_schema": {"type": "object", "additionalProperties": true}}
]}
JSON
exit 0; fi
req=$(cat)
case "$req" in
  *'"name":"t_greet"'*)
    who=$(echo "$req" | sed -E 's/.*"who":"([^"]*)".*/\1/')
    echo "{\"type\":\"result\",\"result\":{\"greeting\":\"hello, $who\"}}" ;;
  *'"name":"t_steps"'*)
    for i in 1 2 3; do echo "{\"type\":\"progress\",\"progress\":$i,\"total\":3,\"message\":\"step $i\"}"; done
    echo '{"type":"result","result":"done"}' ;;
  *'"name":"t_fail"'*)
    echo '{"type":"error","code":"nope","message":"it broke","hint":"try again"}' ;;
  *'"name":"t_hang"'*)
    sleep 300 &
    echo $$ > hang.pid
    wait ;;
  *'"name":"t_big"'*)
    printf '{"type":"result","result":"'; head -c 60000 /dev/zero | tr '\0' 'x'; printf '"}\n' ;;
  *) echo '{"type":"result","result":null}' ;;
esac
"#;

const NEW_TOOL: &str = r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then echo '[{"name":"fresh_go","description":"New.","input_schema":{"type":"object"}}]'; exit 0; fi
cat >/dev/null; echo ok
"#;

fn world() -> World {
    let w = World::new();
    w.tool(&w.common(), "t.sh", T_TOOL);
    w
}

fn use_tool(w: &World, extra: &[&str], request: &Value) -> (Option<i32>, String) {
    let o = feed(w.cmd().arg("use-tool").args(extra), request.to_string().as_bytes());
    (o.status.code(), stdout(&o))
}

#[test]
fn use_tool_answers_like_animaworks() {
    let w = world();
    let (code, out) = use_tool(
        &w,
        &[],
        &json!({"tool_name": "t", "action": "greet", "args": {"who": "Ada"}}),
    );
    assert_eq!(code, Some(0));
    assert_eq!(out, "{\n  \"greeting\": \"hello, Ada\"\n}");
    let (_, out) = use_tool(&w, &[], &json!({"tool_name": "t", "action": "steps", "args": {}}));
    assert_eq!(out, "done");
    // OpenAI strict mode sends null for an optional property: dropped, so the call means what it meant.
    let (code, _) = use_tool(
        &w,
        &[],
        &json!({"tool_name": "t", "action": "greet", "args": {"who": "Bo", "loud": null}}),
    );
    assert_eq!(code, Some(0));

    let cases = [
        (
            json!({"tool_name": "t", "action": "greet", "args": {"who": 3}}),
            "InvalidArguments",
            "invalid_arguments",
        ),
        (
            json!({"tool_name": "t", "action": "purge", "args": {}}),
            "PermissionDenied",
            "permission_denied",
        ),
        // Unknown (and private) tools: "not permitted", as the original answers.
        (
            json!({"tool_name": "nope", "action": "x", "args": {}}),
            "PermissionDenied",
            "unknown_tool",
        ),
        (json!({"tool_name": "t"}), "InvalidArguments", "usage"),
    ];
    for (req, error_type, code) in cases {
        let (exit, out) = use_tool(&w, &[], &req);
        assert_eq!(
            out.lines().count(),
            1,
            "one compact line, as the original's json.dumps: {out}"
        );
        assert!(out.starts_with(r#"{"status": "error", "error_type": "#), "{out}");
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{req}: not JSON ({e}): {out}"));
        assert_eq!(v["status"], "error", "{req}: {out}");
        assert_eq!(v["error_type"], error_type, "{req}: {out}");
        assert_eq!(v["code"], code, "{req}: {out}");
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{out}");
        assert_ne!(exit, Some(0));
    }
    // The tool's own error, and an action it does not have: the original's plain text.
    let (exit, out) = use_tool(&w, &[], &json!({"tool_name": "t", "action": "fail", "args": {}}));
    assert_eq!(out, "Error executing t_fail: it broke\ntry again");
    assert_eq!(exit, Some(1));
    let (_, out) = use_tool(&w, &[], &json!({"tool_name": "t", "action": "nope", "args": {}}));
    assert!(
        out.starts_with("Error executing t_nope: tool t has no action \"nope\""),
        "{out}"
    );
    let (_, out) = use_tool(&w, &[], &json!({"tool_name": "t", "action": "purge", "args": {}}));
    assert!(out.contains("t_purge"), "the refusal names the grant: {out}");
    // In config.json's locale (AnimaWorks' default is ja), in the original's words.
    assert!(out.contains("明示的な許可が必要です"), "{out}");
    std::fs::write(w.data.join("config.json"), r#"{"locale": "en"}"#).unwrap();
    let (_, out) = use_tool(&w, &[], &json!({"tool_name": "t", "action": "purge", "args": {}}));
    assert!(out.contains("requires explicit permission. Add 't_purge'"), "{out}");
}

#[test]
fn use_tool_cuts_long_output_with_the_original_marker() {
    let w = world();
    let req = json!({"tool_name": "t", "action": "big", "args": {}});
    let (_, out) = use_tool(&w, &[], &req);
    let (body, marker) = out.split_once("\n\n").unwrap();
    assert_eq!(body.len(), 50_000);
    assert_eq!(
        marker, "[出力が50KBを超えたためトランケーションしました。元のサイズ: 60000]",
        "ja by default"
    );
    std::fs::write(w.data.join("config.json"), r#"{"locale": "en"}"#).unwrap();
    let (_, out) = use_tool(&w, &[], &req);
    assert!(
        out.ends_with("\n\n[Output truncated because it exceeded 50KB. Original size: 60000]"),
        "{}",
        &out[out.len() - 100..]
    );
    let (_, out) = use_tool(&w, &["--max-chars", "10"], &req);
    assert!(out.starts_with("xxxxxxxxxx\n\n[Output truncated"), "{out}");
    w.settings(r#"{"use_tool_max_chars": 100000}"#);
    let (_, out) = use_tool(&w, &[], &req);
    assert_eq!(out.len(), 60_000);
}

#[test]
fn use_tool_serve_answers_one_line_per_request() {
    let w = world();
    let mut child = w
        .cmd()
        .args(["use-tool", "--serve", "--ordered"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"id": 1, "tool_name": "t", "action": "greet", "args": {"who": "Ada"}}).to_string(),
        "not json".to_owned(),
        String::new(),
        json!({"id": "b", "tool_name": "t", "action": "fail", "args": {}}).to_string(),
        json!({"tool_name": "help", "action": "describe", "args": {"tool": "t"}}).to_string(),
    ];
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let answers: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), 4, "{}", stdout(&o));
    assert_eq!(
        answers[0],
        json!({"id": 1, "status": "ok", "result": "{\n  \"greeting\": \"hello, Ada\"\n}"})
    );
    assert_eq!(answers[1]["error_type"], "InvalidArguments");
    assert_eq!(answers[2]["id"], "b");
    assert_eq!(answers[2]["status"], "error");
    assert_eq!(answers[2]["code"], "tool_error");
    assert!(
        answers[2]["result"].as_str().unwrap().starts_with("Error executing "),
        "{}",
        answers[2]
    );
    let described: Value = serde_json::from_str(answers[3]["result"].as_str().unwrap()).unwrap();
    let names: Vec<&str> = described["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"greet") && !names.contains(&"purge"),
        "gated actions without a grant are hidden: {names:?}"
    );
    assert_eq!(described["actions"][0]["input_schema"]["required"], json!(["who"]));
}

#[test]
fn help_meta_tool_lists_and_searches() {
    let w = world();
    let (_, out) = use_tool(&w, &[], &json!({"tool_name": "help", "action": "list", "args": {}}));
    assert!(out.starts_with("t: A test tool.\n  greet — Say hello.\n"), "{out}");
    assert!(!out.contains("purge"), "{out}");
    let (_, out) = use_tool(
        &w,
        &[],
        &json!({"tool_name": "help", "action": "search", "args": {"query": "PROGRESS"}}),
    );
    assert_eq!(out, "t: A test tool.\n  steps — Three progress steps.\n");
    let (_, out) = use_tool(
        &w,
        &[],
        &json!({"tool_name": "help", "action": "describe", "args": {"tool": "nope"}}),
    );
    assert!(out.contains("UnknownTool"), "{out}");
}

fn schemas(w: &World, args: &[&str]) -> (Value, String) {
    let mut full = vec!["schemas"];
    full.extend_from_slice(args);
    let o = w.run(&full);
    assert!(o.status.success(), "{}", stderr(&o));
    (json(&o), stderr(&o))
}

#[test]
fn schemas_in_every_provider_shape() {
    let w = world();
    let name_ok = |n: &str| {
        !n.is_empty() && n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    for format in ["animaworks", "anthropic", "openai", "openai-responses", "gemini", "mcp"] {
        let (v, _) = schemas(&w, &["--format", format]);
        let tools = v.as_array().unwrap();
        assert_eq!(tools.len(), 6, "{format}: every action but the gated one: {v}");
        for t in tools {
            let name = t["name"].as_str().or(t["function"]["name"].as_str()).unwrap();
            assert!(name_ok(name), "{format}: {name}");
            assert_ne!(name, "t_purge");
        }
    }
    // Unchanged, no schema of t meets strict mode's rules (none closes its objects).
    let (v, _) = schemas(&w, &["--format", "openai"]);
    assert!(
        v.as_array().unwrap().iter().all(|t| t["function"]["strict"] == false),
        "{v}"
    );
    let (v, err) = schemas(&w, &["--format", "openai", "--strict"]);
    let by_name = |n: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == n)
            .unwrap()
            .clone()
    };
    let greet = by_name("t_greet");
    assert_eq!(greet["type"], "function");
    assert_eq!(greet["function"]["strict"], true);
    assert_eq!(
        greet["function"]["parameters"]["required"],
        json!(["who", "loud"]),
        "in the order the schema declares"
    );
    assert_eq!(
        greet["function"]["parameters"]["properties"]["loud"]["type"],
        json!(["boolean", "null"])
    );
    assert_eq!(greet["function"]["parameters"]["additionalProperties"], false);
    assert_eq!(by_name("t_free")["function"]["strict"], false);
    assert!(
        err.contains("not strict: t_free") && err.contains("additionalProperties"),
        "{err}"
    );
    // Anthropic's ToolParam has `strict` too: given with --strict, by the same rules.
    let (v, _) = schemas(&w, &["--format", "anthropic", "--strict"]);
    let greet = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "t_greet")
        .unwrap()
        .clone();
    assert_eq!(greet["strict"], true, "{greet}");
    assert_eq!(greet["input_schema"]["additionalProperties"], false, "{greet}");
    let (v, _) = schemas(&w, &["--format", "anthropic"]);
    assert!(v.as_array().unwrap().iter().all(|t| t.get("strict").is_none()), "{v}");

    let (v, _) = schemas(&w, &["--format", "mcp"]);
    let greet = v.as_array().unwrap().iter().find(|t| t["name"] == "t_greet").unwrap();
    assert_eq!(greet["annotations"]["readOnlyHint"], true);
    assert!(
        greet["annotations"].get("destructiveHint").is_none(),
        "undeclared hints are absent (MCP's defaults), never false: {greet}"
    );
    assert_eq!(greet["outputSchema"]["properties"]["greeting"]["type"], "string");

    // With the grant, the gated action is listed.
    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"external_tools": {"allow_all": true, "allow": ["t_purge"]}}"#,
    )
    .unwrap();
    let (v, _) = schemas(&w, &["--format", "anthropic"]);
    assert!(v.as_array().unwrap().iter().any(|t| t["name"] == "t_purge"), "{v}");
}

#[test]
fn schemas_use_tool_and_stats() {
    let w = world();
    let (v, _) = schemas(&w, &["--use-tool"]);
    assert_eq!(v["tool"]["name"], "use_tool");
    assert_eq!(
        v["tool"]["input_schema"]["required"],
        json!(["tool_name", "action", "args"])
    );
    assert!(
        v["catalog"].as_str().unwrap().contains("  hang — Runs until ended.\n"),
        "{v}"
    );
    let (v, _) = schemas(&w, &["--stats", "--json"]);
    let t = &v["tools"][0];
    assert_eq!(t["tool"], "t");
    assert_eq!(t["actions"], 6);
    let (full, _) = schemas(&w, &["--format", "animaworks"]);
    let bytes: u64 = full
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.to_string().len() as u64)
        .sum();
    assert_eq!(t["bytes"], bytes);
    assert_eq!(t["tokens_estimate"], bytes / 4);
}

fn python_has_mcp() -> bool {
    Command::new("python3")
        .args(["-c", "import mcp"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn mcp_server_with_the_python_sdk() {
    assert!(
        python_has_mcp(),
        "the MCP Python SDK is needed: pip install -r runner/tests/mcp_client/requirements.txt"
    );
    let w = world();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client/client.py");
    let src = w.tmp.path().join("fresh.sh");
    std::fs::write(&src, NEW_TOOL).unwrap();
    let o = w
        .cmd()
        .env_remove("PATH")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("MCP_TEST_PIDFILE", w.anima.join("hang.pid"))
        .env("MCP_TEST_NEWTOOL", w.personal().join("fresh.sh"))
        .env("MCP_TEST_NEWTOOL_SRC", &src)
        .output_with_program("python3", &[script, BIN]);
    assert!(o.status.success(), "client failed:\n{}\n{}", stdout(&o), stderr(&o));
    let v = json(&o);

    let tools = v["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"t_greet") && names.contains(&"t_hang"), "{names:?}");
    assert!(
        !names.contains(&"t_purge"),
        "a gated action without a grant is not listed: {names:?}"
    );
    let greet = tools.iter().find(|t| t["name"] == "t_greet").unwrap();
    assert_eq!(greet["annotations"]["readOnlyHint"], true);
    assert_eq!(greet["inputSchema"]["required"], json!(["who"]));
    assert_eq!(greet["outputSchema"]["type"], "object");

    assert_eq!(v["greet"]["structuredContent"], json!({"greeting": "hello, Ada"}));
    assert_ne!(v["greet"]["isError"], true);
    assert_eq!(v["steps"]["content"][0]["text"], "done");
    assert_eq!(
        v["progress"],
        json!([[1.0, 3.0, "step 1"], [2.0, 3.0, "step 2"], [3.0, 3.0, "step 3"]])
    );
    assert_eq!(v["fail"]["isError"], true);
    assert!(
        v["fail"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("it broke"),
        "{}",
        v["fail"]
    );

    // Tool-level failures are isError results with the runner's error object in _meta (SEP-1303).
    assert_eq!(v["gated"]["raised"], false, "{}", v["gated"]);
    assert_eq!(v["gated"]["result"]["isError"], true, "{}", v["gated"]);
    let e = &v["gated"]["result"]["_meta"]["animaworks-tool/error"];
    assert_eq!(e["code"], "permission_denied");
    assert_eq!(e["key"], "t_purge");
    assert_eq!(v["invalid"]["result"]["isError"], true, "{}", v["invalid"]);
    assert_eq!(
        v["invalid"]["result"]["_meta"]["animaworks-tool/error"]["pointer"],
        "/who"
    );
    assert_eq!(v["unknown"]["raised"], true, "{}", v["unknown"]);
    assert_eq!(v["unknown"]["code"], -32602);
    assert_eq!(v["unknown"]["data"]["code"], "unknown_tool");
    assert_eq!(v["set_level"], true);
    assert_eq!(v["bad_cursor"], json!({"raised": true, "code": -32602}));

    assert!(
        names.contains(&"task_submit") && names.contains(&"task_show"),
        "{names:?}"
    );
    let id = v["bg_receipt"]["task_id"].as_str().expect("a task id");
    assert_eq!(v["bg_final"]["status"], "completed", "{}", v["bg_final"]);
    assert_eq!(v["bg_final"]["task_id"], id);
    assert!(w.anima.join(format!("state/background_tasks/{id}.json")).is_file());
    assert_eq!(v["bg_gated"]["isError"], true, "{}", v["bg_gated"]);
    assert_eq!(v["bg_gated"]["_meta"]["animaworks-tool/error"]["key"], "t_purge");

    assert_eq!(
        v["hang_group_gone"], true,
        "the cancelled call's process group still runs: {v}"
    );
    assert_eq!(v["after_cancel"]["structuredContent"]["greeting"], "hello, again");
    assert_eq!(v["list_changed"], true);
    assert!(
        v["tools_after"].as_array().unwrap().contains(&json!("fresh_go")),
        "{}",
        v["tools_after"]
    );
}

trait OutputWith {
    fn output_with_program(&mut self, program: &str, args: &[&str]) -> std::process::Output;
}

impl OutputWith for Command {
    /// Run `program` with this command's environment (the world's), not the runner binary.
    fn output_with_program(&mut self, program: &str, args: &[&str]) -> std::process::Output {
        let mut c = Command::new(program);
        c.args(args).env_clear();
        for (k, v) in self.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        c.stdin(Stdio::null()).output().unwrap()
    }
}

#[test]
fn use_tool_submits_background_tasks_checked_like_calls() {
    let w = world();
    let (code, text) = use_tool(
        &w,
        &[],
        &json!({"tool_name": "task", "action": "submit", "args": {"tool": "t", "action": "greet", "args": {"who": "Bg"}}}),
    );
    assert_eq!(code, Some(0), "{text}");
    let receipt: Value = serde_json::from_str(&text).unwrap();
    let id = receipt["task_id"].as_str().unwrap().to_owned();
    let mut last = Value::Null;
    let done = eventually(30, || {
        let (_, t) = use_tool(
            &w,
            &[],
            &json!({"tool_name": "task", "action": "show", "args": {"task_id": id}}),
        );
        last = serde_json::from_str(&t).unwrap_or(Value::Null);
        last["status"] == "completed"
    });
    assert!(done, "{last}");
    assert_eq!(last["result_value"]["greeting"], "hello, Bg", "{last}");

    let tasks = w.anima.join("state/background_tasks");
    let before = std::fs::read_dir(&tasks).unwrap().count();
    let (code, text) = use_tool(
        &w,
        &[],
        &json!({"tool_name": "task", "action": "submit", "args": {"tool": "t", "action": "purge"}}),
    );
    assert_ne!(code, Some(0));
    let err: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(err["error_type"], "PermissionDenied", "{err}");
    let (_, text) = use_tool(
        &w,
        &[],
        &json!({"tool_name": "task", "action": "submit", "args": {"tool": "t", "action": "greet", "args": {"who": 3}}}),
    );
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap()["error_type"],
        "InvalidArguments",
        "{text}"
    );
    assert_eq!(
        std::fs::read_dir(&tasks).unwrap().count(),
        before,
        "a refused submit writes nothing"
    );
}
