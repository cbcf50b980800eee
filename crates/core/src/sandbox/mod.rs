//! The sandbox: what a tool's process may touch, enforced by the kernel (docs/sandbox.md, protocol.md §2.4).
//!
//! Two steps, both before the fork, each in a module of its own beside the AnimaWorks layout they share
//! (`layout.rs`: which places are whose):
//! 1. [`plan`] (`planner.rs`, which writes nothing): from the action's declaration (its profile's `sandbox`),
//!    the tool's tier, the operator's settings (`<data dir>/animaworks-tool.json` `"sandbox"`) and the anima's
//!    grants (`permissions.json` `"sandbox"`) to a [`Plan`] — or a refusal, before anything starts, naming the
//!    key to add.
//! 2. [`Plan::confine`] (`apply.rs`), in the spawn path once the program is known: the Landlock ruleset (an fd),
//!    the seccomp program and the namespace setup (with an enforced host list, the proxy's socketpair and task,
//!    [`netproxy`]), so that the child ([`child::enter_and_exec`]) only makes system calls.
//!
//! The runner's own state is cut out of every grant ([`rules::Protected`]): `config.json`, `vault.json`,
//! `vault.key`, `shared/credentials.json`, the schema cache, spilled outputs, other animas' folders (never
//! read nor written); the permissions files, the audit log, the task store, the tool tiers and the runner's
//! settings (never written).

mod apply;
mod cwd;
mod declared;
mod hide_animas;
mod layout;
mod netns;
mod pinned;
mod places;
mod planner;
mod probe_plans;
mod sockets;
mod tmp;
pub use layout::{LayoutError, MAX_COMPANIES};
pub use probe_plans::ProbePlans;
use tmp::CallTmp;
pub use tmp::{calls_dir, release_spares};

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

impl Plan {
    /// The one way a plan is made: its confinement (`None`: not confined) and what the planner found.
    fn new(
        inner: Option<Inner>,
        warnings: Vec<String>,
        declared: bool,
        origin: Origin,
        check_only: bool,
        remembered: bool,
    ) -> Plan {
        Plan {
            inner,
            warnings,
            declared,
            origin,
            proxy: Default::default(),
            kept_net: Default::default(),
            limits: Default::default(),
            check_only,
            remembered,
        }
    }
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
    let mut p = planner::plan_with(dirs, file, perms, needs, &all.sandbox, plans)?;
    p.limits = crate::resources::CallLimits::for_process(&all, file, perms)?;
    Ok(p)
}

/// The plan of a call, from the runner's settings and the permissions the gate already read (each file is read
/// once per call). `plans`: a long-lived runner's remembered plans, which a plan made only to decide
/// ([`Needs::Decide`]) is taken from while nothing it depends on changed.
pub fn for_call(
    dirs: &Dirs,
    all: &crate::settings::Settings,
    file: &ToolFile,
    perms: &Result<LoadedPermissions, PermissionsError>,
    needs: Needs<'_>,
    plans: Option<&ProbePlans>,
) -> Result<Plan, CallError> {
    let plans = plans.filter(|_| matches!(needs, Needs::Decide(_)));
    let mut p = planner::plan_with(dirs, file, perms, needs, &all.sandbox, plans)?;
    p.limits = crate::resources::CallLimits::for_process(all, file, perms)?;
    for w in &p.warnings {
        tracing::warn!("sandbox of {}: {w}", file.name);
    }
    Ok(p)
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
}

#[cfg(test)]
mod tests {
    use super::layout::prefix_of;
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
