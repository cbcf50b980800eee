//! A network namespace kept for successive calls, with the user namespace that owns it (a runner without
//! `CAP_SYS_ADMIN` needs one): a call's child joins it with `setns` instead of making a fresh one. Making a network
//! namespace and tearing it down is a large share of a networked call's CPU (docs/sandbox-network.md, "Kept network
//! namespaces"); which calls may share one is decided above (`awt_core::sandbox::netns`).
//!
//! How a child joins ([`crate::process::Join`]): `setns` of a user namespace refuses a threaded process, and the
//! runner is one, but not a clone without `CLONE_THREAD` or `CLONE_FS`. A privileged runner's init `G` joins the
//! network namespace itself. An unprivileged runner first clones a short-lived joiner `E` (sharing its memory, as
//! `G` does) that joins the user namespace, which gives it every capability there, then the network namespace,
//! and clones `G` (`CLONE_PARENT`: the runner's child) with the PID and mount namespaces of the call, owned by the
//! kept user namespace.

use crate::syscall::{call as sys, check};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// A kept network namespace (and the user namespace that owns it), held open by descriptors in the runner.
#[derive(Debug)]
pub struct KeptNet {
    user: Option<OwnedFd>,
    net: OwnedFd,
    spoiled: AtomicBool,
    /// The inits started in it, as pidfds, recorded by the start itself: a call whose future was dropped while its
    /// start ran (so it recorded nothing) still holds the namespace until its init is gone.
    joined: std::sync::Mutex<Vec<OwnedFd>>,
    /// Its socket tables (`/proc/<pid>/net/…` of a process in it, opened when it was made): they show it whatever
    /// process is in it since.
    tables: std::sync::Mutex<Vec<(Table, OwnedFd)>>,
}

/// A socket table of `/proc/<pid>/net/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    /// `tcp`, `tcp6`, `udp`, `udp6`: the inode is the tenth field (0: a socket no process holds, as in
    /// `TIME_WAIT`).
    Inet,
    /// `unix`: every line is a socket.
    Unix,
    /// `sockstat`: `sockets: used N` counts every socket made in it, bound or not.
    Count,
}

const TABLES: [(&[u8], Table); 6] = [
    (b"/proc/self/net/sockstat\0", Table::Count),
    (b"/proc/self/net/tcp\0", Table::Inet),
    (b"/proc/self/net/tcp6\0", Table::Inet),
    (b"/proc/self/net/udp\0", Table::Inet),
    (b"/proc/self/net/udp6\0", Table::Inet),
    (b"/proc/self/net/unix\0", Table::Unix),
];

struct MakeArgs<'a> {
    maps: Option<(&'a [u8], &'a [u8])>,
    user: AtomicI32,
    net: AtomicI32,
    tables: [AtomicI32; 6],
    err: AtomicI32,
}

impl KeptNet {
    /// A new network namespace with only `lo` (down: each call's init brings it up). `maps`: the uid and gid maps
    /// of a new user namespace to own it (a runner without `CAP_SYS_ADMIN`); `None`: owned by the runner's.
    pub fn make(maps: Option<(&[u8], &[u8])>) -> io::Result<KeptNet> {
        let args = MakeArgs {
            maps,
            user: AtomicI32::new(-1),
            net: AtomicI32::new(-1),
            tables: std::array::from_fn(|_| AtomicI32::new(-1)),
            err: AtomicI32::new(0),
        };
        let stack = crate::syscall::Stacks::new(1)?;
        let flags = libc::CLONE_VM
            | libc::CLONE_VFORK
            | libc::CLONE_FILES
            | libc::SIGCHLD
            | libc::CLONE_NEWNET
            | if maps.is_some() { libc::CLONE_NEWUSER } else { 0 };
        // Held off `reap_orphans` until the helper is reaped here (it is ours, and gone when this returns).
        crate::children::start_owned(
            || -> io::Result<()> {
                // SAFETY: the helper runs `helper` on the fresh stack with every signal blocked while this thread is
                // suspended (CLONE_VFORK) until it has exited, so `args` outlives its use. It shares this process's
                // descriptor table (CLONE_FILES): the descriptors it opens are ours.
                let pid = unsafe {
                    crate::syscall::with_signals_blocked(|| {
                        libc::clone(
                            helper,
                            stack.top(0),
                            flags,
                            (&args as *const MakeArgs).cast_mut().cast(),
                        )
                    })
                };
                if pid < 0 {
                    return Err(io::Error::last_os_error());
                }
                let _ = rustix::process::waitpid(
                    rustix::process::Pid::from_raw(pid),
                    rustix::process::WaitOptions::empty(),
                );
                Ok(())
            },
            |_| None,
        )?;
        // SAFETY: each is a descriptor the helper opened in this process's table and nobody else knows of.
        let own = |fd: i32| (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
        let (user, net) = (
            own(args.user.load(Ordering::SeqCst)),
            own(args.net.load(Ordering::SeqCst)),
        );
        let tables: Vec<(Table, OwnedFd)> = TABLES
            .iter()
            .zip(&args.tables)
            .filter_map(|((_, t), fd)| Some((*t, own(fd.load(Ordering::SeqCst))?)))
            .collect();
        match args.err.load(Ordering::SeqCst) {
            0 => {}
            e => return Err(io::Error::from_raw_os_error(e)),
        }
        let net = net.ok_or_else(|| io::Error::other("the kept network namespace was not opened"))?;
        if maps.is_some() && user.is_none() {
            return Err(io::Error::other("the kept user namespace was not opened"));
        }
        Ok(KeptNet {
            user,
            net,
            spoiled: AtomicBool::new(false),
            joined: Default::default(),
            tables: std::sync::Mutex::new(tables),
        })
    }

    /// What a start joins ([`crate::process::Start::Init`]).
    pub fn join(&self) -> crate::process::Join {
        crate::process::Join {
            user: self.user.as_ref().map(|f| f.as_raw_fd()),
            net: self.net.as_raw_fd(),
        }
    }

    /// An init was started in it as `pid` (the caller's child, not yet reaped). Without a pidfd it is spoiled.
    pub fn joined_by(&self, pid: Option<u32>) {
        let fd = pid
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
            .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
        match fd {
            Some(fd) => self.joined.lock().unwrap_or_else(|e| e.into_inner()).push(fd),
            None => self.spoil(),
        }
    }

    /// Has every init started in it exited (and with it every process of its call)?
    pub fn vacant(&self) -> bool {
        let mut v = self.joined.lock().unwrap_or_else(|e| e.into_inner());
        v.retain(|fd| crate::process::pidfd_exited(fd) != Some(true));
        v.is_empty()
    }

    /// A start that joined it failed in its setup (its proxy port taken, say): it is not to be joined again.
    pub fn spoil(&self) {
        self.spoiled.store(true, Ordering::SeqCst);
    }

    pub fn spoiled(&self) -> bool {
        self.spoiled.load(Ordering::SeqCst)
    }

    /// Do its socket tables show a socket a process holds (a listener, a connection, a UNIX socket)? Only a
    /// process outside the calls can hold one once they are over: one a call passed out, through which that
    /// process could catch a later call's connections. `true` too when its tables cannot be read.
    pub fn lists_sockets(&self) -> bool {
        self.read(|t| t != Table::Count)
    }

    /// Does its count of sockets (`sockstat`) show any, one neither bound nor connected included? A socket just
    /// closed may still be counted for a moment (freed after an RCU grace period). `true` when it cannot be read.
    pub fn counts_sockets(&self) -> bool {
        self.read(|t| t == Table::Count)
    }

    fn read(&self, which: impl Fn(Table) -> bool) -> bool {
        let tables = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let mut some = tables.iter().filter(|(t, _)| which(*t)).peekable();
        if some.peek().is_none() {
            return true;
        }
        some.any(|(t, fd)| table_holds(*t, fd).unwrap_or(true))
    }
}

/// The largest table read: past it, it holds sockets.
const MAX_TABLE: usize = 1 << 20;

fn table_holds(t: Table, fd: &OwnedFd) -> io::Result<bool> {
    rustix::fs::seek(fd, rustix::fs::SeekFrom::Start(0))?;
    let mut text = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = rustix::io::read(fd, &mut buf)?;
        if n == 0 {
            break;
        }
        text.extend_from_slice(&buf[..n]);
        if text.len() > MAX_TABLE {
            return Ok(true);
        }
    }
    if t == Table::Count {
        let used = text
            .split(|b| *b == b'\n')
            .find_map(|l| l.strip_prefix(b"sockets: used "))
            .and_then(|n| std::str::from_utf8(n).ok()?.trim().parse::<u64>().ok());
        return Ok(used.is_none_or(|n| n > 0));
    }
    let mut rows = text.split(|b| *b == b'\n').skip(1).filter(|l| !l.is_empty());
    Ok(match t {
        Table::Count => true,
        Table::Unix => rows.next().is_some(),
        Table::Inet => rows.any(|l| {
            let inode = l.split(|b| *b == b' ').filter(|f| !f.is_empty()).nth(9);
            inode.is_none_or(|i| i != b"0")
        }),
    })
}

/// The helper: in its new namespaces, the maps, then a descriptor of each namespace in the runner's table.
extern "C" fn helper(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is KeptNet::make's `MakeArgs`, alive while the runner's thread is suspended (CLONE_VFORK).
    let a = unsafe { &*(arg as *const MakeArgs) };
    let open = |p: &[u8]| -> io::Result<i32> {
        // SAFETY: `p` is NUL-terminated; the descriptor lands in the shared table, close-on-exec.
        check(unsafe {
            sys(
                libc::SYS_openat,
                libc::AT_FDCWD as usize,
                p.as_ptr() as usize,
                (libc::O_RDONLY | libc::O_CLOEXEC) as usize,
                0,
            )
        })
        .map(|fd| fd as i32)
    };
    let r = (|| -> io::Result<()> {
        if let Some((uid_map, gid_map)) = a.maps {
            // SAFETY: NUL-terminated paths, this process's own files.
            unsafe { super::child::write_file(b"/proc/self/setgroups\0", b"deny") }?;
            // SAFETY: as above.
            unsafe { super::child::write_file(b"/proc/self/uid_map\0", uid_map) }?;
            // SAFETY: as above.
            unsafe { super::child::write_file(b"/proc/self/gid_map\0", gid_map) }?;
            a.user.store(open(b"/proc/self/ns/user\0")?, Ordering::SeqCst);
        }
        a.net.store(open(b"/proc/self/ns/net\0")?, Ordering::SeqCst);
        // A table missing here (no IPv6) has no socket either.
        for ((path, _), fd) in TABLES.iter().zip(&a.tables) {
            if let Ok(t) = open(path) {
                fd.store(t, Ordering::SeqCst);
            }
        }
        Ok(())
    })();
    if let Err(e) = r {
        a.err.store(
            e.raw_os_error().filter(|c| *c != 0).unwrap_or(libc::EIO),
            Ordering::SeqCst,
        );
    }
    // SAFETY: ends this helper only; a raw call, so the runner's errno is left alone.
    unsafe { sys(libc::SYS_exit_group, 0, 0, 0, 0) };
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_namespace_is_not_the_runners_and_stays_the_same() {
        let privileged = rustix::thread::capabilities(None)
            .is_ok_and(|c| c.effective.contains(rustix::thread::CapabilitySet::SYS_ADMIN));
        let (u, g) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        let (um, gm) = (format!("{u} {u} 1"), format!("{g} {g} 1"));
        let maps = (!privileged).then(|| (um.as_bytes(), gm.as_bytes()));
        let k = match KeptNet::make(maps) {
            Ok(k) => k,
            Err(e) => {
                crate::skipped!("no network namespace can be made here: {e}");
                return;
            }
        };
        let ours = std::fs::metadata("/proc/self/ns/net")
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .unwrap();
        let ino = rustix::fs::fstat(&k.net).unwrap().st_ino;
        assert_ne!(ino, ours, "a kept namespace is never the runner's own");
        assert_eq!(k.join().user.is_some(), !privileged);
        assert!(
            !k.lists_sockets() && !k.counts_sockets(),
            "a new namespace holds no socket"
        );
        assert!(!k.spoiled());
        k.spoil();
        assert!(k.spoiled());
    }
}
