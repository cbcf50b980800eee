//! Landlock through its three system calls. Why not the `landlock` crate: it degrades a ruleset to what the
//! kernel supports ("best effort") and tells the outcome only after `restrict_self` in the child, where we can
//! no longer report it; here the runner chooses exactly what to handle from the ABI it probed, before the fork,
//! so what the audit line says is what the kernel enforces.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

pub const EXECUTE: u64 = 1 << 0;
pub const WRITE_FILE: u64 = 1 << 1;
pub const READ_FILE: u64 = 1 << 2;
pub const READ_DIR: u64 = 1 << 3;
const REMOVE_DIR: u64 = 1 << 4;
const REMOVE_FILE: u64 = 1 << 5;
const MAKE_DIR: u64 = 1 << 7;
const MAKE_REG: u64 = 1 << 8;
const MAKE_SOCK: u64 = 1 << 9;
const MAKE_FIFO: u64 = 1 << 10;
const MAKE_SYM: u64 = 1 << 12;
const REFER: u64 = 1 << 13;
pub const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;

/// Read a file, or list and read a folder's tree.
pub const READ: u64 = READ_FILE | READ_DIR;
/// Read and run.
pub const EXEC: u64 = READ | EXECUTE;
/// Read, write, create, remove, rename; never make devices, never run (a writable place is not executable).
pub const WRITE: u64 = READ
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE;
/// The rights that make sense on a file that is not a folder.
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;

const NET_BIND_TCP: u64 = 1 << 0;
pub const NET_CONNECT_TCP: u64 = 1 << 1;
const SCOPE_ABSTRACT_UNIX: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// Every file-system right this ABI knows (all of them are handled: what no rule grants is refused).
pub fn handled_fs(abi: i32) -> u64 {
    match abi {
        i32::MIN..=0 => 0,
        1 => (1 << 13) - 1,
        2 => (1 << 14) - 1,
        3 | 4 => (1 << 15) - 1,
        _ => (1 << 16) - 1,
    }
}

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// What a ruleset handles.
pub struct Handled {
    pub fs: u64,
    /// Confine TCP (ABI ≥ 4) — false for a tool with all the network.
    pub tcp: bool,
    /// Scope signals and abstract UNIX sockets (ABI ≥ 6).
    pub scope: bool,
}

/// A ruleset being filled, before the fork.
pub struct Builder {
    fd: OwnedFd,
    fs: u64,
}

impl Builder {
    pub fn new(h: &Handled) -> io::Result<Builder> {
        let attr = RulesetAttr {
            handled_access_fs: h.fs,
            handled_access_net: if h.tcp { NET_BIND_TCP | NET_CONNECT_TCP } else { 0 },
            scoped: if h.scope { SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL } else { 0 },
        };
        // Why the size: an older kernel refuses a bigger struct only when the extra fields are non-zero.
        let size = if h.scope {
            24
        } else if h.tcp {
            16
        } else {
            8
        };
        // SAFETY: the attr lives across the call; the kernel returns a new O_CLOEXEC fd.
        let fd = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, &attr, size as usize, 0u32) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Builder {
            // SAFETY: a fresh fd we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
            fs: h.fs,
        })
    }

    /// Allow `access` beneath `path` (a file: the file-compatible part of it). `path` is canonical; it is
    /// opened without following any symbolic link, so a link swapped in since it was resolved is refused.
    pub fn allow_path(&mut self, path: &Path, access: u64) -> io::Result<()> {
        self.allow_fd(&open_path(path)?, access)
    }

    /// Allow `access` beneath what `fd` (an `O_PATH` descriptor) names.
    pub fn allow_fd(&mut self, fd: &OwnedFd, access: u64) -> io::Result<()> {
        let st = rustix::fs::fstat(fd)?;
        let mut access = access & self.fs;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Directory {
            access &= FILE_RIGHTS;
        }
        if access == 0 {
            return Ok(());
        }
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: fd.as_raw_fd(),
        };
        // SAFETY: both fds are valid; the attr lives across the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                1u32, /* LANDLOCK_RULE_PATH_BENEATH */
                &attr,
                0u32,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Allow TCP connections to `port` (any host).
    pub fn allow_connect(&mut self, port: u16) -> io::Result<()> {
        let attr = NetPortAttr {
            allowed_access: NET_CONNECT_TCP,
            port: port as u64,
        };
        // SAFETY: as above.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                2u32, /* LANDLOCK_RULE_NET_PORT */
                &attr,
                0u32,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

/// `O_PATH` without following symbolic links anywhere in the path (openat2 `RESOLVE_NO_SYMLINKS`; before
/// Linux 5.6, the last component only).
fn open_path(path: &Path) -> io::Result<OwnedFd> {
    match open_no_symlinks(path) {
        Err(rustix::io::Errno::NOSYS) => {
            use rustix::fs::OFlags;
            let flags = OFlags::PATH | OFlags::CLOEXEC | OFlags::NOFOLLOW;
            Ok(rustix::fs::open(path, flags, rustix::fs::Mode::empty())?)
        }
        other => Ok(other?),
    }
}

/// `landlock_restrict_self`; `-errno` on failure. A raw system call (no `errno`).
///
/// # Safety
/// Between fork and exec; `no_new_privs` set.
pub unsafe fn restrict_self(fd: i32) -> isize {
    // SAFETY: a system call on a descriptor number, no memory passed; the caller's contract covers the rest.
    unsafe { crate::syscall::call(libc::SYS_landlock_restrict_self, fd as usize, 0, 0, 0) }
}

/// `p` opened as `O_PATH` if it exists with no symbolic link on its way (openat2 `RESOLVE_NO_SYMLINKS`); the
/// error otherwise (ELOOP: a link; ENOSYS: before Linux 5.6).
pub fn open_no_symlinks(p: &Path) -> rustix::io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{OFlags, ResolveFlags};
    rustix::fs::openat2(
        rustix::fs::CWD,
        p,
        OFlags::PATH | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
        ResolveFlags::NO_SYMLINKS,
    )
}
