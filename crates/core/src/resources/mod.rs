//! Resource limits of one call (docs/limits.md): memory, processes, open files, file size
//! and CPU time, per tier from the operator's settings (`animaworks-tool.json` `"limits"`), lowered for one
//! anima by its `permissions.json` `"limits"`.
//!
//! How each is enforced is decided per machine and said in `doctor` and the audit line, never pretended:
//! memory and processes by a cgroup made for the call beneath the runner's own ([`cgroup`]), else memory by
//! `RLIMIT_DATA` (per process; not `RLIMIT_AS`, which breaks runtimes that reserve large address spaces, Node's
//! V8 first) and processes not at all; open files, file size and CPU time by rlimits (per process).

pub use crate::policy::limit_grants::{self as amounts, Amounts, Key, Lower};
pub use awt_sys::cgroup;

use crate::error::{CallError, Detail, ErrorCode};
use crate::tier::Tier;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::Mutex;

/// Each call's cgroup is `<this><runner pid>-<n>` (docs/limits.md); a later runner removes the empty ones left by a
/// runner that was killed.
const GROUP_PREFIX: &str = "animaworks-tool-";

/// The operator's limits per tier: `animaworks-tool.json` `"limits"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierLimits {
    pub core: Amounts,
    pub common: Amounts,
    pub personal: Amounts,
    /// `"cgroups": false`: rlimits only, even where a cgroup could be made.
    pub cgroups: bool,
}

impl Default for TierLimits {
    fn default() -> Self {
        TierLimits {
            core: Amounts::default(),
            common: Amounts::TOOL_DEFAULT,
            personal: Amounts::TOOL_DEFAULT,
            cgroups: true,
        }
    }
}

impl TierLimits {
    /// `"limits"` of the runner's settings, over the defaults: per tier, each key absent (the default), `null`
    /// (no limit) or a whole number above 0 (the settings' parser refused anything else, naming the key).
    pub fn from_runner(all: &crate::settings::Settings) -> TierLimits {
        let l = &all.limits;
        let d = TierLimits::default();
        let over = |a: &crate::settings::limits::TierAmounts, base: Amounts| {
            let mut out = base;
            for (i, (_, v)) in a.each().into_iter().enumerate() {
                out.0[i] = v.over(base.0[i]);
            }
            out
        };
        TierLimits {
            core: over(&l.core, d.core),
            common: over(&l.common, d.common),
            personal: over(&l.personal, d.personal),
            cgroups: l.cgroups.unwrap_or(d.cgroups),
        }
    }

    fn tier(&self, t: Tier) -> Amounts {
        match t {
            Tier::Core => self.core,
            Tier::Common => self.common,
            Tier::Personal => self.personal,
        }
    }
}

/// Where a limit's amount came from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum From {
    Tier(Tier),
    /// `mcp_servers.<name>.limits` of the runner's settings.
    Server(String),
    Anima(PathBuf),
}

/// How a limit is enforced for one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    Cgroup(cgroup::Version),
    /// An rlimit of each process (`RLIMIT_DATA` for memory).
    Rlimit(&'static str),
    /// Not enforced, and why.
    Not(String),
}

impl How {
    fn to_json(&self) -> Value {
        match self {
            How::Cgroup(v) => json!(v.as_str()),
            How::Rlimit(r) => json!(r),
            How::Not(_) => json!("not_enforced"),
        }
    }

    fn words(&self) -> String {
        match self {
            How::Cgroup(v) => format!(
                "the call's {} cgroup",
                if *v == cgroup::Version::V1 { "v1" } else { "v2" }
            ),
            How::Rlimit(r) => format!("{r} of each process"),
            How::Not(why) => format!("not enforced: {why}"),
        }
    }
}

/// The cgroup hierarchies the call may use: none with `"cgroups": false`.
fn hierarchies(cgroups: bool) -> std::borrow::Cow<'static, cgroup::Hierarchies> {
    if cgroups {
        std::borrow::Cow::Borrowed(cgroup::hierarchies())
    } else {
        let off = || Err(cgroup::Unavailable::Disabled("\"limits\": {\"cgroups\": false} in the runner's settings"));
        std::borrow::Cow::Owned(cgroup::Hierarchies {
            memory: off(),
            pids: off(),
        })
    }
}

/// The way each limit would be enforced on this machine (the cgroup hierarchies are probed once).
fn planned(k: Key, cgroups: bool) -> How {
    let h = hierarchies(cgroups);
    match k {
        Key::Memory => match &h.memory {
            Ok(p) => How::Cgroup(p.version),
            Err(_) => How::Rlimit("RLIMIT_DATA"),
        },
        Key::Processes => match &h.pids {
            Ok(p) => How::Cgroup(p.version),
            Err(why) => How::Not(format!("no pids cgroup can be made: {why}")),
        },
        Key::OpenFiles => How::Rlimit("RLIMIT_NOFILE"),
        Key::FileSize => How::Rlimit("RLIMIT_FSIZE"),
        Key::Cpu => How::Rlimit("RLIMIT_CPU"),
    }
}

/// The limits of one process of a call, and once it is started, its cgroup and how each was enforced.
#[derive(Debug, Default)]
pub struct CallLimits {
    amounts: Amounts,
    from: Vec<(Key, From)>,
    tier: Option<Tier>,
    cgroups: bool,
    settings_path: PathBuf,
    active: Mutex<Option<Active>>,
    /// Groups of earlier starts of the same plan: kept (with whatever runs in them) until the plan goes.
    earlier: Mutex<Vec<cgroup::CallGroup>>,
}

#[derive(Debug)]
struct Active {
    group: Option<cgroup::CallGroup>,
    how: Vec<(Key, How)>,
}

pub use awt_sys::rlimit::ChildLimits;
use awt_sys::rlimit::Resource;

impl CallLimits {
    /// The limits of a process of a tool of `tier`: the operator's, lowered by the anima's.
    pub fn new(
        settings: &crate::settings::Settings,
        tier: Tier,
        anima: Option<(&Lower, PathBuf)>,
    ) -> Result<CallLimits, CallError> {
        CallLimits::with_server(settings, tier, None, anima)
    }

    /// [`CallLimits::new`] for the process of a declared MCP server, whose own `"limits"` replace its tier's key
    /// by key before the anima's lower them.
    fn with_server(
        settings: &crate::settings::Settings,
        tier: Tier,
        server: Option<(&str, &crate::settings::limits::TierAmounts)>,
        anima: Option<(&Lower, PathBuf)>,
    ) -> Result<CallLimits, CallError> {
        let t = TierLimits::from_runner(settings);
        let mut amounts = t.tier(tier);
        let mut own = [false; Key::ALL.len()];
        if let Some((_, l)) = server {
            for (i, (_, v)) in l.each().into_iter().enumerate() {
                if v != crate::settings::limits::Amount::Default {
                    amounts.0[i] = v.over(amounts.0[i]);
                    own[i] = true;
                }
            }
        }
        let mut from = Vec::new();
        for k in Key::ALL {
            let lowered = anima.as_ref().and_then(|(l, p)| Some((l.get(k)?, p.clone())));
            match (amounts.get(k), lowered) {
                (cur, Some((v, p))) if cur.is_none_or(|c| v < c) => {
                    amounts.0[k.index()] = Some(v);
                    from.push((k, From::Anima(p)));
                }
                (Some(_), _) => match server {
                    Some((name, _)) if own[k.index()] => from.push((k, From::Server(name.to_owned()))),
                    _ => from.push((k, From::Tier(tier))),
                },
                _ => {}
            }
        }
        Ok(CallLimits {
            amounts,
            from,
            tier: Some(tier),
            cgroups: t.cgroups,
            settings_path: settings.path.clone(),
            active: Mutex::new(None),
            earlier: Mutex::new(Vec::new()),
        })
    }

    /// [`CallLimits::new`] with the anima's `"limits"` from the permissions the call read.
    pub fn for_process(
        settings: &crate::settings::Settings,
        file: &crate::discover::ToolFile,
        perms: &Result<crate::policy::permissions::LoadedPermissions, crate::policy::permissions::PermissionsError>,
    ) -> Result<CallLimits, CallError> {
        let anima = perms
            .as_ref()
            .ok()
            .map(|p| (&p.permissions.limits, p.path().to_path_buf()));
        let server = file
            .mcp
            .as_deref()
            .and_then(|d| Some((d.name.as_str(), d.spec.limits.as_ref()?)));
        CallLimits::with_server(settings, file.tier, server, anima)
    }

    pub fn amounts(&self) -> Amounts {
        self.amounts
    }

    fn from(&self, k: Key) -> Option<&From> {
        self.from.iter().find(|(x, _)| *x == k).map(|(_, f)| f)
    }

    /// Before the start: the call's cgroup (when memory or processes are limited and one can be made) and the
    /// rlimits. `extra_processes`: processes of the runner's own in the group (a PID namespace's init).
    pub fn prepare(&self, extra_processes: u64) -> std::io::Result<ChildLimits> {
        let h = hierarchies(self.cgroups);
        let mem = self.amounts.get(Key::Memory);
        let pids = self.amounts.get(Key::Processes);
        let mut how: Vec<(Key, How)> = Vec::new();
        let mem_cg = mem.and_then(|m| Some((h.memory.as_ref().ok()?, m.saturating_mul(1 << 20))));
        let pids_cg = pids.and_then(|n| Some((h.pids.as_ref().ok()?, n.saturating_add(extra_processes))));
        let group = if mem_cg.is_some() || pids_cg.is_some() {
            match cgroup::CallGroup::make(GROUP_PREFIX, mem_cg, pids_cg) {
                Ok(g) => Some(g),
                Err(e) => {
                    tracing::warn!("no cgroup for the call, memory falls back to RLIMIT_DATA: {e}");
                    None
                }
            }
        } else {
            None
        };
        let mut rlimits = Vec::new();
        let mut rl = |res: Resource, soft: u64, hard: u64| {
            // Never above the runner's own hard limit (raising one needs a privilege the tool is not given).
            let max = awt_sys::rlimit::hard_limit(res);
            rlimits.push((res, soft.min(max), hard.min(max)));
        };
        for k in Key::ALL {
            let Some(v) = self.amounts.get(k) else { continue };
            let h = match k {
                Key::Memory if group.is_some() => {
                    How::Cgroup(mem_cg.map(|(p, _)| p.version).unwrap_or(cgroup::Version::V1))
                }
                Key::Memory => {
                    let b = v.saturating_mul(1 << 20);
                    rl(Resource::Data, b, b);
                    How::Rlimit("RLIMIT_DATA")
                }
                Key::Processes => match (&group, pids_cg) {
                    (Some(_), Some((p, _))) => How::Cgroup(p.version),
                    _ => match planned(k, self.cgroups) {
                        How::Not(w) => How::Not(w),
                        _ => How::Not("the call's cgroup could not be made".into()),
                    },
                },
                Key::OpenFiles => {
                    rl(Resource::Nofile, v, v);
                    How::Rlimit("RLIMIT_NOFILE")
                }
                Key::FileSize => {
                    let b = v.saturating_mul(1 << 20);
                    rl(Resource::Fsize, b, b);
                    How::Rlimit("RLIMIT_FSIZE")
                }
                Key::Cpu => {
                    // SIGXCPU at the limit, SIGKILL a second later for a tool that ignores it.
                    rl(Resource::Cpu, v, v.saturating_add(1));
                    How::Rlimit("RLIMIT_CPU")
                }
            };
            how.push((k, h));
        }
        let join = match &group {
            Some(g) => g.join()?,
            None => cgroup::Join(Vec::new()),
        };
        let before = self.active.lock().expect("limits lock").replace(Active { group, how });
        if let Some(g) = before.and_then(|a| a.group) {
            self.earlier.lock().expect("limits lock").push(g);
        }
        Ok(ChildLimits { join, rlimits })
    }

    /// What the audit line records: per limit its amount, where it came from and how it is enforced (as planned
    /// before the start, as done after it).
    pub fn summary(&self) -> Value {
        let active = self.active.lock().expect("limits lock");
        let mut m = Map::new();
        for k in Key::ALL {
            let v = match self.amounts.get(k) {
                None => Value::Null,
                Some(v) => {
                    let how = active
                        .as_ref()
                        .and_then(|a| a.how.iter().find(|(x, _)| *x == k).map(|(_, h)| h.clone()))
                        .unwrap_or_else(|| planned(k, self.cgroups));
                    let mut o = json!({"value": v, "enforced": how.to_json(), "from": self.from_words(k)});
                    if let How::Not(why) = &how {
                        o["why"] = json!(why);
                    }
                    o
                }
            };
            m.insert(k.name().into(), v);
        }
        Value::Object(m)
    }

    fn from_words(&self, k: Key) -> String {
        match self.from(k) {
            Some(From::Anima(_)) => "permissions.json".into(),
            Some(From::Server(name)) => format!("mcp_servers.{name}.limits"),
            _ => format!("limits.{}", self.tier.map_or("?", |t| t.as_str())),
        }
    }

    /// The key to raise, as the operator or the anima writes it.
    fn raise_hint(&self, k: Key, v: u64) -> String {
        match self.from(k) {
            Some(From::Anima(p)) => format!(
                "the anima's {} \"limits\": {{\"{}\": {v}}} lowers it: raise or remove that key (the tier's limit still holds), or make the tool use less",
                p.display(),
                k.name()
            ),
            Some(From::Server(name)) => format!(
                "the operator may raise \"mcp_servers\": {{\"{name}\": {{\"limits\": {{\"{}\": …}}}}}} in {} (null: no limit), or make the server use less",
                k.name(),
                self.settings_path.display()
            ),
            _ => format!(
                "the operator may raise \"limits\": {{\"{}\": {{\"{}\": …}}}} in {} (null: no limit), or make the tool use less",
                self.tier.map_or("?", |t| t.as_str()),
                k.name(),
                self.settings_path.display()
            ),
        }
    }

    /// A failed call that a limit ended, or probably ended, says so: which limit, its value, where it is set
    /// and how it was enforced. Other errors pass unchanged.
    pub fn explain(&self, e: CallError) -> CallError {
        if !matches!(e.code, ErrorCode::Crashed | ErrorCode::ToolError | ErrorCode::BadOutput) {
            return e;
        }
        let active = self.active.lock().expect("limits lock");
        let Some(a) = active.as_ref() else { return e };
        let how = |k: Key| a.how.iter().find(|(x, _)| *x == k).map(|(_, h)| h.clone());
        let signal = e.detail(Detail::Signal).and_then(Value::as_i64).map(|s| s as i32);
        let tail = e
            .detail(Detail::StderrTail)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let has = |needles: &[&str]| needles.iter().any(|n| tail.contains(n));
        let group = a.group.as_ref();
        // (limit, certain): certain when the kernel's own counter or signal says so.
        let found: Option<(Key, bool)> = if group.is_some_and(|g| g.oom_kills() > 0) {
            Some((Key::Memory, true))
        } else if signal == Some(libc::SIGXCPU) && how(Key::Cpu).is_some() {
            Some((Key::Cpu, true))
        } else if signal == Some(libc::SIGXFSZ) && how(Key::FileSize).is_some() {
            Some((Key::FileSize, true))
        } else if group.is_some_and(|g| g.pids_refused() > 0) {
            Some((Key::Processes, true))
        } else if how(Key::FileSize).is_some() && has(&["File too large", "EFBIG"]) {
            Some((Key::FileSize, false))
        } else if how(Key::OpenFiles).is_some() && has(&["Too many open files", "EMFILE"]) {
            Some((Key::OpenFiles, false))
        } else if matches!(how(Key::Memory), Some(How::Rlimit(_)))
            && has(&[
                "MemoryError",
                "Cannot allocate memory",
                "out of memory",
                "bad_alloc",
                "ENOMEM",
            ])
        {
            Some((Key::Memory, false))
        } else {
            None
        };
        let Some((k, certain)) = found else { return e };
        let (Some(v), Some(h)) = (self.amounts.get(k), how(k)) else {
            return e;
        };
        let who = match (
            e.detail(Detail::Tool).and_then(Value::as_str),
            e.detail(Detail::Action).and_then(Value::as_str),
        ) {
            (Some(t), Some(a)) => format!("{t}.{a}"),
            _ => "the tool".to_owned(),
        };
        let set = match self.from(k) {
            Some(From::Anima(p)) => format!("limits.{} in {}", k.name(), p.display()),
            Some(From::Server(name)) => format!(
                "mcp_servers.{name}.limits.{} in {}",
                k.name(),
                self.settings_path.display()
            ),
            _ => format!(
                "limits.{}.{} in {}",
                self.tier.map_or("?", |t| t.as_str()),
                k.name(),
                self.settings_path.display()
            ),
        };
        let what = if certain {
            match k {
                Key::Memory => "was ended by its",
                Key::Processes => "failed after it reached its",
                _ => "was ended by its",
            }
        } else {
            "probably failed at its"
        };
        let peak = match (k, group.and_then(cgroup::CallGroup::memory_peak)) {
            (Key::Memory, Some(p)) => format!("; peak use {} MiB", p >> 20),
            _ => String::new(),
        };
        let mut out = e.clone();
        out.message = format!(
            "{who} {what} {} of {} ({set}, enforced by {}){peak}; before that: {}",
            k.what(),
            k.amount(v),
            h.words(),
            e.message
        );
        out.hint = Some(self.raise_hint(k, v));
        out.with(Detail::Reason, "limit_reached")
            .with(Detail::Key, format!("limits.{}", k.name()))
    }
}

/// What `RLIMIT_DATA` does not count, said wherever memory falls back to it.
pub const SHARED_NOT_COUNTED: &str = "shared memory is not counted: a MAP_SHARED mapping, a memfd or a tmpfs file \
     grows past it; only a cgroup bounds those";

/// What `doctor` says of the limits: each tier's amounts and how each kind is enforced on this machine.
pub fn doctor(settings: Option<&crate::settings::Settings>) -> (Value, Vec<String>) {
    // Settings that cannot be used are reported on their own; the defaults are shown here then.
    let t = settings.map(TierLimits::from_runner).unwrap_or_default();
    let cgroups = t.cgroups;
    let mut lines = Vec::new();
    let mut how = Map::new();
    {
        for (name, a) in [("core", t.core), ("common", t.common), ("personal", t.personal)] {
            let each: Vec<String> = Key::ALL
                .iter()
                .map(|k| {
                    format!(
                        "{} {}",
                        k.name(),
                        a.get(*k).map_or("none".to_owned(), |v| v.to_string())
                    )
                })
                .collect();
            lines.push(format!("limits of {name} tools: {}", each.join(", ")));
        }
    }
    for k in Key::ALL {
        let h = planned(k, cgroups);
        let mut o = json!({"enforced": h.to_json()});
        if k == Key::Memory && matches!(h, How::Rlimit(_)) {
            lines.push(format!("limit {}: {} ({SHARED_NOT_COUNTED})", k.name(), h.words()));
            o["not_counted"] = json!(SHARED_NOT_COUNTED);
        } else {
            lines.push(format!("limit {}: {}", k.name(), h.words()));
        }
        if let How::Not(w) = &h {
            o["why"] = json!(w);
        }
        how.insert(k.name().into(), o);
    }
    let one = |a: Amounts| {
        Value::Object(
            Key::ALL
                .iter()
                .map(|k| (k.name().to_owned(), json!(a.get(*k))))
                .collect(),
        )
    };
    let tiers_json = json!({"core": one(t.core), "common": one(t.common), "personal": one(t.personal)});
    (json!({"tiers": tiers_json, "how": how, "report": lines}), lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(v: Value) -> crate::settings::Settings {
        crate::settings::Settings::from_value(PathBuf::from("/nonexistent/animaworks-tool.json"), &v).unwrap()
    }

    #[test]
    fn tiers_default_and_override() {
        let t = TierLimits::from_runner(&settings(json!({})));
        assert_eq!(t.personal, Amounts::TOOL_DEFAULT);
        assert_eq!(t.core, Amounts::default());
        let t = TierLimits::from_runner(&settings(
            json!({"limits": {"personal": {"memory_mib": 64, "cpu_s": 5, "processes": null}}}),
        ));
        assert_eq!(t.personal.get(Key::Memory), Some(64));
        assert_eq!(t.personal.get(Key::Cpu), Some(5));
        assert_eq!(t.personal.get(Key::Processes), None);
        assert_eq!(t.personal.get(Key::OpenFiles), Some(1024));
        for bad in [
            json!({"limits": {"personal": {"memory": 1}}}),
            json!({"limits": {"x": {}}}),
            json!({"limits": {"core": {"cpu_s": 0}}}),
            json!({"limits": {"core": {"cpu_s": -1}}}),
            json!({"limits": {"cgroups": "no"}}),
        ] {
            let e = crate::settings::Settings::from_value(PathBuf::from("/x/animaworks-tool.json"), &bad).unwrap_err();
            assert!(e.reason.contains("limits."), "{bad}: {e}");
        }
    }

    /// Memory held by rlimits only: `doctor` says that shared memory passes it.
    #[test]
    fn doctor_says_rlimits_do_not_count_shared_memory() {
        let (v, lines) = doctor(Some(&settings(json!({"limits": {"cgroups": false}}))));
        let line = lines.iter().find(|l| l.starts_with("limit memory_mib:")).unwrap();
        assert!(line.contains("RLIMIT_DATA") && line.contains("MAP_SHARED"), "{line}");
        assert_eq!(v["how"]["memory_mib"]["not_counted"], SHARED_NOT_COUNTED);
    }

    #[test]
    fn an_anima_only_lowers() {
        let s = settings(json!({}));
        let low = Lower {
            memory_mib: Some(100),
            open_files: Some(5000),
            cpu_s: Some(3),
            ..Default::default()
        };
        let l = CallLimits::new(&s, Tier::Personal, Some((&low, PathBuf::from("/a/permissions.json")))).unwrap();
        assert_eq!(l.amounts.get(Key::Memory), Some(100));
        assert_eq!(
            l.amounts.get(Key::OpenFiles),
            Some(1024),
            "a higher value is without effect"
        );
        assert_eq!(l.amounts.get(Key::Cpu), Some(3), "no limit is lowered by any value");
        assert_eq!(l.from_words(Key::Memory), "permissions.json");
        assert_eq!(l.from_words(Key::OpenFiles), "limits.personal");
        let core = CallLimits::new(&s, Tier::Core, None).unwrap();
        assert_eq!(core.amounts, Amounts::default());
    }
}
