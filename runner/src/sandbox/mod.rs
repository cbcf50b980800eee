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

pub mod child;
pub mod kernel;
mod landlock;
pub mod netproxy;
pub mod rules;
mod seccomp;

use crate::dirs::Dirs;
use crate::discover::ToolFile;
use crate::error::{CallError, Detail, ErrorCode};
use crate::policy::permissions::{LoadedPermissions, PermissionsError};
use crate::policy::Tier;
use rules::Protected;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use tool_sdk::protocol::{Net, Sandbox as Declared};

/// Whether the tools of a tier are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Enforce,
    Off,
}

/// What to do when the kernel cannot enforce all of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unsupported {
    /// Refuse the call before it starts.
    Refuse,
    /// Run with what the kernel can enforce (nothing, without Landlock), warning on every call and in the audit.
    Warn,
}

/// The operator's settings: `<data dir>/animaworks-tool.json` `"sandbox"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub core: Mode,
    pub common: Mode,
    pub personal: Mode,
    pub unsupported: Unsupported,
    /// Run each sandboxed call in its own PID namespace where the kernel allows it.
    pub pid_namespace: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            core: Mode::Off,
            common: Mode::Enforce,
            personal: Mode::Enforce,
            unsupported: Unsupported::Warn,
            pid_namespace: true,
        }
    }
}

/// The sandbox settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The runner's settings file cannot be read or parsed.
    #[error(transparent)]
    File(#[from] crate::settings::SettingsError),
    /// Its `"sandbox"` key is not of the [`Settings`] shape.
    #[error("{}: \"sandbox\": {source}", path.display())]
    Key { path: PathBuf, source: serde_json::Error },
}

impl Settings {
    /// The `"sandbox"` key of the runner's settings (`<data dir>/animaworks-tool.json`, read by
    /// [`crate::settings`]); absent file or key: the defaults.
    pub fn load(data_dir: &Path) -> Result<Settings, SettingsError> {
        let all = crate::settings::Settings::load(data_dir)?;
        Settings::from_runner(&all)
    }

    /// The `"sandbox"` key of already read runner settings.
    pub fn from_runner(all: &crate::settings::Settings) -> Result<Settings, SettingsError> {
        match all.raw.get("sandbox") {
            None | Some(Value::Null) => Ok(Settings::default()),
            Some(s) => serde_json::from_value(s.clone()).map_err(|source| SettingsError::Key {
                path: all.path.clone(),
                source,
            }),
        }
    }

    fn mode(&self, tier: Tier) -> Mode {
        match tier {
            Tier::Core => self.core,
            Tier::Common => self.common,
            Tier::Personal => self.personal,
        }
    }
}

/// An anima's grants: `permissions.json` `"sandbox"` (a runner extension; AnimaWorks ignores it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Grants {
    /// Per-tier overrides of the operator's [`Settings`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core: Option<Mode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub common: Option<Mode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub personal: Option<Mode>,
    /// The network: `true`, `false`, or the tools that may use it. Absent: core and common tools may, personal
    /// ones may not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<NetGrant>,
    /// More places tools may declare (placeholders allowed), beyond the defaults.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exec: Vec<String>,
}

impl Grants {
    pub fn is_default(&self) -> bool {
        *self == Grants::default()
    }

    fn mode(&self, tier: Tier) -> Option<Mode> {
        match tier {
            Tier::Core => self.core,
            Tier::Common => self.common,
            Tier::Personal => self.personal,
        }
    }

    fn net_for(&self, tool: &str, tier: Tier) -> bool {
        match &self.net {
            Some(NetGrant::All(b)) => *b,
            Some(NetGrant::Tools(t)) => t.iter().any(|x| x == tool),
            None => tier != Tier::Personal,
        }
    }
}

/// `"net"` of [`Grants`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NetGrant {
    All(bool),
    Tools(Vec<String>),
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

/// The network a plan gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetPlan {
    None,
    All,
    /// TCP connections to these ports, any host.
    Ports(Vec<u16>),
}

impl NetPlan {
    fn union(self, other: NetPlan) -> NetPlan {
        match (self, other) {
            (NetPlan::All, _) | (_, NetPlan::All) => NetPlan::All,
            (NetPlan::None, x) | (x, NetPlan::None) => x,
            (NetPlan::Ports(mut a), NetPlan::Ports(b)) => {
                a.extend(b);
                a.sort_unstable();
                a.dedup();
                NetPlan::Ports(a)
            }
        }
    }

    fn to_json(&self) -> Value {
        match self {
            NetPlan::None => json!(false),
            NetPlan::All => json!(true),
            NetPlan::Ports(p) => json!(p),
        }
    }
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
    let perms = match &dirs.anima {
        Some(a) => crate::policy::permissions::load(a),
        None => Ok(LoadedPermissions {
            permissions: Default::default(),
            source: crate::policy::permissions::Source::Defaults(PathBuf::from(
                "<anima dir: pass --anima-dir or set ANIMAWORKS_ANIMA_DIR>/permissions.json",
            )),
        }),
    };
    let p = plan(dirs, file, &perms, needs)?;
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
    /// The proxy of a host list, once the process is started; it stops when the plan is dropped.
    proxy: std::sync::Mutex<Option<netproxy::Proxy>>,
}

#[derive(Debug)]
struct Inner {
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    exec: Vec<PathBuf>,
    net: NetPlan,
    protected_read: Protected,
    protected_write: Protected,
    /// The runner's files in the anima's state/, bind-mounted read-only in the tool's mount namespace.
    ro_binds: Vec<PathBuf>,
    tmp: tempfile::TempDir,
    support: kernel::Support,
    pid_ns: bool,
    /// The host list is enforced: the process gets a network namespace and reaches only the runner's proxy,
    /// which holds each connection to these entries (docs/sandbox.md).
    proxy_hosts: Option<Vec<String>>,
    tool: PathBuf,
    cache: PathBuf,
    home: Option<PathBuf>,
    data: PathBuf,
    /// Started through the Python shim.
    python: bool,
}

/// The placeholders of protocol.md §2.4.
struct Places {
    anima: Option<PathBuf>,
    data: PathBuf,
    tmp: PathBuf,
    tool_dir: PathBuf,
    home: Option<PathBuf>,
}

/// A declared or granted place that is not one.
#[derive(Debug, thiserror::Error)]
enum BadPlace {
    #[error("unknown placeholder {placeholder} in {raw:?}")]
    UnknownPlaceholder { placeholder: String, raw: String },
    #[error("{raw:?} is not an absolute path or a placeholder path without `..`")]
    NotClean { raw: String },
}

impl Places {
    /// `$X/rest` or an absolute path, expanded; `None` when it names nothing usable (no anima, `..`).
    fn expand(&self, raw: &str) -> Result<Option<PathBuf>, BadPlace> {
        let (base, rest) = match raw.split_once('/') {
            Some((b, r)) if b.starts_with('$') || b == "~" => (Some(b), r),
            None if raw.starts_with('$') || raw == "~" => (Some(raw), ""),
            _ => (None, raw),
        };
        let p = match base {
            None => PathBuf::from(rest),
            Some(b) => {
                let root = match b {
                    "$ANIMA_DIR" => self.anima.clone(),
                    "$DATA_DIR" => Some(self.data.clone()),
                    "$TMP" => Some(self.tmp.clone()),
                    "$TOOL_DIR" => Some(self.tool_dir.clone()),
                    "$HOME" | "~" => self.home.clone(),
                    other => {
                        return Err(BadPlace::UnknownPlaceholder {
                            placeholder: other.to_owned(),
                            raw: raw.to_owned(),
                        })
                    }
                };
                match root {
                    None => return Ok(None),
                    Some(r) if rest.is_empty() => r,
                    Some(r) => r.join(rest),
                }
            }
        };
        if !rules::is_clean_absolute(&p) {
            return Err(BadPlace::NotClean { raw: raw.to_owned() });
        }
        Ok(Some(p))
    }
}

/// Problems with a declaration's form (for `check` and discovery); empty when it is fine.
pub fn validate(d: &Declared) -> Vec<String> {
    let places = Places {
        anima: Some("/a".into()),
        data: "/d".into(),
        tmp: "/t".into(),
        tool_dir: "/w".into(),
        home: Some("/h".into()),
    };
    let mut out = Vec::new();
    for (field, list) in [("read", &d.read), ("write", &d.write), ("exec", &d.exec)] {
        for raw in list {
            if let Err(e) = places.expand(raw) {
                out.push(format!("sandbox.{field}: {e}"));
            }
        }
    }
    if let Net::Only(list) = &d.net {
        for e in list {
            if let Err(m) = parse_host_port(e) {
                out.push(format!("sandbox.net: {m}"));
            } else if netproxy::Allowed::parse(e).is_none() {
                out.push(format!(
                    "sandbox.net: {e:?}: the host is not a DNS name, an IP address ([...] for IPv6) or \"*\""
                ));
            }
        }
    }
    out
}

/// A `net` entry that is not `host:port`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not \"host:port\" (a port from 1 to 65535; \"*:443\" for any host)")]
struct BadHostPort(String);

fn parse_host_port(e: &str) -> Result<u16, BadHostPort> {
    let bad = || BadHostPort(e.to_owned());
    let (host, port) = e.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || host.len() > 253 {
        return Err(bad());
    }
    port.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad)
}

fn declared_net(d: &Declared) -> NetPlan {
    match &d.net {
        Net::All(true) => NetPlan::All,
        Net::All(false) => NetPlan::None,
        Net::Only(list) => {
            let mut ports: Vec<u16> = list.iter().filter_map(|e| parse_host_port(e).ok()).collect();
            if ports.is_empty() {
                return NetPlan::None;
            }
            // DNS over TCP (RES_OPTIONS=use-vc): UDP stays refused.
            ports.push(53);
            ports.sort_unstable();
            ports.dedup();
            NetPlan::Ports(ports)
        }
    }
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
    let settings = Settings::load(&dirs.data).map_err(settings_error)?;
    plan_with(dirs, file, perms, needs, &settings)
}

fn settings_error(e: SettingsError) -> CallError {
    CallError::new(ErrorCode::Internal, format!("cannot use the runner settings: {e}"))
        .hint("fix \"sandbox\" in that file: {\"core\"|\"common\"|\"personal\": \"enforce\"|\"off\", \"unsupported\": \"refuse\"|\"warn\", \"pid_namespace\": bool}")
}

/// The plan of a call, from the runner's settings and the permissions the gate already read (each file is read
/// once per call).
pub fn for_call(
    runner: &crate::call::Runner,
    file: &ToolFile,
    perms: &Result<LoadedPermissions, PermissionsError>,
    needs: Needs<'_>,
) -> Result<Plan, CallError> {
    let settings = Settings::from_runner(runner.settings()?).map_err(settings_error)?;
    let p = plan_with(&runner.dirs, file, perms, needs, &settings)?;
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
    settings: &Settings,
) -> Result<Plan, CallError> {
    let (grants, perms_path) = match perms {
        Ok(p) => (p.permissions.sandbox.clone(), p.path().to_path_buf()),
        // The gate refuses every call then; a probe still gets the defaults.
        Err(e) => (Grants::default(), e.path.clone()),
    };
    let tier = file.tier;
    let tool = file.name.as_str();
    let mode = grants.mode(tier).unwrap_or_else(|| settings.mode(tier));
    let (decls, lenient): (Vec<Option<&Declared>>, bool) = match &needs {
        Needs::Probe => (Vec::new(), false),
        Needs::Call(d) => (vec![*d], false),
        Needs::Serve(v) => (v.clone(), true),
    };
    let declared = decls.iter().any(Option::is_some);
    if mode == Mode::Off {
        return Ok(Plan {
            inner: None,
            warnings: Vec::new(),
            declared,
            proxy: Default::default(),
        });
    }
    let tmp = tempfile::Builder::new()
        .prefix("animaworks-tool-")
        .tempdir()
        .map_err(|e| {
            CallError::new(
                ErrorCode::Internal,
                format!("cannot make the call's private temp dir: {e}"),
            )
        })?;
    let tmp_path = rules::canonical(tmp.path()).unwrap_or_else(|| tmp.path().to_path_buf());
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let tool_real = rules::canonical(&file.path).unwrap_or_else(|| file.path.clone());
    let places = Places {
        anima: dirs.anima.clone(),
        data: dirs.data.clone(),
        tmp: tmp_path.clone(),
        tool_dir: file.path.parent().map(Path::to_path_buf).unwrap_or_default(),
        home: home.clone(),
    };

    // What the anima's grants cover, and what an undeclared tool gets.
    let mut grant_write: Vec<PathBuf> = vec![tmp_path.clone()];
    grant_write.extend(dirs.anima.clone());
    grant_write.extend(DATA_WRITE.iter().map(|d| dirs.data.join(d)));
    let mut grant_read: Vec<PathBuf> = DATA_READ.iter().map(|d| dirs.data.join(d)).collect();
    grant_read.push(places.tool_dir.clone());
    let mut grant_exec: Vec<PathBuf> = Vec::new();
    for (list, out) in [
        (&grants.write, &mut grant_write),
        (&grants.read, &mut grant_read),
        (&grants.exec, &mut grant_exec),
    ] {
        for raw in list {
            match places.expand(raw) {
                Ok(Some(p)) => out.push(p),
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
    let canon = |v: Vec<PathBuf>| -> Vec<PathBuf> { v.iter().filter_map(|p| rules::canonical(p)).collect() };
    let grant_write = canon(grant_write);
    let grant_read: Vec<PathBuf> = canon(grant_read)
        .into_iter()
        .chain(grant_write.iter().cloned())
        .collect();
    let grant_exec: Vec<PathBuf> = canon(grant_exec)
        .into_iter()
        .chain(grant_read.iter().cloned())
        .collect();
    let net_granted = grants.net_for(tool, tier);

    let support = kernel::support();
    let pid_ns = settings.pid_namespace && support.pid_namespace;
    // With a mount namespace, the runner's files in the anima's state/ are made read-only by bind mounts, so
    // Landlock can give a tool the whole anima dir (new files in state/ included); without one, they are cut out
    // of the Landlock grant (nothing new can then be created directly in state/).
    let ro_binds = if pid_ns { runner_state_files(dirs) } else { Vec::new() };
    let (protected_read, mut protected_write) = protected(dirs, home.as_deref());
    for p in &ro_binds {
        protected_write.paths.remove(p);
    }
    let mut read = Vec::new();
    let mut write = Vec::new();
    let mut exec = Vec::new();
    let mut net = NetPlan::None;
    let mut hosts: Vec<String> = Vec::new();
    let mut warnings = Vec::new();
    if matches!(needs, Needs::Probe) {
        read.extend(grant_read.iter().cloned());
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
                    || (field != "write" && system_read().iter().any(|s| real.starts_with(s)));
                if runner_state || !allowed {
                    let why = if runner_state {
                        "the runner's own state (credentials, permissions, audit, tasks, other animas) is never granted"
                            .to_owned()
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
    let proxy_hosts = (pid_ns && matches!(net, NetPlan::Ports(_)) && netproxy::available()).then(|| {
        hosts.sort();
        hosts.dedup();
        hosts
    });

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
    Ok(Plan {
        inner: Some(Inner {
            read,
            write,
            exec,
            net,
            protected_read,
            protected_write,
            ro_binds,
            tmp,
            support,
            pid_ns,
            proxy_hosts,
            tool: tool_real,
            cache: dirs.cache.clone(),
            home,
            data: dirs.data.clone(),
            python: file.launch == crate::discover::Launch::Python,
        }),
        warnings,
        declared,
        proxy: Default::default(),
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
                        && ((!is_write && system_read().iter().any(|s| real.starts_with(s)))
                            || allowed.iter().any(|a| real.starts_with(a)))
                }
            },
        )
    })
}

/// The runner's files in the anima's `state/` (audit log, task store), made to exist so that they can be
/// mounted over; canonical paths.
fn runner_state_files(dirs: &Dirs) -> Vec<PathBuf> {
    let Some(anima) = dirs.anima.as_deref().and_then(rules::canonical) else {
        return Vec::new();
    };
    let state = anima.join("state");
    let mut out = Vec::new();
    for d in ["background_tasks", "background_notifications"] {
        if std::fs::create_dir_all(state.join(d)).is_ok() {
            out.extend(rules::canonical(&state.join(d)));
        }
    }
    let audit = anima.join(crate::policy::audit::AUDIT_FILE);
    use std::os::unix::fs::OpenOptionsExt;
    if std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&audit)
        .is_ok()
    {
        out.extend(rules::canonical(&audit));
    }
    out
}

/// The runner's state, as canonical paths: (never read, never written).
fn protected(dirs: &Dirs, home: Option<&Path>) -> (Protected, Protected) {
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
    secret.push(dirs.cache.clone());
    secret.extend(
        std::env::var_os("ANIMAWORKS_TOOL_AUDIT_LOG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
    );
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
    if let Some(h) = home {
        for f in [
            ".ssh",
            ".gnupg",
            ".aws",
            ".netrc",
            ".docker",
            ".kube",
            ".git-credentials",
            ".config/gh",
            ".config/gcloud",
        ] {
            secret.push(h.join(f));
        }
    }
    let mut kept: Vec<PathBuf> = Vec::new();
    for p in secret {
        kept.push(rules::canonical(&p).unwrap_or(p));
    }
    let animas = Some((data.join("animas"), anima.clone()));
    let read = Protected {
        paths: kept.iter().cloned().collect(),
        animas: animas.clone(),
    };
    let mut write = read.clone();
    let mut runner_files: Vec<PathBuf> = vec![
        data.join(crate::settings::SETTINGS_FILE),
        data.join("permissions.global.json"),
        data.join("common_tools"),
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
    /// Is the process confined at all?
    pub fn is_confined(&self) -> bool {
        self.inner.is_some()
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
        match &self.inner {
            None => json!({"mode": "off"}),
            Some(i) => {
                let s = i.support;
                json!({
                    "mode": "enforce",
                    "declared": self.declared,
                    "landlock_abi": s.landlock_abi,
                    "files": s.landlock_fs(),
                    "net": match &i.proxy_hosts { Some(h) => json!(h), None => i.net.to_json() },
                    "tcp": match i.net {
                        NetPlan::All => "open",
                        NetPlan::Ports(_) if !s.landlock_tcp() => if i.proxy_hosts.is_some() { "namespace" } else { "unconfined" },
                        _ => "landlock",
                    },
                    "hosts": match (&i.net, &i.proxy_hosts) { (_, Some(_)) => json!("proxy"), (NetPlan::Ports(_), None) => json!("not_enforced"), _ => Value::Null },
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
        let Some(i) = &self.inner else { return Ok(None) };
        let s = i.support;
        let ruleset = if s.landlock_fs() {
            Some(self.ruleset(i, program)?)
        } else {
            None
        };
        let filter = s.seccomp.then(|| seccomp::program(&i.net));
        let net = match &i.proxy_hosts {
            Some(h) => {
                let (proxy, child_net) =
                    netproxy::start(h.iter().filter_map(|e| netproxy::Allowed::parse(e)).collect())?;
                *self.proxy.lock().map_err(|_| io::Error::other("proxy lock poisoned"))? = Some(proxy);
                Some(child_net)
            }
            None => None,
        };
        let pid_ns = i.pid_ns.then(|| {
            let (u, g) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
            child::PidNs {
                user: s.needs_user_namespace,
                uid_map: format!("{u} {u} 1").into_bytes(),
                gid_map: format!("{g} {g} 1").into_bytes(),
                ro_binds: i.ro_binds.iter().filter_map(|p| child::ReadOnlyBind::new(p)).collect(),
                net,
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
        Ok(b.into_fd())
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
