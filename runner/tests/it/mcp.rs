//! The MCP server by the book, driven over real pipes with raw JSON-RPC lines: every advertised revision's
//! lifecycle, tool failures as results, annotations from declarations only, paging, logging, an empty server's
//! reason, an answer for every bad line; and `use-tool --serve` answering requests as they finish.

use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// A tool `m`: ok (declared annotations), slow (sleeps `s` seconds), talk (log events and stderr lines), purge
/// (gated, declared non-destructive), fetch (network sandbox, declared closed world), bare (nothing declared),
/// stamp (an output schema with `format: date-time` its result breaks).
const M_TOOL: &str = r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol": 1, "events": true, "actions": [
 {"name": "ok", "description": "Fine.", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
  "annotations": {"readOnlyHint": true, "idempotentHint": true}},
 {"name": "slow", "description": "Sleeps.", "input_schema": {"type": "object", "properties": {"s": {"type": "number"}}}},
 {"name": "talk", "description": "Logs."},
 {"name": "purge", "description": "Delete every bookmark.", "annotations": {"destructiveHint": false, "readOnlyHint": true},
  "profile": {"gated": true}},
 {"name": "fetch", "description": "Fetches.", "annotations": {"openWorldHint": false},
  "profile": {"sandbox": {"net": ["api.example.com:443"]}}},
 {"name": "bare", "description": "Declares nothing."},
 {"name": "stamp", "description": "A bad date.", "output_schema": {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}}
]}
JSON
exit 0; fi
req=$(cat)
case "$req" in
  *'"name":"m_slow"'*)
    s=$(echo "$req" | sed -E 's/.*"s":([0-9.]+).*/\1/'); sleep "$s"
    echo "{\"type\":\"result\",\"result\":\"slept $s\"}" ;;
  *'"name":"m_talk"'*)
    echo '{"type":"log","level":"info","message":"hello log"}'
    echo '{"type":"log","level":"debug","message":"fine detail"}'
    echo 'a stderr line' >&2
    echo '{"type":"result","result":"talked"}' ;;
  *'"name":"m_stamp"'*) echo '{"type":"result","result":{"at":"yesterday"}}' ;;
  *) echo '{"type":"result","result":"ok"}' ;;
esac
"#;

fn world() -> World {
    let w = World::new();
    w.tool(&w.common(), "m.sh", M_TOOL);
    w
}

/// A running `animaworks-tool mcp`, spoken to in raw lines (also used by the task store suites).
pub(crate) struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next_id: i64,
}

impl Mcp {
    pub(crate) fn start(mut cmd: std::process::Command, extra: &[&str]) -> Mcp {
        let mut child = cmd
            .arg("mcp")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines() {
                let Ok(l) = l else { return };
                let v = serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON from the server ({e}): {l}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Mcp {
            child,
            stdin,
            lines,
            next_id: 100,
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let s = self.stdin.as_mut().unwrap();
        s.write_all(bytes).unwrap();
        s.write_all(b"\n").unwrap();
        s.flush().unwrap();
    }

    fn send(&mut self, v: &Value) {
        self.send_raw(v.to_string().as_bytes());
    }

    /// The next line that is not a notification.
    fn answer(&mut self) -> Value {
        loop {
            let v = self.line();
            if v.get("method").is_none() {
                return v;
            }
        }
    }

    fn line(&mut self) -> Value {
        match self.lines.recv_timeout(Duration::from_secs(60)) {
            Ok(v) => v,
            Err(RecvTimeoutError::Timeout) => panic!("the server did not answer within 60 s"),
            Err(RecvTimeoutError::Disconnected) => panic!("the server closed its stdout"),
        }
    }

    /// A request; its answer, and the notifications that came before it.
    fn ask_with_notes(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut notes = Vec::new();
        loop {
            let v = self.line();
            if v.get("method").is_some() {
                notes.push(v);
            } else {
                assert_eq!(v["id"], id, "an answer to another request: {v}");
                return (v, notes);
            }
        }
    }

    pub(crate) fn ask(&mut self, method: &str, params: Value) -> Value {
        self.ask_with_notes(method, params).0
    }

    pub(crate) fn init(&mut self, version: &str) -> Value {
        let r = self.ask(
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        r
    }

    pub(crate) fn finish(mut self) -> (std::process::ExitStatus, String) {
        drop(self.stdin.take());
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            std::io::Read::read_to_string(&mut e, &mut err).unwrap();
        }
        (self.child.wait().unwrap(), err)
    }
}

#[test]
fn every_advertised_revision_runs_its_lifecycle() {
    let w = world();
    for rev in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
        let mut m = Mcp::start(w.cmd(), &[]);
        let r = m.init(rev);
        assert_eq!(r["result"]["protocolVersion"], rev, "{r}");
        assert!(r["result"]["capabilities"]["logging"].is_object(), "{r}");
        assert_eq!(m.ask("ping", json!({}))["result"], json!({}));
        let l = m.ask("tools/list", json!({}));
        assert!(
            l["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "m_ok"),
            "{l}"
        );
        let c = m.ask("tools/call", json!({"name": "m_ok", "arguments": {}}));
        assert_eq!(c["result"]["content"][0]["text"], "ok", "{c}");
        let (status, err) = m.finish();
        assert!(status.success(), "{rev}: {err}");
    }
    // A revision this server does not implement: initialize answers with the newest it does, and 2026-07-28's
    // server/discover is not offered.
    let mut m = Mcp::start(w.cmd(), &[]);
    let r = m.init("2026-07-28");
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
    for meta in [
        json!({}),
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}),
    ] {
        let d = m.ask("server/discover", meta);
        assert!(d.get("result").is_none() && d["error"]["code"].is_i64(), "{d}");
    }
    m.finish();
}

#[test]
fn tool_failures_are_results_and_only_unknown_names_are_errors() {
    let w = world();
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    let bad = m.ask("tools/call", json!({"name": "m_ok", "arguments": {"n": "three"}}));
    let r = &bad["result"];
    assert_eq!(r["isError"], true, "{bad}");
    assert_eq!(
        r["_meta"]["animaworks-tool/error"]["code"], "invalid_arguments",
        "{bad}"
    );
    assert_eq!(r["_meta"]["animaworks-tool/error"]["pointer"], "/n", "{bad}");
    assert!(r["content"][0]["text"].as_str().unwrap().contains("/n"), "{bad}");

    // A gated action without its grant: not listed, and a call is a readable refusal naming the grant.
    let gated = m.ask("tools/call", json!({"name": "m_purge", "arguments": {}}));
    assert_eq!(gated["result"]["isError"], true, "{gated}");
    let e = &gated["result"]["_meta"]["animaworks-tool/error"];
    assert_eq!(e["code"], "permission_denied", "{gated}");
    assert_eq!(e["key"], "m_purge", "{gated}");

    let out = m.ask("tools/call", json!({"name": "m_stamp", "arguments": {}}));
    assert_eq!(
        out["result"]["isError"], true,
        "a date-time the client would refuse: {out}"
    );
    assert_eq!(
        out["result"]["_meta"]["animaworks-tool/error"]["code"], "bad_output",
        "{out}"
    );

    let unknown = m.ask("tools/call", json!({"name": "nope_x", "arguments": {}}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(unknown["error"]["data"]["code"], "unknown_tool", "{unknown}");
    m.finish();

    // A timeout is a result too.
    let mut m = Mcp::start(w.cmd(), &["--timeout", "0.5"]);
    m.init("2025-11-25");
    let t = m.ask("tools/call", json!({"name": "m_slow", "arguments": {"s": 5}}));
    assert_eq!(t["result"]["isError"], true, "{t}");
    assert_eq!(t["result"]["_meta"]["animaworks-tool/error"]["code"], "timeout", "{t}");
    m.finish();
}

#[test]
fn annotations_come_from_declarations_only() {
    let w = world();
    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"external_tools": {"allow_all": true, "allow": ["m_purge"]}}"#,
    )
    .unwrap();
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    let l = m.ask("tools/list", json!({}));
    let tools = l["result"]["tools"].as_array().unwrap();
    let ann = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("{n} not listed: {l}"))
            .get("annotations")
            .cloned()
    };
    assert_eq!(ann("m_ok"), Some(json!({"readOnlyHint": true, "idempotentHint": true})));
    assert_eq!(ann("m_bare"), None, "nothing declared, nothing announced");
    assert_eq!(ann("m_purge"), None, "a gated action is never announced harmless");
    assert_eq!(
        ann("m_fetch"),
        Some(json!({"openWorldHint": true})),
        "openWorldHint follows the network declaration"
    );
    m.finish();
}

#[test]
fn tools_list_pages_a_thousand_tools() {
    let w = World::new();
    let actions: Vec<Value> = (0..1000).map(|i| json!({"name": format!("a{i:04}")})).collect();
    let schemas = json!({"protocol": 1, "actions": actions}).to_string();
    w.tool(
        &w.common(),
        "many.sh",
        &format!(
            "#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then cat <<'JSON'\n{schemas}\nJSON\nexit 0; fi\necho ok\n"
        ),
    );
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    let mut names = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut pages = 0;
    loop {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let r = m.ask("tools/list", params);
        let page = r["result"]["tools"].as_array().unwrap_or_else(|| panic!("{r}"));
        assert!(!page.is_empty() && page.len() <= 100, "{}", page.len());
        names.extend(page.iter().map(|t| t["name"].as_str().unwrap().to_owned()));
        pages += 1;
        match r["result"].get("nextCursor") {
            Some(c) => cursor = Some(c.clone()),
            None => break,
        }
    }
    // 1,000 actions and the two background tools (task_submit, task_show).
    assert_eq!(pages, 11);
    let unique: std::collections::BTreeSet<_> = names.iter().filter(|n| n.starts_with("many_a")).collect();
    assert_eq!((names.len(), unique.len()), (1002, 1000));
    for bad in [json!("bogus"), json!("awt1.ffffff"), json!("awt1.0"), json!("awt1.064")] {
        let r = m.ask("tools/list", json!({"cursor": bad}));
        assert_eq!(r["error"]["code"], -32602, "cursor {bad}: {r}");
    }
    m.finish();
}

#[test]
fn logging_sends_log_events_and_stderr_at_their_levels() {
    let w = world();
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    let (_, notes) = m.ask_with_notes("tools/call", json!({"name": "m_talk", "arguments": {}}));
    let msgs: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .collect();
    assert_eq!(
        msgs.len(),
        1,
        "only info and above until the client sets a level: {notes:?}"
    );
    assert_eq!(
        msgs[0]["params"],
        json!({"level": "info", "logger": "m", "data": "hello log"})
    );

    assert_eq!(
        m.ask("logging/setLevel", json!({"level": "debug"}))["result"],
        json!({})
    );
    let (_, notes) = m.ask_with_notes("tools/call", json!({"name": "m_talk", "arguments": {}}));
    let msgs: Vec<Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .map(|n| n["params"].clone())
        .collect();
    for want in [
        json!({"level": "info", "logger": "m", "data": "hello log"}),
        json!({"level": "debug", "logger": "m", "data": "fine detail"}),
        json!({"level": "debug", "logger": "m", "data": "a stderr line"}),
    ] {
        assert!(msgs.contains(&want), "{want} missing from {msgs:?}");
    }
    assert_eq!(
        m.ask("logging/setLevel", json!({"level": "error"}))["result"],
        json!({})
    );
    let (_, notes) = m.ask_with_notes("tools/call", json!({"name": "m_talk", "arguments": {}}));
    assert!(
        !notes.iter().any(|n| n["method"] == "notifications/message"),
        "{notes:?}"
    );
    m.finish();
}

/// Calls in flight run on more than one runtime thread (on one, a sandboxed call's starts and the pipeline's own
/// work held the server to one core), and each call's notifications still reach the client before its answer.
#[test]
fn calls_in_flight_run_on_several_threads_and_keep_their_notifications_first() {
    let w = world();
    let mut cmd = w.cmd();
    cmd.env("ANIMAWORKS_TOOL_LOG", "warn,animaworks_tool=debug");
    let mut m = Mcp::start(cmd, &[]);
    m.init("2025-11-25");
    const N: i64 = 8;
    for i in 0..N {
        m.send(&json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
                       "params": {"name": "m_talk", "arguments": {}}}));
    }
    let (mut logs, mut answered) = (0usize, std::collections::HashSet::new());
    while answered.len() < N as usize {
        let v = m.line();
        match v.get("method").and_then(Value::as_str) {
            Some("notifications/message") => {
                assert_eq!(v["params"]["data"], "hello log", "{v}");
                logs += 1;
            }
            Some(_) => {}
            None => {
                assert_eq!(v["result"]["isError"], false, "{v}");
                assert!(answered.insert(v["id"].as_i64().unwrap()), "answered twice: {v}");
                assert!(
                    logs >= answered.len(),
                    "an answer came before its call's log line ({logs} lines, {} answers): {v}",
                    answered.len()
                );
            }
        }
    }
    assert_eq!(logs, N as usize);
    let (status, err) = m.finish();
    assert!(status.success(), "{err}");
    let threads: usize = err
        .lines()
        .find_map(|l| l.split("serving on ").nth(1)?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no thread count in {err}"));
    assert!(threads >= 2, "the server runs calls on {threads} runtime thread(s)");
}

#[test]
fn an_empty_server_says_why() {
    let w = World::new();
    let mut c = w.cmd();
    c.env_remove("ANIMAWORKS_ANIMA_DIR");
    let mut m = Mcp::start(c, &[]);
    let r = m.init("2025-11-25");
    let instructions = r["result"]["instructions"].as_str().unwrap();
    assert!(instructions.contains("no anima dir"), "{instructions}");
    let l = m.ask("tools/list", json!({}));
    assert_eq!(l["result"]["tools"], json!([]));
    let hint = l["result"]["_meta"]["animaworks-tool/hint"].as_str().unwrap();
    assert!(
        hint.contains("ANIMAWORKS_ANIMA_DIR") && hint.contains("no tool was found"),
        "{hint}"
    );
    let (status, err) = m.finish();
    assert!(status.success());
    assert!(err.contains("offers no tools") && err.contains("no anima dir"), "{err}");
}

/// A permissions file that cannot be used refuses every call: the server says so (stderr, `instructions`,
/// `tools/list`) rather than offer its task tools alone without a word.
#[test]
fn a_server_with_an_unusable_permissions_file_says_so() {
    let w = World::new();
    std::fs::write(w.anima.join("permissions.json"), "{\"external_tools\": []}").unwrap();
    let mut m = Mcp::start(w.cmd(), &[]);
    let r = m.init("2025-11-25");
    let instructions = r["result"]["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("permissions.json:1:") && instructions.contains("every call of this anima is refused"),
        "{instructions}"
    );
    let l = m.ask("tools/list", json!({}));
    let hint = l["result"]["_meta"]["animaworks-tool/hint"].as_str().unwrap_or_default();
    assert!(hint.contains("every call of this anima is refused"), "{l}");
    let (status, err) = m.finish();
    assert!(status.success());
    assert!(err.contains("permissions.json"), "{err}");
}

#[test]
fn every_bad_line_gets_an_answer_and_the_server_goes_on() {
    let w = world();
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    m.send_raw(b"this is not json");
    let a = m.answer();
    assert_eq!(
        (a["id"].clone(), a["error"]["code"].clone()),
        (Value::Null, json!(-32700)),
        "{a}"
    );
    m.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}");
    let a = m.answer();
    assert_eq!(a["id"], 7, "{a}");
    assert_eq!(a["error"]["code"], -32700, "{a}");
    assert!(a["error"]["message"].as_str().unwrap().contains("UTF-8"), "{a}");
    // 17 MiB in one line: over the 16 MiB bound.
    let mut long = b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\",\"params\":{\"pad\":\"".to_vec();
    long.resize(17 << 20, b'x');
    long.extend_from_slice(b"\"}}");
    m.send_raw(&long);
    let a = m.answer();
    assert_eq!(a["error"]["code"], -32600, "{a}");
    assert!(
        a["error"]["message"]
            .as_str()
            .unwrap()
            .contains("over this server's bound"),
        "{a}"
    );
    assert_eq!(m.ask("ping", json!({}))["result"], json!({}), "the server goes on");
    let (status, _) = m.finish();
    assert!(status.success());
}

/// `use-tool --serve` lines: the answers in the order they arrive, with a deadline.
fn serve_answers(w: &World, extra: &[&str], input: &[u8], n: usize) -> Vec<Value> {
    let mut child = w
        .cmd()
        .args(["use-tool", "--serve"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let answers: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    assert_eq!(answers.len(), n, "{answers:?}");
    answers
}

#[test]
fn use_tool_serve_answers_as_calls_finish_and_never_exits_on_bad_input() {
    let w = world();
    let slow = json!({"id": "slow", "tool_name": "m", "action": "slow", "args": {"s": 2}});
    let fast = json!({"id": "fast", "tool_name": "m", "action": "ok", "args": {}});
    let input = format!("{slow}\n{fast}\n");
    let a = serve_answers(&w, &[], input.as_bytes(), 2);
    assert_eq!(a[0]["id"], "fast", "the fast call answers first: {a:?}");
    assert_eq!(
        (a[1]["id"].clone(), a[1]["result"].clone()),
        (json!("slow"), json!("slept 2"))
    );
    let a = serve_answers(&w, &["--ordered"], input.as_bytes(), 2);
    assert_eq!(
        (a[0]["id"].clone(), a[1]["id"].clone()),
        (json!("slow"), json!("fast")),
        "{a:?}"
    );

    let mut input =
        b"{\"id\": 1, \"tool_name\": \"m\", \"action\": \"ok\", \"args\": {\"x\": \"\xff\"}}\nnot json\n".to_vec();
    let mut long = vec![b' '; 17 << 20];
    long.push(b'\n');
    input.extend_from_slice(&long);
    input.extend_from_slice(format!("{fast}\n").as_bytes());
    let a = serve_answers(&w, &["--ordered"], &input, 4);
    assert_eq!(a[0]["id"], 1, "{a:?}");
    for bad in &a[..3] {
        assert_eq!(bad["code"], "usage", "{bad}");
    }
    assert!(a[0]["message"].as_str().unwrap().contains("not UTF-8"), "{}", a[0]);
    assert!(a[2]["message"].as_str().unwrap().contains("over the bound"), "{}", a[2]);
    assert_eq!(
        (a[3]["id"].clone(), a[3]["status"].clone()),
        (json!("fast"), json!("ok"))
    );
}

#[test]
fn log_notifications_are_masked() {
    const SECRET: &str = "s3cr3t-mcp-log-9191";
    let w = World::new();
    w.tool(
        &w.common(),
        "sec.sh",
        r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then
  echo '{"protocol":1,"events":true,"credentials":[{"name":"demo","env":"DEMO_TOKEN"}],"actions":[{"name":"leak"}]}'
  exit 0; fi
cat >/dev/null
echo "{\"type\":\"log\",\"level\":\"warning\",\"message\":\"token $DEMO_TOKEN\"}"
echo "stderr $DEMO_TOKEN" >&2
echo '{"type":"result","result":"ok"}'
"#,
    );
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"demo": {"api_key": SECRET}}}).to_string(),
    )
    .unwrap();
    w.grant_credentials("sec", &["demo"]);
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    m.ask("logging/setLevel", json!({"level": "debug"}));
    let (r, notes) = m.ask_with_notes("tools/call", json!({"name": "sec_leak", "arguments": {}}));
    assert_eq!(r["result"]["content"][0]["text"], "ok", "{r}");
    let text: Vec<String> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .map(|n| n["params"]["data"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(text.iter().any(|t| t.starts_with("token ")), "{text:?}");
    assert!(text.iter().any(|t| t.starts_with("stderr ")), "{text:?}");
    assert!(
        !text.iter().any(|t| t.contains(SECRET)),
        "a secret reached the client: {text:?}"
    );
    m.finish();
}

/// A tool `b` for MCP tasks: work (background-eligible; progress, then an object after `s` seconds), hold
/// (background-eligible; a progress message, then sleeps), now (not background-eligible).
const B_TOOL: &str = r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol": 1, "events": true, "actions": [
 {"name": "work", "description": "Works.", "input_schema": {"type": "object", "properties": {"s": {"type": "number"}}},
  "profile": {"background_eligible": true}},
 {"name": "hold", "description": "Holds.", "profile": {"background_eligible": true}},
 {"name": "now", "description": "Foreground only."}
]}
JSON
exit 0; fi
req=$(cat)
case "$req" in
  *'"name":"b_work"'*|*'"action":"work"'*)
    s=$(echo "$req" | sed -E 's/.*"s":([0-9.]+).*/\1/'); case "$s" in *[!0-9.]*|'') s=0;; esac
    echo '{"type":"progress","progress":1,"total":2,"message":"half"}'
    sleep "$s"
    echo "{\"type\":\"result\",\"result\":{\"slept\":\"$s\",\"id\":\"$ANIMAWORKS_CALL_ID\"}}" ;;
  *'"name":"b_hold"'*|*'"action":"hold"'*)
    echo '{"type":"progress","progress":1,"total":4,"message":"warming up"}'
    sleep 120
    echo '{"type":"result","result":"held"}' ;;
  *) echo '{"type":"result","result":"now"}' ;;
esac
"#;

fn task_world() -> World {
    let w = World::new();
    w.tool(&w.common(), "b.sh", B_TOOL);
    w
}

impl Mcp {
    /// Lines until one matches `f` (notifications and answers alike), within 60 s.
    fn until(&mut self, mut f: impl FnMut(&Value) -> bool) -> Value {
        loop {
            let v = self.line();
            if f(&v) {
                return v;
            }
        }
    }

    fn task_call(&mut self, name: &str, args: Value, task: Value) -> Value {
        self.ask("tools/call", json!({"name": name, "arguments": args, "task": task}))
    }
}

fn is_task_id(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 12 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn a_task_runs_from_submit_to_result_across_two_sessions() {
    let w = task_world();
    let mut m = Mcp::start(w.cmd(), &[]);
    let init = m.init("2025-11-25");
    assert_eq!(
        init["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{init}"
    );
    let l = m.ask("tools/list", json!({}));
    let tool = |n: &str| {
        l["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(tool("b_work")["execution"], json!({"taskSupport": "optional"}), "{l}");
    assert!(tool("b_now").get("execution").is_none(), "{l}");

    let c = m.task_call("b_work", json!({"s": 0.5}), json!({"ttl": 60000}));
    let task = &c["result"]["task"];
    assert!(is_task_id(&task["taskId"]), "{c}");
    assert_eq!(task["status"], "working", "{c}");
    assert_eq!(task["ttl"], 60000, "{c}");
    assert_eq!(task["pollInterval"], 1000, "{c}");
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'), "{c}");
    let id = task["taskId"].as_str().unwrap().to_owned();
    // The id is the one `jobs` shows.
    let shown = json(&w.run(&["jobs", "show", &id]));
    assert_eq!(shown["task_id"], id.as_str(), "{shown}");
    assert_eq!(shown["ttl_ms"], 60000, "{shown}");
    assert_eq!(shown["source"], "mcp", "{shown}");
    // Not background-eligible: no task.
    let n = m.task_call("b_now", json!({}), json!({}));
    assert_eq!(n["error"]["code"], -32601, "{n}");
    let (status, err) = m.finish();
    assert!(status.success(), "{err}");

    // A new session, a new process: the store is the source of truth.
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    let r = m.ask("tasks/result", json!({"taskId": id}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(r["result"]["structuredContent"]["id"], id.as_str(), "{r}");
    assert_eq!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str(),
        "{r}"
    );
    let g = m.ask("tasks/get", json!({"taskId": id}));
    assert_eq!(g["result"]["status"], "completed", "{g}");
    assert_eq!(g["result"]["taskId"], id.as_str(), "{g}");
    let list = m.ask("tasks/list", json!({}));
    assert!(
        list["result"]["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["taskId"] == id.as_str()),
        "{list}"
    );
    let bad_cursor = m.ask("tasks/list", json!({"cursor": "nope"}));
    assert_eq!(bad_cursor["error"]["code"], -32602, "{bad_cursor}");
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let bad = m.ask(method, json!({"taskId": "0123456789ab"}));
        assert_eq!(bad["error"]["code"], -32602, "{method}: {bad}");
        let none = m.ask(method, json!({}));
        assert_eq!(none["error"]["code"], -32602, "{method}: {none}");
    }
    // An ended task cannot be cancelled.
    let late = m.ask("tasks/cancel", json!({"taskId": id}));
    assert_eq!(late["error"]["code"], -32602, "{late}");
    m.finish();

    // Older revisions have no tasks: no capability, no execution, and params.task is ignored (a plain call).
    let mut m = Mcp::start(w.cmd(), &[]);
    let init = m.init("2025-06-18");
    assert!(init["result"]["capabilities"].get("tasks").is_none(), "{init}");
    let l = m.ask("tools/list", json!({}));
    assert!(
        l["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("execution").is_none()),
        "{l}"
    );
    let c = m.task_call("b_work", json!({"s": 0}), json!({"ttl": 1000}));
    assert!(
        c["result"].get("task").is_none() && c["result"]["content"].is_array(),
        "{c}"
    );
    m.finish();
}

#[test]
fn a_task_reports_progress_and_status_and_is_cancelled() {
    let w = task_world();
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    m.ask("tools/list", json!({}));
    let c = m.task_call("b_hold", json!({}), json!({}));
    let id = c["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{c}"))
        .to_owned();
    assert_eq!(c["result"]["task"]["ttl"], Value::Null, "{c}");
    // The worker's progress reaches a status notification and tasks/get's statusMessage.
    let note = m.until(|v| {
        v["method"] == "notifications/tasks/status"
            && v["params"]["statusMessage"]
                .as_str()
                .is_some_and(|s| s.contains("warming up"))
    });
    assert_eq!(note["params"]["taskId"], id.as_str(), "{note}");
    assert_eq!(note["params"]["status"], "working", "{note}");
    assert_eq!(note["params"]["statusMessage"], "1/4: warming up", "{note}");
    let g = m.ask("tasks/get", json!({"taskId": id}));
    assert_eq!(g["result"]["statusMessage"], "1/4: warming up", "{g}");

    let x = m.ask("tasks/cancel", json!({"taskId": id}));
    assert_eq!(x["result"]["status"], "cancelled", "{x}");
    assert_eq!(x["result"]["taskId"], id.as_str(), "{x}");
    let note = m.until(|v| v["method"] == "notifications/tasks/status" && v["params"]["status"] == "cancelled");
    assert_eq!(note["params"]["taskId"], id.as_str(), "{note}");
    let r = m.ask("tasks/result", json!({"taskId": id}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        r["result"]["_meta"]["animaworks-tool/error"]["code"], "cancelled",
        "{r}"
    );
    let shown = json(&w.run(&["jobs", "show", &id]));
    assert_eq!(shown["outcome"], "cancelled", "{shown}");
    let (status, err) = m.finish();
    assert!(status.success(), "{err}");
}

#[test]
fn a_task_ttl_is_honoured_by_jobs_prune() {
    let w = task_world();
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    m.ask("tools/list", json!({}));
    let short = m.task_call("b_work", json!({"s": 0}), json!({"ttl": 1}));
    let short = short["result"]["task"]["taskId"].as_str().unwrap().to_owned();
    let kept = m.task_call("b_work", json!({"s": 0}), json!({"ttl": 86_400_000}));
    let kept = kept["result"]["task"]["taskId"].as_str().unwrap().to_owned();
    for id in [&short, &kept] {
        let r = m.ask("tasks/result", json!({"taskId": id}));
        assert_eq!(r["result"]["isError"], false, "{r}");
    }
    m.finish();
    let o = w.run(&["jobs", "prune", "--older-than", "7d"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o)["pruned"], json!([short]), "{}", stdout(&o));
    assert!(w.run(&["jobs", "show", &kept]).status.success());
}

#[test]
fn a_session_with_open_tasks_ends_with_its_input_and_the_task_goes_on() {
    let w = task_world();
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    m.ask("tools/list", json!({}));
    let c = m.task_call("b_hold", json!({}), json!({}));
    let id = c["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{c}"))
        .to_owned();
    // A tasks/result that waits, and a status watcher, must not keep the server alive once the client is gone.
    m.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/result", "params": {"taskId": id}}));
    drop(m.stdin.take());
    assert!(
        eventually(30, || m.child.try_wait().unwrap().is_some()),
        "the server did not end with its input"
    );
    assert!(m.child.try_wait().unwrap().unwrap().success());
    let shown = json(&w.run(&["jobs", "show", &id]));
    assert!(
        ["pending", "running"].contains(&shown["status"].as_str().unwrap()),
        "{shown}"
    );
    assert!(w.run(&["jobs", "cancel", &id]).status.success());
}

/// `d_i = allOf[$ref d_{i-1}, $ref d_{i-1}]` for i up to `levels`: 2^levels nodes in a few kilobytes.
fn doubling_schema(levels: usize) -> Value {
    let mut defs = serde_json::Map::new();
    defs.insert("d0".into(), json!({"type": "string"}));
    for i in 1..=levels {
        let r = format!("#/$defs/d{}", i - 1);
        defs.insert(format!("d{i}"), json!({"allOf": [{"$ref": r}, {"$ref": r}]}));
    }
    json!({"type": "object", "properties": {"x": {"$ref": format!("#/$defs/d{levels}")}}, "$defs": defs})
}

/// A schema that checks each level of a value twice (recursive, so its size is small): 2^depth steps.
fn twice_per_level_schema() -> Value {
    json!({"type": "object", "allOf": [
        {"properties": {"a": {"$ref": "#"}}},
        {"properties": {"a": {"$ref": "#"}}, "description": "twice"}
    ]})
}

fn nested(levels: usize) -> Value {
    let mut v = json!({});
    for _ in 0..levels {
        v = json!({"a": v});
    }
    v
}

/// A schema whose `$ref`s expand past the measure is refused at discovery with the reason, so a call never
/// checks against it (before, the call hung in validation whatever its timeout).
#[test]
fn a_schema_that_expands_without_bound_is_refused_at_discovery() {
    let w = World::new();
    let doc = json!({"protocol": 1, "actions": [{"name": "go", "input_schema": doubling_schema(59)}]});
    w.tool(
        &w.common(),
        "boom",
        &bash_tool(&doc.to_string(), r#"echo '{"ok":true}'"#),
    );
    let o = run_guarded(
        w.cmd()
            .args(["call", "boom", "go", "--timeout", "2", "--json", r#"{"x":"s"}"#]),
        60,
    )
    .expect("the call did not end");
    assert_ne!(code(&o), 0);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("expands to more than 100000"), "{text}");
}

/// Four calls whose arguments cost 2^60 steps to check end with `timeout` when their timeout passes; a ping and
/// a plain call sent after them are answered meanwhile (before, four such calls held every runtime thread and the
/// server answered nothing).
#[test]
fn costly_validation_ends_at_the_timeout_and_the_server_goes_on() {
    let w = world();
    let doc = json!({"protocol": 1, "actions": [{"name": "deep", "input_schema": twice_per_level_schema()}]});
    w.tool(
        &w.common(),
        "sch",
        &bash_tool(&doc.to_string(), r#"echo '{"ok":true}'"#),
    );
    let mut m = Mcp::start(w.cmd(), &["--timeout", "3"]);
    // Its validation threads run on: the server is ended with the test, passed or failed.
    let _end = KillOnDrop(m.child.id());
    m.init("2025-11-25");
    for i in 0..4 {
        m.send(&json!({"jsonrpc": "2.0", "id": 2000 + i, "method": "tools/call",
                       "params": {"name": "sch_deep", "arguments": nested(60)}}));
    }
    m.send(&json!({"jsonrpc": "2.0", "id": 3000, "method": "ping"}));
    m.send(&json!({"jsonrpc": "2.0", "id": 3001, "method": "tools/call",
                   "params": {"name": "m_ok", "arguments": {"n": 1}}}));
    let mut got = std::collections::BTreeMap::new();
    while got.len() < 6 {
        let v = m.answer();
        got.insert(v["id"].as_i64().unwrap(), v);
    }
    assert!(got[&3000].get("result").is_some(), "{}", got[&3000]);
    assert_eq!(got[&3001]["result"]["isError"], false, "{}", got[&3001]);
    for i in 0..4 {
        let r = &got[&(2000 + i)]["result"];
        assert_eq!(r["isError"], true, "{r}");
        assert_eq!(r["_meta"]["animaworks-tool/error"]["code"], "timeout", "{r}");
    }
    drop(_end);
    let _ = m.child.wait();
}

/// Kills a process when dropped (a test's server whose work cannot end by itself).
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: a signal to a pid this test started and has not reaped yet.
        unsafe { libc::kill(self.0 as i32, libc::SIGKILL) };
    }
}

/// Peak resident memory of a process, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A client that reads nothing while a tool writes 100,000 log events of 2 KB: what the server holds for it is
/// bounded (before, it held every one: hundreds of MB), and once the client reads it learns how many were dropped,
/// then gets the result.
#[test]
fn notifications_for_a_client_that_does_not_read_are_bounded() {
    let w = World::new();
    let done = w.tmp.path().join("done");
    let body = format!(
        r#"python3 -c '
import json, sys
line = json.dumps({{"type": "log", "level": "error", "message": "x" * 2048}}) + "\n"
out = sys.stdout
for i in range(100000):
    out.write(line)
out.write(json.dumps({{"type": "result", "result": "spoke"}}) + "\n")
out.flush()
open("{}", "w").close()
'"#,
        done.display()
    );
    let doc = json!({"protocol": 1, "events": true, "actions": [{"name": "go", "input_schema": {"type": "object"}}]});
    w.tool(&w.common(), "loud", &bash_tool(&doc.to_string(), &body));
    let mut m = Mcp::start(w.cmd(), &[]);
    m.init("2025-11-25");
    m.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "loud_go", "arguments": {}}}));
    assert!(eventually(120, || done.exists()), "the tool did not finish writing");
    let pid = m.child.id();
    // The runner has read the tool's last line once the tool's stdout is closed and its process reaped; the
    // audit line says so.
    assert!(eventually(60, || audit_text(&w).contains("loud")), "no audit line");
    let peak = peak_kib(pid);
    let (mut warned, mut logs) = (None, 0usize);
    let answer = loop {
        let v = m.line();
        match v.get("method").and_then(Value::as_str) {
            Some("notifications/message") => {
                let text = v["params"]["data"].as_str().unwrap_or_default().to_owned();
                if text.contains("dropped") {
                    warned = Some(text);
                } else {
                    logs += 1;
                }
            }
            Some(_) => {}
            None => break v,
        }
    };
    assert!(
        peak < 96 * 1024,
        "the server grew to {} MiB for a client that did not read",
        peak / 1024
    );
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(warned.is_some(), "no notice of dropped log messages");
    assert!(logs < 100_000, "{logs} log notifications all kept");
    m.finish();
}
