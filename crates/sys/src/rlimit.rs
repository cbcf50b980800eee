//! Resource limits of one process: read the runner's own, and apply a prepared set in the child before its exec
//! (joining the call's cgroup first, [`crate::cgroup`]).

use crate::cgroup;
use crate::syscall::{call as sys, check};

/// The runner's own hard limit of resource `res` (`RLIMIT_*`), or `u64::MAX` when it cannot be read.
pub fn hard_limit(res: u32) -> u64 {
    let mut cur = libc::rlimit64 {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: the runner's own limit read into `cur`, a plain struct on this frame.
    let r = unsafe { sys(libc::SYS_prlimit64, 0, res as usize, 0, &mut cur as *mut _ as usize) };
    if r == 0 {
        cur.rlim_max
    } else {
        u64::MAX
    }
}

/// What the child applies before its exec, prepared before the start: the cgroup to join and the rlimits.
pub struct ChildLimits {
    pub join: cgroup::Join,
    /// `(RLIMIT_*, soft, hard)`.
    pub rlimits: Vec<(u32, u64, u64)>,
}

impl ChildLimits {
    /// In the child, before anything else: join the call's cgroup, set the rlimits. Raw system calls only.
    ///
    /// # Safety
    /// In the runner's child between its start and its exec, `self` prepared before the start.
    pub unsafe fn apply(&self) -> Result<(), crate::start_error::StartError> {
        use crate::start_error::{StartError, Step};
        use std::os::fd::AsRawFd;
        for fd in &self.join.0 {
            // SAFETY: one byte from a static string to a descriptor the parent opened; "0" is the writer itself.
            check(unsafe { sys(libc::SYS_write, fd.as_raw_fd() as usize, b"0".as_ptr() as usize, 1, 0) })
                .map_err(|e| StartError::at(Step::Cgroup, &e))?;
        }
        for &(res, soft, hard) in &self.rlimits {
            let lim = libc::rlimit64 {
                rlim_cur: soft,
                rlim_max: hard,
            };
            // SAFETY: `lim` is a plain struct on this frame; pid 0 is this process.
            check(unsafe { sys(libc::SYS_prlimit64, 0, res as usize, &lim as *const _ as usize, 0) })
                .map_err(|e| StartError::at(Step::Rlimits, &e))?;
        }
        Ok(())
    }
}
