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
pub const SECRET_VAR: &str = awt_core::env_vars::WORKER_SECRET.name;

/// A fresh secret: 16 random bytes, as hex.
pub fn new_secret() -> String {
    let mut b = [0u8; 16];
    if rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()).ok() != Some(b.len()) {
        return format!("{}{}", awt_core::call::new_call_id(), awt_core::call::new_call_id());
    }
    awt_core::hex::encode(b)
}

/// The token binding the worker holding `secret` to task `task_id`.
pub fn token(secret: &str, task_id: &str) -> String {
    let mut h = Sha256::new();
    h.update(secret.as_bytes());
    h.update(b":");
    h.update(task_id.as_bytes());
    awt_core::hex::encode(&h.finalize()[..16])
}

/// This process's secret, when it is a worker.
pub fn own_secret() -> Option<String> {
    std::env::var(SECRET_VAR).ok().filter(|s| !s.is_empty())
}

/// Why the process a task names is not provably its worker (so it is not signalled).
#[derive(Debug, thiserror::Error)]
pub enum NotProven {
    #[error("the task names no worker")]
    NoWorker,
    #[error("pid {0} is not the process that claimed the task")]
    NotAlive(i32),
    #[error("the task holds no worker token")]
    NoToken,
    #[error("cannot look at pid {pid}'s executable: {source}")]
    TheirExe { pid: i32, source: std::io::Error },
    #[error("cannot look at this runner's executable: {0}")]
    OurExe(std::io::Error),
    #[error("pid {0} does not run this runner's executable")]
    OtherExe(i32),
    #[error("cannot read pid {pid}'s environment: {source}")]
    Environ { pid: i32, source: std::io::Error },
    #[error("pid {0} holds no worker secret")]
    NoSecret(i32),
    #[error("pid {pid} is not the worker of task {task_id}")]
    OtherTask { pid: i32, task_id: String },
    /// The start time changed while it was checked: the pid may have been reused.
    #[error("pid {0} ended while it was being checked")]
    Ended(i32),
}

/// `Ok` with the pid when the process named by `t` is provably the runner's worker running `t`; else why not.
pub fn proves_worker(t: &Task) -> Result<i32, NotProven> {
    let id = ProcessId::of_task(t).ok_or(NotProven::NoWorker)?;
    let pid = id.pid;
    if !id.alive() {
        return Err(NotProven::NotAlive(pid));
    }
    let want = t.worker_token.as_deref().ok_or(NotProven::NoToken)?;
    let exe = std::fs::metadata(format!("/proc/{pid}/exe")).map_err(|source| NotProven::TheirExe { pid, source })?;
    let ours = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map_err(NotProven::OurExe)?;
    if (exe.dev(), exe.ino()) != (ours.dev(), ours.ino()) {
        return Err(NotProven::OtherExe(pid));
    }
    let environ = awt_core::fsread::read(
        std::path::Path::new(&format!("/proc/{pid}/environ")),
        awt_core::fsread::SMALL,
    )
    .map_err(|source| NotProven::Environ { pid, source })?;
    let prefix = format!("{SECRET_VAR}=");
    let secret = environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .and_then(|s| std::str::from_utf8(s).ok())
        .ok_or(NotProven::NoSecret(pid))?;
    if token(secret, &t.task_id) != want {
        return Err(NotProven::OtherTask {
            pid,
            task_id: t.task_id.clone(),
        });
    }
    // The start time again: the pid must not have been reused while we looked.
    if !id.alive() {
        return Err(NotProven::Ended(pid));
    }
    Ok(pid)
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
