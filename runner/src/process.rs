//! A tool's process started the way `posix_spawn` starts one: `clone(CLONE_VM | CLONE_VFORK)` on a stack of its
//! own, so the runner's page tables are never copied (std's `Command` forks as soon as there is a `pre_exec`
//! step, and ours has several: new session, death signal, guardian registration, sandbox). The fork, its
//! copy-on-write faults in both processes and the copy's teardown at the exec cost a one-shot call about
//! 0.15 ms (bench/README.md). A plan with a PID namespace still forks: the child's `unshare` of a user
//! namespace needs an address space of its own.
//!
//! [`Child`] is the handle the rest of the runner waits on: its pipes as tokio pipes, its end through a pidfd.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

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

/// What the child does between its start and its exec, prepared before the clone; returns only the error that
/// stopped it. It runs on its own stack in the runner's memory while the runner waits: no allocation, no lock.
pub type PreExec<'a> = &'a (dyn Fn() -> io::Error + Sync);

/// Start a process: `io` for stdin, stdout, stderr, `cwd` (already checked to be a folder), then `pre` (which
/// ends in an exec). `fork`: a copy of the address space is needed (a PID namespace's `unshare`).
pub fn spawn(io: [Io; 3], cwd: Option<&CStr>, fork: bool, pre: PreExec<'_>) -> io::Result<Child> {
    let null = if io.contains(&Io::Null) {
        Some(rustix::fs::open(
            c"/dev/null",
            rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?)
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
                let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
                let (mine, child) = if i == 0 { (w, r) } else { (r, w) };
                theirs[i] = child.as_raw_fd();
                keep.push(child);
                ours[i] = Some(mine);
            }
        }
    }
    let setup = Setup {
        fds: theirs,
        cwd,
        pre,
        err: AtomicI32::new(0),
    };
    let pid = if fork {
        // SAFETY: the descriptors to dup are open (`keep` and `null` hold them until the child has started, an
        // inherited 0–2 is not dup'd), and `pre` keeps PreExec's contract (system calls only, ending in an exec).
        unsafe { fork_and_run(&setup)? }
    } else {
        // SAFETY: as above; the child writes `setup.err` while we are suspended (CLONE_VFORK).
        unsafe { vfork_and_run(&setup)? }
    };
    drop(keep);
    drop(null);
    let err = setup.err.load(Ordering::SeqCst);
    if err != 0 {
        // The child exits right after it reported; reap it.
        let _ = rustix::process::waitpid(
            rustix::process::Pid::from_raw(pid),
            rustix::process::WaitOptions::empty(),
        );
        return Err(io::Error::from_raw_os_error(err));
    }
    let [i, o, e] = ours;
    Ok(Child {
        pid,
        status: None,
        pidfd: None,
        stdin: i.map(ChildStdin::from_owned_fd).transpose()?,
        stdout: o.map(ChildStdout::from_owned_fd).transpose()?,
        stderr: e.map(ChildStderr::from_owned_fd).transpose()?,
    })
}

struct Setup<'a> {
    fds: [RawFd; 3],
    cwd: Option<&'a CStr>,
    pre: PreExec<'a>,
    /// The errno that stopped the child before its exec (0: none).
    err: AtomicI32,
}

const STACK: usize = 256 * 1024;

/// Start the child in this memory (`clone(CLONE_VM | CLONE_VFORK)`); this thread is suspended until it has
/// exec'd or exited.
///
/// # Safety
/// `setup` as [`child_main`] requires: its descriptors open and its `pre` fit to run in the child (system calls
/// on memory prepared before, no allocation, no lock, ending in an exec).
unsafe fn vfork_and_run(setup: &Setup<'_>) -> io::Result<i32> {
    // SAFETY: a fresh anonymous mapping; nothing else in the runner knows its address.
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
        return Err(io::Error::last_os_error());
    }
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the parent's `Setup`, alive while the parent is suspended (CLONE_VFORK).
        let s = unsafe { &*(arg as *const Setup) };
        // SAFETY: this is the child, on its own stack, with the parent suspended; `s` is vfork_and_run's caller's.
        let e = unsafe { child_main(s) };
        s.err.store(
            e.raw_os_error().filter(|c| *c != 0).unwrap_or(libc::EIO),
            Ordering::SeqCst,
        );
        // SAFETY: ends this child only (its own thread group); a raw call, so the parent's errno is left alone.
        unsafe { crate::sys::call(libc::SYS_exit_group, 127, 0, 0, 0) };
        127
    }
    // Why every signal blocked around the clone (as posix_spawn): the child shares our signal handlers' memory
    // until it has reset them; it unblocks once they are reset.
    // SAFETY: sigset_t is plain data; all zeroes is a valid (empty) set.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as for `all`.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `all` is a valid sigset_t on this frame.
    unsafe { libc::sigfillset(&mut all) };
    // SAFETY: `all` and `old` are valid sigset_t on this frame; this thread's mask only.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) };
    // SAFETY: the child runs `entry` on the fresh stack's top (one past the mapping's end; stacks grow down) with
    // every signal blocked, and this thread is suspended until it has exec'd or exited, so `setup` outlives its use
    // and nothing else of this thread's memory changes under it; the caller vouches for `setup`.
    let pid = unsafe {
        libc::clone(
            entry,
            stack.cast::<u8>().add(STACK).cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (setup as *const Setup).cast_mut().cast(),
        )
    };
    let e = io::Error::last_os_error();
    // SAFETY: `old` is the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    // SAFETY: the child has exec'd or exited (CLONE_VFORK), so nothing runs on this stack any more.
    unsafe { libc::munmap(stack, STACK) };
    if pid < 0 {
        return Err(e);
    }
    Ok(pid)
}

/// Start the child as a copy of this process (`fork`): its errno and memory are its own.
///
/// # Safety
/// As [`vfork_and_run`]; the child of a threaded process's fork may likewise only make system calls.
unsafe fn fork_and_run(setup: &Setup<'_>) -> io::Result<i32> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // SAFETY: the child runs only child_main's steps (system calls on memory prepared before the fork, as the caller
    // vouches), one write and _exit: nothing that needs a lock another thread may have held at the fork.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(r);
            // SAFETY: this is the child, between fork and exec; the caller vouches for `setup`.
            let e = unsafe { child_main(setup) };
            let code = e.raw_os_error().filter(|c| *c != 0).unwrap_or(libc::EIO).to_ne_bytes();
            // SAFETY: 4 bytes from this frame to the pipe's write end, which `w` owns.
            unsafe { libc::write(w.as_raw_fd(), code.as_ptr().cast(), 4) };
            // SAFETY: ends the child without running the runner's exit handlers or destructors, which are the
            // parent's.
            unsafe { libc::_exit(127) }
        }
        pid => {
            drop(w);
            let mut b = [0u8; 4];
            let n = loop {
                match rustix::io::read(&r, &mut b) {
                    Err(rustix::io::Errno::INTR) => continue,
                    other => break other.unwrap_or(0),
                }
            };
            if n == 4 {
                setup.err.store(i32::from_ne_bytes(b), Ordering::SeqCst);
            }
            Ok(pid)
        }
    }
}

/// In the child: its descriptors, folder and signals, then `pre`.
///
/// # Safety
/// Only in the child between its start and its exec (it replaces 0–2 and the signal dispositions); `s.fds` open,
/// and `s.pre` fit to run there. Raw system calls on `s` and locals only.
unsafe fn child_main(s: &Setup<'_>) -> io::Error {
    use crate::sys::{call as sys, check};
    for (i, fd) in s.fds.iter().enumerate() {
        // dup2 onto itself would keep close-on-exec; an inherited 0–2 has none.
        if *fd != i as RawFd {
            // SAFETY: integer arguments only; 0–2 are the child's to replace (the caller's contract).
            if let Err(e) = check(unsafe { sys(libc::SYS_dup3, *fd as usize, i, 0, 0) }) {
                return e;
            }
        }
    }
    if let Some(dir) = s.cwd {
        // SAFETY: `dir` is a NUL-terminated string that `s` borrows for this call.
        if let Err(e) = check(unsafe { sys(libc::SYS_chdir, dir.as_ptr() as usize, 0, 0, 0) }) {
            return e;
        }
    }
    // Every handled signal back to its default (the handlers are the runner's code), SIGPIPE too (the runner
    // ignores it; a tool gets the default), then nothing blocked.
    let mut act = [0usize; 4];
    for sig in 1..=64usize {
        if sig == libc::SIGKILL as usize || sig == libc::SIGSTOP as usize {
            continue;
        }
        // SAFETY: the kernel writes its 4-word struct sigaction (8-byte mask) into `act`, on this frame.
        if unsafe { sys(libc::SYS_rt_sigaction, sig, 0, act.as_mut_ptr() as usize, 8) } != 0 {
            continue;
        }
        let handled = act[0] != libc::SIG_DFL && act[0] != libc::SIG_IGN;
        if handled || sig == libc::SIGPIPE as usize {
            let dfl = [libc::SIG_DFL, 0, 0, 0];
            // SAFETY: `dfl` is a struct sigaction on this frame; the child's handler table is its own copy (no
            // CLONE_SIGHAND), and a default runs no code.
            unsafe { sys(libc::SYS_rt_sigaction, sig, dfl.as_ptr() as usize, 0, 8) };
        }
    }
    let none: u64 = 0;
    // SAFETY: `none` is an 8-byte mask on this frame; no handler of the runner's is left to run.
    unsafe {
        sys(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK as usize,
            &none as *const u64 as usize,
            0,
            8,
        )
    };
    (s.pre)()
}

/// A started process: its pipes and its end. Dropped before it was reaped, it is killed (as tokio's
/// `kill_on_drop`) and left to [`crate::reap::reap_orphans`].
#[derive(Debug)]
pub struct Child {
    pid: i32,
    status: Option<ExitStatus>,
    pidfd: Option<tokio::io::unix::AsyncFd<OwnedFd>>,
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
        let mut st = 0;
        // SAFETY: waitpid on our own child, without blocking.
        match unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) } {
            0 => Ok(None),
            r if r == self.pid => {
                let s = ExitStatus::from_raw(st);
                self.status = Some(s);
                self.pidfd = None;
                Ok(Some(s))
            }
            _ => Err(io::Error::last_os_error()),
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
            // SAFETY: our own child, not yet reaped, so the pid is still its.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            crate::reap::disown(self.pid as u32);
        }
    }
}
