//! MCP servers as tools (runner/src/mcp_servers): real servers — one written with the official Python SDK
//! (tests/mcp_servers/py_server.py), the official filesystem reference server from npm — started by the runner's
//! bridge through the one pipeline.

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const PY_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_servers/py_server.py");

/// The interpreter with the MCP Python SDK (the one on PATH, as runner/tests/mcp_client uses), resolved to its
/// real file so that a version manager's shim is not in the way.
pub(crate) fn python() -> String {
    let o = Command::new("python3")
        .args(["-c", "import sys, mcp.server.mcpserver; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "the MCP Python SDK is needed: pip install -r runner/tests/mcp_client/requirements.txt ({})",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap().trim().to_owned()
}

/// A world whose settings declare the Python SDK server as `py` with `extra` merged into its declaration.
fn py_world(extra: Value, settings: Value) -> World {
    let w = World::new();
    let mut server = json!({"command": python(), "args": [PY_SERVER]});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            server[k] = v;
        }
    }
    let mut s = settings;
    s["mcp_servers"] = json!({"py": server});
    w.settings(&s.to_string());
    w
}

fn permissions(w: &World, v: Value) {
    std::fs::write(w.anima.join("permissions.json"), v.to_string()).unwrap();
}

fn audit_lines(w: &World) -> Vec<Value> {
    let text = std::fs::read_to_string(w.anima.join(awt_core::policy::audit::AUDIT_FILE)).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

fn pid_alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|(state, _, _)| state != "Z")
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[test]
fn a_python_sdk_server_is_listed_and_called_as_a_tool() {
    let w = py_world(json!({}), json!({}));
    let o = w.run(&["tools", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = stdout(&o);
    assert!(listed.contains("\"py\""), "{listed}");
    for action in ["echo", "write_note", "count", "crash"] {
        assert!(listed.contains(action), "{action} missing: {listed}");
    }
    let o = w.run(&["py", "echo", "--text", "hello \"there\""]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o), json!({"result": "hello \"there\""}));
    // The arguments are validated against the server's inputSchema before anything is sent.
    let o = w.run(&["call", "py", "echo", "--json", r#"{"text": 5}"#]);
    assert_eq!(o.status.code(), Some(5), "{}", stdout(&o));
    let audit = audit_lines(&w);
    let calls: Vec<&Value> = audit.iter().filter(|l| l["tool"] == "py").collect();
    assert_eq!(calls.len(), 2, "one audit line a call: {audit:?}");
    assert_eq!(calls[0]["action"], "echo");
    assert_eq!(calls[0]["outcome"], "ok");
    assert_eq!(calls[1]["outcome"], "invalid_arguments");
}

#[test]
fn what_a_server_does_not_declare_read_only_is_gated_until_granted() {
    let w = py_world(json!({"gated": ["ech*"]}), json!({}));
    let note = w.tmp.path().join("note.txt");
    let note_s = note.to_str().unwrap();
    let o = w.run(&["py", "write_note", "--path", note_s, "--text", "x"]);
    assert_eq!(o.status.code(), Some(6), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("py_write_note"),
        "the refusal names the grant: {}",
        stderr(&o)
    );
    assert!(!note.exists());
    // `"gated"` gates a read-only tool too.
    let o = w.run(&["py", "echo", "--text", "x"]);
    assert_eq!(o.status.code(), Some(6), "{}", stdout(&o));
    permissions(
        &w,
        json!({"version": 1, "external_tools": {"allow_all": true, "allow": ["py_write_note", "py_echo"]}}),
    );
    let o = w.run(&["py", "write_note", "--path", note_s, "--text", "x"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "x");
    let o = w.run(&["py", "echo", "--text", "y"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_credential_reaches_the_server_at_its_start_and_is_masked() {
    let w = py_world(
        json!({"credentials": [{"name": "github", "env": "GITHUB_TOKEN"}]}),
        json!({}),
    );
    let secret = "ghp_abcdefgh12345678SECRET";
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"github": {"api_key": secret}}}).to_string(),
    )
    .unwrap();
    // Declared in the operator's settings, still only as the anima's permissions grant it.
    let o = w.run(&["py", "token"]);
    assert_eq!(o.status.code(), Some(6), "{}", stdout(&o));
    assert!(
        stderr(&o).contains(r#""credentials": {"py": ["github"]}"#),
        "{}",
        stderr(&o)
    );
    permissions(&w, json!({"version": 1, "credentials": {"py": ["github"]}}));
    let o = w.run(&["py", "token"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("token="), "{out}");
    assert!(
        !out.contains(secret) && !out.contains("ghp_abcdefgh"),
        "the secret is masked: {out}"
    );
    assert!(!out.contains("<none>"), "the server got the credential: {out}");
}

#[test]
fn progress_notifications_become_progress_events() {
    let w = py_world(json!({}), json!({}));
    let o = w.run(&["py", "count", "--n", "3", "--events"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let events: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let progress: Vec<&Value> = events.iter().filter(|e| e["type"] == "progress").collect();
    assert_eq!(progress.len(), 3, "{events:?}");
    assert_eq!(progress[2]["progress"], 3.0);
    assert_eq!(progress[2]["total"], 3.0);
    assert_eq!(progress[2]["message"], "step 3");
    assert_eq!(events.last().unwrap()["result"], json!({"result": "counted 3"}));
}

#[test]
fn an_is_error_result_is_the_tools_error() {
    let w = py_world(json!({}), json!({}));
    let o = w.run(&["call", "py", "fail"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert_eq!(json(&o)["error"]["code"], "tool_error", "{}", stdout(&o));
}

fn serve_ask(s: &mut Serve, action: &str, args: Value) -> Value {
    s.ask(&json!({"tool_name": "py", "action": action, "args": args}))
}

fn answer_pid(v: &Value) -> i64 {
    let text = v["result"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| v["result"].to_string());
    let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    parsed["result"]
        .as_i64()
        .or_else(|| v["result"]["result"].as_i64())
        .unwrap_or_else(|| panic!("no pid in {v}"))
}

#[test]
fn a_warm_server_serves_calls_and_a_crash_fails_its_call_then_it_is_restarted() {
    let w = py_world(json!({}), json!({}));
    let mut s = w.serve();
    let first = serve_ask(&mut s, "pid", json!({}));
    assert_eq!(first["status"], "ok", "{first}");
    let pid = answer_pid(&first);
    let again = serve_ask(&mut s, "pid", json!({}));
    assert_eq!(answer_pid(&again), pid, "the server stays warm between calls: {again}");
    let crash = serve_ask(&mut s, "crash", json!({}));
    assert_eq!(crash["status"], "error", "{crash}");
    assert_eq!(crash["code"], "crashed", "{crash}");
    let after = serve_ask(&mut s, "pid", json!({}));
    assert_eq!(after["status"], "ok", "{after}");
    assert_ne!(answer_pid(&after), pid, "a new server after the crash");
    s.finish();
}

#[test]
fn a_cancelled_call_ends_the_server_and_its_group() {
    let w = py_world(json!({}), json!({}));
    let pidfile = w.tmp.path().join("hang.pid");
    let runner = w
        .cmd()
        .args(["py", "hang", "--pidfile", pidfile.to_str().unwrap(), "--timeout", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        eventually(30, || read_pid(&pidfile).is_some()),
        "the server never started"
    );
    let pid = read_pid(&pidfile).unwrap();
    // SIGINT is Ctrl-C: the runner cancels the call.
    unsafe_free_kill(runner.id() as i32, "INT");
    let o = runner.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(8), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        eventually(10, || !pid_alive(pid)),
        "server {pid} outlived its cancelled call"
    );
}

fn unsafe_free_kill(pid: i32, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_crash_fails_the_call_crashed_with_the_servers_stderr() {
    let w = py_world(json!({}), json!({}));
    let o = w.run(&["call", "py", "crash"]);
    assert_eq!(o.status.code(), Some(11), "{}", stdout(&o));
    let err = &json(&o)["error"];
    assert_eq!(err["code"], "crashed");
    assert!(
        err["stderr_tail"]
            .as_str()
            .unwrap_or("")
            .contains("the server is going down"),
        "{err}"
    );
}

#[test]
fn no_server_survives_the_runner_killed() {
    let w = py_world(json!({}), json!({}));
    let pidfile = w.tmp.path().join("hang.pid");
    let mut runner = w
        .cmd()
        .args(["py", "hang", "--pidfile", pidfile.to_str().unwrap(), "--timeout", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        eventually(30, || read_pid(&pidfile).is_some()),
        "the server never started"
    );
    let pid = read_pid(&pidfile).unwrap();
    runner.kill().unwrap();
    runner.wait().unwrap();
    assert!(eventually(10, || !pid_alive(pid)), "server {pid} outlived the runner");
}

#[test]
fn a_server_that_never_answers_initialize_is_a_tool_problem() {
    let w = World::new();
    w.settings(&json!({"mcp_servers": {"mute": {"command": "sleep", "args": ["30"], "handshake_s": 0.5}}}).to_string());
    let o = w.run(&["doctor"]);
    assert_ne!(o.status.code(), Some(0));
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("mute") && text.contains("initialize"), "{text}");
    let o = w.run(&["mute", "x"]);
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn a_bad_declaration_is_a_problem_that_names_the_key() {
    let w = World::new();
    w.settings(
        &json!({"mcp_servers": {"bad": {"comand": "x"}, "web": {"type": "http", "url": "https://h.test/mcp"}}})
            .to_string(),
    );
    let o = w.run(&["doctor"]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("mcp_servers.bad") && text.contains("comand"), "{text}");
    assert!(text.contains("did you mean \"command\"?"), "{text}");
    assert_eq!(text.matches("mcp_servers.bad.comand").count(), 1, "said once: {text}");
    assert!(text.contains("only stdio servers"), "{text}");
}

/// `mcp_servers.<name>.limits` was accepted and then ignored; it now replaces the tier's limits key by key.
#[test]
fn a_servers_own_limits_replace_its_tiers_and_the_audit_line_says_where_they_come_from() {
    let w = py_world(json!({"limits": {"open_files": 77, "file_size_mib": null}}), json!({}));
    let o = w.run(&["py", "read_file", "--path", "/proc/self/limits"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let limits = json(&o)["result"].as_str().unwrap_or_default().to_owned();
    let line = |name: &str| {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert!(line("Max open files").starts_with("Max open files 77 77"), "{limits}");
    assert!(
        line("Max file size").starts_with("Max file size unlimited unlimited"),
        "{limits}"
    );
    let audit = audit_lines(&w);
    let call = audit.iter().find(|l| l["tool"] == "py").expect("an audit line");
    assert_eq!(call["sandbox"]["limits"]["open_files"]["value"], 77, "{call}");
    assert_eq!(
        call["sandbox"]["limits"]["open_files"]["from"], "mcp_servers.py.limits",
        "{call}"
    );
    assert_eq!(call["sandbox"]["limits"]["file_size_mib"], Value::Null, "{call}");
    assert_eq!(
        call["sandbox"]["limits"]["processes"]["from"], "limits.common",
        "{call}"
    );

    let zero = py_world(json!({"limits": {"memory_mib": 0}}), json!({}));
    let o = zero.run(&["doctor"]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("mcp_servers.py.limits.memory_mib is 0"), "{text}");
}

#[test]
fn animaworks_extra_mcp_servers_appear_without_copying_them() {
    let w = World::new();
    let server = json!({"command": python(), "args": [PY_SERVER], "env": {"LOG_LEVEL": "warn"}});
    std::fs::write(
        w.data.join("config.json"),
        json!({"anima_defaults": {"extra_mcp_servers": {"shared_py": server}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        w.anima.join("status.json"),
        json!({"extra_mcp_servers": {"own_py": server}}).to_string(),
    )
    .unwrap();
    let o = w.run(&["tools", "--json"]);
    let listed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let tier_of = |name: &str| -> Option<String> {
        let tools = listed["tools"].as_array().cloned().unwrap_or_default();
        tools
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["tier"].as_str().unwrap_or("").to_owned())
    };
    assert_eq!(tier_of("shared_py").as_deref(), Some("common"), "{listed}");
    assert_eq!(tier_of("own_py").as_deref(), Some("personal"), "{listed}");
    let o = w.run(&["own_py", "echo", "--text", "mine"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_server_tool_is_offered_to_llms_under_its_schema_name() {
    let w = py_world(json!({}), json!({}));
    let o = w.run(&["schemas", "--format", "anthropic"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("py_echo"), "{}", stdout(&o));
}

/// The official filesystem reference server, installed by test.sh from npm (pinned) under target/.
fn filesystem_server() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/npm-mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "test.sh installs @modelcontextprotocol/server-filesystem under target/npm-mcp-servers; it is missing"
    );
    awt_sys::skipped!("run ./test.sh once to install the npm reference server under target/npm-mcp-servers");
    None
}

#[test]
fn the_npm_filesystem_reference_server_under_the_same_policy() {
    let Some(server) = filesystem_server() else { return };
    let w = World::new();
    let docs = w.tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("a.txt"), "from the docs").unwrap();
    // Node's start under a loaded test machine can take longer than the default 30 s handshake.
    w.settings(
        &json!({"mcp_servers": {"files": {"command": "node", "args": [server, &docs], "handshake_s": 120}}})
            .to_string(),
    );
    let a = docs.join("a.txt");
    let o = w.run(&["files", "read_text_file", "--path", a.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("from the docs"), "{}", stdout(&o));
    let b = docs.join("b.txt");
    let o = w.run(&[
        "call",
        "files",
        "write_file",
        "--json",
        &json!({"path": b, "content": "x"}).to_string(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(6),
        "write_file is not read-only, so it is gated: {}",
        stdout(&o)
    );
    assert!(!b.exists());
    permissions(
        &w,
        json!({"version": 1, "external_tools": {"allow_all": true, "allow": ["files_write_file"]}}),
    );
    let o = w.run(&[
        "call",
        "files",
        "write_file",
        "--json",
        &json!({"path": b, "content": "x"}).to_string(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "x");
}

#[test]
fn a_server_tool_runs_as_a_background_task() {
    let w = py_world(json!({}), json!({}));
    let o = w.run(&["submit", "py", "echo", "--text", "later"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().expect("a task id").to_owned();
    let o = w.run(&["jobs", "wait", &id]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("later"), "{}", stdout(&o));
}

#[test]
fn the_mcp_gateway_offers_a_servers_tools_and_calls_them() {
    let w = py_world(json!({}), json!({}));
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "py_echo", "arguments": {"text": "via the gateway"}}}),
    ];
    let mut child = w
        .cmd()
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    use std::io::{BufRead, Write};
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut answers: Vec<Value> = Vec::new();
    for line in out.lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let done = v["id"] == 3;
        answers.push(v);
        if done {
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    let listed = answers.iter().find(|a| a["id"] == 2).expect("a tools/list answer");
    assert!(listed.to_string().contains("py_echo"), "{listed}");
    let called = answers.iter().find(|a| a["id"] == 3).expect("a tools/call answer");
    assert!(called.to_string().contains("via the gateway"), "{called}");
}

#[test]
fn a_server_runs_in_its_tiers_sandbox_and_cannot_read_the_runners_secrets() {
    let w = World::sandboxed();
    let secret = "ghp_zyxwvuts98765432SECRET";
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"github": {"api_key": secret}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        w.data.join("animaworks-tool.json"),
        json!({"mcp_servers": {"py": {"command": python(), "args": [PY_SERVER]}}}).to_string(),
    )
    .unwrap();
    let o = w.run(&["py", "echo", "--text", "confined"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the server runs under the default sandbox: {}",
        stderr(&o)
    );
    let config = w.data.join("config.json");
    let o = w.run(&[
        "call",
        "py",
        "read_file",
        "--json",
        &json!({"path": config}).to_string(),
    ]);
    let out = stdout(&o);
    assert_ne!(o.status.code(), Some(0), "{out}");
    assert!(!out.contains(secret), "the server read config.json: {out}");
    let audit = audit_lines(&w);
    let last = audit.iter().rev().find(|l| l["tool"] == "py").expect("an audit line");
    assert_ne!(last["sandbox"]["mode"], "off", "{last}");
}

/// `animaworks-tool mcp` driven by raw JSON-RPC lines: requests go out with their ids, answers are collected by
/// a thread, so that many calls can be in flight at once.
pub(crate) struct Gateway {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    answers: std::sync::mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Gateway {
    pub(crate) fn start(w: &World) -> Gateway {
        let mut child = w
            .cmd()
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let (tx, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in out.lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        let mut g = Gateway {
            child,
            stdin,
            answers,
            seen: Vec::new(),
        };
        g.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}));
        g.answer(0);
        g.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        g
    }

    pub(crate) fn send(&mut self, v: &Value) {
        use std::io::Write;
        writeln!(self.stdin.as_ref().unwrap(), "{v}").unwrap();
    }

    pub(crate) fn call(&mut self, id: u64, tool: &str, args: Value) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}),
        );
    }

    /// The answer to request `id` (waiting up to 180 s).
    pub(crate) fn answer(&mut self, id: u64) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
        loop {
            if let Some(i) = self
                .seen
                .iter()
                .position(|v| v["id"] == id && v.get("method").is_none())
            {
                return self.seen.remove(i);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(_) => panic!("no answer to request {id}; seen: {:?}", self.seen),
            }
        }
    }

    /// The `structuredContent` (or the text parsed) of a `tools/call` answer.
    pub(crate) fn value(&mut self, id: u64) -> Value {
        let a = self.answer(id);
        let r = &a["result"];
        assert_ne!(r["isError"], true, "{a}");
        if let Some(s) = r.get("structuredContent") {
            return s.clone();
        }
        let text = r["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{a}"));
        serde_json::from_str(text).unwrap_or_else(|_| json!(text))
    }

    /// The text of a successful `tools/call` answer.
    pub(crate) fn text(&mut self, id: u64) -> String {
        let a = self.answer(id);
        assert_ne!(a["result"]["isError"], true, "{a}");
        assert!(a.get("error").is_none(), "{a}");
        a["result"].to_string()
    }

    pub(crate) fn finish(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// A server is one session: its state holds across calls, concurrent calls and the tools' idle time, all on one
/// process (it was a pool of workers: four concurrent calls met four counters, and an idle pause a fresh one).
#[test]
fn a_servers_state_survives_concurrent_calls_and_idle_time() {
    let w = py_world(json!({}), json!({"worker_idle_s": 1}));
    let mut g = Gateway::start(&w);
    g.call(1, "py_counter", json!({}));
    let first = g.value(1);
    assert_eq!(first["count"], 1, "{first}");
    let pid = first["pid"].clone();
    for id in 2..6 {
        g.call(id, "py_counter", json!({"wait_s": 0.5}));
    }
    let mut counts: Vec<i64> = (2..6)
        .map(|id| {
            let v = g.value(id);
            assert_eq!(v["pid"], pid, "one process takes every call: {v}");
            v["count"].as_i64().unwrap()
        })
        .collect();
    counts.sort();
    assert_eq!(counts, vec![2, 3, 4, 5]);
    // Longer than worker_idle_s: a tool's worker would be gone, the server's session is not.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    g.call(6, "py_counter", json!({}));
    let after = g.value(6);
    assert_eq!(after["count"], 6, "{after}");
    assert_eq!(after["pid"], pid, "{after}");
    g.finish();
}

/// Four calls meet in the server at once: they run concurrently on one session (a worker took one at a time).
#[test]
fn concurrent_calls_run_at_once_on_one_session() {
    let w = py_world(json!({}), json!({}));
    let mut g = Gateway::start(&w);
    for id in 1..5 {
        g.call(id, "py_meet", json!({"n": 4, "within_s": 30}));
    }
    let seen: Vec<Value> = (1..5).map(|id| g.value(id)).collect();
    for v in &seen {
        assert_eq!(v["seen"], 4, "{seen:?}");
        assert_eq!(v["pid"], seen[0]["pid"], "{seen:?}");
    }
    g.finish();
}

#[test]
fn a_cancelled_call_is_cancelled_in_the_server_and_the_session_goes_on() {
    let w = py_world(json!({}), json!({}));
    let pidfile = w.tmp.path().join("hang.pid");
    let marker = w.tmp.path().join("cancelled");
    let mut g = Gateway::start(&w);
    g.call(1, "py_hang", json!({"pidfile": pidfile, "cancelled_to": marker}));
    assert!(
        eventually(60, || read_pid(&pidfile).is_some()),
        "the server never started"
    );
    let pid = read_pid(&pidfile).unwrap();
    g.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}));
    assert!(
        eventually(20, || std::fs::read_to_string(&marker).is_ok_and(|s| s == "cancelled")),
        "the server was not told of the cancellation"
    );
    g.call(2, "py_counter", json!({}));
    let v = g.value(2);
    assert_eq!(v["pid"], pid, "the session outlives a cancelled call: {v}");
    assert_eq!(v["count"], 1, "{v}");
    g.finish();
}

/// A deadline through `use-tool --serve` is forwarded as `notifications/cancelled`, and the session goes on.
#[test]
fn a_deadline_through_serve_is_cancelled_in_the_server() {
    let w = py_world(json!({"timeout_s": 5}), json!({}));
    let pidfile = w.tmp.path().join("hang.pid");
    let marker = w.tmp.path().join("cancelled");
    let mut s = w.serve();
    let out = serve_ask(&mut s, "hang", json!({"pidfile": pidfile, "cancelled_to": marker}));
    assert_eq!(out["status"], "error", "{out}");
    assert!(
        eventually(20, || std::fs::read_to_string(&marker).is_ok_and(|s| s == "cancelled")),
        "the server was not told of the cancellation: {out}"
    );
    let pid = read_pid(&pidfile).unwrap() as i64;
    let after = serve_ask(&mut s, "pid", json!({}));
    assert_eq!(answer_pid(&after), pid, "the session goes on: {after}");
    s.finish();
}

/// A server that prints a banner on stdout: the line is skipped (and said on stderr), the server works.
#[test]
fn a_stray_stdout_line_is_skipped_and_said() {
    let w = py_world(json!({"env": {"PY_SERVER_BANNER": "1"}}), json!({}));
    let o = w.run(&["tools", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"echo\""), "{}", stdout(&o));
    let o = w.run(&["py", "echo", "--text", "still here"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o), json!({"result": "still here"}));
    let mut g = Gateway::start(&w);
    g.call(1, "py_echo", json!({"text": "through the session"}));
    assert_eq!(g.value(1), json!({"result": "through the session"}));
    g.finish();
    let o = w.run(&["doctor"]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        text.contains("the MCP server 'py' wrote 1 stdout line(s) that are not JSON-RPC"),
        "doctor counts them: {text}"
    );
}

#[test]
fn an_idle_session_ends_after_its_own_idle_s() {
    let w = py_world(json!({"idle_s": 1}), json!({}));
    let mut s = w.serve();
    let pid = answer_pid(&serve_ask(&mut s, "pid", json!({}))) as i32;
    assert!(pid_alive(pid));
    assert!(
        eventually(20, || !pid_alive(pid)),
        "the idle server {pid} is still running"
    );
    let again = answer_pid(&serve_ask(&mut s, "pid", json!({}))) as i32;
    assert_ne!(again, pid);
    s.finish();
}

/// A server whose listing fails confined says so, and names its own entry's key (a failed listing said only
/// "did not answer initialize", with nothing of the sandbox).
#[test]
fn a_listing_that_fails_confined_says_so_and_names_the_servers_key() {
    let w = World::sandboxed();
    let outside = w.tmp.path().join("outside.txt");
    let script = format!("echo x > {} && exec {} {}", outside.display(), python(), PY_SERVER);
    std::fs::write(
        w.data.join("animaworks-tool.json"),
        json!({"mcp_servers": {"wr": {"command": "sh", "args": ["-c", script], "handshake_s": 60}}}).to_string(),
    )
    .unwrap();
    let o = w.run(&["doctor"]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(text.contains("it ran confined"), "{text}");
    assert!(text.contains(r#""mcp_servers"."wr"."sandbox""#), "{text}");
    assert!(!outside.exists());
}

/// A server that declares no sandbox gets its $TMP, not the anima's write grants (one server could write
/// another's data); the refusal's hint names the server's own entry.
#[test]
fn a_server_without_a_sandbox_cannot_write_the_animas_folder() {
    let w = World::sandboxed();
    let decl = |extra: Value| {
        let mut server = json!({"command": python(), "args": [PY_SERVER]});
        if let Value::Object(m) = extra {
            for (k, v) in m {
                server[k] = v;
            }
        }
        std::fs::write(
            w.data.join("animaworks-tool.json"),
            json!({"mcp_servers": {"py": server}}).to_string(),
        )
        .unwrap();
    };
    decl(json!({}));
    permissions(
        &w,
        json!({"version": 1, "external_tools": {"allow_all": true, "allow": ["py_write_note"]}}),
    );
    // As every AnimaWorks anima has (without it, nothing new can be made at the anima dir's top level).
    std::fs::write(w.anima.join("status.json"), "{}").unwrap();
    let note = w.anima.join("note.txt");
    let o = w.run(&[
        "call",
        "py",
        "write_note",
        "--json",
        &json!({"path": note, "text": "x"}).to_string(),
    ]);
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(!note.exists(), "the server wrote the anima's folder");
    let err = json(&o)["error"].clone();
    assert!(
        err.to_string().contains(r#"\"mcp_servers\".\"py\".\"sandbox\""#),
        "the hint names the server's entry: {err}"
    );
    decl(json!({"sandbox": {"write": ["$ANIMA_DIR"]}}));
    let o = w.run(&[
        "call",
        "py",
        "write_note",
        "--json",
        &json!({"path": note, "text": "x"}).to_string(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "x");
}

const RAW_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_servers/raw_server.py");

/// A dotted MCP name (SEP-986) is offered under a mapped action name and called by its own; a tool that runs only
/// as a task is left out with a problem `doctor` shows; a `list_changed` before any request is not news.
#[test]
fn dotted_names_are_mapped_and_task_only_tools_left_out_with_a_problem() {
    let w = World::new();
    w.settings(&json!({"mcp_servers": {"raw": {"command": python(), "args": [RAW_SERVER]}}}).to_string());
    let o = w.run(&["tools", "--json"]);
    assert!(stdout(&o).contains("repo_search"), "{}{}", stdout(&o), stderr(&o));
    let o = w.run(&["raw", "repo_search", "--q", "needle", "--events"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("repo.search: needle"), "called by its MCP name: {out}");
    assert!(
        !out.contains("tools changed"),
        "an initial list_changed is not news: {out}"
    );
    let o = w.run(&["doctor"]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        text.contains("long_job") && text.contains("taskSupport"),
        "the task-only tool is a problem: {text}"
    );
}

/// The docs' declaration of the filesystem server, in the common tier's default sandbox: the installed package
/// read, the served folder written, nothing else.
#[test]
fn the_filesystem_server_runs_confined_as_the_docs_declare_it() {
    let Some(server) = filesystem_server() else { return };
    let w = World::sandboxed();
    let docs = w.tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("a.txt"), "from the docs").unwrap();
    let modules = server.ancestors().nth(4).unwrap().canonicalize().unwrap();
    std::fs::write(
        w.data.join("animaworks-tool.json"),
        json!({"mcp_servers": {"files": {"command": "node", "args": [server, &docs],
            "tier": "common", "gated": ["write_file", "move_*"],
            "sandbox": {"read": [modules], "write": [&docs]}, "handshake_s": 120}}})
        .to_string(),
    )
    .unwrap();
    permissions(
        &w,
        json!({"version": 1, "external_tools": {"allow_all": true, "allow": ["files_write_file"]},
               "sandbox": {"read": [modules], "write": [&docs]}}),
    );
    let a = docs.join("a.txt");
    let o = w.run(&["files", "read_text_file", "--path", a.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("from the docs"), "{}", stdout(&o));
    let b = docs.join("b.txt");
    let o = w.run(&[
        "call",
        "files",
        "write_file",
        "--json",
        &json!({"path": b, "content": "x"}).to_string(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "x");
}

/// A session whose server exited is started again at the next call only, and that call hears so (state lost).
#[test]
fn a_crashed_session_is_started_again_and_the_next_call_hears_so() {
    let w = py_world(json!({}), json!({}));
    let mut g = Gateway::start(&w);
    g.call(1, "py_counter", json!({}));
    let first = g.value(1);
    g.call(2, "py_crash", json!({}));
    let crashed = g.answer(2);
    assert_eq!(crashed["result"]["isError"], true, "{crashed}");
    assert!(crashed.to_string().contains("crashed"), "{crashed}");
    g.call(3, "py_counter", json!({}));
    let after = g.value(3);
    assert_ne!(after["pid"], first["pid"], "{after}");
    assert_eq!(after["count"], 1, "a new session starts afresh: {after}");
    let said = g
        .seen
        .iter()
        .any(|m| m["method"] == "notifications/message" && m.to_string().contains("was started again"));
    assert!(said, "the restart is shown: {:?}", g.seen);
    g.finish();
}

/// `"gated"` names MCP tools: a dotted one gates the action it is offered as, so a server that calls its tool
/// read-only cannot slip past the gate its declaration sets. (Failed while the list was matched against the
/// action names: `repo.delete` never matched `repo_delete`.)
#[test]
fn a_gated_dotted_mcp_name_gates_its_mapped_action() {
    for gated in ["repo.search", "repo.*"] {
        let w = World::new();
        w.settings(
            &json!({"mcp_servers": {"raw": {"command": python(), "args": [RAW_SERVER], "gated": [gated]}}}).to_string(),
        );
        let o = w.run(&["raw", "repo_search", "--q", "needle"]);
        let out = format!("{}{}", stdout(&o), stderr(&o));
        assert_ne!(o.status.code(), Some(0), "{gated}: the read-only tool ran ungated: {out}");
        assert!(out.contains("permission_denied") && out.contains("raw_repo_search"), "{gated}: {out}");
        permissions(&w, json!({"external_tools": {"allow_all": true, "allow": ["raw_repo_search"]}}));
        let o = w.run(&["raw", "repo_search", "--q", "needle"]);
        assert_eq!(o.status.code(), Some(0), "{gated}: granted: {}", stderr(&o));
    }
}

/// The bridge starts what its description says, outside any sandbox of its own: only a description the runner
/// made (a sealed memory file) is taken, never one given as an argument or as a file a shell opened. A shell
/// allowed `animaworks-tool` alone cannot make it run a program. (Failed while both were taken.)
#[test]
fn the_bridge_runs_no_description_but_the_runners_own() {
    let w = World::new();
    let marker = w.tmp.path().join("started");
    let spec = json!({"name": "x", "command": "sh", "args": ["-c", format!("echo ran > {}", marker.display())]});
    let o = w.cmd().args(["__mcp-bridge", &spec.to_string(), "--schemas"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let file = w.tmp.path().join("spec.json");
    std::fs::write(&file, spec.to_string()).unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("exec \"$0\" __mcp-bridge --spec-fd 3 --schemas 3<'{}'", file.display()))
        .arg(BIN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a description the runner made"), "{}", stderr(&o));
    assert!(!marker.exists(), "the bridge started the command it was given");
}

/// A call cancelled while its (large) request is still being written to the session: the request is written
/// whole, then cancelled, and the session goes on. (Failed while the write was cut short: the rest of the line
/// ran into the cancel line, the bridge read a line that was not a request and ended the session.)
#[test]
fn a_call_cancelled_while_its_request_is_written_leaves_the_session_whole() {
    let w = py_world(json!({}), json!({}));
    let mut g = Gateway::start(&w);
    g.call(1, "py_counter", json!({}));
    let first = g.value(1);
    // `pid` takes no arguments and its schema allows more: the request is large, the answer small.
    g.call(2, "py_pid", json!({"pad": "x"}));
    let v = g.value(2);
    assert_eq!(v["result"], first["pid"], "{v}");
    let pad = "x".repeat(15 << 20);
    // When the cancel lands depends on the machine: several moments, so that some fall inside the write.
    for (i, ms) in [100u64, 200, 300, 400, 600, 800].into_iter().enumerate() {
        let id = 10 + i as u64;
        g.call(id, "py_pid", json!({"pad": pad}));
        std::thread::sleep(std::time::Duration::from_millis(ms));
        g.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}));
    }
    g.call(3, "py_counter", json!({}));
    let a = g.answer(3);
    assert_ne!(a["result"]["isError"], true, "the session ended: {a}");
    let after: Value = a["result"].get("structuredContent").cloned().unwrap_or_else(|| {
        serde_json::from_str(a["result"]["content"][0]["text"].as_str().unwrap_or("null")).unwrap()
    });
    assert_eq!(after["pid"], first["pid"], "{a}");
    assert_eq!(after["count"], 2, "the session was started again: {a}");
    g.finish();
}
