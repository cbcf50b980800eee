//! A FIFO, a device or a symbolic link where the runner expects a regular file of its own (permissions, tiers,
//! task files, settings, the worker log, the audit log): refused or set aside, never a hang, never followed.

use crate::support::*;
use serde_json::json;

/// A FIFO or a device as permissions.json hung the call (issue 12 item 8); an oversized one is refused too.
#[test]
fn a_fifo_or_a_device_as_permissions_fails_closed_without_hanging() {
    let w = World::new();
    echo_tool(&w);
    let pj = w.anima.join("permissions.json");
    mkfifo(&pj);
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).expect("a FIFO as permissions.json hung the call");
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let msg = json(&o)["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("permissions.json") && msg.contains("FIFO"), "{msg}");

    std::fs::remove_file(&pj).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &pj).unwrap();
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).expect("/dev/zero as permissions.json hung");
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    assert!(stdout(&o).contains("character device"), "{}", stdout(&o));

    std::fs::remove_file(&pj).unwrap();
    std::fs::write(&pj, format!("{{\"x\": \"{}\"}}", "a".repeat(2 << 20))).unwrap();
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).unwrap();
    assert_eq!(code(&o), 6, "an oversized permissions.json is refused: {}", stderr(&o));
}

/// A FIFO in a tier hung the listing (issue 12 item 8): it is a problem, not a tool.
#[test]
fn a_fifo_in_a_tier_is_no_tool() {
    let w = World::new();
    mkfifo(&w.personal().join("pipe.py"));
    let o = run_guarded(w.cmd().args(["tools", "--json"]), 60).unwrap();
    let v = json(&o);
    let p = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tool"] == "pipe")
        .cloned();
    assert_eq!(p.as_ref().map(|p| p["kind"].clone()), Some(json!("not_a_file")), "{v}");
}

/// FIFOs in place of task files, the worker log or the settings file hung the runner (issue 12 item 8).
#[test]
fn fifos_among_tasks_and_settings_hang_nothing() {
    let w = World::new();
    echo_tool(&w);
    let tasks = w.anima.join("state/background_tasks");
    std::fs::create_dir_all(tasks.join("pending")).unwrap();
    mkfifo(&tasks.join("aaaaaaaaaaaa.json"));
    mkfifo(&tasks.join("pending/bbbbbbbbbbbb.json"));
    mkfifo(&tasks.join("worker.log"));
    let o = run_guarded(w.cmd().args(["jobs", "list", "--json"]), 60).expect("jobs list hung on a FIFO task");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run_guarded(w.cmd().args(["submit", "echo", "say"]), 60).expect("submit hung on a FIFO");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let o = run_guarded(w.cmd().args(["jobs", "run-pending"]), 60).expect("run-pending hung on a FIFO");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run_guarded(w.cmd().args(["jobs", "wait", &id, "--timeout", "60"]), 90).expect("wait hung");
    assert_eq!(code(&o), 0, "{} {}", stdout(&o), stderr(&o));

    // The runner settings file as a FIFO: a clear error, no hang.
    let _ = std::fs::remove_file(w.data.join("animaworks-tool.json"));
    mkfifo(&w.data.join("animaworks-tool.json"));
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).expect("a FIFO as settings hung the call");
    assert_ne!(code(&o), 0);
    assert!(stdout(&o).contains("FIFO"), "{}", stdout(&o));
}

/// A symlink planted as the worker log was followed (issue 12).
#[test]
fn a_symlink_in_place_of_the_worker_log_is_not_followed() {
    let w = World::new();
    echo_tool(&w);
    let dir = w.anima.join("state/background_tasks");
    std::fs::create_dir_all(&dir).unwrap();
    // A dangling symlink: following it would create (and then write) a file wherever it points.
    let victim = w.tmp.path().join("victim.txt");
    std::os::unix::fs::symlink(&victim, dir.join("worker.log")).unwrap();
    let o = run_guarded(w.cmd().args(["submit", "echo", "say"]), 60).unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let _ = run_guarded(w.cmd().args(["jobs", "wait", &id, "--timeout", "60"]), 90).unwrap();
    assert!(!victim.exists(), "the worker log followed a planted symlink");
}

/// The audit log was appended through a planted symbolic link (issue 19 item 8).
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
