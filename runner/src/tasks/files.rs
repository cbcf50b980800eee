//! The file store: one JSON file per task in `<anima dir>/state/background_tasks/<task_id>.json`, written by
//! rename from a temporary file in the same folder (a reader sees the old file or the new one, never half), and
//! an `flock`ed `.lock` file for every read-modify-write (claims, updates, lost marking). Readers never lock.
//!
//! Side files never end in `.json` (AnimaWorks' readers glob `*.json`): `<id>.args` (unmasked arguments, mode
//! 0600, only when masking changed them), `<id>.cancel` (a cancel request), `.lock`, `worker.log`.

use super::{Census, ProcessId, Status, Task, TaskStore};
use serde_json::Value;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct FileStore {
    pub dir: PathBuf,
    pub notify_dir: PathBuf,
    /// The language of the notifications (`config.json` `locale`; see [`crate::locale`]).
    pub locale: crate::locale::Locale,
}

/// Held while the store is locked; dropping it unlocks.
struct Lock(File);

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// Write `bytes` to `path` atomically: a temporary file in the same folder, then rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .suffix(".part")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
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

    pub fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn side(&self, id: &str, ext: &str) -> PathBuf {
        self.dir.join(format!("{id}.{ext}"))
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("worker.log")
    }

    fn lock(&self) -> io::Result<Lock> {
        fs::create_dir_all(&self.dir)?;
        let f = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .open(self.dir.join(".lock"))?;
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

    fn save(&self, t: &Task) -> io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(t).map_err(io::Error::other)?;
        bytes.push(b'\n');
        write_atomic(&self.path(&t.task_id), &bytes)
    }

    fn read(path: &Path) -> io::Result<Option<Task>> {
        match crate::fsread::read(path, crate::fsread::TASK) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Mark dead running tasks lost; the caller holds the lock.
    fn census_locked(&self) -> io::Result<(Census, Vec<Task>)> {
        let mut census = Census::default();
        let mut tasks = self.list()?;
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
                        self.release(&t.task_id);
                        let _ = self.notify(t);
                        census.lost.push(t.clone());
                    }
                }
                _ => {}
            }
        }
        Ok((census, tasks))
    }
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
        let _lock = self.lock()?;
        let mut to = self.path(id).into_os_string();
        to.push(".refused");
        fs::rename(self.path(id), to)?;
        let _ = fs::remove_file(self.side(id, "args"));
        let _ = fs::remove_file(self.side(id, "cancel"));
        Ok(())
    }
}

impl TaskStore for FileStore {
    fn create(&self, task: &Task, private_args: Option<&Value>) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        if let Some(args) = private_args {
            let mut f = OpenOptions::new()
                .create_new(true)
                .write(true)
                .mode(0o600)
                .open(self.side(&task.task_id, "args"))?;
            f.write_all(&serde_json::to_vec(args).map_err(io::Error::other)?)?;
        }
        if self.path(&task.task_id).exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("task {} exists", task.task_id),
            ));
        }
        self.save(task)
    }

    fn get(&self, id: &str) -> io::Result<Option<Task>> {
        if !super::valid_task_id(id) {
            return Ok(None);
        }
        Self::read(&self.path(id))
    }

    fn list(&self) -> io::Result<Vec<Task>> {
        let rd = match fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            if let Ok(Some(t)) = Self::read(&e.path()) {
                out.push(t);
            }
        }
        out.sort_by(|a, b| {
            a.created_at
                .total_cmp(&b.created_at)
                .then_with(|| a.task_id.cmp(&b.task_id))
        });
        Ok(out)
    }

    fn update(&self, id: &str, f: &mut dyn FnMut(&mut Task) -> bool) -> io::Result<Option<Task>> {
        let _lock = self.lock()?;
        let Some(mut t) = self.get(id)? else { return Ok(None) };
        if f(&mut t) {
            self.save(&t)?;
        }
        Ok(Some(t))
    }

    fn census(&self) -> io::Result<Census> {
        let _lock = self.lock()?;
        Ok(self.census_locked()?.0)
    }

    fn claim(&self, owner: &ProcessId, limit: usize) -> io::Result<Option<Task>> {
        let _lock = self.lock()?;
        let (census, tasks) = self.census_locked()?;
        if census.running >= limit {
            return Ok(None);
        }
        // `list` is in submit order.
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

    fn private_args(&self, id: &str) -> io::Result<Option<Value>> {
        match crate::fsread::read(&self.side(id, "args"), crate::fsread::TASK) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn request_cancel(&self, id: &str) -> io::Result<()> {
        write_atomic(&self.side(id, "cancel"), b"")
    }

    fn cancel_requested(&self, id: &str) -> bool {
        self.side(id, "cancel").exists()
    }

    fn release(&self, id: &str) {
        let _ = fs::remove_file(self.side(id, "args"));
        let _ = fs::remove_file(self.side(id, "cancel"));
    }

    fn notify(&self, t: &Task) -> io::Result<()> {
        fs::create_dir_all(&self.notify_dir)?;
        let text = t.notification(self.locale);
        write_atomic(&self.notify_dir.join(format!("{}.md", t.task_id)), text.as_bytes())
    }

    fn remove(&self, id: &str) -> io::Result<()> {
        self.release(id);
        match fs::remove_file(self.path(id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
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

    fn kick(&self, dirs: &crate::dirs::Dirs) -> io::Result<()> {
        let limit = crate::settings::Settings::load(&dirs.data)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?
            .max_running_tasks;
        super::queue::kick_if_needed(dirs, self, limit)
    }

    fn start_worker(&self, dirs: &crate::dirs::Dirs) -> io::Result<()> {
        super::queue::spawn_worker(dirs, self)
    }

    fn is_local(&self) -> bool {
        true
    }
}
