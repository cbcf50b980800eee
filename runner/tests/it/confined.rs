//! A failed call that ran confined explains itself (docs/sandbox.md "When a confined call fails"): the error says
//! it ran confined and what it had, and names the grant that allows more; `check` fails an action that the
//! sandbox makes fail, leaves AnimaWorks modules' missing declarations alone, and the `new` templates pass it.

use crate::support::*;
use serde_json::{json, Value};

fn landlock() -> bool {
    let k = awt_core::sandbox::kernel::support();
    if k.landlock_abi < 1 {
        awt_sys::skipped!("no Landlock on this kernel: nothing is confined, so no confined failure can be tested");
        return false;
    }
    true
}

fn error(o: &std::process::Output) -> Value {
    let v = json(o);
    assert!(v["error"].is_object(), "{v}\n{}", stderr(o));
    v["error"].clone()
}

#[test]
fn a_write_the_sandbox_refused_names_the_grant_and_the_grant_works() {
    if !landlock() {
        return;
    }
    let w = World::sandboxed();
    let outside = w.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.join("report.md");
    w.tool(
        &w.personal(),
        "writer.sh",
        &bash_tool(
            r#"[{"name":"writer_go","input_schema":{"type":"object"}}]"#,
            &format!("touch {} || exit 1; echo '{{}}'", target.display()),
        ),
    );
    let e = error(&w.run(&["call", "writer", "go"]));
    assert_eq!(e["reason"], "sandbox_denied", "{e}");
    assert_eq!(e["key"], "sandbox.write", "{e}");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("it ran confined") && m.contains("personal tier"), "{e}");
    assert!(m.contains(&target.display().to_string()), "{e}");
    let hint = e["hint"].as_str().unwrap();
    assert!(
        hint.contains("permissions.json") && hint.contains(&format!("\"write\": [\"{}\"]", outside.display())),
        "{e}"
    );
    assert!(!hint.contains("by hand"), "{e}");
    // The grant the hint names is the one that allows it.
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"sandbox": {"write": [outside]}}).to_string(),
    )
    .unwrap();
    let o = w.run(&["call", "writer", "go"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(target.exists());
}

#[test]
fn a_name_that_does_not_resolve_without_network_names_the_net_grant() {
    if !landlock() {
        return;
    }
    let w = World::sandboxed();
    let py = ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("python3");
    w.tool(
        &w.personal(),
        "fetch.sh",
        &bash_tool(
            r#"[{"name":"fetch_go","input_schema":{"type":"object"}}]"#,
            &format!("exec {py} -c 'import socket; socket.getaddrinfo(\"example.com\", 443)'"),
        ),
    );
    // By default it has the network through the proxy only: a client that resolves names itself is told how to
    // connect directly.
    let e = error(&w.run(&["call", "fetch", "go"]));
    assert_eq!(e["key"], "sandbox.direct_net", "{e}");
    assert!(
        e["hint"].as_str().unwrap().contains(r#""direct_net": ["fetch"]"#),
        "{e}"
    );
    // With the network taken away, the grant that gives it back.
    std::fs::write(w.anima.join("permissions.json"), r#"{"sandbox": {"net": false}}"#).unwrap();
    let e = error(&w.run(&["call", "fetch", "go"]));
    assert!(e["message"].as_str().unwrap().contains("network none"), "{e}");
    assert_eq!(e["key"], "sandbox.net", "{e}");
    assert!(e["hint"].as_str().unwrap().contains(r#""net": ["fetch"]"#), "{e}");
}

#[test]
fn an_unexplained_confined_failure_still_says_it_ran_confined() {
    if !landlock() {
        return;
    }
    let w = World::sandboxed();
    w.tool(
        &w.personal(),
        "fails.sh",
        &bash_tool(
            r#"[{"name":"fails_go","input_schema":{"type":"object"}}]"#,
            "echo 'bad input' >&2; exit 3",
        ),
    );
    let e = error(&w.run(&["call", "fails", "go"]));
    assert!(e["message"].as_str().unwrap().contains("it ran confined"), "{e}");
    assert!(e["hint"].as_str().unwrap().contains("by hand it is not"), "{e}");
    assert!(e.get("reason").is_none(), "{e}");
    // Unconfined, nothing is said of a sandbox.
    let w = World::new();
    w.tool(
        &w.personal(),
        "fails.sh",
        &bash_tool(
            r#"[{"name":"fails_go","input_schema":{"type":"object"}}]"#,
            "echo 'bad input' >&2; exit 3",
        ),
    );
    let e = error(&w.run(&["call", "fails", "go"]));
    assert!(!e["message"].as_str().unwrap().contains("confined"), "{e}");
}

#[test]
fn check_fails_an_action_the_sandbox_makes_fail_and_spares_legacy_modules() {
    if !landlock() {
        return;
    }
    let w = World::new();
    let outside = w.tmp.path().join("out");
    std::fs::create_dir_all(&outside).unwrap();
    let schemas = json!({"protocol": 1, "actions": [{"name": "go", "description": "Write a report.",
        "input_schema": {"type": "object"}, "profile": {"sandbox": {}}}]});
    let tool = w.tool(
        w.tmp.path(),
        "reporter.sh",
        &bash_tool(
            &schemas.to_string(),
            &format!("touch {}/r.md || exit 1; echo '{{}}'", outside.display()),
        ),
    );
    let o = w.run(&["check", tool.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.contains("fails in the sandbox"), "{out}");
    assert!(out.contains("\"write\""), "{out}");

    let module = w.tool(
        w.tmp.path(),
        "legacy_mod.py",
        "def get_tool_schemas():\n    return [{'name': 'legacy_mod_ping', 'description': 'Ping.', 'input_schema': {'type': 'object'}}]\n\
         def dispatch(name, args):\n    return {'ok': True}\n",
    );
    let o = w.run(&["check", module.to_str().unwrap()]);
    assert!(!stdout(&o).contains("declares no sandbox"), "{}", stdout(&o));
}
