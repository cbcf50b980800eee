//! The guardian: a small process started once per runner that kills every live tool group when the runner dies,
//! even by SIGKILL, so tools never outlive the runner (protocol.md §7).
//!
//! Why a process and not only `PR_SET_PDEATHSIG`: the death signal reaches the tool's main process only, never
//! the grandchildren it started (`npx`, shell wrappers, `subprocess.Popen`). The guardian learns each tool's
//! process group through a pipe — written by the tool's own process between fork and exec, so there is no window
//! in which a group exists unregistered — and when the pipe reaches end of file (every runner copy of the write
//! end is closed, which happens when the runner dies), it sends SIGKILL to every group still registered.
//!
//! The guardian shares the runner's address space (see `start_process`), so it never allocates and makes raw
//! system calls only.

use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::sync::OnceLock;

static WRITE_FD: OnceLock<Result<RawFd, i32>> = OnceLock::new();
static GUARDIAN_PID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
static RETIRED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The message that ends the guardian before the pipe closes ([`retire`]); registrations are never 0.
const RETIRE: i32 = 0;

const MAX_GROUPS: usize = 4096;

/// Start the guardian (once per process) and make this process the subreaper of its descendants, so that the
/// members of a tool's group can be reaped after the group is killed.
pub fn start() -> io::Result<()> {
    if RETIRED.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(io::Error::other(
            "the guardian was retired: this runner starts no more tools",
        ));
    }
    // SAFETY: once per process (OnceLock), from the runner's own code.
    let r = WRITE_FD.get_or_init(|| unsafe { fork_guardian() });
    match r {
        Ok(_) => Ok(()),
        Err(errno) => Err(io::Error::from_raw_os_error(*errno)),
    }
}

/// The write end of the guardian pipe, for the spawn path's `pre_exec`; `None` once [`shutdown`] has closed it
/// (its number may belong to another file by then).
pub fn write_fd() -> Option<RawFd> {
    if GUARDIAN_PID.load(std::sync::atomic::Ordering::SeqCst) <= 0 {
        return None;
    }
    WRITE_FD.get().and_then(|r| r.as_ref().ok().copied())
}

/// Called between the clone and the exec in the tool's process: register its (new) process group `pgid` (its
/// pid as the runner sees it).
///
/// # Safety
/// Only in the tool's process between its start and its exec, after its `setsid`, while the runner has not
/// called [`shutdown`]. Async-signal-safe: one raw write, no allocation.
pub unsafe fn register(pgid: i32) {
    if let Some(fd) = write_fd() {
        let bytes = pgid.to_ne_bytes();
        // SAFETY: 4 bytes from this frame to the guardian pipe's write end, open until `shutdown` (the caller's
        // contract); a 4-byte write to a pipe is atomic. Raw: the process may share the runner's errno.
        unsafe { crate::syscall::call(libc::SYS_write, fd as usize, bytes.as_ptr() as usize, 4, 0) };
    }
}

/// The process will start no more tools (a one-shot command's call has ended): the guardian ends every group
/// still registered and exits now, while the runner finishes, instead of when [`shutdown`] closes the pipe. The
/// pipe stays open (so no descriptor number is freed under a concurrent writer); [`start`] fails from here on.
pub fn retire() {
    if RETIRED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    if let Some(fd) = write_fd() {
        let bytes = RETIRE.to_ne_bytes();
        // SAFETY: 4 bytes from this frame to the guardian pipe's write end, open until `shutdown`; atomic.
        unsafe { crate::syscall::call(libc::SYS_write, fd as usize, bytes.as_ptr() as usize, 4, 0) };
    }
}

/// The group has been reaped: the guardian must not kill it (its id may be reused).
pub fn unregister(pgid: i32) {
    if let Some(fd) = write_fd() {
        let bytes = (-pgid).to_ne_bytes();
        // SAFETY: 4 bytes from this frame; a 4-byte write to a pipe is atomic; failure only means the guardian is
        // gone. Raw: a child that never became its tool calls it too, sharing the runner's errno.
        unsafe { crate::syscall::call(libc::SYS_write, fd as usize, bytes.as_ptr() as usize, 4, 0) };
    }
}

/// # Safety
/// Once per process (the guardian and its pipe are kept in statics), from the runner's own code: not in a child
/// between its start and its exec.
unsafe fn fork_guardian() -> Result<RawFd, i32> {
    // Why: orphaned grandchildren are re-parented to us instead of init, so the call path can reap them. A
    // failure leaves them to init, as before.
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let (rfd, wfd) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| e.raw_os_error())?;
    // SAFETY: `rfd` is the read end just made; the caller's contract makes this the only guardian.
    match unsafe { start_process(rfd.as_raw_fd()) } {
        // Both ends closed when dropped (the write end was never published).
        -1 => Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)),
        pid => {
            // The read end is dropped: the guardian has a copy of its own (no CLONE_FILES).
            GUARDIAN_PID.store(pid, std::sync::atomic::Ordering::SeqCst);
            Ok(wfd.into_raw_fd())
        }
    }
}

/// At the runner's exit: close the pipe (the guardian ends every group still registered, then exits) and reap
/// the guardian, so it is never left a zombie for whoever adopts it. Waits at most a second.
pub fn shutdown() {
    let fd = write_fd();
    let pid = GUARDIAN_PID.swap(0, std::sync::atomic::Ordering::SeqCst);
    if pid <= 0 {
        return;
    }
    if let Some(fd) = fd {
        // SAFETY: the write end is ours; after this no one writes to it (the runner is exiting).
        unsafe { libc::close(fd) };
    }
    // Woken the moment the guardian exits (a pidfd is readable then), at most a second; no polling sleep on
    // the exit path of every call.
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        if let Ok(fd) = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) {
            let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
            let second = rustix::event::Timespec { tv_sec: 1, tv_nsec: 0 };
            let _ = rustix::event::poll(&mut fds, Some(&second));
            if !matches!(
                rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG),
                Ok(Some(_))
            ) {
                tracing::warn!("the guardian (pid {pid}) did not end within a second of the runner's exit");
            }
            return;
        }
    }
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        // Ends once it is reaped or cannot be waited for (as waitpid answering anything but 0).
        let r = rustix::process::waitpid(
            rustix::process::Pid::from_raw(pid),
            rustix::process::WaitOptions::NOHANG,
        );
        if !matches!(r, Ok(None)) || std::time::Instant::now() >= end {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// Start the guardian process; its pid, or -1.
///
/// Why `clone(CLONE_VM)` and not `fork`: a fork copies the runner's page tables (a 10 MB binary, its heap) and makes
/// every later write of the runner fault copy-on-write, for a process that needs none of that memory. Sharing the
/// address space costs nothing; the guardian then runs on a stack of its own, writes nothing else, and makes raw
/// system calls only (libc's wrappers would write `errno`, which lives in the runner's thread).
///
/// # Safety
/// As [`fork_guardian`]; `rfd` the guardian pipe's read end.
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn start_process(rfd: RawFd) -> libc::pid_t {
    let Ok(stack) = crate::syscall::Stacks::new(1) else {
        return -1;
    };
    let top = stack.top(0);
    // The mapping is never unmapped: it is the guardian's for as long as it lives.
    std::mem::forget(stack);
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: this is the guardian's start, on its own stack; `arg` is the pipe's read end that clone was given.
        unsafe { guardian_main(arg as usize as RawFd) }
    }
    // Every signal blocked around the clone: until guardian_main has reset them, the runner's handlers would run
    // on the guardian's stack, in shared memory.
    // SAFETY: `entry` runs on the fresh stack and, sharing this memory, touches nothing outside it but its own
    // code (guardian_main: raw system calls, locals only, handlers reset before it unblocks); the mapping is never
    // unmapped, so it outlives the guardian.
    let pid = unsafe {
        crate::syscall::with_signals_blocked(|| {
            libc::clone(
                entry,
                top,
                libc::CLONE_VM | libc::SIGCHLD,
                rfd as usize as *mut libc::c_void,
            )
        })
    };
    if pid < 0 {
        // SAFETY: this thread's errno, for fork_guardian's report.
        unsafe { *libc::__errno_location() = -pid };
        return -1;
    }
    pid
}

/// # Safety
/// As [`fork_guardian`]; `rfd` the guardian pipe's read end.
#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
unsafe fn start_process(rfd: RawFd) -> libc::pid_t {
    // SAFETY: the child is a copy that runs guardian_main only (raw system calls, no allocation, no lock), as a
    // fork of a threaded process must.
    match unsafe { libc::fork() } {
        // SAFETY: the new process, with `rfd` the read end.
        0 => unsafe { guardian_main(rfd) },
        pid => pid,
    }
}

/// # Safety
/// Only in the guardian: every other descriptor is closed, so none may be in use there.
unsafe fn close_all_but(keep: RawFd) {
    // Why: the new process gets a copy of the runner's descriptors, among them pipe ends of tools being spawned by
    // other threads; holding them would keep those tools' stdout open and hide their end of file from the runner.
    let keep = keep as usize;
    // The guardian's descriptor table is its own copy (no CLONE_FILES): closing in it closes nothing of the runner's.
    let lo = if keep > 0 {
        // SAFETY: in the guardian's own table (above), no memory passed.
        unsafe { crate::syscall::call(libc::SYS_close_range, 0, keep - 1, 0, 0) }
    } else {
        0
    };
    // SAFETY: as for `lo`.
    let hi = unsafe { crate::syscall::call(libc::SYS_close_range, keep + 1, u32::MAX as usize, 0, 0) };
    if lo != 0 || hi != 0 {
        for fd in 0..65536 {
            if fd != keep {
                // SAFETY: as for `lo`.
                unsafe { crate::syscall::call(libc::SYS_close, fd, 0, 0, 0) };
            }
        }
    }
}

/// The guardian's life: read registrations until end of file (or [`retire`]), then kill every group still
/// registered.
///
/// # Safety
/// Only as the guardian's start, on a stack of its own (it shares the runner's memory: it touches nothing but its
/// locals); `rfd` the guardian pipe's read end.
unsafe fn guardian_main(rfd: RawFd) -> ! {
    // SAFETY: this is the guardian (the caller's contract), which uses no descriptor but `rfd`.
    unsafe { close_all_but(rfd) };
    // Why: a Ctrl-C or a kill of the runner's process group must not take the guardian with it. (rustix's calls
    // are raw system calls on Linux: no allocation, no `errno`.)
    let _ = rustix::process::setpgid(None, None);
    // The kernel's struct sigaction (handler, flags, restorer, mask) with the handler SIG_IGN.
    let ignore: [usize; 4] = [libc::SIG_IGN, 0, 0, 0];
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE, libc::SIGQUIT] {
        // SAFETY: `ignore` lives on this frame; the guardian's handler table is its own copy (no CLONE_SIGHAND).
        unsafe { crate::syscall::call(libc::SYS_rt_sigaction, sig as usize, ignore.as_ptr() as usize, 0, 8) };
    }
    // SAFETY: as above; started with every signal blocked (start_process), it unblocks with no runner handler left.
    unsafe { crate::syscall::default_signals(&[]) };
    let mut groups = [0i32; MAX_GROUPS];
    let mut buf = [0u8; 4096];
    let mut carry = [0u8; 4];
    let mut carried = 0usize;
    'read: loop {
        // SAFETY: at most `buf.len()` bytes into `buf`, on this frame.
        let n = unsafe { crate::syscall::call(libc::SYS_read, rfd as usize, buf.as_mut_ptr() as usize, buf.len(), 0) };
        if n == -(libc::EINTR as isize) {
            continue;
        }
        if n <= 0 {
            break;
        }
        for &b in &buf[..n as usize] {
            carry[carried] = b;
            carried += 1;
            if carried == 4 {
                carried = 0;
                let v = i32::from_ne_bytes(carry);
                if v == RETIRE {
                    break 'read;
                }
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
        // `g` is a tool's group, registered and not yet unregistered.
        if let Some(g) = (g > 0).then(|| rustix::process::Pid::from_raw(g)).flatten() {
            let _ = rustix::process::kill_process_group(g, rustix::process::Signal::KILL);
        }
    }
    // SAFETY: ends the guardian's own thread group, not the runner's; nothing is left to release.
    unsafe { crate::syscall::call(libc::SYS_exit_group, 0, 0, 0, 0) };
    #[allow(clippy::empty_loop)]
    loop {}
}
