//! A call through the library `Runner` meets the same pipeline as one from the command line: its gates, and its
//! checks of the options it is given.

mod support;

use awt_core::stream::{Cancel, Quiet};
use awt_core::{CallOptions, ErrorCode};
use support::*;

/// A tool `name` whose actions are `actions` (a protocol 1 list); each answers `{"ok": true}`.
fn world_with(dir: fn(&World) -> std::path::PathBuf, name: &str, actions: &str) -> World {
    let w = World::new();
    let schemas = format!(r#"{{"protocol":1,"actions":{actions}}}"#);
    w.tool(
        &dir(&w),
        &format!("{name}.sh"),
        &bash_tool(&schemas, r#"echo '{"ok": true}'"#),
    );
    w
}

#[tokio::test]
async fn library_path_is_gated_too() {
    let w = world_with(
        World::personal,
        "guard",
        r#"[{"name":"wipe","profile":{"gated":true}}]"#,
    );
    let out = w
        .runner()
        .call(
            "guard",
            "wipe",
            Default::default(),
            &Default::default(),
            &mut Quiet,
            Cancel::never(),
        )
        .await;
    let e = out.expect_err("gated");
    assert_eq!(e.code, ErrorCode::PermissionDenied);
}

#[tokio::test]
async fn a_library_call_with_a_deadline_past_the_clock_is_refused_not_a_panic() {
    let w = world_with(World::common, "gt", r#"[{"name":"leak"}]"#);
    let opts = CallOptions {
        timeout: Some(std::time::Duration::MAX),
        ..Default::default()
    };
    let (_tx, cancel) = Cancel::new();
    let out = w
        .runner()
        .call("gt", "leak", Default::default(), &opts, &mut Quiet, cancel)
        .await;
    assert_eq!(out.unwrap_err().code, ErrorCode::Usage);
}
