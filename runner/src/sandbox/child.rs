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
/// Only in the runner's child between its start and its exec; `c` and `e` prepared before the start and changed
/// by nobody since (`e`'s pointers valid C strings and null-terminated arrays of them). With a PID namespace the
/// child must be a fork (a memory of its own, one thread): `C` never execs and runs on after the tool has started.
pub unsafe fn enter_and_exec(c: &Confined, e: &Exec) -> io::Error {
    match &c.pid_ns {
        // SAFETY: the caller's contract, which is enter_pid_ns's.
        Some(ns) => unsafe { enter_pid_ns(ns, c, e) }
            .err()
            .unwrap_or_else(|| io::Error::from_raw_os_error(libc::EIO)),
        // SAFETY: the caller's contract: this process is the one to become the tool.
        None => unsafe { confine_and_exec(c, e) },
    }
}

/// Steps 2 to 4, then the exec. Raw system calls only (see the module doc).
///
/// # Safety
/// Only in the process that is to become the tool, before its exec (its privileges go for good); `c` and `e` as
/// [`enter_and_exec`] requires.
unsafe fn confine_and_exec(c: &Confined, e: &Exec) -> io::Error {
    // SAFETY: this process is to become the tool (the caller's contract).
    unsafe { drop_capabilities(c.last_cap) };
    let steps = || -> io::Result<isize> {
        // SAFETY: integer arguments only; it restricts this process alone.
        check(unsafe { sys(libc::SYS_prctl, libc::PR_SET_NO_NEW_PRIVS as usize, 1, 0, 0) })?;
        if let Some(fd) = &c.ruleset {
            // SAFETY: before the exec, no_new_privs set just above; `fd` is the ruleset `c` owns.
            check(unsafe { landlock::restrict_self(fd.as_raw_fd()) })?;
        }
        if let Some(f) = &c.filter {
            // SAFETY: no_new_privs is set just above.
            check(unsafe { seccomp::install(f) })?;
        }
        // SAFETY: `e`'s path, argv and envp are valid and unchanged (the caller's contract); the kernel copies them
        // before it replaces this process's memory.
        check(unsafe { sys(libc::SYS_execve, e.path as usize, e.argv as usize, e.envp as usize, 0) })
    };
    match steps() {
        Err(e) => e,
        Ok(_) => io::Error::from_raw_os_error(libc::EIO),
    }
}

/// # Safety
/// `path` NUL-terminated. (libc's wrappers: not in a process that shares its `errno`.)
unsafe fn write_file(path: &[u8], data: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated (the caller's contract).
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(err());
    }
    // SAFETY: `data` is readable for its length.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let e = err();
    // SAFETY: `fd` was opened above and is used no more.
    unsafe { libc::close(fd) };
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
fn new_stack() -> io::Result<*mut libc::c_void> {
    // SAFETY: a fresh anonymous mapping; nothing else knows its address.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(err());
    }
    // SAFETY: the first page of the mapping just made, which holds nothing.
    unsafe { libc::mprotect(base, 4096, libc::PROT_NONE) };
    // SAFETY: one past the end of the STACK-byte mapping, its top (stacks grow down).
    Ok(unsafe { base.cast::<u8>().add(STACK) }.cast())
}

/// Returns only with the error that stopped the tool's start; `C` relays the tool's end and never returns.
///
/// # Safety
/// As [`enter_and_exec`] with a PID namespace: in a forked child, before its exec.
unsafe fn enter_pid_ns(ns: &PidNs, c: &Confined, e: &Exec) -> io::Result<()> {
    let flags = libc::CLONE_NEWPID
        | if ns.user { libc::CLONE_NEWUSER } else { 0 }
        | if ns.ro_binds.is_empty() { 0 } else { libc::CLONE_NEWNS }
        | if ns.net.is_some() { libc::CLONE_NEWNET } else { 0 };
    // SAFETY: integer arguments only; this forked child's namespaces alone. Until the first clone this process's
    // memory and errno are its own, so libc's wrappers are fine.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(err());
    }
    if ns.user {
        // SAFETY: a NUL-terminated path.
        unsafe { write_file(b"/proc/self/setgroups\0", b"deny") }?;
        // SAFETY: a NUL-terminated path.
        unsafe { write_file(b"/proc/self/uid_map\0", &ns.uid_map) }?;
        // SAFETY: a NUL-terminated path.
        unsafe { write_file(b"/proc/self/gid_map\0", &ns.gid_map) }?;
    }
    if !ns.ro_binds.is_empty() {
        // Nothing mounted here may reach the runner's mount namespace.
        // SAFETY: a C string target; a propagation change takes no source, type or data (null).
        if unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        } != 0
        {
            return Err(err());
        }
        for b in &ns.ro_binds {
            let p = b.path.as_ptr();
            // SAFETY: `p` is the C string `b` owns; a bind mount takes no type or data.
            if unsafe { libc::mount(p, p, std::ptr::null(), libc::MS_BIND, std::ptr::null()) } != 0
                // SAFETY: as above; a remount takes no source.
                || unsafe { libc::mount(std::ptr::null(), p, std::ptr::null(), b.flags, std::ptr::null()) } != 0
            {
                return Err(err());
            }
        }
    }
    if let Some(net) = &ns.net {
        // SAFETY: between fork and exec, after the unshare made the network namespace; stack memory only.
        unsafe { super::netproxy::listen_in_child(net) }?;
    }
    let mut p = [0i32; 2];
    // SAFETY: `p` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
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
    // SAFETY: G runs g_main on its own stack. `shared` (and what it borrows) stays on this frame while G uses it:
    // after an error word G reads it no more, and after a 0 this process relays and never returns.
    let g = unsafe {
        libc::clone(
            g_main,
            g_stack,
            libc::CLONE_VM | libc::SIGCHLD,
            (&shared as *const Shared).cast_mut().cast(),
        )
    };
    if g < 0 {
        return Err(err());
    }
    // SAFETY: this process's copy of G's end (G has a table of its own); integer arguments only.
    unsafe { sys(libc::SYS_close, p[1] as usize, 0, 0, 0) };
    // G's first word: 0 once T has exec'd, else the error that stopped T.
    // SAFETY: `p[0]` is the status pipe's read end, this process's.
    match unsafe { read_word(p[0]) } {
        // SAFETY: this is C, and the tool has exec'd.
        Some(0) => unsafe { relay(g, p[0]) },
        Some(code) => Err(io::Error::from_raw_os_error(code)),
        None => Err(io::Error::from_raw_os_error(libc::EIO)),
    }
}

/// Four bytes from `fd` (a pipe written four bytes at a time); `None` at end of file.
///
/// # Safety
/// `fd` an open descriptor of this process's, for it to read.
unsafe fn read_word(fd: i32) -> Option<i32> {
    let mut b = [0u8; 4];
    loop {
        // SAFETY: at most 4 bytes into `b`, on this frame.
        let n = unsafe { sys(libc::SYS_read, fd as usize, b.as_mut_ptr() as usize, 4, 0) };
        if n == -(libc::EINTR as isize) {
            continue;
        }
        return (n == 4).then(|| i32::from_ne_bytes(b));
    }
}

/// # Safety
/// `fd` an open descriptor of this process's, for it to write.
unsafe fn write_word(fd: i32, v: i32) {
    let b = v.to_ne_bytes();
    // SAFETY: 4 bytes from `b`, on this frame.
    unsafe { sys(libc::SYS_write, fd as usize, b.as_ptr() as usize, 4, 0) };
}

fn exit(code: i32) -> ! {
    // SAFETY: exit_group ends this process (its own thread group), never returns.
    unsafe { sys(libc::SYS_exit_group, code as usize, 0, 0, 0) };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// `G`: process 1 of the namespace. Starts `T` and waits until it has exec'd (or failed), tells `C`, then reaps.
extern "C" fn g_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is `C`'s `Shared`, alive while `C` waits for this process's first word.
    let s = unsafe { &*(arg as *const Shared) };
    // SAFETY: integer arguments only.
    unsafe {
        sys(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG as usize,
            libc::SIGKILL as usize,
            0,
            0,
        )
    };
    // SAFETY: T runs t_main on its own stack while this process is suspended (CLONE_VFORK) and `C` waits, so `arg`
    // outlives its use. libc's clone writes errno (C's) only when it fails, and nobody reads it then.
    let t = unsafe {
        libc::clone(
            t_main,
            s.t_stack,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        )
    };
    let code = if t < 0 {
        libc::EAGAIN
    } else {
        s.t_err.load(std::sync::atomic::Ordering::SeqCst)
    };
    // SAFETY: `status_fd` is this process's copy of the status pipe's write end.
    unsafe { write_word(s.status_fd, code) };
    if code != 0 {
        let mut st = 0i32;
        if t > 0 {
            // SAFETY: T's status into `st`, on this stack.
            unsafe { sys(libc::SYS_wait4, t as usize, &mut st as *mut i32 as usize, 0, 0) };
        }
        exit(127);
    }
    // SAFETY: this is G, T has exec'd, and `C` relays from now on (so `s` is still there).
    unsafe { init(t, s.status_fd) }
}

/// `T`: becomes the tool. `G` is suspended until this process execs or exits (`CLONE_VFORK`).
extern "C" fn t_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: as in `g_main`; `G`, suspended, writes its word only once this process has gone.
    let s = unsafe { &*(arg as *const Shared) };
    // SAFETY: integer arguments only.
    unsafe {
        sys(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG as usize,
            libc::SIGKILL as usize,
            0,
            0,
        )
    };
    // SAFETY: this process is to become the tool; `s.c` and `s.e` are the caller's of enter_and_exec, unchanged.
    let e = unsafe { confine_and_exec(s.c, s.e) };
    s.t_err.store(
        e.raw_os_error().filter(|c| *c != 0).unwrap_or(libc::EIO),
        std::sync::atomic::Ordering::SeqCst,
    );
    exit(127)
}

/// # Safety
/// Only in `C` or `G` (tables of their own), which use no descriptor but `keep` from here on.
unsafe fn close_all_but(keep: i32) {
    if keep > 0 {
        // SAFETY: integer arguments only; the caller's contract covers the descriptors closed.
        unsafe { sys(libc::SYS_close_range, 0, (keep - 1) as usize, 0, 0) };
    }
    // SAFETY: as above.
    unsafe { sys(libc::SYS_close_range, (keep + 1) as usize, u32::MAX as usize, 0, 0) };
}

/// The kernel's struct sigaction (handler, flags, restorer, mask) with only the handler set.
///
/// # Safety
/// `handler` SIG_DFL or SIG_IGN (no runner code may run here), in a process whose handler table is its own.
unsafe fn set_handler(sig: i32, handler: usize) {
    let act: [usize; 4] = [handler, 0, 0, 0];
    // SAFETY: `act` is on this frame; the handler is the caller's contract.
    unsafe { sys(libc::SYS_rt_sigaction, sig as usize, act.as_ptr() as usize, 0, 8) };
}

/// # Safety
/// In a process whose handler table is its own (`C`, `G`).
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
        // SAFETY: SIG_IGN, in this process's own table (the caller's contract).
        unsafe { set_handler(sig, libc::SIG_IGN) };
    }
}

/// G: reap everything in the namespace; when the tool exits, pass its status to C and exit (which ends the
/// namespace).
///
/// # Safety
/// Only in `G`, once `T` has exec'd; `status_fd` the status pipe's write end.
unsafe fn init(tool: i32, status_fd: i32) -> ! {
    // SAFETY: this is G, which uses no other descriptor from here on.
    unsafe { close_all_but(status_fd) };
    // SAFETY: G's handler table is its own (no CLONE_SIGHAND).
    unsafe { ignore_signals() };
    loop {
        let mut st = 0i32;
        // SAFETY: a status into `st`, on this frame.
        let r = unsafe { sys(libc::SYS_wait4, usize::MAX, &mut st as *mut i32 as usize, 0, 0) };
        if r == tool as isize {
            // SAFETY: `status_fd` is open (kept above).
            unsafe { write_word(status_fd, st) };
            exit(0);
        }
        if r < 0 && r != -(libc::EINTR as isize) {
            exit(127);
        }
    }
}

/// C: wait for G, then end as the tool ended (the same exit code, or the same signal).
///
/// # Safety
/// Only in `C`, once the tool has exec'd; `status_fd` the status pipe's read end.
unsafe fn relay(g: i32, status_fd: i32) -> ! {
    // SAFETY: this is C, which uses no other descriptor from here on.
    unsafe { close_all_but(status_fd) };
    // Why: the runner signals the whole group; the tool gets the signal itself, C must live to relay its end.
    // SAFETY: C's handler table is its own (a fork).
    unsafe { ignore_signals() };
    let mut st = 0i32;
    loop {
        // SAFETY: G's status into `st`, on this frame.
        let r = unsafe { sys(libc::SYS_wait4, g as usize, &mut st as *mut i32 as usize, 0, 0) };
        if r == g as isize {
            break;
        }
        if r != -(libc::EINTR as isize) {
            exit(127);
        }
    }
    // SAFETY: `status_fd` is open (kept above).
    if let Some(s) = unsafe { read_word(status_fd) } {
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
    // SAFETY: `no_core` is a struct rlimit64 on this frame, read by the kernel.
    unsafe {
        sys(
            libc::SYS_prlimit64,
            0,
            libc::RLIMIT_CORE as usize,
            no_core.as_ptr() as usize,
            0,
        )
    };
    // SAFETY: SIG_DFL, in C's own table.
    unsafe { set_handler(sig, libc::SIG_DFL) };
    let unblock: u64 = 1 << (sig - 1);
    // SAFETY: `unblock` is an 8-byte mask on this frame.
    unsafe {
        sys(
            libc::SYS_rt_sigprocmask,
            libc::SIG_UNBLOCK as usize,
            &unblock as *const u64 as usize,
            0,
            8,
        )
    };
    // SAFETY: integer arguments only: this process sends itself the tool's signal.
    unsafe {
        sys(
            libc::SYS_kill,
            sys(libc::SYS_getpid, 0, 0, 0, 0) as usize,
            sig as usize,
            0,
            0,
        )
    };
    exit(128 + sig)
}

/// Drop every capability for good. Failures are ignored: without CAP_SETPCAP there is nothing to drop.
///
/// # Safety
/// Only in the process that is to become the tool: it can never regain them.
unsafe fn drop_capabilities(last_cap: i32) {
    const SECURE: usize = 0xff; // NOROOT, NO_SETUID_FIXUP, KEEP_CAPS(off), NO_CAP_AMBIENT_RAISE, all locked

    // SAFETY: integer arguments only; this process's credentials alone (the caller's contract).
    unsafe {
        sys(
            libc::SYS_prctl,
            libc::PR_SET_SECUREBITS as usize,
            SECURE & !(1 << 4),
            0,
            0,
        )
    };
    for cap in 0..=last_cap {
        // SAFETY: as above.
        unsafe { sys(libc::SYS_prctl, libc::PR_CAPBSET_DROP as usize, cap as usize, 0, 0) };
    }
    // SAFETY: as above.
    unsafe {
        sys(
            libc::SYS_prctl,
            libc::PR_CAP_AMBIENT as usize,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as usize,
            0,
            0,
        )
    };
    let mut hdr = super::kernel::CapHeader {
        version: super::kernel::CAP_VERSION_3,
        pid: 0,
    };
    let data = [super::kernel::CapData::default(); 2];
    // SAFETY: `hdr` and the two `data` entries (version 3's count) are on this frame.
    unsafe {
        sys(
            libc::SYS_capset,
            &mut hdr as *mut _ as usize,
            data.as_ptr() as usize,
            0,
            0,
        )
    };
}
