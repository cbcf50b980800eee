//! A tool's process started the way `posix_spawn` starts one: `clone(CLONE_VM | CLONE_VFORK)` on a stack of its
//! own, so the runner's page tables are never copied (std's `Command` forks as soon as there is a `pre_exec`
//! step, and ours has several: new session, death signal, guardian registration, sandbox). The fork, its
//! copy-on-write faults in both processes and the copy's teardown at the exec cost a one-shot call about
//! measurably (bench/README.md). A plan with a PID namespace starts the child as process 1 of its new namespaces
//! with the same `clone(CLONE_VM)` and no fork either ([`Start::Init`]): that child stays beside the runner as
//! the namespace's init and tells it how the tool ended through shared memory ([`Init`]).
//!
//! [`Child`] is the handle the rest of the runner waits on: its pipes as tokio pipes, its end through a pidfd.

use crate::start_error::{StartError, Step};
use crate::syscall::with_signals_blocked;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

pub type ChildStdin = tokio::net::unix::pipe::Sender;
pub type ChildStdout = tokio::net::unix::pipe::Receiver;
pub type ChildStderr = tokio::net::unix::pipe::Receiver;

/// Where one of the child's standard descriptors goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    Null,
    Piped,
    Inherit,
}

/// A descriptor handed over to the tool: the runner's `fd` (open across the start) becomes the tool's `at` (3 or
/// above), without close-on-exec. Every other descriptor from 3 up is closed at the tool's exec.
#[derive(Debug, Clone, Copy)]
pub struct Handover<'a> {
    pub fd: std::os::fd::BorrowedFd<'a>,
    pub at: RawFd,
}

/// At most this many descriptors are handed over to one tool (the child places them from a fixed array).
pub const MAX_HANDOVERS: usize = 8;

/// Checks `h` before the start: targets 3 or above, none twice, at most [`MAX_HANDOVERS`].
pub fn check_handovers(h: &[Handover<'_>]) -> io::Result<()> {
    let bad = |m: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, m.to_string()));
    if h.len() > MAX_HANDOVERS {
        return bad("too many descriptors handed over to a tool");
    }
    for (i, x) in h.iter().enumerate() {
        if x.at < 3 {
            return bad("a descriptor handed over to a tool must be placed at 3 or above");
        }
        if h[..i].iter().any(|y| y.at == x.at) {
            return bad("two descriptors handed over to the same place");
        }
    }
    Ok(())
}

/// In the child: every descriptor from 3 up marked close-on-exec, so the tool gets none the runner did not hand
/// over, whatever the runner's caller left open (`exec 7<config.json`). Marked, not closed: the child still needs
/// some until its exec (the sandbox's ruleset, the init's report pipe). `limit`: the descriptor table's size, for
/// a kernel without `CLOSE_RANGE_CLOEXEC` (before 5.11).
///
/// # Safety
/// Only in a child with its own descriptor table (no `CLONE_FILES`), before its exec.
pub unsafe fn cloexec_from_3(limit: u32) {
    use crate::syscall::call as sys;
    const CLOSE_RANGE_CLOEXEC: usize = 1 << 2;
    // SAFETY: integer arguments; this process's own table.
    if unsafe { sys(libc::SYS_close_range, 3, u32::MAX as usize, CLOSE_RANGE_CLOEXEC, 0) } == 0 {
        return;
    }
    for fd in 3..limit as usize {
        // SAFETY: as above; a descriptor that is not open gives EBADF, which is ignored.
        unsafe {
            sys(
                libc::SYS_fcntl,
                fd,
                libc::F_SETFD as usize,
                libc::FD_CLOEXEC as usize,
                0,
            )
        };
    }
}

/// In the child, right before its exec: each handed-over descriptor placed at its target, without close-on-exec.
/// First all are copied above every source and target, so placing one never overwrites another's source.
///
/// # Safety
/// Only in a child with its own descriptor table, after [`cloexec_from_3`], right before its exec (a target may
/// replace a descriptor the child used until now); `h` checked by [`check_handovers`].
pub unsafe fn place_handovers(h: &[Handover<'_>]) -> io::Result<()> {
    use crate::syscall::{call as sys, check};
    use std::os::fd::AsRawFd as _;
    if h.is_empty() {
        return Ok(());
    }
    let above = h.iter().map(|x| x.fd.as_raw_fd().max(x.at)).max().unwrap_or(2) + 1;
    let mut high = [-1 as RawFd; MAX_HANDOVERS];
    for (i, x) in h.iter().take(MAX_HANDOVERS).enumerate() {
        // SAFETY: integer arguments; the copy is close-on-exec and goes at the exec.
        let fd = check(unsafe {
            sys(
                libc::SYS_fcntl,
                x.fd.as_raw_fd() as usize,
                libc::F_DUPFD_CLOEXEC as usize,
                above as usize,
                0,
            )
        })?;
        high[i] = fd as RawFd;
    }
    for (i, x) in h.iter().take(MAX_HANDOVERS).enumerate() {
        // SAFETY: integer arguments; `at` is the child's to replace (checked: 3 or above).
        check(unsafe { sys(libc::SYS_dup3, high[i] as usize, x.at as usize, 0, 0) })?;
    }
    Ok(())
}

/// What the child does between its start and its exec, prepared before the clone; returns only the step that
/// stopped it and its errno. It runs on its own stack in the runner's memory while the runner waits: no allocation, no lock.
/// Given the [`Init`] when it was started as process 1 of new namespaces.
pub type PreExec<'a> = &'a (dyn Fn(Option<&Init>) -> StartError + Sync);

/// How the child is started.
#[derive(Debug, Clone, Copy)]
pub enum Start {
    /// `clone(CLONE_VM | CLONE_VFORK)`: the child becomes the tool, the runner is suspended until its exec.
    Vfork,
    /// `clone(CLONE_VM | flags)` (`CLONE_NEWPID` and the other namespaces to make): the child is process 1 of the
    /// new PID namespace and starts the tool itself. It stays alive in the runner's memory, on stacks the
    /// [`Child`] owns, and reports the tool's exec through [`Init::report_fd`] and the tool's end through
    /// [`Init::tool_status`]. Why not a fork: copying the runner's page tables and tearing the copy down cost
    /// a sandboxed call measurably (bench/README.md).
    Init(libc::c_int, Option<Join>),
}

/// Kept namespaces a [`Start::Init`] child joins instead of making them ([`crate::confine::keptnet`]): the
/// runner's descriptors of them, open until the start returns.
#[derive(Debug, Clone, Copy)]
pub struct Join {
    /// The user namespace that owns `net`, joined first by a short-lived joiner that then clones the init (a
    /// runner without `CAP_SYS_ADMIN`); `None`: the init joins `net` itself.
    pub user: Option<RawFd>,
    pub net: RawFd,
}

/// What the runner shares with a child started by [`Start::Init`].
#[derive(Debug)]
pub struct Init {
    /// The child's pid as the runner sees it (inside its namespace it is 1), set by the kernel at the clone
    /// (`CLONE_PARENT_SETTID`): its process group, for the guardian.
    pub pid: AtomicI32,
    /// Where the child writes one word: 0 once the tool has exec'd, else the step that stopped it and its errno
    /// ([`StartError`]'s report word, 8 bytes).
    pub report_fd: RawFd,
    /// The tool's wait status, stored by the child before it exits ([`Init::NO_STATUS`] until then).
    pub tool_status: AtomicI32,
    /// The top of a stack for the child's own clone of the tool.
    pub tool_stack: *mut libc::c_void,
    /// It joined kept user and network namespaces ([`Join`]): their maps are written, `lo` may be up.
    pub joined: bool,
}

// SAFETY: `tool_stack` is an address in a mapping the Child owns; the rest is atomics and a number.
unsafe impl Sync for Init {}
// SAFETY: as above.
unsafe impl Send for Init {}

impl Init {
    pub const NO_STATUS: i32 = -1;
}

/// An [`Init`] child's shared memory, kept until the child has been reaped.
#[derive(Debug)]
struct InitMemory {
    init: Box<Init>,
    _stacks: crate::syscall::Stacks,
}

/// The memory of init children dropped before they were reaped, each with a pidfd: kept until the child has
/// exited (its pidfd is readable then; a zombie runs no code), never longer.
static ABANDONED: std::sync::Mutex<Vec<(OwnedFd, InitMemory)>> = std::sync::Mutex::new(Vec::new());

/// Has the process of pidfd `fd` exited (a zombie too: a pidfd is readable once its process has; for a PID
/// namespace's init, once every process of the namespace has been reaped)? `None`: the kernel did not say.
pub fn pidfd_exited(fd: impl std::os::fd::AsFd) -> Option<bool> {
    let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
    let now = rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 };
    rustix::event::poll(&mut fds, Some(&now)).ok().map(|n| n > 0)
}

/// Free the memory of abandoned init children that have exited. Called at each init start and each drop, and by
/// [`crate::reap::reap_orphans`].
pub fn release_abandoned() {
    let mut v = ABANDONED.lock().unwrap_or_else(|e| e.into_inner());
    v.retain(|(fd, _)| {
        pidfd_exited(fd) != Some(true)
    });
}

/// How many abandoned init children still hold their memory.
pub fn abandoned() -> usize {
    ABANDONED.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// Start a process: `io` for stdin, stdout, stderr, `cwd` (already checked to be a folder), then `pre` (which
/// ends in an exec), started as `how` says.
///
/// # Safety
/// `pre` keeps [`PreExec`]'s contract: it runs in a process that shares this memory, so it may only make raw
/// system calls on memory prepared before the call (no allocation, no lock, no panic, no thread-local), and it
/// ends in an exec or returns the error that stopped it.
pub unsafe fn spawn(io: [Io; 3], cwd: Option<&CStr>, how: Start, pre: PreExec<'_>) -> Result<Child, StartError> {
    let prep = |e: rustix::io::Errno| StartError::new(Step::Prepare, e.raw_os_error());
    let null = if io.contains(&Io::Null) {
        Some(
            rustix::fs::open(
                c"/dev/null",
                rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .map_err(prep)?,
        )
    } else {
        None
    };
    let mut ours: [Option<OwnedFd>; 3] = [None, None, None];
    let mut theirs: [RawFd; 3] = [-1; 3];
    let mut keep: Vec<OwnedFd> = Vec::new();
    for (i, how) in io.iter().enumerate() {
        match how {
            Io::Inherit => theirs[i] = i as RawFd,
            Io::Null => theirs[i] = null.as_ref().map_or(-1, |n| n.as_raw_fd()),
            Io::Piped => {
                let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(prep)?;
                let (mine, child) = if i == 0 { (w, r) } else { (r, w) };
                theirs[i] = child.as_raw_fd();
                keep.push(child);
                ours[i] = Some(mine);
            }
        }
    }
    let mut setup = Setup {
        fds: theirs,
        fd_limit: fd_limit(),
        cwd,
        pre,
        err: AtomicU64::new(0),
        init: None,
        join: None,
        init_flags: 0,
        init_stack: std::ptr::null_mut(),
    };
    let (pid, init) = match how {
        // SAFETY: the descriptors to dup are open (`keep` and `null` hold them until the child has started, an
        // inherited 0–2 is not dup'd), and `pre` keeps PreExec's contract (system calls only, ending in an exec);
        // the child writes `setup.err` while we are suspended (CLONE_VFORK).
        Start::Vfork => (unsafe { vfork_and_run(&setup)? }, None),
        // SAFETY: as above; `clone_init` waits for the child's report before `setup` goes.
        Start::Init(flags, join) => unsafe { clone_init(&mut setup, flags, join)? },
    };
    drop(keep);
    drop(null);
    if let Some(err) = StartError::decode(setup.err.load(Ordering::SeqCst)) {
        // The child exits right after it reported; reap it (then its stacks may go).
        let _ = rustix::process::waitpid(
            rustix::process::Pid::from_raw(pid),
            rustix::process::WaitOptions::empty(),
        );
        drop(init);
        return Err(err);
    }
    let [i, o, e] = ours;
    let mut child = Child {
        pid,
        status: None,
        pidfd: None,
        init,
        stdin: None,
        stdout: None,
        stderr: None,
    };
    // Past this point a failure drops `child`, which kills and leaves it to be reaped.
    let pipe = |e: io::Error| StartError::at(Step::Prepare, &e);
    child.stdin = i.map(ChildStdin::from_owned_fd).transpose().map_err(pipe)?;
    child.stdout = o.map(ChildStdout::from_owned_fd).transpose().map_err(pipe)?;
    child.stderr = e.map(ChildStderr::from_owned_fd).transpose().map_err(pipe)?;
    Ok(child)
}

/// The soft limit on descriptors, read before the clone (the child may not call libc).
fn fd_limit() -> u32 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .map_or(1 << 20, |n| n.min(1 << 20) as u32)
}

struct Setup<'a> {
    fds: [RawFd; 3],
    /// The descriptor table's size ([`cloexec_from_3`]'s fallback).
    fd_limit: u32,
    cwd: Option<&'a CStr>,
    pre: PreExec<'a>,
    /// The step that stopped the child before its exec and its errno ([`StartError`]'s report word; 0: none).
    err: AtomicU64,
    /// With [`Start::Init`]: what the child shares with the runner.
    init: Option<*const Init>,
    /// With [`Start::Init`] and a [`Join`]: what to join, and the init's clone (for the joiner).
    join: Option<Join>,
    init_flags: libc::c_int,
    init_stack: *mut libc::c_void,
}

/// Start the child in this memory (`clone(CLONE_VM | CLONE_VFORK)`); this thread is suspended until it has
/// exec'd or exited.
///
/// # Safety
/// `setup` as [`child_main`] requires: its descriptors open and its `pre` fit to run in the child (system calls
/// on memory prepared before, no allocation, no lock, ending in an exec).
unsafe fn vfork_and_run(setup: &Setup<'_>) -> Result<i32, StartError> {
    let stack = crate::syscall::Stacks::new(1).map_err(|e| StartError::at(Step::Prepare, &e))?;
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the parent's `Setup`, alive while the parent is suspended (CLONE_VFORK).
        let s = unsafe { &*(arg as *const Setup) };
        // SAFETY: this is the child, on its own stack, with the parent suspended; `s` is vfork_and_run's caller's.
        let e = unsafe { child_main(s) };
        s.err.store(e.encode(), Ordering::SeqCst);
        // SAFETY: ends this child only (its own thread group); a raw call, so the parent's errno is left alone.
        unsafe { crate::syscall::call(libc::SYS_exit_group, 127, 0, 0, 0) };
        127
    }
    // SAFETY: the child runs `entry` on the fresh stack's top with every signal blocked, and this thread is
    // suspended until it has exec'd or exited, so `setup` outlives its use and nothing else of this thread's memory
    // changes under it; the caller vouches for `setup`.
    let pid = unsafe {
        with_signals_blocked(|| {
            libc::clone(
                entry,
                stack.top(0),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (setup as *const Setup).cast_mut().cast(),
            )
        })
    };
    // The child has exec'd or exited (CLONE_VFORK): nothing runs on its stack any more, so `stack` may go.
    if pid < 0 {
        return Err(StartError::at(Step::Clone, &io::Error::last_os_error()));
    }
    Ok(pid)
}

/// Start the child as process 1 of new namespaces (`flags`), sharing this memory but running beside this thread
/// (no CLONE_VFORK: it outlives the tool's exec); wait for its report. With `join`, it joins kept user and network
/// namespaces instead of making them (`flags` then names neither): through a joiner when there is a user
/// namespace to join ([`crate::confine::keptnet`] says why), else itself.
///
/// # Safety
/// As [`vfork_and_run`]; `join`'s descriptors open until this returns.
unsafe fn clone_init(
    setup: &mut Setup<'_>,
    flags: libc::c_int,
    join: Option<Join>,
) -> Result<(i32, Option<InitMemory>), StartError> {
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the parent's `Setup`, alive until this child has reported (clone_init waits for that).
        let s = unsafe { &*(arg as *const Setup) };
        let joined = match s.join {
            // SAFETY: this is the init, one thread, before its exec: joining a network namespace is its own
            // affair; the descriptor is the runner's, copied into this child's table at the clone.
            Some(Join { user: None, net }) => unsafe { crate::syscall::setns(net, libc::CLONE_NEWNET) },
            _ => Ok(()),
        };
        let e = match joined {
            Err(e) => StartError::at(Step::JoinNamespaces, &e),
            // SAFETY: this is the child, on its own stack; `s` is clone_init's caller's.
            Ok(()) => unsafe { child_main(s) },
        };
        let code = e.encode().to_ne_bytes();
        if let Some(init) = s.init {
            // SAFETY: `init` is the Init clone_init made, alive until this child is reaped; 8 bytes from `code`.
            unsafe {
                crate::syscall::call(
                    libc::SYS_write,
                    (*init).report_fd as usize,
                    code.as_ptr() as usize,
                    code.len(),
                    0,
                )
            };
        }
        // SAFETY: ends this child only; a raw call, so the runner's errno is left alone.
        unsafe { crate::syscall::call(libc::SYS_exit_group, 127, 0, 0, 0) };
        127
    }
    /// The joiner: into the kept user namespace (every capability there) and its network namespace, then the
    /// init, as the runner's child; then gone. The runner is suspended meanwhile (CLONE_VFORK).
    extern "C" fn joiner(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the parent's `Setup`, alive while the parent is suspended (CLONE_VFORK) and after, until
        // the init has reported.
        let s = unsafe { &*(arg as *const Setup) };
        let r = (|| -> io::Result<()> {
            let (Some(Join { user: Some(user), net }), Some(init)) = (s.join, s.init) else {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            };
            // SAFETY: this joiner is one thread with a `fs` of its own (cloned without CLONE_THREAD or
            // CLONE_FS), before any exec; the descriptors are the runner's, copied into its table.
            unsafe { crate::syscall::setns(user, libc::CLONE_NEWUSER) }?;
            // SAFETY: as above; it now has every capability in the namespace that owns `net`.
            unsafe { crate::syscall::setns(net, libc::CLONE_NEWNET) }?;
            // SAFETY: the init runs `entry` on its own stack (made by clone_init) with `s`, which stays alive until
            // it has reported; CLONE_PARENT makes it the runner's child, and CLONE_PARENT_SETTID stores its pid in
            // `init.pid`, in the shared memory. libc's clone writes errno only when it fails, and nobody reads it.
            let pid = unsafe {
                libc::clone(
                    entry,
                    s.init_stack,
                    s.init_flags | libc::CLONE_PARENT,
                    arg,
                    (*init).pid.as_ptr(),
                )
            };
            if pid < 0 {
                return Err(io::Error::from_raw_os_error(libc::EAGAIN));
            }
            Ok(())
        })();
        // Its clone of the init is part of the joining: a failure there is retried in fresh namespaces too.
        if let Err(e) = r {
            s.err
                .store(StartError::at(Step::JoinNamespaces, &e).encode(), Ordering::SeqCst);
        }
        // SAFETY: ends the joiner only; a raw call, so the runner's errno is left alone.
        unsafe { crate::syscall::call(libc::SYS_exit_group, 0, 0, 0, 0) };
        0
    }
    release_abandoned();
    let joiner_needed = join.is_some_and(|j| j.user.is_some());
    let prep = |e: io::Error| StartError::at(Step::Prepare, &e);
    let stacks = crate::syscall::Stacks::new(if joiner_needed { 3 } else { 2 }).map_err(prep)?;
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| prep(e.into()))?;
    // Why at 3 or above: a runner whose 0–2 are closed gets them back from pipe(); the child's dup3 onto 0–2
    // would then replace the report's write end with a stdio end before it reports. The low one is closed at
    // once: a write end left open here would keep the read below from ever seeing the child die unreported.
    let w = if w.as_raw_fd() <= 2 {
        let high = rustix::io::fcntl_dupfd_cloexec(&w, 3).map_err(|e| prep(e.into()))?;
        drop(w);
        high
    } else {
        w
    };
    let init = Box::new(Init {
        pid: AtomicI32::new(0),
        report_fd: w.as_raw_fd(),
        tool_status: AtomicI32::new(Init::NO_STATUS),
        tool_stack: stacks.top(1),
        joined: join.is_some(),
    });
    setup.init = Some(&*init as *const Init);
    setup.join = join;
    setup.init_flags = libc::CLONE_VM | libc::CLONE_PARENT_SETTID | libc::SIGCHLD | flags;
    setup.init_stack = stacks.top(0);
    // Shared from here on: the child reads it while this thread waits.
    let setup = &*setup;
    let pid = if joiner_needed {
        // SAFETY: the joiner runs `joiner` on stack 2 with every signal blocked while this thread is suspended
        // (CLONE_VFORK) until it has exited; it clones the init as `entry` below would be cloned, with `setup`
        // alive until the init's report.
        let joiner_pid = unsafe {
            with_signals_blocked(|| {
                libc::clone(
                    joiner,
                    stacks.top(2),
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                    (setup as *const Setup).cast_mut().cast(),
                )
            })
        };
        if joiner_pid < 0 {
            return Err(StartError::at(Step::Clone, &io::Error::last_os_error()));
        }
        let _ = rustix::process::waitpid(
            rustix::process::Pid::from_raw(joiner_pid),
            rustix::process::WaitOptions::empty(),
        );
        if let Some(err) = StartError::decode(setup.err.swap(0, Ordering::SeqCst)) {
            // No init was started: nothing runs on the stacks.
            return Err(err);
        }
        init.pid.load(Ordering::SeqCst)
    } else {
        // SAFETY: the child runs `entry` on stack 0 with every signal blocked. `setup` (and what it borrows) stays
        // alive until the child's report below, after which the child touches only its stacks and `init`, which
        // the returned InitMemory keeps until it has been reaped. CLONE_PARENT_SETTID stores the child's pid (as we
        // see it) in `init.pid` before the child runs.
        unsafe {
            with_signals_blocked(|| {
                libc::clone(
                    entry,
                    setup.init_stack,
                    setup.init_flags,
                    (setup as *const Setup).cast_mut().cast(),
                    init.pid.as_ptr(),
                )
            })
        }
    };
    if pid <= 0 {
        let errno = if pid < 0 {
            io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
        } else {
            libc::ESRCH
        };
        return Err(StartError::new(Step::Clone, errno));
    }
    let memory = InitMemory { init, _stacks: stacks };
    drop(w);
    let mut b = [0u8; 8];
    let n = loop {
        match rustix::io::read(&r, &mut b) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other.unwrap_or(0),
        }
    };
    // A child that ended before it reported (or reported less than a word) says nothing of its step.
    let code = match n {
        8 => u64::from_ne_bytes(b),
        _ => StartError::new(Step::Report, libc::EIO).encode(),
    };
    setup.err.store(code, Ordering::SeqCst);
    Ok((pid, Some(memory)))
}

/// In the child: its descriptors, folder and signals, then `pre`.
///
/// # Safety
/// Only in the child between its start and its exec (it replaces 0–2 and the signal dispositions); `s.fds` open,
/// and `s.pre` fit to run there. Raw system calls on `s` and locals only.
unsafe fn child_main(s: &Setup<'_>) -> StartError {
    use crate::syscall::{call as sys, check};
    for (i, fd) in s.fds.iter().enumerate() {
        // dup2 onto itself would keep close-on-exec; an inherited 0–2 has none.
        if *fd != i as RawFd {
            // SAFETY: integer arguments only; 0–2 are the child's to replace (the caller's contract).
            if let Err(e) = check(unsafe { sys(libc::SYS_dup3, *fd as usize, i, 0, 0) }) {
                return StartError::at(Step::Stdio, &e);
            }
        }
    }
    // SAFETY: the child's table is its own (no CLONE_FILES), before its exec.
    unsafe { cloexec_from_3(s.fd_limit) };
    if let Some(dir) = s.cwd {
        // SAFETY: `dir` is a NUL-terminated string that `s` borrows for this call.
        if let Err(e) = check(unsafe { sys(libc::SYS_chdir, dir.as_ptr() as usize, 0, 0, 0) }) {
            return StartError::at(Step::Cwd, &e);
        }
    }
    // Every handled signal back to its default (the handlers are the runner's code), SIGPIPE too (the runner
    // ignores it; a tool gets the default), then nothing blocked.
    // SAFETY: the child's handler table is its own copy (no CLONE_SIGHAND).
    unsafe { crate::syscall::default_signals(&[libc::SIGPIPE]) };
    // SAFETY: `init`, when set, is clone_init's, alive for as long as this child runs.
    (s.pre)(s.init.map(|i| unsafe { &*i }))
}

/// A started process: its pipes and its end. Dropped before it was reaped, it is killed (as tokio's
/// `kill_on_drop`) and left to [`crate::reap::reap_orphans`].
#[derive(Debug)]
pub struct Child {
    pid: i32,
    status: Option<ExitStatus>,
    pidfd: Option<tokio::io::unix::AsyncFd<OwnedFd>>,
    /// Started by [`Start::Init`]: the memory it runs in, and the tool's status it leaves there.
    init: Option<InitMemory>,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
}

impl Child {
    /// The process id, until it has been reaped.
    pub fn id(&self) -> Option<u32> {
        self.status.is_none().then_some(self.pid as u32)
    }

    /// Reap it if it has ended.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let pid = rustix::process::Pid::from_raw(self.pid);
        match rustix::process::waitpid(pid, rustix::process::WaitOptions::NOHANG) {
            Ok(None) => Ok(None),
            Ok(Some((r, st))) if pid == Some(r) => {
                // An init child ends as its tool ended, unless it was killed first (then its own end).
                let tool = self.init.take().map(|m| m.init.tool_status.load(Ordering::Acquire));
                let s = ExitStatus::from_raw(tool.filter(|t| *t != Init::NO_STATUS).unwrap_or(st.as_raw()));
                self.status = Some(s);
                self.pidfd = None;
                Ok(Some(s))
            }
            Ok(Some(_)) => Err(io::Error::from_raw_os_error(libc::ECHILD)),
            Err(e) => Err(e.into()),
        }
    }

    /// Wait for its end and reap it. Cancel-safe: dropped before the end, nothing is lost.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(s);
            }
            if self.pidfd.is_none() {
                // Woken when it ends (a pidfd is readable then), Linux 5.3+.
                let fd = rustix::process::Pid::from_raw(self.pid)
                    .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::NONBLOCK).ok());
                // SAFETY: an OwnedFd, moved in: open, and the same descriptor, for the AsyncFd's whole life.
                self.pidfd = fd.and_then(|fd| unsafe { tokio::io::unix::AsyncFd::register(fd) }.ok());
            }
            match &self.pidfd {
                Some(fd) => {
                    let mut ready = fd.readable().await?;
                    ready.clear_ready();
                }
                // Without pidfds: look again shortly.
                None => tokio::time::sleep(std::time::Duration::from_millis(2)).await,
            }
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_none() && !matches!(self.try_wait(), Ok(Some(_))) {
            // Opened while the pid is surely still ours (not reaped), before the kill.
            let pidfd = self.init.as_ref().and_then(|_| {
                rustix::process::Pid::from_raw(self.pid)
                    .map(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()))
            });
            // Our own child, not yet reaped, so the pid is still its.
            if let Some(p) = rustix::process::Pid::from_raw(self.pid) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
            crate::children::disown(self.pid as u32);
            // Why: until the kill has landed, an init child may still run on these stacks and write there; they
            // go once it has exited. Without a pidfd (Linux < 5.3) there is no safe moment: they stay.
            if let Some(memory) = self.init.take() {
                match pidfd {
                    Some(Ok(fd)) => ABANDONED.lock().unwrap_or_else(|e| e.into_inner()).push((fd, memory)),
                    // No such process: it has been reaped already, nothing runs on the stacks.
                    Some(Err(rustix::io::Errno::SRCH)) => drop(memory),
                    _ => std::mem::forget(memory),
                }
                release_abandoned();
            }
        }
    }
}

/// Make `cmd`'s child lead a new session (no controlling terminal, its own process group), for a std
/// [`std::process::Command`] the runner starts for itself (a detached worker), not for a tool.
pub fn in_new_session(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe, the only call between fork and exec.
    unsafe { cmd.pre_exec(|| rustix::process::setsid().map(|_| ()).map_err(std::io::Error::from)) }
}

/// Start `cmd`'s program with SIGTERM ignored (an ignored signal stays ignored across exec). For the MCP bridge's
/// server, which shares the call's process group: a SIGTERM to the group (a cancel, a deadline) then reaches the
/// bridge alone, which tells the server (`notifications/cancelled`) and closes its input before ending it with
/// SIGKILL, which nothing ignores (nor the group's SIGKILL after the grace period).
pub fn term_ignored(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: one raw rt_sigaction (async-signal-safe) on a struct on this frame, the only call between fork and
    // exec, in the child's own handler table.
    unsafe {
        cmd.pre_exec(|| {
            let ignore: [usize; 4] = [libc::SIG_IGN, 0, 0, 0];
            crate::syscall::call(
                libc::SYS_rt_sigaction,
                libc::SIGTERM as usize,
                ignore.as_ptr() as usize,
                0,
                8,
            );
            Ok(())
        })
    }
}
