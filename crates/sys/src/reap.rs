//! Ending a tool: SIGTERM to its whole process group, a grace period, SIGKILL to the group, and reaping every
//! member (protocol.md §7).

pub use crate::children::{disown, start_owned};
use crate::children::STARTING;
use std::time::Duration;
use tokio::time::{sleep, Instant};

/// How long a group gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

/// Is any process of group `pgid` still there (zombies included)?
pub fn group_alive(pgid: i32) -> bool {
    group(pgid).is_some_and(|g| rustix::process::test_kill_process_group(g).is_ok())
}

/// A group id that may be signalled: never 0 (the runner's own group) nor 1 (init's).
fn group(pgid: i32) -> Option<rustix::process::Pid> {
    (pgid > 1).then(|| rustix::process::Pid::from_raw(pgid)).flatten()
}

/// Signal every process of group `pgid`. A pgid of 0 or 1 is refused: killpg(0) would signal the runner's own
/// group, and 1 is init's.
pub fn signal_group(pgid: i32, sig: i32) {
    let (Some(g), Some(sig)) = (group(pgid), rustix::process::Signal::from_named_raw(sig)) else {
        tracing::error!("refused to send signal {sig} to process group {pgid}");
        return;
    };
    let _ = rustix::process::kill_process_group(g, sig);
}

/// Reap the members of `pgid` that were re-parented to us (we are their subreaper). Never blocks.
pub fn reap_members(pgid: i32) {
    let Some(g) = group(pgid) else { return };
    while let Ok(Some(_)) = rustix::process::waitpgid(g, rustix::process::WaitOptions::NOHANG) {}
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
            // is doomed: the guardian may forget it. No reaping here: the main process belongs to tokio (its
            // kill-on-drop and orphan queue), and reaping it first would let tokio signal a pid that may be
            // reused; the other members are reaped later by `reap_orphans`.
            signal_group(self.pgid, libc::SIGKILL);
            crate::guardian::unregister(self.pgid);
            // `reap_orphans` reaps the main process from here on (the child handle killed it when dropped).
            disown(self.pgid as u32);
        }
    }
}

/// Wait for (and reap) a child started by `spawn`; cancel-safe like `Child::wait`.
pub async fn wait(child: &mut crate::process::Child) -> std::io::Result<std::process::ExitStatus> {
    let pid = child.id();
    let r = child.wait().await;
    if let (Some(pid), Ok(_)) = (pid, &r) {
        disown(pid);
    }
    r
}

/// Reap exited children that this process adopted as subreaper (members of ended tool groups, a detached task
/// worker's guardian, anything that left its group) and that nobody else will ever wait for. Never blocks, never
/// touches a child we started ourselves. Long-lived callers run it after each call.
pub fn reap_orphans() {
    crate::process::release_abandoned();
    // Not while a child is being started: it may have exited before its owner registered it.
    let _alone = match STARTING.try_write() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for _ in 0..4096 {
        // SAFETY: waitid with WNOWAIT only peeks; siginfo is plain data. (Raw libc: rustix's waitid does not give
        // the pid of the child it saw.)
        let pid = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            if libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) != 0 {
                return;
            }
            info.si_pid()
        };
        if pid <= 0 || crate::children::is_own(pid) {
            // Nothing exited, or the first exited child is ours to reap elsewhere (its owner will, shortly).
            return;
        }
        if rustix::process::getpgid(rustix::process::Pid::from_raw(pid)).ok() == rustix::process::getpgid(None).ok() {
            // A child in our own group was started by the program that embeds this library (tools and what
            // they leave behind are in groups of their own): its own code will wait for it.
            return;
        }
        if let Some(p) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
        }
    }
}

/// In long-lived modes (MCP, `use-tool --serve`): reap adopted orphans every few seconds, so that children of
/// detached task workers and persistent workers' leftovers never pile up as zombies between calls.
pub fn reap_orphans_periodically() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            reap_orphans();
        }
    })
}
