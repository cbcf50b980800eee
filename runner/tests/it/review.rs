//! Review findings: each test reproduces a defect that was found in the process-running code.

use crate::support::*;
use std::process::Stdio;

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
