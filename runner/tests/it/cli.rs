//! The command line people touch first (issue 11): version, completions, suggestions, the live display, help,
//! output contracts.

use crate::support::*;
use serde_json::Value;

const HELLO: &str = r#"[{"name":"hello_greet","description":"Say hello.","input_schema":{"type":"object","properties":{"who":{"type":"string","description":"Who to greet"},"times":{"type":"integer","minimum":1,"maximum":5,"default":1},"tone":{"enum":["warm","cold"]}},"required":["who"]}}]"#;

fn hello(w: &World) {
    w.tool(
        &w.personal(),
        "hello",
        &bash_tool(HELLO, r#"echo '{"greeting":"hi"}'"#),
    );
}

#[test]
fn version_prints_the_runner_and_protocol_versions() {
    let w = World::new();
    for args in [&["--version"][..], &["version"], &["-V"]] {
        let o = w.run(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.starts_with(&format!("animaworks-tool {} ", env!("CARGO_PKG_VERSION"))) && out.contains("protocol 1"),
            "{args:?}: {out}"
        );
    }
    let v: Value = json(&w.run(&["version", "--json"]));
    assert_eq!(v["protocols"], serde_json::json!([1]));
}

/// Candidates the shell would get for the word at `index` of `words` (clap_complete's bash protocol).
fn complete(w: &World, index: usize, words: &[&str]) -> Vec<String> {
    let o = w
        .cmd()
        .env("ANIMAWORKS_TOOL_COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", index.to_string())
        .env("_CLAP_IFS", "\n")
        .arg("--")
        .args(words)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).lines().map(str::to_owned).collect()
}

#[test]
fn completion_offers_tools_actions_flags_and_enum_values_from_the_cache_without_starting_a_tool() {
    let w = World::new();
    let marker = w.tmp.path().join("started");
    let body = format!("#!/usr/bin/env bash\ntouch {}\nif [ \"$1\" = --schemas ]; then echo '{HELLO}'; exit 0; fi\necho '{{}}'\n", marker.display());
    w.tool(&w.personal(), "hello", &body);
    // Not cached yet: the name only, and no process.
    let c = complete(&w, 1, &["animaworks-tool", "hel"]);
    assert!(c.contains(&"hello".to_owned()), "{c:?}");
    assert!(!complete(&w, 2, &["animaworks-tool", "hello", ""]).contains(&"greet".to_owned()));
    assert!(!marker.exists(), "completion started the tool");
    // Once called (so cached): actions, flags, enum values, under `call` too.
    assert!(w.run(&["hello", "greet", "--who", "x"]).status.success());
    std::fs::remove_file(&marker).unwrap();
    assert!(complete(&w, 2, &["animaworks-tool", "hello", ""]).contains(&"greet".to_owned()));
    let flags = complete(&w, 3, &["animaworks-tool", "hello", "greet", "--"]);
    for f in ["--who", "--times", "--tone", "--json", "--timeout", "--events"] {
        assert!(flags.contains(&f.to_owned()), "{f} missing from {flags:?}");
    }
    assert_eq!(
        complete(&w, 4, &["animaworks-tool", "hello", "greet", "--tone", ""]),
        vec!["warm", "cold"]
    );
    assert_eq!(complete(&w, 3, &["animaworks-tool", "call", "hello", "g"]), vec!["greet"]);
    let cmds = complete(&w, 1, &["animaworks-tool", "jo"]);
    assert_eq!(cmds, vec!["jobs"]);
    assert!(!marker.exists(), "completion started the tool");
}

#[test]
fn completions_prints_a_script_for_each_shell_and_refuses_others() {
    let w = World::new();
    for sh in ["bash", "zsh", "fish"] {
        let o = w.run(&["completions", sh]);
        assert!(o.status.success(), "{sh}: {}", stderr(&o));
        assert!(stdout(&o).contains("ANIMAWORKS_TOOL_COMPLETE"), "{sh}: {}", stdout(&o));
    }
    let o = w.run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bash"), "{}", stderr(&o));
    let o = w.run(&["man"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with(".ie") || stdout(&o).contains(".TH animaworks-tool"), "{}", stdout(&o));
}

#[test]
fn mistyped_tools_actions_and_flags_get_the_closest_name() {
    let w = World::new();
    hello(&w);
    let o = w.run(&["helo", "greet"]);
    assert_eq!(o.status.code(), Some(3));
    let e = json(&o);
    assert_eq!(e["error"]["did_you_mean"], "hello", "{e}");
    assert!(e["error"]["hint"].as_str().unwrap().contains("did you mean \"hello\""), "{e}");
    let o = w.run(&["hello", "gret"]);
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(json(&o)["error"]["did_you_mean"], "greet");
    let o = w.run(&["hello", "greet", "--wh", "x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(json(&o)["error"]["hint"].as_str().unwrap().contains("did you mean \"--who\""));
    // A runner command is a candidate too.
    let o = w.run(&["doctr"]);
    assert!(json(&o)["error"]["hint"].as_str().unwrap().contains("\"doctor\""), "{}", stdout(&o));
}

#[test]
fn an_unknown_tool_and_doctor_say_when_the_personal_tier_was_not_searched() {
    let w = World::new();
    hello(&w);
    let o = w.cmd().env_remove("ANIMAWORKS_ANIMA_DIR").args(["hello", "greet"]).output().unwrap();
    let m = json(&o)["error"]["message"].as_str().unwrap().to_owned();
    assert!(m.contains("personal tier was not searched") && m.contains("ANIMAWORKS_ANIMA_DIR"), "{m}");
    let gone = w.tmp.path().join("animas").join("bob");
    let o = w.cmd().env("ANIMAWORKS_ANIMA_DIR", &gone).args(["hello", "greet"]).output().unwrap();
    let m = json(&o)["error"]["message"].as_str().unwrap().to_owned();
    assert!(m.contains(&format!("{} does not exist", gone.display())), "{m}");
    let o = w.cmd().env("ANIMAWORKS_ANIMA_DIR", &gone).arg("doctor").output().unwrap();
    assert_eq!(o.status.code(), Some(1), "a named anima dir that is missing is a problem");
    assert!(stdout(&o).contains("does not exist"), "{}", stdout(&o));
    let o = w.cmd().env_remove("ANIMAWORKS_ANIMA_DIR").arg("doctor").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("personal tier was not searched"), "{}", stdout(&o));
    // Plurals.
    assert!(stdout(&o).contains("ok: 0 tools, no problems"), "{}", stdout(&o));
    let o = w.run(&["doctor"]);
    assert!(stdout(&o).contains("ok: 1 tool, no problems"), "{}", stdout(&o));
}

#[test]
fn hints_for_an_llm_name_the_meta_tools_and_the_closest_name_never_a_shell_command() {
    let w = World::new();
    hello(&w);
    let ask = |req: &str| -> Value {
        let mut c = w.cmd();
        c.arg("use-tool").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(req.as_bytes()).unwrap();
        let o = child.wait_with_output().unwrap();
        json(&o)
    };
    for (req, near) in [
        (r#"{"tool_name":"helo","action":"greet"}"#, "hello"),
        (r#"{"tool_name":"hello","action":"gret"}"#, "greet"),
        (r#"{"tool_name":"hello","action":"greet","args":{"who":3}}"#, ""),
    ] {
        let a = ask(req);
        let s = a["suggestion"].as_str().unwrap_or_else(|| panic!("no suggestion: {a}"));
        assert!(s.contains(r#""tool_name":"help""#), "{s}");
        assert!(!s.contains("animaworks-tool") && !s.contains('`'), "{s}");
        assert!(s.contains(near), "{s}");
    }
}

#[test]
fn a_task_is_found_by_a_unique_prefix_of_its_id() {
    let w = World::new();
    hello(&w);
    let o = w.run(&["submit", "hello", "greet", "--who", "x"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let o = w.run(&["jobs", "wait", &id[..6]]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = w.run(&["jobs", "show", &id[..5]]);
    assert_eq!(json(&o)["task_id"], id.as_str());
    // Two ids with that prefix: ambiguous, both named.
    let dir = w.anima.join("state/background_tasks");
    let twin = format!("{}ffffff", &id[..6]);
    std::fs::copy(dir.join(format!("{id}.json")), dir.join(format!("{twin}.json"))).unwrap();
    let o = w.run(&["jobs", "show", &id[..6]]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("ambiguous") && stderr(&o).contains(&twin), "{}", stderr(&o));
    let o = w.run(&["jobs", "show", "zzzz"]);
    assert_eq!(o.status.code(), Some(2));
}
