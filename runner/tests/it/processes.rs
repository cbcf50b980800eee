//! Process groups: deadlines, cancellation, the runner's own death, leftovers of a finished tool, and many
//! concurrent calls in one process (no leaked descriptors, no zombies); a grandchild that left the group, and
//! what a long-lived caller must reap.

use crate::support::*;
use serde_json::json;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A sleep argument no other process on the machine has: tests of several runs may share the machine.
fn marker(n: u32) -> String {
    format!("30{n}.{}", std::process::id())
}

/// A bash tool with one action `<tool>_run` that first writes its pid (its group id) to `pidfile`.
fn tool_script(tool: &str, pidfile: &Path, body: &str) -> String {
    bash_tool(
        &format!(r#"[{{"name":"{tool}_run","description":"Run.","input_schema":{{"type":"object"}}}}]"#),
        &format!("echo $$ > '{}'\n{body}", pidfile.display()),
    )
}

fn read_pid(pidfile: &Path) -> i32 {
    assert!(
        eventually(30, || std::fs::read_to_string(pidfile)
            .map(|s| s.ends_with('\n'))
            .unwrap_or(false)),
        "the tool never wrote {}",
        pidfile.display()
    );
    std::fs::read_to_string(pidfile).unwrap().trim().parse().unwrap()
}

/// Alive means present and not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let after = &stat[stat.rfind(')').map(|i| i + 2).unwrap_or(0)..];
            !after.starts_with('Z')
        }
        Err(_) => false,
    }
}

fn group_gone(pgid: i32) -> bool {
    eventually(30, || group_members(pgid).is_empty())
}

fn spawn_runner(w: &World, args: &[&str]) -> Child {
    w.cmd()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether `pid` has a handler installed for `sig` (SigCgt in /proc/<pid>/status).
fn catches(pid: u32, sig: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

#[test]
fn deadline_ends_a_tool_that_ignores_sigterm_and_its_grandchild() {
    let w = World::new();
    let pidfile = w.tmp.path().join("pid");
    let m = marker(1);
    w.tool(
        &w.common(),
        "stubborn",
        &tool_script(
            "stubborn",
            &pidfile,
            &format!("trap '' TERM\necho 'about to hang' >&2\nsleep {m} &\nsleep {m}"),
        ),
    );
    let o = w.run(&["call", "stubborn", "run", "--json", "{}", "--timeout", "1"]);
    assert_eq!(o.status.code(), Some(7), "{}\n{}", stdout(&o), stderr(&o));
    let e = &json(&o)["error"];
    assert_eq!(e["code"], "timeout");
    assert!(e["message"].as_str().unwrap().contains("within 1 s"), "{e}");
    assert!(e["stderr_tail"].as_str().unwrap().contains("about to hang"), "{e}");
    assert!(e["duration_ms"].as_u64().unwrap() >= 1000, "{e}");
    let pgid = read_pid(&pidfile);
    assert!(group_gone(pgid), "left in group {pgid}: {:?}", group_members(pgid));
    assert!(pids_with_cmdline(&format!("sleep {m}")).is_empty());
}

#[test]
fn sigkill_of_the_runner_leaves_no_tool_alive() {
    let w = World::new();
    let pidfile = w.tmp.path().join("pid");
    let m = marker(2);
    w.tool(
        &w.common(),
        "sleeper",
        &tool_script("sleeper", &pidfile, &format!("sleep {m} &\nsleep {m}")),
    );
    let mut runner = spawn_runner(&w, &["call", "sleeper", "run", "--json", "{}"]);
    let tool = read_pid(&pidfile);
    let needle = format!("sleep {m}");
    assert!(
        eventually(30, || pids_with_cmdline(&needle).len() == 2),
        "{:?}",
        pids_with_cmdline(&needle)
    );
    runner.kill().unwrap();
    runner.wait().unwrap();
    assert!(
        eventually(30, || !alive(tool) && pids_with_cmdline(&needle).is_empty()),
        "still alive: tool {tool} ({}), {:?}",
        alive(tool),
        pids_with_cmdline(&needle)
    );
}

#[test]
fn ctrl_c_cancels_the_call_and_ends_the_group() {
    let w = World::new();
    let pidfile = w.tmp.path().join("pid");
    let m = marker(3);
    w.tool(
        &w.common(),
        "sleeper",
        &tool_script("sleeper", &pidfile, &format!("sleep {m} &\nsleep {m}")),
    );
    let runner = spawn_runner(&w, &["call", "sleeper", "run", "--json", "{}"]);
    let pgid = read_pid(&pidfile);
    // Why wait for the handler: before the runner installs it, SIGINT would simply kill the runner.
    assert!(
        eventually(30, || catches(runner.id(), libc::SIGINT)),
        "the runner never handles SIGINT"
    );
    // SAFETY: kill takes numbers; the pid is the runner this test started.
    unsafe { libc::kill(runner.id() as i32, libc::SIGINT) };
    let o = runner.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(8), "{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(json(&o)["error"]["code"], "cancelled");
    assert!(group_gone(pgid), "left in group {pgid}: {:?}", group_members(pgid));
    assert!(pids_with_cmdline(&format!("sleep {m}")).is_empty());
}

#[test]
fn background_grandchild_is_ended_when_the_tool_exits() {
    for (n, redirect) in [(4, ">/dev/null"), (5, ">/dev/null 2>&1")] {
        let w = World::new();
        let pidfile = w.tmp.path().join("pid");
        let m = marker(n);
        w.tool(
            &w.common(),
            "leaver",
            &tool_script(
                "leaver",
                &pidfile,
                &format!("sleep {m} {redirect} &\necho '{{\"done\":true}}'"),
            ),
        );
        let o = w.run(&["call", "leaver", "run", "--json", "{}"]);
        assert_eq!(o.status.code(), Some(0), "{redirect}: {}\n{}", stdout(&o), stderr(&o));
        assert_eq!(json(&o)["done"], true);
        let pgid = read_pid(&pidfile);
        assert!(
            group_gone(pgid),
            "{redirect}: left in group {pgid}: {:?}",
            group_members(pgid)
        );
        assert!(pids_with_cmdline(&format!("sleep {m}")).is_empty(), "{redirect}");
    }
}

/// The runner's exit closes the guardian's pipe and reaps the guardian at once; a pipe left open (as a
/// `write_fd` that forgot it before the close once did) made every call wait a second for it, and say so.
#[test]
fn the_guardian_ends_with_the_runner() {
    let w = World::new();
    w.tool(
        &w.common(),
        "quick.sh",
        &bash_tool(
            r#"[{"name":"quick_run","input_schema":{"type":"object"}}]"#,
            r#"echo '"ran"'"#,
        ),
    );
    for sandbox in ["off", "enforce"] {
        w.settings(&format!(r#"{{"sandbox": {{"common": "{sandbox}"}}}}"#));
        let o = w
            .cmd()
            .env("ANIMAWORKS_TOOL_LOG", "warn")
            .args(["call", "quick", "run"])
            .output()
            .unwrap();
        assert_eq!(stdout(&o).trim(), "ran", "{}", stderr(&o));
        assert!(!stderr(&o).contains("guardian"), "sandbox {sandbox}: {}", stderr(&o));
    }
}

// ---------------------------------------------------------------- escaped grandchildren, reaping in long-lived callers

fn kill_pids_with(needle: &str) {
    for pid in pids_with_cmdline(needle) {
        // SAFETY: kill takes numbers; the pids are this test's leftovers, found by their command line.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// A grandchild that leaves the tool's process group (setsid) and keeps stdout open is out of reach of killpg;
/// the call must still end at its deadline instead of waiting for an end of file that never comes.
#[test]
fn deadline_holds_when_a_grandchild_left_the_group_holding_stdout() {
    let w = World::new();
    let m = format!("31{}.5", std::process::id());
    w.tool(
        &w.common(),
        "escaper",
        &bash_tool(
            r#"[{"name":"escaper_run","description":"Run.","input_schema":{"type":"object"}}]"#,
            &format!("setsid sleep {m} &\necho '\"done\"'"),
        ),
    );
    let mut runner = w
        .cmd()
        .args(["call", "escaper", "run", "--json", "{}", "--timeout", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ended = eventually(30, || runner.try_wait().unwrap().is_some());
    if !ended {
        runner.kill().unwrap();
    }
    let o = runner.wait_with_output().unwrap();
    kill_pids_with(&format!("sleep {m}"));
    assert!(ended, "the call never returned: its deadline did not hold");
    assert!(!o.status.success() || !stdout(&o).is_empty(), "{}", stderr(&o));
}

/// A `use-tool --serve` process that has submitted one background task, and the task as stored once it completed.
fn serve_with_a_finished_task(w: &World) -> (Serve, serde_json::Value) {
    w.tool(
        &w.common(),
        "bgt",
        &bash_tool(
            r#"{"protocol":1,"events":true,"actions":[{"name":"go","profile":{"background_eligible":true}}]}"#,
            r#"echo '{"type":"result","result":"ran"}'"#,
        ),
    );
    let mut serve = w.serve();
    let answer = serve.ask(
        &serde_json::json!({"id": 1, "tool_name": "task", "action": "submit", "args": {"tool": "bgt", "action": "go"}}),
    );
    let tasks = w.anima.join("state").join("background_tasks");
    let mut task = serde_json::Value::Null;
    let done = eventually(30, || {
        task = std::fs::read_dir(&tasks)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
            .find(|t: &serde_json::Value| t["status"] == "completed")
            .unwrap_or(serde_json::Value::Null);
        !task.is_null()
    });
    assert!(done, "the task never completed: {answer}");
    (serve, task)
}

fn describe(pids: &[i32]) -> Vec<String> {
    pids.iter()
        .map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default())
        .collect()
}

/// A long-lived caller (`use-tool --serve`, the MCP server) starts a detached task worker per submit; when the
/// worker exits it must be reaped, not left a zombie for the caller's whole life.
#[test]
fn task_workers_started_by_a_long_lived_caller_are_reaped() {
    let w = World::new();
    let (serve, task) = serve_with_a_finished_task(&w);
    let worker = task["pid"].as_i64().expect("a finished task names its worker") as i32;
    let reaped = eventually(30, || !zombie_children_of(serve.child.id()).contains(&worker));
    serve.finish();
    assert!(
        reaped,
        "the exited task worker {worker} stays a zombie of the serving process"
    );
}

/// Every orphan re-parented to a long-lived runner (it is the subreaper of its descendants) is reaped: here the
/// guardian of an exited task worker, which the runner never waits for.
#[test]
fn orphans_re_parented_to_a_long_lived_runner_are_reaped() {
    let w = World::new();
    let (serve, _task) = serve_with_a_finished_task(&w);
    let reaped = eventually(30, || zombie_children_of(serve.child.id()).is_empty());
    let zombies = describe(&zombie_children_of(serve.child.id()));
    serve.finish();
    assert!(reaped, "zombies of the serving process: {zombies:?}");
}

// ---------------------------------------------------------------- what the runner leaves behind and hands over

/// Runs argv[1:] as a subreaper and prints the processes left to it.
const SUBREAPER_RUN: &str = r#"
import ctypes, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the runner become ours
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
me = os.getpid()
left = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            stat = open(f"/proc/{p}/stat").read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == me:
            left.append((p, fields[0]))
print(left)
"#;

/// The guardian was left behind, a zombie of whoever adopted it, when the runner exited (issue 12 item 13).
#[test]
fn the_runner_leaves_no_child_behind_when_it_exits() {
    let w = World::new();
    echo_tool(&w);
    let c = w.cmd();
    let mut py = Command::new("python3");
    py.args(["-c", SUBREAPER_RUN, BIN, "echo", "say"]);
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            py.env(k, v);
        }
    }
    let o = run_guarded(&mut py, 60).unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        "[]",
        "processes the runner left to its adopter (the guardian?)"
    );
}

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

/// Says whether descriptor 7 is open.
const FD7: &str = r#"if { : <&7; } 2>/dev/null; then echo '"fd7 open"'; else echo '"fd7 closed"'; fi"#;

/// A descriptor the caller left open (here on a secret file) reached the tool (issue 19 item 5).
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

/// A `--schemas` probe and a pooled worker got the caller's stray descriptors (issue 19 item 5).
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
