//! Proof that a process is the runner's worker for one task, before anything signals it. A task file gives a
//! pid, but the file may be forged (any process of the user can write it): a pid with the right start time and
//! boot is not enough, since a forger can copy those of any process.
//!
//! The proof: [`spawn_worker`](super::queue::spawn_worker) gives each worker a random secret in its environment
//! ([`SECRET_VAR`], readable only by the user in `/proc/<pid>/environ`, never passed on to tools, whose environment
//! is built from scratch); a worker records in each task it claims `worker_token` = SHA-256(secret, task id). To
//! signal a pid the runner requires all of: the pid is alive with the recorded start time and boot; its executable
//! is this runner's; its environment holds a secret whose token for *this* task id is the one recorded.

use super::{ProcessId, Task};
use sha2::{Digest, Sha256};
use std::os::unix::fs::MetadataExt;

/// The environment variable holding a worker's secret.
pub const SECRET_VAR: &str = "ANIMAWORKS_TOOL_WORKER_SECRET";

/// A fresh secret: 16 random bytes, as hex.
pub fn new_secret() -> String {
    let mut b = [0u8; 16];
    // SAFETY: getrandom writes at most len bytes into the buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return format!("{}{}", crate::call::new_call_id(), crate::call::new_call_id());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The token binding the worker holding `secret` to task `task_id`.
pub fn token(secret: &str, task_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(secret.as_bytes());
    h.update(b":");
    h.update(task_id.as_bytes());
    h.finalize().iter().take(16).map(|x| format!("{x:02x}")).collect()
}

/// This process's secret, when it is a worker.
pub fn own_secret() -> Option<String> {
    std::env::var(SECRET_VAR).ok().filter(|s| !s.is_empty())
}

/// `Ok` when the process named by `t` is provably the runner's worker running `t`; else why not.
pub fn proves_worker(t: &Task) -> Result<i32, String> {
    let id = ProcessId::of_task(t).ok_or("the task names no worker")?;
    if !id.alive() {
        return Err(format!("pid {} is not the process that claimed the task", id.pid));
    }
    let want = t.worker_token.as_deref().ok_or("the task holds no worker token")?;
    let exe = std::fs::metadata(format!("/proc/{}/exe", id.pid))
        .map_err(|e| format!("cannot look at pid {}'s executable: {e}", id.pid))?;
    let ours = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map_err(|e| format!("cannot look at this runner's executable: {e}"))?;
    if (exe.dev(), exe.ino()) != (ours.dev(), ours.ino()) {
        return Err(format!("pid {} does not run this runner's executable", id.pid));
    }
    let environ = crate::fsread::read(
        std::path::Path::new(&format!("/proc/{}/environ", id.pid)),
        crate::fsread::SMALL,
    )
    .map_err(|e| format!("cannot read pid {}'s environment: {e}", id.pid))?;
    let prefix = format!("{SECRET_VAR}=");
    let secret = environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .and_then(|s| std::str::from_utf8(s).ok())
        .ok_or_else(|| format!("pid {} holds no worker secret", id.pid))?;
    if token(secret, &t.task_id) != want {
        return Err(format!("pid {} is not the worker of task {}", id.pid, t.task_id));
    }
    // The start time again: the pid must not have been reused while we looked.
    if !id.alive() {
        return Err(format!("pid {} ended while it was being checked", id.pid));
    }
    Ok(id.pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_bind_a_secret_to_one_task() {
        let s = new_secret();
        assert_eq!(s.len(), 32);
        assert_eq!(token(&s, "aaa"), token(&s, "aaa"));
        assert_ne!(token(&s, "aaa"), token(&s, "aab"));
        assert_ne!(token(&s, "aaa"), token(&new_secret(), "aaa"));
    }
}
