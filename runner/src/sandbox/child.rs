//! What runs in the tool's process between fork and exec: only system calls on memory prepared before the
//! fork (async-signal-safe, no allocation), in this order:
//!
//! 1. PID namespace (when planned): `unshare`, then two clones. The runner's child `C` stays outside and
//!    relays the tool's exit; `G` is process 1 of the new namespace and reaps; `T` becomes the tool. When `T`
//!    exits, `G` exits and the kernel kills everything left in the namespace — `setsid` daemons included.
//!    `C` and `G` close every descriptor, so the tool's pipes reach end of file when the tool's side closes.
//!    `G` and `T` share `C`'s memory (`clone(CLONE_VM)`, `T` also `CLONE_VFORK`, as `posix_spawn` does)
//!    instead of each copying it by `fork` (two copies of the runner's page tables, their copy-on-write faults
//!    and their teardown, for two processes that never use that memory). So from
//!    the first clone on, `C`, `G` and `T` make raw system calls only ([`crate::sys`]: libc's wrappers would
//!    write one shared `errno`), and `T` tells `G`, and `G` tells `C`, whether it reached its exec.
//!    With an enforced host list the same `unshare` makes a network namespace, and `C` hands the runner the
//!    proxy's listener made in it ([`super::netproxy::listen_in_child`]) before the clones.
//! 2. Capabilities: every one dropped from all sets and the bounding set, and root's exec rules locked off
//!    (so a tool of a runner started as root runs without privileges).
//! 3. `no_new_privs`, so no set-uid program gives them back.
//! 4. Landlock's ruleset, then the seccomp filter.

// Why: this file's clone-based rewrite (commit 9bfca51) and the crate-wide unsafe_op_in_unsafe_fn = deny were
// written at the same time; its unsafe fns still need their operations split into SAFETY-argued blocks.
#![allow(unsafe_op_in_unsafe_fn)]

use super::landlock;
use super::seccomp::{self, SockFilter};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// A PID namespace to enter, with the user namespace maps when one is needed first, and the paths to make
/// read-only in a mount namespace of its own.
pub struct PidNs {
    pub user: bool,
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    pub ro_binds: Vec<ReadOnlyBind>,
    /// A network namespace whose only way out is the runner's proxy (an enforced host list).
    pub net: Option<super::netproxy::ChildNet>,
}

/// A path to bind-mount read-only over itself, with the flags of the mount it is on (a remount inside a user
/// namespace must keep them).
pub struct ReadOnlyBind {
    path: std::ffi::CString,
    flags: libc::c_ulong,
}

impl ReadOnlyBind {
    pub fn new(p: &std::path::Path) -> Option<ReadOnlyBind> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
        // SAFETY: statvfs is plain data; all zeroes is a valid value.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: path is a valid C string, st a zeroed struct.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return None;
        }
        let mut flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
        for (st_flag, ms) in [
            (libc::ST_NOSUID, libc::MS_NOSUID),
            (libc::ST_NODEV, libc::MS_NODEV),
            (libc::ST_NOEXEC, libc::MS_NOEXEC),
            (libc::ST_NOATIME, libc::MS_NOATIME),
            (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
            (libc::ST_RELATIME, libc::MS_RELATIME),
        ] {
            if st.f_flag & st_flag != 0 {
                flags |= ms;
            }
        }
        Some(ReadOnlyBind { path, flags })
    }
}

/// Everything the child needs, ready before the fork.
pub struct Confined {
    pub ruleset: Option<OwnedFd>,
    pub filter: Option<Vec<SockFilter>>,
    pub pid_ns: Option<PidNs>,
    pub last_cap: i32,
}

/// The program to exec: pointers into strings prepared before the fork.
pub struct Exec {
    pub path: *const libc::c_char,
    pub argv: *const *const libc::c_char,
    pub envp: *const *const libc::c_char,
}

fn err() -> io::Error {
    io::Error::last_os_error()
}

use crate::sys::{call as sys, check};

/// Apply `c` to this process and exec `e`; returns only the error that stopped it (with a PID namespace, in the
/// runner's child, whichever of its processes failed).
///
/// # Safety
/// Only between fork and exec.
pub unsafe fn enter_and_exec(c: &Confined, e: &Exec) -> io::Error {
    match &c.pid_ns {
        Some(ns) => enter_pid_ns(ns, c, e)
            .err()
            .unwrap_or_else(|| io::Error::from_raw_os_error(libc::EIO)),
        None => confine_and_exec(c, e),
    }
}

/// Steps 2 to 4, then the exec. Raw system calls only (see the module doc).
unsafe fn confine_and_exec(c: &Confined, e: &Exec) -> io::Error {
    drop_capabilities(c.last_cap);
    let steps = || -> io::Result<isize> {
        check(sys(libc::SYS_prctl, libc::PR_SET_NO_NEW_PRIVS as usize, 1, 0, 0))?;
        if let Some(fd) = &c.ruleset {
            check(landlock::restrict_self(fd.as_raw_fd()))?;
        }
        if let Some(f) = &c.filter {
            check(seccomp::install(f))?;
        }
        check(sys(
            libc::SYS_execve,
            e.path as usize,
            e.argv as usize,
            e.envp as usize,
            0,
        ))
    };
    match steps() {
        Err(e) => e,
        Ok(_) => io::Error::from_raw_os_error(libc::EIO),
    }
}

unsafe fn write_file(path: &[u8], data: &[u8]) -> io::Result<()> {
    let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(err());
    }
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    let e = err();
    libc::close(fd);
    if n != data.len() as isize {
        return Err(e);
    }
    Ok(())
}

/// What `C` shares with `G` and `T` (on `C`'s stack, which outlives both: `C` never returns while they run).
struct Shared<'a> {
    c: &'a Confined,
    e: &'a Exec,
    /// `G`'s end of the status pipe.
    status_fd: i32,
    /// The top of `T`'s stack.
    t_stack: *mut libc::c_void,
    /// The error that stopped `T` before its exec (0: none); written by `T`, read by `G` once `T` is gone.
    t_err: std::sync::atomic::AtomicI32,
}

const STACK: usize = 256 * 1024;

/// A stack for a clone, with a guard page below it; its top. Never unmapped: the process ends first.
unsafe fn new_stack() -> io::Result<*mut libc::c_void> {
    let base = libc::mmap(
        std::ptr::null_mut(),
        STACK,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
        -1,
        0,
    );
    if base == libc::MAP_FAILED {
        return Err(err());
    }
    libc::mprotect(base, 4096, libc::PROT_NONE);
    Ok(base.cast::<u8>().add(STACK).cast())
}

/// Returns only with the error that stopped the tool's start; `C` relays the tool's end and never returns.
unsafe fn enter_pid_ns(ns: &PidNs, c: &Confined, e: &Exec) -> io::Result<()> {
    let flags = libc::CLONE_NEWPID
        | if ns.user { libc::CLONE_NEWUSER } else { 0 }
        | if ns.ro_binds.is_empty() { 0 } else { libc::CLONE_NEWNS }
        | if ns.net.is_some() { libc::CLONE_NEWNET } else { 0 };
    if libc::unshare(flags) != 0 {
        return Err(err());
    }
    if ns.user {
        write_file(b"/proc/self/setgroups\0", b"deny")?;
        write_file(b"/proc/self/uid_map\0", &ns.uid_map)?;
        write_file(b"/proc/self/gid_map\0", &ns.gid_map)?;
    }
    if !ns.ro_binds.is_empty() {
        // Nothing mounted here may reach the runner's mount namespace.
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return Err(err());
        }
        for b in &ns.ro_binds {
            let p = b.path.as_ptr();
            if libc::mount(p, p, std::ptr::null(), libc::MS_BIND, std::ptr::null()) != 0
                || libc::mount(std::ptr::null(), p, std::ptr::null(), b.flags, std::ptr::null()) != 0
            {
                return Err(err());
            }
        }
    }
    if let Some(net) = &ns.net {
        super::netproxy::listen_in_child(net)?;
    }
    let mut p = [0i32; 2];
    if libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
        return Err(err());
    }
    let g_stack = new_stack()?;
    let shared = Shared {
        c,
        e,
        status_fd: p[1],
        t_stack: new_stack()?,
        t_err: std::sync::atomic::AtomicI32::new(0),
    };
    // From here on `G` runs in this memory: raw system calls only.
    let g = libc::clone(
        g_main,
        g_stack,
        libc::CLONE_VM | libc::SIGCHLD,
        (&shared as *const Shared).cast_mut().cast(),
    );
    if g < 0 {
        return Err(err());
    }
    sys(libc::SYS_close, p[1] as usize, 0, 0, 0);
    // G's first word: 0 once T has exec'd, else the error that stopped T.
    match read_word(p[0]) {
        Some(0) => relay(g, p[0]),
        Some(code) => Err(io::Error::from_raw_os_error(code)),
        None => Err(io::Error::from_raw_os_error(libc::EIO)),
    }
}

/// Four bytes from `fd` (a pipe written four bytes at a time); `None` at end of file.
unsafe fn read_word(fd: i32) -> Option<i32> {
    let mut b = [0u8; 4];
    loop {
        let n = sys(libc::SYS_read, fd as usize, b.as_mut_ptr() as usize, 4, 0);
        if n == -(libc::EINTR as isize) {
            continue;
        }
        return (n == 4).then(|| i32::from_ne_bytes(b));
    }
}

unsafe fn write_word(fd: i32, v: i32) {
    let b = v.to_ne_bytes();
    sys(libc::SYS_write, fd as usize, b.as_ptr() as usize, 4, 0);
}

fn exit(code: i32) -> ! {
    // SAFETY: exit_group ends this process (its own thread group), never returns.
    unsafe { sys(libc::SYS_exit_group, code as usize, 0, 0, 0) };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// `G`: process 1 of the namespace. Starts `T` and waits until it has exec'd (or failed), tells `C`, then reaps.
extern "C" fn g_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is `C`'s `Shared`, alive while `C` waits for this process; raw system calls only, on
    // memory prepared before the clone (libc's clone writes errno only when it fails, and nobody reads it then).
    unsafe {
        let s = &*(arg as *const Shared);
        sys(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG as usize,
            libc::SIGKILL as usize,
            0,
            0,
        );
        let t = libc::clone(
            t_main,
            s.t_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        );
        let code = if t < 0 {
            libc::EAGAIN
        } else {
            s.t_err.load(std::sync::atomic::Ordering::SeqCst)
        };
        write_word(s.status_fd, code);
        if code != 0 {
            let mut st = 0i32;
            if t > 0 {
                sys(libc::SYS_wait4, t as usize, &mut st as *mut i32 as usize, 0, 0);
            }
            exit(127);
        }
        init(t, s.status_fd)
    }
}

/// `T`: becomes the tool. `G` is suspended until this process execs or exits (`CLONE_VFORK`).
extern "C" fn t_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: as for `g_main`.
    unsafe {
        let s = &*(arg as *const Shared);
        sys(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG as usize,
            libc::SIGKILL as usize,
            0,
            0,
        );
        let e = confine_and_exec(s.c, s.e);
        s.t_err.store(
            e.raw_os_error().filter(|c| *c != 0).unwrap_or(libc::EIO),
            std::sync::atomic::Ordering::SeqCst,
        );
        exit(127)
    }
}

unsafe fn close_all_but(keep: i32) {
    if keep > 0 {
        sys(libc::SYS_close_range, 0, (keep - 1) as usize, 0, 0);
    }
    sys(libc::SYS_close_range, (keep + 1) as usize, u32::MAX as usize, 0, 0);
}

/// The kernel's struct sigaction (handler, flags, restorer, mask) with only the handler set.
unsafe fn set_handler(sig: i32, handler: usize) {
    let act: [usize; 4] = [handler, 0, 0, 0];
    sys(libc::SYS_rt_sigaction, sig as usize, act.as_ptr() as usize, 0, 8);
}

unsafe fn ignore_signals() {
    for sig in [
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGPIPE,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
    ] {
        set_handler(sig, libc::SIG_IGN);
    }
}

/// G: reap everything in the namespace; when the tool exits, pass its status to C and exit (which ends the
/// namespace).
unsafe fn init(tool: i32, status_fd: i32) -> ! {
    close_all_but(status_fd);
    ignore_signals();
    loop {
        let mut st = 0i32;
        let r = sys(libc::SYS_wait4, usize::MAX, &mut st as *mut i32 as usize, 0, 0);
        if r == tool as isize {
            write_word(status_fd, st);
            exit(0);
        }
        if r < 0 && r != -(libc::EINTR as isize) {
            exit(127);
        }
    }
}

/// C: wait for G, then end as the tool ended (the same exit code, or the same signal).
unsafe fn relay(g: i32, status_fd: i32) -> ! {
    close_all_but(status_fd);
    // Why: the runner signals the whole group; the tool gets the signal itself, C must live to relay its end.
    ignore_signals();
    let mut st = 0i32;
    loop {
        let r = sys(libc::SYS_wait4, g as usize, &mut st as *mut i32 as usize, 0, 0);
        if r == g as isize {
            break;
        }
        if r != -(libc::EINTR as isize) {
            exit(127);
        }
    }
    if let Some(s) = read_word(status_fd) {
        st = s;
    }
    if libc::WIFEXITED(st) {
        exit(libc::WEXITSTATUS(st));
    }
    let sig = if libc::WIFSIGNALED(st) {
        libc::WTERMSIG(st)
    } else {
        libc::SIGKILL
    };
    let no_core = [0u64; 2];
    sys(
        libc::SYS_prlimit64,
        0,
        libc::RLIMIT_CORE as usize,
        no_core.as_ptr() as usize,
        0,
    );
    set_handler(sig, libc::SIG_DFL);
    let unblock: u64 = 1 << (sig - 1);
    sys(
        libc::SYS_rt_sigprocmask,
        libc::SIG_UNBLOCK as usize,
        &unblock as *const u64 as usize,
        0,
        8,
    );
    sys(
        libc::SYS_kill,
        sys(libc::SYS_getpid, 0, 0, 0, 0) as usize,
        sig as usize,
        0,
        0,
    );
    exit(128 + sig)
}

/// Drop every capability for good. Failures are ignored: without CAP_SETPCAP there is nothing to drop.
unsafe fn drop_capabilities(last_cap: i32) {
    const SECURE: usize = 0xff; // NOROOT, NO_SETUID_FIXUP, KEEP_CAPS(off), NO_CAP_AMBIENT_RAISE, all locked
    sys(
        libc::SYS_prctl,
        libc::PR_SET_SECUREBITS as usize,
        SECURE & !(1 << 4),
        0,
        0,
    );
    for cap in 0..=last_cap {
        sys(libc::SYS_prctl, libc::PR_CAPBSET_DROP as usize, cap as usize, 0, 0);
    }
    sys(
        libc::SYS_prctl,
        libc::PR_CAP_AMBIENT as usize,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as usize,
        0,
        0,
    );
    let mut hdr = super::kernel::CapHeader {
        version: super::kernel::CAP_VERSION_3,
        pid: 0,
    };
    let data = [super::kernel::CapData::default(); 2];
    sys(
        libc::SYS_capset,
        &mut hdr as *mut _ as usize,
        data.as_ptr() as usize,
        0,
        0,
    );
}
