//! Resource limits per call (docs/limits.md): each limit ends or fails a real process with
//! bounded amounts (at most 300 MiB touched, 40 processes forked, 100 files opened, 5 MB written), the error
//! names the limit, its value and where it is set, and the audit line says how it was enforced. Where this
//! machine can make no cgroup for a call the cgroup cases skip and say so; the rlimit path is tested everywhere.

use crate::support::*;
use serde_json::{json, Value};

/// A personal bash tool `hog` whose actions are the bodies given.
fn hog(w: &World, actions: &[(&str, &str)]) {
    let schemas: Vec<Value> = actions
        .iter()
        .map(|(a, _)| json!({"name": format!("hog_{a}"), "input_schema": {"type": "object"}}))
        .collect();
    let mut body = String::from("case \"$req\" in\n");
    for (a, b) in actions {
        body.push_str(&format!("*'\"hog_{a}\"'*) {b} ;;\n"));
    }
    body.push_str("esac\n");
    w.tool(
        &w.personal(),
        "hog.sh",
        &bash_tool(&Value::Array(schemas).to_string(), &body),
    );
}

/// A system Python (a pyenv shim under the home folder is a sandbox question, not a limits one).
fn python() -> String {
    ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap_or("python3")
        .to_owned()
}

fn node() -> Option<&'static str> {
    ["/usr/bin/node", "/usr/local/bin/node"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

/// The `sandbox.limits` of the last audit line.
fn last_limits(w: &World) -> Value {
    let audit = std::fs::read_to_string(w.anima.join("state/tool_audit.jsonl")).unwrap();
    let line: Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    line["sandbox"]["limits"].clone()
}

/// Can this machine make a call's cgroup for `controller` (`memory_mib` or `processes`)?
fn cgroup_for(w: &World, key: &str) -> bool {
    let v = json(&w.run(&["doctor", "--json"]));
    let how = &v["sandbox"]["limits"]["how"][key];
    if how["enforced"].as_str().is_some_and(|e| e.starts_with("cgroup")) {
        return true;
    }
    awt_sys::skipped!(
        "no cgroup can be made for a call on this machine ({key}: {how}); the rlimit path is tested apart"
    );
    false
}

fn error(o: &std::process::Output) -> Value {
    let v = json(o);
    assert!(v["error"].is_object(), "{v}");
    v["error"].clone()
}

#[test]
fn a_call_over_its_memory_limit_is_ended_and_the_error_names_the_limit() {
    let w = World::new();
    w.settings(r#"{"limits": {"personal": {"memory_mib": 64}}}"#);
    if !cgroup_for(&w, "memory_mib") {
        return;
    }
    let py = python();
    hog(
        &w,
        &[("mem", &format!("exec {py} -c 'x = bytearray(300 << 20); print(1)'"))],
    );
    let e = error(&w.run(&["call", "hog", "mem"]));
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("memory limit of 64 MiB"), "{e}");
    assert!(m.contains("limits.personal.memory_mib"), "{e}");
    assert_eq!(e["reason"], "limit_reached", "{e}");
    assert_eq!(e["key"], "limits.memory_mib", "{e}");
    assert!(e["hint"].as_str().unwrap().contains("animaworks-tool.json"), "{e}");
    let l = last_limits(&w);
    assert_eq!(l["memory_mib"]["value"], 64, "{l}");
    assert!(
        l["memory_mib"]["enforced"].as_str().unwrap().starts_with("cgroup_v"),
        "{l}"
    );
}

#[test]
fn without_a_cgroup_memory_is_an_rlimit_that_leaves_node_working() {
    let w = World::new();
    w.settings(r#"{"limits": {"cgroups": false, "personal": {"memory_mib": 64}}}"#);
    let py = python();
    let mut actions = vec![(
        "mem".to_owned(),
        format!("exec {py} -c 'x = bytearray(300 << 20); print(1)'"),
    )];
    let node = node();
    if let Some(n) = node {
        // V8 reserves gigabytes of address space it never touches: RLIMIT_AS would refuse its start.
        actions.push((
            "node".into(),
            format!("exec {n} -e 'console.log(JSON.stringify({{ok: 1}}))'"),
        ));
    } else {
        awt_sys::skipped!("node is not installed: the Node case is not run (the others are)");
    }
    let a: Vec<(&str, &str)> = actions.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    hog(&w, &a);
    let e = error(&w.run(&["call", "hog", "mem"]));
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("memory limit of 64 MiB") && m.contains("RLIMIT_DATA"), "{e}");
    assert!(
        m.contains("probably"),
        "an rlimit gives no kernel count: the error says probably: {e}"
    );
    let l = last_limits(&w);
    assert_eq!(l["memory_mib"]["enforced"], "RLIMIT_DATA", "{l}");
    assert_eq!(l["processes"]["enforced"], "not_enforced", "{l}");
    assert!(l["processes"]["why"].as_str().unwrap().contains("cgroups"), "{l}");
    if node.is_some() {
        let o = w.run(&["call", "hog", "node"]);
        assert_eq!(json(&o), json!({"ok": 1}), "{}", stderr(&o));
    }
}

#[test]
fn a_call_over_its_process_limit_fails_and_says_so_in_and_out_of_the_sandbox() {
    for sandboxed in [false, true] {
        let w = if sandboxed { World::sandboxed() } else { World::new() };
        let sandbox = if sandboxed { r#""sandbox": {},"# } else { "" };
        w.settings(&format!(
            r#"{{{sandbox} "limits": {{"personal": {{"processes": 20}}}}}}"#
        ));
        if !cgroup_for(&w, "processes") {
            return;
        }
        // Python's fork fails at once where bash's retries until earlier children are gone.
        let fork = format!(
            "exec {} -c 'import os, time\nfor i in range(40):\n    if os.fork() == 0:\n        time.sleep(2); os._exit(0)'",
            python()
        );
        hog(
            &w,
            &[
                ("fork", &fork),
                ("few", "for i in $(seq 1 10); do sleep 0.1 & done; wait; echo '{}'"),
            ],
        );
        let e = error(&w.run(&["call", "hog", "fork"]));
        assert!(
            e["message"].as_str().unwrap().contains("process limit of 20 processes"),
            "{e}"
        );
        assert_eq!(e["key"], "limits.processes", "{e}");
        // Below the limit all is well, with the PID namespace's init counted apart.
        let o = w.run(&["call", "hog", "few"]);
        assert_eq!(json(&o), json!({}), "sandboxed {sandboxed}: {}", stderr(&o));
    }
}

#[test]
fn cpu_time_file_size_and_open_files_are_rlimits_named_when_they_end_a_call() {
    let w = World::new();
    w.settings(r#"{"limits": {"personal": {"cpu_s": 1, "file_size_mib": 1, "open_files": 50}}}"#);
    let big = w.tmp.path().join("big");
    let py = python();
    hog(
        &w,
        &[
            ("cpu", "while :; do :; done"),
            ("fsize", &format!("exec head -c 5000000 /dev/zero > {}", big.display())),
            (
                "files",
                &format!("exec {py} -c 'import os; fs = [os.open(\"/dev/null\", os.O_RDONLY) for i in range(100)]'"),
            ),
        ],
    );
    let e = error(&w.run(&["call", "hog", "cpu", "--timeout", "30"]));
    assert!(e["message"].as_str().unwrap().contains("CPU-time limit of 1 s"), "{e}");
    assert!(e["message"].as_str().unwrap().contains("SIGXCPU"), "{e}");
    let e = error(&w.run(&["call", "hog", "fsize"]));
    assert!(
        e["message"].as_str().unwrap().contains("file-size limit of 1 MiB"),
        "{e}"
    );
    assert_eq!(std::fs::metadata(&big).unwrap().len(), 1 << 20);
    let e = error(&w.run(&["call", "hog", "files"]));
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("open-file limit of 50 open files"),
        "{e}"
    );
    let l = last_limits(&w);
    assert_eq!(
        l["open_files"],
        json!({"value": 50, "enforced": "RLIMIT_NOFILE", "from": "limits.personal"}),
        "{l}"
    );
    assert_eq!(l["cpu_s"]["enforced"], "RLIMIT_CPU", "{l}");
    assert_eq!(l["file_size_mib"]["enforced"], "RLIMIT_FSIZE", "{l}");
}

#[test]
fn an_anima_lowers_a_limit_and_never_raises_one() {
    let w = World::new();
    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"limits": {"open_files": 30, "file_size_mib": 999999}}"#,
    )
    .unwrap();
    let py = python();
    hog(
        &w,
        &[(
            "files",
            &format!("exec {py} -c 'import os; fs = [os.open(\"/dev/null\", os.O_RDONLY) for i in range(40)]'"),
        )],
    );
    let e = error(&w.run(&["call", "hog", "files"]));
    assert!(e["message"].as_str().unwrap().contains("open-file limit of 30"), "{e}");
    assert!(e["hint"].as_str().unwrap().contains("permissions.json"), "{e}");
    let l = last_limits(&w);
    assert_eq!(l["open_files"]["from"], "permissions.json", "{l}");
    assert_eq!(l["file_size_mib"]["value"], 1024, "{l}");
    assert_eq!(l["file_size_mib"]["from"], "limits.personal", "{l}");
}

#[test]
fn core_tools_have_no_limits_by_default_and_doctor_says_how_each_is_enforced() {
    let w = World::new();
    w.tool(
        &w.core,
        "corehog.sh",
        &bash_tool(
            r#"[{"name":"corehog_n","input_schema":{"type":"object"}}]"#,
            "echo \"$(ulimit -n)\"",
        ),
    );
    let o = w.run(&["call", "corehog", "n"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let l = last_limits(&w);
    for k in ["memory_mib", "processes", "open_files", "file_size_mib", "cpu_s"] {
        assert_eq!(l[k], Value::Null, "{l}");
    }
    let v = json(&w.run(&["doctor", "--json"]));
    let lim = &v["sandbox"]["limits"];
    assert_eq!(lim["tiers"]["personal"]["memory_mib"], 2048, "{lim}");
    assert_eq!(lim["tiers"]["core"]["memory_mib"], Value::Null, "{lim}");
    assert_eq!(lim["how"]["open_files"]["enforced"], "RLIMIT_NOFILE", "{lim}");
    let w2 = World::new();
    w2.settings(r#"{"limits": {"personal": {"memory": 1}}}"#);
    hog(&w2, &[("x", "echo '{}'")]);
    let e = error(&w2.run(&["call", "hog", "x"]));
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("unknown key \"limits.personal.memory\"; did you mean \"memory_mib\"?"),
        "{e}"
    );
}
