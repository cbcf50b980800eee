//! Refusals of an asking gate name the exact grant that runs the call without asking (the permissions file and
//! the line to add), wherever the ask ends: a "no" at the terminal, or a request the shared database cannot keep.

use crate::support::*;
use serde_json::json;

const SCHEMAS: &str = r#"{"protocol":1,"actions":[
 {"name":"send","input_schema":{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]},"profile":{"gated":true,"credentials":[{"name":"svc","env":"SVC_TOKEN"}]}}
]}"#;

#[test]
fn a_no_at_the_prompt_names_the_grant_that_runs_it_without_asking() {
    let w = crate::approvals::asking();
    let (code, out, term) = crate::approvals::at_terminal(&w, &["mail", "send", "--to", "carol"], "n\n");
    assert_eq!(code, Some(6), "stdout {out}\nterminal {term}");
    let line = format!(
        "add \"mail_send\" to external_tools.allow in {}",
        w.anima.join("permissions.json").display()
    );
    // The terminal wraps nothing; the error's hint is printed on stderr (the pty).
    assert!(term.contains(&line), "the hint names no grant: {term}");
}

#[test]
fn pg_a_call_with_a_credential_in_its_arguments_names_the_grant_it_needs() {
    crate::need_postgres!();
    let w = World::new();
    w.tool(&w.common(), "mail", &bash_tool(SCHEMAS, r#"echo '{"sent":true}'"#));
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"external_tools": {"ask": ["mail_*"]}, "credentials": {"mail": ["svc"]}}).to_string(),
    )
    .unwrap();
    std::fs::write(w.data.join("config.json"), r#"{"locale": "en"}"#).unwrap();
    let url = crate::pg_cluster::shared().new_db();
    w.settings(&json!({"tasks": {"backend": "postgres", "url": url}}).to_string());
    let o = w.run(&["jobs", "migrate"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = w
        .cmd()
        .env("SVC_TOKEN", "tok-approval-555")
        .args([
            "call",
            "mail",
            "send",
            "--json",
            &json!({"to": "tok-approval-555"}).to_string(),
        ])
        .output()
        .unwrap();
    assert_eq!(code(&o), 6, "{} {}", stdout(&o), stderr(&o));
    let e = &json(&o)["error"];
    assert_eq!(e["code"], "permission_denied", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("send of tool 'mail'") && message.contains("credential"),
        "says what is refused: {e}"
    );
    let line = format!(
        "add \"mail_send\" to external_tools.allow in {}",
        w.anima.join("permissions.json").display()
    );
    assert!(e["hint"].as_str().unwrap().contains(&line), "names the grant: {e}");
    assert!(
        !o.stdout.windows(16).any(|x| x == b"tok-approval-555"),
        "the secret is masked"
    );
}

/// The command line warns when the anima dir named does not exist (a typo, a stale client entry); the MCP server
/// said nothing while its other tiers offered tools.
#[test]
fn mcp_warns_when_the_anima_dir_named_does_not_exist() {
    let w = World::new();
    w.tool(
        &w.common(),
        "mail",
        &bash_tool(r#"{"protocol":1,"actions":[{"name":"peek"}]}"#, r#"echo '{"ok":true}'"#),
    );
    let missing = w.tmp.path().join("animas").join("alcie");
    let mut c = w.cmd();
    c.env("ANIMAWORKS_ANIMA_DIR", &missing);
    let mut m = crate::mcp::Mcp::start(c, &[]);
    m.init("2025-11-25");
    let l = m.ask("tools/list", json!({}));
    assert_ne!(l["result"]["tools"], json!([]), "the common tool is offered: {l}");
    let (status, err) = m.finish();
    assert!(status.success(), "{err}");
    assert!(
        err.contains(&format!("the anima dir {} does not exist", missing.display())),
        "no warning: {err}"
    );
}
