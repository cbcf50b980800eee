//! The schema cache: `--schemas` runs once per version of a tool file, not once per call.
//!
//! One small JSON file per tool file, under `<cache dir>/schemas/<hash of the tier folder and the anima>/<file
//! name>.json` (a probe runs as its anima, so one anima's answer is never another's), holding the file's identity (size, mtime, ctime, inode, device, and for `.py` the interpreter) and what
//! `--schemas` gave. An entry is used only when the identity still matches, so a changed, added or removed tool is
//! noticed on the next invocation. Writes are atomic (temp file + rename): two runners writing at once each leave
//! a whole file, and a corrupt or foreign file is only a cache miss.
//!
//! A listing that probes many tools of one folder writes their entries into one file instead, the folder's
//! `pack` ([`store_many`]): one line per entry, its name, a tab, the entry's JSON. Why: 1,000 entry files made
//! 1,000 inodes, and on an ext4 without a journal each new inode scans past the ones freed in the last minute (a
//! removed cache, say): a third of a cold listing's CPU. An entry file of a tool is looked at before the pack
//! (a tool probed alone later writes its own), and either is used only when the identity matches.

use crate::dirs::Dirs;
use crate::discover::{FileStat, Launch, ToolFile};
use crate::manifest::Manifest;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// Bumped whenever the cached shape or the shim changes meaning.
const CACHE_FORMAT: u32 = 3;

/// The identity of a tool file version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileKey {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub ino: u64,
    pub dev: u64,
    pub interpreter: Option<String>,
    pub runner: String,
}

impl FileKey {
    /// The file's identity now (a `stat` of it).
    pub fn of(file: &ToolFile, dirs: &Dirs) -> std::io::Result<FileKey> {
        let m = std::fs::metadata(&file.path)?;
        Ok(FileKey::with(file, dirs, FileStat::of(&m)))
    }

    /// The identity the scan that found `file` saw (one `stat` of this invocation, as [`FileKey::of`] is), or a
    /// fresh one for a file that was not found by a scan.
    pub fn as_scanned(file: &ToolFile, dirs: &Dirs) -> std::io::Result<FileKey> {
        match file.stat {
            Some(s) => Ok(FileKey::with(file, dirs, s)),
            None => FileKey::of(file, dirs),
        }
    }

    fn with(file: &ToolFile, dirs: &Dirs, s: FileStat) -> FileKey {
        FileKey {
            size: s.size,
            mtime_ns: s.mtime_ns,
            ctime_ns: s.ctime_ns,
            ino: s.ino,
            dev: s.dev,
            interpreter: match &file.mcp {
                Some(decl) => Some(decl.digest()),
                None => (file.launch == Launch::Python).then(|| {
                    format!(
                        "{} shim {:016x}",
                        dirs.python.to_string_lossy(),
                        crate::pyshim::content_hash()
                    )
                }),
            },
            runner: format!("{}/{}", env!("CARGO_PKG_VERSION"), CACHE_FORMAT),
        }
    }
}

/// What `--schemas` gave for one file version.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Probed {
    Ok(Manifest),
    /// `--schemas` failed; the reason and the tail of its stderr.
    Failed {
        reason: String,
        stderr_tail: String,
        /// The tool could not be started at all (never cached: an interpreter may be installed any moment).
        #[serde(default)]
        spawn: bool,
        /// `--schemas` did not answer in time (never cached: it may be load on the machine; remembered a while).
        #[serde(default)]
        timed_out: bool,
    },
}

#[derive(Serialize, Deserialize)]
struct Entry {
    path: PathBuf,
    key: FileKey,
    probed: Probed,
}

fn fnv(s: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn entry_path(dirs: &Dirs, file: &ToolFile) -> PathBuf {
    entry_path_in(dirs, file, folder_hash(dirs, file))
}

/// The hash naming the entries' folder of `file`'s tier folder (its canonical path: a tier reached through a
/// symlink shares its entries) and of the anima it was probed for: a probe runs with its anima's folder and
/// grants, so what one anima's probe answered never decides another's listing or gate (a core or common tool
/// may answer each anima otherwise).
fn folder_hash(dirs: &Dirs, file: &ToolFile) -> u64 {
    let folder = file.path.parent().unwrap_or(Path::new("/"));
    let folder = awt_sys::confine::rules::canonical(folder).unwrap_or_else(|| folder.to_path_buf());
    let mut key = folder.into_os_string().into_encoded_bytes();
    if let Some(a) = &dirs.anima {
        key.push(0);
        key.extend_from_slice(a.as_os_str().as_encoded_bytes());
    }
    fnv(&key)
}

fn entry_path_in(dirs: &Dirs, file: &ToolFile, folder: u64) -> PathBuf {
    entries_dir(dirs, folder).join(entry_name(file))
}

/// The cache's folder of `--schemas` entries, one folder in it per tier folder.
pub const ENTRIES_DIR: &str = "schemas";

/// The file of a folder's entries written together ([`store_many`]).
const PACK: &str = "pack";

/// A listing with fewer misses than this writes an entry file for each.
pub const PACK_MIN: usize = 8;

/// A listing writes its pack this many entries at a time (and the rest at its end).
pub const PACK_BATCH: usize = 200;

fn entries_dir(dirs: &Dirs, folder: u64) -> PathBuf {
    dirs.cache.join(ENTRIES_DIR).join(format!("{folder:016x}"))
}

fn entry_name(file: &ToolFile) -> String {
    let name = file
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // One declaring file holds many servers: each has its own entry.
    match file.launch {
        Launch::Mcp => format!("{name}.mcp.{}.json", file.name),
        _ => format!("{name}.json"),
    }
}

/// The cache dir is this user's own and writable by nobody else ([`crate::owned`]); else nothing in it is
/// believed (every tool is probed afresh) and it says why, once per process.
fn trusted(dirs: &Dirs) -> Option<()> {
    match crate::owned::existing_dir(&dirs.cache, "cache dir") {
        Ok(_) => Some(()),
        Err(e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| tracing::warn!("{e}"));
            None
        }
    }
}

/// The cached result for this exact file version, if any.
pub fn load(dirs: &Dirs, file: &ToolFile, key: &FileKey) -> Option<Probed> {
    Lookup::new(dirs).load(file, key)
}

/// [`load`] from the file's own entry only, not from its folder's pack.
pub fn load_entry_file(dirs: &Dirs, file: &ToolFile, key: &FileKey) -> Option<Probed> {
    let mut l = Lookup::new(dirs);
    l.packs = false;
    l.load(file, key)
}

/// Many [`load`]s of one listing: the cache dir's trust is checked once, each tier folder is resolved once
/// and its entries' folder opened once (all three were done per tool: a third of a warm listing's system
/// calls, and a path walk of the whole cache path for each `stat` and `open`). Each entry is still read as
/// [`crate::fsread::read`] reads (a regular file, bounded) and checked against its file's identity.
pub struct Lookup<'a> {
    dirs: &'a Dirs,
    trusted: bool,
    /// Tier folder → its entries' folder, open (`None`: there is none, every entry is a miss), and its pack once
    /// read.
    folders: std::collections::HashMap<PathBuf, Option<Folder>>,
    /// Whether the folders' packs are looked at.
    packs: bool,
}

struct Folder {
    dir: std::fs::File,
    pack: Option<Pack>,
}

/// A folder's pack, read whole: entry name → the entry's bytes. Its lines are indexed at its second lookup: a
/// one-shot call looks up one tool, and at 10,000 tools indexing every line would be most of its lookup's work.
#[derive(Default)]
struct Pack {
    bytes: Vec<u8>,
    lines: Option<std::collections::HashMap<Vec<u8>, std::ops::Range<usize>>>,
    looked: bool,
}

impl Pack {
    fn parse(bytes: Vec<u8>) -> Pack {
        let mut p = Pack::unindexed(bytes);
        p.index();
        p
    }

    fn unindexed(bytes: Vec<u8>) -> Pack {
        Pack {
            bytes,
            lines: None,
            looked: false,
        }
    }

    fn index(&mut self) -> &std::collections::HashMap<Vec<u8>, std::ops::Range<usize>> {
        let bytes = &self.bytes;
        self.lines.get_or_insert_with(|| {
            let mut lines = std::collections::HashMap::new();
            let mut at = 0;
            while at < bytes.len() {
                let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i);
                if let Some(tab) = memchr::memchr(b'\t', &bytes[at..end]) {
                    // The last line of a name wins, as in the index a `HashMap` insert makes.
                    lines.insert(bytes[at..at + tab].to_vec(), at + tab + 1..end);
                }
                at = end + 1;
            }
            lines
        })
    }

    fn get(&mut self, name: &str) -> Option<&[u8]> {
        if self.lines.is_none() && !std::mem::replace(&mut self.looked, true) {
            return self.find(name);
        }
        let range = self.index().get(name.as_bytes())?.clone();
        Some(&self.bytes[range])
    }

    /// The last line of `name`, found without an index (a line holds no raw newline or tab before its name's
    /// end: compact JSON escapes them, and a name holds neither).
    fn find(&self, name: &str) -> Option<&[u8]> {
        let mut needle = Vec::with_capacity(name.len() + 2);
        needle.push(b'\n');
        needle.extend_from_slice(name.as_bytes());
        needle.push(b'\t');
        let start = if self.bytes.starts_with(&needle[1..]) { Some(0) } else { None };
        let later = memchr::memmem::rfind(&self.bytes, &needle).map(|i| i + 1);
        let at = later.or(start)? + name.len() + 1;
        let end = memchr::memchr(b'\n', &self.bytes[at..]).map_or(self.bytes.len(), |i| at + i);
        Some(&self.bytes[at..end])
    }
}

/// A name a pack line can hold: an entry's file name (a line of a forged pack may name `../x`).
fn packable(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['\t', '\n', '/'])
}

impl<'a> Lookup<'a> {
    pub fn new(dirs: &'a Dirs) -> Lookup<'a> {
        Lookup {
            dirs,
            trusted: trusted(dirs).is_some(),
            folders: std::collections::HashMap::new(),
            packs: true,
        }
    }

    /// The cached result for this exact file version, if any.
    pub fn load(&mut self, file: &ToolFile, key: &FileKey) -> Option<Probed> {
        if !self.trusted {
            return None;
        }
        let parent = file.path.parent().unwrap_or(Path::new("/"));
        if !self.folders.contains_key(parent) {
            let dir = crate::fsread::open_dir(&entries_dir(self.dirs, folder_hash(self.dirs, file))).ok();
            self.folders.insert(parent.to_path_buf(), dir.map(|dir| Folder { dir, pack: None }));
        }
        let folder = self.folders.get_mut(parent)?.as_mut()?;
        let name = entry_name(file);
        let matches = |bytes: &[u8]| {
            let entry: Entry = serde_json::from_slice(bytes).ok()?;
            (entry.key == *key && entry.path == file.path).then_some(entry.probed)
        };
        if let Ok(bytes) = crate::fsread::read_at(&folder.dir, Path::new(&name), crate::fsread::CACHE_ENTRY) {
            if let Some(p) = matches(&bytes) {
                return Some(p);
            }
        }
        if !self.packs {
            return None;
        }
        let dir = &folder.dir;
        let pack = folder.pack.get_or_insert_with(|| {
            crate::fsread::read_at(dir, Path::new(PACK), crate::fsread::CACHE_PACK)
                .map(Pack::unindexed)
                .unwrap_or_default()
        });
        matches(pack.get(&name)?)
    }
}

/// Remember what `--schemas` gave. Failure to write is logged, never fatal.
pub fn store(dirs: &Dirs, file: &ToolFile, key: &FileKey, probed: &Probed) {
    let path = entry_path(dirs, file);
    let entry = Entry {
        path: file.path.clone(),
        key: key.clone(),
        probed: probed.clone(),
    };
    let write = || -> std::io::Result<()> {
        let dir = path.parent().expect("has parent");
        crate::owned::dir(&dirs.cache, "cache dir")?;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        // Serialized whole first: `to_writer` on the file made one `write` per token.
        write_atomically(&path, &serde_json::to_vec(&entry)?)
    };
    if let Err(e) = write() {
        tracing::warn!("could not write the schema cache at {}: {e}", path.display());
    }
}

/// Remember what `--schemas` gave for many files at once (a listing's probes): one pack per tier folder, with
/// the entries the folder's pack already held for other names. A name a pack line cannot hold gets its own file.
/// Two runners writing one folder's pack at once each leave a whole pack; the entries only the other one had are
/// probed again later.
pub fn store_many(dirs: &Dirs, probed: &[(ToolFile, FileKey, Probed)]) {
    let mut folders: std::collections::BTreeMap<u64, Vec<&(ToolFile, FileKey, Probed)>> = Default::default();
    for item in probed {
        if packable(&entry_name(&item.0)) {
            folders.entry(folder_hash(dirs, &item.0)).or_default().push(item);
        } else {
            store(dirs, &item.0, &item.1, &item.2);
        }
    }
    // One writer of a pack at a time in this process: two merges at once would lose one's lines.
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = WRITING.lock().unwrap_or_else(|e| e.into_inner());
    for (folder, items) in folders {
        let dir = entries_dir(dirs, folder);
        let tier_folder = items.first().and_then(|i| i.0.path.parent()).map(Path::to_path_buf);
        let write = || -> std::io::Result<()> {
            crate::owned::dir(&dirs.cache, "cache dir")?;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
            let mut out: Vec<u8> = Vec::new();
            let mut names: std::collections::HashSet<String> = std::collections::HashSet::new();
            for (file, key, probed) in items {
                let entry = Entry {
                    path: file.path.clone(),
                    key: key.clone(),
                    probed: probed.clone(),
                };
                let name = entry_name(file);
                // Compact JSON holds no newline: a string's is escaped.
                let Ok(json) = serde_json::to_vec(&entry) else {
                    // (A path that is not UTF-8.) This one entry is lost, not the folder's.
                    tracing::warn!("cannot cache the schemas of {}", file.path.display());
                    continue;
                };
                if (out.len() + name.len() + json.len()) as u64 + 2 > crate::fsread::CACHE_PACK {
                    // A pack past its bound would not be read back: a huge answer gets its own file.
                    store(dirs, file, key, probed);
                    continue;
                }
                out.extend_from_slice(name.as_bytes());
                out.push(b'\t');
                out.extend_from_slice(&json);
                out.push(b'\n');
                names.insert(name);
            }
            let kept = crate::fsread::open_dir(&dir)
                .and_then(|d| crate::fsread::read_at(&d, Path::new(PACK), crate::fsread::CACHE_PACK))
                .map(Pack::parse)
                .unwrap_or_default();
            let tier = tier_folder.as_deref();
            for (name, range) in kept.lines.iter().flatten() {
                let Ok(name) = std::str::from_utf8(name) else { continue };
                if !packable(name) || names.contains(name) || tier.is_some_and(|t| !tool_exists(t, name)) {
                    continue;
                }
                let line = &kept.bytes[range.clone()];
                if (out.len() + name.len() + line.len()) as u64 + 2 > crate::fsread::CACHE_PACK {
                    // Past the bound: its own file (its bytes are an entry's), not lost.
                    write_atomically(&dir.join(name), line)?;
                    continue;
                }
                out.extend_from_slice(name.as_bytes());
                out.push(b'\t');
                out.extend_from_slice(line);
                out.push(b'\n');
            }
            write_atomically(&dir.join(PACK), &out)?;
            // An entry file of a name the pack now holds is older (or, written by another process meanwhile, a
            // miss later): every lookup would read it before the pack. The folder is listed once, not asked for
            // each of a listing's 1,000 names.
            for name in std::fs::read_dir(&dir)?.filter_map(|e| e.ok()).map(|e| e.file_name()) {
                if name.to_str().is_some_and(|n| names.contains(n)) {
                    let _ = std::fs::remove_file(dir.join(name));
                }
            }
            Ok(())
        };
        if let Err(e) = write() {
            tracing::warn!("could not write the schema cache at {}: {e}", dir.join(PACK).display());
        }
    }
}

/// Does the tool file of the entry `name` still exist in the tier folder `tier`? (Else its pack line goes.)
fn tool_exists(tier: &Path, name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".json") else { return false };
    if tier.join(stem).exists() {
        return true;
    }
    // An MCP server's entry: `<declaring file>.mcp.<server>.json`.
    stem.rfind(".mcp.").is_some_and(|i| tier.join(&stem[..i]).exists())
}

/// `bytes` as the whole of `path`, in its folder (temp file + rename: a reader sees the old file or the new).
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().expect("has parent");
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// How long a `--schemas` that timed out is remembered: no probe of that file version until then.
pub const TIMEOUT_MEMO_S: u64 = 600;

#[derive(Serialize, Deserialize)]
struct TimeoutMemo {
    path: PathBuf,
    key: FileKey,
    /// Seconds since the epoch when it timed out.
    at: u64,
}

fn memo_path(dirs: &Dirs, file: &ToolFile) -> PathBuf {
    let mut p = entry_path(dirs, file).into_os_string();
    p.push(".timeout");
    PathBuf::from(p)
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// When this exact file version's `--schemas` timed out less than [`TIMEOUT_MEMO_S`] ago: the seconds left
/// before it is tried again.
pub fn timed_out_recently(dirs: &Dirs, file: &ToolFile, key: &FileKey) -> Option<u64> {
    trusted(dirs)?;
    let bytes = crate::fsread::read(&memo_path(dirs, file), crate::fsread::SMALL).ok()?;
    let m: TimeoutMemo = serde_json::from_slice(&bytes).ok()?;
    let age = now_s().checked_sub(m.at)?;
    (m.key == *key && m.path == file.path && age < TIMEOUT_MEMO_S).then(|| TIMEOUT_MEMO_S - age)
}

/// Remember that this file version's `--schemas` timed out (a timeout is not cached as a verdict: it may be
/// load on the machine; but one hanging tool must not cost every listing its full probe timeout).
pub fn remember_timeout(dirs: &Dirs, file: &ToolFile, key: &FileKey) {
    let path = memo_path(dirs, file);
    let memo = TimeoutMemo {
        path: file.path.clone(),
        key: key.clone(),
        at: now_s(),
    };
    let write = || -> std::io::Result<()> {
        let dir = path.parent().expect("has parent");
        crate::owned::dir(&dirs.cache, "cache dir")?;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        write_atomically(&path, &serde_json::to_vec(&memo)?)
    };
    if let Err(e) = write() {
        tracing::warn!("could not write {}: {e}", path.display());
    }
}

/// Forget everything (`animaworks-tool refresh`).
pub fn clear(dirs: &Dirs) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dirs.cache.join(ENTRIES_DIR)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirs::DirOptions;

    fn failed(reason: &str) -> Probed {
        Probed::Failed {
            reason: reason.into(),
            stderr_tail: String::new(),
            spawn: false,
            timed_out: false,
        }
    }

    /// A pack's entries are found by a lookup but not by a listing probe's re-check (which reads the tool's own
    /// entry file only: the listing read the pack once already); a pack written again keeps the lines of other
    /// tools still there and drops the line of a tool whose file is gone.
    #[test]
    fn a_pack_keeps_the_lines_of_tools_still_there_and_is_not_read_by_a_probes_recheck() {
        let world = tempfile::tempdir().unwrap();
        let tier = world.path().join("tools");
        std::fs::create_dir_all(&tier).unwrap();
        let dirs = Dirs::resolve(&DirOptions {
            core_dirs: vec![],
            data_dir: Some(world.path().join("data")),
            anima_dir: None,
            cache_dir: Some(world.path().join("cache")),
            python: None,
        });
        let tool = |name: &str| {
            let path = tier.join(name);
            std::fs::write(&path, name).unwrap();
            let file = ToolFile {
                name: name.into(),
                tier: crate::tier::Tier::Common,
                path,
                launch: Launch::Exec,
                mcp: None,
                stat: None,
            };
            let key = FileKey::of(&file, &dirs).unwrap();
            (file, key, failed(name))
        };
        let (a, b, c) = (tool("a"), tool("b"), tool("c"));
        store_many(&dirs, &[a.clone(), b.clone()]);
        let found = |t: &(ToolFile, FileKey, Probed)| load(&dirs, &t.0, &t.1);
        assert!(matches!(found(&a), Some(Probed::Failed { reason, .. }) if reason == "a"));
        assert!(load_entry_file(&dirs, &a.0, &a.1).is_none(), "a probe's re-check read the pack");
        std::fs::remove_file(&b.0.path).unwrap();
        store_many(&dirs, std::slice::from_ref(&c));
        assert!(found(&a).is_some(), "a's line was lost when c was written");
        assert!(found(&c).is_some());
        let pack = std::fs::read_to_string(entries_dir(&dirs, folder_hash(&dirs, &a.0)).join(PACK)).unwrap();
        assert!(!pack.lines().any(|l| l.starts_with("b.json\t")), "{pack}");
        assert_eq!(pack.lines().count(), 2, "{pack}");
        // A forged line whose name leads out of the folder is dropped, never written anywhere.
        let packed = entries_dir(&dirs, folder_hash(&dirs, &a.0)).join(PACK);
        std::fs::write(&packed, format!("{pack}../tools/a.json\t{{}}\n")).unwrap();
        store_many(&dirs, std::slice::from_ref(&b));
        let pack = std::fs::read_to_string(&packed).unwrap();
        assert!(!pack.contains("../"), "{pack}");
        assert!(!world.path().join("cache/a.json").exists());
    }

    /// A pack's first lookup scans for its one line, the next ones use the index: both find the same line (the
    /// last of a name), at the start, in the middle and at an end without a newline, and neither finds a name
    /// that is only a line's prefix or suffix.
    #[test]
    fn a_packs_scan_and_its_index_find_the_same_lines() {
        let bytes = b"a.json\t1\nab.json\t2\nb.json\t3\na.json\t4\nxb.json\t5\nc.json\t6".to_vec();
        for name in ["a.json", "ab.json", "b.json", "c.json", "xb.json", "x.json", "json", "b"] {
            let scanned = Pack::unindexed(bytes.clone()).get(name).map(<[u8]>::to_vec);
            let indexed = Pack::parse(bytes.clone()).get(name).map(<[u8]>::to_vec);
            assert_eq!(scanned, indexed, "{name}");
        }
        let mut p = Pack::unindexed(bytes);
        assert_eq!(p.get("a.json"), Some(&b"4"[..]));
        assert!(p.lines.is_none(), "one lookup indexed the pack");
        assert_eq!(p.get("c.json"), Some(&b"6"[..]));
        assert!(p.lines.is_some());
    }

    /// A tool probed on its own has an entry file; once a listing has written it into the pack, the file goes
    /// (every lookup read it before the pack), and the pack's line is found.
    #[test]
    fn a_pack_written_for_a_tool_removes_its_older_entry_file() {
        let world = tempfile::tempdir().unwrap();
        let tier = world.path().join("tools");
        std::fs::create_dir_all(&tier).unwrap();
        let dirs = Dirs::resolve(&DirOptions {
            core_dirs: vec![],
            data_dir: Some(world.path().join("data")),
            anima_dir: None,
            cache_dir: Some(world.path().join("cache")),
            python: None,
        });
        let path = tier.join("a");
        std::fs::write(&path, "v1").unwrap();
        let file = ToolFile {
            name: "a".into(),
            tier: crate::tier::Tier::Common,
            path: path.clone(),
            launch: Launch::Exec,
            mcp: None,
            stat: None,
        };
        store(&dirs, &file, &FileKey::of(&file, &dirs).unwrap(), &failed("v1"));
        let own = entry_path(&dirs, &file);
        assert!(own.is_file());
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, "v2, longer").unwrap();
        let key = FileKey::of(&file, &dirs).unwrap();
        store_many(&dirs, &[(file.clone(), key.clone(), failed("v2"))]);
        assert!(!own.exists(), "the entry file the pack supersedes is still read before it");
        assert!(matches!(load(&dirs, &file, &key), Some(Probed::Failed { reason, .. }) if reason == "v2"));
    }
}
