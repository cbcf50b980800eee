//! Reading a file of the data dir or the anima dir (permissions, settings, vault, task files, pending
//! descriptors, cache entries): files anyone with the user's rights may have forged. Only a regular file is read
//! (a FIFO would block the runner, a device such as `/dev/zero` never ends, a directory is no file), it is opened
//! without blocking and without becoming a controlling terminal, and at most a bounded number of bytes is read.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Bound for small settings and policy files (permissions, `animaworks-tool.json`, `config.json`, the vault,
/// a pending descriptor).
pub const SMALL: u64 = 1024 * 1024;
/// Bound for a task file: it holds a result (up to the output cap, 8 MiB by default) twice, as text and as JSON.
pub const TASK: u64 = 64 * 1024 * 1024;
/// Bound for a schema cache entry: a `--schemas` answer is at most 16 MiB.
pub const CACHE_ENTRY: u64 = 32 * 1024 * 1024;
/// A folder's pack of cache entries (`cache::store_many`).
pub const CACHE_PACK: u64 = 64 * 1024 * 1024;

fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn not_regular(t: std::fs::FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is not a regular file; refused", kind_of(t)),
    )
}

/// The bytes of the regular file at `path` (symlinks followed), at most `max` of them.
///
/// # Errors
/// `NotFound` when nothing is there; `InvalidInput` for anything but a regular file; `InvalidData` when the
/// file is larger than `max`; any other error of open or read.
pub fn read(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    // Why stat before open: opening a device may itself do something (a tape rewinds, a tty becomes ours).
    let meta = std::fs::metadata(path)?;
    if !meta.file_type().is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    // Why again on the open file: the path may have been swapped between the stat and the open.
    let m = f.metadata()?;
    if !m.file_type().is_file() {
        return Err(not_regular(m.file_type()));
    }
    read_capped(f, max, m.len())
}

/// The folder at `path` (symlinks followed), open for [`read_at`].
pub fn open_dir(path: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// [`read`] of `name` in the open folder `dir`, a folder of the runner's own (the schema cache's entries): a
/// path walk from the folder, not from `/` (a warm listing reads one entry per tool). A symlink is refused (the
/// runner writes its entries as files, never as links), which makes the open itself safe without a `stat`
/// before it: what is left that opening could set off is a device node, and only root can make one. The open
/// file is still checked (a regular file, at most `max` bytes). Per entry: `openat`, `fstat`, one `read`,
/// `close` (before: a `stat` first and a second `read` to see the end).
pub fn read_at(dir: &File, name: &Path, max: u64) -> io::Result<Vec<u8>> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let f = File::from(fd);
    let m = f.metadata()?;
    if !m.file_type().is_file() {
        return Err(not_regular(m.file_type()));
    }
    read_sized(f, max, m.len())
}

/// [`read`] of a file already open (without blocking, without becoming a controlling terminal).
pub fn read_open(f: File, max: u64) -> io::Result<Vec<u8>> {
    let m = f.metadata()?;
    if !m.file_type().is_file() {
        return Err(not_regular(m.file_type()));
    }
    read_sized(f, max, m.len())
}

/// [`read_capped`] of a file whose size `len` (at most `max`) the open file's `fstat` gave: the `len` bytes that
/// were there then, in one `read` (a file that grew since is read as it was; one that shrank, to its end).
fn read_sized(mut f: File, max: u64, len: u64) -> io::Result<Vec<u8>> {
    if len == 0 || len > max {
        return read_capped(f, max, len);
    }
    let mut out = vec![0u8; len as usize];
    let mut got = 0;
    while got < out.len() {
        match f.read(&mut out[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out.truncate(got);
    Ok(out)
}

/// `len`: the size the file says it has, a hint only (bounded by `max`): a buffer of that size reads a small file
/// in one read instead of a read per doubling from 32 bytes (a warm listing of 10,000 tools made 70,000).
fn read_capped(f: File, max: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len.min(max).saturating_add(1) as usize);
    f.take(max.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {max} bytes; refused"),
        ));
    }
    Ok(out)
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, max: u64) -> io::Result<String> {
    String::from_utf8(read(path, max)?).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// [`read`], with `Ok(None)` when nothing is at `path`.
pub fn read_if_present(path: &Path, max: u64) -> io::Result<Option<Vec<u8>>> {
    match read(path, max) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A dangling symlink is something, and an error: only a path with nothing at all is "absent".
            match std::fs::symlink_metadata(path) {
                Err(_) => Ok(None),
                Ok(_) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

/// [`read_if_present`], as UTF-8 text.
pub fn read_to_string_if_present(path: &Path, max: u64) -> io::Result<Option<String>> {
    read_if_present(path, max)?
        .map(|b| String::from_utf8(b).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_special_files_and_oversize() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("f.json");
        let c = &fifo;
        assert!(std::process::Command::new("mkfifo").arg(c).status().unwrap().success());
        let e = read(&fifo, SMALL).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let zero = d.path().join("z.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(read(&zero, SMALL).unwrap_err().to_string().contains("character device"));
        assert!(read(d.path(), SMALL).unwrap_err().to_string().contains("directory"));
        let big = d.path().join("big");
        std::fs::write(&big, vec![b'x'; 11]).unwrap();
        assert!(read(&big, 10).unwrap_err().to_string().contains("larger than 10"));
        assert_eq!(read(&big, 11).unwrap().len(), 11);
        assert!(read_if_present(&d.path().join("none"), 10).unwrap().is_none());
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &dangling).unwrap();
        assert!(read_if_present(&dangling, 10).is_err());
    }

    #[test]
    fn read_at_refuses_what_read_refuses() {
        let d = tempfile::tempdir().unwrap();
        let dir = open_dir(d.path()).unwrap();
        let at = |n: &str, max| read_at(&dir, Path::new(n), max);
        assert!(std::process::Command::new("mkfifo")
            .arg(d.path().join("f.json"))
            .status()
            .unwrap()
            .success());
        assert!(at("f.json", SMALL).unwrap_err().to_string().contains("FIFO"));
        // A link to a device is refused before anything is opened through it.
        std::os::unix::fs::symlink("/dev/zero", d.path().join("z.json")).unwrap();
        assert_eq!(at("z.json", SMALL).unwrap_err().raw_os_error(), Some(libc::ELOOP));
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert!(at("sub", SMALL).unwrap_err().to_string().contains("directory"));
        std::fs::write(d.path().join("big"), vec![b'x'; 11]).unwrap();
        assert!(at("big", 10).unwrap_err().to_string().contains("larger than 10"));
        assert_eq!(at("big", 11).unwrap().len(), 11);
        // A link is refused, even to a regular file: the open, not a `stat` before it, is the check.
        std::os::unix::fs::symlink(d.path().join("big"), d.path().join("link")).unwrap();
        assert!(at("link", 11).is_err());
        std::fs::write(d.path().join("small"), b"{}").unwrap();
        assert_eq!(at("small", 10).unwrap(), b"{}");
        std::fs::write(d.path().join("empty"), b"").unwrap();
        assert!(at("empty", 10).unwrap().is_empty());
        assert_eq!(at("none", 10).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(open_dir(&d.path().join("big")).is_err());
    }
}
