//! The start of a tool's process, prepared before the clone (nothing is allocated after it): in the child, a
//! new session, the death signal, the guardian's registration, the cgroup and rlimits, the confinement, the
//! exec ([`start`]). What to start, and whether it may be started at all, is decided above (`awt_core::spawn`).

use crate::confine::child::Confined;
use crate::process::{Child, Handover, Io};
use crate::rlimit::ChildLimits;
use crate::start_error::{StartError, Step};
use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A tool's start, prepared before the clone: nothing is allocated after it.
pub struct Prepared<'h> {
    pub exec: DirectExec,
    pub confined: Option<Confined>,
    pub limits: Option<ChildLimits>,
    pub io: [Io; 3],
    pub cwd: Option<CString>,
    pub handover: &'h [Handover<'h>],
}

impl Prepared<'_> {
    /// Whether the start waits for the child's report (a PID namespace: until the tool has exec'd).
    pub fn waits(&self) -> bool {
        self.confined.as_ref().is_some_and(|c| c.pid_ns.is_some())
    }
}

/// Between the clone and the exec, in the child: a new session, the death signal, the guardian's registration,
/// the sandbox, the exec. Returns only the step that stopped it and its errno. `init`: the child is process 1 of new
/// namespaces ([`crate::process::Start::Init`]).
fn pre_exec(p: &Prepared<'_>, init: Option<&crate::process::Init>) -> StartError {
    use crate::syscall::{call as sys, check};
    let d = &p.exec;
    // First, so that nothing this process becomes or starts is outside the call's cgroup and rlimits.
    if let Some(l) = &p.limits {
        if let Err(e) = l.apply() {
            return e;
        }
    }
    // A new session: the tool leads its own process group and has no controlling terminal.
    // SAFETY: no arguments; this process's session alone. Raw calls throughout: this process shares the runner's
    // memory, errno included.
    if let Err(e) = check(unsafe { sys(libc::SYS_setsid, 0, 0, 0, 0) }) {
        return StartError::at(Step::Session, &e);
    }
    // SAFETY: integer arguments only.
    unsafe {
        sys(
            libc::SYS_prctl,
            libc::PR_SET_PDEATHSIG as usize,
            libc::SIGKILL as usize,
            0,
            0,
        )
    };
    let group = match init {
        // Inside its PID namespace an init child is process 1; its group is named by its pid outside.
        Some(i) => i.pid.load(std::sync::atomic::Ordering::SeqCst),
        // SAFETY: no arguments.
        None => unsafe { sys(libc::SYS_getpid, 0, 0, 0, 0) as i32 },
    };
    // SAFETY: after the setsid, before the exec; the runner's guardian pipe stays open while it spawns.
    unsafe { crate::guardian::register(group) };
    let e = match p.confined.as_ref() {
        Some(c) => {
            let exec = crate::confine::child::Exec {
                path: d.path.as_ptr(),
                argv: d.argv.as_ptr(),
                envp: d.envp.as_ptr(),
                handover: p.handover,
            };
            // SAFETY: in the child before its exec, with `c` and `exec` prepared before the clone; `init` is the
            // one this child was started with, which a plan with a PID namespace needs (`start`).
            unsafe { crate::confine::child::enter_and_exec(c, &exec, init) }
        }
        None => {
            // SAFETY: right before the exec, in the child's own table (cloexec_from_3 ran in child_main).
            if let Err(e) = unsafe { crate::process::place_handovers(p.handover) } {
                crate::guardian::unregister(group);
                return StartError::at(Step::Handover, &e);
            }
            // SAFETY: path, argv and envp are NUL-terminated and prepared before the clone.
            let r = unsafe {
                sys(
                    libc::SYS_execve,
                    d.path.as_ptr() as usize,
                    d.argv.as_ptr() as usize,
                    d.envp.as_ptr() as usize,
                    0,
                )
            };
            StartError::new(Step::Exec, -r as i32)
        }
    };
    // The process never became the tool: the guardian must not remember its group.
    crate::guardian::unregister(group);
    e
}

/// Every tool is exec'd with `execve` in the child (`pre_exec`), prepared before the clone (no allocation after it). Why not std's exec: it uses `execvp`, which runs a file the kernel refuses with ENOEXEC (no `#!` line,
/// not a binary for this machine, a `#!` interpreter that is itself neither) as a `/bin/sh` script, so a data file
/// with an exec bit or a tool with a broken interpreter would silently run as shell. `execve` reports it instead.
pub struct DirectExec {
    path: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    _owned: Vec<CString>,
}

// SAFETY: the pointers point into `_owned`, which the struct owns and never changes.
unsafe impl Send for DirectExec {}
// SAFETY: as for Send: nothing mutates the pointed-to strings.
unsafe impl Sync for DirectExec {}

impl DirectExec {
    pub fn new(path: &Path, args: &[OsString], env: &[(OsString, OsString)]) -> io::Result<DirectExec> {
        let c = |b: Vec<u8>| {
            CString::new(b).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a NUL byte in an argument or the environment",
                )
            })
        };
        let path_c = c(path.as_os_str().as_bytes().to_vec())?;
        let mut owned = vec![path_c.clone()];
        for a in args {
            owned.push(c(a.as_bytes().to_vec())?);
        }
        let argc = owned.len();
        for (k, v) in env {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            owned.push(c(kv)?);
        }
        let mut argv: Vec<*const libc::c_char> = owned[..argc].iter().map(|s| s.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const libc::c_char> = owned[argc..].iter().map(|s| s.as_ptr()).collect();
        envp.push(std::ptr::null());
        Ok(DirectExec {
            path: path_c,
            argv,
            envp,
            _owned: owned,
        })
    }
}

/// Start it. The child is ours to reap ([`crate::reap::wait`]); [`crate::reap::reap_orphans`] leaves it alone.
/// A failure names the step that failed.
pub fn start(p: &Prepared<'_>) -> Result<Child, StartError> {
    let pre = |init: Option<&crate::process::Init>| pre_exec(p, init);
    let ns = p.confined.as_ref().and_then(|c| c.pid_ns.as_ref());
    let kept = ns.and_then(|ns| ns.kept.as_deref()).filter(|k| !k.spoiled());
    // A kept network namespace is joined by the first attempt only: a retry's namespace is fresh, since the
    // first attempt's proxy listener may still be held on the kept one's port.
    let mut join = kept.map(|k| k.join());
    // Why the retries: a file just written (an editor saving, a copy into a tier) is "text busy" while any other
    // thread's freshly forked child still holds the writer's descriptor, for the moment before that child execs.
    // Each attempt is its own owned start: the pause between two is not spent holding off `reap_orphans`.
    let mut tries = 0;
    loop {
        let how = match ns {
            Some(ns) => crate::process::Start::Init(ns.clone_flags(join.is_some()), join),
            None => crate::process::Start::Vfork,
        };
        // SAFETY: `pre_exec` makes raw system calls only, on `p` (prepared before, alive across the call), and
        // ends in an exec or returns its error; `join`'s descriptors are the kept namespace's, open while `p` is.
        let attempt = || unsafe { crate::process::spawn(p.io, p.cwd.as_deref(), how, &pre) };
        match crate::reap::start_owned(attempt, Child::id) {
            // A kept namespace whose setup failed (its proxy port held by what an earlier call left, say) is not
            // joined again; the start is tried once more in fresh namespaces, which fail alike if the cause is
            // elsewhere (a mount's target gone).
            Err(e) if join.is_some() && e.step.is_namespace_setup() => {
                if let Some(k) = kept {
                    k.spoil();
                }
                join = None;
            }
            Err(e) if e.step == Step::Exec && e.errno == libc::ETXTBSY && tries < 8 => {
                tries += 1;
                join = None;
                std::thread::sleep(std::time::Duration::from_millis(5 * tries));
            }
            Ok(child) => {
                if let (Some(k), true) = (kept, join.is_some()) {
                    k.joined_by(child.id());
                }
                return Ok(child);
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::child::{Mount, PidNs};

    fn prepared(program: &str, limits: Option<ChildLimits>, confined: Option<Confined>) -> Prepared<'static> {
        Prepared {
            exec: DirectExec::new(Path::new(program), &[], &[]).unwrap(),
            confined,
            limits,
            io: [Io::Null; 3],
            cwd: None,
            handover: &[],
        }
    }

    fn confined(pid_ns: Option<PidNs>, ruleset: Option<std::os::fd::OwnedFd>) -> Confined {
        Confined {
            ruleset,
            filter: None,
            pid_ns,
            last_cap: std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(40),
        }
    }

    fn failed_step(p: &Prepared<'_>) -> StartError {
        match start(p) {
            Ok(mut c) => panic!("started: {:?}", c.try_wait()),
            Err(e) => e,
        }
    }

    #[test]
    fn a_program_that_is_not_there_fails_at_the_exec() {
        let e = failed_step(&prepared("/nonexistent/tool", None, None));
        assert_eq!(e, StartError::new(Step::Exec, libc::ENOENT), "{e}");
    }

    #[test]
    fn an_impossible_rlimit_fails_at_the_rlimits() {
        let limits = ChildLimits {
            join: crate::cgroup::Join(Vec::new()),
            rlimits: vec![(crate::rlimit::Resource::Nofile, 64, 32)],
        };
        let e = failed_step(&prepared("/bin/true", Some(limits), None));
        assert_eq!(e, StartError::new(Step::Rlimits, libc::EINVAL), "{e}");
    }

    #[test]
    fn a_ruleset_that_is_no_ruleset_fails_at_landlock() {
        let not_a_ruleset = std::fs::File::open("/dev/null").unwrap().into();
        let e = failed_step(&prepared("/bin/true", None, Some(confined(None, Some(not_a_ruleset)))));
        assert_eq!(e.step, Step::Landlock, "{e}");
        assert!(e.to_string().contains("`landlock`"), "{e}");
    }

    /// A path the plan binds that is gone by the start fails at the mounts, a step of the namespaces' setup (which
    /// a caller plans again).
    #[test]
    fn a_mount_whose_path_vanished_fails_at_the_mounts() {
        if !crate::confine::kernel::support().pid_namespace {
            crate::skipped!("no PID namespace here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let mount = Mount::read_only(&gone).unwrap();
        std::fs::remove_dir(&gone).unwrap();
        let (u, g) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        let ns = PidNs {
            user: u != 0,
            uid_map: format!("{u} {u} 1").into_bytes(),
            gid_map: format!("{g} {g} 1").into_bytes(),
            mounts: vec![mount],
            net: None,
            kept: None,
        };
        let e = failed_step(&prepared("/bin/true", None, Some(confined(Some(ns), None))));
        assert_eq!(e, StartError::new(Step::Mounts, libc::ENOENT), "{e}");
        assert!(e.step.is_namespace_setup());
    }
}
