//! What the runner loads when it starts: every call pays for each shared library ld.so maps (bench/README.md),
//! so the two it does without must not come back unnoticed with a new dependency.

use crate::support::*;
use std::process::Stdio;

/// The shared objects mapped into a running runner, once ld.so has loaded them (libc is among them then).
fn mapped_libraries() -> Vec<String> {
    let w = World::new();
    // `mcp` waits on its stdin, so the process stays for its maps to be read.
    let mut child = w
        .cmd()
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let maps = format!("/proc/{}/maps", child.id());
    let mut libs = Vec::new();
    let loaded = eventually(30, || {
        libs = std::fs::read_to_string(&maps)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .filter(|p| p.contains(".so"))
            .map(str::to_owned)
            .collect();
        libs.iter().any(|p| p.contains("/libc.so"))
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(loaded, "libc never appeared in {maps}: {libs:?}");
    libs
}

#[test]
fn the_runner_loads_neither_libm_nor_the_shared_unwinder() {
    let libs = mapped_libraries();
    assert!(!libs.iter().any(|p| p.contains("/libm.so")), "libm is loaded: {libs:?}");
    if option_env!("ANIMAWORKS_TOOL_STATIC_LIBGCC").is_some() {
        assert!(
            !libs.iter().any(|p| p.contains("/libgcc_s.so")),
            "libgcc_s is loaded: {libs:?}"
        );
    }
}

/// A common tool `hi` whose action `go` answers `{"ok": true}`.
fn hi_tool(w: &World) {
    w.tool(
        &w.common(),
        "hi.sh",
        &bash_tool(
            r#"[{"name":"hi_go","description":"Go.","input_schema":{"type":"object"}}]"#,
            r#"echo '{"ok":true}'"#,
        ),
    );
}

/// The runner's own warnings on a call (cli/log.rs, no span registry) are one line each, level first, as the
/// formatter wrote them, and the call still answers.
#[test]
fn a_call_whose_audit_log_cannot_be_written_warns_a_line_at_a_time_and_runs() {
    let w = World::new();
    hi_tool(&w);
    // Where the audit log's folder would be: a file.
    std::fs::write(w.anima.join("state"), "not a folder").unwrap();
    let o = w.run(&["call", "hi", "go"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(json(&o), serde_json::json!({"ok": true}));
    // Two warnings: the log cannot be opened before the call, and its line is lost after it.
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with(" WARN the audit log ")
            && lines[0].ends_with("cannot be written: File exists (os error 17)"),
        "{err}"
    );
    assert!(
        lines[1].starts_with(" WARN could not append to the audit log: "),
        "{err}"
    );
}

/// A warning that quotes a path carries its control characters as visible text, wherever stderr goes (before the
/// warnings subscriber, tracing-subscriber's formatter escaped them too): a name that sets a terminal's title
/// must not reach a log raw.
#[test]
fn a_warning_shows_the_control_characters_of_what_it_quotes() {
    let w = World::new();
    hi_tool(&w);
    let anima = w.anima.parent().unwrap().join("al\x1b]0;PWNED\x07ice");
    std::fs::create_dir_all(anima.join("tools")).unwrap();
    std::fs::write(anima.join("state"), "not a folder").unwrap();
    let o = w
        .cmd()
        .env("ANIMAWORKS_ANIMA_DIR", &anima)
        .args(["call", "hi", "go"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(" WARN the audit log "), "{err}");
    assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
    assert!(err.contains("al^[]0;PWNED^Gice"), "{err:?}");

    // On a terminal that takes colour, the level is painted (a real sequence), the quoted text still escaped.
    let mut cmd = w.cmd();
    cmd.env("ANIMAWORKS_ANIMA_DIR", &anima)
        .env("TERM", "xterm")
        .args(["call", "hi", "go"]);
    let (code, out, term) = run_in_pty(&mut cmd, 200, |_| {});
    assert_eq!(code, Some(0), "{out}{term:?}");
    assert!(term.contains("\x1b[33m WARN\x1b[0m the audit log "), "{term:?}");
    assert!(term.contains("al^[]0;PWNED^Gice") && !term.contains('\x07'), "{term:?}");
}
