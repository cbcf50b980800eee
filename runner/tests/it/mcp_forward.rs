//! The bridge's MCP client (rmcp's, crates/core/src/mcp_servers/client.rs) against real servers of the official
//! Python SDK: what a server's own requests are answered (refused where no MCP client of ours is behind the call;
//! forwarded to our own MCP client, the official Python SDK's, when it declared them), and cancellation on each
//! path (a one-shot call ends the server only after telling it; a session outlives a cancelled call with its
//! state).

use crate::mcp_servers::python;
use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};

const PY_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_servers/py_server.py");
const ASKING_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_servers/asking_server.py");

fn world_with(name: &str, server: Value) -> World {
    let w = World::new();
    w.settings(&json!({"mcp_servers": {name: server}}).to_string());
    w
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn ask(w: &World, what: &str) -> String {
    let o = w.run(&["asking", "ask", "--what", what]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    json(&o)["result"].as_str().unwrap_or_default().to_owned()
}

/// A bridge that declared no capability answers `roots/list` with none and refuses sampling and elicitation, as
/// its hand-written client did (rmcp's default would decline an elicitation, as if a user had said no).
#[test]
fn a_servers_own_requests_get_no_roots_and_refusals() {
    let w = world_with("asking", json!({"command": python(), "args": [ASKING_SERVER]}));
    assert_eq!(ask(&w, "roots"), "roots: 0");
    let elicit = ask(&w, "elicit");
    assert!(
        elicit.starts_with("elicit refused") && elicit.contains("not offered by animaworks-tool"),
        "{elicit}"
    );
    let sample = ask(&w, "sample");
    assert!(sample.starts_with("sample refused"), "{sample}");
}

/// `use-tool --serve` has no MCP client of its own: its session declares nothing, and a server's requests get
/// the same answers as on the command line.
#[test]
fn a_session_without_a_client_declares_nothing() {
    let w = world_with("asking", json!({"command": python(), "args": [ASKING_SERVER]}));
    let mut s = w.serve();
    let mut ask = |what: &str| {
        let v = s.ask(&json!({"tool_name": "asking", "action": "ask", "args": {"what": what}}));
        assert_eq!(v["status"], "ok", "{v}");
        let text: Value = serde_json::from_str(v["result"].as_str().unwrap_or_default()).unwrap_or_default();
        text["result"].as_str().unwrap_or_else(|| panic!("{v}")).to_owned()
    };
    assert_eq!(ask("roots"), "roots: 0");
    let elicit = ask("elicit");
    assert!(elicit.contains("not offered by animaworks-tool"), "{elicit}");
    assert!(ask("sample").starts_with("sample refused"));
    s.finish();
}

const FORWARD_CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client/forward.py");

/// The official Python SDK as our own MCP client (`declare`: it declares sampling, elicitation and roots and
/// answers them; `none`: it declares none), calling `calls` ([tool, args] pairs) at once through `mcp`.
fn through_our_client(w: &World, mode: &str, calls: Value) -> Value {
    through_our_client_then(w, mode, calls, &[])
}

/// [`through_our_client`], with the client's further steps (forward.py's fourth argument).
fn through_our_client_then(w: &World, mode: &str, calls: Value, then: &[&str]) -> Value {
    let mut c = w.cmd();
    c.env_remove("PATH");
    let mut p = Command::new(python());
    p.args([FORWARD_CLIENT, BIN, mode, &calls.to_string()])
        .args(then)
        .env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            p.env(k, v);
        }
    }
    p.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let o = p.output().unwrap();
    assert!(
        o.status.success(),
        "{mode}: the client failed:\n{}\n{}",
        stdout(&o),
        stderr(&o)
    );
    json(&o)
}

/// The text a call of the asking server's tools returned (FastMCP wraps it as `{"result": text}`).
fn said(call: &Value) -> String {
    assert_ne!(call["isError"], true, "{call}");
    let text = call["structuredContent"]["result"].as_str();
    text.unwrap_or_else(|| panic!("{call}")).to_owned()
}

/// What the server's `everything` tool got back, from a call's result.
fn got(call: &Value) -> Value {
    let text = said(call);
    serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}"))
}

/// A client that declared sampling, elicitation and roots answers a declared server's own requests (the proxy
/// chain a user expects): the answers reach the server, and the elicitation's message says which server asks.
#[test]
fn a_servers_requests_reach_our_own_client_when_it_declared_them() {
    let w = world_with("asking", json!({"command": python(), "args": [ASKING_SERVER]}));
    let v = through_our_client(&w, "declare", json!([["asking_everything", {}]]));
    let g = got(&v["calls"][0]);
    assert_eq!(
        g["roots"],
        json!([{"uri": "file:///srv/fwd-root", "name": "fwd root"}]),
        "{v}"
    );
    assert_eq!(
        g["sample"],
        json!({"model": "fwd-model", "text": "sampled: say hi"}),
        "{v}"
    );
    assert_eq!(g["elicit"], json!({"action": "accept", "data": {"c": "blue"}}), "{v}");
    assert_eq!(
        v["asked"]["elicit"],
        json!(["MCP server 'asking' asks: Which colour?"]),
        "{v}"
    );
    assert_eq!(v["asked"]["sample"], json!(["say hi"]), "{v}");
    assert_eq!(v["asked"]["roots"], 1, "{v}");
}

/// A hostile server asks our client with a secret of its environment and escape sequences: the client sees the
/// secret masked (as in the server's results), no control character that could hide which server asks, a
/// system prompt that says which server asks, and a sampling request without the client's context.
#[test]
fn what_a_server_asks_our_client_is_masked_and_printable() {
    let w = world_with(
        "asking",
        json!({"command": python(), "args": [ASKING_SERVER],
            "credentials": [{"name": "github", "env": "GITHUB_TOKEN"}]}),
    );
    let secret = "ghp_fwd12345678abcdSECRET";
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"github": {"api_key": secret}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"version": 1, "credentials": {"asking": ["github"]}}).to_string(),
    )
    .unwrap();
    let v = through_our_client(&w, "declare", json!([["asking_ask", {"what": "hostile"}]]));
    assert_eq!(said(&v["calls"][0]), "hostile: accept fwd-model", "{v}");
    let asked = v["asked"].to_string();
    assert!(
        !asked.contains(secret) && !asked.contains("ghp_fwd"),
        "a secret reached the client: {asked}"
    );
    let seen = [
        &v["asked"]["elicit"][0],
        &v["asked"]["sample"][0],
        &v["asked"]["system"][0],
    ];
    assert!(
        seen.iter().all(|s| s.as_str().is_some_and(|s| s.contains("***"))),
        "{v}"
    );
    assert_eq!(
        v["asked"]["context"],
        json!(["none"]),
        "the server got the client's context: {v}"
    );
    let message = v["asked"]["elicit"][0].as_str().unwrap_or_default();
    assert!(message.starts_with("MCP server 'asking' asks: "), "{v}");
    let system = v["asked"]["system"][0].as_str().unwrap_or_default();
    assert!(
        system.starts_with("MCP server 'asking' asks: "),
        "a sampling request says who asks: {v}"
    );
    assert!(
        !asked.contains("\\u001b") && !asked.contains("\\r") && !asked.contains("\\u0007"),
        "a control character reached the client: {asked}"
    );
}

/// A client that declared them and answers with errors: each error reaches the server as the client's.
#[test]
fn a_clients_errors_reach_the_server() {
    let w = world_with("asking", json!({"command": python(), "args": [ASKING_SERVER]}));
    let v = through_our_client(&w, "error", json!([["asking_everything", {}]]));
    let g = got(&v["calls"][0]);
    for (key, what) in [("roots", "list roots"), ("sample", "sample"), ("elicit", "ask")] {
        let said = g[key].as_str().unwrap_or_default();
        assert!(
            said.starts_with("refused") && said.contains(&format!("the client will not {what}")),
            "{key}: {v}"
        );
    }
}

/// A call whose server waits on our client's answer ends at its deadline; the server cancels its request, and
/// our client is told in turn (the person is not left with a question nobody waits for).
#[test]
fn a_request_the_server_cancels_is_cancelled_at_our_client() {
    let w = world_with(
        "asking",
        json!({"command": python(), "args": [ASKING_SERVER], "timeout_s": 3}),
    );
    let v = through_our_client(&w, "hold", json!([["asking_ask", {"what": "elicit"}]]));
    assert_eq!(v["calls"][0]["isError"], true, "the call ends at its deadline: {v}");
    assert_eq!(
        v["asked"]["elicit"],
        json!(["MCP server 'asking' asks: Which colour?"]),
        "{v}"
    );
    assert_eq!(
        v["cancelled_open"], v["asked"]["elicit"],
        "our client was not told: {v}"
    );
}

/// A client that declared none of them: the session declares none, and the server meets the old answers.
#[test]
fn a_client_that_declared_nothing_leaves_the_old_refusals() {
    let w = world_with("asking", json!({"command": python(), "args": [ASKING_SERVER]}));
    let v = through_our_client(&w, "none", json!([["asking_everything", {}]]));
    let g = got(&v["calls"][0]);
    assert_eq!(g["roots"], json!([]), "{v}");
    let sample = g["sample"].as_str().unwrap_or_default();
    assert!(sample.starts_with("refused"), "{v}");
    let elicit = g["elicit"].as_str().unwrap_or_default();
    assert!(
        elicit.starts_with("refused") && elicit.contains("not offered by animaworks-tool"),
        "{v}"
    );
}

/// Two calls in flight on one session, each asking the client three times: every request reaches the client
/// once, and each answer reaches the request it answers.
#[test]
fn requests_while_two_calls_are_in_flight_are_each_answered_once() {
    let w = world_with("asking", json!({"command": python(), "args": [ASKING_SERVER]}));
    let v = through_our_client(
        &w,
        "declare",
        json!([["asking_everything", {}], ["asking_everything", {}], ["asking_ask", {"what": "roots"}]]),
    );
    for call in &v["calls"].as_array().unwrap()[..2] {
        let g = got(call);
        assert_eq!(g["sample"]["text"], "sampled: say hi", "{v}");
        assert_eq!(g["elicit"]["data"]["c"], "blue", "{v}");
        assert_eq!(g["roots"][0]["name"], "fwd root", "{v}");
    }
    assert_eq!(said(&v["calls"][2]), "roots: 1", "{v}");
    assert_eq!(v["asked"]["roots"], 3, "{v}");
    assert_eq!(v["asked"]["sample"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["asked"]["elicit"].as_array().unwrap().len(), 2, "{v}");
}

/// The client's `notifications/roots/list_changed` reaches a server whose session declared the client's roots.
#[test]
fn a_clients_roots_change_reaches_the_servers_that_were_declared_them() {
    let w = world_with("asking", json!({"command": python(), "args": [ASKING_SERVER]}));
    let v = through_our_client_then(
        &w,
        "declare",
        json!([["asking_ask", {"what": "roots"}]]),
        &["roots-changed"],
    );
    assert_eq!(said(&v["calls"][0]), "roots: 1", "{v}");
    assert_eq!(v["changes"], "1", "the server did not hear that the roots changed: {v}");
}

/// Ctrl-C on a one-shot call: the server hears `notifications/cancelled` first, then its group is ended.
#[test]
fn a_cancelled_one_shot_call_is_said_to_the_server_before_it_ends() {
    let w = world_with("py", json!({"command": python(), "args": [PY_SERVER]}));
    let pidfile = w.tmp.path().join("hang.pid");
    let marker = w.tmp.path().join("cancelled");
    let runner = w
        .cmd()
        .args(["py", "hang", "--pidfile", pidfile.to_str().unwrap()])
        .args(["--cancelled-to", marker.to_str().unwrap(), "--timeout", "120"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        eventually(30, || read_pid(&pidfile).is_some()),
        "the server never started"
    );
    let pid = read_pid(&pidfile).unwrap();
    let st = Command::new("kill")
        .args(["-INT", &runner.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let o = runner.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(8), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("cancelled"),
        "the server was not told before it ended: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        eventually(10, || proc_stat(pid).is_none_or(|(state, _, _)| state == "Z")),
        "server {pid} outlived its cancelled call"
    );
}

/// A call cut by its deadline in `use-tool --serve` is cancelled in the server; the session goes on in the same
/// process with its state (the counter counts on). The deadline is generous: the first call starts the server.
#[test]
fn a_session_keeps_its_process_and_state_across_a_cancelled_call() {
    let w = world_with("py", json!({"command": python(), "args": [PY_SERVER], "timeout_s": 20}));
    let pidfile = w.tmp.path().join("hang.pid");
    let marker = w.tmp.path().join("cancelled");
    let mut s = w.serve();
    let counter = |s: &mut Serve| -> Value {
        let v = s.ask(&json!({"tool_name": "py", "action": "counter", "args": {}}));
        assert_eq!(v["status"], "ok", "{v}");
        let text = v["result"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| v["result"].to_string());
        serde_json::from_str(&text).unwrap_or_else(|_| v["result"].clone())
    };
    let first = counter(&mut s);
    assert_eq!(first["count"], 1, "{first}");
    let out = s.ask(&json!({"tool_name": "py", "action": "hang",
        "args": {"pidfile": pidfile, "cancelled_to": marker}}));
    assert_eq!(out["status"], "error", "{out}");
    assert!(
        eventually(20, || std::fs::read_to_string(&marker).is_ok_and(|m| m == "cancelled")),
        "the server was not told of the cancellation: {out}"
    );
    let after = counter(&mut s);
    assert_eq!(after["pid"], first["pid"], "the same process: {after}");
    assert_eq!(after["count"], 2, "its state kept: {after}");
    s.finish();
}

const ENDLESS_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_servers/endless_server.py");

fn endless_world(w: &World) -> std::path::PathBuf {
    let pages = w.tmp.path().join("pages");
    w.settings(
        &json!({"mcp_servers": {"endless": {"command": python(), "args": [ENDLESS_SERVER],
            "env": {"ENDLESS_PAGES": pages}}}})
        .to_string(),
    );
    pages
}

/// A server whose `tools/list` always has a next page is read a bounded number of pages (rmcp's own
/// `list_all_tools` would follow it forever), and what was read is offered.
#[test]
fn a_listing_that_pages_forever_is_cut_off() {
    let w = World::new();
    let pages = endless_world(&w);
    let o = w.run(&["tools", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("flood"), "{}", stdout(&o));
    let read: u32 = std::fs::read_to_string(&pages).unwrap().trim().parse().unwrap();
    assert!((2..=100).contains(&read), "pages read: {read}");
}

/// A server line longer than the bound ends the call (it is not buffered), and the error names the server.
#[test]
fn a_server_line_past_the_bound_fails_the_call() {
    let w = World::new();
    endless_world(&w);
    let o = w.run(&["call", "endless", "flood"]);
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        text.contains("the MCP server 'endless' wrote a line longer than 16 MiB"),
        "{text}"
    );
}
