//! `rust-hello` as a real process: `--schemas`, one call on stdin, and `--serve`, read back through the
//! protocol's own types.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};
use tool_sdk::protocol::{parse_line, Event, Line, SchemasOutput};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rust-hello"))
}

/// Runs the binary with `args`, writes `stdin` and closes it, and waits for it to exit.
fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rust-hello starts");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// Parses stdout as an event stream (§5.2) and checks it ends with exactly one final event.
fn events(out: &Output) -> Vec<Event> {
    let text = std::str::from_utf8(&out.stdout).expect("stdout is UTF-8");
    let events: Vec<Event> = text
        .lines()
        .filter_map(|l| match parse_line(l.as_bytes()) {
            Line::Event(e) => Some(e),
            Line::Blank => None,
            other => panic!("not an event line: {other:?}\n{text}"),
        })
        .collect();
    assert_eq!(events.iter().filter(|e| e.is_final()).count(), 1, "{text}");
    assert!(events.last().is_some_and(Event::is_final), "{text}");
    events
}

fn request(action: &str, args: Value, call_id: &str) -> String {
    json!({"name": format!("rust-hello_{action}"), "args": args,
           "context": {"protocol": 1, "call_id": call_id, "tool": "rust-hello", "action": action,
                       "anima_name": null, "anima_dir": null, "future_field": true}})
    .to_string()
}

#[test]
fn schemas_is_the_full_form() {
    let out = bin().arg("--schemas").stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let SchemasOutput::Full(doc) = serde_json::from_slice(&out.stdout).unwrap() else {
        panic!("not the full form")
    };
    assert_eq!(doc.protocol, 1);
    assert!(doc.events && doc.persistent);
    let names: Vec<&str> = doc.actions.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["greet", "excerpt"]);
    let greet = doc.actions[0].input_schema.as_ref().unwrap();
    assert_eq!(greet["type"], "object");
    assert_eq!(greet["required"], json!(["who"]));
    assert!(doc
        .actions
        .iter()
        .all(|a| a.profile.hints.read_only && !a.description.is_empty()));
}

#[test]
fn one_call_streams_progress_then_one_result() {
    let out = run(
        &[],
        &(request("greet", json!({"who": "世界", "language": "ja", "times": 3}), "c-1") + "\n"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let events = events(&out);
    let progress = events.iter().filter(|e| matches!(e, Event::Progress { .. })).count();
    assert_eq!(progress, 4);
    let Some(Event::Result { result, call_id: None, .. }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(
        result["greeting"],
        "こんにちは、世界さん！\nこんにちは、世界さん！\nこんにちは、世界さん！"
    );
}

#[test]
fn bad_input_is_a_tool_error() {
    let out = run(
        &[],
        &request("excerpt", json!({"text": "héllo", "max_chars": 0}), "c-2"),
    );
    assert_eq!(out.status.code(), Some(1));
    let events = events(&out);
    let Some(Event::Error { error, .. }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(error.code.as_deref(), Some("bad_limit"));
    assert!(error.hint.is_some());
}

#[test]
fn excerpt_cuts_between_characters() {
    let out = run(
        &[],
        &request("excerpt", json!({"text": "🎉é日本語テキスト", "max_chars": 4}), "c-3"),
    );
    let events = events(&out);
    let Some(Event::Result { result, .. }) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(result, &json!({"excerpt": "🎉é日…", "chars": 9, "truncated": true}));
}

#[test]
fn serve_answers_each_line_with_tagged_events() {
    let input = [
        request("greet", json!({"who": "Ada"}), "s-1"),
        request("excerpt", json!({"text": "", "max_chars": 3}), "s-2"),
        request("greet", json!({"who": "Grace", "language": "fr"}), "s-3"),
    ]
    .join("\n")
        + "\n";
    let out = run(&["--serve"], &input);
    assert_eq!(out.status.code(), Some(0), "stdin closing ends the worker cleanly");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut finals = Vec::new();
    for line in text.lines() {
        let Line::Event(e) = parse_line(line.as_bytes()) else {
            panic!("{line}")
        };
        let id = e.call_id().expect("every --serve event carries its call id").to_owned();
        if e.is_final() {
            finals.push((id, e));
        }
    }
    let ids: Vec<&str> = finals.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["s-1", "s-2", "s-3"]);
    assert!(matches!(&finals[1].1, Event::Error { error, .. } if error.code.as_deref() == Some("empty_text")));
    assert!(matches!(&finals[2].1, Event::Result { result, .. } if result["greeting"] == "Bonjour, Grace !"));
}

#[test]
fn help_and_unknown_arguments() {
    let out = bin().arg("--help").stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("greet") && help.contains("excerpt"), "{help}");
    let out = bin().arg("--bogus").stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
