//! Resolves the credentials a tool declares (`CredentialDecl`) through the AnimaWorks chain, so that secrets
//! users already keep in `config.json`, the vault or `shared/credentials.json` keep working with no edit.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use awt_protocol::CredentialDecl;
use serde_json::{Map, Value};

use super::vault::{Vault, VaultError};

/// `<data dir>/config.json`.
pub const CONFIG_FILE: &str = "config.json";
/// `<data dir>/shared/credentials.json`, relative to the data directory.
pub const SHARED_CREDENTIALS_FILE: &str = "shared/credentials.json";

/// Where a resolved secret was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// `config.json` at `credentials.<name>.<key path>`, written in clear.
    Config {
        /// e.g. `credentials.github.api_key` or `credentials.github.keys.app_id`.
        key_path: String,
    },
    /// `config.json` at `key_path`, a `{"$vault": KEY}` reference opened from `vault.json` `shared.KEY`.
    ConfigVault {
        /// The config key holding the reference.
        key_path: String,
        /// The vault key it names.
        vault_key: String,
    },
    /// `vault.json` `shared.<key>`.
    Vault {
        /// `<ENV>` or `<ENV>__<anima>`.
        key: String,
    },
    /// `shared/credentials.json` `<key>`.
    SharedCredentials {
        /// `<ENV>` or `<ENV>__<anima>`.
        key: String,
    },
    /// The caller's environment variable.
    Environment {
        /// `<ENV>` or `<ENV>__<anima>`.
        var: String,
    },
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialSource::Config { key_path } => write!(f, "config.json {key_path}"),
            CredentialSource::ConfigVault { key_path, vault_key } => {
                write!(f, "config.json {key_path} → vault.json shared.{vault_key}")
            }
            CredentialSource::Vault { key } => write!(f, "vault.json shared.{key}"),
            CredentialSource::SharedCredentials { key } => {
                write!(f, "shared/credentials.json {key}")
            }
            CredentialSource::Environment { var } => write!(f, "environment variable {var}"),
        }
    }
}

/// One resolved secret, for the environment of the tool that declared it. `Debug` hides the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ResolvedCredential {
    /// The declaration's `name` (entry in config.json `credentials`).
    pub name: String,
    /// The variable the tool reads it from (the declaration's `env`, never the per-anima spelling).
    pub env: String,
    /// The secret.
    pub value: String,
    /// Where it was found.
    pub source: CredentialSource,
}

impl fmt::Debug for ResolvedCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolvedCredential")
            .field("name", &self.name)
            .field("env", &self.env)
            .field("value", &"***")
            .field("source", &self.source)
            .finish()
    }
}

/// Why a credential could not be resolved. Messages never contain a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// A required credential is set nowhere; the message lists every place it can be set.
    #[error("{0}")]
    Missing(Box<MissingCredential>),
    /// A file of the chain exists but cannot be read or parsed; a secret that might be in it is not skipped
    /// over to a later source.
    #[error("credential '{name}': cannot use {}: {reason}", path.display())]
    Source {
        /// The declaration's name.
        name: String,
        /// The file at fault.
        path: PathBuf,
        /// What is wrong (never its contents).
        reason: String,
    },
    /// The lookup key is another anima's per-anima key (`<ENV>__<other anima>`): never resolved for this call.
    #[error(
        "credential '{name}': {key} is the per-anima key of the anima '{anima}', and this call is not that anima's"
    )]
    Foreign {
        /// The declaration's name.
        name: String,
        /// The key refused.
        key: String,
        /// The anima it belongs to.
        anima: String,
    },
}

/// The places a missing credential can be set (the details of [`CredentialError::Missing`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "credential '{name}' is not set; set it in one of: {} at {config_key}; {} at shared.{keys}; {} at {keys}; or \
     the environment variable {keys}",
    config_path.display(),
    vault_path.display(),
    shared_path.display()
)]
pub struct MissingCredential {
    /// The declaration's name.
    pub name: String,
    /// The declaration's env.
    pub env: String,
    /// `<data dir>/config.json`.
    pub config_path: PathBuf,
    /// `credentials.<name>.api_key` or `credentials.<name>.keys.<key>`.
    pub config_key: String,
    /// `<data dir>/vault.json`.
    pub vault_path: PathBuf,
    /// `<data dir>/shared/credentials.json`.
    pub shared_path: PathBuf,
    /// The keys tried in vault.json `shared`, shared/credentials.json and the environment: `<ENV>`, or
    /// `<ENV>__<anima> or <ENV>` when per-anima.
    pub keys: String,
}

/// Why a JSON file of the chain cannot be used (the reason of [`CredentialError::Source`]). Shared, since the
/// outcome of a read is kept for every lookup of the call.
#[derive(Debug, Clone, thiserror::Error)]
enum FileProblem {
    #[error("cannot read: {0}")]
    Unreadable(std::sync::Arc<std::io::Error>),
    #[error("not a JSON object")]
    NotObject,
    // serde_json's message names line and column, and quotes no more than a bad token.
    #[error("invalid JSON: {0}")]
    Invalid(std::sync::Arc<serde_json::Error>),
}

fn read_json_object(path: &Path) -> Result<Option<Map<String, Value>>, FileProblem> {
    let Some(text) = crate::fsread::read_to_string_if_present(path, crate::fsread::SMALL)
        .map_err(|e| FileProblem::Unreadable(e.into()))?
    else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        Ok(_) => Err(FileProblem::NotObject),
        Err(e) => Err(FileProblem::Invalid(e.into())),
    }
}

/// Resolves credentials for one call. Files are read at most once, and only when a lookup reaches them.
#[derive(Debug)]
pub struct Resolver {
    data_dir: PathBuf,
    anima_name: Option<String>,
    /// The folders of the deployment's anima dirs ([`crate::animas`]): a key naming one of their animas is not
    /// this call's.
    animas: Vec<PathBuf>,
    caller_env: HashMap<String, String>,
    config: OnceCell<Result<Option<Map<String, Value>>, FileProblem>>,
    shared: OnceCell<Result<Option<Map<String, Value>>, FileProblem>>,
    vault: OnceCell<Result<Vault, VaultError>>,
}

/// A value counts only when it is a non-empty string (AnimaWorks tests values with `if value:`).
fn non_empty(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

impl Resolver {
    /// A resolver for the anima `anima_name` (when there is one) under `data_dir`; `caller_env` is the
    /// environment the runner was started with (e.g. `std::env::vars().collect()`).
    pub fn new(data_dir: &Path, anima_name: Option<&str>, caller_env: HashMap<String, String>) -> Self {
        Resolver {
            data_dir: data_dir.to_path_buf(),
            anima_name: anima_name.filter(|s| !s.is_empty()).map(str::to_string),
            animas: vec![data_dir.join("animas")],
            caller_env,
            config: OnceCell::new(),
            shared: OnceCell::new(),
            vault: OnceCell::new(),
        }
    }

    /// The same resolver, with the deployment's folders of anima dirs ([`crate::animas::folders`]) for the
    /// per-anima key check (else `<data dir>/animas` alone).
    pub fn in_animas(mut self, folders: Vec<PathBuf>) -> Self {
        self.animas = folders;
        self
    }

    fn config(&self, name: &str) -> Result<Option<&Map<String, Value>>, CredentialError> {
        let path = self.data_dir.join(CONFIG_FILE);
        match self.config.get_or_init(|| read_json_object(&path)) {
            Ok(m) => Ok(m.as_ref()),
            Err(reason) => Err(CredentialError::Source {
                name: name.into(),
                path,
                reason: reason.to_string(),
            }),
        }
    }

    fn shared(&self, name: &str) -> Result<Option<&Map<String, Value>>, CredentialError> {
        let path = self.data_dir.join(SHARED_CREDENTIALS_FILE);
        match self.shared.get_or_init(|| read_json_object(&path)) {
            Ok(m) => Ok(m.as_ref()),
            Err(reason) => Err(CredentialError::Source {
                name: name.into(),
                path,
                reason: reason.to_string(),
            }),
        }
    }

    fn vault_get(&self, name: &str, key: &str) -> Result<Option<String>, CredentialError> {
        Ok(self.vault_get_raw(name, key)?.filter(|s| !s.is_empty()))
    }

    /// `vault.json` `shared.<key>`, opened; an empty value is returned as it is.
    fn vault_get_raw(&self, name: &str, key: &str) -> Result<Option<String>, CredentialError> {
        let vault = self.vault.get_or_init(|| Vault::load(&self.data_dir));
        let src = |e: &VaultError| CredentialError::Source {
            name: name.into(),
            path: e.path.clone(),
            reason: e.reason.clone(),
        };
        match vault {
            Ok(v) => v.get("shared", key).map_err(|e| src(&e)),
            Err(e) => Err(src(e)),
        }
    }

    /// The lookup keys of steps 2–5 of [`Resolver::resolve`]: per-anima first when asked for.
    fn env_keys(&self, decl: &CredentialDecl) -> Vec<String> {
        let mut keys = Vec::new();
        // AnimaWorks' `get_credential` without `env_var`: config.json only.
        if decl.env.is_empty() {
            return keys;
        }
        if decl.per_anima {
            if let Some(anima) = &self.anima_name {
                keys.push(format!("{}__{}", decl.env, anima));
            }
        }
        keys.push(decl.env.clone());
        keys
    }

    /// Resolves one declaration. `Ok(None)` means: not set anywhere, and not required.
    ///
    /// Precedence (the first non-empty string wins):
    /// 1. `<data dir>/config.json` → `credentials.<name>.api_key`, or `credentials.<name>.keys.<key>` when
    ///    `key` is not `api_key`. The value may be `{"$vault": "K"}`, read from `vault.json` → `shared.K`;
    /// 2. when `per_anima` and the call has an anima: `<ENV>__<anima>` in `vault.json` `shared`, then in
    ///    `<data dir>/shared/credentials.json`, then in the caller's environment — every per-anima source
    ///    before any shared key, so that an anima's own key is never shadowed by the shared one;
    /// 3. `vault.json` → `shared.<ENV>` (sealed boxes opened with `vault.key`; a value that is not a sealed box
    ///    is used as written);
    /// 4. `<data dir>/shared/credentials.json` → `<ENV>` (a flat object);
    /// 5. the caller's environment variable `<ENV>`;
    /// 6. otherwise, when `required`: [`CredentialError::Missing`], naming every place above.
    ///
    /// # Errors
    /// [`CredentialError::Source`] when a file the lookup reaches exists but cannot be used (unreadable,
    /// invalid JSON, a vault entry with no usable `vault.key`): a later source is not tried then, so a broken
    /// file never silently swaps one secret for another. [`CredentialError::Missing`] as in step 6.
    pub fn resolve(&self, decl: &CredentialDecl) -> Result<Option<ResolvedCredential>, CredentialError> {
        let found = |value: String, source| {
            Ok(Some(ResolvedCredential {
                name: decl.name.clone(),
                env: decl.env.clone(),
                value,
                source,
            }))
        };
        // 1. config.json
        let key_path = if decl.key == "api_key" {
            format!("credentials.{}.api_key", decl.name)
        } else {
            format!("credentials.{}.keys.{}", decl.name, decl.key)
        };
        if let Some(cfg) = self.config(&decl.name)? {
            let entry = cfg.get("credentials").and_then(|c| c.get(&decl.name));
            let v = if decl.key == "api_key" {
                entry.and_then(|e| e.get("api_key"))
            } else {
                entry.and_then(|e| e.get("keys")).and_then(|k| k.get(&decl.key))
            };
            if let Some(s) = non_empty(v) {
                return found(s.to_string(), CredentialSource::Config { key_path });
            }
            if let Some(reference) = v.and_then(|v| v.get("$vault")) {
                // A reference that names nothing is a broken config.json, as in AnimaWorks (whose config load
                // fails on it): the call stops here rather than take a secret from a later source.
                let broken = |reason: String| CredentialError::Source {
                    name: decl.name.clone(),
                    path: self.data_dir.join("config.json"),
                    reason: format!("{key_path}: {reason}"),
                };
                let Some(vk) = non_empty(Some(reference)) else {
                    return Err(broken("a $vault reference must hold a non-empty string key".into()));
                };
                match self.vault_get_raw(&decl.name, vk)? {
                    None => {
                        return Err(broken(format!(
                            "the $vault reference names {vk:?}, which vault.json's shared section does not hold"
                        )))
                    }
                    Some(s) if !s.is_empty() => {
                        return found(
                            s,
                            CredentialSource::ConfigVault {
                                key_path,
                                vault_key: vk.to_string(),
                            },
                        )
                    }
                    // An empty value: as an empty api_key, the next sources are tried.
                    Some(_) => {}
                }
            }
        }
        let keys = self.env_keys(decl);
        for key in &keys {
            if let Some(anima) = super::grants::foreign_anima_key(&self.animas, self.anima_name.as_deref(), key) {
                return Err(CredentialError::Foreign {
                    name: decl.name.clone(),
                    key: key.clone(),
                    anima,
                });
            }
        }
        let (per_anima, shared_only) = keys.split_at(keys.len().saturating_sub(1));
        // 2. per-anima keys, then 3–5. the shared key, each through vault → shared creds → environment.
        for group in [per_anima, shared_only] {
            for key in group {
                if let Some(s) = self.vault_get(&decl.name, key)? {
                    return found(s, CredentialSource::Vault { key: key.clone() });
                }
            }
            for key in group {
                if let Some(s) = non_empty(self.shared(&decl.name)?.and_then(|m| m.get(key))) {
                    return found(s.to_string(), CredentialSource::SharedCredentials { key: key.clone() });
                }
            }
            // The runner's own variables are never a credential's fallback.
            for key in group.iter().filter(|k| !k.starts_with(crate::env_vars::PREFIX)) {
                if let Some(s) = self.caller_env.get(key).filter(|s| !s.is_empty()) {
                    return found(s.clone(), CredentialSource::Environment { var: key.clone() });
                }
            }
        }
        if !decl.required {
            return Ok(None);
        }
        Err(CredentialError::Missing(Box::new(MissingCredential {
            name: decl.name.clone(),
            env: decl.env.clone(),
            config_path: self.data_dir.join(CONFIG_FILE),
            config_key: key_path,
            vault_path: self.data_dir.join(super::vault::VAULT_FILE),
            shared_path: self.data_dir.join(SHARED_CREDENTIALS_FILE),
            keys: keys.join(" or "),
        })))
    }

    /// Resolves one declaration from `config.json` alone (step 1 of [`Resolver::resolve`]), never under its
    /// `env` as a lookup key: for a key the grants do not cover. `Ok(None)`: not there.
    ///
    /// # Errors
    /// As [`Resolver::resolve`], for config.json and its `$vault` reference.
    pub fn resolve_config_only(&self, decl: &CredentialDecl) -> Result<Option<ResolvedCredential>, CredentialError> {
        let only = CredentialDecl {
            env: String::new(),
            per_anima: false,
            required: false,
            ..decl.clone()
        };
        Ok(self.resolve(&only)?.map(|r| ResolvedCredential {
            env: decl.env.clone(),
            ..r
        }))
    }

    /// Resolves every declaration (a tool's and its action's), in order; a declaration repeated under the
    /// same `env` is resolved once. Optional credentials that are not set are left out.
    ///
    /// # Errors
    /// The first error of [`Resolver::resolve`].
    pub fn resolve_all<'a, I>(&self, decls: I) -> Result<Vec<ResolvedCredential>, CredentialError>
    where
        I: IntoIterator<Item = &'a CredentialDecl>,
    {
        let mut out: Vec<ResolvedCredential> = Vec::new();
        for decl in decls {
            if out.iter().any(|r| r.env == decl.env) {
                continue;
            }
            if let Some(r) = self.resolve(decl)? {
                out.push(r);
            }
        }
        Ok(out)
    }
}

/// Convenience: [`Resolver::new`] then [`Resolver::resolve_all`].
///
/// # Errors
/// As [`Resolver::resolve`].
pub fn resolve_all<'a, I>(
    data_dir: &Path,
    anima_name: Option<&str>,
    caller_env: HashMap<String, String>,
    decls: I,
) -> Result<Vec<ResolvedCredential>, CredentialError>
where
    I: IntoIterator<Item = &'a CredentialDecl>,
{
    Resolver::new(data_dir, anima_name, caller_env).resolve_all(decls)
}
