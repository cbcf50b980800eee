//! What a tool prints: the output cap, every kind of malformed output, crashes, tool errors, spawn failures.

use crate::core::{call, list_json, problems_of};
use crate::support::*;
use serde_json::Value;
use std::path::Path;

/// A bash tool with one action `<tool>_run` answering in value mode (§5.1).
fn value_tool(w: &World, tool: &str, body: &str) {
    w.tool(
        &w.common(),
        tool,
        &bash_tool(
            &format!(r#"[{{"name":"{tool}_run","description":"Run.","input_schema":{{"type":"object"}}}}]"#),
            body,
        ),
    );
}

/// A bash tool with one action `run` that declares `"events": true` (§5.2).
fn events_tool(w: &World, tool: &str, body: &str) {
    w.tool(
        &w.common(),
        tool,
        &bash_tool(
            r#"{"protocol":1,"events":true,"actions":[{"name":"run","description":"Run.","input_schema":{"type":"object"}}]}"#,
            body,
        ),
    );
}

fn err(w: &World, tool: &str, extra: &[&str]) -> (i32, Value) {
    let (code, out) = call(w, tool, "run", "{}", extra);
    (code, out["error"].clone())
}

fn msg(e: &Value) -> &str {
    e["message"].as_str().unwrap_or_else(|| panic!("no message: {e}"))
}

#[test]
fn value_output_past_the_cap_is_kept_whole_in_a_file() {
    let w = World::new();
    value_tool(&w, "big", "head -c 5000 /dev/zero | tr '\\0' x");
    let (code, e) = err(&w, "big", &["--max-output", "1000"]);
    assert_eq!(code, 12, "{e}");
    assert_eq!(e["code"], "output_capped");
    assert_eq!(e["bytes"], 5000);
    let path = Path::new(e["path"].as_str().unwrap());
    assert!(path.starts_with(w.data.join("outputs")), "{e}");
    assert_eq!(std::fs::read(path).unwrap(), vec![b'x'; 5000]);
    // Under the cap the same tool succeeds.
    let o = w.run(&["call", "big", "run", "--json", "{}", "--max-output", "6000"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim_end(), "x".repeat(5000));
}

#[test]
fn one_huge_event_line_is_capped_and_many_small_events_never_are() {
    let w = World::new();
    events_tool(
        &w,
        "hugeline",
        "printf '{\"type\":\"progress\",\"progress\":1}\\n{\"type\":\"result\",\"result\":\"'\nhead -c 5000 /dev/zero | tr '\\0' y\nprintf '\"}\\n'",
    );
    let (code, e) = err(&w, "hugeline", &["--max-output", "1000"]);
    assert_eq!(code, 12, "{e}");
    assert_eq!(e["code"], "output_capped");
    let text = std::fs::read_to_string(e["path"].as_str().unwrap()).unwrap();
    let expected = format!("{{\"type\":\"result\",\"result\":\"{}\"}}\n", "y".repeat(5000));
    assert_eq!(text, expected);
    assert_eq!(e["bytes"], expected.len());

    // A whole line in one read (one write of less than a pipe page) is capped too.
    events_tool(
        &w,
        "oneread",
        "l=$(head -c 3000 /dev/zero | tr '\\0' z)\nprintf '{\"type\":\"result\",\"result\":\"%s\"}\\n' \"$l\"",
    );
    let (code, e) = err(&w, "oneread", &["--max-output", "1000"]);
    assert_eq!(code, 12, "{e}");
    assert_eq!(e["bytes"], 3000 + 30);

    events_tool(
        &w,
        "chatter",
        "for i in $(seq 1 5000); do echo \"{\\\"type\\\":\\\"progress\\\",\\\"progress\\\":$i,\\\"total\\\":5000,\\\"message\\\":\\\"step $i\\\"}\"; \
         echo '{\"type\":\"log\",\"message\":\"a line of log\"}'; done\necho '{\"type\":\"result\",\"result\":{\"ok\":true}}'",
    );
    let (code, out) = call(&w, "chatter", "run", "{}", &["--max-output", "1000"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["ok"], true);
}

#[test]
fn invalid_utf8_is_bad_output_in_both_modes() {
    let w = World::new();
    value_tool(&w, "binval", "printf 'ok \\377\\376 then'");
    let (code, e) = err(&w, "binval", &[]);
    assert_eq!(code, 10, "{e}");
    assert_eq!(e["code"], "bad_output");
    assert!(msg(&e).contains("invalid UTF-8"), "{e}");

    events_tool(
        &w,
        "binev",
        "printf '{\"type\":\"log\",\"message\":\"\\377\"}\\n{\"type\":\"result\",\"result\":1}\\n'",
    );
    let (code, e) = err(&w, "binev", &[]);
    assert_eq!(code, 10, "{e}");
    assert!(msg(&e).contains("invalid UTF-8"), "{e}");
}

#[test]
fn broken_event_streams_are_bad_output() {
    let w = World::new();
    events_tool(&w, "stray", "echo '{\"type\":\"progress\",\"progress\":1}'\necho 'hello from a stray print'\necho '{\"type\":\"result\",\"result\":1}'");
    let (code, e) = err(&w, "stray", &[]);
    assert_eq!(code, 10, "{e}");
    assert!(
        msg(&e).contains("non-protocol output on stdout") && msg(&e).contains("hello from a stray print"),
        "{e}"
    );

    events_tool(&w, "nofinal", "echo '{\"type\":\"progress\",\"progress\":1}'");
    let (code, e) = err(&w, "nofinal", &[]);
    assert_eq!(code, 10, "{e}");
    assert!(msg(&e).contains("exited without a final result"), "{e}");

    events_tool(
        &w,
        "twofinal",
        "echo '{\"type\":\"result\",\"result\":1}'\necho '{\"type\":\"result\",\"result\":2}'",
    );
    let (code, e) = err(&w, "twofinal", &[]);
    assert_eq!(code, 10, "{e}");
    assert!(msg(&e).contains("output after the final event"), "{e}");

    events_tool(
        &w,
        "blanks",
        "echo '{\"type\":\"result\",\"result\":7}'\necho\necho '   '",
    );
    assert_eq!(call(&w, "blanks", "run", "{}", &[]), (0, Value::from(7)));
}

#[test]
fn a_result_then_a_non_zero_exit_is_a_crash() {
    let w = World::new();
    events_tool(
        &w,
        "late",
        "echo '{\"type\":\"result\",\"result\":1}'\necho 'dying now' >&2\nexit 3",
    );
    let (code, e) = err(&w, "late", &[]);
    assert_eq!(code, 11, "{e}");
    assert_eq!(e["code"], "crashed");
    assert_eq!(e["exit_code"], 3);
    assert!(msg(&e).contains("after its result"), "{e}");
    assert!(e["stderr_tail"].as_str().unwrap().contains("dying now"), "{e}");

    events_tool(
        &w,
        "errev",
        "echo '{\"type\":\"error\",\"code\":\"quota\",\"message\":\"over quota\",\"hint\":\"wait\"}'\nexit 0",
    );
    let (code, e) = err(&w, "errev", &[]);
    assert_eq!(code, 1, "{e}");
    assert_eq!(
        (e["code"].as_str(), e["tool_code"].as_str(), e["hint"].as_str()),
        (Some("tool_error"), Some("quota"), Some("wait"))
    );
}

#[test]
fn a_tool_killed_by_a_signal_is_a_crash_naming_it() {
    let w = World::new();
    value_tool(&w, "segv", "echo partial\nkill -SEGV $$");
    let (code, e) = err(&w, "segv", &[]);
    assert_eq!(code, 11, "{e}");
    assert_eq!(e["code"], "crashed");
    assert_eq!(e["signal"], libc::SIGSEGV);
    assert!(msg(&e).contains("SIGSEGV"), "{e}");
    assert!(e.get("exit_code").is_none(), "{e}");
}

/// A tool killed while writing an event line is a crash naming its signal, not `bad_output` over the half line it
/// left (a limit or the OOM killer ends a tool mid-write); the same half line from a tool that exits 0 is
/// `bad_output`.
#[test]
fn a_tool_killed_in_the_middle_of_an_event_line_is_a_crash() {
    let w = World::new();
    let half = "printf '{\"type\":\"progress\",\"progress\":1}\\n{\"type\":\"progr'";
    events_tool(&w, "halfkill", &format!("{half}\nkill -KILL $$"));
    let (code, e) = err(&w, "halfkill", &[]);
    assert_eq!(code, 11, "{e}");
    assert_eq!(e["code"], "crashed", "{e}");
    assert_eq!(e["signal"], libc::SIGKILL, "{e}");
    assert!(msg(&e).contains("SIGKILL") && msg(&e).contains("in the middle of a line"), "{e}");
    events_tool(&w, "halfexit", half);
    let (_, e) = err(&w, "halfexit", &[]);
    assert_eq!(e["code"], "bad_output", "{e}");
    assert!(msg(&e).contains("progr"), "{e}");
}

#[test]
fn value_mode_errors_are_tool_errors_or_crashes() {
    let w = World::new();
    value_tool(&w, "nocity", "echo '{\"error\":{\"code\":\"not_found\",\"message\":\"no such city\",\"hint\":\"try tokyo\",\"data\":{\"city\":\"x\"}}}'\nexit 2");
    let (code, e) = err(&w, "nocity", &[]);
    assert_eq!(code, 1, "{e}");
    assert_eq!(e["code"], "tool_error");
    assert_eq!(e["tool_code"], "not_found");
    assert_eq!(e["message"], "no such city");
    assert_eq!(e["hint"], "try tokyo");
    assert_eq!(e["data"]["city"], "x");

    value_tool(
        &w,
        "plainfail",
        "echo 'something went wrong'\necho 'trace line' >&2\nexit 4",
    );
    let (code, e) = err(&w, "plainfail", &[]);
    assert_eq!(code, 11, "{e}");
    assert_eq!(e["code"], "crashed");
    assert_eq!(e["exit_code"], 4);
    assert!(msg(&e).contains("exited with code 4"), "{e}");
    assert!(e["stderr_tail"].as_str().unwrap().contains("trace line"), "{e}");

    // An error object on a zero exit is a result like any other.
    value_tool(&w, "zeroerr", "echo '{\"error\":{\"message\":\"m\"}}'");
    let (code, out) = call(&w, "zeroerr", "run", "{}", &[]);
    assert_eq!((code, out["error"]["message"].as_str()), (0, Some("m")));
}

fn binary_garbage(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, b"\x00\x01\x02\x03binary-looking\xff\xfe\x00").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_file_in_the_wrong_format_cannot_be_started() {
    let w = World::new();
    binary_garbage(&w.common().join("blob"));
    let list = list_json(&w);
    let p = problems_of(&list, "blob");
    assert_eq!(p.len(), 1, "{list}");
    assert!(p[0]["message"].as_str().unwrap().contains("wrong format"), "{list}");
    let (code, e) = err(&w, "blob", &[]);
    // Its --schemas could not even start: spawn_failed, naming the reason.
    assert_eq!(code, 9, "{e}");
    assert_eq!(e["code"], "spawn_failed");
    assert!(msg(&e).contains("wrong format"), "{e}");
}

#[test]
fn spawn_failures_after_a_cached_probe_are_spawn_failed() {
    let w = World::new();
    let bin = w.tmp.path().join("interp-bin");
    std::fs::create_dir(&bin).unwrap();
    let interp = bin.join("myinterp");
    w.tool(&bin, "myinterp", "#!/bin/bash\nexec bash \"$@\"\n");
    let body = bash_tool(
        r#"[{"name":"viaint_run","description":"Run.","input_schema":{"type":"object"}}]"#,
        "echo 1",
    );
    w.tool(
        &w.common(),
        "viaint",
        &format!("#!{}\n{}", interp.display(), body.trim_start_matches(|c| c != '\n')),
    );
    assert_eq!(call(&w, "viaint", "run", "{}", &[]), (0, Value::from(1)));

    // The interpreter now has the wrong format: execve of the tool says ENOEXEC; the tool file is unchanged, so
    // its cached --schemas is used and the call itself fails to start.
    binary_garbage(&interp);
    let (code, e) = err(&w, "viaint", &[]);
    assert_eq!(code, 9, "{e}");
    assert_eq!(e["code"], "spawn_failed");
    assert!(msg(&e).contains("wrong format"), "{e}");
    assert!(e["hint"].as_str().unwrap().contains("#!"), "{e}");

    // The interpreter is gone.
    std::fs::remove_file(&interp).unwrap();
    let (code, e) = err(&w, "viaint", &[]);
    assert_eq!(code, 9, "{e}");
    assert!(
        msg(&e).contains("interpreter named on its #! line was not found"),
        "{e}"
    );
}

#[test]
fn a_shebang_naming_a_missing_interpreter_is_reported() {
    let w = World::new();
    w.tool(&w.common(), "ghost", "#!/nonexistent/animaworks-interp\nprint('hi')\n");
    let list = list_json(&w);
    let p = problems_of(&list, "ghost");
    assert_eq!(p.len(), 1, "{list}");
    assert!(
        p[0]["message"].as_str().unwrap().contains("#! line was not found"),
        "{list}"
    );
    let (code, e) = err(&w, "ghost", &[]);
    assert_eq!(code, 9, "{e}");
    assert!(msg(&e).contains("#! line was not found"), "{e}");
}

#[test]
fn unknown_event_types_are_ignored_and_passed_through_by_events() {
    let w = World::new();
    events_tool(
        &w,
        "future",
        "echo '{\"type\":\"telemetry\",\"cpu\":3}'\necho '{\"type\":\"progress\",\"progress\":1,\"future_field\":true}'\necho '{\"type\":\"result\",\"result\":{\"ok\":1}}'",
    );
    assert_eq!(call(&w, "future", "run", "{}", &[]), (0, serde_json::json!({"ok": 1})));
    let o = w.run(&["call", "future", "run", "--json", "{}", "--events"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(
        lines.iter().any(|l| l["type"] == "telemetry" && l["cpu"] == 3),
        "{}",
        stdout(&o)
    );
    assert!(lines.iter().any(|l| l["type"] == "result"), "{}", stdout(&o));
}

/// Issue 12 item 12: valid JSON nested past serde_json's depth was printed back as a string. Up to the bound in
/// protocol.md §5 it is the value; past it, `bad_output` — never a silent change of type.
#[test]
fn deep_results_keep_their_type_or_are_bad_output() {
    let w = World::new();
    let nest = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
    value_tool(&w, "deepok", &format!("echo '{}'", nest(127)));
    let (code, out) = call(&w, "deepok", "run", "{}", &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.is_array(), "{out}");

    value_tool(&w, "deepval", &format!("echo '{}'", nest(200)));
    let (code, e) = err(&w, "deepval", &[]);
    assert_eq!(code, 10, "{e}");
    assert_eq!(e["code"], "bad_output");
    assert!(msg(&e).contains("127"), "{e}");

    // An event line counts the event object as one level.
    events_tool(
        &w,
        "deepev",
        &format!("echo '{{\"type\":\"result\",\"result\":{}}}'", nest(200)),
    );
    let (code, e) = err(&w, "deepev", &[]);
    assert_eq!(code, 10, "{e}");
    assert_eq!(e["code"], "bad_output");
    assert!(msg(&e).contains("127"), "{e}");
}
