//! Where output past the cap goes (protocol.md §5.3): one file per call under `<data dir>/outputs/`, and the
//! rules that keep that folder from filling the disk.
//!
//! - A spill file is created new (`O_EXCL`, never through a symlink: `O_NOFOLLOW`), mode 0600, and holds the
//!   output with every resolved secret masked, streamed through a [`StreamMasker`].
//! - One call writes at most [`SpillTo::max_bytes`] (default [`DEFAULT_MAX_SPILL`], at least the output cap;
//!   `$ANIMAWORKS_TOOL_MAX_SPILL`). Past it the writer stops and reports `full`; the call is then ended and the
//!   file, holding the first bytes, is named in the error.
//! - A call that timed out or was cancelled has its spill removed ([`Spill::discard`]).
//! - Whenever a spill is opened the folder is pruned: files older than [`RETENTION`] go, then the oldest until
//!   the folder holds at most [`FOLDER_FACTOR`] × the per-call bound.
//! - `--schemas` never spills ([`SpillTo::never`]): it has its own small cap.

use crate::policy::mask::{Masker, StreamMasker};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What one call may write to disk by default: 256 MiB.
pub const DEFAULT_MAX_SPILL: u64 = 256 * 1024 * 1024;
/// Spill files older than this are removed when a new one is opened.
pub const RETENTION: Duration = Duration::from_secs(7 * 86400);
/// The folder holds at most this many times the per-call bound; the oldest files go first.
pub const FOLDER_FACTOR: u64 = 4;

/// Where (and whether) a call's output past the cap may go, and how it is masked.
#[derive(Debug, Clone)]
pub struct SpillTo {
    /// `None`: never spill; output past the cap ends the call.
    pub dir: Option<PathBuf>,
    pub masker: Masker,
    /// The most one call writes to disk.
    pub max_bytes: u64,
}

/// The per-call bound: `$ANIMAWORKS_TOOL_MAX_SPILL` (bytes), else [`DEFAULT_MAX_SPILL`].
pub fn default_max_spill() -> u64 {
    std::env::var("ANIMAWORKS_TOOL_MAX_SPILL")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_SPILL)
}

impl SpillTo {
    /// Spill into `dir`, unmasked (add secrets with [`SpillTo::masked`]).
    pub fn dir(dir: PathBuf) -> SpillTo {
        SpillTo {
            dir: Some(dir),
            masker: Masker::default(),
            max_bytes: default_max_spill(),
        }
    }

    /// Never spill (`--schemas`).
    pub fn never() -> SpillTo {
        SpillTo {
            dir: None,
            masker: Masker::default(),
            max_bytes: 0,
        }
    }

    /// The same, with these secrets masked in the file.
    pub fn masked(mut self, m: &Masker) -> SpillTo {
        self.masker = m.clone();
        self
    }

    /// Open the spill file of `call_id`.
    pub fn open(&self, call_id: &str, max_output: u64) -> io::Result<Spill> {
        let dir = self
            .dir
            .as_deref()
            .ok_or_else(|| io::Error::other("this output is never written to disk"))?;
        Spill::create(dir, call_id, self.max_bytes.max(max_output), &self.masker)
    }
}

/// One call's spill file, being written.
#[derive(Debug)]
pub struct Spill {
    file: Option<File>,
    pub path: PathBuf,
    /// Bytes of output received (before masking).
    pub bytes: u64,
    written: u64,
    max: u64,
    masker: StreamMasker,
    /// The bound was reached: nothing more is written, and the call must end.
    pub full: bool,
    buf: Vec<u8>,
}

impl Spill {
    fn create(dir: &Path, call_id: &str, max: u64, masker: &Masker) -> io::Result<Spill> {
        std::fs::create_dir_all(dir)?;
        prune(dir, max.saturating_mul(FOLDER_FACTOR));
        let safe: String = call_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut last = None;
        for n in 0..16 {
            let name = if n == 0 {
                format!("{safe}.out")
            } else {
                format!("{safe}-{n}.out")
            };
            let path = dir.join(name);
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(Spill {
                        file: Some(file),
                        path,
                        bytes: 0,
                        written: 0,
                        max,
                        masker: StreamMasker::new(masker),
                        full: false,
                        buf: Vec::new(),
                    })
                }
                // Something is already there (another call's file, or a planted symlink): take another name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free name")))
    }

    /// Append output; stops at the bound (then `full` is set).
    pub fn write(&mut self, b: &[u8]) {
        self.bytes += b.len() as u64;
        if self.full {
            return;
        }
        self.buf.clear();
        self.masker.push(b, &mut self.buf);
        self.put();
    }

    fn put(&mut self) {
        let room = self.max.saturating_sub(self.written);
        let take = (self.buf.len() as u64).min(room) as usize;
        if let Some(f) = &mut self.file {
            if f.write_all(&self.buf[..take]).is_ok() {
                self.written += take as u64;
            }
        }
        if take < self.buf.len() {
            self.full = true;
        }
    }

    /// Everything was written: flush what the masker held back.
    pub fn finish(&mut self) {
        if !self.full {
            self.buf.clear();
            self.masker.finish(&mut self.buf);
            self.put();
        }
        self.file = None;
    }

    /// The call timed out or was cancelled: the partial output is removed.
    pub fn discard(&mut self) {
        self.file = None;
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Remove spill files older than [`RETENTION`], then the oldest while the folder holds more than `max_total`
/// bytes. Only `*.out` regular files directly in `dir` are touched.
pub fn prune(dir: &Path, max_total: u64) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let now = SystemTime::now();
    let mut kept: Vec<(i64, u64, PathBuf)> = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "out") {
            continue;
        }
        let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
        if !m.file_type().is_file() {
            continue;
        }
        let age = m
            .modified()
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        if age > RETENTION {
            let _ = std::fs::remove_file(&p);
        } else {
            kept.push((m.mtime(), m.size(), p));
        }
    }
    let mut total: u64 = kept.iter().map(|k| k.1).sum();
    kept.sort();
    for (_, size, p) in kept {
        if total <= max_total {
            break;
        }
        if std::fs::remove_file(&p).is_ok() {
            total -= size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn spill_is_private_masked_bounded_and_never_follows_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, d.path().join("c-1.out")).unwrap();
        let to = SpillTo::dir(d.path().to_path_buf()).masked(&Masker::new(["sekrit-value"]));
        let mut s = to.open("c-1", 0).unwrap();
        assert_eq!(s.path, d.path().join("c-1-1.out"));
        s.write(b"a sekrit-");
        s.write(b"value b");
        s.finish();
        assert_eq!(std::fs::read_to_string(&s.path).unwrap(), "a *** b");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::metadata(&s.path).unwrap().permissions().mode() & 0o777, 0o600);

        let mut small = SpillTo {
            max_bytes: 10,
            ..SpillTo::dir(d.path().to_path_buf())
        }
        .open("c-2", 0)
        .unwrap();
        small.write(&[b'x'; 25]);
        assert!(small.full);
        small.finish();
        assert_eq!(std::fs::metadata(&small.path).unwrap().len(), 10);
        small.discard();
        assert!(!small.path.exists());
    }

    #[test]
    fn prune_keeps_the_folder_bounded() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(d.path().join(format!("{i}.out")), vec![0u8; 100]).unwrap();
        }
        std::fs::write(d.path().join("other.txt"), vec![0u8; 1000]).unwrap();
        prune(d.path(), 250);
        let left = std::fs::read_dir(d.path()).unwrap().count();
        assert_eq!(left, 3, "two .out files of 100 bytes and the other file");
    }
}
