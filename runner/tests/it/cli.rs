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
