//! Builds a tool's environment from scratch (protocol §8): a tool never sees the caller's whole environment,
//! so one tool's secret never reaches another tool.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::credentials::ResolvedCredential;

/// `<data dir>/animaworks-tool.json`, the runner's operator settings.
pub const RUNNER_CONFIG_FILE: &str = "animaworks-tool.json";

/// The caller's variables every tool gets (when the caller has them), besides every `LC_*`.
pub const BASE_VARS: &[&str] = &["PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME", "TERM"];

/// The context of one call, given to the tool as `ANIMAWORKS_*` variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    /// `ANIMAWORKS_CALL_ID`.
    pub call_id: String,
    /// `ANIMAWORKS_DATA_DIR`.
    pub data_dir: PathBuf,
    /// `ANIMAWORKS_ANIMA_DIR`, when the call has an anima.
    pub anima_dir: Option<PathBuf>,
    /// `ANIMAWORKS_ANIMA_NAME`, when the call has an anima.
    pub anima_name: Option<String>,
    /// `ANIMAWORKS_DEADLINE_MS`, milliseconds since the Unix epoch.
    pub deadline_ms: u64,
}

/// `animaworks-tool.json` exists but its `env_passthrough` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {reason}", path.display())]
pub struct EnvConfigError {
    /// The file at fault.
    pub path: PathBuf,
    /// What is wrong.
    pub reason: String,
}

/// Reads `"env_passthrough": ["NAME", "PREFIX_*", …]` from `<data dir>/animaworks-tool.json`. An absent file
/// or key means none; other keys of the file are not this function's concern and are ignored.
///
/// # Errors
/// When the file exists but is unreadable, not a JSON object, or `env_passthrough` is not a list of strings.
pub fn load_passthrough(data_dir: &Path) -> Result<Vec<String>, EnvConfigError> {
    let path = data_dir.join(RUNNER_CONFIG_FILE);
    let err = |reason: String| EnvConfigError {
        path: path.clone(),
        reason,
    };
    let Some(text) = crate::fsread::read_to_string_if_present(&path, crate::fsread::SMALL)
        .map_err(|e| err(format!("cannot read: {e}")))?
    else {
        return Ok(Vec::new());
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| err(format!("invalid JSON: {e}")))?;
    let obj = v.as_object().ok_or_else(|| err("not a JSON object".into()))?;
    match obj.get("env_passthrough") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| err("env_passthrough must hold strings".into()))
            })
            .collect(),
        Some(_) => Err(err("env_passthrough must be a list of variable names".into())),
    }
}

/// Does `name` match a passthrough entry: the exact name, or a prefix when the entry ends in `*`?
fn passes(name: &OsStr, entries: &[String]) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    entries.iter().any(|e| match e.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => e == name,
    })
}

/// The context variables a tool can get (protocol §8). A caller's own value of one of these never reaches a
/// tool, even through `env_passthrough`: only the call's context sets them.
pub const CONTEXT_VARS: &[&str] = &[
    "ANIMAWORKS_TOOL_PROTOCOL",
    "ANIMAWORKS_CALL_ID",
    "ANIMAWORKS_DATA_DIR",
    "ANIMAWORKS_ANIMA_DIR",
    "ANIMAWORKS_ANIMA_NAME",
    "ANIMAWORKS_DEADLINE_MS",
];

impl CallContext {
    /// The context as variables: `ANIMAWORKS_TOOL_PROTOCOL=1`, `ANIMAWORKS_CALL_ID`, `ANIMAWORKS_DATA_DIR`,
    /// `ANIMAWORKS_ANIMA_DIR` and `ANIMAWORKS_ANIMA_NAME` (only when the call has an anima),
    /// `ANIMAWORKS_DEADLINE_MS`.
    pub fn vars(&self) -> Vec<(OsString, OsString)> {
        let mut v: Vec<(OsString, OsString)> = vec![
            ("ANIMAWORKS_TOOL_PROTOCOL".into(), "1".into()),
            ("ANIMAWORKS_CALL_ID".into(), self.call_id.clone().into()),
            ("ANIMAWORKS_DATA_DIR".into(), self.data_dir.clone().into_os_string()),
        ];
        if let Some(d) = &self.anima_dir {
            v.push(("ANIMAWORKS_ANIMA_DIR".into(), d.clone().into_os_string()));
        }
        if let Some(n) = &self.anima_name {
            v.push(("ANIMAWORKS_ANIMA_NAME".into(), n.clone().into()));
        }
        v.push(("ANIMAWORKS_DEADLINE_MS".into(), self.deadline_ms.to_string().into()));
        v
    }
}

/// The environment of one tool call, built from scratch; pure (reads nothing). Sorted by name.
///
/// What goes in, later entries replacing earlier ones of the same name:
/// 1. from `caller` (the runner's own environment): [`BASE_VARS`] and every `LC_*`;
/// 2. from `caller`: the variables named in `passthrough` (exact names; an entry ending in `*` is a prefix);
/// 3. the resolved `secrets`, each under the `env` name its tool declared;
/// 4. the context, [`CallContext::vars`]. Before it goes in, every [`CONTEXT_VARS`] name that came
///    from the caller is removed, so a tool called without an anima never sees a stale or forged
///    `ANIMAWORKS_ANIMA_DIR`, whatever the passthrough list says.
///
/// Nothing else: the result is meant for `Command::env_clear().envs(..)`.
pub fn build_env<I>(
    caller: I,
    ctx: &CallContext,
    secrets: &[ResolvedCredential],
    passthrough: &[String],
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut env = BTreeMap::new();
    for (k, v) in caller {
        let base = k
            .to_str()
            .is_some_and(|s| BASE_VARS.contains(&s) || s.starts_with("LC_"));
        if base || passes(&k, passthrough) {
            env.insert(k, v);
        }
    }
    for s in secrets {
        env.insert(OsString::from(&s.env), OsString::from(&s.value));
    }
    for k in CONTEXT_VARS {
        env.remove(OsStr::new(k));
    }
    env.extend(ctx.vars());
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::credentials::CredentialSource;

    fn caller() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C.UTF-8"),
            ("LC_TIME", "de_DE"),
            ("TERM", "xterm"),
            ("AWS_SECRET_ACCESS_KEY", "leak"),
            ("GITHUB_TOKEN", "caller-token"),
            ("HTTPS_PROXY", "http://proxy"),
            ("MYCO_A", "a"),
            ("MYCO_B", "b"),
            ("ANIMAWORKS_ANIMA_DIR", "/forged"),
            ("ANIMAWORKS_CALL_ID", "forged"),
            ("ANIMAWORKS_PYTHON", "/opt/py"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    fn ctx(anima: bool) -> CallContext {
        CallContext {
            call_id: "c-1".into(),
            data_dir: "/data".into(),
            anima_dir: anima.then(|| "/data/animas/alice".into()),
            anima_name: anima.then(|| "alice".into()),
            deadline_ms: 42,
        }
    }

    fn get<'a>(env: &'a [(OsString, OsString)], k: &str) -> Option<&'a str> {
        env.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.to_str())
    }

    #[test]
    fn only_the_listed_variables() {
        let secret = ResolvedCredential {
            name: "gh".into(),
            env: "GITHUB_TOKEN".into(),
            value: "resolved".into(),
            source: CredentialSource::Environment {
                var: "GITHUB_TOKEN".into(),
            },
        };
        let env = build_env(
            caller(),
            &ctx(true),
            &[secret],
            &["HTTPS_PROXY".into(), "MYCO_*".into()],
        );
        let keys: Vec<_> = env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
        assert_eq!(
            keys,
            vec![
                "ANIMAWORKS_ANIMA_DIR",
                "ANIMAWORKS_ANIMA_NAME",
                "ANIMAWORKS_CALL_ID",
                "ANIMAWORKS_DATA_DIR",
                "ANIMAWORKS_DEADLINE_MS",
                "ANIMAWORKS_TOOL_PROTOCOL",
                "GITHUB_TOKEN",
                "HOME",
                "HTTPS_PROXY",
                "LC_ALL",
                "LC_TIME",
                "MYCO_A",
                "MYCO_B",
                "PATH",
                "TERM",
            ]
        );
        assert_eq!(get(&env, "GITHUB_TOKEN"), Some("resolved"));
        assert_eq!(get(&env, "ANIMAWORKS_ANIMA_DIR"), Some("/data/animas/alice"));
        assert_eq!(get(&env, "ANIMAWORKS_CALL_ID"), Some("c-1"));
        assert_eq!(get(&env, "ANIMAWORKS_DEADLINE_MS"), Some("42"));
    }

    #[test]
    fn no_anima_means_no_anima_vars_even_forged() {
        let env = build_env(caller(), &ctx(false), &[], &["ANIMAWORKS_*".into()]);
        assert_eq!(get(&env, "ANIMAWORKS_ANIMA_DIR"), None);
        assert_eq!(get(&env, "ANIMAWORKS_CALL_ID"), Some("c-1"));
        assert_eq!(
            get(&env, "ANIMAWORKS_PYTHON"),
            Some("/opt/py"),
            "explicit passthrough is honoured"
        );
        assert_eq!(get(&env, "GITHUB_TOKEN"), None, "undeclared secrets stay out");
    }

    #[test]
    fn passthrough_file() {
        let d = tempfile::tempdir().unwrap();
        assert!(load_passthrough(d.path()).unwrap().is_empty());
        let f = d.path().join(RUNNER_CONFIG_FILE);
        std::fs::write(&f, r#"{"other": 1}"#).unwrap();
        assert!(load_passthrough(d.path()).unwrap().is_empty());
        std::fs::write(&f, r#"{"env_passthrough": ["A", "B_*"]}"#).unwrap();
        assert_eq!(load_passthrough(d.path()).unwrap(), vec!["A", "B_*"]);
        for bad in [r#"{"env_passthrough": "A"}"#, r#"{"env_passthrough": [1]}"#, "[", "[]"] {
            std::fs::write(&f, bad).unwrap();
            assert!(load_passthrough(d.path()).is_err(), "{bad}");
        }
    }
}
