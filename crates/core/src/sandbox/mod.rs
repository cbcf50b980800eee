//! The sandbox: what a tool's process may touch, enforced by the kernel (docs/sandbox.md, protocol.md §2.4).
//!
//! Two steps, both before the fork:
//! 1. [`plan`]: from the action's declaration (its profile's `sandbox`), the tool's tier, the operator's
//!    settings (`<data dir>/animaworks-tool.json` `"sandbox"`) and the anima's grants (`permissions.json`
//!    `"sandbox"`) to a [`Plan`] — or a refusal, before anything starts, naming the key to add.
//! 2. [`Plan::confine`], in the spawn path once the program is known: the Landlock ruleset (an fd), the
//!    seccomp program and the namespace setup (with an enforced host list, the proxy's socketpair and task,
//!    [`netproxy`]), so that the child ([`child::enter_and_exec`]) only makes system calls.
//!
//! The runner's own state is cut out of every grant ([`rules::Protected`]): `config.json`, `vault.json`,
//! `vault.key`, `shared/credentials.json`, the schema cache, spilled outputs, other animas' folders (never
//! read nor written); the permissions files, the audit log, the task store, the tool tiers and the runner's
//! settings (never written).

mod cwd;
mod declared;
mod hide_animas;
mod netns;
mod pinned;
mod places;
mod probe_plans;
mod sockets;
mod tmp;
pub use probe_plans::ProbePlans;
pub use tmp::{calls_dir, release_spares};
use tmp::CallTmp;

pub use crate::policy::sandbox_grants::{self as grants, Grants, NetGrant};
pub use awt_sys::confine::{child, kernel, landlock, netproxy, rules, seccomp, NetPlan};
use declared::declared_net;
pub use declared::validate;
use places::Places;

use crate::dirs::Dirs;
use crate::discover::ToolFile;
use crate::error::{CallError, Detail, ErrorCode};
use crate::policy::permissions::{LoadedPermissions, PermissionsError};
use crate::tier::Tier;
use awt_protocol::{Net, Sandbox as Declared};
use rules::Protected;
use serde_json::{json, Value};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// How calls confine reads with these kernel features and settings (a mount namespace comes with the PID
/// namespace).
pub fn reads_in_force(k: &kernel::Support, settings: Option<&SandboxSettings>) -> Reads {
    if k.pid_namespace && settings.is_none_or(|s| s.pid_namespace) {
        Reads::DenyList
    } else {
        Reads::AllowList
    }
}

/// What `doctor` says of reads, writes and execution.
pub fn doctor_line(reads: Reads) -> String {
    match reads {
        Reads::DenyList => "reads: everything but the deny list (hidden by mounts in the call's mount namespace); writable places mounted noexec; memfds only with MFD_NOEXEC_SEAL".to_owned(),
        Reads::AllowList => "reads: the allow list only (no mount namespace: no PID namespace, or \"pid_namespace\": false); write xor execute by Landlock alone (the dynamic loader can still map a written file)".to_owned(),
    }
}

pub use crate::settings::sandbox::{Mode, SandboxSettings, Unsupported};

impl SandboxSettings {
    fn mode(&self, tier: Tier) -> Mode {
        match tier {
            Tier::Core => self.core,
            Tier::Common => self.common,
            Tier::Personal => self.personal,
        }
    }
}

/// `env` with a plan's variables ([`Plan::env`]) set over it, and those it must not have removed.
pub fn with_env(env: &[(OsString, OsString)], plan: Option<&Plan>) -> Vec<(OsString, OsString)> {
    let extra = plan.map(Plan::env).unwrap_or_default();
    let unset: &[&str] = if plan.is_some_and(Plan::proxied) {
        netproxy::UNSET
    } else {
        &[]
    };
    let mut out: Vec<(OsString, OsString)> = env
        .iter()
        .filter(|(k, _)| !extra.iter().any(|(e, _)| e == k) && !unset.iter().any(|u| k == u))
        .cloned()
        .collect();
    out.extend(extra);
    out
}

/// What the process is started for, as far as the sandbox cares.
pub enum Needs<'a> {
    /// `--schemas`: the default for undeclared tools, without network and without writes but `$TMP`.
    Probe,
    /// One call of an action with this declaration (`None`: it declared nothing).
    Call(Option<&'a Declared>),
    /// A process that serves every action (a persistent worker, a `cli_main` argv): the union of the
    /// declarations the anima's grants cover (a call of an action beyond them is refused on its own).
    Serve(Vec<Option<&'a Declared>>),
    /// The plan of one call that starts no process from it: a call a persistent worker runs (under the
    /// worker's own plan), or a submit (its worker plans the task again). The same decisions and refusals as
    /// [`Needs::Call`], without the mounts (a third of the runner's work per pooled call), which only a process
    /// started from the plan uses. Such a plan starts nothing: [`Plan::confine`] refuses it, unconfined too.
    Decide(Option<&'a Declared>),
}

impl<'a> Needs<'a> {
    /// Every action of `m`, for a process that may run any of them.
    pub fn serve(m: &'a crate::manifest::Manifest) -> Needs<'a> {
        let mut v: Vec<Option<&Declared>> = m.actions.iter().map(|a| a.profile.sandbox.as_ref()).collect();
        if v.is_empty() {
            v.push(None);
        }
        Needs::Serve(v)
    }
}

/// The plan of one process of `file`, with the anima's permissions read here.
pub fn for_process(dirs: &Dirs, file: &ToolFile, needs: Needs<'_>) -> Result<Plan, CallError> {
    for_process_with(dirs, file, needs, None)
}

/// The plan of `file`'s `--schemas` probe, one of a listing's: what the listing's earlier probes planned for the
/// same tool folder and temp dir, under the same settings and grants, is not planned again ([`ProbePlans`]).
pub fn for_probe(dirs: &Dirs, file: &ToolFile, plans: &ProbePlans) -> Result<Plan, CallError> {
    for_process_with(dirs, file, Needs::Probe, Some(plans))
}

fn for_process_with(
    dirs: &Dirs,
    file: &ToolFile,
    needs: Needs<'_>,
    plans: Option<&ProbePlans>,
) -> Result<Plan, CallError> {
    let perms = match &dirs.anima {
        Some(a) => crate::policy::permissions::load(a),
        None => Ok(LoadedPermissions {
            permissions: Default::default(),
            source: crate::policy::permissions::PermissionsFile::Defaults(PathBuf::from(format!(
                "<anima dir: pass --anima-dir or set {}>/permissions.json",
                crate::env_vars::ANIMA_DIR.name
            ))),
        }),
    };
    let p = plan_loading(dirs, file, &perms, needs, plans)?;
    for w in &p.warnings {
        tracing::warn!("sandbox of {}: {w}", file.name);
    }
    Ok(p)
}

/// A computed sandbox for one process: the paths and network it may use, ready to be turned into kernel rules.
#[derive(Debug)]
pub struct Plan {
    /// `None`: not confined (mode off for this tier and anima).
    inner: Option<Inner>,
    /// Why a confinement is partial or missing; printed on every call and written in the audit line.
    pub warnings: Vec<String>,
    declared: bool,
    /// Where the plan's confinement comes from (for errors that name the grant to add).
    pub origin: Origin,
    /// The proxy of a host list, once the process is started; it stops when the plan is dropped.
    proxy: std::sync::Mutex<Option<netproxy::Proxy>>,
    /// The kept network namespaces its processes joined (docs/sandbox.md, "The network"), back to the pool with it.
    kept_net: std::sync::Mutex<Vec<netns::Lease>>,
    /// The process's resource limits (set whether or not it is confined); its cgroup goes with the plan.
    pub limits: crate::resources::CallLimits,
    /// Planned for [`Needs::Decide`]: no process may start from it, confined or not.
    check_only: bool,
    /// Taken from a listing's remembered plans ([`for_probe`]), not planned for this process.
    remembered: bool,
}

/// Where a plan's confinement comes from: the tool's tier, and whether the mode and the network were set by the
/// anima's `permissions.json` `"sandbox"` (else the tier's default in the runner's settings, and the network's
/// default: granted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    pub tier: Tier,
    pub mode_by_grant: bool,
    pub net_by_grant: bool,
}

/// A plan's confinement but the process's own temp dir and tool file: the same for every `--schemas` probe of one
/// tool folder with one temp dir, so that a listing makes it once for them ([`ProbePlans`]).
#[derive(Debug, Clone)]
struct Shared {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    exec: Vec<PathBuf>,
    net: NetPlan,
    protected_read: Protected,
    protected_write: Protected,
    /// How reads are confined: the whole file system but a deny list hidden by mounts, or an allow list.
    reads: Reads,
    /// The mounts of the call's own mount namespace, in order (empty without one).
    mounts: Vec<PlannedMount>,
    /// Non-public targets the anima's grants name, which the proxy relays.
    private_net: Vec<String>,
    support: kernel::Support,
    pid_ns: bool,
    /// The host list is enforced: the process gets a network namespace and reaches only the runner's proxy,
    /// which holds each connection to these entries (docs/sandbox.md).
    proxy_hosts: Option<Vec<String>>,
    cache: PathBuf,
    home: Option<PathBuf>,
    data: PathBuf,
    /// Started through the Python shim.
    python: bool,
}

#[derive(Debug)]
struct Inner {
    shared: Shared,
    tmp: CallTmp,
    tool: PathBuf,
}

impl std::ops::Deref for Inner {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.shared
    }
}

/// How a plan confines reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// The call has a mount namespace: everything is readable (and runnable, outside writable places) but the deny
    /// list, each entry hidden by an empty mount.
    DenyList,
    /// No mount namespace: the fixed allow list (system places, the grants), Landlock only.
    AllowList,
}

impl Reads {
    pub fn as_str(self) -> &'static str {
        match self {
            Reads::DenyList => "deny_list",
            Reads::AllowList => "allow_list",
        }
    }
}

/// One mount of a plan, as data (turned into a [`child::Mount`] when the process starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMount {
    pub path: PathBuf,
    pub kind: MountKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountKind {
    /// A writable place, made `noexec` (write xor execute).
    NoExec,
    /// A granted `exec` inside a writable place, executable as outside the call.
    Exec,
    /// The runner's file or a tier folder inside a writable place: read-only.
    ReadOnly,
    /// On the deny list: an empty read-only folder or an unopenable file over it.
    Hide { dir: bool },
    /// Another call's temp dir, hidden as a folder of the deny list unless it is gone by the time of the mount.
    HideOther,
    /// An entry of the cache beside the Python shim, hidden one by one: another runner's temp dir or entry may be
    /// gone by the time of the mount (renamed into place or removed), and is then skipped.
    HideEntry { dir: bool },
    /// The folder of every call's temp dir ([`tmp::calls_dir`]), hidden but for this call's own.
    HideCalls,
    /// A folder of anima dirs ([`crate::animas::folders`]), hidden but for the way down to the call's own anima.
    HideAnimas,
}

/// What a confined process may use beyond the system's places ([`Plan::given`]).
pub struct Given<'a> {
    pub read: &'a [PathBuf],
    pub write: &'a [PathBuf],
    pub tmp: &'a Path,
    pub net: &'a NetPlan,
    /// The host list the proxy enforces.
    pub hosts: Option<&'a [String]>,
    /// The action declared its needs (else it has the default of undeclared tools).
    pub declared: bool,
}

fn refusal(message: String, hint: String, key: &str, reason: &str, perms_path: &Path, tool: &str) -> CallError {
    CallError::new(ErrorCode::PermissionDenied, message)
        .hint(hint)
        .with(Detail::Tool, tool)
        .with(Detail::Reason, reason)
        .with(Detail::Key, key)
        .with(Detail::PermissionsPath, perms_path.to_string_lossy().into_owned())
}

/// The folders of the data dir an undeclared AnimaWorks tool reads (`shared/` and `tmp/` it also writes).
const DATA_READ: &[&str] = &[
    "common_knowledge",
    "common_skills",
    "common_tools",
    "reference",
    "company",
    "prompts",
];
const DATA_WRITE: &[&str] = &["shared", "tmp"];

/// Compute the sandbox of one process. A declared need the anima's grants do not cover, or (with
/// `"unsupported": "refuse"`) a kernel that cannot enforce the plan, refuses here, before anything starts.
pub fn plan(
    dirs: &Dirs,
    file: &ToolFile,
    perms: &Result<LoadedPermissions, PermissionsError>,
    needs: Needs<'_>,
) -> Result<Plan, CallError> {
    plan_loading(dirs, file, perms, needs, None)
}

fn plan_loading(
    dirs: &Dirs,
    file: &ToolFile,
    perms: &Result<LoadedPermissions, PermissionsError>,
    needs: Needs<'_>,
    plans: Option<&ProbePlans>,
) -> Result<Plan, CallError> {
    let all = crate::settings::Settings::load(&dirs.data).map_err(|e| e.to_call_error())?;
    let mut p = plan_with(dirs, file, perms, needs, &all.sandbox, plans)?;
    p.limits = crate::resources::CallLimits::for_process(&all, file, perms)?;
    Ok(p)
}

/// The plan of a call, from the runner's settings and the permissions the gate already read (each file is read
/// once per call).
pub fn for_call(
    dirs: &Dirs,
    all: &crate::settings::Settings,
    file: &ToolFile,
    perms: &Result<LoadedPermissions, PermissionsError>,
    needs: Needs<'_>,
) -> Result<Plan, CallError> {
    let mut p = plan_with(dirs, file, perms, needs, &all.sandbox, None)?;
    p.limits = crate::resources::CallLimits::for_process(all, file, perms)?;
    for w in &p.warnings {
        tracing::warn!("sandbox of {}: {w}", file.name);
    }
    Ok(p)
}

fn plan_with(
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
        return Ok(Plan {
            inner: None,
            warnings: Vec::new(),
            declared,
            origin,
            proxy: Default::default(),
            kept_net: Default::default(),
            limits: Default::default(),
            check_only,
            remembered: false,
        });
    }
    let key = match needs {
        Needs::Probe => tmp::ReuseKey::of_probe(&dirs.data, dirs.anima.as_deref(), file.path.parent().unwrap_or(&file.path)),
        _ => tmp::ReuseKey::of(&dirs.data, dirs.anima.as_deref(), &file.path),
    };
    let tmp = CallTmp::new(key).map_err(|e| {
        CallError::new(
            ErrorCode::Internal,
            format!("cannot make the call's private temp dir: {e}"),
        )
    })?;
    let tmp_path = rules::canonical(tmp.path()).unwrap_or_else(|| tmp.path().to_path_buf());
    let home = crate::env_vars::HOME.get_os().map(PathBuf::from);
    let tool_real = rules::canonical(&file.path).unwrap_or_else(|| file.path.clone());
    let python = file.launch == crate::discover::Launch::Python;
    let probe_key = match (&needs, plans) {
        (Needs::Probe, Some(_)) => Some(probe_plans::Key {
            data: dirs.data.clone(),
            anima: dirs.anima.clone(),
            tool_dir: file.path.parent().map(Path::to_path_buf).unwrap_or_default(),
            python,
            tmp_dir: tmp_path.parent().map(Path::to_path_buf).unwrap_or_default(),
            home: home.clone(),
            settings: settings.clone(),
            grants: grants.clone(),
        }),
        _ => None,
    };
    if let (Some(plans), Some(key)) = (plans, &probe_key) {
        if let Some(mut shared) = plans.get(key, &tmp_path) {
            if shared.reads == Reads::DenyList {
                hide_other_call_tmps(&mut shared.mounts, &tmp_path);
            }
            return Ok(Plan {
                inner: Some(Inner {
                    shared,
                    tmp,
                    tool: tool_real,
                }),
                warnings: Vec::new(),
                declared,
                origin,
                proxy: Default::default(),
                kept_net: Default::default(),
                limits: Default::default(),
                check_only,
                remembered: true,
            });
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
    // for a listing's probes only, not on every call's way).
    let mut named: Option<Vec<PathBuf>> = probe_key.as_ref().map(|_| Vec::new());
    let (mut protected_read, mut protected_write) = protected(dirs, home.as_deref(), named.as_mut());
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
        }
    }
    places.cwd = usable_cwd(dirs, home.as_deref(), &protected_write);

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
    let canon = |v: Vec<PathBuf>| -> Vec<PathBuf> { v.iter().filter_map(|p| rules::canonical(p)).collect() };
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
    if mount_ns {
        // Made to exist so that they can be mounted over (read-only) rather than cut out of a grant.
        runner_state_files(dirs);
    }
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
                let Some(real) = rules::canonical(&p) else {
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
                let writable_exec = field == "exec"
                    && grant_write.iter().any(|w| real.starts_with(w))
                    && !granted_exec.iter().any(|g| real.starts_with(g));
                if runner_state || !allowed || writable_exec {
                    let why = if runner_state {
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
    let mounts = if mount_ns && !check_only {
        let mut writable = write.clone();
        writable.push(tmp_path.clone());
        mounts(dirs, python, &writable, &exec, &protected_read, &mut protected_write)?
    } else {
        Vec::new()
    };

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
        };
        plans.put(key, &shared, made);
    }
    // Why after the memo: without the calls folder's one mount, this lists the other calls' dirs of the moment.
    if mount_ns && !check_only {
        hide_other_call_tmps(&mut shared.mounts, &tmp_path);
    }
    Ok(Plan {
        inner: Some(Inner {
            shared,
            tmp,
            tool: tool_real,
        }),
        warnings,
        declared,
        origin,
        proxy: Default::default(),
        kept_net: Default::default(),
        limits: Default::default(),
        check_only,
        remembered: false,
    })
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
const MAX_HIDDEN: usize = 512;

/// The mounts of a call with a mount namespace, in the order they are made: every writable place `noexec`, the
/// granted `exec` places inside them back to executable, the runner's files and tier folders inside them
/// read-only (and taken out of `protected_write`, which Landlock no longer needs to split around them), then
/// every existing path of the deny list hidden. A protected path that does not exist cannot be mounted over and
/// stays cut out of the Landlock grant.
fn mounts(
    dirs: &Dirs,
    python: bool,
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
    let shim_root = python
        .then(|| crate::pyshim::shim_path(&dirs.cache).ok())
        .flatten()
        .and_then(|s| s.parent().and_then(Path::parent).and_then(rules::canonical));
    if shim_root.is_some() {
        // Hidden whole only if it is there: made on a cold cache, so that the entries its probes write next are
        // not readable by those planned before them.
        let _ = crate::owned::dir(&dirs.cache.join(crate::cache::ENTRIES_DIR), "cache dir");
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
    if let Some((folders, own)) = &protected_read.animas {
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

/// The runner's state, as canonical paths: (never read, never written).
/// `raw`, when given, gets the same paths as named, before their links are followed.
/// The credentials of the home folder on the deny list.
fn home_secrets(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(h) = home else { return Vec::new() };
    [
        ".ssh",
        ".gnupg",
        ".aws",
        ".netrc",
        ".docker",
        ".kube",
        ".git-credentials",
        ".config/gh",
        ".config/gcloud",
        // The agent engines' logins (Claude Code, Codex, Gemini CLI, Grok, Cursor), which AnimaWorks' engines run on.
        ".claude",
        ".claude.json",
        ".codex",
        ".gemini",
        ".grok",
        ".cursor-agent",
    ]
    .iter()
    .map(|f| h.join(f))
    .collect()
}

/// The agent engines' homes AnimaWorks makes in an anima dir (Codex, Gemini CLI, Cursor, Grok).
const ENGINE_HOMES: &[&str] = &[
    ".codex_home",
    ".gemini-workspace",
    ".cursor-workspace",
    ".grok-workspace",
];

/// Every folder of `<data>/companies/` but the anima's own company (`status.json` `"company"`), as AnimaWorks
/// denies them to an anima assigned to a company; nothing for an unassigned anima (AnimaWorks leaves it free).
fn other_companies(data: &Path, anima: &Path) -> Vec<PathBuf> {
    let status = crate::beneath::read_if_present(anima, Path::new("status.json"), 1024 * 1024)
        .ok()
        .flatten();
    let company = status
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("company")?.as_str().map(|c| c.trim().to_owned()))
        .filter(|c| !c.is_empty());
    let (Some(company), Ok(rd)) = (company, std::fs::read_dir(data.join("companies"))) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_name() != company.as_str())
        .map(|e| {
            let p = e.path();
            rules::canonical(&p).unwrap_or(p)
        })
        .collect()
}

fn protected(dirs: &Dirs, home: Option<&Path>, mut raw: Option<&mut Vec<PathBuf>>) -> (Protected, Protected) {
    let data = rules::canonical(&dirs.data).unwrap_or_else(|| dirs.data.clone());
    let anima = dirs
        .anima
        .as_deref()
        .map(|a| rules::canonical(a).unwrap_or_else(|| a.to_path_buf()));
    let mut secret: Vec<PathBuf> = [
        "config.json",
        "vault.json",
        "vault.key",
        "shared/credentials.json",
        "outputs",
        "state",
    ]
    .iter()
    .map(|f| data.join(f))
    .collect();
    // AnimaWorks' runtime folder (the operator's internal-API token; the animas' IPC sockets, which a pathname
    // `connect` reaches without any file right), its `.env` of API keys, `auth.json` (the web UI's signing key and
    // sessions), and the animas' private messages in the
    // otherwise writable `shared/` (read, or forged from any sender into another anima's inbox), where they exist.
    secret.extend(
        ["run", ".env", "auth.json", "shared/inbox", "shared/dm_logs"]
            .iter()
            .map(|f| data.join(f))
            .filter(|p| std::fs::symlink_metadata(p).is_ok()),
    );
    secret.push(dirs.cache.clone());
    secret.extend(crate::env_vars::AUDIT_LOG.get_os().map(PathBuf::from));
    for f in [
        "shadow",
        "gshadow",
        "shadow-",
        "gshadow-",
        "sudoers",
        "sudoers.d",
        "ssh",
        "ssl/private",
        "security/opasswd",
    ] {
        secret.push(Path::new("/etc").join(f));
    }
    secret.extend(home_secrets(home));
    let mut kept: Vec<PathBuf> = Vec::new();
    if let Some(r) = raw.as_deref_mut() {
        r.extend(secret.iter().cloned());
    }
    for p in secret {
        kept.push(rules::canonical(&p).unwrap_or(p));
    }
    // The task folder's unmasked arguments: hidden from every confined tool, the anima's own included.
    if let Some(a) = &anima {
        let private = a.join("state/background_tasks").join(crate::dirs::TASKS_PRIVATE_DIR);
        kept.push(rules::canonical(&private).unwrap_or(private));
        // The engine homes AnimaWorks keeps in the anima dir hold copies of the engines' logins, and settings the
        // framework merges and then runs outside any sandbox (a command planted there would run unconfined).
        for d in ENGINE_HOMES {
            let p = a.join(d);
            if std::fs::symlink_metadata(&p).is_ok() {
                kept.push(rules::canonical(&p).unwrap_or(p));
            }
        }
        kept.extend(other_companies(&data, a));
    }
    let animas = Some((crate::animas::folders(dirs), anima.clone()));
    let read = Protected {
        paths: kept.iter().cloned().collect(),
        animas: animas.clone(),
    };
    let mut write = read.clone();
    let mut runner_files: Vec<PathBuf> = vec![
        data.join(crate::settings::SETTINGS_FILE),
        data.join("permissions.global.json"),
        data.join("common_tools"),
        // The installed MCP servers' packages: run by their servers, so never written by any call.
        crate::mcp_servers::install::root(&data),
    ];
    runner_files.extend(dirs.core.iter().cloned());
    if let Some(a) = &anima {
        for f in [
            crate::policy::permissions::JSON_FILE,
            crate::policy::permissions::MD_FILE,
            crate::policy::audit::AUDIT_FILE,
            "state/background_tasks",
            "state/background_notifications",
            "tools",
        ] {
            runner_files.push(a.join(f));
        }
        runner_files.extend(pinned::CODE_FILES.iter().map(|f| a.join(f)));
    }
    if let Some(r) = raw {
        r.extend(runner_files.iter().cloned());
    }
    for p in runner_files {
        write.paths.insert(rules::canonical(&p).unwrap_or(p));
    }
    (read, write)
}

/// System places every sandboxed tool reads (and runs programs from, for the first group): enough for the
/// dynamic loader, Python, Node.js, bash and TLS, and nothing of a person's or the runner's.
const SYSTEM_EXEC: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];
const ETC_READ: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/alternatives",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/inputrc",
    "/etc/bash.bashrc",
    "/etc/profile",
];
const DEV_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];
const DEV_READ: &[&str] = &[
    "/dev/random",
    "/dev/urandom",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/sys/devices/system/cpu",
];

/// The canonical forms of the system folders a declared read or exec path may lie in without a grant, found once
/// per process.
/// May a declaration read (and run) `real` without the anima's grant: a system place, or an MCP server's package
/// installed by `mcp-servers install` (the runner's, never writable by a call).
fn runner_readable(real: &Path, data: &Path) -> bool {
    system_read().iter().any(|s| real.starts_with(s))
        || rules::canonical(&crate::mcp_servers::install::root(data)).is_some_and(|r| real.starts_with(r))
}

fn system_read() -> &'static [PathBuf] {
    static S: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        SYSTEM_EXEC
            .iter()
            .chain(ETC_READ)
            .filter_map(|p| rules::canonical(Path::new(p)))
            .collect()
    })
}

/// The folder an interpreter belongs to: `<prefix>` of `<prefix>/bin/x` or of a version manager's
/// `<root>/shims/x` (pyenv, nodenv, asdf), else the folder of `x`. Never `/`, the home folder or the data dir,
/// or a folder above them.
fn prefix_of(program: &Path, home: Option<&Path>, data: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    let p = if dir.file_name().is_some_and(|n| n == "bin" || n == "shims") {
        dir.parent()?
    } else {
        dir
    };
    let too_wide = |q: &Path| q == Path::new("/") || home.is_some_and(|h| h.starts_with(q)) || data.starts_with(q);
    if too_wide(p) {
        (!too_wide(dir)).then(|| dir.to_path_buf())
    } else {
        Some(p.to_path_buf())
    }
}

impl Plan {
    /// Was it taken from a listing's remembered plans ([`for_probe`])?
    pub fn remembered(&self) -> bool {
        self.remembered
    }

    /// Is the process confined at all?
    pub fn is_confined(&self) -> bool {
        self.inner.is_some()
    }

    /// How reads are confined, when confined.
    pub fn reads(&self) -> Option<Reads> {
        self.inner.as_ref().map(|i| i.reads)
    }

    /// The places the process may write (canonical), besides `$TMP`; empty when not confined.
    pub fn writable(&self) -> &[PathBuf] {
        self.inner.as_ref().map(|i| i.write.as_slice()).unwrap_or_default()
    }

    /// The mounts of its mount namespace, in order (hidden paths, read-only and noexec places).
    pub fn mounts(&self) -> &[PlannedMount] {
        self.inner.as_ref().map(|i| i.mounts.as_slice()).unwrap_or_default()
    }

    /// The network it was given, when confined.
    pub fn net(&self) -> Option<&NetPlan> {
        self.inner.as_ref().map(|i| &i.net)
    }

    /// What a confined process was given, for explaining its failures ([`crate::confined`]); `None`: not
    /// confined.
    pub fn given(&self) -> Option<Given<'_>> {
        let i = self.inner.as_ref()?;
        Some(Given {
            read: &i.read,
            write: &i.write,
            tmp: i.tmp.path(),
            net: &i.net,
            hosts: i.proxy_hosts.as_deref(),
            declared: self.declared,
        })
    }

    /// A process confined by [`Plan::confine`] started as `pid` (not yet reaped), so that its temp dir is kept
    /// for a later call only once that process has ended (`tmp.rs`).
    pub fn started(&self, pid: Option<u32>) {
        if let Some(i) = &self.inner {
            i.tmp.started(pid);
        }
    }

    /// The call's private temp dir (`$TMP`), when confined.
    pub fn tmp(&self) -> Option<&Path> {
        self.inner.as_ref().map(|i| i.tmp.path())
    }

    /// Does the process reach the network only through the runner's proxy (a host list, enforced)?
    pub fn proxied(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| i.proxy_hosts.is_some())
    }

    /// What the proxy did so far (relayed, refused), for the audit line; `None` without a proxy.
    pub fn proxy_log(&self) -> Option<Value> {
        self.proxy.lock().ok()?.as_ref().map(netproxy::Proxy::log)
    }

    /// Variables the tool's environment gets on top of the policy's: `TMPDIR` (its private temp dir); with an
    /// enforced host list the proxy's address (`HTTPS_PROXY` and the others, [`netproxy::env`]); with a port list
    /// `RES_OPTIONS=use-vc` (names resolve over TCP, UDP being refused).
    pub fn env(&self) -> Vec<(OsString, OsString)> {
        let Some(i) = &self.inner else { return Vec::new() };
        let mut v = vec![("TMPDIR".into(), i.tmp.path().as_os_str().to_owned())];
        if i.proxy_hosts.is_some() {
            v.extend(netproxy::env().into_iter().map(|(k, x)| (k.into(), x.into())));
        } else if matches!(i.net, NetPlan::Ports(_)) {
            v.push(("RES_OPTIONS".into(), "use-vc".into()));
        }
        v
    }

    /// What the audit line records: the mode, what the kernel enforces, the network, the warnings.
    pub fn summary(&self) -> Value {
        let mut v = self.confinement_summary();
        v["limits"] = self.limits.summary();
        v
    }

    fn confinement_summary(&self) -> Value {
        match &self.inner {
            None => json!({"mode": "off"}),
            Some(i) => {
                let s = i.support;
                json!({
                    "mode": "enforce",
                    "declared": self.declared,
                    "landlock_abi": s.landlock_abi,
                    "files": s.landlock_fs(),
                    "net": match &i.proxy_hosts { Some(h) if i.net != NetPlan::All => json!(h), _ => i.net.to_json() },
                    "reads": i.reads.as_str(),
                    "hidden": i.mounts.iter().filter(|m| matches!(m.kind, MountKind::Hide { .. } | MountKind::HideEntry { .. } | MountKind::HideOther | MountKind::HideCalls | MountKind::HideAnimas)).count(),
                    "writes": i.write,
                    "noexec": if i.reads == Reads::DenyList { "mounts" } else { "landlock" },
                    "memfd": if s.seccomp { "noexec_seal" } else { "unconfined" },
                    "private_net": match (&i.net, &i.proxy_hosts) {
                        (NetPlan::None, _) => json!("none"),
                        (_, Some(_)) => json!(i.private_net),
                        _ => json!("reachable"),
                    },
                    "tcp": match i.net {
                        NetPlan::All => "open",
                        NetPlan::Ports(_) if !s.landlock_tcp() => if i.proxy_hosts.is_some() { "namespace" } else { "unconfined" },
                        _ => "landlock",
                    },
                    "hosts": match (&i.net, &i.proxy_hosts) { (_, Some(_)) => json!("proxy"), (NetPlan::Ports(_), None) => json!("not_enforced"), (NetPlan::All, None) => json!("direct"), _ => Value::Null },
                    "seccomp": s.seccomp,
                    "signals": if s.landlock_signal_scope() { "landlock" } else if i.pid_ns { "pid_namespace" } else { "unconfined" },
                    "pid_namespace": i.pid_ns,
                    "warnings": self.warnings,
                })
            }
        }
    }

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
                let allowed = h
                    .iter()
                    .filter_map(|e| {
                        if e == "*" {
                            Some(netproxy::Allowed::any())
                        } else {
                            netproxy::Allowed::parse(e)
                        }
                    })
                    .collect();
                let private = i
                    .private_net
                    .iter()
                    .filter_map(|e| netproxy::Allowed::parse(e))
                    .collect();
                let (proxy, child_net) = netproxy::start(allowed, private, crate::policy::addresses::reachable)?;
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
                    let own = i.protected_read.animas.as_ref().and_then(|(_, o)| o.as_deref());
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
                let cause = io::Error::other(format!("its mount of {} cannot be prepared", m.path.display()));
                io::Error::other(awt_sys::process::SetupFailed(cause))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_checked() {
        let d: Declared = serde_json::from_value(json!({
            "read": ["$ANIMA_DIR/notes", "/usr/share/dict", "relative", "$NOPE/x", "$TMP/../etc"],
            "net": ["api.example.com:443", "nohost", "x:0", "*:80", "a b:80"]
        }))
        .unwrap();
        let p = validate(&d);
        assert_eq!(p.len(), 6, "{p:?}");
        assert!(p[0].contains("relative"));
        assert!(p[1].contains("$NOPE"));
    }

    #[test]
    fn net_grants_name_tools_and_targets() {
        let g = |v: Value| Grants {
            net: serde_json::from_value(v).ok(),
            ..Grants::default()
        };
        assert!(Grants::default().net_for("t"));
        assert!(!g(json!(false)).net_for("t"));
        assert!(!g(json!([])).net_for("t"));
        assert!(g(json!(["127.0.0.1:5432"])).net_for("t"));
        assert!(!g(json!(["other", "127.0.0.1:5432"])).net_for("t"));
        assert!(g(json!(["t"])).net_for("t"));
        assert_eq!(g(json!(["t", "db.local:5432"])).private_targets(), ["db.local:5432"]);
    }

    #[test]
    fn ports_bring_dns_over_tcp() {
        let d: Declared = serde_json::from_value(json!({"net": ["*:443"]})).unwrap();
        assert_eq!(declared_net(&d), NetPlan::Ports(vec![53, 443]));
    }

    #[test]
    fn interpreter_prefix_is_never_home() {
        let home = Path::new("/home/u");
        let data = Path::new("/home/u/.animaworks");
        assert_eq!(
            prefix_of(Path::new("/usr/bin/python3"), Some(home), data),
            Some("/usr".into())
        );
        assert_eq!(
            prefix_of(Path::new("/home/u/bin/python3"), Some(home), data),
            Some("/home/u/bin".into())
        );
        assert_eq!(
            prefix_of(Path::new("/home/u/venv/bin/python"), Some(home), data),
            Some("/home/u/venv".into())
        );
        assert_eq!(prefix_of(Path::new("/bin/sh"), Some(home), data), Some("/bin".into()));
        assert_eq!(
            prefix_of(Path::new("/home/u/.pyenv/shims/python3"), Some(home), data),
            Some("/home/u/.pyenv".into())
        );
    }
}
