//! Ending a tool: SIGTERM to its whole process group, a grace period, SIGKILL to the group, and reaping every
//! member (protocol.md §7).

use std::time::Duration;
use tokio::time::{sleep, Instant};

/// How long a group gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// Is any process of group `pgid` still there (zombies included)?
pub fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

pub fn signal_group(pgid: i32, sig: i32) {
    // SAFETY: plain kill(2) on a group we created.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// Reap the members of `pgid` that were re-parented to us (we are their subreaper). Never blocks.
pub fn reap_members(pgid: i32) {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on a group we own; WNOHANG never blocks.
        let r = unsafe { libc::waitpid(-pgid, &mut status, libc::WNOHANG) };
        if r <= 0 {
            break;
        }
    }
}

/// Wait until no process of the group is left, reaping as we go; false when `limit` passed first.
pub async fn wait_group_gone(pgid: i32, limit: Duration) -> bool {
    let end = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    loop {
        reap_members(pgid);
        if !group_alive(pgid) {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// SIGTERM, grace, SIGKILL, reap: end everything left in the group.
pub async fn end_group(pgid: i32, grace: Duration) {
    if !group_alive(pgid) {
        return;
    }
    signal_group(pgid, libc::SIGTERM);
    if wait_group_gone(pgid, grace).await {
        return;
    }
    signal_group(pgid, libc::SIGKILL);
    if !wait_group_gone(pgid, Duration::from_secs(5)).await {
        tracing::warn!(pgid, "processes of the tool's group are still there 5 s after SIGKILL");
    }
}

/// Kills the group with SIGKILL when dropped while armed: a call future dropped half-way (a cancelled request,
/// a runtime shutting down) leaves nothing running. Drop only signals; it never starts async work.
pub struct GroupGuard {
    pub pgid: i32,
    armed: bool,
}

impl GroupGuard {
    pub fn new(pgid: i32) -> Self {
        GroupGuard { pgid, armed: true }
    }

    /// The group has been ended and reaped: tell the guardian and stop guarding.
    pub fn disarm(&mut self) {
        if self.armed {
            self.armed = false;
            crate::guardian::unregister(self.pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            // Every member alive at killpg time receives SIGKILL and a dying process cannot fork, so the group
            // is doomed: the guardian may forget it.
            signal_group(self.pgid, libc::SIGKILL);
            reap_members(self.pgid);
            crate::guardian::unregister(self.pgid);
        }
    }
}
