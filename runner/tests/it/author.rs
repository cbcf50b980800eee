//! Tools for authors: `new` writes a working tool that `check` accepts at once; `check` reports broken tools
//! precisely; the examples pass the check and run through the runner.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `check <path> --json`: exit code and the report.
fn check_json(w: &World, path: &Path) -> (i32, Value) {
    let o = w.run(&["check", path.to_str().unwrap(), "--json"]);
    (o.status.code().unwrap(), json(&o))
}

fn check_json_args(w: &World, path: &Path, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["check", path.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let o = w.run(&args);
    (o.status.code().unwrap(), json(&o))
}

fn findings(report: &Value, level: &str) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["level"] == level)
        .map(|f| format!("{}: {}", f["subject"].as_str().unwrap(), f["message"].as_str().unwrap()))
        .collect()
}

#[test]
fn new_tools_pass_check_and_run() {
    let w = World::new();
    for (lang, ext) in [("python", "py"), ("bash", "sh"), ("node", "js")] {
        let name = format!("made_{lang}");
        let o = w.run(&["new", &name, "--lang", lang]);
        assert!(o.status.success(), "new {lang}: {}", stderr(&o));
        let path = w.personal().join(format!("{name}.{ext}"));
        assert!(path.is_file(), "{} not written; stdout: {}", path.display(), stdout(&o));
        assert!(
            stdout(&o).contains(&format!("animaworks-tool check {}", path.display())),
            "{}",
            stdout(&o)
        );

        let o = w.run(&["check", path.to_str().unwrap()]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "check of the new {lang} tool:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(stdout(&o).contains("passes the conformance check"), "{}", stdout(&o));
        assert!(
            !stdout(&o).contains("declares no sandbox"),
            "the template declares its needs: {}",
            stdout(&o)
        );

        let (code, out) = crate::core::call(&w, &name, "echo", r#"{"text":"héllo 🦀"}"#, &[]);
        assert_eq!(code, 0, "{lang}: {out}");
        let echoed = &out["echo"];
        assert!(echoed == "héllo 🦀" || echoed[0] == "héllo 🦀", "{lang}: {out}");
        let (code, out) = crate::core::call(&w, &name, "echo", r#"{"text":""}"#, &[]);
        assert_eq!(code, 1, "{lang}: {out}");
        assert_eq!(out["error"]["tool_code"], "empty_text", "{lang}: {out}");
    }
}

#[test]
fn new_refuses_bad_names_existing_targets_and_denied_creation() {
    let w = World::new();
    for bad in ["a.b", "_hidden", "tools", "check"] {
        let o = w.run(&["new", bad, "--lang", "bash"]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains(&format!("{bad:?}")), "{bad}: {}", stderr(&o));
    }
    assert!(w.run(&["new", "twice", "--lang", "bash"]).status.success());
    let o = w.run(&["new", "twice", "--lang", "bash"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("twice.sh already exists"), "{}", stderr(&o));
    // Another language under the same name would be a second file for one tool.
    let o = w.run(&["new", "twice", "--lang", "node"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("twice.sh is already tool"), "{}", stderr(&o));

    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"tool_creation": {"personal": false}}"#,
    )
    .unwrap();
    let o = w.run(&["new", "denied", "--lang", "python"]);
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    let want = w.anima.join("permissions.json");
    assert!(
        stderr(&o).contains(&want.display().to_string()),
        "the refusal names the file: {}",
        stderr(&o)
    );
    assert!(!w.personal().join("denied.py").exists());
    // --dir writes elsewhere, which the anima's permissions do not govern.
    let elsewhere = w.tmp.path().join("src");
    let o = w.run(&[
        "new",
        "denied",
        "--lang",
        "python",
        "--dir",
        elsewhere.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(elsewhere.join("denied.py").is_file());
}

#[test]
fn new_refuses_a_core_name() {
    let w = World::new();
    w.tool(&w.core, "taken.sh", &crate::core::labelled("taken", "core"));
    let o = w.run(&["new", "taken", "--lang", "bash"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("core tool \"taken\""), "{}", stderr(&o));
}

#[test]
fn new_rust_writes_a_cargo_project_on_the_repo_sdk() {
    let w = World::new();
    let o = w.run(&["new", "crab", "--lang", "rust"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let project = w.personal().join("crab-rs");
    let cargo = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    let sdk = std::fs::canonicalize(repo().join("tool-sdk-rs")).unwrap();
    assert!(
        cargo.contains(&format!(
            "animaworks-tool-sdk = {{ path = {:?} }}",
            sdk.to_str().unwrap()
        )),
        "{cargo}"
    );
    assert!(cargo.contains("name = \"crab\""), "{cargo}");
    let main = std::fs::read_to_string(project.join("src/main.rs")).unwrap();
    assert!(main.contains("Tool::new(\"crab\")"), "{main}");
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    assert!(readme.contains(&format!("{}/crab", w.personal().display())), "{readme}");
    assert!(stdout(&o).contains("cargo build --release"), "{}", stdout(&o));
    // The project folder is not a tool, and leaves the name free for the linked binary.
    let list = crate::core::list_json(&w);
    assert!(
        crate::core::tool_entry(&list, "crab").is_none() && crate::core::problems_of(&list, "crab").is_empty(),
        "{list}"
    );
}

/// Builds the generated Rust project in the workspace's target dir (its dependencies are already built there).
#[test]
fn new_rust_project_builds_and_passes_check() {
    let w = World::new();
    let dir = w.tmp.path().join("src");
    let name = "scaffold_check_crab";
    let o = w.run(&["new", name, "--lang", "rust", "--dir", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    let st = std::process::Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--offline",
            "--target-dir",
            target.to_str().unwrap(),
        ])
        .current_dir(dir.join(name))
        .status()
        .unwrap();
    assert!(st.success(), "the generated project does not build");
    let binary = target.join("debug").join(name);
    let (code, report) = check_json(&w, &binary);
    let _ = std::fs::remove_file(&binary);
    assert_eq!(code, 0, "{report:#}");
    assert!(
        findings(&report, "pass")
            .iter()
            .any(|f| f.starts_with("action echo: called with {\"text\":\"hello\"}")),
        "{report:#}"
    );
}

#[test]
fn check_reports_broken_tools_precisely() {
    let w = World::new();
    let dir = w.tmp.path().join("drafts");
    std::fs::create_dir_all(&dir).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "garbage.sh",
            "#!/bin/bash\necho hello\n".into(),
            "schemas: --schemas did not print one JSON document",
        ),
        (
            "badname.sh",
            bash_tool(r#"{"actions":[{"name":"no spaces"}]}"#, "echo 1"),
            "schemas: action name \"no spaces\" must start with a letter or digit",
        ),
        (
            "badschema.sh",
            bash_tool(r#"{"actions":[{"name":"a","input_schema":{"type":"nope"}}]}"#, "echo 1"),
            "schemas: action \"a\": invalid input_schema",
        ),
        (
            "noise.sh",
            bash_tool(
                r#"{"events":true,"actions":[{"name":"go"}]}"#,
                "echo 'not an event'; echo '{\"type\":\"result\",\"result\":1}'",
            ),
            "action go: called with {}: bad_output",
        ),
        (
            "nofinal.sh",
            bash_tool(
                r#"{"events":true,"actions":[{"name":"go"}]}"#,
                r#"echo '{"type":"progress","progress":1}'"#,
            ),
            "action go: called with {}: bad_output",
        ),
        (
            "dies.sh",
            bash_tool(r#"[{"name":"dies_go"}]"#, "echo oops >&2; exit 3"),
            "action go: called with {}: crashed",
        ),
        (
            "wrongshape.sh",
            bash_tool(
                r#"{"actions":[{"name":"go","output_schema":{"type":"object","required":["n"]}}]}"#,
                r#"echo '{"m":1}'"#,
            ),
            "action go: called with {}: the result does not match its output_schema",
        ),
    ];
    for (file, text, want) in &cases {
        let path = w.tool(&dir, file, text);
        let (code, report) = check_json(&w, &path);
        assert_eq!(code, 1, "{file}: {report}");
        assert_eq!(report["passed"], false);
        let fails = findings(&report, "fail");
        assert!(
            fails.iter().any(|f| f.starts_with(want)),
            "{file}: want a failure starting {want:?}, got {fails:#?}"
        );
    }
    // The crash's stderr is quoted, so the author sees why.
    let (_, report) = check_json(&w, &dir.join("dies.sh"));
    assert!(findings(&report, "fail")[0].contains("oops"), "{report}");

    let plain = dir.join("plainfile");
    std::fs::write(&plain, "#!/bin/sh\n").unwrap();
    let o = w.run(&["check", plain.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains(&format!("FAIL file: {} is not executable", plain.display())),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains(&format!("chmod +x {}", plain.display())),
        "{}",
        stdout(&o)
    );

    let o = w.run(&["check", dir.join("missing.sh").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("cannot read"), "{}", stdout(&o));
}

#[test]
fn check_accepts_a_tool_error_and_fills_required_arguments() {
    let w = World::new();
    let dir = w.tmp.path().join("drafts");
    std::fs::create_dir_all(&dir).unwrap();
    // Echoes its request's args: the check must send every required property, from the schema's hints.
    let schemas = r#"{"events":true,"actions":[{"name":"go","description":"Go.","input_schema":{"type":"object","properties":{
        "city":{"type":"string","examples":["oslo"]},"n":{"type":"integer","minimum":3},"mode":{"enum":["fast","slow"]},
        "opt":{"type":"string"}},"required":["city","n","mode"]}}]}"#;
    let body = r#"args=$(printf '%s' "$req" | sed -E 's/.*"args":(\{[^}]*\}).*/\1/'); echo "{\"type\":\"error\",\"code\":\"seen\",\"message\":$(printf '%s' "$args" | sed 's/"/\\"/g; s/^/"/; s/$/"/')}"; exit 1"#;
    let path = w.tool(&dir, "echoargs.sh", &bash_tool(schemas, body));
    let (code, report) = check_json(&w, &path);
    assert_eq!(code, 0, "{report}");
    let passes = findings(&report, "pass");
    let call = passes
        .iter()
        .find(|f| f.starts_with("action go"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(call.contains(r#"the tool's own error (seen: "#), "{call}");
    let sent: Value = serde_json::from_str(
        call.split("called with ")
            .nth(1)
            .unwrap()
            .split(": the tool")
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(sent, serde_json::json!({"city": "oslo", "n": 3, "mode": "fast"}));
}

#[test]
fn examples_pass_check() {
    let w = World::new();
    let ex = repo().join("examples");
    for p in [
        ex.join("bash-weather/weather.sh"),
        ex.join("node-counter/counter.js"),
        ex.join("python-progress/progress_tool.py"),
        ex.join("legacy-notes/legacy_notes.py"),
    ] {
        let (code, report) = check_json(&w, &p);
        assert_eq!(code, 0, "{}: {report:#}", p.display());
        let calls = findings(&report, "pass")
            .into_iter()
            .filter(|f| f.starts_with("action "))
            .count();
        assert!(calls >= 1, "{}: no action was called: {report:#}", p.display());
    }
}

#[test]
fn bash_weather_through_the_runner() {
    let w = World::new();
    std::fs::copy(
        repo().join("examples/bash-weather/weather.sh"),
        w.personal().join("weather.sh"),
    )
    .unwrap();
    let o = w.run(&["weather", "forecast", "--city", "tokyo", "--days", "2", "--events"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines: Vec<Value> = stdout(&o).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let progress: Vec<&Value> = lines.iter().filter(|l| l["type"] == "progress").collect();
    assert_eq!(progress.len(), 2, "{lines:?}");
    assert_eq!(progress[1]["total"], 2);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["result"]["days"].as_array().unwrap().len(), 2);

    let (code, out) = crate::core::call(&w, "weather", "forecast", r#"{"city":"Zürich"}"#, &[]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out["error"]["tool_code"], "unknown_city");
    assert_eq!(out["error"]["message"], "no forecast for the city \"Zürich\"");
    let (code, out) = crate::core::call(&w, "weather", "forecast", r#"{"city":"oslo","days":9}"#, &[]);
    assert_eq!(code, 5, "the runner validates against the schema: {out}");
}

#[test]
fn node_counter_through_the_runner() {
    let w = World::new();
    std::fs::copy(
        repo().join("examples/node-counter/counter.js"),
        w.personal().join("counter.js"),
    )
    .unwrap();
    let (code, out) = crate::core::call(&w, "counter", "count", r#"{"text":"こんにちは 🦀\nwörld"}"#, &[]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["chars"], 13, "code points, not UTF-16 units: {out}");
    assert_eq!(out["lines"], 2);
    assert_eq!(out["words"], 3);
    let o = w.run(&["counter", "count", "--text", "a\nb\nc", "--events"]);
    let progress = stdout(&o)
        .lines()
        .filter(|l| l.contains(r#""type":"progress""#))
        .count();
    assert_eq!(progress, 3, "{}", stdout(&o));
    let (code, out) = crate::core::call(&w, "counter", "count", r#"{"text":"   "}"#, &[]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out["error"]["tool_code"], "empty_text");
    assert_eq!(out["error"]["hint"], "pass a text with at least one word");
}

/// A gated or destructive action is checked but not called unless the author passes --call-all.
#[test]
fn check_calls_gated_actions_only_when_asked() {
    let w = World::new();
    let marker = w.tmp.path().join("wiped");
    let _ = &marker;
    let tool = w.tool(
        w.tmp.path(),
        "wiper.sh",
        &bash_tool(
            r#"{"protocol":1,"actions":[{"name":"wipe","description":"Wipes.","profile":{"gated":true}},
                {"name":"burn","description":"Burns.","profile":{"hints":{"destructive":true}}}]}"#,
            &format!("touch {}; echo '\"done\"'", marker.display()),
        ),
    );
    let (code, report) = check_json(&w, &tool);
    assert_eq!(code, 0, "{report}");
    assert!(
        !marker.exists(),
        "check called a gated or destructive action without --call-all"
    );
    let passes = findings(&report, "pass");
    assert!(
        passes.iter().filter(|m| m.contains("not called")).count() == 2,
        "{passes:?}"
    );
    let (code, report) = check_json_args(&w, &tool, &["--call-all"]);
    assert_eq!(code, 0, "{report}");
    // The marker stays absent now: check calls the actions in its throwaway world under the sandbox, which
    // refuses a write outside it; that they were called shows in the findings.
    let called = findings(&report, "pass");
    assert_eq!(
        called.iter().filter(|m| m.contains("called with")).count(),
        2,
        "--call-all calls them: {called:?}"
    );
}

/// The Node tools (the `new --lang node` template, the bundled counter) read their request whole from descriptor
/// 0. Node makes that descriptor non-blocking as soon as `process.stdin` is touched, and a request that had not
/// arrived yet was then an EAGAIN crash (seen under load). Run directly with the request written late, each must
/// wait for it.
#[test]
fn node_tools_wait_for_a_request_that_arrives_late() {
    if which("node").is_none() {
        awt_sys::skipped!("node is not installed");
        return;
    }
    let w = World::new();
    assert!(w.run(&["new", "late_node", "--lang", "node"]).status.success());
    let counter = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/node-counter/counter.js");
    let request = r#"{"name":"echo","args":{"text":"late"},"context":{"call_id":"c1"}}"#;
    for tool in [w.personal().join("late_node.js"), counter] {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("(sleep 1; echo '{request}') | node \"$0\""))
            .arg(&tool)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", w.tmp.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("EAGAIN"), "{}: {err}", tool.display());
        assert!(!String::from_utf8_lossy(&o.stdout).is_empty(), "{}: no answer; {err}", tool.display());
    }
}

fn which(p: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(p))
        .find(|f| f.is_file())
}
