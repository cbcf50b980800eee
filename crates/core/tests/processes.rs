//! Many concurrent calls in one process through the library `Runner`: no leaked descriptors, no zombies, no
//! grandchild left behind.

mod support;

use std::path::PathBuf;
use support::*;

const INNER_ENV: &str = "ANIMAWORKS_TOOL_IT_CONCURRENT_INNER";

/// Runs the measurement in a process of its own: descriptors and children of other tests in this binary
/// would otherwise be counted.
#[test]
fn hundred_concurrent_calls_leak_no_descriptors_and_leave_no_zombies() {
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "hundred_concurrent_calls_inner",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(INNER_ENV, "1")
        .output()
        .unwrap();
    let out = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
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
    use awt_core::stream::{Cancel, Quiet};
    use awt_core::CallOptions;
    let w = World::new();
    // A sleep argument no other process on the machine has: tests of several runs may share the machine.
    let m = format!("306.{}", std::process::id());
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
