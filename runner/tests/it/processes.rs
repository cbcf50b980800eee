//! Process groups: deadlines, cancellation, the runner's own death, leftovers of a finished tool, and many
//! concurrent calls in one process (no leaked descriptors, no zombies).

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

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

const INNER_ENV: &str = "ANIMAWORKS_TOOL_IT_CONCURRENT_INNER";

/// Runs the measurement in a process of its own: descriptors and children of other tests in this binary
/// would otherwise be counted.
#[test]
fn hundred_concurrent_calls_leak_no_descriptors_and_leave_no_zombies() {
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "processes::hundred_concurrent_calls_inner",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(INNER_ENV, "1")
        .output()
        .unwrap();
    let out = format!("{}\n{}", stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}");
    assert!(out.contains("1 passed"), "the inner test did not run: {out}");
}

fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
#[ignore = "run by hundred_concurrent_calls_leak_no_descriptors_and_leave_no_zombies in a process of its own"]
fn hundred_concurrent_calls_inner() {
    if std::env::var_os(INNER_ENV).is_none() {
        return;
    }
    use animaworks_tool::stream::{Cancel, Quiet};
    use animaworks_tool::CallOptions;
    let w = World::new();
    let m = marker(6);
    // Every other call leaves a grandchild behind, holding stderr, so the leftover path is exercised too.
    w.tool(
        &w.common(),
        "echoer.sh",
        &bash_tool(
            r#"[{"name":"echoer_run","description":"Echo.","input_schema":{"type":"object","properties":{"i":{"type":"integer"}}}}]"#,
            &format!("case \"$req\" in *'\"i\":'*[13579]'}}'*) sleep {m} >/dev/null & ;; esac\necho \"$req\""),
        ),
    );
    let runner = w.runner();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let args = |i: u64| serde_json::json!({ "i": i }).as_object().unwrap().clone();
        let warm = runner
            .call(
                "echoer",
                "run",
                args(0),
                &CallOptions::default(),
                &mut Quiet,
                Cancel::never(),
            )
            .await;
        assert_eq!(warm.unwrap()["args"]["i"], 0);
        let fds_before = fd_count();
        let mut set = tokio::task::JoinSet::new();
        for i in 1..=100u64 {
            let runner = runner.clone();
            set.spawn(async move {
                let r = runner
                    .call(
                        "echoer",
                        "run",
                        args(i),
                        &CallOptions::default(),
                        &mut Quiet,
                        Cancel::never(),
                    )
                    .await;
                (i, r)
            });
        }
        let mut ids = std::collections::HashSet::new();
        while let Some(j) = set.join_next().await {
            let (i, r) = j.unwrap();
            let v = r.unwrap_or_else(|e| panic!("call {i}: {e}"));
            assert_eq!(v["args"]["i"], i);
            assert!(
                ids.insert(v["context"]["call_id"].as_str().unwrap().to_owned()),
                "call ids repeat: {v}"
            );
        }
        assert_eq!(ids.len(), 100);
        let fds_after = fd_count();
        let listing: Vec<PathBuf> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .collect();
        assert_eq!(fds_before, fds_after, "descriptors leaked: {listing:?}");
        assert_eq!(
            zombie_children_of(std::process::id()),
            Vec::<i32>::new(),
            "zombies left"
        );
        assert!(
            pids_with_cmdline(&format!("sleep {m}"))
                .iter()
                .all(|p| !is_descendant(*p)),
            "grandchildren left"
        );
    });
    eprintln!("100 concurrent calls: no descriptor leaked, no zombie");
}

fn is_descendant(pid: i32) -> bool {
    let me = std::process::id() as i32;
    let mut p = pid;
    for _ in 0..64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            return false;
        };
        let after = &stat[stat.rfind(')').map(|i| i + 2).unwrap_or(0)..];
        let Some(pp) = after.split_whitespace().nth(1).and_then(|x| x.parse::<i32>().ok()) else {
            return false;
        };
        if pp == me {
            return true;
        }
        if pp <= 1 {
            return false;
        }
        p = pp;
    }
    false
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

/// A long-lived runner reaps orphans after each call, on whichever thread ends one; a child another thread is
/// starting may exit before it is registered as that thread's own. While any start is in progress,
/// `reap_orphans` leaves every child alone (here: an exited child in a group of its own, which it would reap).
#[test]
fn orphans_are_not_reaped_while_a_child_is_being_started() {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new("true");
    cmd.process_group(0);
    let mut child = animaworks_tool::reap::start_owned(
        || -> std::io::Result<std::process::Child> {
            let c = cmd.spawn()?;
            let pid = c.id() as i32;
            assert!(
                eventually(30, || proc_stat(pid).is_some_and(|(st, _, _)| st == "Z")),
                "the child never exited"
            );
            animaworks_tool::reap::reap_orphans();
            assert!(
                proc_stat(pid).is_some(),
                "reap_orphans reaped a child while a start was in progress"
            );
            Ok(c)
        },
        |_| None,
    )
    .unwrap();
    // Another test's reap_orphans may have taken it since.
    let _ = child.wait();
}
