//! Drop-in, the last differences (issue 20, item 7): each run side by side with AnimaWorks 0.15 (`bench/.venv`,
//! see [`crate::dropin::original`]) where the original can run, under the default sandbox.

use crate::dropin::{original, original_cmd};
use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

fn plain_path() -> &'static str {
    "/usr/local/bin:/usr/bin:/bin"
}

/// Ours in `w`, with the original's Python for `.py` tools.
fn ours(w: &World, venv: &Path, args: &[&str]) -> Output {
    ours_cmd(w, venv).args(args).output().unwrap()
}

fn ours_cmd(w: &World, venv: &Path) -> Command {
    let mut c = w.cmd();
    c.env("PATH", plain_path())
        .env("ANIMAWORKS_PYTHON", venv.join("bin/python"));
    c
}

/// A module that lists no schema and relies on `dispatch`, as 11 of AnimaWorks' 16 core modules do.
const LISTER: &str = r#"
EXECUTION_PROFILE = {"wipe": {"gated": True}}

def get_tool_schemas():
    return []

def dispatch(name, args):
    if name == "lister_boom":
        raise ValueError("bad thing")
    return {"called": name, "args": sorted(args)}
"#;

/// The original's use_tool for a module: `_call_module(mod, "<tool>_<action>", {**args, "anima_dir"})`, what
/// `ToolHandler._handle_use_tool` does once the permission gate passed.
const CALL_MODULE: &str = r#"
import json, sys, logging, importlib.util
logging.disable(logging.CRITICAL)
from core.tooling.dispatch import ExternalToolDispatcher
path, anima_dir, calls = json.load(sys.stdin)
spec = importlib.util.spec_from_file_location("animaworks_tool_lister", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
print(json.dumps({n: ExternalToolDispatcher._call_module(mod, n, {**a, "anima_dir": anima_dir}) for n, a in calls},
                 ensure_ascii=False))
"#;

fn original_python(venv: &Path, w: &World, script: &str, input: &Value) -> Value {
    let mut c = Command::new(venv.join("bin/python"));
    c.env_clear()
        .env("PATH", plain_path())
        .env("HOME", w.tmp.path())
        .env("ANIMAWORKS_DATA_DIR", &w.data)
        .args(["-c", script]);
    let o = feed(&mut c, input.to_string().as_bytes());
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

#[test]
fn side_by_side_use_tool_dispatches_actions_the_module_does_not_list() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    let path = w.tool(&w.personal(), "lister.py", LISTER);
    let calls = json!([["lister_hidden", {"x": 1}], ["lister_boom", {}]]);
    let theirs = original_python(&venv, &w, CALL_MODULE, &json!([path, w.anima, calls]));
    let use_tool = |action: &str, args: Value| {
        let req = json!({"tool_name": "lister", "action": action, "args": args});
        let mut c = ours_cmd(&w, &venv);
        feed(c.arg("use-tool"), req.to_string().as_bytes())
    };
    let o = use_tool("hidden", json!({"x": 1}));
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(
        stdout(&o),
        theirs["lister_hidden"],
        "dispatch got the schema name and the args"
    );
    let o = use_tool("boom", json!({}));
    assert_eq!(
        stdout(&o),
        theirs["lister_boom"],
        "the module's own exception, as plain text"
    );
    // An unlisted action its EXECUTION_PROFILE gates needs its grant, as a listed one does.
    let o = use_tool("wipe", json!({}));
    assert_eq!(o.status.code(), Some(6), "{}", stdout(&o));
    let refusal: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(refusal["error_type"], "PermissionDenied");
    assert_eq!(refusal["key"], "lister_wipe");
    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"external_tools": {"allow_all": true, "allow": ["lister_wipe"]}}"#,
    )
    .unwrap();
    let o = use_tool("wipe", json!({}));
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("\"called\": \"lister_wipe\""), "{}", stdout(&o));
    // A name that is no action name stays unknown.
    assert_ne!(use_tool("no/such", json!({})).status.code(), Some(0));
}

/// Lists `nap` (so its default deadline would be an action's 60 s) and reports the deadline it was given.
const CLOCK: &str = r#"
import os, sys, time

def _left():
    d = os.environ.get("ANIMAWORKS_DEADLINE_MS")
    return "none" if d is None else str(int(d) // 1000 - int(time.time()))

def get_tool_schemas():
    return [{"name": "clock_nap", "description": "reports its deadline", "input_schema": {"type": "object"}}]

def dispatch(name, args):
    return _left()

def cli_main(argv):
    print(_left())
"#;

fn seconds_left(text: &str) -> i64 {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("not a number of seconds: {text:?}"))
}

#[test]
fn a_legacy_cli_call_and_its_task_are_bounded_by_animaworks_thirty_minutes() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    w.tool(&w.personal(), "clock.py", CLOCK);
    // The original bounds neither (its CLI has no deadline; its background runner gives a task 1,800 s).
    let t = original_cmd(&w, &venv).args(["clock", "nap"]).output().unwrap();
    assert_eq!(stdout(&t).trim(), "none", "{}", stderr(&t));
    let o = ours(&w, &venv, &["clock", "nap"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let left = seconds_left(&stdout(&o));
    assert!(
        left > 1700 && left <= 1800,
        "a cli_main argv naming an action: {left} s"
    );

    let submit = |extra: &[&str]| {
        let mut args = vec!["submit", "clock", "nap"];
        args.extend_from_slice(extra);
        let o = ours(&w, &venv, &args);
        assert!(o.status.success(), "{}", stderr(&o));
        let id = json(&o)["task_id"].as_str().unwrap().to_owned();
        let waited = ours(&w, &venv, &["jobs", "wait", &id]);
        assert!(waited.status.success(), "{}", stderr(&waited));
        let task: Value =
            serde_json::from_slice(&std::fs::read(w.anima.join(format!("state/background_tasks/{id}.json"))).unwrap())
                .unwrap();
        task
    };
    let task = submit(&[]);
    let left = seconds_left(task["result"].as_str().unwrap());
    assert!(left > 1700 && left <= 1800, "a module's task: {left} s: {task}");
    // --timeout still says otherwise.
    let task = submit(&["--timeout", "20"]);
    let left = seconds_left(task["result"].as_str().unwrap());
    assert!((0..=20).contains(&left), "{left} s: {task}");
}

/// A cli_main whose argparse takes no `-j`, which AnimaWorks' background runner appends.
const STRICT_ARGS: &str = r#"
import argparse

def get_tool_schemas():
    return []

def cli_main(argv=None):
    p = argparse.ArgumentParser(prog="strictargs")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("greet").add_argument("--name", required=True)
    ns = p.parse_args(argv)
    print("hello", ns.name)
"#;

#[test]
fn side_by_side_a_failed_task_tells_the_tools_own_reason() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    w.tool(&w.personal(), "strictargs.py", STRICT_ARGS);
    // What AnimaWorks' runner runs for this task, and the reason it records: `stderr.strip()`.
    let t = original_cmd(&w, &venv)
        .args(["strictargs", "greet", "--name", "Ada", "-j"])
        .output()
        .unwrap();
    assert_eq!(t.status.code(), Some(2));
    let reason = stderr(&t).trim().to_owned();
    assert!(reason.ends_with("unrecognized arguments: -j"), "{reason}");

    let o = ours(&w, &venv, &["submit", "strictargs", "greet", "--name", "Ada"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let waited = ours(&w, &venv, &["jobs", "wait", &id]);
    let file = w.anima.join(format!("state/background_tasks/{id}.json"));
    let task = || -> Option<Value> { serde_json::from_slice(&std::fs::read(&file).ok()?).ok() };
    assert!(
        eventually(60, || task().is_some_and(|t| t["status"] == "failed")),
        "{:?}: {}{}",
        task(),
        stdout(&waited),
        stderr(&waited)
    );
    let task = task().unwrap();
    let error = task["error"].as_str().unwrap();
    assert!(
        error.ends_with(&reason),
        "the tool's reason, not only its exit code: {error}"
    );
    let note = std::fs::read_to_string(w.anima.join(format!("state/background_notifications/{id}.md"))).unwrap();
    assert!(note.contains("unrecognized arguments: -j"), "{note}");
}

/// A module with a gated subcommand.
const WIPER: &str = r#"
import argparse
EXECUTION_PROFILE = {"wipe": {"gated": True}}

def get_tool_schemas():
    return []

def cli_main(argv=None):
    p = argparse.ArgumentParser(prog="wiper")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("wipe")
    sub.add_parser("look")
    print("ran", p.parse_args(argv).cmd)
"#;

#[test]
fn side_by_side_refusals_on_the_legacy_argv_path() {
    let Some(venv) = original() else { return };
    for locale in [None, Some("en")] {
        let w = World::sandboxed();
        if let Some(l) = locale {
            std::fs::write(w.data.join("config.json"), format!(r#"{{"locale": "{l}"}}"#)).unwrap();
        }
        w.tool(&w.personal(), "wiper.py", WIPER);
        for perms in [
            r#"{"external_tools": {"allow_all": true}}"#,
            r#"{"external_tools": {"allow_all": true, "deny": ["wiper"]}}"#,
        ] {
            std::fs::write(w.anima.join("permissions.json"), perms).unwrap();
            // Stdout is a pipe here, as it always is for an agent.
            let o = ours(&w, &venv, &["wiper", "wipe"]);
            let t = original_cmd(&w, &venv).args(["wiper", "wipe"]).output().unwrap();
            assert_eq!(o.status.code(), t.status.code(), "{perms}: {}", stderr(&o));
            assert_eq!(o.status.code(), Some(1));
            assert_eq!(stdout(&o), stdout(&t), "{perms}: nothing on stdout");
            let (mine, theirs) = (stderr(&o), stderr(&t));
            assert_eq!(mine.lines().next(), theirs.lines().next(), "{perms} {locale:?}");
            // Ours adds where to grant it.
            assert!(mine.contains("permissions.json"), "{mine}");
        }
        // Allowed, both run it.
        std::fs::write(
            w.anima.join("permissions.json"),
            r#"{"external_tools": {"allow_all": true}}"#,
        )
        .unwrap();
        let o = ours(&w, &venv, &["wiper", "look"]);
        let t = original_cmd(&w, &venv).args(["wiper", "look"]).output().unwrap();
        assert_eq!((o.status.code(), stdout(&o)), (t.status.code(), stdout(&t)));
    }
}

/// A module named like one of the runner's commands.
const CHECK_TOOL: &str = r#"
def get_tool_schemas():
    return [{"name": "check_spelling", "description": "d", "input_schema": {"type": "object"}}]

def dispatch(name, args):
    return "spelled " + name

def cli_main(argv):
    print("the tool's cli_main", argv)
"#;

#[test]
fn side_by_side_a_tool_named_like_a_runner_command() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    w.tool(&w.personal(), "check.py", CHECK_TOOL);
    let t = original_cmd(&w, &venv).args(["check", "spelling"]).output().unwrap();
    assert_eq!(stdout(&t), "the tool's cli_main ['spelling']\n", "{}", stderr(&t));
    // Ours: the runner's command wins; `--` calls the tool, with the original's output.
    let o = ours(&w, &venv, &["check", "spelling"]);
    assert!(!stdout(&o).contains("the tool's cli_main"), "{}", stdout(&o));
    let o = ours(&w, &venv, &["--", "check", "spelling"]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (t.status.code(), stdout(&t)),
        "{}",
        stderr(&o)
    );
    let o = ours(&w, &venv, &["call", "check", "spelling"]);
    assert_eq!(stdout(&o).trim(), "spelled check_spelling", "{}", stderr(&o));
    let req = json!({"tool_name": "check", "action": "spelling", "args": {}}).to_string();
    let o = feed(ours_cmd(&w, &venv).arg("use-tool"), req.as_bytes());
    assert_eq!(stdout(&o), "spelled check_spelling");
    // doctor warns, and says how to call it; the tool is no problem.
    let d = json(&ours(&w, &venv, &["doctor", "--json"]));
    let warnings = d["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{d}");
    assert!(
        warnings[0].as_str().unwrap().contains("animaworks-tool -- check"),
        "{d}"
    );
    assert!(
        d["problems"].as_array().unwrap().iter().all(|p| p["tool"] != "check"),
        "{d}"
    );
    // The meta tools' names stay reserved.
    w.tool(&w.personal(), "help.py", CHECK_TOOL);
    let d = json(&ours(&w, &venv, &["doctor", "--json"]));
    assert!(
        d["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["tool"] == "help" && p["kind"] == "invalid_name"),
        "{d}"
    );
}
