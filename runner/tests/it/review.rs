//! Review findings: each test reproduces a defect that was found in the process-running code.

use crate::support::*;
use std::process::Stdio;

fn kill_pids_with(needle: &str) {
    for pid in pids_with_cmdline(needle) {
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

