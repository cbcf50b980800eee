//! The guardian: a small process forked once per runner that kills every live tool group when the runner dies,
//! even by SIGKILL, so tools never outlive the runner (protocol.md §7).
//!
//! Why a process and not only `PR_SET_PDEATHSIG`: the death signal reaches the tool's main process only, never
//! the grandchildren it started (`npx`, shell wrappers, `subprocess.Popen`). The guardian learns each tool's
//! process group through a pipe — written by the tool's own process between fork and exec, so there is no window
//! in which a group exists unregistered — and when the pipe reaches end of file (every runner copy of the write
//! end is closed, which happens when the runner dies), it sends SIGKILL to every group still registered.
//!
//! The guardian runs in the forked child of a possibly multi-threaded process, so it only makes
//! async-signal-safe calls and never allocates.

use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;

static WRITE_FD: OnceLock<Result<RawFd, i32>> = OnceLock::new();
static GUARDIAN_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

const MAX_GROUPS: usize = 4096;

/// Start the guardian (once per process) and make this process the subreaper of its descendants, so that the
/// members of a tool's group can be reaped after the group is killed.
pub fn start() -> io::Result<()> {
    let r = WRITE_FD.get_or_init(|| unsafe { fork_guardian() });
    match r {
        Ok(_) => Ok(()),
        Err(errno) => Err(io::Error::from_raw_os_error(*errno)),
    }
}

/// The write end of the guardian pipe, for the spawn path's `pre_exec`.
pub fn write_fd() -> Option<RawFd> {
    WRITE_FD.get().and_then(|r| r.as_ref().ok().copied())
}

/// Called between fork and exec in the tool's process: register its (new) process group.
///
/// # Safety
/// Only async-signal-safe calls; meant for `pre_exec`.
pub unsafe fn register_self() {
    if let Some(fd) = write_fd() {
        let pid: i32 = libc::getpid();
        let bytes = pid.to_ne_bytes();
        libc::write(fd, bytes.as_ptr().cast(), 4);
    }
}

/// The group has been reaped: the guardian must not kill it (its id may be reused).
pub fn unregister(pgid: i32) {
    if let Some(fd) = write_fd() {
        let bytes = (-pgid).to_ne_bytes();
        // SAFETY: a 4-byte write to a pipe is atomic; failure only means the guardian is gone.
        unsafe { libc::write(fd, bytes.as_ptr().cast(), 4) };
    }
}

unsafe fn fork_guardian() -> Result<RawFd, i32> {
    // Why: orphaned grandchildren are re-parented to us instead of init, so the call path can reap them.
    libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    let mut fds = [0 as RawFd; 2];
    if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
        return Err(*libc::__errno_location());
    }
    let (rfd, wfd) = (fds[0], fds[1]);
    match libc::fork() {
        -1 => {
            let e = *libc::__errno_location();
            libc::close(rfd);
            libc::close(wfd);
            Err(e)
        }
        0 => guardian_main(rfd),
        pid => {
            libc::close(rfd);
            GUARDIAN_PID.store(pid, std::sync::atomic::Ordering::SeqCst);
            Ok(wfd)
        }
    }
}

/// At the runner's exit: close the pipe (the guardian ends every group still registered, then exits) and reap
/// the guardian, so it is never left a zombie for whoever adopts it. Waits at most a second.
pub fn shutdown() {
    let pid = GUARDIAN_PID.swap(0, std::sync::atomic::Ordering::SeqCst);
    if pid <= 0 {
        return;
    }
    if let Some(fd) = write_fd() {
        // SAFETY: the write end is ours; after this no one writes to it (the runner is exiting).
        unsafe { libc::close(fd) };
    }
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child, without blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r != 0 || std::time::Instant::now() >= end {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

unsafe fn close_all_but(keep: RawFd) {
    // Why: the fork may copy pipe ends of tools being spawned by other threads; holding them would keep those
    // tools' stdout open and hide their end of file from the runner.
    let max = u32::MAX;
    let lo = libc::syscall(libc::SYS_close_range, 0u32, (keep as u32).saturating_sub(1), 0u32);
    let hi = libc::syscall(libc::SYS_close_range, keep as u32 + 1, max, 0u32);
    if lo != 0 || hi != 0 {
        for fd in 0..65536 {
            if fd != keep {
                libc::close(fd);
            }
        }
    }
}

unsafe fn guardian_main(rfd: RawFd) -> ! {
    if rfd != 0 {
        close_all_but(rfd);
    } else {
        let hi = libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32);
        if hi != 0 {
            for fd in 1..65536 {
                libc::close(fd);
            }
        }
    }
    // Why: a Ctrl-C or a kill of the runner's process group must not take the guardian with it.
    libc::setpgid(0, 0);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE, libc::SIGQUIT] {
        libc::signal(sig, libc::SIG_IGN);
    }
    let mut groups = [0i32; MAX_GROUPS];
    let mut buf = [0u8; 4096];
    let mut carry = [0u8; 4];
    let mut carried = 0usize;
    loop {
        let n = libc::read(rfd, buf.as_mut_ptr().cast(), buf.len());
        if n == 0 {
            break;
        }
        if n < 0 {
            if *libc::__errno_location() == libc::EINTR {
                continue;
            }
            break;
        }
        for &b in &buf[..n as usize] {
            carry[carried] = b;
            carried += 1;
            if carried == 4 {
                carried = 0;
                let v = i32::from_ne_bytes(carry);
                if v > 0 {
                    if let Some(slot) = groups.iter_mut().find(|g| **g == 0) {
                        *slot = v;
                    }
                } else if v < 0 {
                    if let Some(slot) = groups.iter_mut().find(|g| **g == -v) {
                        *slot = 0;
                    }
                }
            }
        }
    }
    for &g in groups.iter() {
        if g > 0 {
            libc::kill(-g, libc::SIGKILL);
        }
    }
    libc::_exit(0)
}
