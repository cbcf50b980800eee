//! One listing's `--schemas` plans, each made once. A probe's plan depends on the tool's folder (its grants),
//! the launch (the Python shim's way through the cache), its temp dir's folder, the runner's settings and the
//! anima's grants, and on the file system of the moment: the canonical paths, which deny-list
//! entries exist, the other animas' folders. Planned again for each of 1,000 probes that was a third of the
//! probes' own work in a cold listing. A remembered plan is taken only while every folder it looked in is
//! unchanged ([`Seen`]): a new anima's folder or a new `~/.aws` makes the next probe plan afresh.
//!
//! A long-lived runner's pool keeps one too, for the plans its pooled calls make only to decide
//! ([`super::Needs::Decide`]): a warm call of an MCP server or persistent worker made the same plan on every call.
//! Their key holds everything else the decision depends on (the declaration, the tool, the grants as read by
//! this call's gate, the working directory, the variables read); their watch also covers the files read whole
//! (`status.json`, the settings) and the places whose existence alone matters (the daemons' sockets).

use super::Shared;
use crate::policy::sandbox_grants::Grants;
use crate::settings::sandbox::SandboxSettings;
use awt_protocol::Sandbox as Declared;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Enough for the folders of the three tiers, and some.
const KEPT: usize = 16;

/// A folder changed this shortly before its plan was begun may change again within its timestamp's tick,
/// unseen (the file system stamps with a coarse clock): the plan is not remembered.
const TOO_FRESH: Duration = Duration::from_millis(50);

/// [`TOO_FRESH`] where a timestamp has no fraction of a second (ext4 with small inodes, FAT's 2 s steps, some
/// NFS), and a tick of the coarse clock more.
const TOO_FRESH_WHOLE_SECONDS: Duration = Duration::from_secs(3);

/// How a plan came to be, for [`ProbePlans::put`].
pub(super) struct Made<'a> {
    /// When the plan was begun, before it looked at the file system.
    pub at: SystemTime,
    /// The probe's temp dir.
    pub tmp: &'a Path,
    /// The plan's protected places and grants as named, before their links were followed.
    pub named: &'a [PathBuf],
    /// Paths watched themselves rather than through their folder: files read whole, folders listed, places
    /// whose existence alone counts.
    pub also: &'a [PathBuf],
}

/// What a probe's plan was made from, but the file system.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Key {
    pub data: PathBuf,
    pub anima: Option<PathBuf>,
    pub tool_dir: PathBuf,
    pub python: bool,
    /// The folder of the probe's temp dir (each probe has its own, which the plan mounts apart).
    pub tmp_dir: PathBuf,
    pub home: Option<PathBuf>,
    pub settings: SandboxSettings,
    pub grants: Grants,
    /// For a plan made to decide a call; `None` for a probe's.
    pub call: Option<CallKey>,
}

/// What a call's plan made to decide depends on besides a probe's key and the file system.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CallKey {
    pub tool: String,
    pub path: PathBuf,
    pub tier: crate::tier::Tier,
    pub declared: Option<Declared>,
    pub perms_path: PathBuf,
    pub cache: PathBuf,
    pub core: Vec<PathBuf>,
    /// The runner's working directory (a tool's `$CWD`).
    pub cwd: Option<PathBuf>,
    /// `PATH`, the audit log's and the task database's variables.
    pub vars: Vec<Option<OsString>>,
}

/// What a folder looked like: an entry made, removed or renamed in it changes its modification time.
#[derive(Debug, Clone, PartialEq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    nlink: u64,
}

fn stamp(dir: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
        nlink: m.nlink(),
    })
}

/// The folders a plan looked in (for a path's existence, or listing them), as they were.
#[derive(Debug)]
struct Seen(Vec<(PathBuf, Option<Stamp>)>);

impl Seen {
    /// Each folder holding a path of the plan, as followed and as named (a link swapped on the way to a hidden
    /// path changes what the folder named leads to). `None`: one of them changed too shortly before the plan was
    /// begun to tell a later change from it.
    fn of(plan: &Shared, made: &Made<'_>, tmp_dir: &Path) -> Option<Seen> {
        let mut dirs: BTreeSet<&Path> = BTreeSet::new();
        let paths = plan.protected_read.paths.iter().chain(&plan.protected_write.paths);
        for p in paths.chain(plan.mounts.iter().map(|m| &m.path)).chain(made.named) {
            dirs.extend(p.parent());
        }
        if let Some((animas, own)) = &plan.protected_read.peers {
            dirs.extend(animas.iter().map(PathBuf::as_path));
            dirs.extend(own.as_deref().and_then(Path::parent));
        }
        dirs.insert(&plan.cache);
        // The temp dirs' folder changes with every call; the key names it, and `for_tmp` replaces the dir.
        dirs.remove(tmp_dir);
        // Watched themselves: an entry's stamp changes with its contents, and with its existence.
        dirs.extend(made.also.iter().map(PathBuf::as_path));
        let mut seen = Vec::with_capacity(dirs.len());
        for d in dirs {
            let s = stamp(d);
            if let Some(s) = &s {
                let whole = s.mtime.1 == 0 || s.ctime.1 == 0;
                let margin = if whole { TOO_FRESH_WHOLE_SECONDS } else { TOO_FRESH };
                let since = made.at.checked_sub(margin)?;
                let time = |(sec, nsec): (i64, i64)| {
                    SystemTime::UNIX_EPOCH + Duration::new(sec.max(0) as u64, nsec.clamp(0, 999_999_999) as u32)
                };
                if time(s.mtime) >= since || time(s.ctime) >= since {
                    return None;
                }
            }
            seen.push((d.to_path_buf(), s));
        }
        Some(Seen(seen))
    }

    fn unchanged(&self) -> bool {
        self.0.iter().all(|(d, s)| stamp(d) == *s)
    }
}

#[derive(Debug)]
struct Kept {
    seen: Seen,
    plan: Shared,
    tmp: PathBuf,
}

/// The plans of one listing's probes (`probe::manifests`); dropped with the listing.
#[derive(Debug, Default)]
pub struct ProbePlans {
    /// Each plan with the temp dir it was made for (shared: its folders are looked at outside the lock).
    kept: Mutex<Vec<(Key, Arc<Kept>)>>,
    /// How many plans were taken from here.
    taken: AtomicUsize,
}

impl ProbePlans {
    /// The plan remembered for `key`, if the folders it looked in are as they were, made for the probe's temp
    /// dir `tmp`.
    pub(super) fn get(&self, key: &Key, tmp: &Path) -> Option<Shared> {
        let found = {
            let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
            kept.iter().find(|(k, _)| k == key).map(|(_, p)| p.clone())?
        };
        if found.seen.unchanged() {
            self.taken.fetch_add(1, Ordering::Relaxed);
            return Some(found.plan.for_tmp(&found.tmp, tmp));
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(_, p)| !Arc::ptr_eq(p, &found));
        None
    }

    /// Remember `plan`, unless a folder it looked in changed too shortly before to tell, a path it names lies
    /// inside its temp dir (a grant of `$TMP/x`: another probe's temp dir holds no `x`; a deny entry of `$TMP`),
    /// or the temp dir is not in the calls folder (then its folder is the temp dir of everything else too).
    pub(super) fn put(&self, key: Key, plan: &Shared, made: Made<'_>) {
        let tmp = made.tmp;
        let granted = plan.read.iter().chain(&plan.write).chain(&plan.exec);
        let protected = plan.protected_read.paths.iter().chain(&plan.protected_write.paths);
        if granted
            .chain(plan.mounts.iter().map(|m| &m.path))
            .any(|p| p != tmp && p.starts_with(tmp))
            || protected.into_iter().any(|p| p.starts_with(tmp))
            || super::tmp::calls_dir() != Some(key.tmp_dir.as_path())
        {
            return;
        }
        let Some(seen) = Seen::of(plan, &made, &key.tmp_dir) else {
            return;
        };
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.iter().any(|(k, _)| *k == key) {
            return;
        }
        if kept.len() >= KEPT {
            kept.remove(0);
        }
        let plan = plan.clone();
        kept.push((
            key,
            Arc::new(Kept {
                seen,
                plan,
                tmp: tmp.to_path_buf(),
            }),
        ));
    }

    /// Forget every plan: one of them named a path that is gone.
    pub fn clear(&self) {
        self.kept.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// How many probes took a remembered plan.
    pub fn taken(&self) -> usize {
        self.taken.load(Ordering::Relaxed)
    }
}

impl Shared {
    /// This plan, made for the temp dir `made`, for a probe whose temp dir is `tmp` (in the same folder).
    fn for_tmp(&self, made: &Path, tmp: &Path) -> Shared {
        let mut s = self.clone();
        let swap = |p: &mut PathBuf| {
            if p == made {
                *p = tmp.to_path_buf();
            }
        };
        s.read.iter_mut().chain(&mut s.write).chain(&mut s.exec).for_each(swap);
        s.mounts.iter_mut().for_each(|m| swap(&mut m.path));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirs::{DirOptions, Dirs};
    use crate::discover::{Launch, ToolFile};

    /// A folder the plan looked in that changed after the plan was begun, even long enough before the plan is
    /// put to look settled, may hold what the plan did not see: the plan is not remembered.
    #[test]
    fn a_plan_is_not_remembered_when_a_folder_it_looked_in_changed_after_it_was_begun() {
        let world = tempfile::tempdir().unwrap();
        let root = world.path();
        std::fs::create_dir_all(root.join("animas/alice/tools")).unwrap();
        std::fs::create_dir_all(root.join("data")).unwrap();
        let dirs = Dirs::resolve(&DirOptions {
            core_dirs: vec![root.join("core")],
            data_dir: Some(root.join("data")),
            anima_dir: Some(root.join("animas/alice")),
            cache_dir: Some(root.join("cache")),
            python: None,
        });
        let path = root.join("animas/alice/tools/t");
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        let file = ToolFile {
            name: "t".into(),
            tier: crate::tier::Tier::Personal,
            path,
            launch: Launch::Exec,
            mcp: None,
            stat: None,
        };
        let plan = super::super::for_process(&dirs, &file, super::super::Needs::Probe).unwrap();
        let Some(inner) = plan.inner.as_ref() else {
            awt_sys::skipped!("the sandbox is off here");
            return;
        };
        let tmp = rules_canonical(inner.tmp.path());
        if super::super::tmp::calls_dir() != tmp.parent() {
            awt_sys::skipped!("no calls folder here (plans are not remembered without it)");
            return;
        }
        let key = Key {
            data: dirs.data.clone(),
            anima: dirs.anima.clone(),
            tool_dir: root.join("animas/alice/tools"),
            python: false,
            tmp_dir: tmp.parent().unwrap().to_path_buf(),
            home: None,
            settings: SandboxSettings::default(),
            grants: Grants::default(),
            call: None,
        };
        let made = |at| Made {
            at,
            tmp: &tmp,
            named: &[],
            also: &[],
        };
        // As `plan_with` puts it: before the other calls' temp dirs are hidden (their folder changes all the time).
        let mut shared = inner.shared.clone();
        let others = |m: &super::super::PlannedMount| {
            matches!(
                m.kind,
                super::super::MountKind::HideCalls | super::super::MountKind::HideOther
            )
        };
        shared.mounts.retain(|m| !others(m));
        std::thread::sleep(Duration::from_millis(150));
        let begun = SystemTime::now();
        std::fs::create_dir(root.join("animas/carol")).unwrap();
        std::thread::sleep(TOO_FRESH * 3);
        let plans = ProbePlans::default();
        plans.put(key.clone(), &shared, made(begun));
        assert!(
            plans.get(&key, &tmp).is_none(),
            "remembered although animas/ changed after it was begun"
        );
        // The same plan, begun after the change, is remembered.
        plans.put(key.clone(), &shared, made(SystemTime::now()));
        assert!(plans.get(&key, &tmp).is_some());
    }

    fn rules_canonical(p: &Path) -> PathBuf {
        crate::sandbox::rules::canonical(p).unwrap_or_else(|| p.to_path_buf())
    }
}
