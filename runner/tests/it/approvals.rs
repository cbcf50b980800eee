//! Approvals: a gated action whose grant asks a human, on every path (docs/policy.md#approvals).

use crate::support::*;
use serde_json::{json, Value};
use std::path::PathBuf;

const SCHEMAS: &str = r#"{"protocol":1,"actions":[
 {"name":"send","input_schema":{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]},"profile":{"gated":true,"background_eligible":true}},
 {"name":"blast","input_schema":{"type":"object","properties":{"to":{"type":"string"}}},"profile":{"gated":true,"gated_as":"mass_send"}},
 {"name":"peek"}
]}"#;

/// Each run appends its request to `<anima dir>/out/sent`.
const BODY: &str =
    r#"mkdir -p "$ANIMAWORKS_ANIMA_DIR/out"; echo "$req" >> "$ANIMAWORKS_ANIMA_DIR/out/sent"; echo '{"sent":true}'"#;

fn world(permissions: Value) -> World {
    let w = World::new();
    w.tool(&w.common(), "mail", &bash_tool(SCHEMAS, BODY));
    std::fs::write(w.anima.join("permissions.json"), permissions.to_string()).unwrap();
    std::fs::write(w.data.join("config.json"), r#"{"locale": "en"}"#).unwrap();
    w
}

pub(crate) fn asking() -> World {
    world(json!({"external_tools": {"ask": ["mail_*"]}}))
}

fn sent(w: &World) -> Vec<String> {
    std::fs::read_to_string(w.anima.join("out/sent"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn note(w: &World, id: &str) -> PathBuf {
    w.anima.join(format!("state/background_notifications/{id}.md"))
}

/// `call mail send` without a terminal: exit 14, the request id.
fn pending(w: &World, to: &str) -> String {
    let o = w.run(&["call", "mail", "send", "--json", &json!({"to": to}).to_string()]);
    assert_eq!(
        code(&o),
        14,
        "approval_pending is exit 14: {} {}",
        stdout(&o),
        stderr(&o)
    );
    let e = &json(&o)["error"];
    assert_eq!(e["code"], "approval_pending", "{e}");
    assert_eq!(e["key"], "mail_send", "{e}");
    let id = e["approval_id"].as_str().expect("the request id").to_owned();
    assert!(
        e["hint"].as_str().unwrap().contains(&format!("approvals approve {id}")),
        "{e}"
    );
    id
}

/// The runner as a human at their own shell: not in the anima's environment.
fn operator(w: &World, args: &[&str]) -> std::process::Output {
    w.cmd().env_remove("ANIMAWORKS_ANIMA_DIR").args(args).output().unwrap()
}

fn record_path(w: &World, id: &str) -> PathBuf {
    w.data.join(format!("state/animaworks-tool/approvals/{id}.json"))
}

#[test]
fn a_call_that_asks_waits_and_runs_once_when_approved() {
    let w = asking();
    let id = pending(&w, "bob");
    assert!(sent(&w).is_empty(), "nothing runs before a human answers");
    let o = w.run(&["approvals", "list", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let list = json(&o);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["status"], "pending");
    assert_eq!(list[0]["binding"]["anima"], "alice");
    assert_eq!(list[0]["args"], json!({"to": "bob"}));
    // The same call asked again while its request waits is the same request.
    assert_eq!(pending(&w, "bob"), id);
    let o = operator(
        &w,
        &["approvals", "approve", &id, "--by", "ops", "--reason", "looks fine"],
    );
    assert_eq!(code(&o), 0, "{} {}", stdout(&o), stderr(&o));
    assert!(eventually(20, || note(&w, &id).exists()), "no notification");
    let text = std::fs::read_to_string(note(&w, &id)).unwrap();
    assert!(text.contains("completed") && text.contains(&id), "{text}");
    assert_eq!(sent(&w).len(), 1, "{:?}", sent(&w));
    assert!(sent(&w)[0].contains(r#""to":"bob""#), "{:?}", sent(&w));
    let audit = audit_text(&w);
    assert!(
        audit.contains("approval_approved") && audit.contains("by ops") && audit.contains("looks fine"),
        "{audit}"
    );
    // A replayed task of the same approval (its worker redeems it again) is refused: the approval was used.
    let store = awt_tasks::approvals::Approvals::open(&w.data).unwrap();
    let e = store.redeem(&id).err().expect("used once");
    assert!(e.message.contains("used"), "{e}");
    // Used: approving it again is refused, and the same call asks anew (an approval is one call).
    let o = operator(&w, &["approvals", "approve", &id]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let again = pending(&w, "bob");
    assert_ne!(again, id);
    assert_eq!(sent(&w).len(), 1);
}

#[test]
fn a_denied_request_never_runs_and_the_anima_is_told() {
    let w = asking();
    let id = pending(&w, "eve");
    let o = w.run(&["approvals", "deny", &id, "--reason", "not to eve", "--by", "boss"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = std::fs::read_to_string(note(&w, &id)).expect("the anima is notified");
    assert!(
        text.contains("denied") && text.contains("not to eve") && text.contains("boss"),
        "{text}"
    );
    assert!(sent(&w).is_empty());
    let o = operator(&w, &["approvals", "approve", &id]);
    assert_eq!(code(&o), 2, "a denied request cannot be approved after: {}", stderr(&o));
    assert!(audit_text(&w).contains("approval_denied"));
}

#[test]
fn an_expired_request_is_not_approved_and_the_anima_is_told() {
    let w = asking();
    w.settings(r#"{"approvals": {"ttl_s": 1}}"#);
    let id = pending(&w, "bob");
    assert!(
        eventually(20, || {
            let o = w.run(&["approvals", "list", "--all", "--json"]);
            json(&o)[0]["status"] == "expired"
        }),
        "the request never expired"
    );
    let text = std::fs::read_to_string(note(&w, &id)).expect("the anima is notified");
    assert!(text.contains("expired"), "{text}");
    let o = operator(&w, &["approvals", "approve", &id]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(sent(&w).is_empty());
}

#[test]
fn a_forged_or_changed_request_is_refused() {
    let w = asking();
    let id = pending(&w, "bob");
    let path = record_path(&w, &id);
    let text = std::fs::read_to_string(&path).unwrap();
    // Changed arguments (the MAC covers every field).
    std::fs::write(&path, text.replace(r#""to": "bob""#, r#""to": "mallory""#)).unwrap();
    let o = operator(&w, &["approvals", "approve", &id]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    assert!(stderr(&o).contains("forged or changed"), "{}", stderr(&o));
    // A request written by anything but the runner (no key): refused too.
    let mut v: Value = serde_json::from_str(&text).unwrap();
    v["id"] = json!("aaaaaaaaaaaa");
    v["mac"] = json!("0000000000000000:00");
    std::fs::write(record_path(&w, "aaaaaaaaaaaa"), v.to_string()).unwrap();
    let o = operator(&w, &["approvals", "approve", "aaaaaaaaaaaa"]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    assert!(sent(&w).is_empty());
    let o = w.run(&["approvals", "list", "--json"]);
    assert_eq!(json(&o), json!([]), "a record that does not verify is not listed");
}

#[test]
fn a_tool_file_rewritten_after_the_request_does_not_run_on_its_approval() {
    let w = asking();
    let id = pending(&w, "bob");
    w.tool(&w.common(), "mail", &bash_tool(SCHEMAS, &format!("{BODY}\n# changed")));
    let o = operator(&w, &["approvals", "approve", &id]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(eventually(20, || note(&w, &id).exists()), "no notification");
    let text = std::fs::read_to_string(note(&w, &id)).unwrap();
    assert!(text.contains("failed") && text.contains("tool file"), "{text}");
    assert!(sent(&w).is_empty());
}

/// An MCP server's approval binds its script too, not only the file that declares it: a script changed after the
/// request does not run on the approval. (Ran while only the declaration was bound.)
#[test]
fn an_mcp_servers_script_changed_after_the_request_does_not_run_on_its_approval() {
    let w = World::new();
    std::fs::write(w.anima.join("status.json"), "{}").unwrap();
    let script = w.anima.join("srv.py");
    let source =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_servers/py_server.py")).unwrap();
    std::fs::write(&script, &source).unwrap();
    let server = json!({"command": crate::mcp_servers::python(), "args": [script.to_str().unwrap()]});
    w.settings(&json!({"mcp_servers": {"py": server}}).to_string());
    std::fs::write(w.data.join("config.json"), r#"{"locale": "en"}"#).unwrap();
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"external_tools": {"allow_all": true, "ask": ["py_write_note"]}}).to_string(),
    )
    .unwrap();
    let note_path = w.anima.join("note.txt");
    let args = json!({"path": note_path.to_str().unwrap(), "text": "hi"}).to_string();
    let o = w.run(&["call", "py", "write_note", "--json", &args]);
    assert_eq!(code(&o), 14, "approval_pending: {} {}", stdout(&o), stderr(&o));
    let id = json(&o)["error"]["approval_id"]
        .as_str()
        .expect("the request id")
        .to_owned();
    std::fs::write(&script, format!("{source}\n# changed\n")).unwrap();
    let o = operator(&w, &["approvals", "approve", &id]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(eventually(30, || note(&w, &id).exists()), "no notification");
    let text = std::fs::read_to_string(note(&w, &id)).unwrap();
    assert!(text.contains("failed") && text.contains("tool file"), "{text}");
    assert!(!note_path.exists(), "the changed server ran on the approval");
}

/// Through the library: an approval never covers other arguments.
#[test]
fn an_approval_is_not_stretched_to_other_arguments() {
    use awt_core::call::approve::{Approval, Grant};
    let w = asking();
    let runner = w.runner();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let args = |to: &str| json!({"to": to}).as_object().unwrap().clone();
        let deferred = awt_core::call::CallOptions {
            approval: Approval::Defer,
            ..Default::default()
        };
        let tool = runner.open("mail").await.unwrap();
        let e = tool
            .action("send")
            .unwrap()
            .prepare(args("bob"), &deferred)
            .err()
            .expect("asks");
        assert_eq!(e.code, awt_core::error::ErrorCode::ApprovalPending);
        let grant = Grant::from_error(&e).expect("the binding");
        let granted = awt_core::call::CallOptions {
            approval: Approval::Granted(grant),
            ..Default::default()
        };
        let tool = runner.open("mail").await.unwrap();
        let e = tool
            .action("send")
            .unwrap()
            .prepare(args("mallory"), &granted)
            .err()
            .expect("refused");
        assert_eq!(e.code, awt_core::error::ErrorCode::PermissionDenied, "{e}");
        assert_eq!(e.details["reason"], "approval_mismatch", "{e}");
        let tool = runner.open("mail").await.unwrap();
        assert!(tool.action("send").unwrap().prepare(args("bob"), &granted).is_ok());
    });
}

#[test]
fn allow_and_deny_win_over_ask_and_gated_as_names_the_grant() {
    let w = world(json!({"external_tools": {"ask": ["mail_*"], "allow": ["mail_send"]}}));
    let o = w.run(&["call", "mail", "send", "--json", r#"{"to":"bob"}"#]);
    assert_eq!(code(&o), 0, "allow wins: {}", stdout(&o));
    let w = world(json!({"external_tools": {"ask": ["mail_*"], "deny": ["mail_send"]}}));
    let o = w.run(&["call", "mail", "send", "--json", r#"{"to":"bob"}"#]);
    assert_eq!(code(&o), 6, "deny wins: {}", stdout(&o));
    // Not in ask: refused as before.
    let w = world(json!({"external_tools": {"ask": ["mail_send"]}}));
    let o = w.run(&["call", "mail", "blast", "--json", r#"{"to":"all"}"#]);
    assert_eq!(code(&o), 6, "{}", stdout(&o));
    // The grant a gated_as action asks under is its gated_as name.
    let w = world(json!({"external_tools": {"ask": ["mail_mass_send"]}}));
    let o = w.run(&["call", "mail", "blast", "--json", r#"{"to":"all"}"#]);
    assert_eq!(code(&o), 14, "{}", stdout(&o));
    assert_eq!(json(&o)["error"]["key"], "mail_mass_send");
    // The settings' default for the tier asks too.
    let w = world(json!({}));
    w.settings(r#"{"approvals": {"ask": {"common": ["mail_send"]}}}"#);
    let o = w.run(&["call", "mail", "send", "--json", r#"{"to":"bob"}"#]);
    assert_eq!(code(&o), 14, "{}", stdout(&o));
    let o = w.run(&["call", "mail", "peek"]);
    assert_eq!(code(&o), 0, "an open action never asks: {}", stdout(&o));
}

#[test]
fn use_tool_answers_pending_in_animaworks_shape_and_locale() {
    let w = asking();
    std::fs::remove_file(w.data.join("config.json")).unwrap();
    let o = w.feed(
        &["use-tool"],
        &json!({"tool_name": "mail", "action": "send", "args": {"to": "bob"}}).to_string(),
    );
    let answer: Value = serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|_| panic!("{}", stdout(&o)));
    assert_eq!(answer["status"], "error", "{answer}");
    assert_eq!(answer["error_type"], "ApprovalPending", "{answer}");
    assert_eq!(answer["code"], "approval_pending", "{answer}");
    let id = answer["approval_id"].as_str().expect("the id");
    let msg = answer["message"].as_str().unwrap();
    assert!(
        msg.contains("承認") && msg.contains("inbox") && msg.contains(id),
        "ja by default: {msg}"
    );
    assert!(sent(&w).is_empty());
    let o = operator(&w, &["approvals", "approve", id]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(eventually(20, || note(&w, id).exists()));
    assert_eq!(sent(&w).len(), 1);
}

/// Run the runner with stdin and stderr on a fresh pseudo-terminal (stdout piped); once the terminal shows the
/// prompt, type `answer`. Returns the exit code, stdout and what the terminal showed.
pub(crate) fn at_terminal(w: &World, args: &[&str], answer: &'static str) -> (Option<i32>, String, String) {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    use std::process::Stdio;
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two fds into the given ints.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty failed");
    // SAFETY: both fds were just opened by openpty and are owned here.
    let (master, slave) = unsafe { (std::fs::File::from_raw_fd(master), std::fs::File::from_raw_fd(slave)) };
    let mut cmd = w.cmd();
    cmd.args(args)
        .stdin(slave.try_clone().unwrap())
        .stderr(slave)
        .stdout(Stdio::piped());
    let child = cmd.spawn().unwrap();
    drop(cmd);
    let mut typist = master.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let (mut all, mut buf, mut typed) = (Vec::new(), [0u8; 4096], false);
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
            if !typed && String::from_utf8_lossy(&all).contains("[y/N]") {
                typed = true;
                typist.write_all(answer.as_bytes()).unwrap();
            }
        }
        all
    });
    let out = child.wait_with_output().unwrap();
    let term = reader.join().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&term).into_owned(),
    )
}

#[test]
fn at_a_terminal_the_prompt_runs_the_call_on_y_and_refuses_otherwise() {
    let w = asking();
    let (code, out, term) = at_terminal(&w, &["mail", "send", "--to", "bob"], "y\n");
    assert_eq!(code, Some(0), "stdout {out}\nterminal {term}");
    assert!(
        term.contains("mail_send") && term.contains("alice") && term.contains("bob"),
        "{term}"
    );
    assert_eq!(sent(&w).len(), 1, "{term}");
    let (code, out, term) = at_terminal(&w, &["mail", "send", "--to", "carol"], "n\n");
    assert_eq!(code, Some(6), "stdout {out}\nterminal {term}");
    assert!(
        term.contains("approval_declined") || term.contains("not approved"),
        "{term}"
    );
    let (code, _, term) = at_terminal(&w, &["mail", "send", "--to", "dave"], "yes please\n");
    assert_eq!(code, Some(6), "only y runs it: {term}");
    assert_eq!(sent(&w).len(), 1);
    let o = w.run(&["approvals", "list", "--all", "--json"]);
    assert_eq!(json(&o), json!([]), "a prompt files no request");
}

#[test]
fn submit_and_serve_answer_pending_and_each_approval_runs_once() {
    let w = asking();
    let o = w.run(&["submit", "mail", "send", "--to", "bob"]);
    assert_eq!(code(&o), 14, "{} {}", stdout(&o), stderr(&o));
    // `submit` answers as AnimaWorks' CLI does: one `Error: …` line on stderr naming the request, nothing on stdout.
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.starts_with("Error: "), "{err}");
    let by_submit = err
        .split("(approval_id: ")
        .nth(1)
        .and_then(|t| t.split(')').next())
        .unwrap_or_else(|| panic!("no approval_id in {err}"))
        .to_owned();
    assert!(
        err.contains(&format!("approvals approve {by_submit}")),
        "the hint says how a human approves: {err}"
    );
    let jobs = tasks_of(&w);
    assert!(jobs.is_empty(), "nothing is queued before approval: {jobs:?}");
    let mut serve = w.serve();
    let answer = serve.ask(&json!({"tool_name": "mail", "action": "send", "args": {"to": "zed"}}));
    assert_eq!(answer["error_type"], "ApprovalPending", "{answer}");
    let by_serve = answer["approval_id"].as_str().unwrap().to_owned();
    assert!(serve.finish().success());
    assert_ne!(by_submit, by_serve);
    for id in [&by_submit, &by_serve] {
        let o = operator(&w, &["approvals", "approve", id]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    assert!(eventually(20, || note(&w, &by_submit).exists() && note(&w, &by_serve).exists()));
    let mut got = sent(&w);
    got.sort();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().any(|l| l.contains(r#""to":"bob""#)) && got.iter().any(|l| l.contains(r#""to":"zed""#)));
    // The approved task is an ordinary task of the same id, with the anima's result.
    let o = w.run(&["jobs", "show", &by_submit]);
    assert_eq!(json(&o)["status"], "completed", "{}", stdout(&o));
}

fn tasks_of(w: &World) -> Vec<String> {
    std::fs::read_dir(w.anima.join("state/background_tasks"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && n.len() == 17)
        .collect()
}

/// The MCP server with the official Python SDK client: `elicitation/create` when the client declared the
/// capability (accept runs the call, decline and cancel refuse it), the pending path when it did not.
#[test]
fn mcp_elicitation_with_the_python_sdk_client() {
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/test-venv/bin/python3");
    let python = if std::path::Path::new(venv).exists() {
        venv
    } else {
        "python3"
    };
    let has_mcp = std::process::Command::new(python)
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_mcp,
        "the MCP Python SDK is needed: pip install -r runner/tests/mcp_client/requirements.txt (./test.sh does)"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client/approval.py");
    let run = |w: &World, mode: &str| {
        let mut c = w.cmd();
        c.env_remove("PATH");
        let mut p = std::process::Command::new(python);
        p.args([script, BIN, mode]).env_clear();
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                p.env(k, v);
            }
        }
        p.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        let o = p.output().unwrap();
        assert!(
            o.status.success(),
            "{mode}: client failed:\n{}\n{}",
            stdout(&o),
            stderr(&o)
        );
        json(&o)
    };
    let w = asking();
    let v = run(&w, "accept");
    assert!(
        v["listed"].as_array().unwrap().contains(&json!("mail_send")),
        "an asking action is offered: {v}"
    );
    let asked = v["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{v}");
    let msg = asked[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("mail_send") && msg.contains("alice") && msg.contains("send"),
        "{msg}"
    );
    // The arguments the approval binds are shown: a human is never asked to approve what they cannot see.
    // (Failed while the question left them out.)
    assert!(msg.contains(r#"{"to":"bob"}"#), "{msg}");
    assert_ne!(v["call"]["isError"], json!(true), "accepted: it runs: {v}");
    assert_eq!(sent(&w).len(), 1);
    for mode in ["decline", "cancel"] {
        let v = run(&w, mode);
        assert_eq!(v["call"]["isError"], json!(true), "{mode}: {v}");
        assert_eq!(
            v["call"]["_meta"]["animaworks-tool/error"]["reason"], "approval_declined",
            "{mode}: {v}"
        );
        assert_eq!(sent(&w).len(), 1, "{mode}");
    }
    let o = w.run(&["approvals", "list", "--all", "--json"]);
    assert_eq!(json(&o), json!([]), "an elicitation files no request");
    let v = run(&w, "none");
    assert_eq!(v["asked"], json!([]));
    assert_eq!(v["call"]["isError"], json!(true), "{v}");
    let e = &v["call"]["_meta"]["animaworks-tool/error"];
    assert_eq!(e["code"], "approval_pending", "{v}");
    let id = e["approval_id"].as_str().unwrap();
    let o = operator(&w, &["approvals", "approve", id]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(eventually(20, || note(&w, id).exists()));
    assert_eq!(sent(&w).len(), 2);
}

/// An AnimaWorks module's gated subcommand asks as an action does, answered in AnimaWorks' words.
const LEGACY: &str = r#"
import argparse, json, os

EXECUTION_PROFILE = {"delete-all": {"gated": True, "background_eligible": True}}


def get_tool_schemas():
    return []


def cli_main(argv):
    p = argparse.ArgumentParser(prog="leg")
    sub = p.add_subparsers(dest="cmd")
    d = sub.add_parser("delete-all")
    d.add_argument("--scope")
    d.add_argument("-j", action="store_true")
    sub.add_parser("list")
    p.add_argument("-j", action="store_true")
    a = p.parse_args(argv)
    out = os.path.join(os.environ["ANIMAWORKS_ANIMA_DIR"], "out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "sent"), "a") as f:
        f.write(json.dumps({"cmd": a.cmd, "scope": getattr(a, "scope", None)}) + "\n")
    print("ran", a.cmd)
"#;

#[test]
fn a_legacy_subcommand_asks_and_runs_once_approved() {
    let w = world(json!({"external_tools": {"ask": ["leg_*"]}}));
    std::fs::remove_file(w.data.join("config.json")).unwrap();
    std::fs::write(w.personal().join("leg.py"), LEGACY).unwrap();
    let o = run_guarded(w.cmd().args(["leg", "delete-all", "--scope", "tmp"]), 60).unwrap();
    assert_eq!(code(&o), 14, "{} {}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(
        err.starts_with("Error: ") && err.contains("承認") && err.contains("inbox"),
        "{err}"
    );
    assert!(sent(&w).is_empty());
    let o = w.run(&["approvals", "list", "--json"]);
    let list = json(&o);
    let id = list[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(list[0]["binding"]["action"], "cli", "{list}");
    assert_eq!(list[0]["keys"], json!(["leg_delete-all"]), "{list}");
    let o = operator(&w, &["approvals", "approve", &id]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(eventually(60, || note(&w, &id).exists()), "no notification");
    let text = std::fs::read_to_string(note(&w, &id)).unwrap();
    assert!(text.contains("completed"), "{text}");
    assert_eq!(sent(&w), vec![r#"{"cmd": "delete-all", "scope": "tmp"}"#.to_owned()]);
}

#[test]
fn the_notify_command_gets_the_request_and_doctor_lists_it() {
    let w = asking();
    let seen = w.tmp.path().join("notified.json");
    let script = w.tool(
        w.tmp.path(),
        "notify.sh",
        &format!(
            "#!/bin/sh\ncat > {}.tmp && mv {}.tmp {}\n",
            seen.display(),
            seen.display(),
            seen.display()
        ),
    );
    w.settings(&json!({"approvals": {"notify": [script]}}).to_string());
    let id = pending(&w, "bob");
    assert!(eventually(20, || seen.exists()), "the notify command never ran");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(v["id"], id.as_str(), "{v}");
    assert_eq!(v["args"], json!({"to": "bob"}), "{v}");
    assert_eq!(v["approve"], format!("animaworks-tool approvals approve {id}"), "{v}");
    assert!(v.get("mac").is_none(), "{v}");
    let o = w.run(&["doctor", "--json"]);
    let d = json(&o);
    assert_eq!(d["approvals_pending"][0]["id"], id.as_str(), "{d}");
    let o = w.run(&["doctor"]);
    assert!(
        stdout(&o).contains(&id) && stdout(&o).contains("approvals waiting"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn an_anima_does_not_approve_its_own_request_nor_a_tool() {
    let w = asking();
    let id = pending(&w, "bob");
    let o = w.run(&["approvals", "approve", &id]);
    assert_eq!(code(&o), 6, "from the anima's own environment: {}", stderr(&o));
    assert!(
        stderr(&o).contains("does not approve its own request"),
        "{}",
        stderr(&o)
    );
    let o = w
        .cmd()
        .env_remove("ANIMAWORKS_ANIMA_DIR")
        .env("ANIMAWORKS_CALL_ID", "c-1")
        .args(["approvals", "approve", &id])
        .output()
        .unwrap();
    assert_eq!(code(&o), 6, "from inside a tool call: {}", stderr(&o));
    let o = w.run(&["approvals", "list", "--json"]);
    assert_eq!(json(&o)[0]["status"], "pending");
    assert!(sent(&w).is_empty());
}

/// Postgres: the request is a row made on the worker's machine, approved through another runner (its own data
/// dir, the same task key and database), and run once by the worker; a replayed redeem is refused.
#[test]
fn pg_a_request_made_on_one_machine_is_approved_on_another_and_runs_once() {
    crate::need_postgres!();
    let w = asking();
    let url = crate::pg_cluster::shared().new_db();
    let settings = json!({"tasks": {"backend": "postgres", "url": url, "lease_s": 6, "drain_s": 2, "poll_s": 1}});
    w.settings(&settings.to_string());
    let other = w.tmp.path().join("other-machine");
    std::fs::create_dir_all(other.join("common_tools")).unwrap();
    let mut s = settings.clone();
    s["sandbox"] = json!({"common": "off", "personal": "off"});
    std::fs::write(other.join("animaworks-tool.json"), s.to_string()).unwrap();
    crate::tasks_pg::share_task_key(&w.data, &other);
    let o = w.run(&["jobs", "migrate"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let animas = w.anima.parent().unwrap().to_path_buf();
    let log = w.tmp.path().join("worker.log");
    let mut worker = w
        .cmd()
        .env_remove("ANIMAWORKS_ANIMA_DIR")
        .args(["worker", "--concurrency", "2", "--animas-dir"])
        .arg(&animas)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let id = pending(&w, "bob");
    assert_eq!(
        crate::pg_cluster::scalar(&url, &format!("SELECT status FROM awt_approvals WHERE id = '{id}'")),
        "pending"
    );
    assert!(
        !w.data
            .join(format!("state/animaworks-tool/approvals/{id}.json"))
            .exists(),
        "a row, not a file"
    );
    let o = w
        .cmd()
        .env_remove("ANIMAWORKS_ANIMA_DIR")
        .env("ANIMAWORKS_DATA_DIR", &other)
        .args(["approvals", "approve", &id, "--by", "ops-elsewhere"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{} {}", stdout(&o), stderr(&o));
    let ok = eventually(30, || note(&w, &id).exists());
    let _ = worker.kill();
    let _ = worker.wait();
    assert!(
        ok,
        "no notification; worker log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let text = std::fs::read_to_string(note(&w, &id)).unwrap();
    assert!(text.contains("completed"), "{text}");
    assert_eq!(sent(&w).len(), 1, "{:?}", sent(&w));
    assert_eq!(
        crate::pg_cluster::scalar(&url, &format!("SELECT status FROM awt_approvals WHERE id = '{id}'")),
        "used"
    );
    let n = crate::pg_cluster::scalar(
        &url,
        &format!("SELECT count(*) FROM awt_approval_steps WHERE id = '{id}'"),
    );
    assert_eq!(n, "2", "decided and used, once each");
    let o = w
        .cmd()
        .env_remove("ANIMAWORKS_ANIMA_DIR")
        .args(["approvals", "approve", &id])
        .output()
        .unwrap();
    assert_eq!(code(&o), 2, "used: {}", stderr(&o));
    // Pruned on the other machine: the row and its steps go.
    let o = w
        .cmd()
        .env_remove("ANIMAWORKS_ANIMA_DIR")
        .env("ANIMAWORKS_DATA_DIR", &other)
        .args(["approvals", "prune", "--json"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&o)["removed"][0]["id"], id.as_str(), "{}", stdout(&o));
    for table in ["awt_approvals", "awt_approval_steps"] {
        let n = crate::pg_cluster::scalar(&url, &format!("SELECT count(*) FROM {table} WHERE id = '{id}'"));
        assert_eq!(n, "0", "{table}");
    }
}

/// A link left in place of the anima's `state/background_notifications` (to another anima's inbox) is never
/// followed by the notice of a decided request: nothing lands in the other anima's folder. (Failed while the
/// notice was written with `create_dir_all` and a path write, through the link.)
#[test]
fn a_decided_requests_notice_never_follows_a_link_to_another_animas_inbox() {
    let w = asking();
    let id = pending(&w, "eve");
    let bob_inbox = w.anima.parent().unwrap().join("bob/state/background_notifications");
    std::fs::create_dir_all(&bob_inbox).unwrap();
    let notes = w.anima.join("state/background_notifications");
    let _ = std::fs::remove_dir_all(&notes);
    std::fs::create_dir_all(w.anima.join("state")).unwrap();
    std::os::unix::fs::symlink("../../bob/state/background_notifications", &notes).unwrap();
    let o = w.run(&["approvals", "deny", &id, "--reason", "no"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let landed: Vec<_> = std::fs::read_dir(&bob_inbox)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(landed.is_empty(), "alice's notice landed in bob's inbox: {landed:?}");
    assert!(
        std::fs::symlink_metadata(&notes).unwrap().file_type().is_symlink(),
        "the link is left for its owner to see"
    );
}

/// `approvals prune` removes decided requests with their files and says which; a waiting request stays, an age
/// keeps the young, and a dry run removes nothing.
#[test]
fn prune_removes_decided_requests_and_keeps_waiting_ones() {
    let w = asking();
    let denied = pending(&w, "eve");
    let o = operator(&w, &["approvals", "deny", &denied]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let waiting = pending(&w, "bob");
    let o = operator(&w, &["approvals", "prune", "--dry-run"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("would remove 1") && stdout(&o).contains(&denied),
        "{}",
        stdout(&o)
    );
    assert!(record_path(&w, &denied).exists(), "a dry run removed it");
    let o = operator(&w, &["approvals", "prune", "--older-than", "7d", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(json(&o)["removed"], json!([]), "decided just now: {}", stdout(&o));
    let o = operator(&w, &["approvals", "prune", "--older-than", "soon"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let o = operator(&w, &["approvals", "prune"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("removed 1") && out.contains(&denied) && out.contains("kept: 1 pending"),
        "{out}"
    );
    assert!(!record_path(&w, &denied).exists());
    let dir = w.data.join("state/animaworks-tool/approvals");
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.iter().all(|n| !n.starts_with(denied.as_str())), "{left:?}");
    assert!(record_path(&w, &waiting).exists());
    assert!(
        audit_text(&w).contains("approval_denied"),
        "the decision stays in the audit log"
    );
}
