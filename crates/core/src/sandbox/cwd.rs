//! Where the caller's working directory is never writable by a tool, whatever else allows it: a place whose
//! files the user's shell or programs run or trust (a folder on `PATH`, or above one; a dot-folder of the home
//! folder, `~/.local/bin`, `~/.config`, `~/.bashrc.d`; a system prefix).

use awt_sys::confine::rules;
use std::path::{Path, PathBuf};

/// System prefixes: programs, libraries and configuration of the machine.
const SYSTEM: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/boot", "/snap", "/var/lib",
    "/proc", "/sys", "/dev", "/run",
];

/// The canonical folders on `path` (a `PATH` value); relative entries (`.`, empty) are left out.
fn path_dirs(path: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    path.map(|p| {
        std::env::split_paths(p)
            .filter(|d| d.is_absolute())
            .map(|d| rules::canonical(&d).unwrap_or(d))
            .collect()
    })
    .unwrap_or_default()
}

/// Why `cwd` (canonical) must not be written by a tool, if it must not.
pub(super) fn refused(cwd: &Path, home: Option<&Path>, path: Option<&std::ffi::OsStr>) -> Option<String> {
    if let Some(s) = SYSTEM.iter().map(Path::new).find(|s| cwd.starts_with(s)) {
        return Some(format!("it is inside the system prefix {}", s.display()));
    }
    if let Some(h) = home {
        if let Ok(rest) = cwd.strip_prefix(h) {
            if rest
                .components()
                .next()
                .is_some_and(|c| c.as_os_str().as_encoded_bytes().starts_with(b"."))
            {
                return Some(format!("it is inside a dot-folder of the home folder {}", h.display()));
            }
        }
    }
    path_dirs(path)
        .into_iter()
        .find(|d| d.starts_with(cwd) || cwd.starts_with(d))
        .map(|d| format!("the folder {} on PATH is it, or above or below it", d.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_folders_home_dot_folders_and_system_prefixes_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let home = rules::canonical(t.path()).unwrap();
        let bin = home.join(".local/bin");
        let proj = home.join("proj");
        let tools = home.join("tools/bin");
        for d in [&bin, &proj, &tools] {
            std::fs::create_dir_all(d).unwrap();
        }
        let path = std::env::join_paths([tools.as_path(), Path::new("/usr/bin"), Path::new(".")]).unwrap();
        let r = |p: &Path| refused(p, Some(&home), Some(&path));
        assert!(r(&bin).is_some());
        assert!(r(&home.join(".config")).is_some());
        assert!(r(&tools).is_some());
        assert!(r(&home.join("tools")).is_some(), "above a PATH folder");
        assert!(r(Path::new("/usr/local/bin")).is_some());
        assert!(r(Path::new("/etc")).is_some());
        assert_eq!(r(&proj), None);
    }
}
