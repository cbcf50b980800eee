//! From grants to Landlock rules: placeholders expanded, paths made canonical, and the runner's own state cut
//! out of every grant that would contain it.
//!
//! Landlock only allows (a rule grants its rights to a whole tree). To grant a folder *except* some entries
//! below it, the folder is split: each entry beside the protected one is granted on its own, recursively
//! along the path to the protected entry, and the split folder itself gets only `READ_DIR` on a read grant
//! (so listing it works) and nothing on a write grant. The price: nothing new can be created directly in a
//! split folder (the anima dir's top level, its `state/`). Symbolic links met while splitting are skipped,
//! never followed.

use super::landlock::{self, Builder};
use std::collections::BTreeSet;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Paths a grant must never reach.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    /// Exact canonical paths.
    pub paths: BTreeSet<PathBuf>,
    /// A folder of per-anima folders (`<data dir>/animas`), and the one entry in it that is allowed.
    pub animas: Option<(PathBuf, Option<PathBuf>)>,
}

impl Protected {
    /// Is `p` (canonical) protected itself, or inside something protected?
    pub fn covers(&self, p: &Path) -> bool {
        if self.paths.iter().any(|q| p.starts_with(q)) {
            return true;
        }
        match &self.animas {
            Some((dir, own)) => p.starts_with(dir) && p != dir && !own.as_ref().is_some_and(|o| p.starts_with(o)),
            None => false,
        }
    }

    /// Does the tree at `p` hold something protected (below it, not `p` itself)?
    fn inside(&self, p: &Path) -> bool {
        self.paths.iter().any(|q| q.starts_with(p) && q != p)
            || self.animas.as_ref().is_some_and(|(dir, _)| dir.starts_with(p))
    }
}

/// Canonical form of `p` when it exists: what `realpath(3)` answers, from one open and one readlink of its
/// `/proc/self/fd` entry. Why not `std::fs::canonicalize`: realpath reads the link of every component, so a
/// sandboxed call's hundred paths cost ~450 `readlink`s, about a tenth of a millisecond and more (bench/README.md).
pub fn canonical(p: &Path) -> Option<PathBuf> {
    use rustix::fs::{Mode, OFlags};
    let fd = match rustix::fs::open(p, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()) {
        Ok(fd) => fd,
        // What realpath would refuse too, without asking it.
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::ACCESS) => return None,
        Err(_) => return std::fs::canonicalize(p).ok(),
    };
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    match rustix::fs::readlink(link.as_str(), Vec::new()) {
        // Not a path (no /proc, an unlinked file's " (deleted)", a pseudo-file): ask realpath.
        Ok(target) if target.as_bytes().starts_with(b"/") && !target.as_bytes().ends_with(b" (deleted)") => {
            use std::os::unix::ffi::OsStringExt;
            Some(PathBuf::from(std::ffi::OsString::from_vec(target.into_bytes())))
        }
        _ => std::fs::canonicalize(p).ok(),
    }
}

/// Lexically clean: absolute, no `..`.
pub fn is_clean_absolute(p: &Path) -> bool {
    p.is_absolute() && !p.components().any(|c| matches!(c, Component::ParentDir))
}

/// Add `access` on `root` minus what `protected` covers. Returns how many rules were added.
pub fn grant(b: &mut Builder, root: &Path, access: u64, protected: &Protected) -> io::Result<usize> {
    grant_at(b, root, access, protected, 0)
}

const MAX_DEPTH: usize = 16;
const MAX_ENTRIES: usize = 4096;

fn grant_at(b: &mut Builder, root: &Path, access: u64, protected: &Protected, depth: usize) -> io::Result<usize> {
    if protected.covers(root) {
        return Ok(0);
    }
    if !protected.inside(root) {
        return match b.allow_path(root, access) {
            Ok(()) => Ok(1),
            // Gone since it was listed, or swapped for a symbolic link: nothing granted.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT) | Some(libc::ELOOP) | Some(libc::ENOTDIR)
                ) =>
            {
                Ok(0)
            }
            Err(e) => Err(e),
        };
    }
    if depth >= MAX_DEPTH {
        return Ok(0);
    }
    let mut n = 0;
    // Listing a split folder is fine on a read grant, unless it lies above other animas' folders (their file
    // names are theirs).
    let above_animas = protected.animas.as_ref().is_some_and(|(dir, _)| dir.starts_with(root));
    if access & landlock::READ_DIR != 0 && !above_animas {
        b.allow_path(root, landlock::READ_DIR)?;
        n += 1;
    }
    let Ok(rd) = std::fs::read_dir(root) else {
        return Ok(n);
    };
    for entry in rd.take(MAX_ENTRIES).flatten() {
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_symlink() {
            continue;
        }
        n += grant_at(b, &entry.path(), access, protected, depth + 1)?;
    }
    Ok(n)
}
