//! System calls without libc, for code that shares its address space with another process (the guardian, the
//! sandbox's PID-namespace init and the tool's process before its exec): they return `-errno` and touch no
//! thread-local state (libc's wrappers write `errno`, which lives in the other process's thread).

/// One system call with up to four arguments (the fifth and sixth are 0); `-errno` on failure.
///
/// # Safety
/// As the system call itself requires of its arguments: every pointer among them valid for what the kernel
/// reads or writes through it, every descriptor one the caller may use, and its effect on this process (memory
/// mappings, descriptors, signal dispositions, its end) one the caller's code is ready for.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub unsafe fn call(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
    // SAFETY: the kernel's x86_64 convention: the number in rax, arguments in rdi, rsi, rdx, r10, r8, r9, the
    // result in rax, rcx and r11 clobbered, no stack used; what the call does with memory is the caller's contract.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a, in("rsi") b, in("rdx") c, in("r10") d,
            // The fifth and sixth arguments are 0, not whatever the registers held: prctl refuses
            // PR_SET_NO_NEW_PRIVS with EINVAL unless its unused arguments are 0.
            in("r8") 0usize, in("r9") 0usize,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// One system call with up to four arguments (the fifth and sixth are 0); `-errno` on failure.
///
/// # Safety
/// As for the x86_64 version.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
pub unsafe fn call(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
    // SAFETY: the kernel's aarch64 convention: the number in x8, arguments in x0 to x5, the result in x0, no other
    // register changed, no stack used; what the call does with memory is the caller's contract.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") n as usize,
            inlateout("x0") a as isize => ret,
            in("x1") b, in("x2") c, in("x3") d, in("x4") 0usize, in("x5") 0usize,
            options(nostack),
        );
    }
    ret
}

/// One system call with five arguments (the sixth is 0); `-errno` on failure.
///
/// # Safety
/// As for [`call`].
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub unsafe fn call5(n: libc::c_long, a: usize, b: usize, c: usize, d: usize, e: usize) -> isize {
    let ret: isize;
    // SAFETY: as in `call`, with the fifth argument in r8.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") n as isize => ret,
            in("rdi") a, in("rsi") b, in("rdx") c, in("r10") d, in("r8") e, in("r9") 0usize,
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// One system call with five arguments (the sixth is 0); `-errno` on failure.
///
/// # Safety
/// As for [`call`].
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
pub unsafe fn call5(n: libc::c_long, a: usize, b: usize, c: usize, d: usize, e: usize) -> isize {
    let ret: isize;
    // SAFETY: as in `call`, with the fifth argument in x4.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") n as usize,
            inlateout("x0") a as isize => ret,
            in("x1") b, in("x2") c, in("x3") d, in("x4") e, in("x5") 0usize,
            options(nostack),
        );
    }
    ret
}

/// One system call with five arguments, through libc.
///
/// # Safety
/// As for [`call`].
#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub unsafe fn call5(n: libc::c_long, a: usize, b: usize, c: usize, d: usize, e: usize) -> isize {
    // SAFETY: the arguments are the caller's contract.
    let r = unsafe { libc::syscall(n, a, b, c, d, e) };
    if r == -1 {
        // SAFETY: __errno_location points to this thread's errno, valid for the thread's life.
        -(unsafe { *libc::__errno_location() } as isize)
    } else {
        r as isize
    }
}

/// Elsewhere the guardian is a forked copy, whose errno is its own.
///
/// # Safety
/// As for the x86_64 version. (Here a failure writes `errno`, which a process sharing this memory shares.)
#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub unsafe fn call(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    // SAFETY: the arguments are the caller's contract.
    let r = unsafe { libc::syscall(n, a, b, c, d) };
    if r == -1 {
        // SAFETY: __errno_location points to this thread's errno, valid for the thread's life.
        -(unsafe { *libc::__errno_location() } as isize)
    } else {
        r as isize
    }
}

/// `r` as a result: a negative return is `-errno`. Builds no allocation (an OS error is a plain code).
pub fn check(r: isize) -> std::io::Result<isize> {
    if r < 0 {
        Err(std::io::Error::from_raw_os_error(-r as i32))
    } else {
        Ok(r)
    }
}

/// `setns(fd, nstype)`, raw.
///
/// # Safety
/// In a process that may change its namespaces (one thread, no shared `fs` for a user namespace): the runner's
/// child before its exec.
pub unsafe fn setns(fd: i32, nstype: libc::c_int) -> std::io::Result<()> {
    // SAFETY: integer arguments; the caller's contract.
    check(unsafe { call(libc::SYS_setns, fd as usize, nstype as usize, 0, 0) }).map(|_| ())
}

/// Stacks for processes started with `clone(CLONE_VM)`: `n` of [`STACK`] bytes in one mapping, each with a guard
/// page below it. Unmapped when dropped: forget it instead while a process may still run on it.
#[derive(Debug)]
pub struct Stacks {
    base: *mut libc::c_void,
    n: usize,
}

pub const STACK: usize = 256 * 1024;

// SAFETY: the mapping is plain memory owned by this value; no thread-bound state.
unsafe impl Send for Stacks {}
// SAFETY: `&Stacks` only hands out addresses.
unsafe impl Sync for Stacks {}

impl Stacks {
    pub fn new(n: usize) -> std::io::Result<Stacks> {
        // SAFETY: a fresh anonymous mapping; nothing else knows its address.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                STACK * n,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let stacks = Stacks { base, n };
        for i in 0..n {
            // SAFETY: the first page of stack `i` of the mapping just made, which holds nothing yet.
            if unsafe { libc::mprotect(base.cast::<u8>().add(i * STACK).cast(), 4096, libc::PROT_NONE) } != 0 {
                // A stack without its guard page would overflow into the one below unseen. (Dropping `stacks`
                // unmaps the mapping.)
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(stacks)
    }

    /// The top of stack `i` (one past its end: stacks grow down).
    pub fn top(&self, i: usize) -> *mut libc::c_void {
        assert!(i < self.n);
        // SAFETY: at most one past the end of the mapping.
        unsafe { self.base.cast::<u8>().add((i + 1) * STACK) }.cast()
    }
}

impl Drop for Stacks {
    fn drop(&mut self) {
        // SAFETY: the mapping this value owns; its owner has made sure no process runs on it any more.
        unsafe { libc::munmap(self.base, STACK * self.n) };
    }
}

/// In a process started with `clone(CLONE_VM)` and every signal blocked: every signal with a handler (the
/// runner's code, which must not run here) and each of `also` back to its default, then nothing blocked.
///
/// # Safety
/// In a process whose handler table is its own (no `CLONE_SIGHAND`), before it needs any handler.
pub unsafe fn default_signals(also: &[i32]) {
    let mut act = [0usize; 4];
    for sig in 1..=64usize {
        if sig == libc::SIGKILL as usize || sig == libc::SIGSTOP as usize {
            continue;
        }
        // SAFETY: the kernel writes its 4-word struct sigaction (8-byte mask) into `act`, on this frame.
        if unsafe { call(libc::SYS_rt_sigaction, sig, 0, act.as_mut_ptr() as usize, 8) } != 0 {
            continue;
        }
        let handled = act[0] != libc::SIG_DFL && act[0] != libc::SIG_IGN;
        if handled || also.contains(&(sig as i32)) {
            let dfl = [libc::SIG_DFL, 0, 0, 0];
            // SAFETY: `dfl` is a struct sigaction on this frame; the table is this process's own (the caller's
            // contract), and a default runs no code.
            unsafe { call(libc::SYS_rt_sigaction, sig, dfl.as_ptr() as usize, 0, 8) };
        }
    }
    let none: u64 = 0;
    // SAFETY: `none` is an 8-byte mask on this frame; no handler of the runner's is left to run.
    unsafe {
        call(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as usize,
            &none as *const u64 as usize,
            0,
            8,
        )
    };
}

/// `f`'s clone with every signal blocked in this thread (as posix_spawn does): the child shares our signal
/// handlers' memory until it has reset them, and unblocks once they are reset. `f`'s result, or `-errno`.
///
/// # Safety
/// `f` a clone whose child resets the handlers before it unblocks ([`crate::syscall::default_signals`]).
pub(crate) unsafe fn with_signals_blocked(f: impl FnOnce() -> libc::c_int) -> libc::c_int {
    // SAFETY: sigset_t is plain data; all zeroes is a valid (empty) set.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as for `all`.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `all` is a valid sigset_t on this frame.
    unsafe { libc::sigfillset(&mut all) };
    // SAFETY: `all` and `old` are valid sigset_t on this frame; this thread's mask only.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) };
    let pid = f();
    let pid = if pid < 0 {
        -std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
    } else {
        pid
    };
    // SAFETY: `old` is the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    pid
}
