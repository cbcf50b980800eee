//! Removing requests nothing can change any more, so that the folder never reaches [`MAX_ENTRIES`]: by hand
//! (`approvals prune`), and by the store itself before it files a request when the folder is near the bound.
//!
//! Only a request in a final state (`used`, `denied`, `expired`) is ever removed: its decision is in the anima's
//! audit log and its anima was told. A `pending` request is a human's to answer and is never dropped; an `approved`
//! one is still to be redeemed by its worker. Pending requests are bounded instead ([`MAX_PENDING`]): past it a new
//! call's request is refused with an error saying so, never filed over an old one.

use super::{now_s, pg_exec, Approvals, Record, State, MAX_ENTRIES};
use awt_core::error::{CallError, ErrorCode};
use std::collections::BTreeMap;
use std::io;

/// How many entries a prune reads at most: past [`MAX_ENTRIES`], so that a folder already over it is cleared.
const SCAN_MAX: usize = 4 * MAX_ENTRIES;
/// From this many entries on, filing a request first prunes the final ones, oldest decision first ...
const HIGH_MARK: usize = MAX_ENTRIES * 3 / 4;
/// ... down to this many.
const LOW_MARK: usize = MAX_ENTRIES / 2;
/// At most this many requests wait for a human at once (each at most two files while it waits).
pub const MAX_PENDING: usize = 1024;
/// A file of a request whose record is gone (a crash between two removals), or a temporary file, is removed
/// once it is this old: a younger one may be a request being filed right now (its arguments come first).
const STRAY_AGE_S: i64 = 3600;
/// The files of request `<id>` besides its record.
const PARTS: [&str; 3] = ["args.json", "decided", "used"];

/// Which requests `prune` removes.
#[derive(Debug, Clone, Default)]
pub struct PruneOptions {
    /// Only those decided (or, without a decision time, made) at least this many seconds ago.
    pub older_than_s: Option<f64>,
    /// Only this anima's.
    pub anima: Option<String>,
    /// Say what would go; remove nothing.
    pub dry_run: bool,
}

/// What a prune did (or, dry, would do).
#[derive(Debug, Default)]
pub struct PruneReport {
    /// The requests removed, oldest decision first.
    pub removed: Vec<Record>,
    /// Files of no request (its record gone) and old temporary files, by name.
    pub strays: Vec<String>,
    /// Requests kept because they wait for a human.
    pub kept_pending: usize,
    /// Requests kept because their approved run has not started.
    pub kept_approved: usize,
    /// Final requests kept: younger than `--older-than`, or another anima's.
    pub kept_final: usize,
    /// Files named like a request whose record does not verify: not the runner's, left in place.
    pub unverified: Vec<String>,
}

/// Whether nothing moves a request in state `s` on.
pub fn is_final(s: State) -> bool {
    matches!(s, State::Used | State::Denied | State::Expired)
}

fn decided(r: &Record) -> f64 {
    r.decided_at.unwrap_or(r.created_at)
}

/// The request id a file name belongs to, and whether it is the record.
fn owner(name: &str) -> Option<(&str, bool)> {
    let (id, rest) = name.split_once('.')?;
    if !crate::valid_task_id(id) {
        return None;
    }
    match rest {
        "json" => Some((id, true)),
        r if PARTS.contains(&r) => Some((id, false)),
        _ => None,
    }
}

impl Approvals {
    /// `approvals prune`: remove the final requests `opts` selects, and stray files.
    pub fn prune(&self, opts: &PruneOptions) -> Result<PruneReport, CallError> {
        let now = now_s();
        self.prune_where(
            opts.dry_run,
            |r| {
                opts.anima.as_ref().is_none_or(|a| r.binding.anima.as_ref() == Some(a))
                    && opts.older_than_s.is_none_or(|age| now - decided(r) >= age)
            },
            usize::MAX,
        )
    }

    /// Before a request is filed: when the folder is near [`MAX_ENTRIES`], remove final requests, oldest decision
    /// first, down to [`LOW_MARK`] entries. Then every request, as [`Approvals::list`] gives them.
    pub(super) fn keep_room(&self) -> Result<Vec<Record>, CallError> {
        if self.pg.is_none() {
            let count = self
                .folder()
                .and_then(|f| f.names(Some(SCAN_MAX)))
                .map_err(|e| super::internal("cannot list the approval requests", e))?
                .len();
            if count >= HIGH_MARK {
                let report = self.prune_where(false, |_| true, count - LOW_MARK)?;
                tracing::info!(
                    "approvals folder held {count} entries: removed {} decided requests and {} stray files",
                    report.removed.len(),
                    report.strays.len()
                );
            }
        }
        self.list()
    }

    /// Remove the final requests `pick` selects (at most those whose files number `budget`, oldest decision first)
    /// and the stray files.
    fn prune_where(
        &self,
        dry_run: bool,
        pick: impl Fn(&Record) -> bool,
        budget: usize,
    ) -> Result<PruneReport, CallError> {
        let mut report = PruneReport::default();
        let mut files: BTreeMap<String, (bool, Vec<String>)> = BTreeMap::new();
        let mut temps = Vec::new();
        let folder = match &self.pg {
            Some(_) => None,
            None => Some(
                self.folder()
                    .map_err(|e| super::internal("cannot use the approvals folder", e))?,
            ),
        };
        let records: Vec<Record> = match (&self.pg, &folder) {
            (Some(url), _) => {
                let ids = pg_exec(url, "SELECT id FROM awt_approvals", vec![])
                    .map_err(|e| super::internal("cannot list the approval requests", e))?
                    .1;
                ids.into_iter()
                    .filter_map(|r| r.into_iter().next().flatten())
                    .filter_map(|id| self.get(&id).ok())
                    .map(|r| self.expire_if_due(r))
                    .collect()
            }
            (None, Some(f)) => {
                let names = f.names(Some(SCAN_MAX)).map_err(|e| {
                    super::internal("cannot list the approval requests", e).hint(format!(
                        "{} holds files that are not requests: move them away",
                        self.dir.display()
                    ))
                })?;
                for n in names {
                    let n = n.to_string_lossy().into_owned();
                    match owner(&n) {
                        Some((id, record)) => {
                            let e = files.entry(id.to_owned()).or_default();
                            e.0 |= record;
                            e.1.push(n.clone());
                        }
                        None if n.starts_with(".tmp-") && n.ends_with(".part") => temps.push(n),
                        None => {}
                    }
                }
                let mut out = Vec::new();
                for (id, _) in files.iter().filter(|(_, (has_record, _))| *has_record) {
                    match self.get(id) {
                        Ok(r) => out.push(self.expire_if_due(r)),
                        Err(_) => report.unverified.push(format!("{id}.json")),
                    }
                }
                out
            }
            (None, None) => Vec::new(),
        };
        let mut finals: Vec<Record> = Vec::new();
        for r in records {
            match r.status {
                State::Pending => report.kept_pending += 1,
                State::Approved => report.kept_approved += 1,
                s if is_final(s) && pick(&r) => finals.push(r),
                _ => report.kept_final += 1,
            }
        }
        finals.sort_by(|a, b| decided(a).total_cmp(&decided(b)).then(a.id.cmp(&b.id)));
        let mut freed = 0usize;
        for r in finals {
            if freed >= budget {
                report.kept_final += 1;
                continue;
            }
            let names = files.get(&r.id).map(|e| e.1.clone()).unwrap_or_default();
            freed += names.len().max(1);
            if !dry_run {
                self.remove_request(&r.id)
                    .map_err(|e| super::internal(&format!("cannot remove approval request {}", r.id), e))?;
            }
            report.removed.push(r);
        }
        if let Some(f) = &folder {
            let old = |name: &str| {
                f.stat_of(name)
                    .is_ok_and(|s| now_s() as i64 - s.st_mtime as i64 >= STRAY_AGE_S)
            };
            let orphans = files
                .iter()
                .filter(|(_, (has_record, _))| !has_record)
                .flat_map(|(_, (_, names))| names.iter().cloned());
            for name in orphans.chain(temps) {
                if old(&name) {
                    if !dry_run {
                        match f.remove(&name) {
                            Ok(()) => {}
                            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                            Err(e) => return Err(super::internal(&format!("cannot remove {name}"), e)),
                        }
                    }
                    report.strays.push(name);
                }
            }
        }
        Ok(report)
    }

    /// Remove request `id`: its record first (so that nothing finds it half gone), then its other files.
    fn remove_request(&self, id: &str) -> io::Result<()> {
        if let Some(url) = &self.pg {
            pg_exec(url, "DELETE FROM awt_approvals WHERE id = $1", vec![id.to_owned()])?;
            pg_exec(url, "DELETE FROM awt_approval_steps WHERE id = $1", vec![id.to_owned()])?;
            return Ok(());
        }
        let f = self.folder()?;
        let record = format!("{id}.json");
        for name in std::iter::once(record).chain(PARTS.iter().map(|p| format!("{id}.{p}"))) {
            match f.remove(&name) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A new request is refused while [`MAX_PENDING`] wait for a human: never filed over a waiting one, never dropped.
pub(super) fn room_to_wait(list: &[Record], keys: &[String], allow_line: &str) -> Result<(), CallError> {
    let waiting = list.iter().filter(|r| r.status == State::Pending).count();
    if waiting < MAX_PENDING {
        return Ok(());
    }
    Err(CallError::new(
        ErrorCode::PermissionDenied,
        format!(
            "{waiting} approval requests already wait for a decision (at most {MAX_PENDING}): this call's request \
             is not filed, and no waiting one is dropped"
        ),
    )
    .with(awt_core::error::Detail::Reason, "approval_unavailable")
    .with(awt_core::error::Detail::Key, keys.join(","))
    .hint(format!(
        "answer the waiting ones (`animaworks-tool approvals list`, then `approvals approve ID` or `approvals deny \
         ID`); or, to run this call without asking, {allow_line}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use awt_core::call::approve::Request;
    use awt_core::call::Runner;
    use awt_core::policy::approval::{Binding, CallKind};
    use std::path::Path;

    struct Here {
        _t: tempfile::TempDir,
        runner: Runner,
        store: Approvals,
        dir: std::path::PathBuf,
    }

    fn here() -> Here {
        let t = tempfile::tempdir().unwrap();
        let data = t.path().join("data");
        let anima = data.join("animas/alice");
        std::fs::create_dir_all(&anima).unwrap();
        let runner = Runner::new(awt_core::dirs::Dirs {
            core: Vec::new(),
            data: data.clone(),
            anima: Some(anima),
            cache: t.path().join("cache"),
            python: "python3".into(),
        });
        let store = Approvals::open(&data).unwrap();
        Here {
            dir: data.join(super::super::DIR),
            _t: t,
            runner,
            store,
        }
    }

    fn request(n: usize) -> Request {
        Request {
            binding: Binding {
                anima: Some("alice".into()),
                tool: "mail".into(),
                tier: awt_core::tier::Tier::Common,
                tool_path: "/x/mail".into(),
                tool_sha256: "00".into(),
                action: "send".into(),
                kind: CallKind::Action,
                args_sha256: format!("{n:064x}"),
            },
            args: serde_json::json!({"n": n}),
            masked_args: serde_json::json!({"n": n}),
            keys: vec!["mail_send".into()],
            permissions_path: "/x/permissions.json".into(),
            anima_dir: None,
            timeout_s: None,
            max_output: None,
        }
    }

    /// A signed request in `status`, decided `age_s` ago, written as the store writes one (and its marker).
    fn planted(h: &Here, n: usize, status: State, age_s: f64) -> String {
        let req = request(n);
        let now = now_s();
        let mut r = Record {
            id: crate::new_task_id(),
            binding: req.binding,
            args: req.masked_args,
            keys: req.keys,
            anima_dir: None,
            timeout_s: None,
            max_output: None,
            created_at: now - age_s,
            expires_at: now + 3600.0,
            status,
            decided_by: (status != State::Pending).then(|| "ops".into()),
            decided_at: (status != State::Pending).then_some(now - age_s),
            reason: None,
            mac: None,
        };
        h.store.write(&mut r).unwrap();
        if status != State::Pending {
            assert!(h.store.once(&r.id, "decided").unwrap());
        }
        r.id
    }

    fn entries(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    /// Only decided requests go, with every file of theirs; a pending or approved one stays whatever its age; an
    /// age or anima selects among the decided; a dry run removes nothing.
    #[test]
    fn prune_removes_only_decided_requests_and_all_their_files() {
        let h = here();
        let waiting = planted(&h, 1, State::Pending, 30.0 * 86400.0);
        let approved = planted(&h, 2, State::Approved, 30.0 * 86400.0);
        let old_denied = planted(&h, 3, State::Denied, 10.0 * 86400.0);
        let old_expired = planted(&h, 4, State::Expired, 8.0 * 86400.0);
        let young_denied = planted(&h, 5, State::Denied, 60.0);
        // A stray marker of no request, old enough, and one just made (a request being filed).
        std::fs::write(h.dir.join("0000000000aa.decided"), "").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 3600);
        std::fs::File::options()
            .write(true)
            .open(h.dir.join("0000000000aa.decided"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::fs::write(h.dir.join("0000000000bb.args.json"), "{}").unwrap();

        let before = entries(&h.dir);
        let dry = h
            .store
            .prune(&PruneOptions {
                older_than_s: Some(7.0 * 86400.0),
                dry_run: true,
                ..Default::default()
            })
            .unwrap();
        let ids: Vec<&str> = dry.removed.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, [old_denied.as_str(), old_expired.as_str()]);
        assert_eq!(dry.strays, ["0000000000aa.decided"]);
        assert_eq!(entries(&h.dir), before, "a dry run removed something");

        let other = h
            .store
            .prune(&PruneOptions {
                anima: Some("bob".into()),
                ..Default::default()
            })
            .unwrap();
        assert!(other.removed.is_empty());

        let done = h
            .store
            .prune(&PruneOptions {
                older_than_s: Some(7.0 * 86400.0),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(done.removed.len(), 2);
        assert_eq!((done.kept_pending, done.kept_approved, done.kept_final), (1, 1, 1));
        for id in [&old_denied, &old_expired] {
            assert!(!h.dir.join(format!("{id}.json")).exists());
            assert!(!h.dir.join(format!("{id}.decided")).exists());
        }
        assert!(!h.dir.join("0000000000aa.decided").exists());
        assert!(
            h.dir.join("0000000000bb.args.json").exists(),
            "a young stray may be a request being filed"
        );
        for id in [&waiting, &approved, &young_denied] {
            assert!(h.store.get(id).is_ok(), "{id} was removed");
        }
        let all = h.store.prune(&PruneOptions::default()).unwrap();
        assert_eq!(all.removed.len(), 1);
        assert_eq!(h.store.get(&waiting).unwrap().status, State::Pending);
        assert_eq!(h.store.get(&approved).unwrap().status, State::Approved);
    }

    /// A folder of decided requests past [`MAX_ENTRIES`] (the bound every look refuses past) does not stop a new
    /// request from being filed: the store prunes the decided ones first, and keeps the waiting ones. (Failed while
    /// nothing was ever removed: every gated call then failed to file its request.)
    #[test]
    fn a_folder_full_of_decided_requests_never_locks_filing() {
        let h = here();
        let waiting = planted(&h, 0, State::Pending, 60.0);
        let n = MAX_ENTRIES / 2 + 100;
        for i in 1..=n {
            planted(&h, i, if i % 2 == 0 { State::Denied } else { State::Expired }, i as f64);
        }
        assert!(entries(&h.dir) > MAX_ENTRIES);
        let ticket = h.store.file(&h.runner, &request(n + 1)).expect("filing locked");
        assert!(entries(&h.dir) <= LOW_MARK + 2, "{} entries left", entries(&h.dir));
        assert_eq!(h.store.get(&waiting).unwrap().status, State::Pending);
        assert_eq!(h.store.get(&ticket.id).unwrap().status, State::Pending);
        // The newest decisions are the ones kept.
        let kept = h.store.list().unwrap();
        assert!(kept
            .iter()
            .filter(|r| is_final(r.status))
            .all(|r| now_s() - decided(r) < (n as f64) / 2.0 + 200.0));
    }

    /// Past [`MAX_PENDING`] waiting requests a new one is refused with an error that says how to go on, and no
    /// waiting request is dropped for it.
    #[test]
    fn waiting_requests_are_never_dropped_to_file_another() {
        let h = here();
        let ids: Vec<String> = (0..MAX_PENDING).map(|i| planted(&h, i, State::Pending, 1.0)).collect();
        let e = h.store.file(&h.runner, &request(MAX_PENDING)).unwrap_err();
        assert!(e.message.contains("already wait for a decision"), "{}", e.message);
        let hint = e.hint.as_deref().unwrap_or("");
        assert!(
            hint.contains("approvals deny") && hint.contains("external_tools.allow"),
            "{hint}"
        );
        // The same call asked again still finds its own request.
        assert_eq!(h.store.file(&h.runner, &request(3)).unwrap().id, ids[3]);
        assert!(ids.iter().all(|id| h.store.get(id).is_ok()));
    }
}
