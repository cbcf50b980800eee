//! Which tool file a task was checked against: its tier and the SHA-256 of its content. A worker on another machine
//! runs a task only when its own file for that tool, found the same way for the same anima, is the same.

use super::Task;
use awt_core::dirs::Dirs;
use awt_core::discover::{self, ToolFile};
use awt_core::policy::Tier;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Mutex;

/// The SHA-256 of a tool file's content, in hex. Remembered per (path, inode, size, mtime) for the process.
pub fn file_sha256(file: &ToolFile) -> std::io::Result<String> {
    /// Path, inode, size, mtime (s, ns).
    type Key = (PathBuf, u64, u64, i64, i64);
    static SEEN: Mutex<Option<HashMap<Key, String>>> = Mutex::new(None);
    if file.mcp.is_some() {
        // Not cached: it covers files besides the declaration's.
        return awt_core::policy::approval::tool_sha256(file);
    }
    let meta = std::fs::metadata(&file.path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            file.path.display()
        )));
    }
    let key = (
        file.path.clone(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
    );
    if let Some(h) = SEEN
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return Ok(h.clone());
    }
    let mut f = std::fs::File::open(&file.path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let hex = awt_core::hex::encode(hasher.finalize());
    SEEN.lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, hex.clone());
    Ok(hex)
}

/// Record the tool file a task was checked against, and whether its action may run again; `digest`: its
/// SHA-256 too (a shared queue's; see `submit::enqueue`).
pub fn stamp(task: &mut Task, file: &ToolFile, idempotent: bool, digest: bool) {
    task.queue.tool_tier = Some(file.tier.as_str().to_owned());
    task.queue.tool_sha256 = if digest { file_sha256(file).ok() } else { None };
    task.queue.idempotent = idempotent;
}

/// Why a worker cannot run a task as it was submitted. The message reads after `worker <id> ` (`jobs show`).
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    /// The worker finds no tool of that name.
    #[error("has no tool {0:?}")]
    NoTool(String),
    /// The worker finds the tool in another tier than the submitter did.
    #[error("finds {tool} in the {found} tier, submitted from the {submitted} tier")]
    OtherTier {
        tool: String,
        found: Tier,
        submitted: String,
    },
    /// The task does not record which file it was checked against.
    #[error("cannot tell which version of the tool was submitted (no tool_sha256)")]
    NoDigest,
    /// The worker's file has other content (both digests, in hex).
    #[error(
        "has another version of {tool} (sha256 {}…, submitted {}…)",
        short(found),
        short(submitted)
    )]
    OtherVersion {
        tool: String,
        found: String,
        submitted: String,
    },
    /// The worker's file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Unreadable { path: PathBuf, source: std::io::Error },
}

/// The first 12 characters of a digest, for messages.
fn short(hex: &str) -> &str {
    hex.char_indices().nth(12).map_or(hex, |(i, _)| &hex[..i])
}

/// Can a worker with these dirs run `task` as it was submitted? `Err` says why not, for `jobs show`.
pub fn check(dirs: &Dirs, task: &Task) -> Result<(), Mismatch> {
    let found = discover::scan_for(dirs, &task.tool);
    let Some(file) = found.tools.get(&task.tool) else {
        return Err(Mismatch::NoTool(task.tool.clone()));
    };
    if task.queue.tool_tier.as_deref().is_some_and(|t| t != file.tier.as_str()) {
        return Err(Mismatch::OtherTier {
            tool: task.tool.clone(),
            found: file.tier,
            submitted: task.queue.tool_tier.clone().unwrap_or_default(),
        });
    }
    let Some(want) = task.queue.tool_sha256.as_deref() else {
        return Err(Mismatch::NoDigest);
    };
    match file_sha256(file) {
        Ok(h) if h == want => Ok(()),
        Ok(h) => Err(Mismatch::OtherVersion {
            tool: task.tool.clone(),
            found: h,
            submitted: want.to_owned(),
        }),
        Err(source) => Err(Mismatch::Unreadable {
            path: file.path.clone(),
            source,
        }),
    }
}
