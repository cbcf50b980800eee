//! AnimaWorks-style Python modules (the shared fixtures, unedited, and the repository's legacy-notes example)
//! through the runner: listing, calls, stray prints, exceptions, cli_main, gates, and a deadline.

use crate::core::{call, list_json, problems_of, tool_entry};
use crate::support::*;
use serde_json::json;
use std::path::{Path, PathBuf};

fn fixtures() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/legacy_tools");
    if dir.is_dir() {
        Some(dir)
    } else {
        awt_sys::skipped!("the legacy fixtures are not at {}", dir.display());
        None
    }
}

fn world_with_fixtures() -> Option<World> {
    let src = fixtures()?;
    let w = World::new();
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        std::fs::copy(e.path(), w.personal().join(e.file_name())).unwrap();
    }
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/legacy-notes/legacy_notes.py");
    std::fs::copy(&example, w.personal().join("legacy_notes.py")).unwrap();
    Some(w)
}

fn allow(w: &World, grants: &[&str]) {
    let perms = serde_json::json!({"external_tools": {"allow_all": true, "allow": grants}});
    std::fs::write(w.anima.join("permissions.json"), perms.to_string()).unwrap();
}

#[test]
fn legacy_modules_are_listed_with_their_problems() {
    let Some(w) = world_with_fixtures() else { return };
    let list = list_json(&w);
    for name in [
        "notes_tool",
        "weather_tool",
        "cli_only_tool",
        "chatty_tool",
        "slow_tool",
        "legacy_notes",
    ] {
        let t = tool_entry(&list, name).unwrap_or_else(|| panic!("{name} missing: {list}"));
        assert_eq!(t["tier"], "personal");
    }
    assert_eq!(tool_entry(&list, "notes_tool").unwrap()["cli"], true);
    assert_eq!(tool_entry(&list, "cli_only_tool").unwrap()["cli"], true);
    assert!(tool_entry(&list, "_private_helper").is_none() && problems_of(&list, "_private_helper").is_empty());
    assert!(tool_entry(&list, "broken_tool").is_none());
    let p = problems_of(&list, "broken_tool");
    assert_eq!(p.len(), 1, "{list}");
    assert_eq!(p[0]["kind"], "schemas_failed");
    assert!(
        p[0]["message"]
            .as_str()
            .unwrap()
            .contains("module_that_is_not_installed"),
        "{}",
        p[0]
    );
    assert_eq!(list["problems"].as_array().unwrap().len(), 1, "{list}");
}

#[test]
fn legacy_calls_results_prints_and_exceptions() {
    let Some(w) = world_with_fixtures() else { return };
    let (code, out) = call(&w, "notes_tool", "add", r#"{"title":"a"}"#, &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["added"]["title"], "a");
    let notes = w.anima.join("state/notes.json");
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&notes).unwrap()).unwrap();
    assert_eq!(saved[0]["title"], "a");

    let o = w.run(&["call", "chatty_tool", "count", "--json", r#"{"n":3}"#]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim_end(), "counted to 3");

    let (code, out) = call(&w, "weather_tool", "forecast", r#"{"city":"tokyo","days":2}"#, &[]);
    assert_eq!((code, &out["highs_c"]), (0, &serde_json::json!([18, 19])), "{out}");
    let (code, out) = call(&w, "weather_tool", "forecast", r#"{"city":"paris"}"#, &[]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out["error"]["code"], "tool_error");
    let m = out["error"]["message"].as_str().unwrap();
    assert!(m.starts_with("Error executing weather_tool_forecast: "), "{m}");
    assert!(m.contains("paris"), "{m}");
}

#[test]
fn legacy_cli_main_and_gates() {
    let Some(w) = world_with_fixtures() else { return };
    let o = w.run(&["notes_tool", "add", "x", "-j"]);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let v = json(&o);
    assert_eq!(
        (v["added"]["title"].as_str(), v["count"].as_u64()),
        (Some("x"), Some(1))
    );

    // A refusal of a legacy argv exits 1 with AnimaWorks' line on stderr, as the original does.
    let o = w.run(&["notes_tool", "delete-all", "--yes"]);
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    let refusal = format!("{}{}", stdout(&o), stderr(&o));
    assert!(refusal.contains("notes_tool_delete-all"), "{refusal}");
    let (code, out) = call(&w, "notes_tool", "delete_all", r#"{"confirm":true}"#, &[]);
    assert_eq!(code, 6, "{out}");
    assert_eq!(out["error"]["code"], "permission_denied");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("notes_tool_delete-all"),
        "{out}"
    );
    assert!(w.anima.join("state/notes.json").exists());

    allow(&w, &["notes_tool_delete-all"]);
    let o = w.run(&["notes_tool", "delete-all", "--yes"]);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(json(&o)["deleted"], 1);
    let (code, out) = call(&w, "notes_tool", "delete_all", r#"{"confirm":true}"#, &[]);
    assert_eq!((code, &out["deleted"]), (0, &serde_json::json!(0)), "{out}");
}

#[test]
fn legacy_slow_tool_ignoring_sigterm_ends_at_its_deadline() {
    let Some(w) = world_with_fixtures() else { return };
    let tool_path = w.personal().join("slow_tool.py");
    let needle = tool_path.to_string_lossy().into_owned();
    list_json(&w); // probe first, so the process found below is the call's
    let runner = w
        .cmd()
        .args([
            "call",
            "slow_tool",
            "wait",
            "--json",
            r#"{"seconds":30}"#,
            "--timeout",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut leader = None;
    assert!(
        eventually(30, || {
            leader = pids_with_cmdline(&needle).first().copied();
            leader.is_some()
        }),
        "the tool never started"
    );
    let pgid = leader.unwrap();
    let o = runner.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(7), "{}", stdout(&o));
    assert_eq!(json(&o)["error"]["code"], "timeout");
    assert!(
        eventually(30, || group_members(pgid).is_empty()),
        "left in group {pgid}: {:?}",
        group_members(pgid)
    );
    let sleeps: Vec<i32> = pids_with_cmdline("sleep 30")
        .into_iter()
        .filter(|p| group_of(*p) == Some(pgid))
        .collect();
    assert!(sleeps.is_empty(), "{sleeps:?}");
}

fn group_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(2)?.parse().ok()
}

/// A module that imports AnimaWorks itself (`from core.integrations._base import get_credential`) works when
/// ANIMAWORKS_PYTHON is an interpreter that can import it — here a wrapper that puts a stand-in `core` package on
/// its path, as a venv with AnimaWorks installed would — and fails with a clear import error otherwise.
#[test]
fn modules_importing_animaworks_run_under_its_interpreter() {
    let w = World::new();
    let site = w.tmp.path().join("site");
    std::fs::create_dir_all(site.join("core/integrations")).unwrap();
    std::fs::write(site.join("core/__init__.py"), "").unwrap();
    std::fs::write(site.join("core/integrations/__init__.py"), "").unwrap();
    std::fs::write(
        site.join("core/integrations/_base.py"),
        "MARK = 'from-animaworks'\ndef get_credential(name, tool, key_name='api_key', env_var=None):\n    return 'unbrokered'\n",
    )
    .unwrap();
    // The runner's broker answers AnimaWorks' own get_credential (docs/credentials.md), once granted.
    std::fs::write(
        w.data.join("config.json"),
        r#"{"credentials": {"x": {"api_key": "key-of-x"}}}"#,
    )
    .unwrap();
    w.grant_credentials("aw_tool", &["x"]);
    std::fs::write(
        w.personal().join("aw_tool.py"),
        "from core.integrations._base import get_credential, MARK\n\
         def get_tool_schemas():\n    return [{'name': 'aw_tool_key', 'input_schema': {'type': 'object'}}]\n\
         def dispatch(name, args):\n    return MARK + ':' + get_credential('x', 'aw_tool')\n",
    )
    .unwrap();
    let o = w.run(&["call", "aw_tool", "key", "--json", "{}"]);
    assert_ne!(
        o.status.code(),
        Some(0),
        "without AnimaWorks the import fails: {}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("No module named 'core'"), "{}", stdout(&o));
    let python = w.tool(
        w.tmp.path(),
        "animaworks-python",
        &format!("#!/bin/sh\nPYTHONPATH={} exec python3 \"$@\"\n", site.display()),
    );
    let o = w
        .cmd()
        .env("ANIMAWORKS_PYTHON", &python)
        .args(["call", "aw_tool", "key", "--json", "{}"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        "from-animaworks:***",
        "the value is masked in what it printed"
    );
}

/// A sandboxed call's Python can write no byte code under the cache (nor may it: byte code there runs in every
/// tool), so the runner compiles the shim once per interpreter, in the background: timestamped `.pyc` files
/// beside the shim's modules, which Python then loads, and nothing in the tools' folder.
#[test]
fn the_runner_compiles_the_shim_for_sandboxed_calls() {
    let w = World::sandboxed();
    w.tool(
        &w.personal(),
        "lean.py",
        "def get_tool_schemas():\n    return [{'name': 'lean_go', 'input_schema': {'type': 'object'}}]\n\n\
         def dispatch(name, args):\n    return {'ok': True}\n",
    );
    let (code, v) = call(&w, "lean", "go", "{}", &[]);
    assert_eq!(code, 0, "{v}");
    let cache = w.data.join("cache").join("animaworks-tool");
    let pkg = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("pysdk-"))
        .expect("the shim is extracted")
        .join("animaworks_tool_sdk");
    let pycache = pkg.join("__pycache__");
    let marked = || {
        std::fs::read_dir(&pycache).is_ok_and(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(".compiled-"))
        })
    };
    assert!(eventually(30, marked), "no compile marker in {}", pycache.display());
    let names: Vec<String> = std::fs::read_dir(&pycache)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with(".compiling-")), "{names:?}");
    for module in ["__init__", "_wire", "_shim", "_runtime", "_action"] {
        let pyc = names
            .iter()
            .find(|n| n.starts_with(&format!("{module}.")) && n.ends_with(".pyc") && !n.contains(".opt-"))
            .unwrap_or_else(|| panic!("no byte code of {module}: {names:?}"));
        // A timestamp .pyc (PEP 552 flags 0) of this very source: its mtime and size, as Python checks them.
        let head = std::fs::read(pycache.join(pyc)).unwrap();
        let src = std::fs::metadata(pkg.join(format!("{module}.py"))).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(u32::from_le_bytes(head[4..8].try_into().unwrap()), 0, "{pyc}");
        assert_eq!(
            u32::from_le_bytes(head[8..12].try_into().unwrap()),
            src.mtime() as u32,
            "{pyc}"
        );
        assert_eq!(
            u32::from_le_bytes(head[12..16].try_into().unwrap()),
            src.len() as u32,
            "{pyc}"
        );
    }
    assert!(!w.personal().join("__pycache__").exists());
    let (code, v) = call(&w, "lean", "go", "{}", &[]);
    assert_eq!((code, &v), (0, &serde_json::json!({"ok": true})));
}

// ---------------------------------------------------------------- argparse aliases

/// A module whose gated `delete-all` has the argparse alias `rmall`.
const ALIASED: &str = r#"
import argparse

EXECUTION_PROFILE = {"delete-all": {"gated": True, "background_eligible": True}}


def get_tool_schemas():
    return []


def cli_main(argv):
    p = argparse.ArgumentParser(prog="leg")
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("delete-all", aliases=["rmall"])
    sub.add_parser("list")
    p.add_argument("-j", action="store_true")
    a = p.parse_args(argv)
    print("ran", a.cmd)
"#;

/// An argparse alias of a gated subcommand got past the legacy gate (issue 12 item 6).
#[test]
fn an_argparse_alias_does_not_pass_the_gate() {
    let w = World::new();
    std::fs::write(w.personal().join("leg.py"), ALIASED).unwrap();
    let o = run_guarded(w.cmd().args(["leg", "rmall"]), 60).unwrap();
    assert!(
        !stdout(&o).contains("ran"),
        "the alias ran the gated subcommand: {}",
        stdout(&o)
    );
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    assert!(stderr(&o).contains("leg_delete-all"), "{}", stderr(&o));
    let o = run_guarded(w.cmd().args(["leg", "list"]), 60).unwrap();
    assert_eq!(stdout(&o).trim(), "ran list", "{}", stderr(&o));

    let o = run_guarded(w.cmd().args(["submit", "leg", "rmall"]), 60).unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let _ = run_guarded(w.cmd().args(["jobs", "wait", &id, "--timeout", "60"]), 90).unwrap();
    let t = json(&w.run(&["jobs", "show", &id]));
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error_code"], "permission_denied", "{t}");

    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"external_tools": {"allow": ["leg_delete-all"]}}).to_string(),
    )
    .unwrap();
    let o = run_guarded(w.cmd().args(["leg", "rmall"]), 60).unwrap();
    assert_eq!(stdout(&o).trim(), "ran rmall", "with the grant it runs: {}", stderr(&o));
}

/// A cold listing of several modules on a fresh cache: every probe asks for the Python shim at once. One probe's
/// copy was moved aside by another's, so most of them failed ("can't open file …/_start.py", or the interpreter
/// "not found"): 37 listings in 40 with two modules, in the sandbox.
#[test]
fn a_cold_listing_of_many_modules_on_a_fresh_cache_lists_them_all() {
    for sandboxed in [true, false] {
        for round in 0..3 {
            let w = if sandboxed { World::sandboxed() } else { World::new() };
            let names: Vec<String> = (0..8).map(|i| format!("m{i}_tool")).collect();
            for n in &names {
                let action = n.trim_end_matches("_tool");
                std::fs::write(
                    w.personal().join(format!("{n}.py")),
                    format!(
                        "def get_tool_schemas():\n    return [{{\"name\": \"{action}\", \"description\": \"d\", \
                         \"input_schema\": {{\"type\": \"object\"}}}}]\n\ndef dispatch(name, args):\n    return 1\n"
                    ),
                )
                .unwrap();
            }
            // Two runners at once too: one may find the other's copy half made, never one moved away.
            let other = w.cmd().args(["tools", "--json"]).stdout(std::process::Stdio::piped()).spawn().unwrap();
            let lists = [list_json(&w), serde_json::from_slice(&other.wait_with_output().unwrap().stdout).unwrap()];
            for list in lists {
                assert_eq!(
                    list["problems"].as_array().unwrap().len(),
                    0,
                    "sandboxed {sandboxed}, round {round}: {list}"
                );
                for n in &names {
                    assert!(tool_entry(&list, n).is_some(), "{n} missing (sandboxed {sandboxed}): {list}");
                }
            }
        }
    }
}
