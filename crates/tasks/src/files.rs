//! The file store: one JSON file per task in `<anima dir>/state/background_tasks/<task_id>.json`, written by
//! rename from a temporary file in the same folder (a reader sees the old file or the new one, never half), and
//! an `flock`ed `.lock` file for every read-modify-write (claims, updates, lost marking). Readers never lock.
//!
//! Side files never end in `.json` (AnimaWorks' readers glob `*.json`): `.private/<id>.args` (unmasked arguments,
//! mode 0600 in a 0700 folder the sandbox hides, only when masking changed them), `<id>.cancel` (a cancel request), `.lock`, `worker.log`, `.index/`.
//!
//! The index (`.index/active`): the ids of the tasks not yet finished, the live workers that will claim again,
//! and the folder's modification time when it was written. Submit, claim and the concurrency limit read only
//! those tasks' files, so they cost the same with 0 or 10,000 finished tasks stored. Every change to the folder
//! is made under the lock and ends by *sealing* the folder (setting its modification time to one nanosecond
//! before the time the change gave it, a time no later change can give it again) and writing the index with that
//! time. A folder whose time differs (a file put there by hand, or by a runner without the index) and a missing
//! or unreadable index make the next look read every task file once and write the index again. An index that
//! is not sealed (the file system refused the time, or an older runner wrote it) is believed only past a clock
//! tick, or after the task files are counted. Crash-safe: a new task's id goes into the index before its file is
//! written, a finished task's id leaves it after, and an id without a pending or running file (a worker whose
//! process is gone) is dropped at the next look.

use super::{Census, ProcessId, Status, Task, TaskStore};
use awt_core::beneath::Folder;
use rustix::fs::OFlags;
use serde_json::Value;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct FileStore {
    pub dir: PathBuf,
    pub notify_dir: PathBuf,
    /// The language of the notifications (`config.json` `locale`; see [`awt_core::locale`]).
    pub locale: awt_core::locale::Locale,
}

/// The index: the unfinished tasks' ids in submit order, how many task files the folder holds, and the workers
/// that will claim again before they exit (a running worker, or one looking for more).
#[derive(Debug, Clone, PartialEq, Default)]
struct Index {
    ids: Vec<String>,
    files: usize,
    workers: Vec<ProcessId>,
}

/// How long a worker that found nothing to claim waits for a new task before it exits: a burst of submits is run
/// by the workers already there, not by a new process each.
pub const LINGER: std::time::Duration = std::time::Duration::from_millis(100);

/// How a worker's line in the index starts (never a task id: older runners drop the line).
const WORKER_LINE: &str = "worker ";

/// An index written less than this after the folder's last change may not have seen a later change (see
/// [`FileStore::read_index`]): more than a clock tick at any `HZ`.
const RACY_NS: i128 = 50_000_000;

pub use awt_core::dirs::TASKS_PRIVATE_DIR as PRIVATE_DIR;

/// The index's folder and file in the task folder.
const INDEX_DIR: &str = ".index";
const INDEX_FILE: &str = "active";

/// A folder's modification time, in nanoseconds.
fn stamp_of(folder: &Folder) -> io::Result<i128> {
    let m = folder.stat()?;
    Ok(i128::from(m.st_mtime) * 1_000_000_000 + i128::from(m.st_mtime_nsec))
}

fn is_task_file(name: &str) -> bool {
    !name.starts_with('.') && name.ends_with(".json")
}

/// Held while the store is locked; dropping it unlocks.
struct Lock(File);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// A temporary file in `path`'s folder holding `bytes`, to be renamed onto `path`.
fn written_beside(path: &Path, bytes: &[u8]) -> io::Result<tempfile::NamedTempFile> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .suffix(".part")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    Ok(tmp)
}

/// Write `bytes` to `path` atomically: a temporary file in the same folder, then rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = written_beside(path, bytes)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

impl FileStore {
    pub fn for_anima(anima_dir: &Path) -> FileStore {
        let state = anima_dir.join("state");
        FileStore {
            dir: state.join("background_tasks"),
            notify_dir: state.join("background_notifications"),
            locale: Default::default(),
        }
    }

    /// Open `dir` (one of the store's folders, `<anima dir>/state/...`), made with the folders on its way below
    /// the anima dir when `make`, never through a link nor into another user's folder: a tool may have swapped
    /// `state/` for a link to another anima's (or any folder), which would merge stores and send notifications
    /// elsewhere. Every file of the store is then reached from the folder opened here, never by its path: a link
    /// swapped in after this check changes nothing. `None`: missing and not made.
    fn open_dir(dir: &Path, make: bool) -> io::Result<Option<Folder>> {
        match Self::anima_of(dir) {
            // The anima dir itself is the operator's, made as named.
            Some(anima) => awt_core::beneath::folder(anima, dir.strip_prefix(anima).unwrap_or(dir), make),
            None => awt_core::beneath::folder(dir, Path::new(""), make),
        }
    }

    /// The task folder, made if missing.
    fn folder(&self) -> io::Result<Folder> {
        Self::open_dir(&self.dir, true)?.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    /// The task folder, if it exists.
    fn folder_if_any(&self) -> io::Result<Option<Folder>> {
        Self::open_dir(&self.dir, false)
    }

    fn anima_of(dir: &Path) -> Option<&Path> {
        dir.parent().and_then(Path::parent)
    }

    /// The store's folders, where they exist, are plain folders of this user's below the anima dir.
    pub fn checked(&self) -> io::Result<()> {
        for d in [&self.dir, &self.notify_dir] {
            if let Some(anima) = Self::anima_of(d) {
                awt_core::beneath::check(anima, d.strip_prefix(anima).unwrap_or(d))?;
            }
        }
        Ok(())
    }

    pub fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// A side file's name below the task folder (the private arguments' in [`PRIVATE_DIR`]).
    fn side(id: &str, ext: &str) -> String {
        if ext == "args" {
            return format!("{PRIVATE_DIR}/{id}.args");
        }
        format!("{id}.{ext}")
    }

    /// Where a runner before the private folder wrote a task's unmasked arguments (still read, and removed).
    fn old_args(id: &str) -> String {
        format!("{id}.args")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("worker.log")
    }

    fn lock(&self) -> io::Result<Lock> {
        let f = self
            .folder()?
            .open(Path::new(".lock"), OFlags::CREATE | OFlags::RDWR, 0o666)?;
        loop {
            let e = match rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => return Ok(Lock(f)),
                Err(e) => io::Error::from(e),
            };
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    #[cfg(test)]
    fn index_path(&self) -> PathBuf {
        self.dir.join(INDEX_DIR).join(INDEX_FILE)
    }

    /// The index's folder in the task folder `folder`.
    fn index_dir(folder: &Folder, make: bool) -> io::Result<Option<Folder>> {
        folder.sub(INDEX_DIR, make, 0o777)
    }

    /// The folder's modification time, in nanoseconds.
    #[cfg(test)]
    fn stamp(&self) -> io::Result<i128> {
        let folder = self
            .folder_if_any()?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        stamp_of(&folder)
    }

    /// The index as written, when it matches the folder as it is now, with the folder's time.
    fn read_index(&self) -> Option<(Index, i128)> {
        let folder = self.folder_if_any().ok()??;
        let bytes = Self::index_dir(&folder, false)
            .ok()??
            .read(Path::new(INDEX_FILE), awt_core::fsread::TASK)
            .ok()??;
        let text = std::str::from_utf8(&bytes).ok()?;
        let mut lines = text.lines();
        let mut head = lines.next()?.strip_prefix("v1 ")?.split(' ');
        let mut num = || -> Option<i128> { head.next()?.parse().ok() };
        let (stamp, files, written) = (num()?, usize::try_from(num()?).ok()?, num()?);
        let sealed = head.next() == Some("sealed");
        if stamp_of(&folder).ok()? != stamp {
            return None;
        }
        // Why count: the folder's time moves in clock ticks (milliseconds), so a file added within the tick of
        // the index's last write leaves it unchanged; then the names are counted (no file is read). A sealed
        // folder's time is one no change can give it, so any change since moved it.
        if !sealed && written - stamp < RACY_NS && Self::count_files(&folder).ok()? != files {
            return None;
        }
        let mut index = Index {
            files,
            ..Default::default()
        };
        for l in lines {
            if let Some(w) = l.strip_prefix(WORKER_LINE) {
                let mut f = w.split(' ');
                let (Some(pid), Some(start), Some(boot)) = (f.next(), f.next(), f.next()) else {
                    continue;
                };
                if let (Ok(pid), Ok(start_time)) = (pid.parse(), start.parse()) {
                    let boot_id = boot.to_owned();
                    index.workers.push(ProcessId {
                        pid,
                        start_time,
                        boot_id,
                    });
                }
            } else if super::valid_task_id(l) {
                // A forged line is no id: it is dropped, never joined into a path.
                index.ids.push(l.to_owned());
            }
        }
        Some((index, stamp))
    }

    /// How many task files (`*.json`) the folder holds, by name.
    fn count_files(folder: &Folder) -> io::Result<usize> {
        Ok(folder
            .names(None)?
            .iter()
            .filter(|n| is_task_file(&n.to_string_lossy()))
            .count())
    }

    /// Run `f` under the lock with the index (the unfinished tasks' ids, which it may change, and the count of
    /// task files, which it keeps true); then seal the folder and write the index for the folder as `f` left it.
    fn locked<T>(&self, f: impl FnOnce(&mut Index) -> io::Result<T>) -> io::Result<T> {
        let _lock = self.lock()?;
        let folder = self.folder()?;
        let before = self.read_index();
        let mut index = match &before {
            Some((i, _)) => i.clone(),
            None => {
                Self::index_dir(&folder, true)?;
                let all = self.list()?;
                Index {
                    files: Self::count_files(&folder)?,
                    ids: all
                        .into_iter()
                        .filter(|t| !t.status.is_final())
                        .map(|t| t.task_id)
                        .collect(),
                    workers: Vec::new(),
                }
            }
        };
        let out = f(&mut index);
        // Written even when `f` failed half-way: what it did write is in the folder.
        let stamp = stamp_of(&folder)?;
        let unchanged = before.as_ref().is_some_and(|(i, s)| *s == stamp && *i == index);
        if !unchanged {
            let sealed = Self::seal(&folder, stamp);
            let written = i128::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            )
            .unwrap_or(0);
            let mut text = match sealed {
                Some(s) => format!("v1 {s} {} {written} sealed\n", index.files),
                None => format!("v1 {stamp} {} {written}\n", index.files),
            };
            for id in &index.ids {
                text.push_str(id);
                text.push('\n');
            }
            for w in &index.workers {
                text.push_str(&format!("{WORKER_LINE}{} {} {}\n", w.pid, w.start_time, w.boot_id));
            }
            // Exchanged, not renamed over: ext4 flushes a file renamed over another (`auto_da_alloc`) at once, on
            // every look. The index needs no such care: one lost or torn in a crash is unreadable and rebuilt.
            let index_dir = Self::index_dir(&folder, true)?.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            index_dir.write_exchanging(INDEX_FILE, text.as_bytes())?;
        }
        out
    }

    /// Set the folder's time to one nanosecond before `stamp` (the time its last change gave it): a time the
    /// clock has passed, so any later change (by whoever, locked or not) gives the folder another. The time as
    /// set, or `None` when the file system does not take it (then the index is believed as an unsealed one).
    fn seal(folder: &Folder, stamp: i128) -> Option<i128> {
        let want = stamp - 1;
        let secs = i64::try_from(want.div_euclid(1_000_000_000)).ok()?;
        let nanos = u32::try_from(want.rem_euclid(1_000_000_000)).ok()?;
        folder.set_modified(secs, nanos).ok()?;
        (stamp_of(folder).ok()? == want).then_some(want)
    }

    /// What changes whenever the index is written (the file is replaced, so its inode changes): a worker waiting
    /// for a new task looks at this, not at the tasks.
    pub fn index_mark(&self) -> Option<(u64, i128)> {
        let folder = self.folder_if_any().ok()??;
        let m = Self::index_dir(&folder, false).ok()??.stat_of(INDEX_FILE).ok()?;
        Some((
            m.st_ino,
            i128::from(m.st_mtime) * 1_000_000_000 + i128::from(m.st_mtime_nsec),
        ))
    }

    /// Save a changed task; one that ended gets its notification first, so that no kill between the two loses it.
    fn save_changed(&self, t: &Task) -> io::Result<()> {
        if t.status.is_final() {
            if let Err(e) = self.notify(t) {
                tracing::warn!("cannot write the notification of task {}: {e}", t.task_id);
            }
        }
        self.save(t)
    }

    fn save(&self, t: &Task) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(t).map_err(io::Error::other)?;
        bytes.push(b'\n');
        self.folder()?.write_atomic(&format!("{}.json", t.task_id), &bytes)
    }

    /// The task file `name` of `folder`.
    fn read(folder: &Folder, name: &str) -> io::Result<Option<Task>> {
        match folder.read(Path::new(name), awt_core::fsread::TASK)? {
            Some(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
                let path = folder.path().join(name);
                io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
            }),
            None => Ok(None),
        }
    }

    /// The unfinished tasks of `ids`, in submit order; ids without such a task are dropped.
    fn active_tasks(&self, ids: &mut Vec<String>) -> Vec<Task> {
        let mut tasks: Vec<Task> = Vec::with_capacity(ids.len());
        ids.retain(|id| match self.get(id) {
            Ok(Some(t)) if !t.status.is_final() && t.task_id == *id => {
                tasks.push(t);
                true
            }
            _ => false,
        });
        sort_in_submit_order(&mut tasks);
        tasks
    }

    /// Mark dead running tasks lost; the caller holds the lock and gives the index's ids, from which the lost go.
    fn census_locked(&self, index: &mut Index) -> io::Result<(Census, Vec<Task>)> {
        let mut census = Census::default();
        let mut tasks = self.active_tasks(&mut index.ids);
        for t in tasks.iter_mut() {
            match t.status {
                Status::Pending => {
                    census.pending += 1;
                    if super::now_s() - t.updated_at >= super::queue::KICK_GRACE.as_secs_f64() {
                        census.stale_pending += 1;
                    }
                }
                Status::Running => {
                    if ProcessId::of_task(t).is_some_and(|p| p.alive()) {
                        census.running += 1;
                    } else {
                        mark_lost(t);
                        self.save(t)?;
                        index.ids.retain(|i| *i != t.task_id);
                        self.release_locked(&t.task_id);
                        let _ = self.notify(t);
                        census.lost.push(t.clone());
                    }
                }
                _ => {}
            }
        }
        tasks.retain(|t| !t.status.is_final());
        // A worker whose process is gone claims nothing more.
        index.workers.retain(|w| w.alive());
        Ok((census, tasks))
    }

    fn release_locked(&self, id: &str) {
        let Ok(folder) = self.folder() else { return };
        if let Ok(Some(private)) = folder.sub(PRIVATE_DIR, false, 0o700) {
            let _ = private.remove(&format!("{id}.args"));
        }
        let _ = folder.remove(&Self::old_args(id));
        let _ = folder.remove(&Self::side(id, "cancel"));
    }
}

fn sort_in_submit_order(tasks: &mut [Task]) {
    tasks.sort_by(|a, b| {
        a.created_at
            .total_cmp(&b.created_at)
            .then_with(|| a.task_id.cmp(&b.task_id))
    });
}

fn mark_lost(t: &mut Task) {
    let who = t.pid.map(|p| format!("(pid {p}) ")).unwrap_or_default();
    t.finish(Status::Lost);
    t.error_code = Some("lost".into());
    t.error = Some(format!(
        "lost: the worker {who}running this task is gone (killed, or the machine restarted)"
    ));
    t.error_detail = Some(serde_json::json!({
        "code": "lost",
        "message": t.error.clone(),
        "hint": "submit the task again; `animaworks-tool jobs show` has what was recorded",
        "tool": t.tool, "action": t.action,
    }));
}

impl FileStore {
    /// Move a task file that must never run aside (`<id>.json.refused`, which no listing reads), with its private
    /// arguments and cancel request gone.
    pub fn move_aside(&self, id: &str) -> io::Result<()> {
        self.locked(|index| {
            let name = format!("{id}.json");
            self.folder()?.rename(&name, &format!("{name}.refused"))?;
            index.ids.retain(|i| i != id);
            index.files = index.files.saturating_sub(1);
            self.release_locked(id);
            Ok(())
        })
    }

    /// A worker's claim ([`TaskStore::claim`]) that also keeps the worker in the index while it will claim again:
    /// with `leave`, a worker that gets nothing leaves the index in the same look (after which no submit counts on
    /// it). A submit that finds enough such workers starts none ([`FileStore::create_and_start`]).
    pub fn worker_claim(&self, owner: &ProcessId, limit: usize, leave: bool) -> io::Result<Option<Task>> {
        self.locked(|index| {
            let got = self.claim_locked(index, owner, limit)?;
            index.workers.retain(|w| w != owner);
            if got.is_some() || !leave {
                index.workers.push(owner.clone());
            }
            Ok(got)
        })
    }

    /// A worker's end of a task and its next claim in one look: `f` records the outcome of `id` (false: leave
    /// it); then, as [`FileStore::worker_claim`] without leaving, the next pending task. Returns the task as
    /// finished (its notification written, its private files removed) and the next one.
    pub fn finish_and_claim(
        &self,
        id: &str,
        f: &mut dyn FnMut(&mut Task) -> bool,
        owner: &ProcessId,
        limit: usize,
    ) -> io::Result<(Option<Task>, Option<Task>)> {
        self.locked(|index| {
            let finished = match self.get(id)? {
                Some(mut t) => {
                    if f(&mut t) {
                        self.save_changed(&t)?;
                    }
                    if t.status.is_final() {
                        index.ids.retain(|i| i != id);
                        self.release_locked(id);
                    }
                    Some(t)
                }
                None => None,
            };
            let next = self.claim_locked(index, owner, limit)?;
            index.workers.retain(|w| w != owner);
            index.workers.push(owner.clone());
            Ok((finished, next))
        })
    }

    /// A worker that stops without a last claim (SIGTERM, an error) leaves the index.
    pub fn leave(&self, owner: &ProcessId) {
        let _ = self.locked(|index| {
            index.workers.retain(|w| w != owner);
            Ok(())
        });
    }

    fn claim_locked(&self, index: &mut Index, owner: &ProcessId, limit: usize) -> io::Result<Option<Task>> {
        let (census, tasks) = self.census_locked(index)?;
        if census.running >= limit {
            return Ok(None);
        }
        // The unfinished tasks are in submit order.
        let Some(mut t) = tasks.into_iter().find(|t| t.status == Status::Pending) else {
            return Ok(None);
        };
        let now = super::now_s();
        t.status = Status::Running;
        t.started_at = Some(now);
        t.updated_at = now;
        t.pid = Some(owner.pid);
        t.pid_start_time = Some(owner.start_time);
        t.boot_id = Some(owner.boot_id.clone());
        t.worker_token = super::identity::own_secret().map(|s| super::identity::token(&s, &t.task_id));
        self.save(&t)?;
        Ok(Some(t))
    }

    fn create_locked(&self, index: &mut Index, task: &Task, private_args: Option<&Value>) -> io::Result<()> {
        let folder = self.folder()?;
        if let Some(args) = private_args {
            let private = folder
                .sub(PRIVATE_DIR, true, 0o700)?
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY;
            let mut f = private.open(Path::new(&format!("{}.args", task.task_id)), flags, 0o600)?;
            f.write_all(&serde_json::to_vec(args).map_err(io::Error::other)?)?;
        }
        if folder.has(&format!("{}.json", task.task_id)) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("task {} exists", task.task_id),
            ));
        }
        if !task.status.is_final() && !index.ids.contains(&task.task_id) {
            index.ids.push(task.task_id.clone());
        }
        index.files += 1;
        self.save(task)
    }
}

/// Must a submit start a worker? Not when the workers that will claim again and hold no task (each takes one
/// pending task, oldest first) are enough for the pending tasks, or for the free slots.
fn worker_needed(index: &Index, census: &Census, active: &[Task], limit: usize) -> bool {
    let busy: Vec<i32> = active
        .iter()
        .filter(|t| t.status == Status::Running)
        .filter_map(|t| t.pid)
        .collect();
    let idle = index.workers.iter().filter(|w| !busy.contains(&w.pid)).count();
    idle < census.pending && census.running + idle < limit
}

impl TaskStore for FileStore {
    fn create(&self, task: &Task, private_args: Option<&Value>) -> io::Result<()> {
        self.locked(|index| self.create_locked(index, task, private_args))
    }

    fn create_and_start(
        &self,
        task: &Task,
        private_args: Option<&Value>,
        dirs: &awt_core::dirs::Dirs,
    ) -> io::Result<io::Result<()>> {
        let limit = awt_core::settings::Settings::load(&dirs.data)
            .map(|s| s.max_running_tasks)
            .unwrap_or(super::queue::DEFAULT_MAX_RUNNING);
        // One look: store the task, mark the tasks of dead workers lost (as every task command does), and see
        // whether a worker that will claim again is free for it.
        let needed = self.locked(|index| {
            self.create_locked(index, task, private_args)?;
            let (census, active) = self.census_locked(index)?;
            Ok(worker_needed(index, &census, &active, limit))
        })?;
        Ok(if needed { self.start_worker(dirs) } else { Ok(()) })
    }

    fn get(&self, id: &str) -> io::Result<Option<Task>> {
        if !super::valid_task_id(id) {
            return Ok(None);
        }
        match self.folder_if_any()? {
            Some(folder) => Self::read(&folder, &format!("{id}.json")),
            None => Ok(None),
        }
    }

    fn list(&self) -> io::Result<Vec<Task>> {
        let Some(folder) = self.folder_if_any()? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for name in folder.names(None)? {
            let name = name.to_string_lossy();
            if !is_task_file(&name) {
                continue;
            }
            if let Ok(Some(t)) = Self::read(&folder, &name) {
                out.push(t);
            }
        }
        sort_in_submit_order(&mut out);
        Ok(out)
    }

    fn list_active(&self) -> io::Result<Vec<Task>> {
        // Unlocked, as every reader: the index is replaced whole, and a stale one is read around.
        let Some((mut index, _)) = self.read_index() else {
            return Ok(self.list()?.into_iter().filter(|t| !t.status.is_final()).collect());
        };
        Ok(self.active_tasks(&mut index.ids))
    }

    fn update(&self, id: &str, f: &mut dyn FnMut(&mut Task) -> bool) -> io::Result<Option<Task>> {
        self.locked(|index| {
            let Some(mut t) = self.get(id)? else { return Ok(None) };
            if f(&mut t) {
                self.save_changed(&t)?;
                if t.status.is_final() {
                    index.ids.retain(|i| i != id);
                }
            }
            Ok(Some(t))
        })
    }

    fn census(&self) -> io::Result<Census> {
        self.locked(|index| Ok(self.census_locked(index)?.0))
    }

    fn claim(&self, owner: &ProcessId, limit: usize) -> io::Result<Option<Task>> {
        self.locked(|index| self.claim_locked(index, owner, limit))
    }

    fn private_args(&self, id: &str) -> io::Result<Option<Value>> {
        if !super::valid_task_id(id) {
            return Ok(None);
        }
        let Some(folder) = self.folder_if_any()? else {
            return Ok(None);
        };
        let mut bytes = folder.read(Path::new(&Self::side(id, "args")), awt_core::fsread::TASK);
        if matches!(bytes, Ok(None)) {
            bytes = folder.read(Path::new(&Self::old_args(id)), awt_core::fsread::TASK);
        }
        match bytes? {
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            None => Ok(None),
        }
    }

    fn request_cancel(&self, id: &str) -> io::Result<()> {
        self.locked(|_| self.folder()?.write_atomic(&Self::side(id, "cancel"), b""))
    }

    fn cancel_requested(&self, id: &str) -> bool {
        matches!(self.folder_if_any(), Ok(Some(f)) if f.has(&Self::side(id, "cancel")))
    }

    fn release(&self, id: &str) {
        let has = |name: &str| matches!(self.folder_if_any(), Ok(Some(f)) if f.open(Path::new(name), OFlags::PATH, 0).is_ok());
        // Under the lock only when there is something to remove: removing changes the folder (see the index).
        if has(&Self::side(id, "args")) || has(&Self::side(id, "cancel")) {
            let _ = self.locked(|_| {
                self.release_locked(id);
                Ok(())
            });
        }
    }

    fn notify(&self, t: &Task) -> io::Result<()> {
        let folder = Self::open_dir(&self.notify_dir, true)?.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let text = t.notification(self.locale);
        folder.write_atomic(&format!("{}.md", t.task_id), text.as_bytes())
    }

    fn remove(&self, id: &str) -> io::Result<()> {
        self.locked(|index| {
            self.release_locked(id);
            index.ids.retain(|i| i != id);
            match self.folder()?.remove(&format!("{id}.json")) {
                Ok(()) => {
                    index.files = index.files.saturating_sub(1);
                    Ok(())
                }
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                Err(_) => Ok(()),
            }
        })
    }

    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn worker_alive(&self, t: &Task) -> bool {
        ProcessId::of_task(t).is_some_and(|p| p.alive())
    }

    fn kill_worker(&self, t: &Task) -> String {
        // Only when it is provably this task's worker (a task file may be forged to name any process).
        match super::identity::proves_worker(t) {
            Ok(pid) => {
                if let Some(p) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
                "its worker did not stop in time and was killed".to_owned()
            }
            Err(why) => {
                tracing::warn!("task {}: the worker was not signalled: {why}", t.task_id);
                format!("its worker did not answer and was not signalled ({why})")
            }
        }
    }

    fn kick(&self, dirs: &awt_core::dirs::Dirs) -> io::Result<()> {
        let limit = awt_core::settings::Settings::load(&dirs.data)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?
            .max_running_tasks;
        // Tasks that waited past KICK_GRACE with a slot free: a worker that died before claiming must not leave
        // them pending for ever.
        let c = self.census()?;
        if c.stale_pending > 0 && c.running < limit {
            self.start_worker(dirs)?;
        }
        Ok(())
    }

    fn start_worker(&self, dirs: &awt_core::dirs::Dirs) -> io::Result<()> {
        // Why not by path: a FIFO put in the log's place must not block the submit (no reader: the open fails
        // instead), and a link put there (or on the way) must not make the worker append where it points.
        let log = self.folder().and_then(|f| {
            f.open(
                Path::new("worker.log"),
                OFlags::CREATE | OFlags::WRONLY | OFlags::APPEND | OFlags::NONBLOCK,
                0o666,
            )
        });
        super::queue::spawn_worker(dirs, log)
    }

    fn is_local(&self) -> bool {
        true
    }
}

/// The store of the runner's anima; a runner without an anima dir cannot keep tasks.
pub fn store_of(runner: &awt_core::Runner) -> Result<FileStore, awt_core::CallError> {
    match &runner.dirs.anima {
        Some(a) => {
            let store = FileStore {
                locale: awt_core::locale::Locale::of_data_dir(&runner.dirs.data),
                ..FileStore::for_anima(a)
            };
            store.checked().map_err(|e| {
                awt_core::CallError::new(
                    awt_core::ErrorCode::PermissionDenied,
                    format!("the task store of {} cannot be used: {e}", a.display()),
                )
            })?;
            Ok(store)
        }
        None => Err(awt_core::CallError::new(
            awt_core::ErrorCode::Usage,
            "background tasks need an anima: they are kept under <anima dir>/state/background_tasks",
        )
        .hint(format!(
            "pass --anima-dir DIR or set {}",
            awt_core::env_vars::ANIMA_DIR.name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn task(id: &str, status: &str, created_at: f64) -> Task {
        serde_json::from_value(
            serde_json::json!({"task_id": id, "anima_name": "alice", "tool_name": "echo:say",
            "tool_args": {}, "status": status, "created_at": created_at, "completed_at": null, "result": null,
            "error": null, "tool": "echo", "action": "say", "kind": "action", "updated_at": created_at}),
        )
        .unwrap()
    }

    fn me() -> ProcessId {
        ProcessId::of_self()
    }

    #[test]
    fn private_arguments_go_into_the_private_folder_and_are_read_from_there() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::for_anima(d.path());
        store
            .create(
                &task("00000000000c", "pending", 0.0),
                Some(&serde_json::json!({"k": "v"})),
            )
            .unwrap();
        let dir = d.path().join("state/background_tasks");
        assert!(dir.join(".private/00000000000c.args").is_file());
        assert!(!dir.join("00000000000c.args").exists());
        let mode = fs::metadata(dir.join(PRIVATE_DIR)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(
            store.private_args("00000000000c").unwrap(),
            Some(serde_json::json!({"k": "v"}))
        );
        // A task queued by a runner before the private folder keeps its arguments.
        fs::write(dir.join("00000000000d.args"), br#"{"old": 1}"#).unwrap();
        assert_eq!(
            store.private_args("00000000000d").unwrap(),
            Some(serde_json::json!({"old": 1}))
        );
    }

    /// The notification used to be the caller's second step after the update, so a worker killed between the two
    /// left a finished task that no anima was ever told of. The update that ends a task writes it, first.
    #[test]
    fn the_update_that_ends_a_task_writes_its_notification() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::for_anima(d.path());
        store.create(&task("00000000000a", "running", 0.0), None).unwrap();
        let note = d.path().join("state/background_notifications/00000000000a.md");
        store
            .update("00000000000a", &mut |t| {
                t.progress = None;
                true
            })
            .unwrap();
        assert!(!note.exists(), "a task still running has no notification");
        store
            .update("00000000000a", &mut |t| {
                t.finish(Status::Completed);
                true
            })
            .unwrap();
        assert!(note.is_file(), "the ended task's notification was not written");
        assert!(fs::read_to_string(&note).unwrap().contains("00000000000a"));
    }

    #[test]
    fn a_claim_reads_only_the_unfinished_tasks() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::for_anima(d.path());
        for (i, id) in ["00000000000a", "00000000000b"].iter().enumerate() {
            store.create(&task(id, "pending", i as f64), None).unwrap();
        }
        store
            .update("00000000000a", &mut |t| {
                t.finish(Status::Completed);
                true
            })
            .unwrap();
        // Rewritten in place (the folder's time does not move): a store that read every file would now take this
        // older "pending" task first; the index knows it finished.
        let mut forged = serde_json::to_vec(&task("00000000000a", "pending", 0.0)).unwrap();
        forged.push(b'\n');
        fs::write(store.path("00000000000a"), forged).unwrap();
        let claimed = store.claim(&me(), 4).unwrap().expect("a pending task");
        assert_eq!(claimed.task_id, "00000000000b");
        assert!(store.claim(&me(), 4).unwrap().is_none());
        let active: Vec<String> = store.list_active().unwrap().into_iter().map(|t| t.task_id).collect();
        assert_eq!(active, ["00000000000b"]);
    }

    #[test]
    fn a_task_file_put_there_by_hand_is_seen_at_the_next_look() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::for_anima(d.path());
        store.create(&task("00000000000a", "completed", 1.0), None).unwrap();
        assert_eq!(store.census().unwrap().pending, 0);
        // At once (within the folder clock's tick of the index's write) and a while later.
        write_atomic(
            &store.path("00000000000b"),
            &serde_json::to_vec(&task("00000000000b", "pending", 2.0)).unwrap(),
        )
        .unwrap();
        assert_eq!(store.census().unwrap().pending, 1);
        std::thread::sleep(std::time::Duration::from_millis(60));
        write_atomic(
            &store.path("00000000000c"),
            &serde_json::to_vec(&task("00000000000c", "pending", 3.0)).unwrap(),
        )
        .unwrap();
        assert_eq!(store.census().unwrap().pending, 2);
        assert_eq!(store.claim(&me(), 4).unwrap().unwrap().task_id, "00000000000b");
    }

    #[test]
    fn a_lost_or_forged_index_is_rebuilt_from_the_task_files() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::for_anima(d.path());
        store.create(&task("00000000000a", "pending", 1.0), None).unwrap();
        fs::remove_file(store.index_path()).unwrap();
        assert_eq!(store.census().unwrap().pending, 1);
        // A forged index naming a path outside the folder and a task that does not exist: neither is read.
        let stamp = store.stamp().unwrap();
        fs::write(
            store.index_path(),
            format!("v1 {stamp} 1 0\n../../../etc/passwd\n0000000000ff\n"),
        )
        .unwrap();
        // Believed as far as it names tasks (it can hide one, as a forged task file can fake one).
        assert_eq!(store.census().unwrap().pending, 0);
        let index = fs::read_to_string(store.index_path()).unwrap();
        assert!(!index.contains("passwd") && !index.contains("0000000000ff"), "{index}");
    }

    #[test]
    fn a_look_seals_the_folder_so_that_no_later_change_keeps_its_time() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::for_anima(d.path());
        store.create(&task("00000000000a", "pending", 1.0), None).unwrap();
        let head = fs::read_to_string(store.index_path()).unwrap();
        let head = head.lines().next().unwrap().to_owned();
        assert!(head.ends_with(" sealed"), "{head}");
        let stamp: i128 = head.split(' ').nth(1).unwrap().parse().unwrap();
        assert_eq!(store.stamp().unwrap(), stamp);
        // A file put there at once (within the clock's tick) moves the time off the seal: seen without a count.
        write_atomic(
            &store.path("00000000000b"),
            &serde_json::to_vec(&task("00000000000b", "pending", 2.0)).unwrap(),
        )
        .unwrap();
        assert_ne!(store.stamp().unwrap(), stamp);
        assert_eq!(store.census().unwrap().pending, 2);
    }

    fn needed(store: &FileStore, limit: usize) -> bool {
        store
            .locked(|i| {
                let (c, a) = store.census_locked(i)?;
                Ok(worker_needed(i, &c, &a, limit))
            })
            .unwrap()
    }

    #[test]
    fn a_submit_counts_on_a_free_worker_in_the_index_and_on_no_busy_or_dead_one() {
        let d = tempfile::tempdir().unwrap();
        let store = FileStore::for_anima(d.path());
        store.create(&task("00000000000a", "completed", 0.0), None).unwrap();
        // Nothing to claim: the worker stays in the index (it lingers), and a new task needs no other worker.
        assert!(store.worker_claim(&me(), 4, false).unwrap().is_none());
        store.create(&task("00000000000b", "pending", 1.0), None).unwrap();
        assert!(!needed(&store, 4));
        // Busy with that task, it is no help for the next one.
        assert_eq!(
            store.worker_claim(&me(), 4, false).unwrap().unwrap().task_id,
            "00000000000b"
        );
        store.create(&task("00000000000c", "pending", 2.0), None).unwrap();
        assert!(needed(&store, 4));
        // ... unless no slot is free anyway.
        assert!(!needed(&store, 1));
        // It finishes b and takes c in one look; then, leaving with nothing to claim, it is gone from the index.
        let (done, next) = store
            .finish_and_claim(
                "00000000000b",
                &mut |t| {
                    t.finish(Status::Completed);
                    true
                },
                &me(),
                4,
            )
            .unwrap();
        assert_eq!(done.unwrap().status, Status::Completed);
        assert_eq!(next.unwrap().task_id, "00000000000c");
        store
            .update("00000000000c", &mut |t| {
                t.finish(Status::Completed);
                true
            })
            .unwrap();
        assert!(store.worker_claim(&me(), 4, true).unwrap().is_none());
        store.create(&task("00000000000d", "pending", 3.0), None).unwrap();
        assert!(needed(&store, 4));
        // A worker whose process is gone (a start time that is not its own) counts for nothing.
        let ghost = ProcessId {
            start_time: me().start_time + 1,
            ..me()
        };
        assert!(store.worker_claim(&ghost, 0, false).unwrap().is_none());
        assert!(needed(&store, 4));
        assert!(!fs::read_to_string(store.index_path()).unwrap().contains("worker "));
    }
}
