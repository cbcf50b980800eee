//! Where things are: the three tier folders, the data dir, the anima dir, the cache.
//!
//! Precedence for each, highest first:
//! 1. the command-line flag (`--core-dir`, `--data-dir`, `--anima-dir`);
//! 2. the environment (`ANIMAWORKS_CORE_TOOLS`, colon-separated; `ANIMAWORKS_DATA_DIR`; `ANIMAWORKS_ANIMA_DIR`);
//! 3. the default: data dir `~/.animaworks`; core tools `<data dir>/core_tools`; no anima.

use crate::policy::Tier;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The folder of an anima's task folder (`state/background_tasks/`) that holds unmasked arguments (`<id>.args`),
/// mode 0700; the sandbox hides it from every confined tool, the anima's own included.
pub const TASKS_PRIVATE_DIR: &str = ".private";

/// Overrides given on the command line (or by a library caller).
#[derive(Debug, Clone, Default)]
pub struct DirOptions {
    pub core_dirs: Vec<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub anima_dir: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
    pub python: Option<OsString>,
}

/// The resolved locations for one runner invocation.
#[derive(Debug, Clone)]
pub struct Dirs {
    pub core: Vec<PathBuf>,
    pub data: PathBuf,
    pub anima: Option<PathBuf>,
    pub cache: PathBuf,
    /// The interpreter for `.py` tools: `--python`, else `$ANIMAWORKS_PYTHON`, else `python3`.
    pub python: OsString,
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(|v| expand_home(Path::new(&v)))
}

/// `~` and `~/x` expand to the home directory, as AnimaWorks' `expanduser` does; a relative path is made
/// absolute (tools run in the anima's directory, where a relative path would mean something else).
pub fn expand_home(p: &Path) -> PathBuf {
    let s = p.to_string_lossy();
    if s == "~" || s.starts_with("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(s.trim_start_matches('~').trim_start_matches('/'));
        }
    }
    if p.is_relative() {
        if let Ok(cwd) = std::env::current_dir() {
            return cwd.join(p);
        }
    }
    p.to_path_buf()
}

impl Dirs {
    pub fn resolve(opts: &DirOptions) -> Dirs {
        let data = opts
            .data_dir
            .as_deref()
            .map(expand_home)
            .or_else(|| env_path("ANIMAWORKS_DATA_DIR"))
            .unwrap_or_else(|| expand_home(Path::new("~/.animaworks")));
        let core = if !opts.core_dirs.is_empty() {
            opts.core_dirs.iter().map(|p| expand_home(p)).collect()
        } else if let Some(v) = std::env::var_os("ANIMAWORKS_CORE_TOOLS") {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .map(|p| expand_home(&p))
                .collect()
        } else {
            vec![data.join("core_tools")]
        };
        let anima = opts
            .anima_dir
            .as_deref()
            .map(expand_home)
            .or_else(|| env_path("ANIMAWORKS_ANIMA_DIR"));
        let cache = opts
            .cache_dir
            .as_deref()
            .map(expand_home)
            .or_else(|| env_path("ANIMAWORKS_TOOL_CACHE_DIR"))
            .unwrap_or_else(|| data.join("cache").join("animaworks-tool"));
        let python = opts
            .python
            .clone()
            .or_else(|| std::env::var_os("ANIMAWORKS_PYTHON").filter(|v| !v.is_empty()))
            .unwrap_or_else(|| "python3".into());
        Dirs {
            core,
            data,
            anima,
            cache,
            python,
        }
    }

    /// The anima's name is its folder's base name.
    pub fn anima_name(&self) -> Option<String> {
        self.anima
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
    }

    pub fn common_dir(&self) -> PathBuf {
        self.data.join("common_tools")
    }

    pub fn personal_dir(&self) -> Option<PathBuf> {
        self.anima.as_ref().map(|a| a.join("tools"))
    }

    /// Every tier folder in precedence order of scanning: core folders, common, personal.
    pub fn tier_dirs(&self) -> Vec<(Tier, PathBuf)> {
        let mut v: Vec<(Tier, PathBuf)> = self.core.iter().map(|p| (Tier::Core, p.clone())).collect();
        v.push((Tier::Common, self.common_dir()));
        if let Some(p) = self.personal_dir() {
            v.push((Tier::Personal, p));
        }
        v
    }

    /// Where results past the output cap are written.
    pub fn outputs_dir(&self) -> PathBuf {
        self.data.join("outputs")
    }
}
