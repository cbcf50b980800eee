//! Reaping in a long-lived caller: `reap_orphans` and the starts in progress it must leave alone.

use std::time::{Duration, Instant};

/// The state letter of a process (`Z`: a zombie), from /proc/<pid>/stat; `None` once it is reaped.
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// A long-lived runner reaps orphans after each call, on whichever thread ends one; a child another thread is
/// starting may exit before it is registered as that thread's own. While any start is in progress,
/// `reap_orphans` leaves every child alone (here: an exited child in a group of its own, which it would reap).
#[test]
fn orphans_are_not_reaped_while_a_child_is_being_started() {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new("true");
    cmd.process_group(0);
    let mut child = awt_sys::reap::start_owned(
        || -> std::io::Result<std::process::Child> {
            let c = cmd.spawn()?;
            let pid = c.id() as i32;
            let end = Instant::now() + Duration::from_secs(30);
            while state(pid) != Some('Z') {
                assert!(Instant::now() < end, "the child never exited");
                std::thread::sleep(Duration::from_millis(20));
            }
            awt_sys::reap::reap_orphans();
            assert!(
                state(pid).is_some(),
                "reap_orphans reaped a child while a start was in progress"
            );
            Ok(c)
        },
        |_| None,
    )
    .unwrap();
    // Another test's reap_orphans may have taken it since.
    let _ = child.wait();
}
