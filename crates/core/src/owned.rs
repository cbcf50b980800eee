//! Folders and files the runner executes or trusts from disk (the cache dir, the extracted Python shim) must be
//! its own: owned by the user it runs as and writable by nobody else. Another user's copy, or one a group could
//! change, is refused with an error that names it and says how to fix it.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Why `m` (of `path`, a `what`) is not the runner's own, if it is not.
fn refusal(path: &Path, m: &std::fs::Metadata, what: &str) -> Option<io::Error> {
    let me = euid();
    let why = if m.uid() != me {
        format!("it is owned by uid {}, not by this user (uid {me})", m.uid())
    } else if m.mode() & 0o022 != 0 {
        format!(
            "it is writable by {} (mode {:o})",
            if m.mode() & 0o002 != 0 { "others" } else { "its group" },
            m.mode() & 0o7777
        )
    } else {
        return None;
    };
    Some(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "refusing the {what} {}: {why}; what the runner runs from it could have been changed by someone else \
             (use a folder of your own, e.g. `chmod go-w` it, or set $ANIMAWORKS_TOOL_CACHE_DIR)",
            path.display()
        ),
    ))
}

/// `dir`, created (mode 0700, parents as needed) when missing; an error when it exists and is not this user's
/// own or is writable by group or others.
pub fn dir(dir: &Path, what: &str) -> io::Result<()> {
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
            std::fs::metadata(dir)?
        }
        Err(e) => return Err(e),
    };
    if !m.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the {what} {} is not a folder", dir.display()),
        ));
    }
    refusal(dir, &m, what).map_or(Ok(()), Err)
}

/// `dir` exists as this user's own folder, writable by nobody else (`false`: it does not exist).
pub fn existing_dir(dir: &Path, what: &str) -> io::Result<bool> {
    let m = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if let Some(e) = refusal(dir, &m, what) {
        return Err(e);
    }
    Ok(m.is_dir())
}

/// `path` exists as this user's own regular file (not a link), writable by nobody else, of `contents`.
pub fn file_is(path: &Path, contents: &[u8], what: &str) -> io::Result<bool> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if let Some(e) = refusal(path, &m, what) {
        return Err(e);
    }
    if !m.file_type().is_file() || m.len() != contents.len() as u64 {
        return Ok(false);
    }
    Ok(std::fs::read(path)? == contents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_folder_others_may_write_is_refused_and_a_new_one_is_private() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a").join("cache");
        dir(&d, "cache dir").unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = dir(&d, "cache dir").unwrap_err().to_string();
        assert!(
            e.contains("writable by others") && e.contains(&d.display().to_string()),
            "{e}"
        );
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(dir(&d, "cache dir").unwrap_err().to_string().contains("its group"));
        let f = d.join("f");
        std::fs::write(&f, b"abc").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(file_is(&f, b"abc", "file").unwrap());
        assert!(!file_is(&f, b"abd", "file").unwrap());
        assert!(!file_is(&d.join("nope"), b"abc", "file").unwrap());
    }
}
