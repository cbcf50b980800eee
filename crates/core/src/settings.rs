//! `<data dir>/animaworks-tool.json`, the operator's settings: one typed shape ([`File`], serde with
//! `deny_unknown_fields` at every level), parsed once per runner into [`Settings`], from which every reader takes
//! its part (the environment, the pool, background tasks, the sandbox, the limits, MCP servers). An absent file
//! means every default; a file that exists but cannot be used is an error that names the file and the key — a
//! misspelt key with the closest real one — never silently ignored, reported by every command that needs the
//! settings and by `doctor`. The JSON Schema and docs/configuration.md are generated from the same shape
//! ([`mod@reference`]).

pub mod approvals;
pub mod limits;
pub mod mcp;
pub mod reference;
pub mod sandbox;
pub mod tasks;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file's name inside the data dir.
pub const SETTINGS_FILE: &str = "animaworks-tool.json";
/// The largest settings file read (a forged file must not exhaust memory).
pub const MAX_SETTINGS_BYTES: u64 = 1024 * 1024;

/// How long a persistent worker may sit idle before it is stopped, unless `worker_idle_s` says otherwise.
pub const DEFAULT_WORKER_IDLE: Duration = Duration::from_secs(10);
/// How many persistent workers one tool may have at once, unless `workers_per_tool` says otherwise.
pub const DEFAULT_WORKERS_PER_TOOL: usize = 4;
/// Running background tasks per anima, unless `max_running_tasks` says otherwise.
pub const DEFAULT_MAX_RUNNING: usize = 4;
/// The longest `worker_idle_s`: a year.
const MAX_IDLE_S: f64 = 86400.0 * 365.0;
/// The largest count a count key takes.
const MAX_COUNT: u64 = 1_000_000;

/// Which of the caller's variables a tool gets (protocol.md §8; [`crate::policy::env`] builds the environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnvPolicy {
    /// The base variables, `LC_*`, proxy and CA settings and the operator's `env_passthrough`: tools on the new
    /// protocol.
    #[default]
    Clean,
    /// The caller's whole environment: AnimaWorks modules (a `.py` tool the shim runs by the AnimaWorks
    /// convention), unless the operator sets `"legacy_env": "clean"`.
    Inherit,
}

impl EnvPolicy {
    /// `clean` or `inherit`, as the audit line, `doctor` and `--help` name it.
    pub fn as_str(self) -> &'static str {
        match self {
            EnvPolicy::Clean => "clean",
            EnvPolicy::Inherit => "inherit",
        }
    }
}

/// What a tier's tools get when `permissions.json` names no credential for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CredentialDefault {
    /// `"declared"`: whatever the tool declares or asks the broker for (trusted code).
    Declared,
    /// `"granted"`: only what `permissions.json` `"credentials"` grants.
    Granted,
}

/// Per tier, `declared` (what a tool declares or asks for) or `granted` (only what `permissions.json`
/// `"credentials"` grants; docs/credentials.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct CredentialDefaults {
    /// Core tools (the operator's own).
    pub core: CredentialDefault,
    /// Common tools.
    pub common: CredentialDefault,
    /// Personal tools (possibly written by an LLM).
    pub personal: CredentialDefault,
}

impl Default for CredentialDefaults {
    fn default() -> Self {
        CredentialDefaults {
            core: CredentialDefault::Declared,
            common: CredentialDefault::Granted,
            personal: CredentialDefault::Granted,
        }
    }
}

/// The file as written: every key optional (absent or `null`: the default). Its doc comments are the
/// descriptions of the JSON Schema and of docs/configuration.md.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "animaworks-tool.json",
    description = "The settings of animaworks-tool: <data dir>/animaworks-tool.json (docs/configuration.md)."
)]
pub struct File {
    /// The JSON Schema of this file, for editors (not read by the runner).
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Extra caller variables a tool on the new protocol may see: names, or prefixes ending in `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = []))]
    pub env_passthrough: Option<Vec<String>>,
    /// The environment of AnimaWorks modules: `inherit` (the caller's, as in AnimaWorks) or `clean`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "inherit"))]
    pub legacy_env: Option<EnvPolicy>,
    /// Per tier, which credentials a tool gets when `permissions.json` names none for it.
    #[serde(default, deserialize_with = "object_opt", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"core": "declared", "common": "granted", "personal": "granted"}))]
    pub credential_defaults: Option<CredentialDefaults>,
    /// Background tasks of one anima running at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000), extend("default" = 4))]
    pub max_running_tasks: Option<u64>,
    /// Where background tasks are kept (absent: files in each anima's dir).
    #[serde(default, deserialize_with = "object_opt", skip_serializing_if = "Option::is_none")]
    pub tasks: Option<tasks::TasksSettings>,
    /// Seconds an idle persistent worker lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 31536000), extend("default" = 10))]
    pub worker_idle_s: Option<f64>,
    /// Persistent workers one tool may have at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000), extend("default" = 4))]
    pub workers_per_tool: Option<u64>,
    /// The default cap of a `use-tool` answer, in UTF-8 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1000000), extend("default" = 50000))]
    pub use_tool_max_chars: Option<u64>,
    /// Confinement per tier, and what to do where the kernel cannot enforce it (docs/sandbox.md).
    #[serde(default, deserialize_with = "object_opt", skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<sandbox::SandboxSettings>,
    /// Resource limits per tier (docs/limits.md).
    #[serde(default, deserialize_with = "object_opt", skip_serializing_if = "Option::is_none")]
    pub limits: Option<limits::LimitsSettings>,
    /// MCP servers as tools of the core or common tier, by name (docs/mcp-servers.md). Each is read on its own:
    /// a bad one is a problem of that server in `doctor`, not of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<BTreeMap<String, mcp::ServerSpec>>")]
    pub mcp_servers: Option<Map<String, Value>>,
    /// Gated actions that ask a human instead of being refused (docs/policy.md#approvals).
    #[serde(default, deserialize_with = "object_opt", skip_serializing_if = "Option::is_none")]
    pub approvals: Option<approvals::ApprovalsSettings>,
}

/// The runner's settings, every key typed and every default applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Where they were read from.
    pub path: PathBuf,
    /// `env_passthrough`: caller variables every tool gets (`NAME`, or `PREFIX_*`).
    pub env_passthrough: Vec<String>,
    /// `worker_idle_s`.
    pub worker_idle: Duration,
    /// `workers_per_tool`, at least 1.
    pub workers_per_tool: usize,
    /// `max_running_tasks`, at least 1.
    pub max_running_tasks: usize,
    /// `use_tool_max_chars`: the default cut of a `use_tool` answer.
    pub use_tool_max_chars: Option<usize>,
    /// `legacy_env`: what AnimaWorks modules see, `inherit` (the caller's whole environment, as in AnimaWorks)
    /// or `clean`.
    pub legacy_env: EnvPolicy,
    /// `credential_defaults`: core `declared`, common and personal `granted` by default.
    pub credential_defaults: CredentialDefaults,
    /// `sandbox`.
    pub sandbox: sandbox::SandboxSettings,
    /// `limits`, as written ([`crate::resources::TierLimits`] applies the defaults).
    pub limits: limits::LimitsSettings,
    /// `tasks`, as written (`awt_tasks::config` resolves it with the environment); `None`: absent.
    pub tasks: Option<tasks::TasksSettings>,
    /// `mcp_servers`, each declaration still to be read ([`crate::mcp_servers`]).
    pub mcp_servers: Map<String, Value>,
    /// `approvals`, as written.
    pub approvals: approvals::ApprovalsSettings,
}

/// The settings file exists but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct SettingsError {
    pub path: PathBuf,
    pub reason: String,
    /// The key at fault (`limits.personal.memory_mib`), when one is.
    pub key: Option<String>,
    /// The real key closest to a misspelt one.
    pub did_you_mean: Option<String>,
}

impl SettingsError {
    /// The error of a command that needs the settings (`usage`: the operator's file, not the runner, is at fault):
    /// the key at fault and the closest real one in its details.
    pub fn to_call_error(&self) -> crate::error::CallError {
        use crate::error::{CallError, Detail, ErrorCode};
        let mut e = CallError::new(ErrorCode::Usage, format!("cannot use the runner settings: {self}"))
            .hint("fix that file (docs/configuration.md), or move it away to use the defaults")
            .with(Detail::Path, self.path.to_string_lossy().into_owned());
        if let Some(k) = &self.key {
            e = e.with(Detail::Key, k.as_str());
        }
        if let Some(n) = &self.did_you_mean {
            e = e.with(Detail::DidYouMean, n.as_str());
        }
        e
    }
}

impl Settings {
    /// Every default, as with no file.
    pub fn defaults(data_dir: &Path) -> Settings {
        Settings::resolve(data_dir.join(SETTINGS_FILE), File::default()).expect("the defaults are valid")
    }

    /// Read `<data dir>/animaworks-tool.json`.
    pub fn load(data_dir: &Path) -> Result<Settings, SettingsError> {
        let path = data_dir.join(SETTINGS_FILE);
        match crate::fsread::read(&path, MAX_SETTINGS_BYTES) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Settings::defaults(data_dir)),
            Err(e) => Err(error(&path, format!("cannot read: {e}"))),
            Ok(bytes) => Settings::parse(path, &bytes),
        }
    }

    /// The settings in `bytes`, read from `path`.
    pub fn parse(path: PathBuf, bytes: &[u8]) -> Result<Settings, SettingsError> {
        // serde takes a struct from an array too; the file is an object.
        let object = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        let file = match serde_json::from_slice::<File>(bytes) {
            Ok(f) if object => f,
            Ok(_) => return Err(error(&path, "not a JSON object".into())),
            Err(e) => return Err(explain(&path, bytes, e)),
        };
        Settings::resolve(path, file)
    }

    /// The settings of an already parsed document (tests, and callers that hold one).
    pub fn from_value(path: PathBuf, v: &Value) -> Result<Settings, SettingsError> {
        Settings::parse(path, v.to_string().as_bytes())
    }

    /// Apply the defaults and check what the types alone do not (ranges), each error naming its key.
    fn resolve(path: PathBuf, f: File) -> Result<Settings, SettingsError> {
        let key_error = |key: &str, reason: String| SettingsError {
            key: Some(key.to_owned()),
            ..error(&path, reason)
        };
        let worker_idle = match f.worker_idle_s {
            None => DEFAULT_WORKER_IDLE,
            Some(x) => (0.0..=MAX_IDLE_S)
                .contains(&x)
                .then(|| Duration::try_from_secs_f64(x).ok())
                .flatten()
                .ok_or_else(|| {
                    key_error(
                        "worker_idle_s",
                        format!("worker_idle_s must be a number of seconds from 0 to a year, not {x}"),
                    )
                })?,
        };
        let count = |name: &str, v: Option<u64>| -> Result<Option<usize>, SettingsError> {
            match v {
                None => Ok(None),
                Some(n) if (1..=MAX_COUNT).contains(&n) => Ok(Some(n as usize)),
                Some(n) => Err(key_error(
                    name,
                    format!("{name} must be a whole number from 1 to {MAX_COUNT}, not {n}"),
                )),
            }
        };
        let limits = f.limits.unwrap_or_default();
        if let Some(at) = limits.zero() {
            return Err(key_error(
                &format!("limits.{at}"),
                format!("\"limits.{at}\" is 0: each amount is a whole number above 0, or null for no limit"),
            ));
        }
        let approvals = f.approvals.unwrap_or_default();
        if let Some(t) = approvals.ttl_s.filter(|t| !(t.is_finite() && (1.0..=approvals::MAX_TTL_S).contains(t))) {
            return Err(key_error(
                "approvals.ttl_s",
                format!("approvals.ttl_s must be a number of seconds from 1 to 30 days, not {t}"),
            ));
        }
        Ok(Settings {
            approvals,
            env_passthrough: f.env_passthrough.unwrap_or_default(),
            worker_idle,
            workers_per_tool: count("workers_per_tool", f.workers_per_tool)?.unwrap_or(DEFAULT_WORKERS_PER_TOOL),
            max_running_tasks: count("max_running_tasks", f.max_running_tasks)?.unwrap_or(DEFAULT_MAX_RUNNING),
            use_tool_max_chars: count("use_tool_max_chars", f.use_tool_max_chars)?,
            legacy_env: f.legacy_env.unwrap_or(EnvPolicy::Inherit),
            credential_defaults: f.credential_defaults.unwrap_or_default(),
            sandbox: f.sandbox.unwrap_or_default(),
            limits,
            tasks: f.tasks,
            mcp_servers: f.mcp_servers.unwrap_or_default(),
            path,
        })
    }
}

/// A section, only from a JSON object: serde takes a struct from an array too (`"sandbox": ["off"]` would set
/// `core`), which the file must not mean.
pub(crate) fn object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Obj::<T>::deserialize(d)?.0)
}

/// [`object`] for a section that may be absent or `null`.
pub(crate) fn object_opt<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Obj<T>>::deserialize(d)?.map(|o| o.0))
}

struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData)).map(Obj)
    }
}

fn error(path: &Path, reason: String) -> SettingsError {
    SettingsError {
        path: path.to_owned(),
        reason,
        key: None,
        did_you_mean: None,
    }
}

/// Why `bytes` is not a [`File`]: not JSON, not an object, a misspelt key (with the closest real one), or a
/// value of the wrong shape, each with the key's path. Only reached on an error, so the schema is made here.
fn explain(path: &Path, bytes: &[u8], e: serde_json::Error) -> SettingsError {
    let v: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return error(path, format!("invalid JSON: {e}")),
    };
    if !v.is_object() {
        return error(path, "not a JSON object".into());
    }
    match diagnose::<File>(&v, "", &["mcp_servers"]) {
        Some(d) => SettingsError {
            path: path.to_owned(),
            reason: d.reason,
            key: Some(d.key),
            did_you_mean: d.did_you_mean,
        },
        None => error(path, e.to_string()),
    }
}

/// What is wrong with a document of type `T`, found with `T`'s JSON Schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// The key at fault, dotted from the document's top (`limits.personal.memory`).
    pub key: String,
    pub reason: String,
    pub did_you_mean: Option<String>,
}

/// The first misspelt key of `v` (by `T`'s schema, with the closest real key), else the first value of the wrong
/// shape; `prefix` is put before each key's path, and the top-level keys in `skip` are not looked into.
pub fn diagnose<T: JsonSchema>(v: &Value, prefix: &str, skip: &[&str]) -> Option<Diagnosis> {
    let schema = serde_json::to_value(schemars::schema_for!(T)).ok()?;
    let mut at = Vec::new();
    if let Some((key, names)) = unknown_key(v, &schema, &schema, &mut at, skip) {
        let dotted = dotted(prefix, &at, Some(&key));
        let near = crate::suggest::closest(&key, names.iter().map(String::as_str)).map(str::to_owned);
        let reason = match &near {
            Some(n) => format!("unknown key \"{dotted}\"; did you mean \"{n}\"?"),
            None => format!("unknown key \"{dotted}\"; the keys here: {}", names.join(", ")),
        };
        return Some(Diagnosis {
            key: dotted,
            reason,
            did_you_mean: near,
        });
    }
    let validator = jsonschema::validator_for(&schema).ok()?;
    let top = validator.iter_errors(v).find(|e| {
        let p = e.instance_path().to_string();
        !skip.iter().any(|s| p.starts_with(&format!("/{s}/")))
    })?;
    let first = deepest(&top);
    let parts: Vec<String> = first
        .instance_path()
        .to_string()
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    let key = dotted(prefix, &parts, None);
    let words = words(first);
    let near = first
        .instance()
        .as_str()
        .and_then(|w| crate::suggest::closest(w, words.iter().map(String::as_str)))
        .map(str::to_owned);
    let reason = match &near {
        Some(n) => format!("\"{key}\": {first}; did you mean \"{n}\"?"),
        None => format!("\"{key}\": {first}"),
    };
    Some(Diagnosis {
        reason,
        key,
        did_you_mean: near,
    })
}

/// Of an `anyOf` (an `Option` of a section: the section or `null`), the error of the branch that got furthest
/// into the document, so that the message names the inner key rather than the section.
fn deepest<'a>(e: &'a jsonschema::ValidationError<'a>) -> &'a jsonschema::ValidationError<'a> {
    use jsonschema::error::ValidationErrorKind as K;
    let (K::AnyOf { context } | K::OneOfNotValid { context }) = e.kind() else {
        return e;
    };
    let depth = |x: &jsonschema::ValidationError<'_>| x.instance_path().to_string().len();
    context
        .iter()
        .filter_map(|branch| branch.first())
        .max_by_key(|x| depth(x))
        .filter(|x| depth(x) > depth(e))
        .map_or(e, |x| deepest(x))
}

/// The words a value could have been, when the schema lists them (an enum: `"enforce"`, `"off"`).
fn words(e: &jsonschema::ValidationError<'_>) -> Vec<String> {
    use jsonschema::error::ValidationErrorKind as K;
    match e.kind() {
        K::Enum { options } => options
            .as_array()
            .map(|o| o.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default(),
        K::Constant { expected_value } => expected_value.as_str().map(str::to_owned).into_iter().collect(),
        K::AnyOf { context } | K::OneOfNotValid { context } => context.iter().flatten().flat_map(words).collect(),
        _ => Vec::new(),
    }
}

fn dotted(prefix: &str, at: &[String], last: Option<&str>) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if !prefix.is_empty() {
        parts.push(prefix);
    }
    parts.extend(at.iter().map(String::as_str));
    parts.extend(last);
    parts.join(".")
}

/// The schema `s` stands for: its `$ref` followed, and of an `anyOf`/`oneOf` (an `Option`) the object branch.
fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        if let Some(name) = r.strip_prefix("#/$defs/") {
            if let Some(d) = root.get("$defs").and_then(|d| d.get(name)) {
                return resolve(root, d);
            }
        }
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(k).and_then(Value::as_array) {
            if let Some(b) = branches
                .iter()
                .map(|b| resolve(root, b))
                .find(|b| b.get("properties").is_some() || b.get("additionalProperties").is_some())
            {
                return b;
            }
        }
    }
    s
}

/// The first key of `v` its schema does not allow, with the keys allowed there; `at` is the path to it.
fn unknown_key(
    v: &Value,
    schema: &Value,
    root: &Value,
    at: &mut Vec<String>,
    skip: &[&str],
) -> Option<(String, Vec<String>)> {
    let Value::Object(obj) = v else { return None };
    let s = resolve(root, schema);
    let props = s.get("properties").and_then(Value::as_object);
    let extra = s.get("additionalProperties");
    for (k, child) in obj {
        if at.is_empty() && skip.contains(&k.as_str()) {
            continue;
        }
        let sub = match props.and_then(|p| p.get(k)) {
            Some(sub) => sub,
            None => match extra {
                Some(Value::Bool(false)) => {
                    return Some((
                        k.clone(),
                        props.map(|p| p.keys().cloned().collect()).unwrap_or_default(),
                    ))
                }
                Some(sub @ Value::Object(_)) => sub,
                _ => continue,
            },
        };
        at.push(k.clone());
        if let Some(found) = unknown_key(child, sub, root, at, skip) {
            return Some(found);
        }
        at.pop();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_file_is_every_default() {
        let d = tempfile::tempdir().unwrap();
        let s = Settings::load(d.path()).unwrap();
        assert_eq!(s, Settings::defaults(d.path()));
        assert_eq!(s.legacy_env, EnvPolicy::Inherit);
        assert_eq!((s.workers_per_tool, s.max_running_tasks), (4, 4));
        assert_eq!(s.sandbox, sandbox::SandboxSettings::default());
    }

    #[test]
    fn keys_are_typed_and_bad_values_are_errors_naming_the_key() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join(SETTINGS_FILE);
        std::fs::write(
            &f,
            r#"{"env_passthrough": ["A", "B_*"], "worker_idle_s": 2.5, "workers_per_tool": 2,
                "max_running_tasks": 3, "use_tool_max_chars": 100, "legacy_env": null}"#,
        )
        .unwrap();
        let s = Settings::load(d.path()).unwrap();
        assert_eq!(s.env_passthrough, ["A", "B_*"]);
        assert_eq!(s.worker_idle, Duration::from_millis(2500));
        assert_eq!((s.workers_per_tool, s.max_running_tasks), (2, 3));
        assert_eq!(s.use_tool_max_chars, Some(100));
        assert_eq!(s.legacy_env, EnvPolicy::Inherit, "null is the default");
        for (bad, key) in [
            (r#"{"env_passthrough": "A"}"#, "env_passthrough"),
            (r#"{"env_passthrough": [1]}"#, "env_passthrough"),
            (r#"{"worker_idle_s": -1}"#, "worker_idle_s"),
            (r#"{"worker_idle_s": 1e300}"#, "worker_idle_s"),
            (r#"{"workers_per_tool": 0}"#, "workers_per_tool"),
            (r#"{"max_running_tasks": "4"}"#, "max_running_tasks"),
            (r#"{"use_tool_max_chars": -5}"#, "use_tool_max_chars"),
            (r#"{"legacy_env": "dirty"}"#, "legacy_env"),
            (
                r#"{"credential_defaults": {"personal": "all"}}"#,
                "credential_defaults.personal",
            ),
            (r#"{"sandbox": {"personal": "on"}}"#, "sandbox.personal"),
            (r#"{"limits": {"core": {"cpu_s": 0}}}"#, "limits.core.cpu_s"),
            (r#"{"limits": {"core": {"cpu_s": -1}}}"#, "limits.core.cpu_s"),
            (r#"{"tasks": {"lease_s": "long"}}"#, "tasks.lease_s"),
            (r#"{"sandbox": ["off"]}"#, "sandbox"),
            (r#"{"limits": {"core": [1]}}"#, "limits.core"),
            (r#"{"credential_defaults": []}"#, "credential_defaults"),
            ("[", "invalid JSON"),
            ("[]", "not a JSON object"),
        ] {
            std::fs::write(&f, bad).unwrap();
            let e = Settings::load(d.path()).unwrap_err();
            assert!(e.to_string().contains(key), "{bad}: {e}");
            assert!(e.to_string().contains(SETTINGS_FILE), "{bad}: {e}");
        }
    }

    #[test]
    fn a_misspelt_key_is_an_error_naming_it_and_the_closest_key() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join(SETTINGS_FILE);
        for (bad, key, near) in [
            (
                r#"{"max_runing_tasks": 2}"#,
                "max_runing_tasks",
                Some("max_running_tasks"),
            ),
            (
                r#"{"limits": {"personal": {"memory": 1}}}"#,
                "limits.personal.memory",
                Some("memory_mib"),
            ),
            (
                r#"{"sandbox": {"pid_namspace": false}}"#,
                "sandbox.pid_namspace",
                Some("pid_namespace"),
            ),
            (
                r#"{"tasks": {"backend": "files", "lease": 3}}"#,
                "tasks.lease",
                Some("lease_s"),
            ),
            (
                r#"{"credential_defaults": {"persona": "granted"}}"#,
                "credential_defaults.persona",
                Some("personal"),
            ),
            (r#"{"zzzzzz": 1}"#, "zzzzzz", None),
        ] {
            std::fs::write(&f, bad).unwrap();
            let e = Settings::load(d.path()).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(&format!("unknown key \"{key}\"")), "{bad}: {text}");
            assert!(text.contains(SETTINGS_FILE), "{bad}: {text}");
            assert_eq!(e.key.as_deref(), Some(key), "{bad}");
            assert_eq!(e.did_you_mean.as_deref(), near, "{bad}: {text}");
            if let Some(n) = near {
                assert!(text.contains(&format!("did you mean \"{n}\"?")), "{text}");
            } else {
                assert!(text.contains("max_running_tasks"), "the keys are listed: {text}");
            }
        }
    }

    #[test]
    fn a_misspelt_word_gets_the_closest_word() {
        for (bad, key, near) in [
            (r#"{"legacy_env": "inheirt"}"#, "legacy_env", "inherit"),
            (r#"{"sandbox": {"personal": "enforse"}}"#, "sandbox.personal", "enforce"),
            (
                r#"{"sandbox": {"unsupported": "refuze"}}"#,
                "sandbox.unsupported",
                "refuse",
            ),
            (r#"{"tasks": {"backend": "postgress"}}"#, "tasks.backend", "postgres"),
        ] {
            let v: Value = serde_json::from_str(bad).unwrap();
            let e = Settings::from_value(PathBuf::from("/x/animaworks-tool.json"), &v).unwrap_err();
            assert_eq!(e.key.as_deref(), Some(key), "{bad}: {e}");
            assert_eq!(e.did_you_mean.as_deref(), Some(near), "{bad}: {e}");
            assert!(e.reason.contains(&format!("did you mean \"{near}\"?")), "{e}");
        }
    }

    #[test]
    fn every_key_of_every_section_is_read() {
        let v = serde_json::json!({
            "$schema": "./animaworks-tool.schema.json",
            "credential_defaults": {"core": "granted"},
            "tasks": {"backend": "postgres", "url": "postgres://h/db", "lease_s": 6, "max_attempts": 2,
                      "drain_s": 1, "poll_s": 0.5, "watchdog": false},
            "sandbox": {"core": "enforce", "unsupported": "refuse", "pid_namespace": false, "deny": ["/srv"]},
            "limits": {"cgroups": false, "personal": {"memory_mib": 64, "processes": null}},
            "mcp_servers": {"s": {"command": "x", "whatever": 1}}
        });
        let s = Settings::from_value(PathBuf::from("/x/animaworks-tool.json"), &v).unwrap();
        assert_eq!(s.credential_defaults.core, CredentialDefault::Granted);
        assert_eq!(s.credential_defaults.personal, CredentialDefault::Granted);
        let t = s.tasks.unwrap();
        assert_eq!(
            (t.backend, t.lease_s, t.watchdog),
            (Some(tasks::BackendWord::Postgres), Some(6.0), Some(false))
        );
        assert_eq!(s.sandbox.unsupported, sandbox::Unsupported::Refuse);
        assert_eq!(s.sandbox.deny, ["/srv"]);
        assert_eq!(s.limits.cgroups, Some(false));
        assert_eq!(s.limits.personal.memory_mib, limits::Amount::Set(64));
        assert_eq!(s.limits.personal.processes, limits::Amount::Unlimited);
        assert_eq!(s.limits.personal.cpu_s, limits::Amount::Default);
        assert!(s.mcp_servers.contains_key("s"), "a server's keys are its own reader's");
    }

    #[test]
    fn a_fifo_is_refused_without_hanging() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join(SETTINGS_FILE);
        let c = &f;
        assert!(std::process::Command::new("mkfifo").arg(c).status().unwrap().success());
        let e = Settings::load(d.path()).unwrap_err();
        assert!(e.reason.contains("not a regular file"), "{e}");
    }
}
