//! What a tool prints: the output cap, every kind of malformed output, crashes, tool errors, spawn failures.

use crate::core::{call, list_json, problems_of};
use crate::support::*;
use serde_json::json;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

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
    assert!(
        msg(&e).contains("SIGKILL") && msg(&e).contains("in the middle of a line"),
        "{e}"
    );
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

// ---------------------------------------------------------------- spills, streamed masks, escape sequences, the cap setting

/// The secret of [`leaky_tool`].
const SECRET: &str = "s3cr3t-value-4242";

/// A value tool whose action `go` runs `$BODY_<action>`-style bash taken from the request; it declares the
/// credential `demo` (env DEMO_TOKEN).
fn leaky_tool(w: &World) {
    w.tool(
        &w.personal(),
        "leak.sh",
        r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol":1,"credentials":[{"name":"demo","env":"DEMO_TOKEN"}],"actions":[
 {"name":"split","description":"the secret on stderr after 70000 bytes, then split over two writes"},
 {"name":"flood","description":"2 MB on stdout, then sleeps"},
 {"name":"big","description":"300 KB on stdout with the secret in the middle"}
]}
JSON
exit 0; fi
req=$(cat)
case "$req" in
*_split*)
  head -c 70000 /dev/zero | tr '\0' a >&2
  printf ' %s\n' "$DEMO_TOKEN" >&2
  printf 'half %s' "${DEMO_TOKEN:0:7}" >&2; sleep 0.3; printf '%s end\n' "${DEMO_TOKEN:7}" >&2
  echo '"done"';;
*_flood*)
  head -c 2000000 /dev/zero | tr '\0' x
  exec sleep 1000;;
*_big*)
  head -c 150000 /dev/zero | tr '\0' y; printf ' %s ' "$DEMO_TOKEN"; head -c 150000 /dev/zero | tr '\0' y;;
esac
"#,
    );
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"demo": {"api_key": SECRET}}}).to_string(),
    )
    .unwrap();
    w.grant_credentials("leak", &["demo"]);
}

fn outputs(w: &World) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(w.data.join("outputs")) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// A secret written to stderr across a read boundary (after ~64 KiB of other text, or split over two writes)
/// reached the terminal unmasked (issue 12 item 2).
#[test]
fn live_stderr_masks_a_secret_split_across_reads() {
    let w = World::new();
    leaky_tool(&w);
    for extra in [&[][..], &["--events"][..]] {
        let mut c = w.cmd();
        c.args(["leak", "split"]).args(extra);
        let o = run_guarded(&mut c, 60).unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("half *** end"),
            "{}",
            &err[err.len().saturating_sub(300)..]
        );
        assert!(
            !err.contains(SECRET) && !err.contains(&SECRET[7..]),
            "the secret reached stderr"
        );
    }
}

/// A call's spill file grew without bound, held raw secrets, was world-readable and outlived a timed-out call
/// (issue 12 items 1, 3).
#[test]
fn a_call_is_bounded_on_disk_and_its_spill_is_private_masked_and_removed_on_timeout() {
    let w = World::new();
    leaky_tool(&w);
    // Past the disk bound the call ends at once (not at its deadline) and names the file it kept.
    let mut c = w.cmd();
    c.env("ANIMAWORKS_TOOL_MAX_SPILL", "1000000").args([
        "call",
        "leak",
        "flood",
        "--max-output",
        "1000",
        "--timeout",
        "300",
    ]);
    let o = run_guarded(&mut c, 120).expect("the call ran on past its disk bound");
    assert_eq!(code(&o), 12, "{}", stderr(&o));
    let e = json(&o)["error"].clone();
    let path = e["path"].as_str().expect("the kept file is named").to_owned();
    assert!(e["message"].as_str().unwrap().contains(&path), "{e}");
    assert!(std::fs::metadata(&path).unwrap().len() <= 1_000_000);

    // A spill holds no secret and is the user's alone.
    let o = run_guarded(w.cmd().args(["call", "leak", "big", "--max-output", "1000"]), 60).unwrap();
    assert_eq!(code(&o), 12, "{}", stderr(&o));
    let path = json(&o)["error"]["path"].as_str().unwrap().to_owned();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(" *** ") && !text.contains(SECRET),
        "the spill holds the secret"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);

    // A call that timed out leaves no spill behind.
    for p in outputs(&w) {
        std::fs::remove_file(p).unwrap();
    }
    let o = run_guarded(
        w.cmd()
            .args(["call", "leak", "flood", "--max-output", "1000", "--timeout", "1"]),
        60,
    )
    .unwrap();
    assert_eq!(code(&o), 7, "{}", stderr(&o));
    assert_eq!(
        outputs(&w),
        Vec::<std::path::PathBuf>::new(),
        "a timed-out call's spill was kept"
    );
}

/// Spill files were never removed, and a flooding `--schemas` was spilled to disk on every listing (issue 12
/// item 1).
#[test]
fn old_spills_are_pruned_and_schemas_never_spill() {
    let w = World::new();
    leaky_tool(&w);
    let out = w.data.join("outputs");
    std::fs::create_dir_all(&out).unwrap();
    let old = out.join("c-old.out");
    std::fs::write(&old, "old").unwrap();
    let f = std::fs::File::options().write(true).open(&old).unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(8 * 86400))
        .unwrap();
    drop(f);
    let o = run_guarded(w.cmd().args(["call", "leak", "big", "--max-output", "1000"]), 60).unwrap();
    assert_eq!(code(&o), 12, "{}", stderr(&o));
    assert!(!old.exists(), "a spill older than the retention was kept");

    w.tool(
        &w.personal(),
        "flood.sh",
        "#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then head -c 40000000 /dev/zero | tr '\\0' x; exit 0; fi\n",
    );
    let before = outputs(&w).len();
    let o = run_guarded(w.cmd().args(["tools", "--json"]), 120).unwrap();
    assert!(stdout(&o).contains("more than"), "{}", stdout(&o));
    assert_eq!(outputs(&w).len(), before, "--schemas was spilled: {:?}", outputs(&w));
}

/// Runs argv[1:] under a pseudo-terminal and prints what the terminal got.
const PTY_RUN: &str = r#"
import os, pty, sys
argv = sys.argv[1:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
out = b""
while True:
    try:
        b = os.read(fd, 65536)
    except OSError:
        break
    if not b:
        break
    out += b
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.exit(os.waitstatus_to_exitcode(status))
"#;

/// A tool's escape sequences reached the terminal, and it could open /dev/tty (issue 12 item 9).
#[test]
fn a_tool_cannot_drive_the_terminal_nor_open_it() {
    let w = World::new();
    w.tool(
        &w.personal(),
        "esc.sh",
        r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then echo '{"protocol":1,"events":true,"actions":[{"name":"go"},{"name":"plain"}]}'; exit 0; fi
req=$(cat)
case "$req" in
*_plain*) printf '{"type":"result","result":"text \\u001b]0;title\\u0007 \\u009b end"}\n'; exit 0;;
esac
printf 'err \033]52;c;cHduZWQ=\007 \033[2J\n' >&2
echo '{"type":"log","message":"log \u001b]0;title\u0007 x"}'
echo '{"type":"progress","progress":1,"total":2,"message":"p \u001b[2J"}'
if (echo pwned > /dev/tty) 2>/dev/null; then t=yes; else t=no; fi
printf '{"type":"result","result":"tty:%s \\u001b[31mred \\u009b2J"}\n' "$t"
"#,
    );
    let run = |args: &[&str]| -> Vec<u8> {
        let mut c = w.cmd();
        c.env_remove("ANIMAWORKS_TOOL_LOG")
            .args(["-c", PTY_RUN, BIN])
            .args(args);
        let mut c2 = Command::new("python3");
        c2.args(c.get_args());
        for (k, v) in c.get_envs() {
            if let Some(v) = v {
                c2.env(k, v);
            }
        }
        let o = run_guarded(&mut c2, 60).expect("the call under a terminal hung");
        o.stdout
    };
    let out = run(&["esc", "go"]);
    let text = String::from_utf8_lossy(&out).into_owned();
    assert!(text.contains("tty:no"), "the tool opened /dev/tty: {text:?}");
    assert!(!text.contains("pwned"), "{text:?}");
    for bad in [&b"\x1b]52"[..], b"\x1b]0;", b"\x1b[2J", b"\x1b[31m", b"\xc2\x9b"] {
        assert!(
            !out.windows(bad.len()).any(|x| x == bad),
            "{:?} reached the terminal: {text:?}",
            String::from_utf8_lossy(bad)
        );
    }
    assert!(text.contains("^[]52"), "the sequence is shown, not obeyed: {text:?}");
    let out = run(&["esc", "plain"]);
    assert!(
        !out.windows(3).any(|x| x == b"\x1b]0"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    // A pipe gets the exact bytes.
    let o = w.run(&["esc", "plain"]);
    assert!(o.stdout.windows(2).any(|x| x == b"\x1b]"), "{:?}", stdout(&o));
}

/// An unusable output cap was silently ignored (issue 19 item 9): it is a usage error.
#[test]
fn an_unusable_output_cap_is_a_usage_error() {
    let w = echo_world();
    let o = w
        .cmd()
        .args(["call", "echo1", "run", "--json", "{}"])
        .env("ANIMAWORKS_TOOL_MAX_OUTPUT", "8MB")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("ANIMAWORKS_TOOL_MAX_OUTPUT") && stderr(&o).contains("\"8MB\""),
        "{}",
        stderr(&o)
    );
    let o = w.run(&[
        "call",
        "echo1",
        "run",
        "--json",
        "{}",
        "--max-output",
        "18446744073709551615",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("1073741824"), "{}", stderr(&o));
    let (code, _) = crate::core::call(&w, "echo1", "run", "{}", &["--max-output", "1073741824"]);
    assert_eq!(code, 0);
}
