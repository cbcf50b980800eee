//! Which credentials a tool may receive: the anima's `permissions.json` `"credentials"` (a runner extension
//! AnimaWorks ignores) and the operator's per-tier defaults (`animaworks-tool.json` `"credential_defaults"`).
//! A tool's own declaration is a request, never a grant (docs/credentials.md).

use std::path::{Path, PathBuf};

use super::permissions::{LoadedPermissions, Permissions, PermissionsError};
use crate::tier::Tier;

pub use crate::settings::{CredentialDefault, CredentialDefaults};

impl CredentialDefaults {
    pub fn for_tier(&self, tier: Tier) -> CredentialDefault {
        match tier {
            Tier::Core => self.core,
            Tier::Common => self.common,
            Tier::Personal => self.personal,
        }
    }
}

/// The grants of one tool of one call.
#[derive(Debug, Clone)]
pub struct CredentialGrants {
    tool: String,
    tier: Tier,
    default: CredentialDefault,
    /// The `"credentials"` entry that applies (the tier-qualified key first), when there is one.
    names: Option<Vec<String>>,
    path: PathBuf,
}

impl CredentialGrants {
    /// The grants of `tool` of `tier` under `perms`. Permissions that cannot be used grant nothing beyond a
    /// `declared` tier (the gate refuses such a call anyway).
    pub fn of(
        perms: &Result<LoadedPermissions, PermissionsError>,
        tool: &str,
        tier: Tier,
        defaults: &CredentialDefaults,
    ) -> CredentialGrants {
        let (names, path) = match perms {
            Ok(p) => (entry(&p.permissions, tool, tier).cloned(), p.path().to_path_buf()),
            Err(e) => (None, e.path.clone()),
        };
        CredentialGrants {
            tool: tool.to_owned(),
            tier,
            default: defaults.for_tier(tier),
            names,
            path,
        }
    }

    /// May the tool receive credential `name`?
    pub fn allows(&self, name: &str) -> bool {
        match &self.names {
            Some(n) if n.iter().any(|g| g == name || g == "*") => true,
            _ => self.default == CredentialDefault::Declared,
        }
    }

    /// May the tool have credential `name` looked up under the key `env` (vault.json `shared`,
    /// shared/credentials.json, the environment)? `env` is the tool's choice, so granting `name` must not grant
    /// every key of those stores: a granted name covers `<NAME>` and `<NAME>_…` (upper case, as AnimaWorks'
    /// `slack` → `SLACK_BOT_TOKEN`); any other key must be granted by itself (or `"*"`).
    pub fn allows_env(&self, name: &str, env: &str) -> bool {
        if env.is_empty() || self.default == CredentialDefault::Declared {
            return true;
        }
        if self
            .names
            .as_ref()
            .is_some_and(|n| n.iter().any(|g| g == "*" || g == env))
        {
            return true;
        }
        let upper = name.to_ascii_uppercase();
        env == upper || env.strip_prefix(&upper).is_some_and(|rest| rest.starts_with('_'))
    }

    /// The permissions file to edit.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The exact line that grants `name`, as a refusal names it.
    pub fn grant_line(&self, name: &str) -> String {
        format!("\"credentials\": {{\"{}\": [\"{name}\"]}}", self.tool)
    }

    /// The refusal of a granted `name` looked up under a key `env` it does not cover.
    pub fn env_refusal(&self, name: &str, env: &str) -> String {
        format!(
            "credential '{name}' is granted to the {} tool '{}', but not under the key {env} (a grant of '{name}' \
             covers {upper} and {upper}_…): add {} to {}",
            self.tier,
            self.tool,
            self.grant_line(env),
            self.path.display(),
            upper = name.to_ascii_uppercase()
        )
    }

    /// A refusal's sentence, naming the tool, its tier, the credential and the line to add.
    pub fn refusal(&self, name: &str) -> String {
        format!(
            "credential '{name}' is not granted to the {} tool '{}': add {} to {}",
            self.tier,
            self.tool,
            self.grant_line(name),
            self.path.display()
        )
    }
}

/// The `"credentials"` entry of `tool`: `"<tier>:<tool>"` first, then `"<tool>"`.
fn entry<'p>(p: &'p Permissions, tool: &str, tier: Tier) -> Option<&'p Vec<String>> {
    p.credentials
        .get(&format!("{tier}:{tool}"))
        .or_else(|| p.credentials.get(tool))
}

/// The grants of `perms` that name `tool` without a tier: a `"credentials"` key, a gate key `<tool>_…` in
/// `external_tools.allow`, the tool in `sandbox.net`. A personal tool that shadows a common one of the same
/// name must not inherit these (they were written for the common one).
pub fn untiered_grants(p: &Permissions, tool: &str) -> Vec<String> {
    let mut out = Vec::new();
    if p.credentials.contains_key(tool) {
        out.push(format!("\"credentials\": {{\"{tool}\": …}}"));
    }
    let prefix = format!("{tool}_");
    out.extend(
        p.external_tools
            .allow
            .iter()
            .filter(|k| k.starts_with(&prefix))
            .map(|k| format!("external_tools.allow \"{k}\"")),
    );
    if let Some(crate::policy::sandbox_grants::NetGrant::Tools(t)) = &p.sandbox.net {
        if t.iter().any(|x| x == tool) {
            out.push(format!("sandbox.net \"{tool}\""));
        }
    }
    out
}

/// Is `key` (a lookup key of the chain, e.g. `SVC_TOKEN__bob`) another anima's per-anima key? It is when its
/// part after the last `__` names an anima dir in one of the deployment's folders of animas (`folders`,
/// [`crate::animas::folders`]) that is not the calling anima's.
pub fn foreign_anima_key(folders: &[std::path::PathBuf], own: Option<&str>, key: &str) -> Option<String> {
    let (_, suffix) = key.rsplit_once("__")?;
    crate::animas::is_other(folders, own, suffix).then(|| suffix.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::permissions::PermissionsFile;

    fn perms(json: &str) -> Result<LoadedPermissions, PermissionsError> {
        Ok(LoadedPermissions {
            permissions: serde_json::from_str(json).unwrap(),
            source: PermissionsFile::Json("/a/permissions.json".into()),
        })
    }

    #[test]
    fn a_declaration_is_not_a_grant() {
        let d = CredentialDefaults::default();
        let p = perms(r#"{"credentials": {"gh": ["github"], "personal:any": ["*"], "any": ["x"]}}"#);
        let g = CredentialGrants::of(&p, "gh", Tier::Personal, &d);
        assert!(g.allows("github") && !g.allows("aws"));
        assert!(
            g.refusal("aws").contains(r#""credentials": {"gh": ["aws"]}"#),
            "{}",
            g.refusal("aws")
        );
        assert!(!CredentialGrants::of(&p, "other", Tier::Common, &d).allows("x"));
        assert!(
            CredentialGrants::of(&p, "other", Tier::Core, &d).allows("x"),
            "core: declared"
        );
        assert!(CredentialGrants::of(&p, "any", Tier::Personal, &d).allows("anything"));
        assert!(!CredentialGrants::of(&p, "any", Tier::Common, &d).allows("anything"));
        assert!(
            g.allows_env("github", "GITHUB_TOKEN") && g.allows_env("github", "GITHUB") && g.allows_env("github", "")
        );
        for other in ["AWS_SECRET_ACCESS_KEY", "GITHUBX", "OPENAI_API_KEY"] {
            assert!(
                !g.allows_env("github", other),
                "granting a name is not granting the key {other}"
            );
        }
        assert!(CredentialGrants::of(&p, "any", Tier::Personal, &d).allows_env("x", "AWS_SECRET_ACCESS_KEY"));
        assert!(CredentialGrants::of(&p, "other", Tier::Core, &d).allows_env("x", "AWS_SECRET_ACCESS_KEY"));
        let own = perms(r#"{"credentials": {"xs": ["x_twitter", "TWITTER_BEARER_TOKEN"]}}"#);
        assert!(CredentialGrants::of(&own, "xs", Tier::Personal, &d).allows_env("x_twitter", "TWITTER_BEARER_TOKEN"));
        let strict: CredentialDefaults = serde_json::from_value(serde_json::json!({"core": "granted"})).unwrap();
        assert_eq!(
            strict.personal,
            CredentialDefault::Granted,
            "an absent tier keeps its default"
        );
        assert!(!CredentialGrants::of(&p, "other", Tier::Core, &strict).allows("x"));
        for bad in [r#"{"core": "all"}"#, r#"{"nope": "granted"}"#] {
            assert!(serde_json::from_str::<CredentialDefaults>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn another_animas_key_is_foreign() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("animas/bob")).unwrap();
        std::fs::create_dir_all(d.path().join("animas/alice")).unwrap();
        let d = [d.path().join("animas")];
        let d = &d[..];
        assert_eq!(
            foreign_anima_key(d, Some("alice"), "SVC__bob").as_deref(),
            Some("bob")
        );
        assert_eq!(foreign_anima_key(d, None, "SVC__bob").as_deref(), Some("bob"));
        assert_eq!(foreign_anima_key(d, Some("alice"), "SVC__alice"), None);
        assert_eq!(foreign_anima_key(d, Some("alice"), "SVC__nobody"), None);
        assert_eq!(foreign_anima_key(d, Some("alice"), "SVC"), None);
    }
}
