//! Opening the runner's own files below a folder a tool may write (the anima dir: its audit log, task store,
//! notifications, `status.json`). The folder itself is the operator's choice and is followed as named; below it,
//! nothing is followed: a symbolic link, on the way or at the end, is refused, and so is anything owned by
//! another user than this one, the folder's owner or root. So a tool that swapped `state/` for a link to another
//! anima's (or to any folder) cannot make the runner write its audit line, a task or a notification there, nor
//! read another anima's tasks.
//!
//! The open is one `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the folder's descriptor; where the
//! kernel has no `openat2` (before Linux 5.6, or a container's seccomp profile refusing it), each component is
//! opened from its parent's descriptor with `O_NOFOLLOW` and checked, which is as safe, one call a component.

use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn refused(base: &Path, at: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "refusing {}: {why}; the runner never follows a link nor uses another user's file below {} (a tool may \
             have put it there: move it away, and the runner makes the folder again)",
            base.join(at).display(),
            base.display()
        ),
    )
}

/// The names of `rel`, each one folder or file name (no `..`, no root).
fn names(rel: &Path) -> io::Result<Vec<&std::ffi::OsStr>> {
    rel.components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a relative path of names", rel.display()),
            )),
        })
        .collect()
}

/// The checks of one component already opened (`O_PATH | O_NOFOLLOW`): not a link, owned by this user, by the
/// owner of `base` (a runner started as root for a user's anima dir) or by root.
fn check_opened(fd: &OwnedFd, base: &Path, at: &Path, dir: bool) -> io::Result<()> {
    use rustix::fs::FileType;
    let m = rustix::fs::fstat(fd)?;
    let kind = FileType::from_raw_mode(m.st_mode);
    if kind == FileType::Symlink {
        return Err(refused(base, at, "it is a symbolic link"));
    }
    let owner = m.st_uid;
    if owner != euid() && owner != 0 && std::fs::metadata(base).map(|b| b.uid()).ok() != Some(owner) {
        return Err(refused(
            base,
            at,
            &format!(
                "it is owned by uid {owner}, not by this user (uid {}) nor by the folder's owner",
                euid()
            ),
        ));
    }
    if dir && kind != FileType::Directory {
        // As `create_dir_all` says it (no link and no stranger: nothing a tool could have done that a mistake
        // could not).
        return Err(io::Error::from_raw_os_error(libc::EEXIST));
    }
    Ok(())
}

/// Walk `rel` below `base`: each folder opened from its parent with `O_NOFOLLOW` and checked; missing folders
/// made (mode 0700 but the umask) when `make`. The last folder's descriptor, or `None` when one is missing and
/// not made.
fn walk(base: &Path, rel: &Path, make: bool) -> io::Result<Option<OwnedFd>> {
    let cur = match rustix::fs::open(base, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) {
        Err(rustix::io::Errno::NOENT) if !make => return Ok(None),
        r => r?,
    };
    walk_from(cur, base, Path::new(""), rel, make)
}

/// [`walk`] from the folder `cur`, which is `from` below `base`.
fn walk_from(mut cur: OwnedFd, base: &Path, from: &Path, rel: &Path, make: bool) -> io::Result<Option<OwnedFd>> {
    let mut at = from.to_path_buf();
    for n in names(rel)? {
        at.push(n);
        let open = |cur: &OwnedFd| {
            rustix::fs::openat(cur, n, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())
        };
        let fd = match open(&cur) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) if make => {
                match rustix::fs::mkdirat(&cur, n, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                open(&cur)?
            }
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        check_opened(&fd, base, &at, true)?;
        cur = fd;
    }
    Ok(Some(cur))
}

/// Every existing component of `rel` below `base` is a folder or file of this user's own, and no link; missing
/// folders of `rel` are made (the whole of `rel`, as `create_dir_all` would, but never through a link).
pub fn make_dirs(base: &Path, rel: &Path) -> io::Result<()> {
    walk(base, rel, true).map(|_| ())
}

/// Every existing component of `rel` below `base` is this user's own and no link (`rel` may be missing, or end
/// anywhere on its way).
pub fn check(base: &Path, rel: &Path) -> io::Result<()> {
    let n = names(rel)?;
    let Some((last, dirs)) = n.split_last() else {
        return Ok(());
    };
    let dir_rel: std::path::PathBuf = dirs.iter().collect();
    let Some(dir) = walk(base, &dir_rel, false)? else {
        return Ok(());
    };
    match rustix::fs::openat(
        &dir,
        *last,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => check_opened(&fd, base, rel, false),
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Open `rel` below `base` with `flags` (and `mode` when it creates), never through a link: the file must be this
/// user's own. `NotFound` when it is missing (and `flags` do not create it). The owners of the folders on the way
/// are not looked at here: [`make_dirs`] or [`check`] them first where they matter.
pub fn open(base: &Path, rel: &Path, flags: OFlags, mode: u32) -> io::Result<File> {
    let dir = rustix::fs::open(base, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    open_from(&dir, base, Path::new(""), rel, flags, mode)
}

/// [`open`] of `rel` below the folder `dir` already open, which is `from` below `base` (for the messages).
fn open_from(dir: &OwnedFd, base: &Path, from: &Path, rel: &Path, flags: OFlags, mode: u32) -> io::Result<File> {
    names(rel)?;
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(mode);
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let fd = match rustix::fs::openat2(dir, rel, flags, mode, resolve) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP) | Err(rustix::io::Errno::XDEV) => {
            // Which component: the walk says (and names it).
            let fd = open_walking(dir, base, from, rel, OFlags::PATH, Mode::empty())?;
            check_opened(&fd, base, &from.join(rel), false)?;
            return Err(refused(base, &from.join(rel), "a symbolic link is on its way"));
        }
        // No `openat2` here: component by component.
        Err(rustix::io::Errno::NOSYS) | Err(rustix::io::Errno::PERM) | Err(rustix::io::Errno::INVAL) => {
            open_walking(dir, base, from, rel, flags, mode)?
        }
        Err(e) => return Err(e.into()),
    };
    check_opened(&fd, base, &from.join(rel), false)?;
    Ok(File::from(fd))
}

/// [`open_from`] without `openat2`: each folder from its parent's descriptor, the file with `O_NOFOLLOW`.
fn open_walking(dir: &OwnedFd, base: &Path, from: &Path, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let parent = rel.parent().unwrap_or(Path::new(""));
    let start = rustix::fs::openat(
        dir,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let Some(dir) = walk_from(start, base, from, parent, false)? else {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    };
    let rel = &from.join(rel);
    let last = rel
        .file_name()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    match rustix::fs::openat(&dir, last, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, mode) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::LOOP) => Err(refused(base, rel, "it is a symbolic link")),
        Err(e) => Err(e.into()),
    }
}

/// The bytes of the regular file `rel` below `base` (see [`open`]), at most `max` of them; `Ok(None)` when it is
/// missing.
pub fn read_if_present(base: &Path, rel: &Path, max: u64) -> io::Result<Option<Vec<u8>>> {
    let f = match open(base, rel, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY, 0) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    crate::fsread::read_open(f, max).map(Some)
}

/// A folder below a base, opened once through the checks of [`make_dirs`]: every file in it is then reached from
/// its descriptor, never by its path again, so a link a tool swaps in on the way after the check changes nothing
/// (what is written lands in the folder that was checked, or nowhere).
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
    base: std::path::PathBuf,
    rel: std::path::PathBuf,
}

/// The folder `rel` below `base` (as [`make_dirs`] when `make`, made as named when `base` is missing too), or
/// `None` when it is missing and not made.
pub fn folder(base: &Path, rel: &Path, make: bool) -> io::Result<Option<Folder>> {
    if make {
        std::fs::create_dir_all(base)?;
    }
    let Some(path_fd) = walk(base, rel, make)? else {
        return Ok(None);
    };
    Folder::reopened(&path_fd, base, rel).map(Some)
}

impl Folder {
    fn reopened(path_fd: &OwnedFd, base: &Path, rel: &Path) -> io::Result<Folder> {
        // `O_PATH` reaches no entries' list nor times: the same folder, opened for reading.
        let fd = rustix::fs::openat(
            path_fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Folder {
            fd,
            base: base.to_path_buf(),
            rel: rel.to_path_buf(),
        })
    }

    /// The folder's path, for messages (and for readers that follow no path of it into a write).
    pub fn path(&self) -> std::path::PathBuf {
        self.base.join(&self.rel)
    }

    /// The sub-folder `name` (made with `mode`, but the umask, when `make`), checked as [`folder`] checks.
    pub fn sub(&self, name: &str, make: bool, mode: u32) -> io::Result<Option<Folder>> {
        if make {
            match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let start = rustix::fs::openat(
            &self.fd,
            ".",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let Some(fd) = walk_from(start, &self.base, &self.rel, Path::new(name), false)? else {
            return Ok(None);
        };
        Folder::reopened(&fd, &self.base, &self.rel.join(name)).map(Some)
    }

    /// [`open`] of `rel` below this folder.
    pub fn open(&self, rel: &Path, flags: OFlags, mode: u32) -> io::Result<File> {
        open_from(&self.fd, &self.base, &self.rel, rel, flags, mode)
    }

    /// The bytes of the regular file `name`, at most `max`; `Ok(None)` when it is missing. A link, a FIFO, a
    /// device or another user's file is refused.
    pub fn read(&self, name: &Path, max: u64) -> io::Result<Option<Vec<u8>>> {
        match self.open(name, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY, 0) {
            Ok(f) => crate::fsread::read_open(f, max).map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A new temporary file in the folder holding `bytes` (mode 0600), by its name.
    fn temp_with(&self, bytes: &[u8]) -> io::Result<String> {
        use std::io::Write;
        loop {
            let mut r = [0u8; 8];
            rustix::rand::getrandom(&mut r, rustix::rand::GetRandomFlags::empty())?;
            let name = format!(".tmp-{:016x}.part", u64::from_ne_bytes(r));
            let fd = match rustix::fs::openat(
                &self.fd,
                name.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            ) {
                Ok(fd) => fd,
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            };
            let wrote = File::from(fd).write_all(bytes);
            if let Err(e) = wrote {
                let _ = self.remove(&name);
                return Err(e);
            }
            return Ok(name);
        }
    }

    /// Write `bytes` to the file `name` atomically: a temporary file in the folder, then rename.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.temp_with(bytes)?;
        rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name).map_err(|e| {
            let _ = self.remove(&tmp);
            io::Error::from(e)
        })
    }

    /// [`Folder::write_atomic`] by exchanging the new file with the old one and removing the old (no flush
    /// forced on the file system, as a rename over a file is on ext4); a rename where the exchange is refused.
    pub fn write_exchanging(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        let tmp = self.temp_with(bytes)?;
        let flags = rustix::fs::RenameFlags::EXCHANGE;
        match rustix::fs::renameat_with(&self.fd, tmp.as_str(), &self.fd, name, flags) {
            Ok(()) => {
                let _ = self.remove(&tmp);
                Ok(())
            }
            Err(_) => rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name).map_err(|e| {
                let _ = self.remove(&tmp);
                io::Error::from(e)
            }),
        }
    }

    /// Rename the file `from` to `to`, both in this folder.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.fd, from, &self.fd, to)?)
    }

    /// Move the entry `from` of this folder to `to` in the folder `dest` (a link is moved as a link, never
    /// followed), from the two descriptors: a folder swapped for a link after it was opened changes nothing.
    pub fn rename_to(&self, from: &str, dest: &Folder, to: &str) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.fd, from, &dest.fd, to)?)
    }

    /// Remove the file `name` (a link is removed, never followed).
    pub fn remove(&self, name: &str) -> io::Result<()> {
        Ok(rustix::fs::unlinkat(&self.fd, name, rustix::fs::AtFlags::empty())?)
    }

    /// Whether anything is at `name` (a link included, not followed).
    pub fn has(&self, name: &str) -> bool {
        rustix::fs::statat(&self.fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// The status of `name` (not followed).
    pub fn stat_of(&self, name: &str) -> io::Result<rustix::fs::Stat> {
        Ok(rustix::fs::statat(
            &self.fd,
            name,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    /// The folder's own status.
    pub fn stat(&self) -> io::Result<rustix::fs::Stat> {
        Ok(rustix::fs::fstat(&self.fd)?)
    }

    /// Set the folder's modification time (its access time kept).
    pub fn set_modified(&self, secs: i64, nanos: u32) -> io::Result<()> {
        use rustix::fs::{Timespec, Timestamps, UTIME_OMIT};
        let times = Timestamps {
            last_access: Timespec {
                tv_sec: 0,
                tv_nsec: UTIME_OMIT,
            },
            last_modification: Timespec {
                tv_sec: secs,
                tv_nsec: nanos.into(),
            },
        };
        Ok(rustix::fs::futimens(&self.fd, &times)?)
    }

    /// The names in the folder (not `.` nor `..`), in the order the file system gives them; at most `max` when
    /// given, else an error saying so (never a short list taken for the whole).
    pub fn names(&self, max: Option<usize>) -> io::Result<Vec<std::ffi::OsString>> {
        use std::os::unix::ffi::OsStrExt;
        let mut dir = rustix::fs::Dir::read_from(&self.fd)?;
        let mut out = Vec::new();
        while let Some(e) = dir.read() {
            let e = e?;
            let n = e.file_name().to_bytes();
            if n == b"." || n == b".." {
                continue;
            }
            if max.is_some_and(|m| out.len() >= m) {
                return Err(io::Error::other(format!(
                    "{} holds more than {} entries; refused (a forged folder would make every look slow)",
                    self.path().display(),
                    out.len()
                )));
            }
            out.push(std::ffi::OsStr::from_bytes(n).to_owned());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_below_the_base_are_refused_and_plain_paths_work() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("alice");
        let other = t.path().join("bob");
        std::fs::create_dir_all(other.join("state")).unwrap();
        std::fs::create_dir_all(&base).unwrap();
        make_dirs(&base, Path::new("state/background_tasks")).unwrap();
        assert!(base.join("state/background_tasks").is_dir());
        let f = open(
            &base,
            Path::new("state/log"),
            OFlags::WRONLY | OFlags::CREATE | OFlags::APPEND,
            0o600,
        )
        .unwrap();
        drop(f);
        assert_eq!(
            read_if_present(&base, Path::new("state/log"), 10).unwrap().unwrap(),
            b""
        );
        assert!(read_if_present(&base, Path::new("state/none"), 10).unwrap().is_none());
        std::fs::rename(base.join("state"), base.join("state.old")).unwrap();
        std::os::unix::fs::symlink("../bob/state", base.join("state")).unwrap();
        let e = open(&base, Path::new("state/log"), OFlags::WRONLY | OFlags::CREATE, 0o600).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!other.join("state/log").exists());
        let e = make_dirs(&base, Path::new("state/background_tasks")).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(check(&base, Path::new("state/x")).is_err());
        assert!(check(&base, Path::new("state")).is_err());
        assert!(read_if_present(&base, Path::new("state/log"), 10).is_err());
        // The file itself a link.
        std::fs::remove_file(base.join("state")).unwrap();
        std::fs::rename(base.join("state.old"), base.join("state")).unwrap();
        std::os::unix::fs::symlink(other.join("x.json"), base.join("status.json")).unwrap();
        std::fs::write(other.join("x.json"), "{}").unwrap();
        assert!(read_if_present(&base, Path::new("status.json"), 10).is_err());
        assert!(open(&base, Path::new("../bob/x.json"), OFlags::RDONLY, 0).is_err());
    }

    #[test]
    fn without_openat2_each_component_is_checked_alike() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("alice");
        std::fs::create_dir_all(base.join("state")).unwrap();
        std::fs::create_dir_all(t.path().join("bob/state")).unwrap();
        std::fs::write(t.path().join("bob/state/log"), "bob").unwrap();
        let walking = |rel: &str| {
            let dir = rustix::fs::open(&base, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
            open_walking(
                &dir,
                &base,
                Path::new(""),
                Path::new(rel),
                OFlags::RDONLY,
                Mode::empty(),
            )
        };
        std::fs::write(base.join("state/log"), "alice").unwrap();
        assert!(walking("state/log").is_ok());
        std::os::unix::fs::symlink(t.path().join("bob/state/log"), base.join("state/link")).unwrap();
        assert!(walking("state/link").unwrap_err().to_string().contains("symbolic link"));
        std::fs::rename(base.join("state"), base.join("state.old")).unwrap();
        std::os::unix::fs::symlink("../bob/state", base.join("state")).unwrap();
        assert!(walking("state/log").unwrap_err().to_string().contains("symbolic link"));
        assert_eq!(walking("none/log").unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn another_users_folder_below_the_base_is_refused() {
        if euid() != 0 {
            awt_sys::skipped!("only root can give a folder to another user");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let base = t.path().join("alice");
        std::fs::create_dir_all(base.join("state")).unwrap();
        std::os::unix::fs::chown(base.join("state"), Some(4242), Some(4242)).unwrap();
        let e = make_dirs(&base, Path::new("state/background_tasks")).unwrap_err();
        assert!(e.to_string().contains("owned by uid 4242"), "{e}");
        // The folder's owner is not another user.
        std::os::unix::fs::chown(&base, Some(4242), Some(4242)).unwrap();
        make_dirs(&base, Path::new("state/background_tasks")).unwrap();
    }
}
