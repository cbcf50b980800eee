//! A descriptor this process was handed at its start ([`crate::process::Handover`]), taken as its own.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The descriptor `fd` (3 or above) this process inherited, owned from now on (closed when dropped); `None` when
/// no such descriptor is open. Take each number once: a second owner would close it twice.
pub fn take(fd: RawFd) -> Option<OwnedFd> {
    if fd < 3 {
        return None;
    }
    // SAFETY: F_GETFD on any number only reads its flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: `fd` is open (checked above), and the caller's contract gives it one owner.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}
