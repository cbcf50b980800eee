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
