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
    c.args(["use-tool", "--serve"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
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
    assert!(text.contains("closed") && !text.contains(r#"\"fd7\":\"open"#) && !text.contains("fd7\":\"open"), "{text}");
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
        assert!(e.contains("\"tasks\".\"url\"") && e.contains("notaport") && !e.contains("hunter22"), "{e}");
    }
    w.settings(r#"{"tasks":{"backend":"postgres"}}"#);
    let o = w.cmd().args(["jobs", "list"]).env("ANIMAWORKS_TOOL_TASKS_URL", "host=x port=abc password=zz").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("$ANIMAWORKS_TOOL_TASKS_URL") && !stderr(&o).contains("zz"), "{}", stderr(&o));
}

#[test]
fn an_unusable_output_cap_is_a_usage_error() {
    let w = echo_world();
    let o = w.cmd().args(["call", "echo1", "run", "--json", "{}"]).env("ANIMAWORKS_TOOL_MAX_OUTPUT", "8MB").output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("ANIMAWORKS_TOOL_MAX_OUTPUT") && stderr(&o).contains("\"8MB\""), "{}", stderr(&o));
    let o = w.run(&["call", "echo1", "run", "--json", "{}", "--max-output", "18446744073709551615"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("1073741824"), "{}", stderr(&o));
    let (code, _) = crate::core::call(&w, "echo1", "run", "{}", &["--max-output", "1073741824"]);
    assert_eq!(code, 0);
}
