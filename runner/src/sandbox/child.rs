//! What runs in the tool's process between fork and exec: only system calls on memory prepared before the
//! fork (async-signal-safe, no allocation), in this order:
//!
//! 1. PID namespace (when planned): `unshare`, then two forks. The runner's child `C` stays outside and
//!    relays the tool's exit; `G` is process 1 of the new namespace and reaps; `T` becomes the tool. When `T`
//!    exits, `G` exits and the kernel kills everything left in the namespace — `setsid` daemons included.
//!    `C` and `G` close every descriptor, so the tool's pipes reach end of file when the tool's side closes.
//!    With an enforced host list the same `unshare` makes a network namespace, and `C` hands the runner the
//!    proxy's listener made in it ([`super::netproxy::listen_in_child`]) before the forks.
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

fn err() -> io::Error {
    io::Error::last_os_error()
}

/// Apply `c` to this process; with a PID namespace, returns only in the process that becomes the tool.
///
/// # Safety
/// Only between fork and exec.
pub unsafe fn enter(c: &Confined) -> io::Result<()> {
    if let Some(ns) = &c.pid_ns {
        enter_pid_ns(ns)?;
    }
    drop_capabilities(c.last_cap);
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
        return Err(err());
    }
    if let Some(fd) = &c.ruleset {
        if landlock::restrict_self(fd.as_raw_fd()) != 0 {
            return Err(err());
        }
    }
    if let Some(f) = &c.filter {
        if seccomp::install(f) != 0 {
            return Err(err());
        }
    }
    Ok(())
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

unsafe fn enter_pid_ns(ns: &PidNs) -> io::Result<()> {
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
            b"/\0".as_ptr().cast(),
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
    match libc::fork() {
        -1 => Err(err()),
        0 => {
            // G: process 1 of the namespace.
            libc::close(p[0]);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            match libc::fork() {
                -1 => libc::_exit(127),
                0 => {
                    // T: the tool.
                    libc::close(p[1]);
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    Ok(())
                }
                t => init(t, p[1]),
            }
        }
        g => relay(g, p[0]),
    }
}

unsafe fn close_all_but(keep: i32) {
    if keep > 0 {
        libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32);
    }
    libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32);
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
        libc::signal(sig, libc::SIG_IGN);
    }
}

/// G: reap everything in the namespace; when the tool exits, pass its status to C and exit (which ends the
/// namespace).
unsafe fn init(tool: i32, status_fd: i32) -> ! {
    close_all_but(status_fd);
    ignore_signals();
    loop {
        let mut st = 0;
        let r = libc::waitpid(-1, &mut st, 0);
        if r == tool {
            let b = st.to_ne_bytes();
            libc::write(status_fd, b.as_ptr().cast(), 4);
            libc::_exit(0);
        }
        if r < 0 && *libc::__errno_location() != libc::EINTR {
            libc::_exit(127);
        }
    }
}

/// C: wait for G, then end as the tool ended (the same exit code, or the same signal).
unsafe fn relay(g: i32, status_fd: i32) -> ! {
    close_all_but(status_fd);
    // Why: the runner signals the whole group; the tool gets the signal itself, C must live to relay its end.
    ignore_signals();
    let mut st = 0;
    loop {
        let r = libc::waitpid(g, &mut st, 0);
        if r == g {
            break;
        }
        if r < 0 && *libc::__errno_location() != libc::EINTR {
            libc::_exit(127);
        }
    }
    let mut b = [0u8; 4];
    if libc::read(status_fd, b.as_mut_ptr().cast(), 4) == 4 {
        st = i32::from_ne_bytes(b);
    }
    if libc::WIFEXITED(st) {
        libc::_exit(libc::WEXITSTATUS(st));
    }
    let sig = if libc::WIFSIGNALED(st) {
        libc::WTERMSIG(st)
    } else {
        libc::SIGKILL
    };
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::setrlimit(libc::RLIMIT_CORE, &no_core);
    libc::signal(sig, libc::SIG_DFL);
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigaddset(&mut set, sig);
    libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    libc::kill(libc::getpid(), sig);
    libc::_exit(128 + sig);
}

/// Drop every capability for good. Failures are ignored: without CAP_SETPCAP there is nothing to drop.
unsafe fn drop_capabilities(last_cap: i32) {
    const SECURE: libc::c_ulong = 0xff; // NOROOT, NO_SETUID_FIXUP, KEEP_CAPS(off), NO_CAP_AMBIENT_RAISE, all locked
    libc::prctl(libc::PR_SET_SECUREBITS, SECURE & !(1 << 4), 0, 0, 0);
    for cap in 0..=last_cap {
        libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0);
    }
    libc::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        0,
        0,
        0,
    );
    let mut hdr = super::kernel::CapHeader {
        version: super::kernel::CAP_VERSION_3,
        pid: 0,
    };
    let data = [super::kernel::CapData::default(); 2];
    libc::syscall(libc::SYS_capset, &mut hdr, data.as_ptr());
}
