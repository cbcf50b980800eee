//! For tests of every crate of the workspace: a test whose requirement this machine lacks (a kernel feature, a
//! program, a server) says so through [`skipped!`](crate::skipped), never by passing in silence. A skip is not a
//! pass: under `CI=true`, where everything a test needs is installed, it fails the test; elsewhere it prints
//! `SKIPPED: <test>: <why>` and, when `$AWT_TEST_SKIPS` names a file (`test.sh` sets it), adds the test
//! there, so that the run counts it as skipped rather than passed.

use std::io::Write;

/// The file `test.sh` counts skipped tests in, one line per skip: `<test binary> <test name>`.
pub const SKIPS_FILE_ENV: &str = "AWT_TEST_SKIPS";

/// Record that the running test did not run (all of it, or the part `why` names). Use [`skipped!`](crate::skipped).
pub fn skipped(why: std::fmt::Arguments<'_>) {
    // The harness names each test's thread after the test.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("main");
    if std::env::var_os("CI").is_some_and(|v| v == "true") {
        panic!("{test}: CI=true, and this machine lacks what the test needs: {why}");
    }
    eprintln!("SKIPPED: {test}: {why}");
    let Some(file) = std::env::var_os(SKIPS_FILE_ENV) else { return };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    // One write of one line to a file opened for appending: the tests of one binary run in parallel.
    if let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(file) {
        let _ = f.write_all(format!("{binary} {test}\n").as_bytes());
    }
}

/// `skipped!("no PID namespace here: {why}")`: the running test lacks a requirement ([`skipped`]); the caller
/// returns.
#[macro_export]
macro_rules! skipped {
    ($($why:tt)+) => {
        $crate::test_skip::skipped(::std::format_args!($($why)+))
    };
}
