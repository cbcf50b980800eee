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

const MAX_GROUPS: usize = 4096;

/// Start the guardian (once per process) and make this process the subreaper of its descendants, so that the
/// members of a tool's group can be reaped after the group is killed.
pub fn start() -> io::Result<()> {
    // SAFETY: run once (OnceLock); fork_guardian makes only the system calls it documents.
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
        let bytes = rustix::process::getpid().as_raw_pid().to_ne_bytes();
        // SAFETY: a 4-byte write from a local buffer to the guardian pipe's write end, which stays open for the
        // runner's life (closed only by `shutdown` at exit).
        unsafe { libc::write(fd, bytes.as_ptr().cast(), 4) };
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

/// # Safety
/// At most once per process.
unsafe fn fork_guardian() -> Result<RawFd, i32> {
    // Why: orphaned grandchildren are re-parented to us instead of init, so the call path can reap them.
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let (rfd, wfd) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| e.raw_os_error())?;
    // SAFETY: the read end is open until the end of this function, and the new process reads nothing else of
    // ours (see start_process).
    match unsafe { start_process(rfd.as_raw_fd()) } {
        -1 => Err(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EAGAIN)),
        pid => {
            GUARDIAN_PID.store(pid, std::sync::atomic::Ordering::SeqCst);
            Ok(wfd.into_raw_fd())
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
    // Woken the moment the guardian exits (a pidfd is readable then), at most a second; no polling sleep on
    // the exit path of every call.
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        if let Ok(fd) = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()) {
            let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
            let second = rustix::event::Timespec { tv_sec: 1, tv_nsec: 0 };
            let _ = rustix::event::poll(&mut fds, Some(&second));
            let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
            return;
        }
    }
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let Some(p) = rustix::process::Pid::from_raw(pid) else {
        return;
    };
    loop {
        let r = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
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
/// `rfd` is open; the guardian's only tie to the runner's memory is that number.
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn start_process(rfd: RawFd) -> libc::pid_t {
    const STACK: usize = 256 * 1024;
    // SAFETY: a fresh anonymous mapping; no existing memory is touched.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return -1;
    }
    // A guard page below the stack. The mapping is never unmapped: it is the guardian's for as long as it lives.
    // SAFETY: the first page of the mapping just made, which nothing uses yet.
    unsafe { libc::mprotect(stack, 4096, libc::PROT_NONE) };
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: the guardian's own stack; only raw system calls from here on.
        unsafe { guardian_main(arg as usize as RawFd) }
    }
    // SAFETY: `top` is one past the end of the STACK-byte mapping above, the initial stack pointer of a
    // downward-growing stack.
    let top = unsafe { stack.cast::<u8>().add(STACK) }.cast();
    // SAFETY: the new process shares the runner's memory (CLONE_VM) but not its descriptors, signal handlers or
    // thread. It runs `entry` on the stack above, which nothing else uses and which is never unmapped, and
    // never returns into the runner's code (guardian_main ends in exit_group). It touches no memory of the
    // runner's: no heap (it never allocates), no locks, no thread-local storage (its thread pointer is the
    // calling thread's, so errno and thread_local! are off limits: sys::call makes system calls directly); its
    // only input is `rfd`, passed by value. The runner may change or unmap any of its own memory meanwhile
    // without the guardian seeing it. Signal handlers are copied, not shared: a runner handler that runs here
    // before guardian_main ignores the signals would be tokio's, which stores to atomics and writes to a pipe.
    unsafe {
        libc::clone(
            entry,
            top,
            libc::CLONE_VM | libc::SIGCHLD,
            rfd as usize as *mut libc::c_void,
        )
    }
}

/// # Safety
/// As the Linux version.
#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
unsafe fn start_process(rfd: RawFd) -> libc::pid_t {
    // SAFETY: the child is a copy of this process that runs guardian_main only (raw system calls, no
    // allocation), and never returns.
    match unsafe { libc::fork() } {
        // SAFETY: as above.
        0 => unsafe { guardian_main(rfd) },
        pid => pid,
    }
}

/// System calls without libc: they return `-errno` and touch no thread-local state.
///
/// # Safety (of every `call`)
/// `n` is a system call whose arguments `a`–`d` (pointers included) are valid for it.
mod sys {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    pub unsafe fn call(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
        let ret: isize;
        // SAFETY: the x86-64 system call ABI: number in rax, arguments in rdi, rsi, rdx, r10; the kernel
        // clobbers rcx and r11 and returns in rax. The arguments are the caller's to get right.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") n as isize => ret,
                in("rdi") a, in("rsi") b, in("rdx") c, in("r10") d,
                lateout("rcx") _, lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    pub unsafe fn call(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
        let ret: isize;
        // SAFETY: the AArch64 system call ABI: number in x8, arguments in x0–x3, result in x0. The arguments are
        // the caller's to get right.
        unsafe {
            std::arch::asm!(
                "svc 0",
                in("x8") n as usize,
                inlateout("x0") a as isize => ret,
                in("x1") b, in("x2") c, in("x3") d,
                options(nostack),
            );
        }
        ret
    }

    // Elsewhere the guardian is a forked copy, whose errno is its own.
    #[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    pub unsafe fn call(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
        // SAFETY: the arguments are the caller's to get right; errno is this (forked) process's own.
        unsafe {
            let r = libc::syscall(n, a, b, c, d);
            if r == -1 {
                -(*libc::__errno_location() as isize)
            } else {
                r as isize
            }
        }
    }
}

/// # Safety
/// Only in the guardian process (the runner's own descriptors must stay open).
unsafe fn close_all_but(keep: RawFd) {
    // Why: the new process gets a copy of the runner's descriptors, among them pipe ends of tools being spawned by
    // other threads; holding them would keep those tools' stdout open and hide their end of file from the runner.
    let keep = keep as usize;
    // Every call here: close_range and close take numbers, no pointers; the descriptors closed are this new
    // process's copies, and nothing of the guardian uses them.
    let lo = if keep > 0 {
        // SAFETY: as above.
        unsafe { sys::call(libc::SYS_close_range, 0, keep - 1, 0, 0) }
    } else {
        0
    };
    // SAFETY: as above.
    let hi = unsafe { sys::call(libc::SYS_close_range, keep + 1, u32::MAX as usize, 0, 0) };
    if lo != 0 || hi != 0 {
        for fd in 0..65536 {
            if fd != keep {
                // SAFETY: as above.
                unsafe { sys::call(libc::SYS_close, fd, 0, 0, 0) };
            }
        }
    }
}

/// # Safety
/// Runs only in the guardian process, as its whole life (see `start_process`); `rfd` is the pipe's read end.
unsafe fn guardian_main(rfd: RawFd) -> ! {
    // SAFETY: this is the guardian process, whose descriptors are its own copies.
    unsafe { close_all_but(rfd) };
    // Why: a Ctrl-C or a kill of the runner's process group must not take the guardian with it.
    // SAFETY: setpgid(0, 0) takes no pointers.
    unsafe { sys::call(libc::SYS_setpgid, 0, 0, 0, 0) };
    // The kernel's struct sigaction (handler, flags, restorer, mask) with the handler SIG_IGN.
    let ignore: [usize; 4] = [libc::SIG_IGN, 0, 0, 0];
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE, libc::SIGQUIT] {
        // SAFETY: `ignore` is a kernel struct sigaction that outlives the call; no old action is asked for;
        // 8 is the size of the kernel's signal mask.
        unsafe { sys::call(libc::SYS_rt_sigaction, sig as usize, ignore.as_ptr() as usize, 0, 8) };
    }
    let mut groups = [0i32; MAX_GROUPS];
    let mut buf = [0u8; 4096];
    let mut carry = [0u8; 4];
    let mut carried = 0usize;
    loop {
        // SAFETY: reads at most buf.len() bytes into `buf`, on this stack.
        let n = unsafe { sys::call(libc::SYS_read, rfd as usize, buf.as_mut_ptr() as usize, buf.len(), 0) };
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
            // SAFETY: kill takes numbers; -g names a tool's group (registered values are tool pids, never 1, so
            // this is never kill(-1)).
            unsafe { sys::call(libc::SYS_kill, (-g) as isize as usize, libc::SIGKILL as usize, 0, 0) };
        }
    }
    // SAFETY: exit_group takes a number and does not return.
    unsafe { sys::call(libc::SYS_exit_group, 0, 0, 0, 0) };
    #[allow(clippy::empty_loop)]
    loop {}
}
