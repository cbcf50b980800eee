//! The planner: from the declaration, the tier, the settings and the anima's grants to a [`Plan`] (data: the
//! places read, written and run, the network, the mounts), or a refusal naming the grant to add. It reads the
//! file system (what exists, where links lead) and writes nothing: a plan made only to decide (`check`, a pooled
//! call, a submit) and a refused one leave every folder as they found it. A plan that starts a process has the
//! places its mounts need made first ([`super::apply::make_mount_targets`]), once every refusal is decided.

use super::layout::{home_secrets, narrow, narrowed_grant, protected, runner_readable, DATA_READ, DATA_WRITE};
use super::*;

fn refusal(message: String, hint: String, key: &str, reason: &str, perms_path: &Path, tool: &str) -> CallError {
    CallError::new(ErrorCode::PermissionDenied, message)
        .hint(hint)
        .with(Detail::Tool, tool)
        .with(Detail::Reason, reason)
        .with(Detail::Key, key)
        .with(Detail::PermissionsPath, perms_path.to_string_lossy().into_owned())
}

pub(super) fn plan_with(
    dirs: &Dirs,
    file: &ToolFile,
    perms: &Result<LoadedPermissions, PermissionsError>,
    needs: Needs<'_>,
    settings: &SandboxSettings,
    plans: Option<&ProbePlans>,
) -> Result<Plan, CallError> {
    let _memo = rules::memo();
    // Before the plan looks at the file system: a folder changed since may hold what the plan did not see.
    let planned_at = std::time::SystemTime::now();
    let (grants, perms_path) = match perms {
        Ok(p) => (p.permissions.sandbox.clone(), p.path().to_path_buf()),
        // The gate refuses every call then; a probe still gets the defaults.
        Err(e) => (Grants::default(), e.path.clone()),
    };
    let tier = file.tier;
    let tool = file.name.as_str();
    let mode = grants.mode(tier).unwrap_or_else(|| settings.mode(tier));
    let origin = Origin {
        tier,
        mode_by_grant: grants.mode(tier).is_some(),
        net_by_grant: grants.net.is_some(),
    };
    let (decls, lenient): (Vec<Option<&Declared>>, bool) = match &needs {
        Needs::Probe => (Vec::new(), false),
        Needs::Call(d) | Needs::Decide(d) => (vec![*d], false),
        Needs::Serve(v) => (v.clone(), true),
    };
    let declared = decls.iter().any(Option::is_some);
    let check_only = matches!(needs, Needs::Decide(_));
    if mode == Mode::Off {
        return Ok(Plan::new(None, Vec::new(), declared, origin, check_only, false));
    }
    // A plan made to decide starts nothing: it names the temp dir a call would have, and makes none.
    let tmp = if check_only {
        CallTmp::planned()
    } else {
        let key = match needs {
            Needs::Probe => tmp::ReuseKey::of_probe(
                &dirs.data,
                dirs.anima.as_deref(),
                file.path.parent().unwrap_or(&file.path),
            ),
            _ => tmp::ReuseKey::of(&dirs.data, dirs.anima.as_deref(), &file.path),
        };
        CallTmp::new(key).map_err(|e| {
            CallError::new(
                ErrorCode::Internal,
                format!("cannot make the call's private temp dir: {e}"),
            )
        })?
    };
    let tmp_path = rules::canonical(tmp.path()).unwrap_or_else(|| tmp.path().to_path_buf());
    let home = crate::env_vars::HOME.get_os().map(PathBuf::from);
    let tool_real = rules::canonical(&file.path).unwrap_or_else(|| file.path.clone());
    let python = file.launch == crate::discover::Launch::Python;
    // A plan made to decide a pooled call is remembered too (the pool's [`ProbePlans`]), with what else it
    // depends on in its key.
    let call_key = match &needs {
        Needs::Decide(d) => Some(probe_plans::CallKey {
            tool: tool.to_owned(),
            path: file.path.clone(),
            tier,
            declared: d.cloned(),
            perms_path: perms_path.clone(),
            cache: dirs.cache.clone(),
            core: dirs.core.clone(),
            cwd: std::env::current_dir().ok(),
            vars: [
                &crate::env_vars::PATH,
                &crate::env_vars::AUDIT_LOG,
                &crate::env_vars::TASKS_URL,
            ]
            .iter()
            .map(|v| v.get_os())
            .collect(),
        }),
        _ => None,
    };
    let probe_key = match (&needs, plans) {
        (Needs::Probe | Needs::Decide(_), Some(_)) => Some(probe_plans::Key {
            data: dirs.data.clone(),
            anima: dirs.anima.clone(),
            tool_dir: file.path.parent().map(Path::to_path_buf).unwrap_or_default(),
            python,
            tmp_dir: tmp_path.parent().map(Path::to_path_buf).unwrap_or_default(),
            home: home.clone(),
            settings: settings.clone(),
            grants: grants.clone(),
            call: call_key,
        }),
        _ => None,
    };
    if let (Some(plans), Some(key)) = (plans, &probe_key) {
        if let Some(mut shared) = plans.get(key, &tmp_path) {
            if shared.reads == Reads::DenyList && !check_only {
                hide_other_call_tmps(&mut shared.mounts, &tmp_path);
            }
            let inner = Inner {
                shared,
                tmp,
                tool: tool_real,
            };
            return Ok(Plan::new(Some(inner), Vec::new(), declared, origin, check_only, true));
        }
    }
    let places = Places {
        anima: dirs.anima.clone(),
        data: dirs.data.clone(),
        tmp: tmp_path.clone(),
        tool_dir: file.path.parent().map(Path::to_path_buf).unwrap_or_default(),
        home: home.clone(),
        cwd: None,
    };
    let mut places = places;
    let support = kernel::support();
    let pid_ns = settings.pid_namespace && support.pid_namespace;
    // The mount namespace comes with the PID namespace (the same clone).
    let mount_ns = pid_ns;
    // The paths as named, before their links are followed: a remembered plan watches their folders too (kept
    // for a listing's probes and a pool's decisions only, not on every call's way). `also`: what it watches
    // itself.
    let mut named: Option<Vec<PathBuf>> = probe_key.as_ref().map(|_| Vec::new());
    let mut also: Vec<PathBuf> = Vec::new();
    if let (Some(n), true) = (&mut named, check_only) {
        // What `usable_cwd`, the company of `protected` and the sockets' settings look at (the declared places
        // once `$CWD` is known).
        n.push(file.path.clone());
        n.extend(std::env::current_dir().ok());
        if let Some(path) = crate::env_vars::PATH.get_os() {
            n.extend(std::env::split_paths(&path).filter(|d| d.is_absolute()));
        }
        also.extend(dirs.anima.as_ref().map(|a| a.join("status.json")));
        also.push(dirs.data.join("companies"));
        also.push(dirs.data.join(crate::settings::SETTINGS_FILE));
    }
    let (mut protected_read, mut protected_write) =
        protected(dirs, home.as_deref(), named.as_mut()).map_err(|e| e.to_call_error(tool))?;
    if mount_ns {
        // A secret of the home folder that does not exist cannot be mounted over; cut out of a write grant it
        // would split the folder around it (nothing new at its top level). A module that may write there may
        // make it: what it writes is its own, and the next call finds it hidden.
        for p in home_secrets(home.as_deref()) {
            if std::fs::symlink_metadata(&p).is_err() {
                protected_write.paths.remove(&p);
            }
        }
    }
    for raw in settings.deny.iter().chain(&grants.deny) {
        if let Ok(Some(p)) = places.expand(raw) {
            named.iter_mut().for_each(|n| n.push(p.clone()));
            let p = rules::canonical(&p).unwrap_or(p);
            protected_read.paths.insert(p.clone());
            protected_write.paths.insert(p);
        }
    }
    {
        let granted = |list: &[String]| -> Vec<PathBuf> {
            let real = list.iter().filter_map(|r| places.expand(r).ok().flatten());
            real.filter_map(|p| rules::canonical(&p)).collect()
        };
        let (read, write) = (granted(&grants.read), granted(&grants.write));
        narrow(
            &dirs.data,
            &read,
            &write,
            &mut protected_read,
            &mut protected_write,
            named.as_mut(),
        );
    }
    // Not for a probe: it has no network, so no `connect` (and a remembered plan would watch `/tmp` and `/run`).
    if !matches!(needs, Needs::Probe) {
        let granted: Vec<PathBuf> = grants
            .read
            .iter()
            .chain(&grants.write)
            .filter_map(|r| places.expand(r).ok().flatten())
            .collect();
        // Only those there now, and not cut out of write grants: a missing one would split a writable `/tmp`.
        for p in sockets::hidden(&dirs.data, &granted) {
            protected_read.paths.extend(rules::canonical(&p));
            if named.is_some() {
                also.push(p);
            }
        }
    }
    places.cwd = usable_cwd(dirs, home.as_deref(), &protected_write);
    if let (Some(n), true) = (&mut named, check_only) {
        for d in decls.iter().flatten() {
            let declared = d.read.iter().chain(&d.write).chain(&d.exec);
            n.extend(declared.filter_map(|raw| places.expand(raw).ok().flatten()));
        }
    }

    // What the anima's grants cover, and what an undeclared tool gets.
    let mut grant_write: Vec<PathBuf> = vec![tmp_path.clone()];
    grant_write.extend(dirs.anima.clone());
    grant_write.extend(DATA_WRITE.iter().map(|d| dirs.data.join(d)));
    grant_write.extend(places.cwd.clone());
    let mut grant_read: Vec<PathBuf> = DATA_READ.iter().map(|d| dirs.data.join(d)).collect();
    grant_read.push(places.tool_dir.clone());
    let mut grant_exec: Vec<PathBuf> = Vec::new();
    // A grant of a place that does not exist grants nothing: said, not dropped without a word.
    let mut missing_grants: Vec<String> = Vec::new();
    for (field, list, out) in [
        ("write", &grants.write, &mut grant_write),
        ("read", &grants.read, &mut grant_read),
        ("exec", &grants.exec, &mut grant_exec),
    ] {
        for raw in list {
            match places.expand(raw) {
                Ok(Some(p)) => {
                    if std::fs::symlink_metadata(&p).is_err() {
                        missing_grants.push(format!(
                            "\"sandbox\": {{\"{field}\": [{raw:?}]}} in {}: {} does not exist, so nothing is granted \
                             there; create it",
                            perms_path.display(),
                            p.display()
                        ));
                    }
                    out.push(p)
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(refusal(
                        format!("the sandbox grants in {} are invalid: {e}", perms_path.display()),
                        "fix \"sandbox\" in that file".into(),
                        "sandbox",
                        "sandbox_grants_invalid",
                        &perms_path,
                        tool,
                    ))
                }
            }
        }
    }
    if let Some(n) = &mut named {
        n.extend(grant_write.iter().chain(&grant_read).chain(&grant_exec).cloned());
    }
    // The canonical form of a path that exists; the named temp dir of a plan made to decide stands as it is.
    let canonical = |p: &Path| rules::canonical(p).or_else(|| (check_only && p == tmp_path).then(|| p.to_path_buf()));
    let canon = |v: Vec<PathBuf>| -> Vec<PathBuf> { v.iter().filter_map(|p| canonical(p)).collect() };
    let grant_write = canon(grant_write);
    let grant_read: Vec<PathBuf> = canon(grant_read)
        .into_iter()
        .chain(grant_write.iter().cloned())
        .collect();
    // A writable place is runnable only where the anima grants `exec` of it (write xor execute).
    let granted_exec = canon(grant_exec);
    let grant_exec: Vec<PathBuf> = granted_exec
        .iter()
        .cloned()
        .chain(
            grant_read
                .iter()
                .filter(|r| !grant_write.iter().any(|w| r.starts_with(w)))
                .cloned(),
        )
        .collect();
    let net_granted = grants.net_for(tool);
    let mut read = Vec::new();
    let mut write = Vec::new();
    let mut exec = Vec::new();
    let mut net = NetPlan::None;
    let mut hosts: Vec<String> = Vec::new();
    let mut warnings = missing_grants;
    if matches!(needs, Needs::Probe) {
        // AnimaWorks imports a module for its schemas too: the probe may write where a call may (no network).
        read.extend(grant_read.iter().cloned());
        write.extend(grant_write.iter().cloned());
    }
    for d in decls {
        let Some(d) = d else {
            // Undeclared: what AnimaWorks tools do — their anima, the shared folders, the network if granted.
            read.extend(grant_read.iter().cloned());
            write.extend(grant_write.iter().cloned());
            exec.extend(canon(
                grants
                    .exec
                    .iter()
                    .filter_map(|r| places.expand(r).ok().flatten())
                    .collect(),
            ));
            if net_granted {
                net = net.union(NetPlan::All);
            }
            continue;
        };
        if lenient
            && !covered(
                d,
                &places,
                &grant_read,
                &grant_write,
                &grant_exec,
                net_granted,
                &protected_read,
                &protected_write,
            )
        {
            continue;
        }
        if let Some(problem) = validate(d).into_iter().next() {
            return Err(CallError::new(
                ErrorCode::PermissionDenied,
                format!("{tool}: invalid sandbox declaration: {problem}"),
            )
            .hint("fix the tool's profile (protocol.md §2.4); `animaworks-tool check` shows every problem")
            .with(Detail::Tool, tool)
            .with(Detail::Reason, "sandbox_invalid"));
        }
        for (field, list, allowed, out) in [
            ("read", &d.read, &grant_read, &mut read),
            ("write", &d.write, &grant_write, &mut write),
            ("exec", &d.exec, &grant_exec, &mut exec),
        ] {
            for raw in list {
                let Ok(Some(p)) = places.expand(raw) else { continue };
                let Some(real) = canonical(&p) else {
                    warnings.push(format!(
                        "sandbox.{field} {raw:?}: {} does not exist; nothing granted",
                        p.display()
                    ));
                    continue;
                };
                let runner_state = match field {
                    "write" => protected_write.covers(&real),
                    _ => protected_read.covers(&real),
                };
                let allowed = allowed.iter().any(|a| real.starts_with(a))
                    || (field != "write" && runner_readable(&real, &places.data));
                // An installed MCP server's package is never writable by a call (mounted read-only), even inside a
                // writable working folder.
                let writable_exec = field == "exec"
                    && grant_write.iter().any(|w| real.starts_with(w))
                    && !granted_exec.iter().any(|g| real.starts_with(g))
                    && !runner_readable(&real, &places.data);
                if runner_state || !allowed || writable_exec {
                    let why = if let Some(line) = runner_state
                        .then(|| narrowed_grant(&real, &places.data, field))
                        .flatten()
                    {
                        format!(
                            "AnimaWorks tools do not use it, so it is not granted by default: add {line} to {}",
                            perms_path.display()
                        )
                    } else if runner_state {
                        "the runner's own state (credentials, permissions, audit, tasks, other animas) is never granted"
                            .to_owned()
                    } else if writable_exec {
                        format!(
                            "{} is writable by the tool, so it is not executable (write xor execute) unless the anima \
                             grants it: add {raw:?} to \"sandbox\": {{\"exec\": [...]}} in {}",
                            real.display(),
                            perms_path.display()
                        )
                    } else {
                        format!(
                            "add {raw:?} (or a folder above it) to \"sandbox\": {{\"{field}\": [...]}} in {}",
                            perms_path.display()
                        )
                    };
                    return Err(refusal(
                        format!(
                            "{tool} declares sandbox.{field} {raw:?} ({}), which the anima's permissions do not grant",
                            real.display()
                        ),
                        why,
                        &format!("sandbox.{field}"),
                        "sandbox_not_granted",
                        &perms_path,
                        tool,
                    ));
                }
                out.push(real);
            }
        }
        let want = declared_net(d);
        if want != NetPlan::None && !net_granted {
            let key = format!("sandbox.net: [\"{tool}\"]");
            return Err(refusal(
                format!("{tool} ({tier}) declares network access, which the anima's permissions do not grant"),
                format!(
                    "add \"sandbox\": {{\"net\": [\"{tool}\"]}} (or true) to {}",
                    perms_path.display()
                ),
                &key,
                "sandbox_not_granted",
                &perms_path,
                tool,
            ));
        }
        if let Net::Only(list) = &d.net {
            hosts.extend(list.iter().cloned());
        }
        net = net.union(want);
    }
    // Why only with the PID namespace: the network namespace is made in the same step (and needs the same
    // privilege); without it a host list stays a port list.
    let direct = grants.direct_net.iter().any(|t| t == tool || t == "*");
    let proxy_hosts = match net {
        NetPlan::Ports(_) if pid_ns && netproxy::available() => {
            hosts.sort();
            hosts.dedup();
            Some(hosts)
        }
        // The whole network of an undeclared module, through the proxy: every host it reaches is in its audit
        // line, and loopback and private addresses only where a grant names them.
        NetPlan::All if pid_ns && netproxy::available() && !direct => Some(vec!["*".to_owned()]),
        _ => None,
    };
    let reads = if mount_ns { Reads::DenyList } else { Reads::AllowList };
    write.sort();
    write.dedup();
    let mut missing = Vec::new();
    if !support.landlock_fs() {
        missing.push("Landlock (files)");
    }
    if matches!(net, NetPlan::Ports(_)) && proxy_hosts.is_none() && !support.landlock_tcp() {
        missing.push("Landlock TCP rules (ABI 4)");
    }
    if net != NetPlan::All && !support.seccomp {
        missing.push("seccomp (UDP and raw sockets)");
    }
    if !missing.is_empty() {
        let what = format!(
            "this kernel cannot enforce the sandbox of {tool}: no {}",
            missing.join(", no ")
        );
        if settings.unsupported == Unsupported::Refuse {
            return Err(CallError::new(ErrorCode::PermissionDenied, what)
                .hint("run on a kernel with Landlock (Linux 5.13+; TCP: 6.7+), or set \"sandbox\": {\"unsupported\": \"warn\"} in <data dir>/animaworks-tool.json to run it less confined")
                .with(Detail::Tool, tool)
                .with(Detail::Reason, "sandbox_unsupported"));
        }
        warnings.push(format!("{what}; running it less confined (\"unsupported\": \"warn\")"));
    }
    let mounts = if mount_ns && !check_only {
        // Every refusal is decided by now: what the mounts cover is made only for a plan that starts a process.
        let shim_root = apply::make_mount_targets(dirs, python);
        let mut writable = write.clone();
        writable.push(tmp_path.clone());
        mounts(dirs, shim_root, &writable, &exec, &protected_read, &mut protected_write)?
    } else {
        Vec::new()
    };
    let mut shared = Shared {
        read,
        write,
        exec,
        net,
        protected_read,
        protected_write,
        reads,
        mounts,
        private_net: grants.private_targets(),
        support,
        pid_ns,
        proxy_hosts,
        cache: dirs.cache.clone(),
        home,
        data: dirs.data.clone(),
        python,
    };
    if let (Some(plans), Some(key), Some(named), true) = (plans, probe_key, &named, warnings.is_empty()) {
        let made = probe_plans::Made {
            at: planned_at,
            tmp: &tmp_path,
            named,
            also: &also,
        };
        plans.put(key, &shared, made);
    }
    // Why after the memo: without the calls folder's one mount, this lists the other calls' dirs of the moment.
    if mount_ns && !check_only {
        hide_other_call_tmps(&mut shared.mounts, &tmp_path);
    }
    let inner = Inner {
        shared,
        tmp,
        tool: tool_real,
    };
    Ok(Plan::new(Some(inner), warnings, declared, origin, check_only, false))
}

/// Does the anima grant everything `d` declares? (For processes serving several actions: the ones beyond the
/// grants are left out and refused when called.)
#[allow(clippy::too_many_arguments)]
fn covered(
    d: &Declared,
    places: &Places,
    read: &[PathBuf],
    write: &[PathBuf],
    exec: &[PathBuf],
    net_granted: bool,
    pr: &Protected,
    pw: &Protected,
) -> bool {
    if !validate(d).is_empty() || (declared_net(d) != NetPlan::None && !net_granted) {
        return false;
    }
    [
        (&d.read, read, pr, false),
        (&d.write, write, pw, true),
        (&d.exec, exec, pr, false),
    ]
    .into_iter()
    .all(|(list, allowed, prot, is_write)| {
        list.iter().all(
            |raw| match places.expand(raw).ok().flatten().and_then(|p| rules::canonical(&p)) {
                None => true,
                Some(real) => {
                    !prot.covers(&real)
                        && ((!is_write && runner_readable(&real, &places.data))
                            || allowed.iter().any(|a| real.starts_with(a)))
                }
            },
        )
    })
}

/// The caller's working directory (canonical), writable by an undeclared module and declarable as `$CWD`, unless
/// it is a protected place: `/`, the home folder or a folder above it, the data dir or one above it, a tier
/// folder, the runner's state or another anima's folder, or a place whose files run or are trusted ([`cwd`]).
fn usable_cwd(dirs: &Dirs, home: Option<&Path>, protected_write: &Protected) -> Option<PathBuf> {
    let cwd = rules::canonical(&std::env::current_dir().ok()?)?;
    let data = rules::canonical(&dirs.data).unwrap_or_else(|| dirs.data.clone());
    let home = home.map(|h| rules::canonical(h).unwrap_or_else(|| h.to_path_buf()));
    let wide = cwd == Path::new("/") || home.as_ref().is_some_and(|h| h.starts_with(&cwd)) || data.starts_with(&cwd);
    let trusted = cwd::refused(&cwd, home.as_deref(), crate::env_vars::PATH.get_os().as_deref()).is_some();
    (!wide && !trusted && !protected_write.covers(&cwd)).then_some(cwd)
}

/// At most this many entries of one folder are hidden one by one (other animas, the cache beside the shim).
pub(super) const MAX_HIDDEN: usize = 512;

/// The mounts of a call with a mount namespace, in the order they are made: every writable place `noexec`, the
/// granted `exec` places inside them back to executable, the runner's files and tier folders inside them
/// read-only (and taken out of `protected_write`, which Landlock no longer needs to split around them), then
/// every existing path of the deny list hidden. A protected path that does not exist cannot be mounted over and
/// stays cut out of the Landlock grant.
fn mounts(
    dirs: &Dirs,
    shim_root: Option<PathBuf>,
    writable: &[PathBuf],
    exec: &[PathBuf],
    protected_read: &Protected,
    protected_write: &mut Protected,
) -> Result<Vec<PlannedMount>, CallError> {
    let mut out = Vec::new();
    let mut roots: Vec<&PathBuf> = Vec::new();
    let mut sorted: Vec<&PathBuf> = writable.iter().collect();
    sorted.sort();
    for w in sorted {
        if !roots.iter().any(|r| w.starts_with(r)) {
            roots.push(w);
        }
    }
    let inside = |p: &Path| roots.iter().any(|r| p.starts_with(r));
    for r in &roots {
        out.push(PlannedMount {
            path: (*r).clone(),
            kind: MountKind::NoExec,
        });
    }
    out.extend(pinned::state_pin(dirs.anima.as_deref(), &roots));
    for e in exec {
        if inside(e) {
            out.push(PlannedMount {
                path: e.clone(),
                kind: MountKind::Exec,
            });
        }
    }
    let anima = dirs.anima.as_deref().and_then(rules::canonical);
    // The original reads permissions.json when it exists, and only then permissions.md.
    let md_unread = anima
        .as_ref()
        .filter(|a| a.join(crate::policy::permissions::JSON_FILE).is_file())
        .map(|a| a.join(crate::policy::permissions::MD_FILE));
    let mut hidden: Vec<PathBuf> = Vec::new();
    let hide = |out: &mut Vec<PlannedMount>, p: &Path, hidden: &mut Vec<PathBuf>| {
        if hidden.iter().any(|h| p.starts_with(h)) {
            return;
        }
        let Ok(m) = std::fs::symlink_metadata(p) else { return };
        hidden.push(p.to_path_buf());
        out.push(PlannedMount {
            path: p.to_path_buf(),
            kind: MountKind::Hide { dir: m.is_dir() },
        });
    };
    let ro: Vec<PathBuf> = protected_write
        .paths
        .iter()
        .filter(|p| inside(p) && !protected_read.covers(p))
        .cloned()
        .collect();
    for p in ro {
        if md_unread.as_ref() == Some(&p) {
            protected_write.paths.remove(&p);
        } else if std::fs::symlink_metadata(&p).is_ok() {
            protected_write.paths.remove(&p);
            out.push(PlannedMount {
                path: p,
                kind: MountKind::ReadOnly,
            });
        }
    }
    let cache = rules::canonical(&dirs.cache).unwrap_or_else(|| dirs.cache.clone());
    let mut denied: Vec<&PathBuf> = protected_read.paths.iter().collect();
    denied.sort_by_key(|p| p.as_os_str().len());
    for p in denied {
        match &shim_root {
            Some(keep) if *p == cache && keep.starts_with(p) => hide_except(&mut out, p, keep, &mut hidden),
            _ => hide(&mut out, p, &mut hidden),
        }
    }
    if let Some((folders, own)) = &protected_read.peers {
        hide_animas::plan(&mut out, folders, own.as_deref(), &mut hidden)?;
    }
    // A hidden path is read-only too (an empty read-only folder, an unopenable file): no need to cut it out of
    // a write grant.
    protected_write
        .paths
        .retain(|p| !hidden.iter().any(|h| p.starts_with(h)));
    Ok(out)
}

/// Other calls' temp dirs beside this call's own: the runner's user may read them, so Landlock's read of the whole
/// file system would let one call read what another, of another anima, keeps there. In the calls folder, one
/// mount hides them all, those of calls started later included; without it (`animaworks-tool-call-*` in the temp
/// dir itself), each one there when the plan is made is hidden, and a call started later makes its dir after
/// this one's mounts.
fn hide_other_call_tmps(out: &mut Vec<PlannedMount>, own: &Path) {
    let Some(parent) = own.parent() else { return };
    let in_calls_dir = tmp::calls_dir() == Some(parent);
    if in_calls_dir && kernel::support().mount_api {
        out.push(PlannedMount {
            path: parent.to_path_buf(),
            kind: MountKind::HideCalls,
        });
        return;
    }
    // Without the calls folder, the dirs named as its fallback makes them; in it (a kernel without open_tree),
    // every other entry.
    let prefix = if in_calls_dir { &b""[..] } else { tmp::PREFIX.as_bytes() };
    let Ok(rd) = std::fs::read_dir(parent) else { return };
    for e in rd
        .flatten()
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(prefix))
        .take(MAX_HIDDEN)
    {
        let p = parent.join(e.file_name());
        if p != own && e.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(PlannedMount {
                path: p,
                kind: MountKind::HideOther,
            });
        }
    }
}

/// Hide every entry of `dir` but the way down to `keep` (the Python shim inside the runner's cache).
fn hide_except(out: &mut Vec<PlannedMount>, dir: &Path, keep: &Path, hidden: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten().take(MAX_HIDDEN) {
        let p = dir.join(e.file_name());
        if p == keep {
            continue;
        }
        if keep.starts_with(&p) {
            hide_except(out, &p, keep, hidden);
            continue;
        }
        let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
        hidden.push(p.clone());
        out.push(PlannedMount {
            path: p,
            kind: MountKind::HideEntry { dir: m.is_dir() },
        });
    }
}
