//! Other animas hidden by construction: each folder of anima dirs ([`crate::animas::folders`]) gets one empty
//! mount over it, with the way down to the caller's own anima dir bound back, however many entries it has and
//! whatever is added to it during the call. Without the mount API (`open_tree`), its entries are hidden one by
//! one, and a folder with more of them than can be hidden refuses the call.

use super::planner::MAX_HIDDEN;
use super::{kernel, MountKind, PlannedMount};
use crate::error::{CallError, Detail, ErrorCode};
use std::path::{Path, PathBuf};

/// The entry of `folder` on the way down to `own`, when `own` lies beneath it.
pub(super) fn kept(folder: &Path, own: Option<&Path>) -> Option<PathBuf> {
    let rest = own?.strip_prefix(folder).ok()?;
    let first = rest.components().next()?;
    Some(folder.join(first))
}

/// The mounts that hide `folders` but for `own` (canonical paths), appended to `out`; every path hidden whole is
/// added to `hidden`. Deeper folders first: a folder's mount carries the mounts already made beneath its kept
/// entry.
pub(super) fn plan(
    out: &mut Vec<PlannedMount>,
    folders: &[PathBuf],
    own: Option<&Path>,
    hidden: &mut Vec<PathBuf>,
) -> Result<(), CallError> {
    let mut folders: Vec<&PathBuf> = folders.iter().collect();
    folders.sort_by_key(|f| std::cmp::Reverse(f.as_os_str().len()));
    for folder in folders {
        if hidden.iter().any(|h| folder.starts_with(h)) {
            continue;
        }
        if !std::fs::symlink_metadata(folder).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        let Some(keep) = kept(folder, own) else {
            hidden.push(folder.clone());
            out.push(PlannedMount {
                path: folder.clone(),
                kind: MountKind::Hide { dir: true },
            });
            continue;
        };
        if kernel::support().mount_api {
            out.push(PlannedMount {
                path: folder.clone(),
                kind: MountKind::HideAnimas,
            });
            continue;
        }
        let entries: Vec<PathBuf> = match std::fs::read_dir(folder) {
            Ok(rd) => rd
                .flatten()
                .take(MAX_HIDDEN + 1)
                .map(|e| folder.join(e.file_name()))
                .collect(),
            Err(e) => return Err(too_many(folder, &format!("it cannot be listed ({e})"))),
        };
        if entries.len() > MAX_HIDDEN {
            return Err(too_many(folder, &format!("it has more than {MAX_HIDDEN} entries")));
        }
        for p in entries.into_iter().filter(|p| *p != keep) {
            let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
            hidden.push(p.clone());
            out.push(PlannedMount {
                path: p,
                kind: MountKind::HideEntry { dir: m.is_dir() },
            });
        }
    }
    Ok(())
}

fn too_many(folder: &Path, why: &str) -> CallError {
    CallError::new(
        ErrorCode::PermissionDenied,
        format!(
            "the other animas in {} cannot be hidden from the call: {why}, and this kernel has no mount API \
             (open_tree) to hide the folder whole",
            folder.display()
        ),
    )
    .hint("run on Linux 5.2 or later, or keep fewer entries in that folder")
    .with(Detail::Reason, "sandbox_unsupported")
}
