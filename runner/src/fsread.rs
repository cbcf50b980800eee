//! Reading a file that anyone with access to the data dir could have forged: only a regular file, opened
//! without blocking (a FIFO would hang the reader), and never more than a bound (`/dev/zero` would not end).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The whole of the regular file at `path`, at most `max` bytes. Symlinks are followed (AnimaWorks users link
/// their permission files); what they point at must be a regular file too.
pub fn read_bounded(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    if meta.len() > max {
        return Err(too_big(path, max));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    // One more byte than allowed tells a file that grew past the bound while it was read.
    File::take(f, max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(too_big(path, max));
    }
    Ok(out)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text_bounded(path: &Path, max: u64) -> io::Result<String> {
    String::from_utf8(read_bounded(path, max)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{} is not UTF-8 text", path.display())))
}

fn too_big(path: &Path, max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} is larger than {max} bytes", path.display()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_special_files_and_oversize() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("f.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(read_bounded(&fifo, 10).is_err());
        let zero = d.path().join("z.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(read_bounded(&zero, 10).is_err());
        assert!(read_bounded(d.path(), 10).is_err());
        let f = d.path().join("ok.json");
        std::fs::write(&f, "12345").unwrap();
        assert_eq!(read_bounded(&f, 5).unwrap(), b"12345");
        assert!(read_bounded(&f, 4).is_err());
    }
}
