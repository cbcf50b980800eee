//! What a tool must not change under its own anima dir, though it may write there: the files that decide which
//! code runs (read-only inside calls), and `state/`, the folder the runner keeps its files in (a mount point
//! inside calls, so it cannot be renamed away and replaced by a link or a folder of the tool's).

use super::{MountKind, PlannedMount};
use awt_sys::confine::rules;
use std::path::{Path, PathBuf};

/// Files and folders of the anima dir that decide which code runs, read-only inside every call: `status.json`
/// (its `extra_mcp_servers` start programs), `package.json` and `node_modules/` (a personal Node.js tool resolves
/// `require()` through them).
pub(super) const CODE_FILES: &[&str] = &["status.json", "package.json", "node_modules"];

/// Make the code places that can be made without changing what they mean, so that they can be mounted over
/// read-only: an empty `node_modules/` and a `package.json` of `{}` (Node.js reads both as it reads none).
/// `status.json` is never made (AnimaWorks takes its presence to mean the anima is complete): without it, the
/// anima dir's top level is split (nothing new there), as without `permissions.json`.
pub(super) fn make_code_places(anima: &Path) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::create_dir(anima.join("node_modules"));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(anima.join("package.json"))
    {
        let _ = f.write_all(b"{}\n");
    }
}

/// The mount that makes the anima's `state/` a mount point of its own (writable, `noexec`, as the place around it):
/// a mount point cannot be renamed, removed or replaced (`EBUSY`). `None` when it is not inside a writable root
/// (no need), is a root itself, or is missing.
pub(super) fn state_pin(anima: Option<&Path>, roots: &[&PathBuf]) -> Option<PlannedMount> {
    let state = rules::canonical(&anima?.join("state"))?;
    let inside = roots.iter().any(|r| state.starts_with(r) && state != **r);
    (inside && state.is_dir()).then_some(PlannedMount {
        path: state,
        kind: MountKind::NoExec,
    })
}
