//! The application of a plan: what it needs on disk (made once the plan starts a process, never for a plan
//! made to decide), then the kernel objects of one start (the Landlock ruleset, the seccomp program, the
//! namespaces and their mounts), the kept network namespace's lease and the proxy's task.

use super::layout::{prefix_of, DEV_READ, DEV_RW, ETC_READ, SYSTEM_EXEC};
use super::*;

impl Plan {
    /// The kernel objects for `program` (the file that will be exec'd): a Landlock ruleset, a seccomp program,
    /// the namespace setup. `None` when the process is not confined.
    pub fn confine(&self, program: &Path) -> io::Result<Option<child::Confined>> {
        if self.check_only {
            return Err(io::Error::other(
                "a plan made for the decisions only (a pooled call's, a submit's) starts no process",
            ));
        }
        let Some(i) = &self.inner else { return Ok(None) };
        i.tmp.confining(i.pid_ns);
        let _memo = rules::memo();
        let s = i.support;
        let ruleset = if s.landlock_fs() {
            Some(self.ruleset(i, program)?)
        } else {
            None
        };
        let filter = s.seccomp.then(|| seccomp::program(&i.net));
        let net = match &i.proxy_hosts {
            Some(h) => {
                let policy = crate::netpolicy::NetPolicy::new(h, &i.private_net);
                let (proxy, child_net) = netproxy::start(std::sync::Arc::new(policy))?;
                let listening = proxy.listening();
                *self.proxy.lock().map_err(|_| io::Error::other("proxy lock poisoned"))? = Some(proxy);
                Some((child_net, listening, h))
            }
            None => None,
        };
        let mut mounts: Vec<child::Mount> = Vec::with_capacity(i.mounts.len());
        // The first hidden folder and file: every later one is bound from it (one mount system call each).
        let (mut first_dir, mut first_file) = (None, None);
        for m in &i.mounts {
            let made = match m.kind {
                MountKind::NoExec => child::Mount::no_exec(&m.path),
                MountKind::Exec => child::Mount::as_outside(&m.path),
                MountKind::ReadOnly => child::Mount::read_only(&m.path),
                // After the call's own dir is bound `noexec` (a writable place): that mount is moved back in.
                // (The dir's path is the calls folder's, canonical by making, and a name in it.)
                MountKind::HideCalls => child::Mount::hide_all_but(&m.path, i.tmp.path()),
                MountKind::HideAnimas => {
                    let own = i.protected_read.peers.as_ref().and_then(|(_, o)| o.as_deref());
                    hide_animas::kept(&m.path, own).and_then(|keep| child::Mount::hide_all_but(&m.path, &keep))
                }
                // Never the first of its kind: a mount that may be skipped is no source for the others' binds.
                MountKind::HideOther => match first_dir {
                    Some(k) => child::Mount::hide_like(&m.path, &mounts[k]),
                    None => child::Mount::hide(&m.path, true),
                }
                .map(child::Mount::if_there),
                // Never the first of its kind either.
                MountKind::HideEntry { dir } => match if dir { first_dir } else { first_file } {
                    Some(k) => child::Mount::hide_like(&m.path, &mounts[k]),
                    None => child::Mount::hide(&m.path, dir),
                }
                .map(child::Mount::if_there),
                MountKind::Hide { dir } => {
                    let first = if dir { &mut first_dir } else { &mut first_file };
                    match *first {
                        Some(k) => child::Mount::hide_like(&m.path, &mounts[k]),
                        None => {
                            *first = Some(mounts.len());
                            child::Mount::hide(&m.path, dir)
                        }
                    }
                }
            };
            // Never start with a mount left out: a secret would be readable, a writable place executable.
            // A path gone since the plan (a remembered probe plan's) is a setup failure: planned again, it starts.
            mounts.push(made.ok_or_else(|| {
                io::Error::from(awt_sys::start_error::StartError::new(
                    awt_sys::start_error::Step::Mounts,
                    libc::ENOENT,
                ))
            })?);
        }
        // An interpreter installed inside a writable place (a project's `.venv` in the caller's directory) keeps
        // running, read-only, so the tool cannot rewrite what runs it.
        if let Some(pre) = rules::canonical(program).and_then(|p| prefix_of(&p, i.home.as_deref(), &i.data)) {
            let in_writable = i
                .mounts
                .iter()
                .any(|m| m.kind == MountKind::NoExec && pre.starts_with(&m.path) && pre != m.path);
            if in_writable {
                mounts.extend(child::Mount::read_only(&pre));
            }
        }
        let pid_ns = i.pid_ns.then(|| {
            let (u, g) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
            let (uid_map, gid_map) = (format!("{u} {u} 1").into_bytes(), format!("{g} {g} 1").into_bytes());
            let kept = net.as_ref().and_then(|(_, listening, hosts)| {
                let maps = s
                    .needs_user_namespace
                    .then_some((uid_map.as_slice(), gid_map.as_slice()));
                let key = netns::Key::of(i.tmp.key()?, hosts, &i.private_net, maps)?;
                let mut lease = netns::Lease::take(key, maps)?;
                lease.proxied_by(listening.clone());
                let ns = lease.ns();
                self.kept_net.lock().unwrap_or_else(|e| e.into_inner()).push(lease);
                Some(ns)
            });
            child::PidNs {
                user: s.needs_user_namespace,
                uid_map,
                gid_map,
                mounts,
                net: net.map(|(n, _, _)| n),
                kept,
            }
        });
        Ok(Some(child::Confined {
            ruleset,
            filter,
            pid_ns,
            last_cap: last_cap(),
        }))
    }

    fn ruleset(&self, i: &Inner, program: &Path) -> io::Result<std::os::fd::OwnedFd> {
        use landlock::{EXEC, READ, READ_FILE, TRUNCATE, WRITE, WRITE_FILE};
        let s = i.support;
        let tcp = s.landlock_tcp() && i.net != NetPlan::All;
        let mut b = landlock::Builder::new(&landlock::Handled {
            fs: landlock::handled_fs(s.landlock_abi),
            tcp,
            scope: s.landlock_signal_scope(),
        })?;
        let none = Protected::default();
        if i.reads == Reads::DenyList {
            // Everything read and run; what must not be read is hidden by the mounts, and every writable place
            // is mounted noexec.
            rules::grant_fixed(&mut b, Path::new("/"), EXEC, &none)?;
            for p in DEV_RW {
                rules::grant_fixed(&mut b, Path::new(p), READ_FILE | WRITE_FILE | TRUNCATE, &none)?;
            }
            let tmp = rules::canonical(i.tmp.path()).unwrap_or_else(|| i.tmp.path().to_path_buf());
            rules::grant(&mut b, &tmp, WRITE, &none)?;
            for p in &i.write {
                rules::grant(&mut b, p, WRITE, &i.protected_write)?;
            }
            self.allow_tcp(i, &mut b, tcp)?;
            return Ok(b.into_fd());
        }
        for p in SYSTEM_EXEC {
            rules::grant_fixed(&mut b, Path::new(p), EXEC, &i.protected_read)?;
        }
        for p in ETC_READ.iter().chain(DEV_READ) {
            rules::grant_fixed(&mut b, Path::new(p), READ, &i.protected_read)?;
        }
        for p in DEV_RW {
            rules::grant_fixed(&mut b, Path::new(p), READ_FILE | WRITE_FILE | TRUNCATE, &none)?;
        }
        if let Some(h) = &i.home {
            // User-installed Python packages (pip install --user).
            if let Some(p) = rules::canonical(&h.join(".local/lib")) {
                rules::grant(&mut b, &p, READ, &i.protected_read)?;
            }
        }
        // The interpreter's installation (a virtualenv and the Python it points to), the tool itself.
        let mut progs = vec![program.to_path_buf()];
        progs.extend(rules::canonical(program));
        for p in &progs {
            if let Some(pre) = prefix_of(p, i.home.as_deref(), &i.data) {
                rules::grant(&mut b, &pre, EXEC, &i.protected_read)?;
            }
            rules::grant(&mut b, p, EXEC, &i.protected_read)?;
        }
        rules::grant(&mut b, &i.tool, EXEC, &i.protected_read)?;
        if let Some(dir) = i.tool.parent() {
            rules::grant(&mut b, dir, READ, &i.protected_read)?;
        }
        // The Python shim and the SDK beside it: read-only, under the otherwise unreachable cache.
        if i.python {
            if let Ok(shim) = crate::pyshim::shim_path(&i.cache) {
                if let Some(root) = shim.parent().and_then(Path::parent).and_then(rules::canonical) {
                    rules::grant(&mut b, &root, READ, &none)?;
                }
            }
        }
        let tmp = rules::canonical(i.tmp.path()).unwrap_or_else(|| i.tmp.path().to_path_buf());
        rules::grant(&mut b, &tmp, WRITE, &none)?;
        for p in &i.read {
            rules::grant(&mut b, p, READ, &i.protected_read)?;
        }
        for p in &i.exec {
            rules::grant(&mut b, p, EXEC, &i.protected_read)?;
        }
        for p in &i.write {
            rules::grant(&mut b, p, READ, &i.protected_read)?;
            rules::grant(&mut b, p, WRITE, &i.protected_write)?;
        }
        self.allow_tcp(i, &mut b, tcp)?;
        Ok(b.into_fd())
    }

    fn allow_tcp(&self, i: &Inner, b: &mut landlock::Builder, tcp: bool) -> io::Result<()> {
        if tcp {
            if i.proxy_hosts.is_some() {
                // The declared ports have no route in the tool's namespace; the proxy is all it may reach.
                b.allow_connect(netproxy::PORT)?;
            } else if let NetPlan::Ports(ports) = &i.net {
                for port in ports {
                    b.allow_connect(*port)?;
                }
            }
        }
        Ok(())
    }
}

fn last_cap() -> i32 {
    static L: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *L.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63)
    })
}

/// What the mounts of a plan that starts a process cover, made to exist so that they can be mounted over
/// (read-only) rather than cut out of a grant: the runner's files in the anima's `state/` (audit log, task store),
/// its tier folder and code places, an empty `shared/credentials.json`, and for a Python tool the cache's entries
/// folder. Called by the planner once every refusal is decided, never for a plan made to decide. Answers the
/// root of the Python shim (canonical), which the mounts keep visible inside the hidden cache.
pub(super) fn make_mount_targets(dirs: &Dirs, python: bool) -> Option<PathBuf> {
    let shim_root = python
        .then(|| crate::pyshim::shim_path(&dirs.cache).ok())
        .flatten()
        .and_then(|s| s.parent().and_then(Path::parent).and_then(rules::canonical));
    if shim_root.is_some() {
        // Hidden whole only if it is there: made on a cold cache, so that the entries its probes write next are
        // not readable by those planned before them.
        let _ = crate::owned::dir(&dirs.cache.join(crate::cache::ENTRIES_DIR), "cache dir");
    }
    runner_state_files(dirs);
    shim_root
}

/// The runner's files in the anima's `state/` (audit log, task store), made to exist so that they can be
/// mounted over; canonical paths.
fn runner_state_files(dirs: &Dirs) -> Vec<PathBuf> {
    let Some(anima) = dirs.anima.as_deref().and_then(rules::canonical) else {
        return Vec::new();
    };
    let state = anima.join("state");
    let mut out = Vec::new();
    // An empty tier folder changes nothing, and a new one could not be made read-only.
    let _ = std::fs::create_dir(anima.join("tools"));
    pinned::make_code_places(&anima);
    // Likewise an empty credentials file (a flat object without keys) in `shared/`, which tools may write whole:
    // hidden by a mount, it cannot be planted by a tool to answer another tool's credential.
    if let Some(shared) = rules::canonical(&dirs.data.join("shared")) {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(shared.join("credentials.json"))
        {
            let _ = f.write_all(b"{}\n");
        }
    }
    for d in ["background_tasks", "background_notifications"] {
        // Never through a link a tool left in place of `state/` (the runner refuses its files there anyway).
        if crate::beneath::make_dirs(&anima, &Path::new("state").join(d)).is_ok() {
            out.extend(rules::canonical(&state.join(d)));
        }
    }
    // Made to exist so that it can be hidden (it holds unmasked task arguments).
    {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .mode(0o700)
            .create(state.join("background_tasks").join(crate::dirs::TASKS_PRIVATE_DIR));
    }
    let audit = anima.join(crate::policy::audit::AUDIT_FILE);
    use rustix::fs::OFlags;
    let flags = OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NONBLOCK | OFlags::NOCTTY;
    if crate::beneath::open(&anima, Path::new(crate::policy::audit::AUDIT_FILE), flags, 0o600).is_ok() {
        out.extend(rules::canonical(&audit));
    }
    out
}
