//! Resource limits of one process: read the runner's own, and apply a prepared set in the child before its exec
//! (joining the call's cgroup first, [`crate::cgroup`]).

use crate::cgroup;
pub use rustix::process::Resource;

/// The runner's own hard limit of resource `res`; `u64::MAX` when unlimited.
pub fn hard_limit(res: Resource) -> u64 {
    rustix::process::getrlimit(res).maximum.unwrap_or(u64::MAX)
}

/// What the child applies before its exec, prepared before the start: the cgroup to join and the rlimits.
pub struct ChildLimits {
    pub join: cgroup::Join,
    /// `(resource, soft, hard)`.
    pub rlimits: Vec<(Resource, u64, u64)>,
}

impl ChildLimits {
    /// In the child, before anything else: join the call's cgroup, set the rlimits. Only in the runner's child
    /// between its start and its exec (elsewhere it would limit the runner). rustix's calls are raw system calls on
    /// Linux, which neither allocate nor write `errno` (the child shares the runner's memory).
    pub fn apply(&self) -> Result<(), crate::start_error::StartError> {
        use crate::start_error::{StartError, Step};
        let failed = |step, e: rustix::io::Errno| StartError::new(step, e.raw_os_error());
        for fd in &self.join.0 {
            // "0" is the writer itself.
            rustix::io::write(fd, b"0").map_err(|e| failed(Step::Cgroup, e))?;
        }
        for &(res, soft, hard) in &self.rlimits {
            let lim = rustix::process::Rlimit {
                current: Some(soft),
                maximum: Some(hard),
            };
            rustix::process::setrlimit(res, lim).map_err(|e| failed(Step::Rlimits, e))?;
        }
        Ok(())
    }
}
