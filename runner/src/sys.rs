//! System calls without libc, for code that shares its address space with another process (the guardian, the
//! sandbox's PID-namespace init and the tool's process before its exec): they return `-errno` and touch no
//! thread-local state (libc's wrappers write `errno`, which lives in the other process's thread).

// Why: this file's clone-based rewrite (commit 9bfca51) and the crate-wide unsafe_op_in_unsafe_fn = deny were
// written at the same time; its unsafe fns still need their operations split into SAFETY-argued blocks.
#![allow(unsafe_op_in_unsafe_fn)]

/// One system call with up to four arguments (the fifth and sixth are 0); `-errno` on failure.
///
/// # Safety
/// As the system call itself requires of its arguments.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub unsafe fn call(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
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
    ret
}

/// One system call with up to four arguments (the fifth and sixth are 0); `-errno` on failure.
///
/// # Safety
/// As the system call itself requires of its arguments.
#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
pub unsafe fn call(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let ret: isize;
    std::arch::asm!(
        "svc 0",
        in("x8") n as usize,
        inlateout("x0") a as isize => ret,
        in("x1") b, in("x2") c, in("x3") d, in("x4") 0usize, in("x5") 0usize,
        options(nostack),
    );
    ret
}

/// Elsewhere the guardian is a forked copy, whose errno is its own.
///
/// # Safety
/// As the system call itself requires of its arguments.
#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub unsafe fn call(n: libc::c_long, a: usize, b: usize, c: usize, d: usize) -> isize {
    let r = libc::syscall(n, a, b, c, d);
    if r == -1 {
        -(*libc::__errno_location() as isize)
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
