//! A cgroup made for one call, beneath the runner's own cgroup and nowhere else: the memory and pids
//! controllers of cgroup v2 where the runner's cgroup delegates them, else the v1 `memory` and `pids`
//! hierarchies where those are mounted (docs/limits.md).
//!
//! Why not `cgroups-rs`: it builds its own hierarchy picture from mount points and knows nothing of "beneath the
//! runner's own cgroup" or of the v2 leaf a runner must move to before it can delegate; what is needed here is a
//! few files read and written, which this module does.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Which cgroup interface a controller is used through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "cgroup_v1",
            Version::V2 => "cgroup_v2",
        }
    }
}

/// The runner's own cgroup for one controller, under which call groups are made.
#[derive(Debug, Clone)]
pub struct Parent {
    pub version: Version,
    pub dir: PathBuf,
}

/// Where memory and process limits can be enforced on this machine, and why not where they cannot.
#[derive(Debug, Clone)]
pub struct Hierarchies {
    pub memory: Result<Parent, Unavailable>,
    pub pids: Result<Parent, Unavailable>,
}

/// Why a controller's cgroups cannot be made beneath the runner's own cgroup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// `/proc/self/cgroup` names no v2 cgroup.
    #[error("cgroup v2: the runner is in no v2 cgroup")]
    NoV2Cgroup,
    /// No `cgroup2` file system is mounted.
    #[error("cgroup v2: not mounted")]
    V2NotMounted,
    /// The runner's v2 cgroup lies outside the mount this process sees.
    #[error("cgroup v2: the runner's cgroup {0} is not visible")]
    V2NotVisible(String),
    /// The runner's v2 cgroup does not hand the controller down.
    #[error("cgroup v2: {} does not delegate `{controller}` to its children", dir.display())]
    NotDelegated { dir: PathBuf, controller: String },
    /// The runner is in no v1 hierarchy of the controller.
    #[error("cgroup v1: no `{0}` hierarchy")]
    NoV1Hierarchy(String),
    /// The controller's v1 hierarchy is not mounted.
    #[error("cgroup v1: the `{0}` hierarchy is not mounted")]
    V1NotMounted(String),
    /// The runner's v1 cgroup of the controller lies outside the mount this process sees.
    #[error("cgroup v1: the runner's `{controller}` cgroup {path} is not visible")]
    V1NotVisible { controller: String, path: String },
    /// The runner may not write beneath its v1 cgroup.
    #[error("cgroup v1: the runner may not make cgroups in {}", .0.display())]
    V1NotWritable(PathBuf),
    /// Neither interface serves the controller: why not through each.
    #[error("{v2}; {v1}")]
    Neither { v2: Box<Unavailable>, v1: Box<Unavailable> },
    /// Turned off by the runner's caller, for the reason it gives.
    #[error("{0}")]
    Disabled(&'static str),
}

/// Found once per runner: the mounts and the runner's cgroups do not change under it.
pub fn hierarchies() -> &'static Hierarchies {
    static H: OnceLock<Hierarchies> = OnceLock::new();
    H.get_or_init(|| {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mounts = parse_mounts(&mountinfo);
        let v2 = v2_parent(&mounts, &own);
        let find = |c: &str| -> Result<Parent, Unavailable> {
            let v2_err = match &v2 {
                Ok(p)
                    if controllers(&p.dir.join("cgroup.subtree_control"))
                        .iter()
                        .any(|x| x == c) =>
                {
                    return Ok(p.clone())
                }
                Ok(p) => Unavailable::NotDelegated {
                    dir: p.dir.clone(),
                    controller: c.to_owned(),
                },
                Err(e) => e.clone(),
            };
            v1_parent(&mounts, &own, c).map_err(|v1| Unavailable::Neither {
                v2: Box::new(v2_err),
                v1: Box::new(v1),
            })
        };
        Hierarchies {
            memory: find("memory"),
            pids: find("pids"),
        }
    })
}

struct Mount {
    root: String,
    point: PathBuf,
    fstype: String,
    opts: Vec<String>,
}

fn parse_mounts(s: &str) -> Vec<Mount> {
    s.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            let fstype = post.next()?.to_owned();
            let _source = post.next();
            let opts = post.next().unwrap_or("").split(',').map(str::to_owned).collect();
            Some(Mount {
                root: unescape(pre.get(3)?),
                point: PathBuf::from(unescape(pre.get(4)?)),
                fstype,
                opts,
            })
        })
        .filter(|m| m.fstype == "cgroup" || m.fstype == "cgroup2")
        .collect()
}

/// mountinfo writes a space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory of cgroup `path` (as `/proc/self/cgroup` gives it) in a mount whose root is `root`.
fn dir_in(m: &Mount, path: &str) -> Option<PathBuf> {
    let rest = if m.root == "/" {
        path.trim_start_matches('/')
    } else {
        path.strip_prefix(m.root.as_str())?.trim_start_matches('/')
    };
    if rest.split('/').any(|c| c == "..") {
        return None;
    }
    let d = if rest.is_empty() {
        m.point.clone()
    } else {
        m.point.join(rest)
    };
    d.is_dir().then_some(d)
}

fn v2_parent(mounts: &[Mount], own: &str) -> Result<Parent, Unavailable> {
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or(Unavailable::NoV2Cgroup)?;
    let m = mounts
        .iter()
        .find(|m| m.fstype == "cgroup2")
        .ok_or(Unavailable::V2NotMounted)?;
    let dir = dir_in(m, path).ok_or_else(|| Unavailable::V2NotVisible(path.to_owned()))?;
    Ok(Parent {
        version: Version::V2,
        dir,
    })
}

fn v1_parent(mounts: &[Mount], own: &str, c: &str) -> Result<Parent, Unavailable> {
    let path = own
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
            ctrls.split(',').any(|x| x == c).then_some(path)
        })
        .ok_or_else(|| Unavailable::NoV1Hierarchy(c.to_owned()))?;
    let m = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.opts.iter().any(|o| o == c))
        .ok_or_else(|| Unavailable::V1NotMounted(c.to_owned()))?;
    let dir = dir_in(m, path).ok_or_else(|| Unavailable::V1NotVisible {
        controller: c.to_owned(),
        path: path.to_owned(),
    })?;
    let probe = dir.join("cgroup.procs");
    if rustix::fs::access(&probe, rustix::fs::Access::WRITE_OK).is_err()
        || rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK).is_err()
    {
        return Err(Unavailable::V1NotWritable(dir));
    }
    Ok(Parent {
        version: Version::V1,
        dir,
    })
}

fn controllers(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// One call's cgroup (one directory per hierarchy: one in v2, up to two in v1), removed when dropped.
#[derive(Debug)]
pub struct CallGroup {
    dirs: Vec<(PathBuf, Version)>,
    memory: Option<PathBuf>,
    pids: Option<PathBuf>,
}

/// The join file (`join_file`) of each of a call group's directories, opened before the start: the child writes `0`
/// (itself) to each before its exec, so that nothing it starts is ever outside the group.
pub struct Join(pub Vec<OwnedFd>);

static SEQ: AtomicU64 = AtomicU64::new(0);

/// The file the child writes `0` to. v1: `tasks`, which moves the writing thread alone; the child is a process of
/// one thread, so that is the whole process, and the kernel (since 6.1) then skips the write lock of every
/// thread group's fork and exit (`cgroup_threadgroup_rwsem`), whose RCU grace period made `cgroup.procs` cost
/// a grace period per write, long on a busy machine. v2 has no such file outside threaded groups.
fn join_file(v: Version) -> &'static str {
    match v {
        Version::V1 => "tasks",
        Version::V2 => "cgroup.procs",
    }
}

impl CallGroup {
    /// A new group named `<prefix><runner pid>-<n>`, with `memory` bytes and `pids` processes at most (each `None`:
    /// that controller is not used). The caller owns the prefix: groups under it whose runner is gone are removed.
    pub fn make(prefix: &str, memory: Option<(&Parent, u64)>, pids: Option<(&Parent, u64)>) -> io::Result<CallGroup> {
        let name = format!("{prefix}{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let mut g = CallGroup {
            dirs: Vec::new(),
            memory: None,
            pids: None,
        };
        for p in memory.map(|m| m.0).into_iter().chain(pids.map(|p| p.0)) {
            sweep_once(&p.dir, prefix);
        }
        let dir_for = |g: &mut CallGroup, p: &Parent| -> io::Result<PathBuf> {
            let d = p.dir.join(&name);
            if !g.dirs.iter().any(|(x, _)| *x == d) {
                std::fs::create_dir(&d)?;
                g.dirs.push((d.clone(), p.version));
            }
            Ok(d)
        };
        if let Some((p, bytes)) = memory {
            let d = dir_for(&mut g, p)?;
            match p.version {
                Version::V1 => {
                    write(&d.join("memory.limit_in_bytes"), bytes)?;
                    // Swap counts too where the kernel accounts it: memory and swap together stay at the limit.
                    let memsw = d.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        write(&memsw, bytes)?;
                    }
                }
                Version::V2 => {
                    write(&d.join("memory.max"), bytes)?;
                    let swap = d.join("memory.swap.max");
                    if swap.exists() {
                        write(&swap, 0)?;
                    }
                }
            }
            g.memory = Some(d);
        }
        if let Some((p, n)) = pids {
            let d = dir_for(&mut g, p)?;
            write(&d.join("pids.max"), n)?;
            g.pids = Some(d);
        }
        Ok(g)
    }

    /// The descriptors the child joins through.
    pub fn join(&self) -> io::Result<Join> {
        use rustix::fs::{open, Mode, OFlags};
        let mut v = Vec::new();
        for (d, version) in &self.dirs {
            v.push(open(
                d.join(join_file(*version)),
                OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )?);
        }
        Ok(Join(v))
    }

    /// Processes the memory controller killed for the limit.
    pub fn oom_kills(&self) -> u64 {
        let Some(d) = &self.memory else { return 0 };
        let (file, key) = if d.join("memory.events").exists() {
            ("memory.events", "oom_kill")
        } else {
            ("memory.oom_control", "oom_kill")
        };
        counter(&d.join(file), key)
    }

    /// Forks the pids controller refused for the limit.
    pub fn pids_refused(&self) -> u64 {
        self.pids.as_ref().map_or(0, |d| counter(&d.join("pids.events"), "max"))
    }

    /// The highest memory use, in bytes, where the kernel keeps it.
    pub fn memory_peak(&self) -> Option<u64> {
        let d = self.memory.as_ref()?;
        ["memory.peak", "memory.max_usage_in_bytes"]
            .iter()
            .find_map(|f| std::fs::read_to_string(d.join(f)).ok()?.trim().parse().ok())
    }

    fn procs(&self) -> Vec<i32> {
        self.dirs
            .iter()
            .flat_map(|(d, _)| {
                std::fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect()
    }
}

impl Drop for CallGroup {
    /// Whatever is still in the group is killed (a daemon that left the tool's process group stays in its
    /// cgroup), then the directories go. A group whose processes have not yet been reaped is left behind
    /// rather than waited for.
    fn drop(&mut self) {
        // Why the removal first: the kernel removes only a group without processes, and that is the common case
        // (the tool and its PID namespace reaped); only a group that is still busy is read and killed.
        self.dirs
            .retain(|(d, _)| std::fs::remove_dir(d).is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY)));
        if self.dirs.is_empty() {
            return;
        }
        for (d, v) in &self.dirs {
            if *v == Version::V2 {
                let _ = std::fs::write(d.join("cgroup.kill"), "1");
            }
        }
        for pid in self.procs() {
            // A process of this call's own cgroup (never 0 nor 1).
            if let Some(p) = rustix::process::Pid::from_raw(pid).filter(|_| pid > 1) {
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
        }
        // Why a thread for the rest: a group whose last process is still exiting is busy for a moment, and the
        // call must not wait for it.
        let busy: Vec<PathBuf> = self
            .dirs
            .iter()
            .rev()
            .map(|(d, _)| d.clone())
            .filter(|d| std::fs::remove_dir(d).is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY)))
            .collect();
        if busy.is_empty() {
            return;
        }
        let _ = std::thread::Builder::new().name("cgroup-rmdir".into()).spawn(move || {
            for d in busy {
                for _ in 0..400 {
                    match std::fs::remove_dir(&d) {
                        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                            std::thread::sleep(std::time::Duration::from_micros(500))
                        }
                        _ => break,
                    }
                }
            }
        });
    }
}

/// Once per runner and parent: the empty groups named with `prefix` of runners that are gone (killed before they
/// removed them).
fn sweep_once(parent: &Path, prefix: &str) {
    static SWEPT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut swept) = SWEPT.lock() else { return };
    if swept.iter().any(|p| p == parent) {
        return;
    }
    swept.push(parent.to_path_buf());
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // Signal 0 only asks whether the process exists.
        let gone = rustix::process::Pid::from_raw(pid)
            .is_some_and(|p| rustix::process::test_kill_process(p) == Err(rustix::io::Errno::SRCH));
        if gone {
            // Fails (and is left) while a process is still in it.
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

fn write(p: &Path, n: u64) -> io::Result<()> {
    std::fs::write(p, n.to_string()).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
}

/// `key N` in a flat keyed file (memory.events, pids.events, memory.oom_control).
fn counter(p: &Path, key: &str) -> u64 {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_are_read() {
        let m = parse_mounts(
            "36 25 0:31 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory\n\
             40 25 0:35 /x /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
             41 25 0:36 / /proc rw - proc proc rw\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].opts, vec!["rw", "memory"]);
        assert_eq!(m[1].root, "/x");
        assert_eq!(unescape(r"/a\040b"), "/a b");
        assert_eq!(counter(Path::new("/nonexistent"), "max"), 0);
    }
}
