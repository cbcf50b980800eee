//! The runner core: a call through the binary.

use crate::support::*;

#[test]
fn bash_tool_called_with_flags_and_json() {
    let w = World::new();
    w.tool(
        &w.common(),
        "hello.sh",
        &bash_tool(
            r#"[{"name":"hello_greet","description":"Say hello.","input_schema":{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}}]"#,
            r#"who=$(echo "$req" | sed -E 's/.*"who":"([^"]*)".*/\1/'); echo "{\"greeting\": \"hello, $who\"}""#,
        ),
    );
    let o = w.run(&["hello", "greet", "--who", "Ada"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o)["greeting"], "hello, Ada");
    let o = w.run(&["call", "hello", "greet", "--json", r#"{"who":"Bo"}"#]);
    assert_eq!(json(&o)["greeting"], "hello, Bo");
    let o = w.run(&["call", "hello", "greet", "--json", r#"{"who":3}"#]);
    assert_eq!(o.status.code(), Some(5));
    assert_eq!(json(&o)["error"]["pointer"], "/who");
}
