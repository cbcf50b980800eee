//! From grants to Landlock rules: placeholders expanded, paths made canonical, and the runner's own state cut
//! out of every grant that would contain it.
//!
//! Landlock only allows (a rule grants its rights to a whole tree). To grant a folder *except* some entries
//! below it, the folder is split: each entry beside the protected one is granted on its own, recursively
//! along the path to the protected entry, and the split folder itself gets only `READ_DIR` on a read grant
//! (so listing it works) and nothing on a write grant. The price: nothing new can be created directly in a
//! split folder (e.g. the top level of a folder with protected entries). Symbolic links met while splitting are
//! skipped, never followed.

use super::landlock::{self, Builder};
use std::collections::BTreeSet;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Paths a grant must never reach.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    /// Exact canonical paths.
    pub paths: BTreeSet<PathBuf>,
    /// Folders of peers' private folders, and the one entry in them that is allowed (the caller's own): every
    /// other entry is protected, and the folders themselves are never listed (the entries' names are private too).
    pub peers: Option<(Vec<PathBuf>, Option<PathBuf>)>,
}

impl Protected {
    /// Is `p` (canonical) protected itself, or inside something protected?
    pub fn covers(&self, p: &Path) -> bool {
        if self.paths.iter().any(|q| under(p, q)) {
            return true;
        }
        match &self.peers {
            Some((dirs, own)) => {
                dirs.iter().any(|dir| under(p, dir) && p != dir) && !own.as_ref().is_some_and(|o| under(p, o))
            }
            None => false,
        }
    }

    /// Does the tree at `p` hold something protected (below it, not `p` itself)?
    fn inside(&self, p: &Path) -> bool {
        self.paths.iter().any(|q| under(q, p) && q != p) || self.peers.as_ref().is_some_and(|(dirs, _)| dirs.iter().any(|dir| under(dir, p)))
    }
}

/// `p.starts_with(q)`, on bytes when both are clean (no `.` or `..` component, no doubled or trailing `/`):
/// `Path::starts_with` compares component by component, and the ruleset asks this a few thousand times per
/// sandboxed call. A protected path that does not exist keeps the spelling it was given (`$HOME`, an
/// environment variable), so an unclean one takes the slow way.
fn under(p: &Path, q: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (pb, qb) = (p.as_os_str().as_bytes(), q.as_os_str().as_bytes());
    if pb.starts_with(qb) && (pb.len() == qb.len() || qb.ends_with(b"/") || pb[qb.len()] == b'/') {
        return true;
    }
    let clean = |b: &[u8]| {
        !b.windows(2).any(|w| w == b"//")
            && !b.split(|c| *c == b'/').any(|c| c == b"." || c == b"..")
            && (b.len() <= 1 || !b.ends_with(b"/"))
    };
    if clean(pb) && clean(qb) {
        false
    } else {
        p.starts_with(q)
    }
}

thread_local! {
    static MEMO: std::cell::RefCell<Option<std::collections::HashMap<PathBuf, PathBuf>>> =
        const { std::cell::RefCell::new(None) };
}

/// While it lives, [`canonical`] on this thread looks each existing path up once: one plan asks for the same
/// folders (e.g. the caller's own folders, the call's temp dir) up to five times. Only found paths are kept, so a
/// path made later in the same plan is still found.
pub struct Memo(bool);

pub fn memo() -> Memo {
    Memo(MEMO.with(|m| {
        let mut m = m.borrow_mut();
        m.is_none() && {
            *m = Some(Default::default());
            true
        }
    }))
}

impl Drop for Memo {
    fn drop(&mut self) {
        if self.0 {
            MEMO.with(|m| *m.borrow_mut() = None);
        }
    }
}

/// Canonical form of `p` when it exists: what `realpath(3)` answers. An absolute path with no symbolic link in it
/// (one `openat2` with `RESOLVE_NO_SYMLINKS` says so) is its own canonical form once `.` and `..` are resolved
/// lexically; anything else goes to realpath. Why: realpath reads the link of every component, so each of a
/// sandboxed call's many paths cost a `readlink` per component (bench/README.md).
pub fn canonical(p: &Path) -> Option<PathBuf> {
    if let Some(hit) = MEMO.with(|m| m.borrow().as_ref().and_then(|m| m.get(p).cloned())) {
        return Some(hit);
    }
    let found = canonical_uncached(p)?;
    MEMO.with(|m| {
        if let Some(m) = m.borrow_mut().as_mut() {
            m.insert(p.to_path_buf(), found.clone());
        }
    });
    Some(found)
}

fn canonical_uncached(p: &Path) -> Option<PathBuf> {
    if p.is_absolute() {
        use rustix::io::Errno;
        match open_no_symlinks(p) {
            Ok(_) => return Some(lexical(p)),
            // What realpath would refuse too, without asking it.
            Err(Errno::NOENT | Errno::NOTDIR | Errno::ACCESS) => return None,
            Err(_) => {}
        }
    }
    std::fs::canonicalize(p).ok()
}

/// `p` (absolute, free of symbolic links) with `.` and `..` resolved.
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

pub use super::landlock::open_no_symlinks;

/// Lexically clean: absolute, no `..`.
pub fn is_clean_absolute(p: &Path) -> bool {
    p.is_absolute() && !p.components().any(|c| matches!(c, Component::ParentDir))
}

/// Add `access` on `root` minus what `protected` covers. Returns how many rules were added.
pub fn grant(b: &mut Builder, root: &Path, access: u64, protected: &Protected) -> io::Result<usize> {
    grant_at(b, root, access, protected, 0)
}

/// Add `access` on a fixed system path (`/usr`, `/etc/hosts`, …) minus what `protected` covers, without
/// canonicalizing it first: when one `openat2(RESOLVE_NO_SYMLINKS)` of the path as spelled succeeds, that
/// spelling (clean, absolute) is its canonical form and the descriptor is the rule's. Otherwise (a symbolic link
/// on the way, a protected path in or above it, Linux < 5.6) the way of [`grant`], on its canonical form. Why:
/// each sandboxed call grants dozens of these, and canonicalizing them first opened each twice.
pub fn grant_fixed(b: &mut Builder, raw: &Path, access: u64, protected: &Protected) -> io::Result<usize> {
    let general = |b: &mut Builder| match canonical(raw) {
        Some(p) => grant(b, &p, access, protected),
        None => Ok(0),
    };
    if !is_clean_absolute(raw) || protected.covers(raw) || protected.inside(raw) {
        return general(b);
    }
    match open_no_symlinks(raw) {
        Ok(fd) => b.allow_fd(&fd, access).map(|()| 1),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::ACCESS) => Ok(0),
        // A link on the way (`/bin` on merged-/usr systems): what `canonical` would try first just failed, so
        // straight to realpath.
        Err(_) => match std::fs::canonicalize(raw) {
            Ok(p) => grant(b, &p, access, protected),
            Err(_) => Ok(0),
        },
    }
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
    // Listing a split folder is fine on a read grant, unless it lies above peers' folders (their file names are
    // theirs).
    let above_peers = protected
        .peers
        .as_ref()
        .is_some_and(|(dirs, _)| dirs.iter().any(|dir| dir.starts_with(root)));
    if access & landlock::READ_DIR != 0 && !above_peers {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_is_starts_with_on_canonical_paths() {
        for (p, q) in [
            ("/a/b", "/a"),
            ("/a/b", "/a/b"),
            ("/a/bc", "/a/b"),
            ("/a", "/a/b"),
            ("/a/b", "/"),
            ("/", "/"),
            ("/ab", "/a"),
            ("/a//b/c", "/a/b"),
            ("/a/b/c", "/a/./b/"),
            ("/a/b", "a"),
        ] {
            assert_eq!(
                under(Path::new(p), Path::new(q)),
                Path::new(p).starts_with(q),
                "{p} {q}"
            );
        }
    }

    /// `grant_fixed` grants what `grant` grants on the canonical form: the same rules for a plain path, one with a
    /// symbolic link on its way, a missing one, one with a protected path inside (split the same way).
    #[test]
    fn grant_fixed_is_grant_of_the_canonical_form() {
        let abi = crate::confine::kernel::support().landlock_abi;
        if abi < 1 {
            crate::skipped!("no Landlock here");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(real.join("usr/lib")).unwrap();
        std::fs::create_dir_all(real.join("etc/ssl/private")).unwrap();
        std::fs::write(real.join("etc/ssl/cert.pem"), b"").unwrap();
        std::os::unix::fs::symlink("usr/lib", real.join("lib")).unwrap();
        let protected = Protected {
            paths: [real.join("etc/ssl/private")].into_iter().collect(),
            peers: None,
        };
        let handled = landlock::Handled {
            fs: landlock::handled_fs(abi),
            tcp: false,
            scope: false,
        };
        for p in [
            "usr",
            "lib",
            "lib/x",
            "nope",
            "etc/ssl",
            "etc/ssl/private",
            "etc/ssl/cert.pem",
        ] {
            let raw = real.join(p);
            let mut a = Builder::new(&handled).unwrap();
            let mut b = Builder::new(&handled).unwrap();
            let fixed = grant_fixed(&mut a, &raw, landlock::READ, &protected).unwrap();
            let general = canonical(&raw).map_or(0, |c| grant(&mut b, &c, landlock::READ, &protected).unwrap());
            assert_eq!(fixed, general, "{p}");
        }
    }

    #[test]
    fn canonical_is_realpath() {
        let t = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(real.join("a/b")).unwrap();
        std::fs::write(real.join("a/b/f"), b"").unwrap();
        std::os::unix::fs::symlink(real.join("a/b"), real.join("link")).unwrap();
        for p in [
            "a/b/f",
            "a/./b/../b/f",
            "link/f",
            "link/../b",
            "a/b/../../a",
            "nope",
            "a/b/f/x",
        ] {
            let q = real.join(p);
            assert_eq!(canonical(&q), std::fs::canonicalize(&q).ok(), "{p}");
        }
    }
}
