//! Issue 12: defects found by attacking the runner as a hostile tool, a careless caller and a forged file would.
//! Each test failed before its fix.

use crate::support::*;
#[allow(unused_imports)]
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Run `cmd` to its end, or kill it after `secs` (a guard against a hang, never a speed assertion) and return
/// `None`. Its address space is bounded, so a runner that reads without end fails instead of eating the machine.
pub fn run_guarded(cmd: &mut Command, secs: u64) -> Option<Output> {
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn echo_tool(w: &World) {
    w.tool(
        &w.personal(),
        "echo.sh",
        &bash_tool(
            r#"[{"name":"echo_say","input_schema":{"type":"object","properties":{"x":{"type":"string"}}},"description":"d"}]"#,
            r#"echo "{\"ok\":true}""#,
        ),
    );
}

// ---- 8. Special files hang the runner ---------------------------------------------------------------------------

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
    mkfifo(&w.data.join("animaworks-tool.json"));
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).expect("a FIFO as settings hung the call");
    assert_ne!(code(&o), 0);
    assert!(stdout(&o).contains("FIFO"), "{}", stdout(&o));
}
