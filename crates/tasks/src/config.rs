//! Which task store to use: `<data dir>/animaworks-tool.json` `"tasks": {"backend": "postgres", "url": "postgres://…"}`.
//! The URL may come from `$ANIMAWORKS_TOOL_TASKS_URL` instead, so that a password need not sit in a file. With
//! no `"tasks"` (or `"backend": "files"`) tasks stay in the anima dir's files.
//!
//! The Postgres backend's timing may be tuned in the same object: `"lease_s"` (30), `"max_attempts"` (3),
//! `"drain_s"` (30), `"poll_s"` (2), `"watchdog"` (true).

use awt_core::settings::tasks::BackendWord;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable that gives the database URL.
pub const URL_ENV: &str = awt_core::env_vars::TASKS_URL.name;

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
    #[error("{}: \"tasks\" chooses postgres but gives no \"url\", and ${} is not set", path.display(), URL_ENV)]
    NoUrl { path: PathBuf },
    /// A duration key (`lease_s`, `drain_s`, `poll_s`) out of its range.
    #[error("{}: \"tasks\".\"{key}\" must be a number of seconds from {min} to 86400, not {value}", path.display())]
    Seconds {
        path: PathBuf,
        key: &'static str,
        min: f64,
        value: Value,
    },
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

fn seconds(v: Option<f64>, key: &'static str, min: f64, path: &Path) -> Result<Option<Duration>, ConfigError> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s >= min && s <= 86400.0 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(ConfigError::Seconds {
            path: path.to_owned(),
            key,
            min,
            value: serde_json::json!(s),
        }),
    }
}

/// The `"tasks"` section of the runner's settings (read once, by [`awt_core::settings`]); absent: the file store.
pub fn load(runner: &awt_core::call::Runner) -> Result<TasksConfig, ConfigError> {
    let all = runner.settings_file().map_err(|e| ConfigError::Settings(e.clone()))?;
    let path = all.path.clone();
    let mut cfg = TasksConfig::default();
    let Some(tasks) = &all.tasks else { return Ok(cfg) };
    let url = match awt_core::env_vars::TASKS_URL.get() {
        Some(u) => Some((u, format!("${URL_ENV}"))),
        None => tasks
            .url
            .clone()
            .map(|u| (u, format!("\"tasks\".\"url\" in {}", path.display()))),
    };
    cfg.backend = match tasks.backend.unwrap_or_default() {
        BackendWord::Files => Backend::Files,
        BackendWord::Postgres => match url {
            Some((url, from)) => {
                check_url(&url, from)?;
                Backend::Postgres { url }
            }
            None => return Err(ConfigError::NoUrl { path }),
        },
    };
    if let Some(d) = seconds(tasks.lease_s, "lease_s", 2.0, &path)? {
        cfg.lease = d;
    }
    if let Some(d) = seconds(tasks.drain_s, "drain_s", 0.0, &path)? {
        cfg.drain = d;
    }
    if let Some(d) = seconds(tasks.poll_s, "poll_s", 0.05, &path)? {
        cfg.poll = d;
    }
    if let Some(b) = tasks.watchdog {
        cfg.watchdog = b;
    }
    match tasks.max_attempts {
        None => {}
        Some(n @ 1..=100) => cfg.max_attempts = n as u32,
        Some(n) => return Err(ConfigError::MaxAttempts { path, value: n.into() }),
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
