//! Every entry point goes through the one call pipeline: the same gate, one audit line per attempt, secrets
//! masked everywhere. A table of entry points, each driven as its users drive it (real processes and pipes).

mod attempts;

use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

const SECRET: &str = "sekrit-XYZ-12345";

/// A tool with a gated action and an open one; both declare the credential `svc` and say it everywhere.
const GT: &str = r#"{"protocol":1,"actions":[
 {"name":"purge","description":"Purge.","input_schema":{"type":"object","properties":{"note":{"type":"string"}}},
  "profile":{"gated":true,"background_eligible":true,"credentials":[{"name":"svc","env":"SVC_TOKEN"}]}},
 {"name":"leak","description":"Fails, saying its secret.","input_schema":{"type":"object","properties":{"note":{"type":"string"}}},
  "profile":{"background_eligible":true,"credentials":[{"name":"svc","env":"SVC_TOKEN"}]}}]}"#;

const GT_BODY: &str = r#"echo "stderr says $SVC_TOKEN" >&2
case "$req" in
  *'"name":"gt_purge"'*) echo "{\"purged\": true, \"token\": \"$SVC_TOKEN\"}" ;;
  *) echo "{\"error\": {\"message\": \"bad token $SVC_TOKEN\", \"hint\": \"rotate $SVC_TOKEN\"}}"; exit 1 ;;
esac"#;

/// A legacy module whose `purge` subcommand is gated.
const LEG: &str = "import argparse, json\n\
EXECUTION_PROFILE = {'purge': {'gated': True, 'background_eligible': True}}\n\
def get_tool_schemas():\n\
\x20   return [{'name': 'leg_purge', 'description': 'Purge.', 'input_schema': {'type': 'object', 'properties': {}}}]\n\
def dispatch(name, args):\n\
\x20   return {'purged': True}\n\
def cli_main(argv=None):\n\
\x20   p = argparse.ArgumentParser(prog='leg')\n\
\x20   sub = p.add_subparsers(dest='action', required=True)\n\
\x20   sub.add_parser('purge').add_argument('-j', action='store_true')\n\
\x20   p.parse_args(argv)\n\
\x20   print(json.dumps({'purged': True, 'via': 'cli_main'}))\n";

fn world() -> World {
    let w = World::new();
    w.tool(&w.common(), "gt.sh", &bash_tool(GT, GT_BODY));
    std::fs::write(w.common().join("leg.py"), LEG).unwrap();
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"svc": {"api_key": SECRET}}}).to_string(),
    )
    .unwrap();
    w.grant_credentials("gt", &["svc"]);
    w.grant_credentials("leg", &["svc"]);
    w
}

fn grant(w: &World, allow: &[&str]) {
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"version": 1, "external_tools": {"allow_all": true, "allow": allow},
               "credentials": {"gt": ["svc"], "leg": ["svc"]}})
        .to_string(),
    )
    .unwrap();
}

/// What one attempt showed: its error code (`None` when it succeeded), the grant key a refusal named, and every
/// byte a user could see or find afterwards (stdout, stderr, task file, notification).
#[derive(Debug)]
struct Seen {
    code: Option<String>,
    key: Option<String>,
    blob: String,
}

/// The first object holding `"code"` (an error), anywhere in `v`.
fn find_error(v: &Value) -> Option<&serde_json::Map<String, Value>> {
    match v {
        Value::Object(o) if o.get("code").is_some_and(Value::is_string) && o.contains_key("message") => Some(o),
        Value::Object(o) => o.values().find_map(find_error),
        Value::Array(a) => a.iter().find_map(find_error),
        _ => None,
    }
}

fn seen_of(text: &str, blob: String) -> Seen {
    let v: Value = serde_json::from_str(text.trim()).unwrap_or(Value::Null);
    let err = find_error(&v);
    Seen {
        code: err.and_then(|e| e["code"].as_str()).map(str::to_owned),
        key: err
            .and_then(|e| e.get("key"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        blob,
    }
}

fn run_cli(w: &World, args: &[&str]) -> Seen {
    let o = w.run(args);
    let out = stdout(&o);
    let mut s = seen_of(&out, format!("{out}{}", stderr(&o)));
    if o.status.code() != Some(0) && s.code.is_none() {
        s.code = Some(format!("exit {:?}", o.status.code()));
    }
    s
}

/// A legacy argv's refusal is AnimaWorks' (`Error: …` on stderr, exit 1, nothing on stdout); the key it names is
/// the one to grant.
fn run_legacy_argv(w: &World, args: &[&str]) -> Seen {
    legacy_seen(&w.run(args))
}

fn legacy_seen(o: &std::process::Output) -> Seen {
    let err = stderr(o);
    let refused = o.status.code() == Some(1) && err.starts_with("Error: ");
    if refused {
        assert_eq!(stdout(o), "", "{err}");
    }
    let key = err
        .split("external_tools.allow に '")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .map(str::to_owned);
    Seen {
        code: refused.then(|| "permission_denied".to_owned()),
        key,
        blob: format!("{}{err}", stdout(o)),
    }
}

fn submit(w: &World, args: &[&str]) -> Seen {
    let o = w.run(args);
    let out = stdout(&o);
    // A refused gated submit is AnimaWorks' refusal, as a legacy argv's.
    if o.status.code() == Some(1) && stderr(&o).starts_with("Error: ") {
        return legacy_seen(&o);
    }
    if o.status.code() != Some(0) {
        return seen_of(&out, format!("{out}{}", stderr(&o)));
    }
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    task_outcome(w, &id, format!("{out}{}", stderr(&o)))
}

fn task_outcome(w: &World, id: &str, mut blob: String) -> Seen {
    let o = w.run(&["jobs", "wait", id]);
    blob.push_str(&stdout(&o));
    blob.push_str(&stderr(&o));
    let state = w.anima.join("state");
    for p in [
        state.join(format!("background_tasks/{id}.json")),
        state.join(format!("background_notifications/{id}.md")),
    ] {
        blob.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
    }
    let task: Value =
        serde_json::from_str(&std::fs::read_to_string(state.join(format!("background_tasks/{id}.json"))).unwrap())
            .unwrap();
    let code = task["error_code"].as_str().map(str::to_owned);
    let key = task["error_detail"]["key"].as_str().map(str::to_owned);
    Seen { code, key, blob }
}

fn run_pending(w: &World, tool: &str, words: &[&str]) -> Seen {
    let pending = w.anima.join("state/background_tasks/pending");
    std::fs::create_dir_all(&pending).unwrap();
    let id = format!(
        "{:012x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
            & 0xffff_ffff_ffff
    );
    let d = json!({"task_id": id, "tool_name": tool, "subcommand": words[0], "raw_args": words,
                   "anima_name": "alice", "submitted_at": 1.5, "status": "pending"});
    std::fs::write(pending.join(format!("{id}.json")), d.to_string()).unwrap();
    let o = w.run(&["jobs", "run-pending"]);
    let out = stdout(&o);
    let rep: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    if rep["queued"]
        .as_array()
        .is_some_and(|q| q.iter().any(|t| t["task_id"] == id.as_str()))
    {
        return task_outcome(w, &id, out);
    }
    seen_of(&out, format!("{out}{}", stderr(&o)))
}

fn use_tool(w: &World, tool: &str, action: &str, args: Value) -> Seen {
    let req = json!({"tool_name": tool, "action": action, "args": args});
    let o = w.feed(&["use-tool"], &req.to_string());
    let mut s = seen_of(&stdout(&o), format!("{}{}", stdout(&o), stderr(&o)));
    // A tool's own error is AnimaWorks' plain text.
    if s.code.is_none() && stdout(&o).starts_with("Error executing ") {
        s.code = Some("tool_error".into());
    }
    s
}

fn use_tool_serve(w: &World, tool: &str, action: &str, args: Value) -> Seen {
    let req = json!({"id": 7, "tool_name": tool, "action": action, "args": args});
    let o = w.feed(&["use-tool", "--serve"], &format!("{req}\n"));
    let mut s = seen_of(&stdout(&o), format!("{}{}", stdout(&o), stderr(&o)));
    // A tool's own error: `{"status": "error", "result": "Error executing …", "code": "tool_error"}`.
    if s.code.is_none() {
        let v: Value = serde_json::from_str(stdout(&o).trim()).unwrap_or(Value::Null);
        s.code = v["code"].as_str().map(str::to_owned);
    }
    s
}

fn mcp(w: &World, name: &str, args: Value) -> Seen {
    let mut c = w.cmd();
    c.arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": args}}));
    let mut blob = String::new();
    let answer: Value = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the MCP server ended without answering"
        );
        blob.push_str(&line);
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            break v;
        }
    };
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    blob.push_str(&stderr(&o));
    if let Some(e) = answer.get("error") {
        let data = &e["data"];
        return Seen {
            code: data["code"].as_str().map(str::to_owned),
            key: data["key"].as_str().map(str::to_owned),
            blob,
        };
    }
    // Every failure of a call is an isError result with the runner's error object in _meta (docs/mcp.md).
    let is_error = answer["result"]["isError"] == true;
    let e = &answer["result"]["_meta"]["animaworks-tool/error"];
    Seen {
        code: is_error.then(|| e["code"].as_str().unwrap_or("tool_error").to_owned()),
        key: e["key"].as_str().map(str::to_owned),
        blob,
    }
}

fn audit_lines(w: &World) -> Vec<Value> {
    std::fs::read_to_string(w.anima.join("state/tool_audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

type Entry = (&'static str, &'static str, fn(&World) -> Seen);

/// Each entry point, calling the gated action of `gt` (structured) or `leg` (a legacy argv).
fn gated_entries() -> Vec<Entry> {
    vec![
        ("generated CLI", "gt_purge", |w| {
            run_cli(w, &["gt", "purge", "--note", SECRET])
        }),
        ("call", "gt_purge", |w| {
            run_cli(
                w,
                &["call", "gt", "purge", "--json", &json!({"note": SECRET}).to_string()],
            )
        }),
        ("legacy argv", "leg_purge", |w| run_legacy_argv(w, &["leg", "purge"])),
        ("submit", "gt_purge", |w| {
            submit(w, &["submit", "gt", "purge", "--note", SECRET])
        }),
        ("submit legacy argv", "leg_purge", |w| {
            submit(w, &["submit", "leg", "purge"])
        }),
        ("run-pending", "leg_purge", |w| run_pending(w, "leg", &["purge"])),
        ("use-tool", "gt_purge", |w| {
            use_tool(w, "gt", "purge", json!({"note": SECRET}))
        }),
        ("use-tool --serve", "gt_purge", |w| {
            use_tool_serve(w, "gt", "purge", json!({"note": SECRET}))
        }),
        ("mcp", "gt_purge", |w| mcp(w, "gt_purge", json!({"note": SECRET}))),
    ]
}

fn assert_one_audit_line(w: &World, before: usize, entry: &str, decision: &str) -> Value {
    let lines = audit_lines(w);
    assert_eq!(
        lines.len(),
        before + 1,
        "{entry}: want exactly one audit line, got {:#?}",
        &lines[before..]
    );
    let l = lines.last().unwrap().clone();
    let mut keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "action",
            "anima",
            "args",
            "credentials",
            "decision",
            "duration_ms",
            "env",
            "exit_code",
            "outcome",
            "reason",
            "sandbox",
            "tier",
            "time",
            "tool"
        ],
        "{entry}: {l}"
    );
    assert_eq!(l["decision"], decision, "{entry}: {l}");
    assert!(
        !l.to_string().contains(SECRET),
        "{entry}: the audit line holds the secret: {l}"
    );
    l
}

#[test]
fn every_entry_point_refuses_a_gated_action_alike_and_audits_it_once() {
    let w = world();
    grant(&w, &[]);
    for (entry, key, f) in gated_entries() {
        let before = audit_lines(&w).len();
        let s = f(&w);
        assert_eq!(s.code.as_deref(), Some("permission_denied"), "{entry}: {s:#?}");
        assert_eq!(s.key.as_deref(), Some(key), "{entry}: {s:#?}");
        let l = assert_one_audit_line(&w, before, entry, "deny");
        assert_eq!(l["outcome"], "permission_denied", "{entry}: {l}");
        assert!(
            l["reason"].as_str().unwrap().starts_with("grant_missing"),
            "{entry}: {l}"
        );
    }
}

#[test]
fn every_entry_point_runs_a_granted_action_audits_it_once_and_masks_the_secret() {
    let w = world();
    grant(&w, &["gt_purge", "leg_purge"]);
    for (entry, _, f) in gated_entries() {
        let before = audit_lines(&w).len();
        let s = f(&w);
        assert_eq!(s.code, None, "{entry}: {s:#?}");
        assert!(s.blob.contains("purged"), "{entry}: {s:#?}");
        assert!(!s.blob.contains(SECRET), "{entry}: the secret was shown: {}", s.blob);
        let l = assert_one_audit_line(&w, before, entry, "allow");
        assert_eq!(l["outcome"], "ok", "{entry}: {l}");
    }
}

#[test]
fn a_tool_error_that_says_its_secret_is_masked_in_message_hint_and_stderr_on_every_entry_point() {
    let w = world();
    grant(&w, &[]);
    type Case = (&'static str, fn(&World) -> Seen);
    let entries: Vec<Case> = vec![
        ("generated CLI", |w| run_cli(w, &["gt", "leak", "--note", SECRET])),
        ("call", |w| {
            run_cli(
                w,
                &["call", "gt", "leak", "--json", &json!({"note": SECRET}).to_string()],
            )
        }),
        ("submit", |w| submit(w, &["submit", "gt", "leak", "--note", SECRET])),
        ("use-tool", |w| use_tool(w, "gt", "leak", json!({"note": SECRET}))),
        ("use-tool --serve", |w| {
            use_tool_serve(w, "gt", "leak", json!({"note": SECRET}))
        }),
        ("mcp", |w| mcp(w, "gt_leak", json!({"note": SECRET}))),
    ];
    for (entry, f) in entries {
        let before = audit_lines(&w).len();
        let s = f(&w);
        assert_eq!(s.code.as_deref(), Some("tool_error"), "{entry}: {s:#?}");
        assert!(
            s.blob.contains("bad token ***"),
            "{entry}: the error is not there, masked: {}",
            s.blob
        );
        assert!(!s.blob.contains(SECRET), "{entry}: the secret was shown: {}", s.blob);
        let l = assert_one_audit_line(&w, before, entry, "allow");
        assert_eq!(l["outcome"], "tool_error", "{entry}: {l}");
    }
}

#[test]
fn unknown_tools_actions_and_bad_arguments_are_audited() {
    let w = world();
    let cases: [(&[&str], &str); 4] = [
        (&["nosuch", "go"], "unknown_tool"),
        (&["gt", "nosuch"], "unknown_action"),
        (&["gt", "leak", "--bogus", "1"], "usage"),
        (&["call", "gt", "leak", "--json", r#"{"note": 5}"#], "invalid_arguments"),
    ];
    for (args, outcome) in cases {
        let before = audit_lines(&w).len();
        let o = w.run(args);
        assert_ne!(o.status.code(), Some(0));
        let lines = audit_lines(&w);
        assert_eq!(lines.len(), before + 1, "{args:?}: {lines:#?}");
        assert_eq!(lines.last().unwrap()["outcome"], outcome, "{args:?}");
    }
}

#[test]
fn a_result_that_breaks_its_output_schema_is_bad_output_on_every_entry_point() {
    let w = World::new();
    w.tool(
        &w.common(),
        "shape.sh",
        &bash_tool(
            r#"{"protocol":1,"actions":[{"name":"n","output_schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}]}"#,
            r#"echo '{"n": "not a number"}'"#,
        ),
    );
    let s = run_cli(&w, &["call", "shape", "n"]);
    assert_eq!(s.code.as_deref(), Some("bad_output"), "{s:#?}");
    assert!(s.blob.contains("/n"), "the pointer is named: {}", s.blob);
    assert!(s.blob.contains("not a number"), "the raw result is kept: {}", s.blob);
    assert_eq!(
        use_tool(&w, "shape", "n", json!({})).code.as_deref(),
        Some("bad_output")
    );
    assert_eq!(mcp(&w, "shape_n", json!({})).code.as_deref(), Some("bad_output"));
}

#[test]
fn a_gated_call_is_refused_when_it_cannot_be_audited() {
    let w = world();
    grant(&w, &["gt_purge"]);
    let audit = w.anima.join("state/tool_audit.jsonl");
    std::fs::create_dir_all(&audit).unwrap();
    let s = run_cli(&w, &["call", "gt", "purge"]);
    assert_eq!(s.code.as_deref(), Some("permission_denied"), "{s:#?}");
    assert!(s.blob.contains("audit"), "{}", s.blob);
    // An open action still runs (with a warning).
    let s = run_cli(&w, &["call", "gt", "leak"]);
    assert_eq!(s.code.as_deref(), Some("tool_error"), "{s:#?}");
}

/// An AnimaWorks module that asks for the credential `svc` at run time (the SDK's `get_credential`, which the
/// runner's broker answers), in its action and in its `cli_main`; it shows the value reversed, or the refusal.
const BRK: &str = "import argparse, json\n\
def _key():\n\
\x20   from animaworks_tool_sdk import get_credential\n\
\x20   try:\n\
\x20       return {'reversed': get_credential('svc', 'brk', env_var='SVC_TOKEN')[::-1]}\n\
\x20   except Exception as e:\n\
\x20       return {'refused': str(e)}\n\
def get_tool_schemas():\n\
\x20   return [{'name': 'brk_key', 'description': 'The key.', 'input_schema': {'type': 'object', 'properties': {}}}]\n\
def dispatch(name, args):\n\
\x20   return _key()\n\
def cli_main(argv=None):\n\
\x20   print(json.dumps(_key()))\n";

/// Each entry point, calling `brk`'s action (structured) or its `cli_main` (a legacy argv).
type Brokered = (&'static str, fn(&World) -> Seen);

fn brokered_entries() -> Vec<Brokered> {
    vec![
        ("call", |w| run_cli(w, &["call", "brk", "key"])),
        ("legacy argv", |w| run_cli(w, &["brk", "key"])),
        ("submit legacy argv", |w| submit(w, &["submit", "brk", "key"])),
        ("run-pending", |w| run_pending(w, "brk", &["key"])),
        ("use-tool", |w| use_tool(w, "brk", "key", json!({}))),
        ("use-tool --serve", |w| use_tool_serve(w, "brk", "key", json!({}))),
        ("mcp", |w| mcp(w, "brk_key", json!({}))),
    ]
}

fn permit(w: &World, credentials: Value) {
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"version": 1, "external_tools": {"allow_all": true, "allow": ["gt_purge", "leg_purge"]},
               "credentials": credentials})
        .to_string(),
    )
    .unwrap();
}

#[test]
fn every_entry_point_grants_refuses_and_audits_credentials_declared_and_brokered() {
    let w = world();
    std::fs::write(w.common().join("brk.py"), BRK).unwrap();
    let reversed: String = SECRET.chars().rev().collect();

    // Declared and granted: the tool gets it; the line says so, by name.
    permit(&w, json!({"gt": ["svc"]}));
    for (entry, _, f) in gated_entries() {
        let before = audit_lines(&w).len();
        let s = f(&w);
        assert_eq!(s.code, None, "{entry}: {s:#?}");
        let l = assert_one_audit_line(&w, before, entry, "allow");
        let want = if l["tool"] == "gt" { json!(["svc"]) } else { json!([]) };
        assert_eq!(l["credentials"]["granted"], want, "{entry}: {l}");
        assert_eq!(l["credentials"]["refused"], json!([]), "{entry}: {l}");
    }
    // Declared, not granted: refused before the tool starts, naming the line to add.
    permit(&w, json!({}));
    for (entry, _, f) in gated_entries().into_iter().filter(|(_, k, _)| k.starts_with("gt")) {
        let before = audit_lines(&w).len();
        let s = f(&w);
        assert_eq!(s.code.as_deref(), Some("permission_denied"), "{entry}: {s:#?}");
        assert_eq!(
            s.key.as_deref(),
            Some(r#""credentials": {"gt": ["svc"]}"#),
            "{entry}: {s:#?}"
        );
        let l = assert_one_audit_line(&w, before, entry, "deny");
        assert!(
            l["reason"].as_str().unwrap().starts_with("credential_not_granted"),
            "{entry}: {l}"
        );
        assert_eq!(l["credentials"]["refused"], json!(["svc"]), "{entry}: {l}");
    }
    // Asked for at run time: the broker answers by the same grants, and the line lists each answer.
    for (granted, credentials) in [(true, json!({"brk": ["svc"]})), (false, json!({"gt": ["svc"]}))] {
        permit(&w, credentials);
        for (entry, f) in brokered_entries() {
            let before = audit_lines(&w).len();
            let s = f(&w);
            assert_eq!(s.code, None, "{entry}: {s:#?}");
            assert!(!s.blob.contains(SECRET), "{entry}: {}", s.blob);
            if granted {
                assert!(
                    s.blob.contains(&reversed),
                    "{entry}: the value did not arrive: {}",
                    s.blob
                );
            } else {
                assert!(
                    s.blob.contains("is not granted to the common tool 'brk'") && !s.blob.contains(&reversed),
                    "{entry}: {}",
                    s.blob
                );
            }
            let l = assert_one_audit_line(&w, before, entry, "allow");
            let answer = if granted { "granted" } else { "refused" };
            assert_eq!(
                l["credentials"]["brokered"],
                json!([{"name": "svc", "answer": answer}]),
                "{entry}: {l}"
            );
        }
    }
}
