//! Every attempt, audited once, however it ends (an out-of-range flag, a task refused before its call was
//! prepared, an MCP name not found, a client leaving mid-call); numbers no deadline can hold are refused, never a
//! panic; a secret is masked however the tool splits or escapes it. Each test pins a defect found by reviewing
//! the pipeline with an attacker's eyes (issue 9).

use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

const SECRET: &str = "sekrit-XYZ-12345";

/// `leak` is open and `purge` gated; both declare the credential `svc`. `slow` sleeps until it is ended.
const GT: &str = r#"{"protocol":1,"actions":[
 {"name":"purge","input_schema":{"type":"object","properties":{"note":{"type":"string"}}},
  "profile":{"gated":true,"credentials":[{"name":"svc","env":"SVC_TOKEN"}]}},
 {"name":"leak","input_schema":{"type":"object","properties":{"note":{"type":"string"}}},
  "profile":{"credentials":[{"name":"svc","env":"SVC_TOKEN"}]}},
 {"name":"slow","input_schema":{"type":"object","properties":{}}}]}"#;

const GT_BODY: &str = r#"case "$req" in
  *'"name":"gt_slow"'*) exec sleep SLOW ;;
  *) echo '{"ok": true}' ;;
esac"#;

/// `go` writes its secret to stderr in two writes, a moment apart: two reads for the runner.
const SPLIT: &str =
    r#"{"protocol":1,"actions":[{"name":"go","profile":{"credentials":[{"name":"svc","env":"SVC_TOKEN"}]}}]}"#;
const SPLIT_BODY: &str = r#"printf '%s' "${SVC_TOKEN:0:8}" >&2
sleep 0.3
printf '%s\n' "${SVC_TOKEN:8}" >&2
echo '{"ok": 1}'"#;

/// The seconds `gt slow` sleeps: a number no other test's process has on its command line.
fn slow_marker() -> String {
    format!("29{}.7", std::process::id())
}

fn world() -> World {
    let w = World::new();
    w.tool(
        &w.common(),
        "gt.sh",
        &bash_tool(GT, &GT_BODY.replace("SLOW", &slow_marker())),
    );
    w.tool(&w.common(), "split.sh", &bash_tool(SPLIT, SPLIT_BODY));
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"svc": {"api_key": SECRET}}}).to_string(),
    )
    .unwrap();
    for tool in ["gt", "split", "esc", "half"] {
        w.grant_credentials(tool, &["*"]);
    }
    w
}

fn audit_lines(w: &World) -> Vec<Value> {
    std::fs::read_to_string(w.anima.join("state/tool_audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Run `f` and return the audit lines it added.
fn audited(w: &World, f: impl FnOnce()) -> Vec<Value> {
    let before = audit_lines(w).len();
    f();
    audit_lines(w)[before..].to_vec()
}

fn no_panic(what: &str, o: &std::process::Output) {
    assert_ne!(o.status.code(), Some(101), "{what} panicked: {}", stderr(o));
    assert!(!stderr(o).contains("panicked"), "{what} panicked: {}", stderr(o));
}

#[test]
fn a_secret_split_across_two_stderr_reads_is_masked_live() {
    let w = world();
    for args in [&["split", "go"][..], &["split", "go", "--events"][..]] {
        let o = w.run(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("***"), "{args:?}: the masked secret is not there: {err:?}");
        assert!(!err.contains(SECRET), "{args:?}: the secret was shown: {err:?}");
    }
}

#[test]
fn an_out_of_range_timeout_flag_is_audited_once() {
    let w = world();
    for args in [
        &["gt", "leak", "--timeout", "1e308"][..],
        &["call", "gt", "leak", "--timeout", "inf"][..],
        &["submit", "gt", "leak", "--timeout", "1e308"][..],
    ] {
        let mut o = None;
        let lines = audited(&w, || o = Some(w.run(args)));
        let o = o.unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(lines.len(), 1, "{args:?}: want one audit line, got {lines:#?}");
        assert_eq!(lines[0]["outcome"], "usage", "{args:?}");
        assert_eq!(lines[0]["tool"], "gt", "{args:?}");
    }
}

#[test]
fn huge_or_odd_timeouts_never_panic_the_runner() {
    let w = world();
    for t in ["1e308", "1e19", "NaN"] {
        let req = json!({"tool_name": "gt", "action": "leak", "args": {}});
        let o = w.feed(&["use-tool", "--timeout", t], &req.to_string());
        no_panic(&format!("use-tool --timeout {t}"), &o);
        assert_eq!(o.status.code(), Some(2), "use-tool --timeout {t}: {}", stderr(&o));

        let o = w.run(&["mcp", "--timeout", t]);
        no_panic(&format!("mcp --timeout {t}"), &o);
        assert_eq!(o.status.code(), Some(2), "mcp --timeout {t}: {}", stderr(&o));

        let o = w.run(&["jobs", "wait", "0123456789ab", "--timeout", t]);
        no_panic(&format!("jobs wait --timeout {t}"), &o);
        assert_eq!(o.status.code(), Some(2), "jobs wait --timeout {t}: {}", stderr(&o));

        let path = w.common().join("gt.sh");
        let o = w.run(&["check", path.to_str().unwrap(), "--timeout", t]);
        no_panic(&format!("check --timeout {t}"), &o);
        assert_eq!(o.status.code(), Some(2), "check --timeout {t}: {}", stderr(&o));
    }
}

/// A task file (forged, or written by another version) whose timeout_s or arguments cannot be used.
fn forge_task(w: &World, id: &str, extra: Value) {
    let dir = w.anima.join("state/background_tasks");
    std::fs::create_dir_all(&dir).unwrap();
    let mut t = json!({"task_id": id, "anima_name": "alice", "tool_name": "gt:leak", "tool_args": {},
        "status": "pending", "created_at": 1.0, "completed_at": null, "result": null, "error": null,
        "tool": "gt", "action": "leak", "kind": "action", "updated_at": 1.0});
    for (k, v) in extra.as_object().unwrap() {
        t[k] = v.clone();
    }
    // Signed as submit signs (an unsigned task file is never run: tasks_pg).
    let mut task: awt_tasks::Task = serde_json::from_value(t).unwrap();
    let key = awt_tasks::mac::key(&w.data).unwrap();
    awt_tasks::mac::sign(&key, &mut task, None);
    std::fs::write(dir.join(format!("{id}.json")), serde_json::to_string(&task).unwrap()).unwrap();
}

#[test]
fn a_task_that_fails_before_its_call_is_prepared_is_audited_once() {
    let w = world();
    let cases = [
        // (A forged timeout_s is clamped and the task runs: a_forged_task_timeout_does_not_lose_the_task below.)
        ("00000000000b", json!({"tool_args": [1, 2]}), "invalid_arguments"),
        (
            "00000000000c",
            json!({"kind": "cli", "tool_args": {"not": "argv"}}),
            "invalid_arguments",
        ),
    ];
    for (id, extra, outcome) in cases {
        forge_task(&w, id, extra.clone());
        let lines = audited(&w, || {
            let o = w.run(&["jobs", "worker"]);
            assert_eq!(o.status.code(), Some(0), "{extra}: {}", stderr(&o));
        });
        let task: Value = serde_json::from_str(
            &std::fs::read_to_string(w.anima.join(format!("state/background_tasks/{id}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(task["status"], "failed", "{extra}: {task}");
        assert_eq!(lines.len(), 1, "{extra}: want one audit line, got {lines:#?}");
        assert_eq!(lines[0]["outcome"], outcome, "{extra}");
        assert_eq!(lines[0]["tool"], "gt", "{extra}");
    }
}

#[test]
fn a_strict_submit_refused_as_not_background_eligible_is_audited_once() {
    let w = world();
    let mut o = None;
    let lines = audited(&w, || {
        o = Some(w.run(&["submit", "--strict", "gt", "leak", "--note", SECRET]))
    });
    let o = o.unwrap();
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert_eq!(lines.len(), 1, "want one audit line, got {lines:#?}");
    assert_eq!(lines[0]["outcome"], "permission_denied");
    assert_eq!(lines[0]["decision"], "deny");
    assert!(
        lines[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("not_background_eligible"),
        "{}",
        lines[0]
    );
    assert!(!lines[0].to_string().contains(SECRET), "{}", lines[0]);
}

struct Mcp {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    out: BufReader<std::process::ChildStdout>,
}

impl Mcp {
    fn start(w: &World) -> Mcp {
        let mut c = w.cmd();
        c.arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut m = Mcp { child, stdin, out };
        m.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        );
        m.answer(1);
        m.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }
    fn send(&mut self, v: Value) {
        writeln!(self.stdin.as_mut().unwrap(), "{v}").unwrap();
    }
    fn answer(&mut self, id: i64) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.out.read_line(&mut line).unwrap() > 0,
                "the MCP server ended without answering"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }
    fn call(&mut self, id: i64, name: &str) {
        self.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {}}}),
        );
    }
}

#[test]
fn an_mcp_tool_name_that_is_not_found_is_audited_once() {
    let w = world();
    let mut m = Mcp::start(&w);
    let mut answer = Value::Null;
    let lines = audited(&w, || {
        m.call(2, "nosuch_thing");
        answer = m.answer(2);
    });
    assert_eq!(answer["error"]["data"]["code"], "unknown_tool", "{answer}");
    assert_eq!(lines.len(), 1, "want one audit line, got {lines:#?}");
    assert_eq!(lines[0]["outcome"], "unknown_tool");
    assert_eq!(lines[0]["tool"], "nosuch_thing");
    drop(m.stdin.take());
    m.child.wait().unwrap();
}

#[test]
fn an_mcp_call_cut_off_by_the_client_leaving_is_audited_once() {
    let w = world();
    let mut m = Mcp::start(&w);
    m.call(2, "gt_slow");
    assert!(
        eventually(60, || !pids_with_cmdline(&slow_marker()).is_empty()),
        "the tool did not start"
    );
    // The client goes away mid-call.
    drop(m.stdin.take());
    let status = m.child.wait().unwrap();
    assert!(status.code().is_some(), "the server was killed: {status:?}");
    let lines = audit_lines(&w);
    assert_eq!(lines.len(), 1, "want one audit line, got {lines:#?}");
    assert_eq!(lines[0]["action"], "slow");
    assert_eq!(lines[0]["outcome"], "cancelled");
    assert!(
        eventually(30, || pids_with_cmdline(&slow_marker()).is_empty()),
        "the tool outlived the call"
    );
}

/// An event tool whose JSON escapes `&` as `\u0026` (Go's encoding/json does), with a secret holding one.
const ESCAPED: &str = r#"{"protocol":1,"events":true,"actions":[{"name":"go","profile":{"credentials":[{"name":"amp","env":"AMP_TOKEN"}]}}]}"#;
const ESCAPED_BODY: &str = r#"esc=${AMP_TOKEN//&/\\u0026}
echo "{\"type\":\"log\",\"level\":\"info\",\"message\":\"token $esc\"}"
echo "{\"type\":\"progress\",\"progress\":1,\"message\":\"with $esc\"}"
echo '{"type":"result","result":{"ok":1}}'"#;

#[test]
fn a_secret_in_an_event_escaped_by_the_tool_is_masked() {
    let w = world();
    let secret = "pass&word-98765";
    w.tool(&w.common(), "esc.sh", &bash_tool(ESCAPED, ESCAPED_BODY));
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"amp": {"api_key": secret}}}).to_string(),
    )
    .unwrap();
    for args in [&["esc", "go"][..], &["esc", "go", "--events"][..]] {
        let o = w.run(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(
            all.contains("token ***"),
            "{args:?}: the masked log is not there: {all}"
        );
        assert!(!all.contains(secret), "{args:?}: the secret was shown: {all}");
        assert!(
            !all.contains("pass\\u0026word"),
            "{args:?}: the escaped secret was shown: {all}"
        );
    }
}

/// A tool with a cli_main that declares a credential that is set and a required one that is not.
const HALF: &str = r#"{"protocol":1,"cli":true,"credentials":[{"name":"svc","env":"SVC_TOKEN"},
 {"name":"absent","env":"ABSENT_TOKEN","required":true}],"actions":[{"name":"go"}]}"#;

#[test]
fn a_legacy_argv_refused_for_a_missing_credential_is_audited_with_the_others_masked() {
    let w = world();
    w.tool(&w.common(), "half.sh", &bash_tool(HALF, "echo '{}'"));
    let mut o = None;
    let lines = audited(&w, || o = Some(w.run(&["half", "--token", SECRET])));
    let o = o.unwrap();
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert_eq!(lines.len(), 1, "want one audit line, got {lines:#?}");
    assert_eq!(lines[0]["outcome"], "permission_denied");
    assert!(
        !lines[0].to_string().contains(SECRET),
        "the audit line holds the secret: {}",
        lines[0]
    );
}

// ---------------------------------------------------------------- timeouts no deadline can hold

/// `huge` declares a timeout of 1e30 s, `eta` an expected time of 1e308 s.
fn huge_tool(w: &World) {
    w.tool(
        &w.personal(),
        "huge.sh",
        &bash_tool(
            r#"{"protocol":1,"actions":[{"name":"go","profile":{"timeout_s":1e30,"background_eligible":true}}]}"#,
            r#"echo '"ran"'"#,
        ),
    );
    w.tool(
        &w.personal(),
        "eta.sh",
        &bash_tool(
            r#"{"protocol":1,"actions":[{"name":"go","profile":{"expected_seconds":1e308}}]}"#,
            r#"echo '"ran"'"#,
        ),
    );
}

/// A huge or non-finite timeout panicked the runner (issue 12 item 5): refused where it enters, naming the bound.
#[test]
fn huge_timeouts_are_refused_where_they_enter_and_never_panic() {
    let w = World::new();
    huge_tool(&w);
    echo_tool(&w);
    for tool in ["huge", "eta"] {
        let o = run_guarded(w.cmd().args(["call", tool, "go"]), 60).unwrap();
        assert_eq!(code(&o), 4, "{tool}: {}", stderr(&o));
        let msg = json(&o)["error"]["message"].as_str().unwrap().to_owned();
        assert!(msg.contains("at most 604800"), "{msg}");
        let o = run_guarded(w.cmd().args(["doctor", "--json"]), 60).unwrap();
        assert!(stdout(&o).contains("604800"), "doctor names it: {}", stdout(&o));
    }
    for t in ["inf", "1e30", "NaN", "-1"] {
        let o = run_guarded(w.cmd().args(["echo", "say", "--timeout", t]), 60).unwrap();
        assert_eq!(code(&o), 2, "--timeout {t}: {}", stderr(&o));
        let o = run_guarded(w.cmd().args(["jobs", "wait", "000000000000", "--timeout", t]), 60).unwrap();
        assert_eq!(code(&o), 2, "jobs wait --timeout {t}: {}", stderr(&o));
    }
    let o = run_guarded(w.cmd().args(["jobs", "prune", "--older-than", "1e300d"]), 60).unwrap();
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    std::fs::write(w.data.join("animaworks-tool.json"), r#"{"worker_idle_s": 1e300}"#).unwrap();
    let mut c = w.cmd();
    c.args(["use-tool", "--serve"]).stdin(Stdio::piped());
    let o = run_guarded(&mut c, 60).unwrap();
    assert_ne!(code(&o), 101, "{}", stderr(&o));
}

/// A tool with an unusable timeout took `use-tool --serve` down and left an MCP request unanswered (issue 12
/// item 5): every long-lived mode answers every request.
#[test]
fn long_lived_modes_answer_every_request() {
    let w = World::new();
    huge_tool(&w);
    echo_tool(&w);
    let lines = [
        json!({"id": 1, "tool_name": "huge", "action": "go", "args": {}}),
        json!({"id": 2, "tool_name": "echo", "action": "say", "args": {}}),
    ];
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let o = w.feed(&["use-tool", "--serve"], &input);
    let answers: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(
        answers.len(),
        2,
        "every request is answered: {} / {}",
        stdout(&o),
        stderr(&o)
    );
    assert_eq!(answers[0]["status"], "error");
    assert_eq!(answers[1]["status"], "ok", "{}", answers[1]);

    // MCP: a call of the broken tool gets a reply, and so does the next request.
    let got = mcp_session(
        &w,
        &[
            json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"huge_go","arguments":{}}}),
            json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo_say","arguments":{}}}),
        ],
    );
    assert!(got.contains_key(&2), "the broken tool's call got no reply: {got:?}");
    assert!(
        got[&2]["error"].is_object() || got[&2]["result"]["isError"] == true,
        "{:?}",
        got[&2]
    );
    assert_eq!(
        got.get(&3).map(|v| v["result"]["isError"].clone()),
        Some(Value::Bool(false)),
        "{got:?}"
    );
}

/// A task with a huge timeout became `lost` (issue 12 item 5): it is clamped and the task runs.
#[test]
fn a_forged_task_timeout_does_not_lose_the_task() {
    let w = World::new();
    echo_tool(&w);
    let dir = w.anima.join("state/background_tasks");
    std::fs::create_dir_all(&dir).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let t = json!({"task_id": "0123456789ab", "anima_name": "alice", "tool_name": "echo:say", "tool_args": {},
        "status": "pending", "created_at": now, "completed_at": null, "result": null, "error": null,
        "tool": "echo", "action": "say", "kind": "action", "timeout_s": 1e308, "updated_at": now});
    // Signed with the runner's task key as submit signs (a task file the runner did not sign is never run); the
    // MAC does not cover the timeout, which is what is forged here.
    let mut task: awt_tasks::Task = serde_json::from_value(t).unwrap();
    let key = awt_tasks::mac::key(&w.data).unwrap();
    awt_tasks::mac::sign(&key, &mut task, None);
    std::fs::write(dir.join("0123456789ab.json"), serde_json::to_string(&task).unwrap()).unwrap();
    let o = run_guarded(w.cmd().args(["jobs", "wait", "0123456789ab", "--timeout", "60"]), 90).unwrap();
    let o2 = w.run(&["jobs", "show", "0123456789ab"]);
    assert_eq!(code(&o), 0, "{}\n{}", stderr(&o), stdout(&o2));
    assert_eq!(json(&o2)["status"], "completed");
}
