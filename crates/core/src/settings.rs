//! `<data dir>/animaworks-tool.json`, the operator's settings: read once per runner, with one error policy. An
//! absent file means every default; a file that exists but cannot be used is an error that names the file and
//! the key (never silently ignored), reported by every command that needs the settings and by `doctor`.

use serde_json::{Map, Value};
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

/// The runner's settings, every key typed.
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
    pub legacy_env: crate::policy::env::EnvPolicy,
    /// `credential_defaults`: per tier, `"declared"` (what the tool declares or asks for) or `"granted"` (only what
    /// permissions.json grants); core `declared`, common and personal `granted` by default.
    pub credential_defaults: crate::policy::grants::CredentialDefaults,
    /// The whole document, for keys a feature reads on its own (each such reader types its key here too).
    pub raw: Map<String, Value>,
}

/// The settings file exists but cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct SettingsError {
    pub path: PathBuf,
    pub reason: String,
}

impl Settings {
    /// Every default, as with no file.
    pub fn defaults(data_dir: &Path) -> Settings {
        Settings {
            path: data_dir.join(SETTINGS_FILE),
            env_passthrough: Vec::new(),
            worker_idle: DEFAULT_WORKER_IDLE,
            workers_per_tool: DEFAULT_WORKERS_PER_TOOL,
            max_running_tasks: DEFAULT_MAX_RUNNING,
            use_tool_max_chars: None,
            legacy_env: crate::policy::env::EnvPolicy::Inherit,
            credential_defaults: Default::default(),
            raw: Map::new(),
        }
    }

    /// Read `<data dir>/animaworks-tool.json`.
    pub fn load(data_dir: &Path) -> Result<Settings, SettingsError> {
        let mut s = Settings::defaults(data_dir);
        let err = |reason: String| SettingsError {
            path: s.path.clone(),
            reason,
        };
        let bytes = match crate::fsread::read(&s.path, MAX_SETTINGS_BYTES) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(s),
            Err(e) => return Err(err(format!("cannot read: {e}"))),
            Ok(b) => b,
        };
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| err(format!("invalid JSON: {e}")))?;
        let Value::Object(obj) = v else {
            return Err(err("not a JSON object".into()));
        };
        let key = |k: &str| obj.get(k).filter(|v| !v.is_null());
        if let Some(v) = key("env_passthrough") {
            s.env_passthrough = match v {
                Value::Array(items) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| err("env_passthrough must hold strings".into()))
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(err("env_passthrough must be a list of variable names".into())),
            };
        }
        if let Some(v) = key("worker_idle_s") {
            s.worker_idle = v
                .as_f64()
                .and_then(|x| (x >= 0.0).then_some(x))
                .and_then(|x| Duration::try_from_secs_f64(x).ok())
                .filter(|d| *d <= Duration::from_secs(86400 * 365))
                .ok_or_else(|| {
                    err(format!(
                        "worker_idle_s must be a number of seconds from 0 to a year, not {v}"
                    ))
                })?;
        }
        let count = |name: &str| -> Result<Option<usize>, SettingsError> {
            match key(name) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .filter(|n| (1..=1_000_000).contains(n))
                    .map(|n| Some(n as usize))
                    .ok_or_else(|| err(format!("{name} must be a whole number from 1 to 1000000, not {v}"))),
            }
        };
        if let Some(n) = count("workers_per_tool")? {
            s.workers_per_tool = n;
        }
        if let Some(n) = count("max_running_tasks")? {
            s.max_running_tasks = n;
        }
        s.use_tool_max_chars = count("use_tool_max_chars")?;
        s.legacy_env = match key("legacy_env") {
            None => crate::policy::env::EnvPolicy::Inherit,
            Some(Value::String(w)) if w == "inherit" => crate::policy::env::EnvPolicy::Inherit,
            Some(Value::String(w)) if w == "clean" => crate::policy::env::EnvPolicy::Clean,
            Some(v) => return Err(err(format!("legacy_env must be \"inherit\" or \"clean\", not {v}"))),
        };
        if let Some(v) = key("credential_defaults") {
            s.credential_defaults = crate::policy::grants::CredentialDefaults::parse(v).map_err(err)?;
        }
        s.raw = obj;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_file_is_every_default() {
        let d = tempfile::tempdir().unwrap();
        let s = Settings::load(d.path()).unwrap();
        assert_eq!(s, Settings::defaults(d.path()));
    }

    #[test]
    fn keys_are_typed_and_bad_values_are_errors_naming_the_key() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join(SETTINGS_FILE);
        std::fs::write(
            &f,
            r#"{"env_passthrough": ["A", "B_*"], "worker_idle_s": 2.5, "workers_per_tool": 2,
                "max_running_tasks": 3, "use_tool_max_chars": 100, "other": 1}"#,
        )
        .unwrap();
        let s = Settings::load(d.path()).unwrap();
        assert_eq!(s.env_passthrough, ["A", "B_*"]);
        assert_eq!(s.worker_idle, Duration::from_millis(2500));
        assert_eq!((s.workers_per_tool, s.max_running_tasks), (2, 3));
        assert_eq!(s.use_tool_max_chars, Some(100));
        for (bad, key) in [
            (r#"{"env_passthrough": "A"}"#, "env_passthrough"),
            (r#"{"env_passthrough": [1]}"#, "env_passthrough"),
            (r#"{"worker_idle_s": -1}"#, "worker_idle_s"),
            (r#"{"worker_idle_s": 1e300}"#, "worker_idle_s"),
            (r#"{"workers_per_tool": 0}"#, "workers_per_tool"),
            (r#"{"max_running_tasks": "4"}"#, "max_running_tasks"),
            (r#"{"use_tool_max_chars": -5}"#, "use_tool_max_chars"),
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
    fn a_fifo_is_refused_without_hanging() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join(SETTINGS_FILE);
        let c = &f;
        assert!(std::process::Command::new("mkfifo").arg(c).status().unwrap().success());
        let e = Settings::load(d.path()).unwrap_err();
        assert!(e.reason.contains("not a regular file"), "{e}");
    }
}
