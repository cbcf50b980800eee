//! Issue 19, items 5–9: descriptors, mask-then-cut, authenticated task rows, what the runner runs and appends to
//! from disk, bad configuration as an error. Each test failed on main before its fix.

use crate::support::*;
use serde_json::{json, Value};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// `c` with `file` open on descriptor 7 and no close-on-exec, as `exec 7<file` leaves it in a shell.
fn with_fd7(c: &mut Command, file: &Path) {
    let fd: OwnedFd = std::fs::File::open(file).unwrap().into();
    // SAFETY: between fork and exec only dup2, async-signal-safe, on a descriptor the closure owns.
    unsafe {
        c.pre_exec(move || {
            if libc::dup2(fd.as_raw_fd(), 7) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

const FD7: &str = r#"if { : <&7; } 2>/dev/null; then echo '"fd7 open"'; else echo '"fd7 closed"'; fi"#;

#[test]
fn a_descriptor_the_caller_left_open_never_reaches_a_tool() {
    for w in [World::sandboxed(), World::new()] {
        let secret = w.data.join("config.json");
        std::fs::write(&secret, r#"{"credentials":{"x":{"api_key":"SUPERSECRETVALUE"}}}"#).unwrap();
        w.tool(
            &w.common(),
            "fdpeek",
            &bash_tool(r#"[{"name":"fdpeek_run","input_schema":{"type":"object"}}]"#, FD7),
        );
        let mut c = w.cmd();
        c.args(["call", "fdpeek", "run", "--json", "{}"]);
        with_fd7(&mut c, &secret);
        let o = c.output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(stdout(&o).trim(), "fd7 closed");
    }
}

#[test]
fn a_probe_and_a_pooled_worker_get_no_stray_descriptor() {
    let w = World::new();
    let secret = w.data.join("config.json");
    std::fs::write(&secret, "{}").unwrap();
    let mark = w.tmp.path().join("probe-fd7");
    let tool = format!(
        r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then
  if {{ : <&7; }} 2>/dev/null; then echo open > '{m}'; else echo closed > '{m}'; fi
  echo '{{"protocol":1,"events":true,"persistent":true,"actions":[{{"name":"peek"}}]}}'; exit 0
fi
re_id='"call_id":"([^"]*)"'
answer() {{ [[ $1 =~ $re_id ]] && id=${{BASH_REMATCH[1]}}
  if {{ : <&7; }} 2>/dev/null; then s=open; else s=closed; fi
  echo "{{\"type\":\"result\",\"result\":{{\"fd7\":\"$s\",\"mode\":\"$mode\"}},\"call_id\":\"$id\"}}"; }}
if [ "$1" = --serve ]; then mode=serve; while IFS= read -r req; do answer "$req"; done
else mode=once; IFS= read -r req; answer "$req"; fi
"#,
        m = mark.display()
    );
    w.tool(&w.common(), "peek", &tool);
    let mut c = w.cmd();
    c.args(["use-tool", "--serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    with_fd7(&mut c, &secret);
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut answers = std::io::BufReader::new(child.stdout.take().unwrap());
    use std::io::{BufRead, Write};
    let mut seen = Vec::new();
    for _ in 0..2 {
        writeln!(stdin, "{}", json!({"tool_name": "peek", "action": "peek", "args": {}})).unwrap();
        let mut line = String::new();
        answers.read_line(&mut line).unwrap();
        seen.push(line);
    }
    drop(stdin);
    child.wait().unwrap();
    let text = seen.join("");
    assert!(
        text.contains("closed") && !text.contains(r#"\"fd7\":\"open"#) && !text.contains("fd7\":\"open"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&mark).unwrap().trim(), "closed");
}

/// A world with a value-mode tool `echo1` (action `run`) in the common tier.
fn echo_world() -> World {
    let w = World::new();
    w.tool(
        &w.common(),
        "echo1",
        &bash_tool(r#"[{"name":"echo1_run","input_schema":{"type":"object"}}]"#, "echo 1"),
    );
    w
}

#[test]
fn a_malformed_task_database_url_is_an_error_naming_where_it_came_from() {
    let w = echo_world();
    w.settings(r#"{"tasks":{"backend":"postgres","url":"postgres://u:hunter22@h:notaport/db"}}"#);
    for args in [&["jobs", "list"][..], &["jobs", "migrate"], &["jobs", "show", "t-1"]] {
        let o = w.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("\"tasks\".\"url\"") && e.contains("notaport") && !e.contains("hunter22"),
            "{e}"
        );
    }
    w.settings(r#"{"tasks":{"backend":"postgres"}}"#);
    let o = w
        .cmd()
        .args(["jobs", "list"])
        .env("ANIMAWORKS_TOOL_TASKS_URL", "host=x port=abc password=zz")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("$ANIMAWORKS_TOOL_TASKS_URL") && !stderr(&o).contains("zz"),
        "{}",
        stderr(&o)
    );
}

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

fn audit_text(w: &World) -> String {
    std::fs::read_to_string(w.anima.join("state/tool_audit.jsonl")).unwrap_or_default()
}

#[test]
fn the_audit_log_is_never_appended_through_a_symbolic_link() {
    let w = echo_world();
    let victim = w.tmp.path().join("victim");
    std::fs::write(&victim, "untouched\n").unwrap();
    std::fs::create_dir_all(w.anima.join("state")).unwrap();
    std::os::unix::fs::symlink(&victim, w.anima.join("state/tool_audit.jsonl")).unwrap();
    let _ = w.run(&["call", "echo1", "run", "--json", "{}"]);
    let _ = w.run(&["call", "nosuchtool", "run", "--json", "{}"]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched\n");
}

#[test]
fn tool_and_action_names_in_the_audit_log_are_bounded() {
    let w = echo_world();
    let long = "a".repeat(20_000);
    let _ = w.run(&["call", "echo1", &long, "--json", "{}"]);
    let _ = w.run(&["call", &long, "run", "--json", "{}"]);
    let text = audit_text(&w);
    assert!(text.lines().count() >= 2, "{text}");
    for l in text.lines() {
        assert!(l.len() < 2_000, "an audit line of {} bytes", l.len());
        let v: Value = serde_json::from_str(l).unwrap();
        let names = format!("{} {}", v["tool"], v["action"]);
        assert!(!names.contains(&"a".repeat(300)), "{names}");
    }
    assert!(text.contains("20000 bytes, sha256"), "{text}");
}

/// A core Python module, called once so the shim is extracted; the extracted package's folder.
fn py_world() -> (World, std::path::PathBuf) {
    let w = World::new();
    std::fs::write(
        w.core.join("pyecho.py"),
        "def get_tool_schemas():\n    return [{'name': 'pyecho_go', 'input_schema': {'type': 'object'}}]\n\n\
         def dispatch(name, args):\n    return {'ok': True}\n",
    )
    .unwrap();
    let (code, out) = crate::core::call(&w, "pyecho", "go", "{}", &[]);
    assert_eq!(code, 0, "{out}");
    let cache = w.data.join("cache/animaworks-tool");
    let pkg = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("pysdk-"))
        .unwrap()
        .join("animaworks_tool_sdk");
    (w, pkg)
}

#[test]
fn a_changed_python_shim_in_the_cache_is_never_run() {
    let (w, pkg) = py_world();
    let mark = w.tmp.path().join("pwned");
    let start = pkg.join("_start.py");
    let mut text = std::fs::read_to_string(&start).unwrap();
    text.insert_str(0, &format!("open({:?}, 'w').close()\n", mark.display().to_string()));
    std::fs::write(&start, text).unwrap();
    let (code, out) = crate::core::call(&w, "pyecho", "go", "{}", &["--timeout", "30"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["ok"], true);
    assert!(!mark.exists(), "the changed _start.py ran");
}

#[test]
fn a_cache_dir_others_can_write_is_refused_with_a_clear_error() {
    use std::os::unix::fs::PermissionsExt;
    let (w, _) = py_world();
    let cache = w.data.join("cache/animaworks-tool");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = w.run(&["call", "pyecho", "go", "--json", "{}"]);
    assert_ne!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(
        e.contains("refusing the cache dir") && e.contains("writable by others"),
        "{e}"
    );
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (code, out) = crate::core::call(&w, "pyecho", "go", "{}", &[]);
    assert_eq!(code, 0, "{out}");
}

const SECRET: &str = "SUPERSECRETVALUE-42";

/// No 8-character piece of [`SECRET`] is in `text`.
fn no_fragment(text: &str) {
    for k in 8..=SECRET.len() {
        for i in 0..=SECRET.len() - k {
            assert!(
                !text.contains(&SECRET[i..i + k]),
                "a fragment {:?} of the secret in: {text}",
                &SECRET[i..i + k]
            );
        }
    }
}

/// A core tool (it gets what it declares) whose secret lands where an excerpt is cut: in a bad event line just
/// past the quote's 120 bytes, and in a crashed tool's stdout just past `stdout_head`'s 1000 characters.
fn cutter(w: &World) {
    for (name, events) in [("cutter", "false"), ("cutev", "true")] {
        w.tool(
        &w.core,
        name,
        &r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol":1,"events":EVENTS,"credentials":[{"name":"demo","env":"DEMO_TOKEN"}],"actions":[{"name":"badline"},{"name":"crash"},
 {"name":"strict","input_schema":{"type":"object","properties":{"n":{"type":"integer"}}}}]}
JSON
exit 0; fi
req=$(cat)
pad() { head -c "$1" /dev/zero | tr '\0' x; }
case "$req" in
*_badline*) for n in 105 110 115 119; do pad $n; printf '%s tail\n' "$DEMO_TOKEN"; done;;
*_crash*) pad 990; printf '%s tail\n' "$DEMO_TOKEN"; exit 3;;
esac
"#
        .replace("EVENTS", events),
    );
    }
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"demo": {"api_key": SECRET}}}).to_string(),
    )
    .unwrap();
}

#[test]
fn a_bad_output_quote_and_a_stdout_head_keep_no_fragment_of_a_secret() {
    let w = World::new();
    cutter(&w);
    for (tool, action) in [("cutev", "badline"), ("cutter", "crash")] {
        let o = w.run(&["call", tool, action, "--json", "{}"]);
        assert_ne!(o.status.code(), Some(0));
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(all.contains("xxxx"), "{all}");
        no_fragment(&all);
        // use_tool's answer carries the same excerpt on.
        let o = w.feed(
            &["use-tool"],
            &json!({"tool_name": tool, "action": action, "args": {}}).to_string(),
        );
        no_fragment(&format!("{}{}", stdout(&o), stderr(&o)));
    }
    no_fragment(&audit_text(&w));
}

/// An argument that breaks its schema is shown in the `invalid_arguments` problems cut to 200 bytes: a secret in it
/// is masked whole before the cut, so a secret straddling the cut leaves no fragment (validate.rs cut first).
#[test]
fn an_invalid_argument_shown_cut_keeps_no_fragment_of_a_secret() {
    let w = World::new();
    cutter(&w);
    for pad in [185, 190, 195] {
        let args = json!({"n": format!("{}{SECRET} tail", "x".repeat(pad))}).to_string();
        let o = w.run(&["call", "cutter", "strict", "--json", &args]);
        assert_ne!(o.status.code(), Some(0));
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(all.contains("invalid") && all.contains("xxxx"), "{all}");
        no_fragment(&all);
        let o = w.feed(
            &["use-tool"],
            &json!({"tool_name": "cutter", "action": "strict", "args": {"n": format!("{}{SECRET}", "x".repeat(pad))}})
                .to_string(),
        );
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(all.contains("InvalidArguments"), "{all}");
        no_fragment(&all);
    }
    no_fragment(&audit_text(&w));
}

/// A task's unmasked arguments (`.private/<id>.args`) are hidden from every confined tool, the anima's own too
/// (found by a review: they sat beside the task files, which confined tools may read).
#[test]
fn a_tasks_unmasked_arguments_are_hidden_from_confined_tools() {
    let w = World::sandboxed();
    let tasks = w.anima.join("state/background_tasks");
    let private = tasks.join(animaworks_tool::tasks::files::PRIVATE_DIR);
    std::fs::create_dir_all(&private).unwrap();
    std::fs::write(private.join("abc.args"), r#"{"token":"UNMASKED-SECRET-4711"}"#).unwrap();
    std::fs::write(tasks.join("visible.txt"), "task folder entry").unwrap();
    w.tool(
        &w.personal(),
        "peek.sh",
        &bash_tool(
            r#"[{"name":"peek_go","input_schema":{"type":"object"}}]"#,
            &format!(
                "cat {} 2>/dev/null; cat {} 2>/dev/null; echo '\"done\"'",
                tasks.join("visible.txt").display(),
                private.join("abc.args").display()
            ),
        ),
    );
    let o = w.run(&["call", "peek", "go"]);
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!out.contains("UNMASKED-SECRET-4711"), "a confined tool read a task's private arguments: {out}");
    assert!(out.contains("task folder entry") || out.contains("done"), "{out}");
}
