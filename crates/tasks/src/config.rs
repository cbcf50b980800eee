//! Which task store to use: `<data dir>/animaworks-tool.json` `"tasks": {"backend": "postgres", "url": "postgres://…"}`.
//! The URL may come from `$ANIMAWORKS_TOOL_TASKS_URL` instead, so that a password need not sit in a file. With
//! no `"tasks"` (or `"backend": "files"`) tasks stay in the anima dir's files.
//!
//! The Postgres backend's timing may be tuned in the same object: `"lease_s"` (30), `"max_attempts"` (3),
//! `"drain_s"` (30), `"poll_s"` (2), `"watchdog"` (true).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable that gives the database URL.
pub const URL_ENV: &str = "ANIMAWORKS_TOOL_TASKS_URL";

#[derive(Debug, Clone, PartialEq)]
pub enum Backend {
    Files,
    Postgres { url: String },
}

#[derive(Debug, Clone)]
pub struct TasksConfig {
    pub backend: Backend,
    /// How long a worker holds a task without renewing; a task whose lease ended is rescued by any worker.
    pub lease: Duration,
    /// How many times an idempotent task is claimed at most (its first run included).
    pub max_attempts: u32,
    /// How long a worker stopped by SIGTERM lets its running tasks finish before it cancels and releases them.
    pub drain: Duration,
    /// How often an idle worker looks for tasks when no notification came (notifications can be missed).
    pub poll: Duration,
    /// Kill a worker that stops renewing its lease while its tools run (see `pg`). Off only where something else
    /// ends a paused worker's tools.
    pub watchdog: bool,
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            backend: Backend::Files,
            lease: Duration::from_secs(30),
            max_attempts: 3,
            drain: Duration::from_secs(30),
            poll: Duration::from_secs(2),
            watchdog: true,
        }
    }
}

/// The `"tasks"` section cannot be used; each names the settings file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The settings file itself cannot be used.
    #[error("cannot use the runner settings: {0}")]
    Settings(awt_core::settings::SettingsError),
    #[error("{}: \"tasks\" must be an object", path.display())]
    NotObject { path: PathBuf },
    #[error("{}: \"tasks\" chooses postgres but gives no \"url\", and ${} is not set", path.display(), URL_ENV)]
    NoUrl { path: PathBuf },
    #[error("{}: \"tasks\".\"backend\" is {backend:?}; it must be \"files\" or \"postgres\"", path.display())]
    UnknownBackend { path: PathBuf, backend: String },
    /// A duration key (`lease_s`, `drain_s`, `poll_s`) out of its range.
    #[error("{}: \"tasks\".\"{key}\" must be a number of seconds from {min} to 86400, not {value}", path.display())]
    Seconds {
        path: PathBuf,
        key: &'static str,
        min: f64,
        value: Value,
    },
    #[error("{}: \"tasks\".\"watchdog\" must be true or false, not {value}", path.display())]
    Watchdog { path: PathBuf, value: Value },
    #[error("{}: \"tasks\".\"max_attempts\" must be a whole number from 1 to 100, not {value}", path.display())]
    MaxAttempts { path: PathBuf, value: Value },
    /// The database URL does not parse; `from` says where it came from, `url` is shown with its password hidden.
    #[error("the task database URL {url:?} from {from} is not valid: {reason}")]
    BadUrl { from: String, url: String, reason: String },
}

/// `url` with any password in it replaced by `***`, for a message (`scheme://user:PASS@host`, `password=PASS`).
pub fn redact_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some(at) = rest.rfind('@') {
            let (info, host) = rest.split_at(at);
            if let Some((user, _)) = info.split_once(':') {
                return format!("{scheme}://{user}:***{host}");
            }
        }
        return url.to_owned();
    }
    url.split(' ')
        .map(|w| match w.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => w.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Checks that `url` parses as a database URL: a bad one is a clear error here, never a failure deep in a store.
fn check_url(url: &str, from: String) -> Result<(), ConfigError> {
    url.parse::<tokio_postgres::Config>()
        .map(drop)
        .map_err(|e| ConfigError::BadUrl {
            from,
            url: redact_url(url),
            reason: e.to_string(),
        })
}

fn seconds(
    obj: &serde_json::Map<String, Value>,
    key: &'static str,
    min: f64,
    path: &Path,
) -> Result<Option<Duration>, ConfigError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(s) if s.is_finite() && s >= min && s <= 86400.0 => Ok(Some(Duration::from_secs_f64(s))),
            _ => Err(ConfigError::Seconds {
                path: path.to_owned(),
                key,
                min,
                value: v.clone(),
            }),
        },
    }
}

/// The `"tasks"` section of the runner's settings (read once, by [`awt_core::settings`]); absent: the file store.
pub fn load(runner: &awt_core::call::Runner) -> Result<TasksConfig, ConfigError> {
    let all = runner.settings_file().map_err(|e| ConfigError::Settings(e.clone()))?;
    let path = all.path.clone();
    let mut cfg = TasksConfig::default();
    let tasks = match all.raw.get("tasks") {
        None | Some(Value::Null) => return Ok(cfg),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(ConfigError::NotObject { path }),
    };
    let url = match std::env::var(URL_ENV).ok().filter(|u| !u.is_empty()) {
        Some(u) => Some((u, format!("${URL_ENV}"))),
        None => tasks
            .get("url")
            .and_then(Value::as_str)
            .map(|u| (u.to_owned(), format!("\"tasks\".\"url\" in {}", path.display()))),
    };
    cfg.backend = match tasks.get("backend").and_then(Value::as_str) {
        None | Some("files") => Backend::Files,
        Some("postgres") => match url {
            Some((url, from)) => {
                check_url(&url, from)?;
                Backend::Postgres { url }
            }
            None => return Err(ConfigError::NoUrl { path }),
        },
        Some(other) => {
            return Err(ConfigError::UnknownBackend {
                path,
                backend: other.to_owned(),
            })
        }
    };
    if let Some(d) = seconds(tasks, "lease_s", 2.0, &path)? {
        cfg.lease = d;
    }
    if let Some(d) = seconds(tasks, "drain_s", 0.0, &path)? {
        cfg.drain = d;
    }
    if let Some(d) = seconds(tasks, "poll_s", 0.05, &path)? {
        cfg.poll = d;
    }
    match tasks.get("watchdog") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => cfg.watchdog = *b,
        Some(v) => return Err(ConfigError::Watchdog { path, value: v.clone() }),
    }
    match tasks.get("max_attempts") {
        None | Some(Value::Null) => {}
        Some(n) => match n.as_u64() {
            Some(n @ 1..=100) => cfg.max_attempts = n as u32,
            _ => return Err(ConfigError::MaxAttempts { path, value: n.clone() }),
        },
    }
    Ok(cfg)
}

#[cfg(test)]
mod url_tests {
    use super::*;

    #[test]
    fn a_password_never_shows_in_a_message() {
        assert_eq!(redact_url("postgres://u:hunter22@h:x/db"), "postgres://u:***@h:x/db");
        assert_eq!(
            redact_url("host=h password=hunter22 port=abc"),
            "host=h password=*** port=abc"
        );
        let e = check_url("postgres://u:hunter22@h:notaport/db", "$X".into())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("$X") && e.contains("notaport") && !e.contains("hunter22"),
            "{e}"
        );
    }
}
