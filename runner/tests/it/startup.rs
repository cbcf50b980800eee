//! What the runner loads when it starts: every call pays for each shared library ld.so maps (bench/README.md,
//! "Fourth pass"), so the two it does without must not come back unnoticed with a new dependency.

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
        assert!(!libs.iter().any(|p| p.contains("/libgcc_s.so")), "libgcc_s is loaded: {libs:?}");
    }
}
