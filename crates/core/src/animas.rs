//! The animas of this deployment: the folders that hold anima dirs. One notion, used by the sandbox (each folder
//! hidden whole but for the caller's own anima, [`crate::sandbox`]), by the per-anima key check of the credential
//! chain and its broker ([`crate::policy::credentials`]), and by the task workers (a worker's `--animas-dir` is the
//! folder of the anima dirs it runs tasks in, and so of the calls it starts).

use std::path::{Path, PathBuf};

/// The folders of anima dirs, canonical where they exist: `<data dir>/animas`, and the folder the anima dir is in
/// (`--animas-dir` of a worker, or wherever `--anima-dir` names it), unless that folder is `/` or holds the data
/// dir, the home folder, the cache or a core tier folder, or lies inside the data dir: hiding it would hide the
/// runner's own places, so such a folder is not one of anima dirs (docs/sandbox.md).
pub fn folders(dirs: &crate::Dirs) -> Vec<PathBuf> {
    let home = crate::env_vars::HOME.get_os().map(PathBuf::from);
    of(
        &dirs.data,
        dirs.anima.as_deref(),
        home.as_deref(),
        &dirs.cache,
        &dirs.core,
    )
}

fn canon(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn of(data: &Path, anima: Option<&Path>, home: Option<&Path>, cache: &Path, core: &[PathBuf]) -> Vec<PathBuf> {
    let data = canon(data);
    let mut out = vec![canon(&data.join("animas"))];
    let Some(parent) = anima.map(canon).and_then(|a| a.parent().map(Path::to_path_buf)) else {
        return out;
    };
    let holds = |p: &Path| canon(p).starts_with(&parent);
    let wide = parent == Path::new("/")
        || holds(&data)
        || parent.starts_with(&data)
        || home.is_some_and(holds)
        || holds(cache)
        || core.iter().any(|c| holds(c));
    if !wide && !out.contains(&parent) {
        out.push(parent);
    }
    out
}

/// Is `name` another anima of the deployment than `own`: a folder `name` in one of `folders`?
pub fn is_other(folders: &[PathBuf], own: Option<&str>, name: &str) -> bool {
    if name.is_empty() || Some(name) == own || name.contains(['/', '\0']) || name.starts_with('.') {
        return false;
    }
    folders.iter().any(|f| f.join(name).is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_of_the_anima_dir_is_one_unless_it_holds_the_runners_places() {
        let t = tempfile::tempdir().unwrap();
        let r = canon(t.path());
        let data = r.join("data");
        for d in ["data/animas", "team/alice", "data/shared/x", "home/alice"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        let cache = data.join("cache");
        let home = r.join("home");
        let f = |anima: &str| of(&data, Some(&r.join(anima)), Some(&home), &cache, &[]);
        assert_eq!(f("team/alice"), [data.join("animas"), r.join("team")]);
        assert_eq!(f("data/animas/alice"), [data.join("animas")]);
        assert_eq!(f("data/shared/x"), [data.join("animas")], "inside the data dir");
        assert_eq!(f("alice"), [data.join("animas")], "beside the data dir");
        assert_eq!(f("home/alice"), [data.join("animas")], "the home folder");
        assert!(is_other(&f("team/alice"), Some("alice"), "bob") == r.join("team/bob").is_dir());
        std::fs::create_dir_all(r.join("team/bob")).unwrap();
        assert!(is_other(&f("team/alice"), Some("alice"), "bob"));
        assert!(!is_other(&f("team/alice"), Some("alice"), "alice"));
        assert!(!is_other(&f("team/alice"), Some("alice"), ".."));
    }
}
