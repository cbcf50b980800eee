//! What runs in the tool's process between its start and its exec: only system calls on memory prepared before
//! the start (async-signal-safe, no allocation), in this order:
//!
//! 1. PID namespace (when planned): the runner started its child `G` as process 1 of new PID (and user, mount,
//!    network) namespaces ([`crate::process::Start::Init`]), sharing the runner's memory. `G` writes the user
//!    namespace's maps, makes the runner's state files read-only in its mount namespace, and clones `T`
//!    (`clone(CLONE_VM | CLONE_VFORK)`, as `posix_spawn` does), which becomes the tool. `T` tells `G` whether
//!    it reached its exec, `G` tells the runner; then `G` closes every descriptor, reaps, and when `T` exits
//!    leaves `T`'s status in the runner's memory and exits, and the kernel kills everything left in the
//!    namespace — `setsid` daemons included. Sharing the runner's memory, `G` and `T` make raw system calls
//!    only (`crate::syscall`: libc's wrappers would write the errno of the runner's thread).
//!    With an enforced host list `G` also makes the proxy's listener in its network namespace and hands it to
//!    the runner ([`super::netproxy::listen_in_child`]) before it clones `T`.
//! 2. Capabilities: every one dropped from all sets and the bounding set, and root's exec rules locked off
//!    (so a tool of a runner started as root runs without privileges).
//! 3. `no_new_privs`, so no set-uid program gives them back.
//! 4. Landlock's ruleset, then the seccomp filter.

use super::landlock;
use super::seccomp;
use crate::start_error::{StartError, Step};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// A PID namespace to enter, with the user namespace maps when one is needed first, and the mounts to make in a
/// mount namespace of its own (in this order).
pub struct PidNs {
    pub user: bool,
    pub uid_map: Vec<u8>,
    pub gid_map: Vec<u8>,
    pub mounts: Vec<Mount>,
    /// A network namespace whose only way out is the runner's proxy (an enforced host list).
    pub net: Option<super::netproxy::ChildNet>,
    /// That network namespace kept from an earlier call, joined instead of made ([`super::keptnet`]); a start
    /// that cannot join it makes a fresh one.
    pub kept: Option<std::sync::Arc<super::keptnet::KeptNet>>,
}

/// One mount made in the call's mount namespace, before the tool starts (prepared before the fork).
pub struct Mount {
    kind: MountKind,
    target: std::ffi::CString,
    /// The flags of the final remount: the locked flags of the mount the target is on (a remount inside a user
    /// namespace must keep them) and what this mount adds.
    flags: libc::c_ulong,
    /// A target that is gone by the time of the mount is nothing to hide (another call's temp dir, removed).
    if_there: bool,
}

enum MountKind {
    /// The target bound over itself (with what is mounted below it), then remounted with `flags`.
    BindSelf,
    /// An empty, read-only tmpfs over a folder (as bubblewrap's `--tmpfs` and `--remount-ro`).
    EmptyDir,
    /// `/dev/null` bound over a file, on a `nodev` mount: opening it is refused.
    EmptyFile,
    /// An earlier hidden path of the same kind bound here: a bind copies the flags of the mount it is made from
    /// (read-only, `nodev`, `nosuid`, `noexec`), so it needs no tmpfs of its own and no remount.
    Again(std::ffi::CString),
    /// A folder hidden by an empty tmpfs, read-only but for one path beneath it (kept as it was mounted: a copy
    /// of its mount is taken before the folder is covered and moved back in).
    HideAllBut(std::ffi::CString),
}

/// The flags of the mount `p` is on that a remount inside a user namespace must keep.
fn kept_flags(p: &std::ffi::CStr) -> Option<libc::c_ulong> {
    let st = rustix::fs::statvfs(p).ok()?;
    let mut flags = 0;
    for (st_flag, ms) in [
        (libc::ST_RDONLY, libc::MS_RDONLY),
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag.bits() & st_flag != 0 {
            flags |= ms;
        }
    }
    Some(flags)
}

fn c_path(p: &std::path::Path) -> Option<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).ok()
}

// <linux/mount.h> and <fcntl.h> (Linux 5.2+), spelled here for every libc target.
const OPEN_TREE_CLONE: usize = 1;
const AT_RECURSIVE: usize = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: usize = 4;

const NO_DEV_SUID_EXEC: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

impl Mount {
    /// `p` read-only (its exec flag as it is outside the call: a tier folder keeps running its tools even inside a
    /// writable place that is mounted `noexec`).
    pub fn read_only(p: &std::path::Path) -> Option<Mount> {
        let target = c_path(p)?;
        let flags = kept_flags(&target)? | libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
        Some(Mount {
            kind: MountKind::BindSelf,
            target,
            flags,
            if_there: false,
        })
    }

    /// `p` writable as it is, but never executable (write xor execute: no program, library or loader-mapped file
    /// runs from a place the tool can write).
    pub fn no_exec(p: &std::path::Path) -> Option<Mount> {
        let target = c_path(p)?;
        let flags = kept_flags(&target)? | libc::MS_BIND | libc::MS_REMOUNT | NO_DEV_SUID_EXEC;
        Some(Mount {
            kind: MountKind::BindSelf,
            target,
            flags,
            if_there: false,
        })
    }

    /// `p` as it is outside the call (a granted `exec` inside a writable place mounted `noexec`).
    pub fn as_outside(p: &std::path::Path) -> Option<Mount> {
        let target = c_path(p)?;
        let flags = kept_flags(&target)? | libc::MS_BIND | libc::MS_REMOUNT;
        Some(Mount {
            kind: MountKind::BindSelf,
            target,
            flags,
            if_there: false,
        })
    }

    /// `p` hidden: an empty folder or an unopenable file over it (the deny list of reads).
    pub fn hide(p: &std::path::Path, is_dir: bool) -> Option<Mount> {
        let target = c_path(p)?;
        let kind = if is_dir {
            MountKind::EmptyDir
        } else {
            MountKind::EmptyFile
        };
        let flags = match kind {
            MountKind::EmptyDir => libc::MS_RDONLY | NO_DEV_SUID_EXEC,
            _ => kept_flags(c"/dev/null")? | libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | NO_DEV_SUID_EXEC,
        };
        Some(Mount {
            kind,
            target,
            flags,
            if_there: false,
        })
    }

    /// `p` hidden as `first` was: the same empty folder or unopenable file, bound from `first`'s mount, which
    /// must be made before this one and be of the same kind (a folder for a folder, a file for a file).
    pub fn hide_like(p: &std::path::Path, first: &Mount) -> Option<Mount> {
        if !matches!(first.kind, MountKind::EmptyDir | MountKind::EmptyFile) {
            return None;
        }
        Some(Mount {
            kind: MountKind::Again(first.target.clone()),
            target: c_path(p)?,
            flags: 0,
            if_there: false,
        })
    }

    /// The folder `p` hidden (an empty read-only tmpfs), but for `keep` beneath it, which stays as it is mounted
    /// when this mount is made (the calls folder and the call's own temp dir, bound `noexec` before).
    pub fn hide_all_but(p: &std::path::Path, keep: &std::path::Path) -> Option<Mount> {
        if keep.parent() != Some(p) {
            return None;
        }
        Some(Mount {
            kind: MountKind::HideAllBut(c_path(keep)?),
            target: c_path(p)?,
            flags: libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | NO_DEV_SUID_EXEC,
            if_there: false,
        })
    }

    /// The same mount, skipped when its target no longer exists.
    pub fn if_there(mut self) -> Mount {
        self.if_there = true;
        self
    }

    /// Make it, in `G`'s mount namespace (raw system calls only).
    ///
    /// # Safety
    /// In `G`, in a mount namespace of its own whose root is already private.
    unsafe fn apply(&self) -> io::Result<()> {
        let t = self.target.as_ptr();
        match self.kind {
            MountKind::BindSelf => {
                // SAFETY: C strings this mount owns; a bind mount takes no type or data.
                check(unsafe { mount(t, t, libc::MS_BIND | libc::MS_REC, std::ptr::null()) })?;
            }
            MountKind::EmptyFile => {
                // SAFETY: as above.
                check(unsafe { mount(c"/dev/null".as_ptr(), t, libc::MS_BIND, std::ptr::null()) })?;
            }
            MountKind::EmptyDir => {
                // SAFETY: C strings; a tmpfs takes its options as a C string.
                check(unsafe { mount(c"none".as_ptr(), t, self.flags, c"tmpfs".as_ptr()) })?;
                return Ok(());
            }
            MountKind::Again(ref first) => {
                // SAFETY: C strings this mount owns; a bind mount takes no type or data.
                check(unsafe { mount(first.as_ptr(), t, libc::MS_BIND, std::ptr::null()) })?;
                return Ok(());
            }
            MountKind::HideAllBut(ref keep) => {
                // SAFETY: a C string path; the flags ask for a detached copy of the mounts at `keep`.
                let tree = check(unsafe {
                    sys(
                        libc::SYS_open_tree,
                        libc::AT_FDCWD as usize,
                        keep.as_ptr() as usize,
                        OPEN_TREE_CLONE | libc::O_CLOEXEC as usize | AT_RECURSIVE,
                        0,
                    )
                })? as usize;
                let moved = (|| {
                    // SAFETY: C strings; a tmpfs takes its options as a C string.
                    check(unsafe {
                        crate::syscall::call5(
                            libc::SYS_mount,
                            c"none".as_ptr() as usize,
                            t as usize,
                            c"tmpfs".as_ptr() as usize,
                            NO_DEV_SUID_EXEC as usize,
                            c"mode=0700,size=16k,nr_inodes=16".as_ptr() as usize,
                        )
                    })?;
                    // SAFETY: a C string path.
                    check(unsafe { sys(libc::SYS_mkdirat, libc::AT_FDCWD as usize, keep.as_ptr() as usize, 0o700, 0) })?;
                    // SAFETY: `tree` is the detached copy made above, an empty C string its own path, `keep` a C string.
                    check(unsafe {
                        crate::syscall::call5(
                            libc::SYS_move_mount,
                            tree,
                            c"".as_ptr() as usize,
                            libc::AT_FDCWD as usize,
                            keep.as_ptr() as usize,
                            MOVE_MOUNT_F_EMPTY_PATH,
                        )
                    })
                })();
                // SAFETY: the descriptor opened above, used no more.
                unsafe { sys(libc::SYS_close, tree, 0, 0, 0) };
                moved?;
            }
        }
        // SAFETY: as above; a remount takes no source.
        check(unsafe { mount(std::ptr::null(), t, self.flags, std::ptr::null()) })?;
        Ok(())
    }
}

/// Everything the child needs, ready before the fork.
pub struct Confined {
    pub ruleset: Option<OwnedFd>,
    pub filter: Option<seccomp::Filter>,
    pub pid_ns: Option<PidNs>,
    pub last_cap: i32,
}

/// The program to exec: pointers into strings prepared before the fork.
pub struct Exec<'h> {
    pub path: *const libc::c_char,
    pub argv: *const *const libc::c_char,
    pub envp: *const *const libc::c_char,
    /// Placed right before the exec ([`crate::process::place_handovers`]).
    pub handover: &'h [crate::process::Handover<'h>],
}

use crate::syscall::{call as sys, check};

/// Apply `c` to this process and exec `e`; returns only the step that stopped it and its errno (with a PID
/// namespace, whichever of this process and the tool's failed).
///
/// # Safety
/// Only in the runner's child between its start and its exec; `c` and `e` prepared before the start and changed
/// by nobody since (`e`'s pointers valid C strings and null-terminated arrays of them). With a PID namespace the
/// child must have been started by [`Start::Init`](crate::process::Start::Init) with [`PidNs::clone_flags`],
/// and `init` be what it was started with.
pub unsafe fn enter_and_exec(c: &Confined, e: &Exec<'_>, init: Option<&crate::process::Init>) -> StartError {
    match (&c.pid_ns, init) {
        // SAFETY: the caller's contract, which is enter_pid_ns's.
        (Some(ns), Some(init)) => unsafe { enter_pid_ns(ns, c, e, init) },
        (Some(_), None) => StartError::new(Step::Clone, libc::EINVAL),
        // SAFETY: the caller's contract: this process is the one to become the tool.
        (None, _) => unsafe { confine_and_exec(c, e) },
    }
}

/// Steps 2 to 4, then the exec. Raw system calls only (see the module doc).
///
/// # Safety
/// Only in the process that is to become the tool, before its exec (its privileges go for good); `c` and `e` as
/// [`enter_and_exec`] requires.
unsafe fn confine_and_exec(c: &Confined, e: &Exec<'_>) -> StartError {
    // SAFETY: this process is to become the tool (the caller's contract).
    unsafe { drop_capabilities(c.last_cap) };
    let at = |step| move |e: io::Error| StartError::at(step, &e);
    let steps = || -> Result<isize, StartError> {
        // SAFETY: integer arguments only; it restricts this process alone.
        check(unsafe { sys(libc::SYS_prctl, libc::PR_SET_NO_NEW_PRIVS as usize, 1, 0, 0) })
            .map_err(at(Step::NoNewPrivs))?;
        if let Some(fd) = &c.ruleset {
            // SAFETY: before the exec, no_new_privs set just above; `fd` is the ruleset `c` owns.
            check(unsafe { landlock::restrict_self(fd.as_raw_fd()) }).map_err(at(Step::Landlock))?;
        }
        if let Some(f) = &c.filter {
            // SAFETY: no_new_privs is set just above.
            check(unsafe { seccomp::install(f) }).map_err(at(Step::Seccomp))?;
        }
        // SAFETY: right before the exec, in this process's own table; the ruleset is no longer needed.
        unsafe { crate::process::place_handovers(e.handover) }.map_err(at(Step::Handover))?;
        // SAFETY: `e`'s path, argv and envp are valid and unchanged (the caller's contract); the kernel copies them
        // before it replaces this process's memory.
        check(unsafe { sys(libc::SYS_execve, e.path as usize, e.argv as usize, e.envp as usize, 0) })
            .map_err(at(Step::Exec))
    };
    match steps() {
        Err(e) => e,
        Ok(_) => StartError::new(Step::Exec, libc::EIO),
    }
}

/// # Safety
/// `path` NUL-terminated.
pub(crate) unsafe fn write_file(path: &[u8], data: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated (the caller's contract).
    let fd = check(unsafe {
        sys(
            libc::SYS_openat,
            libc::AT_FDCWD as usize,
            path.as_ptr() as usize,
            (libc::O_WRONLY | libc::O_CLOEXEC) as usize,
            0,
        )
    })? as usize;
    // SAFETY: `data` is readable for its length.
    let n = unsafe { sys(libc::SYS_write, fd, data.as_ptr() as usize, data.len(), 0) };
    // SAFETY: `fd` was opened above and is used no more.
    unsafe { sys(libc::SYS_close, fd, 0, 0, 0) };
    if check(n)? != data.len() as isize {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

/// What `G` shares with `T` (on `G`'s stack: `G` is suspended while `T` uses it).
struct Shared<'a> {
    c: &'a Confined,
    e: &'a Exec<'a>,
    /// The step that stopped `T` before its exec and its errno ([`StartError`]'s report word; 0: none); written
    /// by `T`, read by `G` once `T` is gone.
    t_err: std::sync::atomic::AtomicU64,
}

impl PidNs {
    /// The namespaces to start the runner's child in (`CLONE_NEW*`); `joined`: it joins [`PidNs::kept`]'s user
    /// and network namespaces instead of making them.
    pub fn clone_flags(&self, joined: bool) -> libc::c_int {
        libc::CLONE_NEWPID
            | if self.user && !joined { libc::CLONE_NEWUSER } else { 0 }
            | if self.mounts.is_empty() { 0 } else { libc::CLONE_NEWNS }
            | if self.net.is_some() && !joined {
                libc::CLONE_NEWNET
            } else {
                0
            }
    }
}

/// `G`, process 1 of the namespaces it was started in: maps, mounts and the proxy's listener, then `T`, which
/// becomes the tool. Once `T` has exec'd, reports 0 to the runner and becomes the namespace's init
/// ([`init`]), never returning; else returns the error that stopped the start.
///
/// # Safety
/// As [`enter_and_exec`] with a PID namespace: in the runner's child started by `Start::Init` with
/// `ns.clone_flags()`, before its exec; it shares the runner's memory (raw system calls only, no allocation).
unsafe fn enter_pid_ns(ns: &PidNs, c: &Confined, e: &Exec<'_>, init: &crate::process::Init) -> StartError {
    let at = |step| move |e: io::Error| StartError::at(step, &e);
    let maps = || -> io::Result<()> {
        // SAFETY: a NUL-terminated path.
        unsafe { write_file(b"/proc/self/setgroups\0", b"deny") }?;
        // SAFETY: a NUL-terminated path.
        unsafe { write_file(b"/proc/self/uid_map\0", &ns.uid_map) }?;
        // SAFETY: a NUL-terminated path.
        unsafe { write_file(b"/proc/self/gid_map\0", &ns.gid_map) }
    };
    let mounts = || -> io::Result<()> {
        // Nothing mounted here may reach the runner's mount namespace.
        // SAFETY: a C string target; a propagation change takes no source, type or data (null).
        check(unsafe {
            mount(
                std::ptr::null(),
                c"/".as_ptr(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        })?;
        // A /proc of this PID namespace alone: other processes' command lines (the runner's, other calls')
        // are not there. A kernel that refuses it (a user namespace under a /proc with covered entries)
        // leaves the runner's.
        // SAFETY: C strings; a proc mount takes no data.
        let _ = check(unsafe {
            mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"proc".as_ptr(),
            )
        });
        for m in &ns.mounts {
            // SAFETY: this is G, in its own mount namespace, made private just above.
            match unsafe { m.apply() } {
                Err(e) if m.if_there && e.raw_os_error() == Some(libc::ENOENT) => {}
                r => r?,
            }
        }
        Ok(())
    };
    let start = || -> Result<i32, StartError> {
        // A joined user namespace has its maps already (written once, when it was made).
        if ns.user && !init.joined {
            maps().map_err(at(Step::UserMaps))?;
        }
        if !ns.mounts.is_empty() {
            mounts().map_err(at(Step::Mounts))?;
        }
        if let Some(net) = &ns.net {
            // SAFETY: this is `G` before it clones the tool, in the network namespace it was started in; the
            // function makes raw system calls on stack memory only.
            unsafe { super::netproxy::listen_in_child(net) }.map_err(at(Step::ProxyListener))?;
        }
        let shared = Shared {
            c,
            e,
            t_err: std::sync::atomic::AtomicU64::new(0),
        };
        // SAFETY: T runs t_main on the spare stack the runner gave us while this process is suspended
        // (CLONE_VFORK), so `shared` outlives its use. libc's clone writes errno only when it fails, and nobody
        // reads it then.
        let t = unsafe {
            libc::clone(
                t_main,
                init.tool_stack,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&shared as *const Shared).cast_mut().cast(),
            )
        };
        if t < 0 {
            return Err(StartError::new(Step::Clone, libc::EAGAIN));
        }
        match StartError::decode(shared.t_err.load(std::sync::atomic::Ordering::SeqCst)) {
            None => Ok(t),
            Some(err) => {
                let mut st = 0i32;
                // SAFETY: T's status into `st`, on this frame.
                unsafe { sys(libc::SYS_wait4, t as usize, &mut st as *mut i32 as usize, 0, 0) };
                Err(err)
            }
        }
    };
    match start() {
        Err(e) => e,
        // SAFETY: this is G, the tool has exec'd, and `init` outlives this process (the runner's Child keeps it
        // until it has reaped us).
        Ok(t) => unsafe { self::init(t, init) },
    }
}

/// `mount(2)` without data, raw.
///
/// # Safety
/// `source` and `fstype` null or C strings, `target` a C string.
unsafe fn mount(
    source: *const libc::c_char,
    target: *const libc::c_char,
    flags: libc::c_ulong,
    fstype: *const libc::c_char,
) -> isize {
    // SAFETY: the caller's contract; the data argument is 0.
    unsafe {
        sys(
            libc::SYS_mount,
            source as usize,
            target as usize,
            fstype as usize,
            flags as usize,
        )
    }
}

fn exit(code: i32) -> ! {
    // SAFETY: exit_group ends this process (its own thread group), never returns.
    unsafe { sys(libc::SYS_exit_group, code as usize, 0, 0, 0) };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// `T`: becomes the tool. `G` is suspended until this process execs or exits (`CLONE_VFORK`).
extern "C" fn t_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is `G`'s `Shared`, on G's frame while G is suspended (CLONE_VFORK) until this process has
    // exec'd or exited.
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
    s.t_err.store(e.encode(), std::sync::atomic::Ordering::SeqCst);
    exit(127)
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
/// In a process whose handler table is its own (`G`).
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

/// G: reap everything in the namespace; when the tool exits, leave its status where the runner reads it and
/// exit (which ends the namespace: the kernel kills what is left in it).
///
/// # Safety
/// Only in `G`, once `T` has exec'd; `init` alive for as long as this process runs.
unsafe fn init(tool: i32, init: &crate::process::Init) -> ! {
    let ok = 0u64.to_ne_bytes();
    // SAFETY: a report word from this frame to the report pipe, open in this process's table.
    unsafe { sys(libc::SYS_write, init.report_fd as usize, ok.as_ptr() as usize, ok.len(), 0) };
    // Why: G's copies of the tool's pipes and of whatever the runner had open would hide the tool's end of file.
    // SAFETY: G's table is its own (no CLONE_FILES), and G uses no descriptor from here on.
    unsafe { sys(libc::SYS_close_range, 0, u32::MAX as usize, 0, 0) };
    // Why: the runner signals the whole group; the tool gets the signal itself, G must live to reap it.
    // SAFETY: G's handler table is its own (no CLONE_SIGHAND).
    unsafe { ignore_signals() };
    loop {
        let mut st = 0i32;
        // SAFETY: a status into `st`, on this frame.
        let r = unsafe { sys(libc::SYS_wait4, usize::MAX, &mut st as *mut i32 as usize, 0, 0) };
        if r == tool as isize {
            init.tool_status.store(st, std::sync::atomic::Ordering::Release);
            exit(0);
        }
        if r < 0 && r != -(libc::EINTR as isize) {
            exit(127);
        }
    }
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
