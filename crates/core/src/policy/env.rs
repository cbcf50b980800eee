//! Builds a tool's environment (protocol §8) under one of two policies:
//! - [`EnvPolicy::Clean`], for tools on the new protocol: built from scratch, so a caller's secret never reaches
//!   a tool that did not declare it;
//! - [`EnvPolicy::Inherit`], for AnimaWorks modules: the caller's whole environment, as AnimaWorks gives it to
//!   the tools it runs inside the agent's process (a module reads `SLACK_BOT_TOKEN`, `PYTHONPATH`,
//!   `ANIMAWORKS_EMBED_URL`, … from it), so an existing module runs unchanged with no configuration.
//!
//! Either way the call's context variables are the runner's, and proxy and CA settings reach every tool.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use std::path::{Path, PathBuf};

use super::credentials::ResolvedCredential;

/// `<data dir>/animaworks-tool.json`, the runner's settings ([`crate::settings`]).
pub const RUNNER_CONFIG_FILE: &str = crate::settings::SETTINGS_FILE;

/// The caller's variables every tool gets (when the caller has them), besides every `LC_*`.
pub const BASE_VARS: &[&str] = &["PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME", "TERM"];

/// Proxy and CA settings: not secrets, and a tool that talks to the network fails without them, so every tool
/// gets them (in both spellings curl and Python read).
pub const NETWORK_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
];

/// Which of the caller's variables a tool gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EnvPolicy {
    /// [`BASE_VARS`], `LC_*`, [`NETWORK_VARS`] and the operator's `env_passthrough`: tools on the new protocol.
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

/// The environment part of `<data dir>/animaworks-tool.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvSettings {
    /// `"env_passthrough"`: extra caller variables for clean tools (names, or prefixes ending in `*`).
    pub passthrough: Vec<String>,
    /// `"legacy_env"`: `"inherit"` (the default) or `"clean"`, the policy of AnimaWorks modules.
    pub legacy_env: EnvPolicy,
}

impl Default for EnvSettings {
    fn default() -> Self {
        EnvSettings {
            passthrough: Vec::new(),
            legacy_env: EnvPolicy::Inherit,
        }
    }
}

impl EnvSettings {
    /// The policy of a tool: [`EnvPolicy::Inherit`] for an AnimaWorks module (`legacy`: a `.py` file that the
    /// shim runs by the AnimaWorks convention) unless the operator chose `clean`; [`EnvPolicy::Clean`] otherwise.
    pub fn policy(&self, legacy: bool) -> EnvPolicy {
        if legacy {
            self.legacy_env
        } else {
            EnvPolicy::Clean
        }
    }
}

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

/// Reads `"env_passthrough"` of `<data dir>/animaworks-tool.json` (see [`load_settings`]).
///
/// # Errors
/// As [`load_settings`].
pub fn load_passthrough(data_dir: &Path) -> Result<Vec<String>, EnvConfigError> {
    load_settings(data_dir).map(|s| s.passthrough)
}

/// Reads `"env_passthrough": ["NAME", "PREFIX_*", …]` and `"legacy_env": "inherit" | "clean"` from
/// `<data dir>/animaworks-tool.json`. An absent file or key means the default; other keys of the file are not
/// this function's concern and are ignored.
///
/// # Errors
/// When the file exists but is unreadable, not a JSON object, `env_passthrough` is not a list of strings, or
/// `legacy_env` is not one of its two words.
pub fn load_settings(data_dir: &Path) -> Result<EnvSettings, EnvConfigError> {
    let s = crate::settings::Settings::load(data_dir).map_err(|e| EnvConfigError {
        path: e.path,
        reason: e.reason,
    })?;
    Ok(EnvSettings::from_runner(&s))
}

impl EnvSettings {
    /// The environment keys of already read runner settings.
    pub fn from_runner(s: &crate::settings::Settings) -> EnvSettings {
        EnvSettings {
            passthrough: s.env_passthrough.clone(),
            legacy_env: s.legacy_env,
        }
    }
}

/// Does a `.py` file use tool-sdk-py? Read before its first `--schemas`, when the shim has not said yet which
/// convention the module follows (the first 64 KiB; an SDK tool imports the SDK near its top).
pub fn imports_sdk(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    let ok = std::fs::File::open(path).and_then(|f| f.take(64 * 1024).read_to_end(&mut head));
    ok.is_ok() && {
        let needle = b"animaworks_tool_sdk";
        head.windows(needle.len()).any(|w| w == needle)
    }
}

/// What a tool under `policy` gets from `caller`: the names of the variables (never their values, which may be
/// secrets), sorted; the context variables and declared credentials come on top.
pub fn visible_names<I>(caller: I, policy: EnvPolicy, passthrough: &[String]) -> Vec<String>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let ctx = CallContext {
        call_id: String::new(),
        data_dir: PathBuf::new(),
        anima_dir: None,
        anima_name: None,
        deadline_ms: 0,
    };
    let mut names: Vec<String> = build_env(caller, &ctx, &[], passthrough, policy)
        .into_iter()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| !CONTEXT_VARS.contains(&k.as_str()))
        .collect();
    names.sort();
    names
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

/// The variable naming the credential broker's descriptor in a tool (docs/credentials.md); only the runner
/// sets it, for one call.
pub const BROKER_FD_VAR: &str = "ANIMAWORKS_TOOL_BROKER_FD";

/// The runner's own variables, which never reach a tool under any policy or passthrough list: the task
/// database URL (it holds its password), the workers' key, the broker's descriptor (only the runner sets it for
/// a call), and any other `ANIMAWORKS_TOOL_*` name that holds a secret, a key or a URL.
pub fn is_runner_own(name: &str) -> bool {
    const OWN: &[&str] = &[
        "ANIMAWORKS_TOOL_TASKS_URL",
        "ANIMAWORKS_TOOL_WORKER_SECRET",
        BROKER_FD_VAR,
    ];
    OWN.contains(&name)
        || name.strip_prefix("ANIMAWORKS_TOOL_").is_some_and(|rest| {
            ["SECRET", "PASSWORD", "TOKEN", "URL", "KEY", "DSN"]
                .iter()
                .any(|w| rest.contains(w))
        })
}

/// The environment of one tool call; pure (reads nothing). Sorted by name.
///
/// What goes in, later entries replacing earlier ones of the same name:
/// 0. never a variable [`is_runner_own`] names (nor one whose name is not UTF-8);
/// 1. from `caller` (the runner's own environment): under [`EnvPolicy::Inherit`] every variable; under
///    [`EnvPolicy::Clean`] [`BASE_VARS`], every `LC_*` and [`NETWORK_VARS`];
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
    policy: EnvPolicy,
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut env = BTreeMap::new();
    for (k, v) in caller {
        if k.to_str().is_some_and(is_runner_own) {
            continue;
        }
        let base = k
            .to_str()
            .is_some_and(|s| BASE_VARS.contains(&s) || s.starts_with("LC_") || NETWORK_VARS.contains(&s));
        if policy == EnvPolicy::Inherit || base || passes(&k, passthrough) {
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
        let env = build_env(caller(), &ctx(true), &[secret], &["MYCO_*".into()], EnvPolicy::Clean);
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
        let env = build_env(caller(), &ctx(false), &[], &["ANIMAWORKS_*".into()], EnvPolicy::Clean);
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
    fn an_animaworks_module_inherits_everything_but_the_context() {
        let env = build_env(caller(), &ctx(false), &[], &[], EnvPolicy::Inherit);
        assert_eq!(get(&env, "AWS_SECRET_ACCESS_KEY"), Some("leak"), "as in AnimaWorks");
        assert_eq!(get(&env, "ANIMAWORKS_PYTHON"), Some("/opt/py"));
        assert_eq!(
            get(&env, "ANIMAWORKS_ANIMA_DIR"),
            None,
            "no anima: the forged one is gone"
        );
        assert_eq!(get(&env, "ANIMAWORKS_CALL_ID"), Some("c-1"));
        let names = visible_names(caller(), EnvPolicy::Clean, &[]);
        assert_eq!(names, ["HOME", "HTTPS_PROXY", "LC_ALL", "LC_TIME", "PATH", "TERM"]);
        assert_eq!(visible_names(caller(), EnvPolicy::Inherit, &[]).len(), 11);
    }

    #[test]
    fn settings_and_sdk_sniffing() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join(RUNNER_CONFIG_FILE);
        assert_eq!(load_settings(d.path()).unwrap().legacy_env, EnvPolicy::Inherit);
        std::fs::write(&f, r#"{"legacy_env": "clean"}"#).unwrap();
        let s = load_settings(d.path()).unwrap();
        assert_eq!((s.policy(true), s.policy(false)), (EnvPolicy::Clean, EnvPolicy::Clean));
        std::fs::write(&f, r#"{"legacy_env": "inherit"}"#).unwrap();
        let s = load_settings(d.path()).unwrap();
        assert_eq!(
            (s.policy(true), s.policy(false)),
            (EnvPolicy::Inherit, EnvPolicy::Clean)
        );
        for bad in [r#"{"legacy_env": "all"}"#, r#"{"legacy_env": true}"#] {
            std::fs::write(&f, bad).unwrap();
            assert!(load_settings(d.path()).is_err(), "{bad}");
        }
        let py = d.path().join("t.py");
        std::fs::write(&py, "from animaworks_tool_sdk import tool\n").unwrap();
        assert!(imports_sdk(&py));
        std::fs::write(&py, "def get_tool_schemas():\n    return []\n").unwrap();
        assert!(!imports_sdk(&py));
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
