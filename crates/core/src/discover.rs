//! Finding tools: the three tiers (core, common, personal), shadowing, and how each file is started.
//!
//! Rules, in order:
//! 1. A tool is a file in a tier folder (not recursive); its name is the file stem. Names starting with `_` or
//!    `.` are skipped, and so are data files (`.md`, `.json`, …) and folders.
//! 2. Core folders are scanned first; within core, the first folder that holds a name wins.
//! 3. A common or personal tool that takes a core tool's name is skipped with a warning.
//! 4. A personal tool wins over a common one of the same name.
//! 5. Names the runner reserves for its commands are refused.
//!
//! Scanning reads folders only; no tool is started here. Manifests come from [`crate::cache`].

use crate::dirs::Dirs;
use crate::names::found_tool_name_problem;
use crate::tier::Tier;
use serde::Serialize;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// How a tool file is started (protocol.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Launch {
    /// `.py`: through the built-in shim with the configured Python.
    Python,
    /// `.js`, `.mjs`, `.cjs`: `node FILE`.
    Node,
    /// `.sh`, `.bash`: `bash FILE`.
    Bash,
    /// Anything else: the file itself, which must be executable.
    Exec,
    /// A declared MCP server ([`crate::mcp_servers`]): the runner's own bridge, which starts the server.
    Mcp,
}

impl Launch {
    pub fn for_path(path: &Path) -> Launch {
        match path.extension().and_then(|e| e.to_str()) {
            Some("py") => Launch::Python,
            Some("js" | "mjs" | "cjs") => Launch::Node,
            Some("sh" | "bash") => Launch::Bash,
            _ => Launch::Exec,
        }
    }
}

/// Extensions that mark a file as data next to tools, never a tool.
const DATA_EXTENSIONS: &[&str] = &[
    "md", "txt", "json", "jsonl", "yaml", "yml", "toml", "lock", "pyc", "pyo", "log", "cfg", "ini", "bak", "orig",
    "swp", "tmp", "csv", "rst",
];

/// One tool file found in a tier.
#[derive(Debug, Clone, Serialize)]
pub struct ToolFile {
    pub name: String,
    pub tier: Tier,
    /// The path as found in the tier folder (a symlink stays a symlink; it is the tier that counts).
    pub path: PathBuf,
    pub launch: Launch,
    /// For [`Launch::Mcp`]: the server's declaration (`path` is the file that declares it).
    #[serde(skip)]
    pub mcp: Option<std::sync::Arc<crate::mcp_servers::Declared>>,
    /// What `stat` said of the file when the tier was scanned; a listing checks the schema cache against it
    /// rather than stat the file a second time ([`crate::cache::FileKey::as_scanned`]).
    #[serde(skip)]
    pub stat: Option<FileStat>,
}

/// A file's identity as `stat` gives it (following symlinks): what the schema cache compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub ino: u64,
    pub dev: u64,
}

impl FileStat {
    pub fn of(m: &std::fs::Metadata) -> FileStat {
        use std::os::unix::fs::MetadataExt;
        FileStat {
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
            ino: m.ino(),
            dev: m.dev(),
        }
    }
}

/// Something wrong with a file in a tier; `list` and `doctor` show these.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    pub tool: String,
    pub tier: Tier,
    pub path: PathBuf,
    /// `shadowed`, `shadows_core`, `duplicate`, `not_executable`, `invalid_name`, `unreadable`, `schemas_failed`,
    /// `profile_unreadable`, `schema_name_refused`, `schema_name_taken`, `not_a_file`.
    pub kind: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
}

/// Every tool file that is visible, by name, and every problem met on the way.
#[derive(Debug, Default)]
pub struct Scan {
    pub tools: BTreeMap<String, ToolFile>,
    pub problems: Vec<Problem>,
}

/// Scan every tier folder of `dirs`.
pub fn scan(dirs: &Dirs) -> Scan {
    scan_only(dirs, None)
}

/// The same rules, looking only at files whose stem is `name`: what a call needs (it reads each folder's names
/// but looks at no other file, so a call costs the same with 5 tools or 500).
pub fn scan_for(dirs: &Dirs, name: &str) -> Scan {
    scan_only(dirs, Some(name))
}

fn scan_only(dirs: &Dirs, only: Option<&str>) -> Scan {
    let mut scan = Scan::default();
    let folders = dirs.tier_dirs();
    for tier in [Tier::Core, Tier::Common, Tier::Personal] {
        for (_, dir) in folders.iter().filter(|(t, _)| *t == tier) {
            for file in scan_dir(tier, dir, &mut scan.problems, only) {
                admit(&mut scan, file);
            }
        }
        // A tier's servers come after its folders: a file of the same name there wins.
        for file in mcp_servers(dirs, tier, &mut scan.problems, only) {
            admit(&mut scan, file);
        }
    }
    scan
}

/// The MCP servers declared for `tier`, as tools ([`crate::mcp_servers`]).
fn mcp_servers(dirs: &Dirs, tier: Tier, problems: &mut Vec<Problem>, only: Option<&str>) -> Vec<ToolFile> {
    if tier == Tier::Personal && dirs.anima.is_none() {
        return Vec::new();
    }
    let (found, bad) = crate::mcp_servers::declared(&dirs.data, dirs.anima.as_deref(), tier);
    for b in bad.into_iter().filter(|b| only.is_none_or(|n| n == b.name)) {
        problems.push(Problem {
            tool: b.name,
            tier: b.tier,
            path: b.file,
            kind: "mcp_server_invalid",
            message: b.message,
            stderr_tail: None,
        });
    }
    let mut out = Vec::new();
    for d in found {
        if only.is_some_and(|n| n != d.name) {
            continue;
        }
        if let Some(p) = found_tool_name_problem(&d.name) {
            problems.push(Problem {
                tool: d.name.clone(),
                tier,
                path: d.file.clone(),
                kind: "invalid_name",
                message: format!("MCP server '{}' in {}: {p}; rename it", d.name, d.file.display()),
                stderr_tail: None,
            });
            continue;
        }
        out.push(ToolFile {
            name: d.name.clone(),
            tier,
            path: d.file.clone(),
            launch: Launch::Mcp,
            mcp: Some(std::sync::Arc::new(d)),
            stat: None,
        });
    }
    out
}

impl Problem {
    fn of(file: ToolFile, kind: &'static str, message: String) -> Problem {
        Problem {
            tool: file.name,
            tier: file.tier,
            path: file.path,
            kind,
            message,
            stderr_tail: None,
        }
    }
}

fn admit(scan: &mut Scan, file: ToolFile) {
    let Some(existing) = scan.tools.get(&file.name) else {
        scan.tools.insert(file.name.clone(), file);
        return;
    };
    let problem = match (existing.tier, file.tier) {
        (Tier::Core, Tier::Core) => {
            let msg = format!(
                "core tool '{}' at {} is overshadowed by the core tool at {} (an earlier core folder wins)",
                file.name,
                file.path.display(),
                existing.path.display()
            );
            Problem::of(file, "shadowed", msg)
        }
        (Tier::Core, t) => {
            let who = if t == Tier::Common { "Common" } else { "Personal" };
            let msg = format!(
                "{who} tool '{}' shadows core tool — skipped (rename {})",
                file.name,
                file.path.display()
            );
            Problem::of(file, "shadows_core", msg)
        }
        (Tier::Common, Tier::Personal) => {
            let hidden = scan.tools.insert(file.name.clone(), file).expect("present");
            let msg = format!(
                "common tool '{}' at {} is overshadowed by the personal tool of the same name",
                hidden.name,
                hidden.path.display()
            );
            Problem::of(hidden, "shadowed", msg)
        }
        _ => {
            let msg = format!(
                "{} tool '{}' at {} is hidden by {} (two tools of one name)",
                file.tier,
                file.name,
                file.path.display(),
                existing.path.display()
            );
            Problem::of(file, "shadowed", msg)
        }
    };
    scan.problems.push(problem);
}

/// What the scan needs of a file's `stat` (symlinks followed).
struct Seen {
    is_dir: bool,
    is_file: bool,
    mode: u32,
    stat: FileStat,
}

/// `stat` of `name` in the tier folder `dir` (open), else of `path`: the same `statx` that
/// [`std::fs::metadata`] makes, so the same identity as [`crate::cache::FileKey::of`], but a path walk of one
/// name from the folder (from `/`, the walk was a tenth of a warm listing of 10,000 tools).
fn stat_in(dir: Option<&std::fs::File>, path: &Path, name: &std::ffi::OsStr) -> std::io::Result<Seen> {
    let x = dir.map(|d| {
        rustix::fs::statx(
            d,
            name,
            rustix::fs::AtFlags::empty(),
            rustix::fs::StatxFlags::BASIC_STATS,
        )
    });
    // Without `statx` (a kernel before 4.11, a container's filter that refuses it) std falls back to `stat`: so
    // does this.
    let x = match x {
        Some(Err(e)) if e == rustix::io::Errno::NOSYS || e == rustix::io::Errno::PERM => None,
        x => x,
    };
    let Some(x) = x else {
        let m = std::fs::metadata(path)?;
        return Ok(Seen {
            is_dir: m.is_dir(),
            is_file: m.is_file(),
            mode: m.permissions().mode(),
            stat: FileStat::of(&m),
        });
    };
    use rustix::fs::FileType;
    let x = x?;
    let mode = u32::from(x.stx_mode);
    let kind = FileType::from_raw_mode(mode);
    let ns = |t: rustix::fs::StatxTimestamp| t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128;
    Ok(Seen {
        is_dir: kind == FileType::Directory,
        is_file: kind == FileType::RegularFile,
        mode,
        stat: FileStat {
            size: x.stx_size,
            mtime_ns: ns(x.stx_mtime),
            ctime_ns: ns(x.stx_ctime),
            ino: x.stx_ino,
            dev: libc::makedev(x.stx_dev_major, x.stx_dev_minor),
        },
    })
}

fn scan_dir(tier: Tier, dir: &Path, problems: &mut Vec<Problem>, only: Option<&str>) -> Vec<ToolFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let dir_fd = crate::fsread::open_dir(dir).ok();
    let mut names: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
    names.sort();
    let mut out: Vec<ToolFile> = Vec::new();
    // Name → index in `out`: the duplicate check is one lookup, not a scan (a scan made listing quadratic).
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for os_name in names {
        let file_name = os_name.to_string_lossy().into_owned();
        if file_name.starts_with('.') || file_name.starts_with('_') {
            continue;
        }
        let path = dir.join(&os_name);
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if DATA_EXTENSIONS.contains(&ext) {
            continue;
        }
        let stem = match file_name.rsplit_once('.') {
            Some((s, _)) if !s.is_empty() => s.to_owned(),
            _ => file_name.clone(),
        };
        if only.is_some_and(|n| n != stem) {
            continue;
        }
        let mut problem = |kind: &'static str, message: String| {
            problems.push(Problem {
                tool: stem.clone(),
                tier,
                path: path.clone(),
                kind,
                message,
                stderr_tail: None,
            })
        };
        let meta = match stat_in(dir_fd.as_ref(), &path, &os_name) {
            Ok(m) => m,
            Err(e) => {
                problem(
                    "unreadable",
                    format!("{}: cannot read ({e}); a dangling symlink?", path.display()),
                );
                continue;
            }
        };
        if meta.is_dir {
            continue;
        }
        if !meta.is_file {
            // Why: a FIFO would block the interpreter that opens it (a probe hanging to its timeout), a device
            // never ends; neither is a program.
            problem(
                "not_a_file",
                format!(
                    "{}: not a regular file (a FIFO, device or socket); not a tool",
                    path.display()
                ),
            );
            continue;
        }
        if let Some(p) = found_tool_name_problem(&stem) {
            problem("invalid_name", format!("{}: {p}; rename the file", path.display()));
            continue;
        }
        let launch = Launch::for_path(&path);
        if launch == Launch::Exec && meta.mode & 0o111 == 0 {
            problem(
                "not_executable",
                format!(
                    "{}: not executable; run `chmod +x {}` (or give it a .py/.js/.sh extension)",
                    path.display(),
                    path.display()
                ),
            );
            continue;
        }
        if let Some(first) = seen.get(&stem).map(|&i| &out[i]) {
            problem(
                "duplicate",
                format!(
                    "{}: another file in this folder, {}, is already tool '{stem}'",
                    path.display(),
                    first.path.display()
                ),
            );
            continue;
        }
        seen.insert(stem.clone(), out.len());
        out.push(ToolFile {
            name: stem,
            tier,
            path,
            launch,
            mcp: None,
            stat: Some(meta.stat),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan's `stat` is what the schema cache's entries are checked against, and those are written with
    /// [`FileStat::of`] of a fresh `stat`: the two must agree to the nanosecond, or every listing would probe again.
    #[test]
    fn the_scans_stat_is_the_files_identity() {
        let d = tempfile::tempdir().unwrap();
        let tool = d.path().join("t.sh");
        std::fs::write(&tool, "echo\n").unwrap();
        std::os::unix::fs::symlink(&tool, d.path().join("l.sh")).unwrap();
        let dir = crate::fsread::open_dir(d.path()).unwrap();
        for name in ["t.sh", "l.sh"] {
            let path = d.path().join(name);
            let seen = stat_in(Some(&dir), &path, name.as_ref()).unwrap();
            assert_eq!(seen.stat, FileStat::of(&std::fs::metadata(&path).unwrap()), "{name}");
            assert!(seen.is_file && !seen.is_dir, "{name}");
            assert_eq!(seen.mode, std::fs::metadata(&path).unwrap().permissions().mode());
            let fallback = stat_in(None, &path, name.as_ref()).unwrap();
            assert_eq!(seen.stat, fallback.stat);
        }
        assert!(stat_in(Some(&dir), &d.path().join("none"), "none".as_ref()).is_err());
    }
}
