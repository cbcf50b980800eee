//! The call's private temp dir (`$TMP`, `TMPDIR`). Every call's dir sits in one folder of the runner's user,
//! `/tmp/animaworks-tool-<uid>/` (0700, checked to be the user's own; the same for every runner of the user,
//! whatever its own `TMPDIR`), so that a sandboxed call hides all the others' with one mount over that folder,
//! those of calls started after it included, and finds them without reading `/tmp` ([`calls_dir`]; where the
//! folder cannot be had, the dirs go into the temp dir itself, named `animaworks-tool-call-*`, and the planner
//! hides the ones it sees).
//!
//! An ended call's dir is taken back instead of removed and made again: on an ext4 without a journal each
//! `mkdir` scans past the inodes deleted in the last minutes (`recently_deleted`), which after a few hundred
//! calls was a large share of a cold listing's CPU time (bench/README.md). A long-lived runner (MCP server,
//! `use-tool --serve`, a listing that probes many tools) keeps them in memory; at its exit, and at the end of a
//! one-shot call, they are parked in the calls folder (`spare-<key>-0` and `-1`), for the next process to rename
//! to a name of its own.
//!
//! A dir goes back only to a call of the same tool file for the same anima and data dir (its [`ReuseKey`]):
//! an ended call's processes are gone, but a descriptor of the dir (and of the call's mount namespace, which
//! keeps Landlock's way up from it) may have been handed to a process of another call over a UNIX socket, so
//! whoever takes the dir must be one the tool that had it could reach anyway: its own next call.
//!
//! A dir is taken back only when nothing of its call can touch it again and the call left no trace in it: every
//! process the plan confined was a PID namespace's init that has exited (so every process of that namespace
//! has, and only they had it in their Landlock grants), the dir is empty, still `0700`, owned by the runner, with
//! no extended attribute (an ACL is one) and its inode flags as made, and its path still names it. A parked dir
//! is checked again by whoever takes it (anything of the runner's user could have changed it in between).
//! Anything else is removed as before.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Dirs kept for the next calls of this process.
#[derive(Debug, Default)]
pub(crate) struct Spares(Mutex<Vec<Made>>);

/// The process's spares; removed at its orderly exit ([`release_spares`]).
static SPARES: Spares = Spares(Mutex::new(Vec::new()));

/// At most this many dirs are kept: as many as calls start at once, and some.
fn cap() -> usize {
    static CAP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CAP.get_or_init(|| crate::width::start_width() * 2)
}

/// A dir this process made, held open so that its inode number cannot name another dir while it is kept.
#[derive(Debug)]
struct Made {
    path: PathBuf,
    fd: OwnedFd,
    id: (u64, u64),
    flags: Option<u32>,
    key: ReuseKey,
}

/// Whose calls may have a dir after one another: one tool file, for one anima, in one data dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ReuseKey(u64);

impl ReuseKey {
    /// A call of the tool file `tool`.
    pub(crate) fn of(data: &Path, anima: Option<&Path>, tool: &Path) -> ReuseKey {
        Self::hash(("call", data, anima, tool))
    }

    /// A `--schemas` probe of a tool in the folder `tools`: every probe of one anima and folder has the same grants
    /// (the anima's, the folder's; no credential, no arguments), so what one probe could leave for the next it
    /// could read itself. (A cold listing probes hundreds of tools; a dir made for each was a sixth of its CPU.)
    pub(crate) fn of_probe(data: &Path, anima: Option<&Path>, tools: &Path) -> ReuseKey {
        Self::hash(("probe", data, anima, tools))
    }

    fn hash(v: impl std::hash::Hash) -> ReuseKey {
        use std::hash::Hasher;
        // SipHash with fixed keys: the same in every process of this build (a parked dir's name carries it).
        let mut h = std::hash::DefaultHasher::new();
        v.hash(&mut h);
        ReuseKey(h.finish())
    }
}

/// What ran with the dir in its grants.
#[derive(Debug, Default)]
struct Starts {
    /// Processes confined with this plan (each [`crate::sandbox::Plan::confine`]).
    confined: usize,
    /// A pidfd of each one started (a PID namespace's init) not yet seen ended.
    inits: Vec<OwnedFd>,
    /// Those seen ended (their pidfds closed, so a plan that starts worker after worker holds no more).
    exited: usize,
    /// A process was confined without a PID namespace (it may leave processes behind), or its pidfd could not
    /// be had.
    unknown: bool,
}

#[derive(Debug)]
pub(crate) struct CallTmp {
    made: Option<Made>,
    /// Named, never made: the temp dir of a plan made to decide ([`CallTmp::planned`]).
    planned: Option<PathBuf>,
    starts: Mutex<Starts>,
    spares: &'static Spares,
}

impl CallTmp {
    /// A kept dir of an earlier call of the same key when one is still as it was left, else a new one.
    pub(crate) fn new(key: ReuseKey) -> std::io::Result<CallTmp> {
        Self::new_in(&SPARES, key)
    }

    pub(crate) fn new_in(spares: &'static Spares, key: ReuseKey) -> std::io::Result<CallTmp> {
        let kept = {
            let mut v = spares.0.lock().unwrap_or_else(|e| e.into_inner());
            let at = v.iter().rposition(|m| m.key == key);
            at.map(|i| v.swap_remove(i))
        }
        // Checked again when taken: a kept dir that changed is removed (another dir under its name is not ours
        // to remove: that one is only let go).
        .and_then(|m| match pristine(&m) {
            true => Some(m),
            false if still_named(&m) => {
                remove(&m.path);
                None
            }
            false => None,
        });
        let made = match kept.or_else(|| unpark(key)) {
            Some(m) => m,
            None => make(key)?,
        };
        Ok(CallTmp {
            made: Some(made),
            planned: None,
            starts: Mutex::default(),
            spares,
        })
    }

    /// The temp dir a plan made only to decide names for `$TMP`: a name in the calls folder that no call's dir
    /// has (theirs are `call-` and random letters), never made, as the plan starts nothing.
    pub(crate) fn planned() -> CallTmp {
        let uid = rustix::process::getuid().as_raw();
        CallTmp {
            made: None,
            planned: Some(Path::new("/tmp").join(format!("animaworks-tool-{uid}")).join("planned")),
            starts: Mutex::default(),
            spares: &SPARES,
        }
    }

    /// Whose calls may have it after one another.
    pub(crate) fn key(&self) -> Option<ReuseKey> {
        self.made.as_ref().map(|m| m.key)
    }

    pub(crate) fn path(&self) -> &Path {
        match (&self.made, &self.planned) {
            (Some(m), _) => m.path.as_path(),
            (None, Some(p)) => p.as_path(),
            (None, None) => Path::new(""),
        }
    }

    /// A process is being confined with this dir in its grants; `pid_ns`: as the init of a PID namespace.
    pub(crate) fn confining(&self, pid_ns: bool) {
        let mut s = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        s.confined += 1;
        s.unknown |= !pid_ns;
    }

    /// That process started as `pid` (not yet reaped).
    pub(crate) fn started(&self, pid: Option<u32>) {
        let fd = pid
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
            .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
        let mut s = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        let before = s.inits.len();
        s.inits.retain(|fd| !exited(fd));
        s.exited += before - s.inits.len();
        match fd {
            Some(fd) => s.inits.push(fd),
            None => s.unknown = true,
        }
    }

    /// Nothing of the call can reach the dir again: every process confined with it was started as an init
    /// that has exited (a failed start counts as unknown).
    fn ended(&self) -> bool {
        let s = self.starts.lock().unwrap_or_else(|e| e.into_inner());
        !s.unknown && s.exited + s.inits.len() == s.confined && s.inits.iter().all(exited)
    }
}

/// Unknown counts as running: the dir is then not handed on.
fn exited(fd: &OwnedFd) -> bool {
    awt_sys::process::pidfd_exited(fd) == Some(true)
}

impl Drop for CallTmp {
    /// Why a plain rmdir first: a tool usually leaves its temp dir empty, and one system call removes it, where
    /// a recursive removal opens, reads and stats it (nine calls); what the tool left goes the recursive way.
    fn drop(&mut self) {
        let Some(m) = self.made.take() else { return };
        // The crate's own unit tests keep nothing in the process's pool: no test binary removes it at exit.
        let keeps = !cfg!(test) || !std::ptr::eq(self.spares, &SPARES);
        if keeps && self.ended() && pristine(&m) {
            // Full: the oldest kept dir goes (it may be of a tool no longer called), not the one just ended.
            let oldest = {
                let mut v = self.spares.0.lock().unwrap_or_else(|e| e.into_inner());
                let oldest = (v.len() >= cap()).then(|| v.remove(0));
                v.push(m);
                oldest
            };
            if let Some(o) = oldest.filter(still_named) {
                remove(&o.path);
            }
            return;
        }
        remove(&m.path);
    }
}

fn remove(p: &Path) {
    if std::fs::remove_dir(p).is_err() {
        let _ = std::fs::remove_dir_all(p);
    }
}

/// Remove the dirs kept for later calls (at the runner's exit).
pub fn release_spares() {
    SPARES.release();
}

impl Spares {
    fn release(&self) {
        let v = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        for m in v.into_iter().filter(still_named) {
            park_or_remove(m);
        }
    }
}

/// How the name of every call's temp dir begins where there is no calls folder (the sandbox hides the others'
/// from each call).
pub(crate) const PREFIX: &str = "animaworks-tool-call-";

/// The folder of every call's temp dir: `/tmp/animaworks-tool-<uid>`, made `0700` and checked to be a folder of
/// the runner's user (not a symlink) that nobody else may enter; `None` where it cannot be had (made by another
/// user first, say). Not under the runner's `TMPDIR`: runners of one user started with different ones must
/// hide each other's calls.
pub fn calls_dir() -> Option<&'static Path> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let base = super::rules::canonical(Path::new("/tmp"))?;
        let dir = base.join(format!("animaworks-tool-{}", rustix::process::geteuid().as_raw()));
        match rustix::fs::mkdir(&dir, rustix::fs::Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(_) => return None,
        }
        let fd = open_dir(&dir).ok()?;
        let st = rustix::fs::fstat(&fd).ok()?;
        let ours = st.st_uid == rustix::process::geteuid().as_raw() && st.st_mode & libc::S_IFMT == libc::S_IFDIR;
        if !ours {
            return None;
        }
        if st.st_mode & 0o7777 != 0o700 {
            rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o700)).ok()?;
        }
        Some(dir)
    })
    .as_deref()
}

fn open_dir(p: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::open(
        p,
        rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
}

fn make(key: ReuseKey) -> std::io::Result<Made> {
    use std::os::unix::fs::PermissionsExt;
    // The runner's alone (a plain tempdir would be 0755 under the usual umask).
    let mut b = tempfile::Builder::new();
    b.permissions(std::fs::Permissions::from_mode(0o700));
    let path = match calls_dir() {
        Some(dir) => {
            sweep(dir);
            b.prefix("call-").tempdir_in(dir)?
        }
        None => b.prefix(PREFIX).tempdir()?,
    }
    .keep();
    made(path.clone(), key).inspect_err(|_| {
        let _ = std::fs::remove_dir(&path);
    })
}

/// `path`, a dir this process has just made or taken, held open.
fn made(path: PathBuf, key: ReuseKey) -> std::io::Result<Made> {
    let fd = open_dir(&path)?;
    let st = rustix::fs::fstat(&fd)?;
    let flags = rustix::fs::ioctl_getflags(&fd).ok().map(|f| f.bits());
    Ok(Made {
        path,
        fd,
        id: (st.st_dev, st.st_ino),
        flags,
        key,
    })
}

/// Parked dirs nobody took for this long are removed by the next process that makes a dir, once the calls folder
/// holds more than [`CROWDED`] folders (its link count says how many, without reading it).
const STALE: std::time::Duration = std::time::Duration::from_secs(600);
const CROWDED: u64 = 64;

/// A crowded folder is read at most this often (its `swept` file's time says when it last was). Why: parked dirs
/// younger than [`STALE`] stay, so every process that made a dir stat'ed each of them again (150 in a submit of
/// a machine that had run the benchmarks: 150 of its 500 system calls).
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);
const SWEPT: &str = "swept";

fn sweep(dir: &Path) {
    let Ok(st) = rustix::fs::stat(dir) else { return };
    if st.st_nlink < 2 + CROWDED {
        return;
    }
    let now = std::time::SystemTime::now();
    let mark = dir.join(SWEPT);
    let recent = std::fs::symlink_metadata(&mark).is_ok_and(|m| {
        m.is_file() && m.modified().is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age < SWEEP_EVERY))
    });
    if recent {
        return;
    }
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Unmarked (something else under that name): swept as before, each time.
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .mode(0o600)
            .open(&mark)
            .and_then(|f| f.set_modified(now));
    }
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten().take(4096) {
        if !e.file_name().as_encoded_bytes().starts_with(b"spare-") {
            continue;
        }
        let p = e.path();
        // The time of the rename that parked it.
        let parked = std::fs::symlink_metadata(&p).ok().and_then(|m| {
            use std::os::unix::fs::MetadataExt;
            std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(m.ctime().max(0) as u64, m.ctime_nsec() as u32))
        });
        if parked.is_some_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE)) {
            // Taken by rename first, so that a process unparking it at the same time gets nothing half-removed.
            let gone = dir.join(format!("gone-{}-{}", std::process::id(), e.file_name().to_string_lossy()));
            if std::fs::rename(&p, &gone).is_ok() {
                remove(&gone);
            }
        }
    }
}

/// How many ended calls' dirs of one key wait in the calls folder for the next process.
const PARKED: usize = 2;

fn parked_name(key: ReuseKey, i: usize) -> String {
    format!("spare-{:016x}-{i}", key.0)
}

/// A parked dir, renamed to a name of this process's own (no other process can take it then), if one is there
/// and still as an ended call leaves it; one that is not is removed.
fn unpark(key: ReuseKey) -> Option<Made> {
    unpark_from(calls_dir()?, key)
}

fn unpark_from(dir: &Path, key: ReuseKey) -> Option<Made> {
    for i in 0..PARKED {
        let from = dir.join(parked_name(key, i));
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let to = dir.join(format!("call-{}-{n}", std::process::id()));
        match rustix::fs::renameat_with(
            rustix::fs::CWD,
            &from,
            rustix::fs::CWD,
            &to,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => {}
            Err(rustix::io::Errno::NOENT) => continue,
            Err(_) => return None,
        }
        // Whatever made it, it must look as a fresh dir of this folder does: the folder's own flags.
        let flags = open_dir(dir)
            .ok()
            .and_then(|d| rustix::fs::ioctl_getflags(&d).ok())
            .map(|f| f.bits());
        match made(to.clone(), key) {
            Ok(m) if pristine(&m) && m.flags == flags => return Some(m),
            Ok(_) | Err(_) => remove(&to),
        }
    }
    None
}

/// An ended call's untouched dir, parked for the next process; removed when every place is taken (or there is
/// no calls folder).
fn park_or_remove(m: Made) {
    if let Some(dir) = calls_dir() {
        park_in(dir, m);
    } else {
        let _ = std::fs::remove_dir(&m.path);
    }
}

fn park_in(dir: &Path, m: Made) {
    if m.path.parent() == Some(dir) {
        for i in 0..PARKED {
            match rustix::fs::renameat_with(
                rustix::fs::CWD,
                &m.path,
                rustix::fs::CWD,
                dir.join(parked_name(m.key, i)),
                rustix::fs::RenameFlags::NOREPLACE,
            ) {
                Ok(()) => return,
                Err(rustix::io::Errno::EXIST) => continue,
                Err(_) => break,
            }
        }
    }
    let _ = std::fs::remove_dir(&m.path);
}

/// Its path still names the dir held open.
fn still_named(m: &Made) -> bool {
    rustix::fs::statat(rustix::fs::CWD, &m.path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| (st.st_dev, st.st_ino) == m.id)
}

/// The dir is as it was made: empty, `0700`, the runner's, no extended attribute, the same inode flags, under
/// its name.
fn pristine(m: &Made) -> bool {
    let Ok(st) = rustix::fs::fstat(&m.fd) else { return false };
    let unchanged = st.st_mode == (libc::S_IFDIR | 0o700)
        && st.st_nlink == 2
        && st.st_uid == rustix::process::geteuid().as_raw()
        && st.st_gid == rustix::process::getegid().as_raw()
        && (st.st_dev, st.st_ino) == m.id
        && rustix::fs::flistxattr_query(m.fd.as_fd()).is_ok_and(|n| n == 0)
        && rustix::fs::ioctl_getflags(&m.fd).ok().map(|f| f.bits()) == m.flags;
    unchanged && empty(&m.fd) && still_named(m)
}

fn empty(fd: &OwnedFd) -> bool {
    let Ok(mut d) = rustix::fs::Dir::read_from(fd) else {
        return false;
    };
    loop {
        match d.read() {
            None => return true,
            Some(Ok(e)) if matches!(e.file_name().to_bytes(), b"." | b"..") => {}
            Some(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spares() -> &'static Spares {
        Box::leak(Box::default())
    }

    const K: ReuseKey = ReuseKey(1);

    /// A dir confined for an init that has exited, left empty, is the next call's; one the call left
    /// anything in, or changed, or that a process without a PID namespace had, is removed.
    #[test]
    fn only_an_untouched_dir_of_an_ended_call_is_taken_back() {
        let pool = spares();
        // No process confined with it: nobody had it.
        let a = CallTmp::new_in(pool, K).unwrap();
        let path = a.path().to_path_buf();
        drop(a);
        let b = CallTmp::new_in(pool, K).unwrap();
        assert_eq!(b.path(), path, "an untouched dir is taken back");

        // A process that ended (a real child, reaped as the runner reaps an init).
        b.confining(true);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        b.started(Some(child.id()));
        child.wait().unwrap();
        drop(b);
        let c = CallTmp::new_in(pool, K).unwrap();
        assert_eq!(c.path(), path, "the dir of an ended call is taken back");

        // Worker after worker: the pidfds of the ended ones are let go, and the dir still comes back.
        for _ in 0..3 {
            c.confining(true);
            let mut child = std::process::Command::new("true").spawn().unwrap();
            c.started(Some(child.id()));
            child.wait().unwrap();
        }
        assert!(c.starts.lock().unwrap().inits.len() <= 1);
        drop(c);
        let c = CallTmp::new_in(pool, K).unwrap();
        assert_eq!(
            c.path(),
            path,
            "the dir of a plan whose every worker ended is taken back"
        );

        // Still running: removed, never handed on.
        c.confining(true);
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        c.started(Some(child.id()));
        drop(c);
        assert!(!path.exists(), "the dir of a call still running is removed");
        child.kill().unwrap();
        child.wait().unwrap();

        type Change = fn(&CallTmp);
        let cases: [(&str, Change); 5] = [
            ("a file left in it", |t| {
                std::fs::write(t.path().join("x"), "x").unwrap()
            }),
            ("a folder left in it", |t| {
                std::fs::create_dir(t.path().join("d")).unwrap()
            }),
            ("its mode changed", |t| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap()
            }),
            ("confined without a PID namespace", |t| t.confining(false)),
            ("a start whose process is unknown", |t| {
                t.confining(true);
                t.started(None)
            }),
        ];
        for (what, change) in cases {
            let t = CallTmp::new_in(pool, K).unwrap();
            let p = t.path().to_path_buf();
            change(&t);
            drop(t);
            assert!(!p.exists(), "{what}: removed");
            let next = CallTmp::new_in(pool, K).unwrap();
            assert_ne!(next.path(), p, "{what}: not handed on");
        }
        pool.release();
    }

    /// An extended attribute (an ACL is one, and a default ACL would give the next call's files to others).
    #[test]
    fn a_dir_with_an_extended_attribute_is_not_taken_back() {
        let pool = spares();
        let t = CallTmp::new_in(pool, K).unwrap();
        let p = t.path().to_path_buf();
        if rustix::fs::setxattr(&p, "user.awt", b"1", rustix::fs::XattrFlags::empty()).is_err() {
            awt_sys::skipped!("this file system takes no user extended attributes");
            drop(t);
            pool.release();
            return;
        }
        drop(t);
        assert!(!p.exists());
    }

    /// A dir kept whose name was taken by another is not handed on.
    #[test]
    fn a_kept_dir_renamed_away_is_not_handed_on() {
        let pool = spares();
        let t = CallTmp::new_in(pool, K).unwrap();
        let p = t.path().to_path_buf();
        drop(t);
        let moved = p.with_extension("moved");
        std::fs::rename(&p, &moved).unwrap();
        std::fs::create_dir(&p).unwrap();
        let next = CallTmp::new_in(pool, K).unwrap();
        assert_ne!(next.path(), p);
        drop(next);
        pool.release();
        let _ = std::fs::remove_dir(&moved);
        let _ = std::fs::remove_dir(&p);
    }

    /// A dir parked for the next process is taken only as a fresh one would be: a change made while it waited
    /// (a file, a mode, a symlink in its place) has it removed, and a ninth dir is removed, not parked.
    #[test]
    fn a_parked_dir_is_checked_again_by_whoever_takes_it() {
        use std::os::unix::fs::PermissionsExt;
        let calls = tempfile::tempdir().unwrap();
        let dir = calls.path();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let fresh = |name: &str| {
            let p = dir.join(name);
            std::fs::create_dir(&p).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
            made(p, K).unwrap()
        };
        park_in(dir, fresh("call-a"));
        assert!(dir.join(parked_name(K, 0)).is_dir() && !dir.join("call-a").exists());
        let m = unpark_from(dir, K).expect("an untouched parked dir is taken");
        assert!(m.path.parent() == Some(dir) && !dir.join(parked_name(K, 0)).exists());
        let path = m.path.clone();
        park_in(dir, m);
        assert!(!path.exists() && dir.join(parked_name(K, 0)).is_dir());

        type Change = fn(&Path);
        let cases: [(&str, Change); 3] = [
            ("a file left in it", |p| std::fs::write(p.join("x"), "x").unwrap()),
            ("its mode changed", |p| {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap()
            }),
            ("a symlink in its place", |p| {
                std::fs::remove_dir(p).unwrap();
                std::os::unix::fs::symlink("/", p).unwrap()
            }),
        ];
        for (what, change) in cases {
            if !dir.join(parked_name(K, 0)).exists() {
                park_in(dir, fresh("call-b"));
            }
            change(&dir.join(parked_name(K, 0)));
            assert!(unpark_from(dir, K).is_none(), "{what}: taken");
            let left: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name()).collect();
            assert!(left.is_empty(), "{what}: left {left:?}");
        }

        for i in 0..PARKED {
            park_in(dir, fresh(&format!("call-{i}")));
        }
        let one_more = fresh("call-one-more");
        park_in(dir, one_more);
        assert!(!dir.join("call-one-more").exists(), "a dir beyond the parked ones is removed");
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), PARKED);
    }

    /// A pool full of another tool's dirs still keeps the one that just ended: the oldest is let go instead.
    #[test]
    fn a_full_pool_keeps_the_newest_dir() {
        let pool = spares();
        let (a, b) = (ReuseKey(2), ReuseKey(3));
        let olds: Vec<CallTmp> = (0..cap()).map(|_| CallTmp::new_in(pool, a).unwrap()).collect();
        let first = olds[0].path().to_path_buf();
        drop(olds);
        let t = CallTmp::new_in(pool, b).unwrap();
        let path = t.path().to_path_buf();
        drop(t);
        assert!(!first.exists(), "the oldest kept dir is removed");
        let again = CallTmp::new_in(pool, b).unwrap();
        assert_eq!(again.path(), path, "the newest is kept for its tool");
        drop(again);
        let v = std::mem::take(&mut *pool.0.lock().unwrap());
        for m in v {
            remove(&m.path);
        }
    }

    /// A dir goes back only to a call of the same key (tool file, anima, data dir): a descriptor of it may be
    /// held by a process of another call (review of the calls folder), in memory or parked.
    #[test]
    fn a_dir_goes_back_only_to_the_same_tool_of_the_same_anima() {
        let (a, b) = (
            ReuseKey::of(Path::new("/d"), Some(Path::new("/d/animas/alice")), Path::new("/d/common_tools/t")),
            ReuseKey::of(Path::new("/d"), Some(Path::new("/d/animas/bob")), Path::new("/d/common_tools/t")),
        );
        assert_ne!(a, b);
        assert_ne!(a, ReuseKey::of(Path::new("/d"), Some(Path::new("/d/animas/alice")), Path::new("/d/common_tools/u")));
        let pool = spares();
        let t = CallTmp::new_in(pool, a).unwrap();
        let path = t.path().to_path_buf();
        drop(t);
        let other = CallTmp::new_in(pool, b).unwrap();
        assert_ne!(other.path(), path, "another anima's call got the dir");
        let same = CallTmp::new_in(pool, a).unwrap();
        assert_eq!(same.path(), path, "the same tool's next call gets it back");
        drop(other);
        drop(same);
        pool.release();

        let calls = tempfile::tempdir().unwrap();
        let dir = calls.path();
        let p = dir.join("call-x");
        std::fs::create_dir(&p).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
        park_in(dir, made(p, a).unwrap());
        assert!(unpark_from(dir, b).is_none(), "another key took a parked dir");
        assert!(unpark_from(dir, a).is_some(), "the same key finds it");
    }

    #[test]
    fn a_crowded_calls_folder_is_read_at_most_once_a_minute() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        for i in 0..=CROWDED {
            std::fs::create_dir(dir.join(format!("call-test-{i}"))).unwrap();
        }
        let mark = dir.join(SWEPT);
        let at = |f: &Path| std::fs::metadata(f).unwrap().modified().unwrap();
        let set = |ago: u64| {
            let t = std::time::SystemTime::now() - std::time::Duration::from_secs(ago);
            std::fs::File::options().write(true).open(&mark).unwrap().set_modified(t).unwrap();
            t
        };
        sweep(dir);
        assert!(mark.is_file(), "a sweep of a crowded folder leaves its time");
        let half = set(30);
        sweep(dir);
        assert_eq!(at(&mark), half, "swept 30 s ago: not read again");
        let old = set(120);
        sweep(dir);
        assert!(at(&mark) > old, "swept two minutes ago: read again");
    }
}
