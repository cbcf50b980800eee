//! The one decision every call path takes: may this anima run this action of this tool?
//!
//! [`decide`] serves structured calls (`call`, MCP, `use-tool`, `submit` of an action); [`decide_cli`] serves
//! the legacy passthrough `animaworks-tool <tool> <argv…>` (and `submit` of it). Both end in the same rules.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::permissions::{LoadedPermissions, Permissions, PermissionsError};
use crate::names::same_spelling;
use crate::tier::Tier;

/// How an action is gated, as its profile says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Not gated: the tool rules alone decide.
    Open,
    /// Gated: the grant `<tool>_<gated_as or action>` must be in `external_tools.allow`.
    Gated {
        /// The name the grant uses instead of the action's, when the profile gives one.
        gated_as: Option<String>,
    },
    /// The tool's profile could not be read (its `--schemas` failed, …): treated as gated under the action's
    /// own name, because a gate must fail closed.
    Unknown,
}

impl Gate {
    /// From a profile's `gated` and `gated_as` fields.
    pub fn new(gated: bool, gated_as: Option<String>) -> Self {
        if gated {
            Gate::Gated {
                gated_as: gated_as.filter(|s| !s.is_empty()),
            }
        } else {
            Gate::Open
        }
    }

    /// From an action's wire profile.
    pub fn from_profile(profile: &awt_protocol::Profile) -> Self {
        Gate::new(profile.gated, profile.gated_as.clone())
    }
}

/// A legacy module's `EXECUTION_PROFILE`, for [`decide_cli`].
#[derive(Debug, Clone, Copy)]
pub enum LegacyProfile<'a> {
    /// The module has none: no `cli_main` subcommand is gated.
    Absent,
    /// The map as the module wrote it: key (CLI spelling, often hyphenated) → `{"gated": …, "gated_as": …}`.
    Known(&'a Map<String, Value>),
    /// The module's profile could not be read: every argv word that could name a subcommand is treated as a
    /// gated key (fail closed).
    Unreadable,
}

/// Why a call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The permissions file is unreadable or invalid; every call is refused until it is fixed.
    PermissionsUnusable,
    /// The tool is in `external_tools.deny`.
    ToolDenied,
    /// `allow_all` is false and the tool is not in the non-empty `allow` whitelist.
    ToolNotAllowed,
    /// A gated action's grant is in `external_tools.deny`.
    GrantDenied,
    /// A gated action's grant is not in `external_tools.allow`.
    GrantMissing,
    /// A credential the action requires is set nowhere (the call stops before the tool starts).
    CredentialMissing,
    /// A credential the tool requires is not granted to it (permissions.json `"credentials"`), or is another
    /// anima's per-anima key.
    CredentialNotGranted,
    /// A personal tool shadows a common one while permissions grant that name without a tier.
    ShadowGrants,
    /// The action declares a sandbox need the anima's permissions do not grant.
    SandboxNotGranted,
    /// The kernel cannot enforce the sandbox and the settings say to refuse.
    SandboxUnsupported,
    /// The action's sandbox declaration, or the anima's sandbox grants, are malformed.
    SandboxInvalid,
    /// `submit --strict` of an action its profile does not mark background-eligible.
    NotBackgroundEligible,
}

impl RefusalKind {
    /// A stable snake-case name, for audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalKind::PermissionsUnusable => "permissions_unusable",
            RefusalKind::ToolDenied => "tool_denied",
            RefusalKind::ToolNotAllowed => "tool_not_allowed",
            RefusalKind::GrantDenied => "grant_denied",
            RefusalKind::GrantMissing => "grant_missing",
            RefusalKind::CredentialMissing => "credential_missing",
            RefusalKind::CredentialNotGranted => "credential_not_granted",
            RefusalKind::ShadowGrants => "shadow_grants",
            RefusalKind::SandboxNotGranted => "sandbox_not_granted",
            RefusalKind::SandboxUnsupported => "sandbox_unsupported",
            RefusalKind::SandboxInvalid => "sandbox_invalid",
            RefusalKind::NotBackgroundEligible => "not_background_eligible",
        }
    }
}

/// A refused call: what to tell the caller (exit code 6, `permission_denied`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Why.
    pub kind: RefusalKind,
    /// One sentence for a person or a model; names the key and the file.
    pub message: String,
    /// What to do about it.
    pub hint: String,
    /// The entry concerned, in the spelling that works: the tool name, or the grant `<tool>_<key>`. `None`
    /// when the permissions file itself is at fault.
    pub key: Option<String>,
    /// The permissions file to edit (or to create, when it does not exist).
    pub permissions_path: PathBuf,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The outcome of [`decide`] and [`decide_cli`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The call may run.
    Allow,
    /// The call must not run.
    Deny(Refusal),
}

impl Decision {
    /// `true` for [`Decision::Allow`].
    pub fn is_allow(&self) -> bool {
        matches!(self, Decision::Allow)
    }
}

/// Does `list` hold `<tool>_<key>` in either spelling of `key`? The tool part must match as written.
fn holds_grant(list: &[String], tool: &str, key: &str) -> bool {
    // `-` and `_` are one letter for action names (protocol §3).
    let want = crate::names::canon(key);
    list.iter().any(|entry| {
        entry
            .strip_prefix(tool)
            .and_then(|r| r.strip_prefix('_'))
            .is_some_and(|rest| crate::names::canon(rest) == want)
    })
}

fn refusal(kind: RefusalKind, key: Option<String>, path: &Path, message: String, hint: String) -> Decision {
    Decision::Deny(Refusal {
        kind,
        message,
        hint,
        key,
        permissions_path: path.to_path_buf(),
    })
}

/// Rules 1–3 (which tools), shared by both entry points.
fn tool_rules(p: &Permissions, path: &Path, tool: &str, tier: Tier) -> Decision {
    let t = &p.external_tools;
    // Deny matches in either spelling: a refusal must not be dodged by renaming `my-tool` to `my_tool`.
    if t.deny.iter().any(|d| d == tool || same_spelling(d, tool)) {
        return refusal(
            RefusalKind::ToolDenied,
            Some(tool.to_string()),
            path,
            format!(
                "{tier} tool '{tool}' is denied: \"{tool}\" is in external_tools.deny of {}",
                path.display()
            ),
            format!("remove \"{tool}\" from external_tools.deny in {}", path.display()),
        );
    }
    // Core: allow_all → allowed; else a non-empty allow is a whitelist; else allowed. Common and personal:
    // refused only when allow_all is false, allow is non-empty and the tool is not in it. The two read the
    // same; they are kept as one rule so that no tier is ever laxer than the doc says.
    if !t.allow_all && !t.allow.is_empty() && !t.allow.iter().any(|a| a == tool) {
        return refusal(
            RefusalKind::ToolNotAllowed,
            Some(tool.to_string()),
            path,
            format!(
                "{tier} tool '{tool}' is not allowed: external_tools.allow_all is false and \"{tool}\" is not in \
                 external_tools.allow of {}",
                path.display()
            ),
            format!("add \"{tool}\" to external_tools.allow in {}", path.display()),
        );
    }
    Decision::Allow
}

/// Rule 4 (a gated key), shared by both entry points. `what` names the action or argv word in messages.
fn grant_rule(p: &Permissions, path: &Path, tool: &str, key: &str, what: &str) -> Decision {
    let t = &p.external_tools;
    let grant = format!("{tool}_{key}");
    if holds_grant(&t.deny, tool, key) {
        return refusal(
            RefusalKind::GrantDenied,
            Some(grant.clone()),
            path,
            format!(
                "{what} of tool '{tool}' is gated and its grant \"{grant}\" is in external_tools.deny of {}",
                path.display()
            ),
            format!(
                "remove \"{grant}\" from external_tools.deny and add it to external_tools.allow in {}",
                path.display()
            ),
        );
    }
    if !holds_grant(&t.allow, tool, key) {
        return refusal(
            RefusalKind::GrantMissing,
            Some(grant.clone()),
            path,
            format!(
                "{what} of tool '{tool}' is gated: add \"{grant}\" to external_tools.allow in {} (needed even when \
                 allow_all is true)",
                path.display()
            ),
            format!("add \"{grant}\" to external_tools.allow in {}", path.display()),
        );
    }
    Decision::Allow
}

fn unusable(err: &PermissionsError) -> Decision {
    refusal(
        RefusalKind::PermissionsUnusable,
        None,
        &err.path,
        format!("every tool call is refused until the permissions file is fixed: {err}"),
        format!("fix or remove {}", err.path.display()),
    )
}

/// Rule 1 of [`decide`] alone, for a call whose tool is not yet described: the refusal of every call while the
/// permissions file is unusable, or [`Decision::Allow`] (the other rules still wait for the call's decision).
pub fn decide_usable(perms: &Result<LoadedPermissions, PermissionsError>) -> Decision {
    match perms {
        Ok(_) => Decision::Allow,
        Err(e) => unusable(e),
    }
}

/// Rules 1–3 of [`decide`], shared by both entry points: the usable permissions and their file, or the refusal.
fn tool_allowed<'a>(
    perms: &'a Result<LoadedPermissions, PermissionsError>,
    tool: &str,
    tier: Tier,
) -> Result<(&'a Permissions, &'a Path), Decision> {
    let loaded = perms.as_ref().map_err(unusable)?;
    let (p, path) = (&loaded.permissions, loaded.path());
    match tool_rules(p, path, tool, tier) {
        d @ Decision::Deny(_) => Err(d),
        Decision::Allow => Ok((p, path)),
    }
}

/// Decides a structured call of `action` of `tool`. Every call path that names an action uses this.
///
/// The rules, in order; the first that refuses decides:
/// 1. the permissions file could not be read or parsed (`perms` is `Err`) → refused, whatever the call;
/// 2. `tool` is in `external_tools.deny` → refused, in **every** tier (a deny is never overridden);
/// 3. `allow_all` is false, `allow` is non-empty and `tool` is not in it → refused. For core tools this is the
///    original's "allow_all, else a non-empty allow is a whitelist, else all"; for common and personal tools
///    its "refused only when allow_all is false, allow is non-empty and the tool is not listed": one rule;
/// 4. the action is gated ([`Gate::Gated`], or [`Gate::Unknown`] = a profile that could not be read) → the
///    grant `<tool>_<gated_as or action>` must be in `allow`, **even when `allow_all` is true**, and must not
///    be in `deny`. Grants match with `-` and `_` as one letter (`github_create-issue` =
///    `github_create_issue`); gates hold in every tier;
/// 5. otherwise → allowed.
pub fn decide(
    perms: &Result<LoadedPermissions, PermissionsError>,
    tool: &str,
    tier: Tier,
    action: &str,
    gate: &Gate,
) -> Decision {
    let (p, path) = match tool_allowed(perms, tool, tier) {
        Ok(v) => v,
        Err(d) => return d,
    };
    let key = match gate {
        Gate::Open => return Decision::Allow,
        Gate::Gated { gated_as: Some(g) } => g.as_str(),
        Gate::Gated { gated_as: None } | Gate::Unknown => action,
    };
    let what = match gate {
        Gate::Unknown => {
            format!("action '{action}' (its profile could not be read, so it counts as gated)")
        }
        _ => format!("action '{action}'"),
    };
    grant_rule(p, path, tool, key, &what)
}

/// Python truthiness of a JSON value, as `if profile.get("gated")` reads it.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The gated keys of a legacy profile: `(key as written, grant key)`; `None` when the map is malformed.
fn gated_keys(profile: &Map<String, Value>) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (key, entry) in profile {
        let entry = entry.as_object()?;
        if entry.get("gated").is_some_and(truthy) {
            let grant = match entry.get("gated_as") {
                Some(Value::String(s)) if !s.is_empty() => s.clone(),
                Some(Value::String(_)) | Some(Value::Null) | None => key.clone(),
                Some(_) => return None,
            };
            out.push((key.clone(), grant));
        }
    }
    Some(out)
}

/// The pieces of one argv word that could name a subcommand: the word, its `--x=value` halves, and each with
/// leading dashes removed.
fn word_candidates(word: &str) -> Vec<&str> {
    let mut parts = vec![word];
    if let Some((l, r)) = word.split_once('=') {
        parts.push(l);
        parts.push(r);
    }
    let mut out = Vec::new();
    for p in parts {
        for c in [p, p.trim_start_matches('-')] {
            if !c.is_empty() && !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out
}

fn could_be_action_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Decides a legacy passthrough call `animaworks-tool <tool> <argv…>` (a module's `cli_main(argv)`).
///
/// The tool rules are those of [`decide`] (rules 1–3). Then, because argparse may take a subcommand from any
/// position, **every** argv word is checked against the gated keys of the module's `EXECUTION_PROFILE`: the
/// word itself, both halves of a `--x=value` word, and each of those without leading dashes, compared with
/// `-` and `_` as one letter. Each match needs the grant `<tool>_<gated_as or key>` (rule 4 of [`decide`]).
/// A gated key is an entry whose `gated` is truthy in Python's sense.
///
/// With [`LegacyProfile::Unreadable`] (or a profile whose entries are not objects), every word that could be
/// a subcommand name (`^[A-Za-z0-9][A-Za-z0-9_-]*$`) is treated as a gated key: each positional word and
/// the value of each `--x=value`, but not the flags themselves (`-j`, `--repo`). A flag's separate value
/// (`--title report`) is a positional word to us, so it needs a grant too: a tool whose profile is broken
/// runs only what is explicitly granted, until `doctor` shows why and it is fixed.
pub fn decide_cli(
    perms: &Result<LoadedPermissions, PermissionsError>,
    tool: &str,
    tier: Tier,
    argv: &[String],
    profile: LegacyProfile<'_>,
) -> Decision {
    let (p, path) = match tool_allowed(perms, tool, tier) {
        Ok(v) => v,
        Err(d) => return d,
    };
    let keys = match profile {
        LegacyProfile::Absent => Some(Vec::new()),
        LegacyProfile::Known(map) => gated_keys(map),
        LegacyProfile::Unreadable => None,
    };
    for word in argv {
        match &keys {
            Some(keys) => {
                for cand in word_candidates(word) {
                    for (key, grant) in keys {
                        if same_spelling(cand, key) {
                            let what = format!("subcommand '{key}' (argv word \"{word}\")");
                            if let d @ Decision::Deny(_) = grant_rule(p, path, tool, grant, &what) {
                                return d;
                            }
                        }
                    }
                }
            }
            None => {
                // Flags themselves (`-j`, `--repo`) are not subcommands; their `=value` halves may be.
                let cand = if word.starts_with('-') {
                    word.split_once('=').map(|(_, v)| v)
                } else {
                    Some(word.as_str())
                };
                if let Some(cand) = cand.filter(|c| could_be_action_name(c)) {
                    let what = format!(
                        "argv word \"{word}\" (the tool's EXECUTION_PROFILE could not be read, so every word that \
                         could be a subcommand counts as a gated one)"
                    );
                    if let d @ Decision::Deny(_) = grant_rule(p, path, tool, cand, &what) {
                        return d;
                    }
                }
            }
        }
    }
    Decision::Allow
}

/// The gated keys of a legacy profile whose grant this anima lacks (or whose grant is denied), as written in the
/// profile. The Python shim refuses a `cli_main` subcommand reached under any name of one of them — an argparse
/// alias or an abbreviation the argv words do not show ([`decide_cli`] sees only the words).
pub fn refused_cli_keys(
    perms: &Result<LoadedPermissions, PermissionsError>,
    tool: &str,
    tier: Tier,
    profile: &Map<String, Value>,
) -> Vec<String> {
    let Ok((p, path)) = tool_allowed(perms, tool, tier) else {
        return Vec::new();
    };
    gated_keys(profile)
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, grant)| matches!(grant_rule(p, path, tool, grant, key), Decision::Deny(_)))
        .map(|(key, _)| key)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::permissions::{ErrorKind, PermissionsFile};

    fn perms(json: &str) -> Result<LoadedPermissions, PermissionsError> {
        let permissions = crate::policy::permissions::parse_json(Path::new("/a/permissions.json"), json)?;
        Ok(LoadedPermissions {
            permissions,
            source: PermissionsFile::Json("/a/permissions.json".into()),
        })
    }

    fn gated(a: Option<&str>) -> Gate {
        Gate::new(true, a.map(str::to_string))
    }

    fn refused(d: Decision) -> Refusal {
        match d {
            Decision::Deny(r) => r,
            Decision::Allow => panic!("expected a refusal"),
        }
    }

    #[test]
    fn defaults_allow_open_actions_in_every_tier() {
        let p = perms("{}");
        for tier in [Tier::Core, Tier::Common, Tier::Personal] {
            assert_eq!(decide(&p, "web", tier, "search", &Gate::Open), Decision::Allow);
        }
    }

    #[test]
    fn broken_file_refuses_everything() {
        let err = PermissionsError {
            path: "/a/permissions.json".into(),
            location: Some((3, 7)),
            kind: ErrorKind::Invalid,
            reason: "expected value".into(),
        };
        let r = refused(decide(&Err(err.clone()), "web", Tier::Personal, "search", &Gate::Open));
        assert_eq!(r.kind, RefusalKind::PermissionsUnusable);
        assert!(r.message.contains("/a/permissions.json:3:7"), "{}", r.message);
        let r = refused(decide_cli(&Err(err), "web", Tier::Core, &[], LegacyProfile::Absent));
        assert_eq!(r.kind, RefusalKind::PermissionsUnusable);
    }

    #[test]
    fn gated_needs_grant_even_with_allow_all_and_names_the_working_key() {
        let p = perms("{}");
        let r = refused(decide(
            &p,
            "github",
            Tier::Core,
            "create_issue",
            &gated(Some("create-issue")),
        ));
        assert_eq!(r.kind, RefusalKind::GrantMissing);
        assert_eq!(r.key.as_deref(), Some("github_create-issue"));
        assert!(r.message.contains("\"github_create-issue\""), "{}", r.message);
        assert!(r.message.contains("/a/permissions.json"), "{}", r.message);
        let r = refused(decide(&p, "mail", Tier::Personal, "send", &gated(None)));
        assert_eq!(r.key.as_deref(), Some("mail_send"));
    }

    #[test]
    fn unknown_gate_counts_as_gated() {
        let p = perms("{}");
        let r = refused(decide(&p, "x", Tier::Common, "do_it", &Gate::Unknown));
        assert_eq!(r.key.as_deref(), Some("x_do_it"));
        let p = perms(r#"{"external_tools": {"allow": ["x_do-it"]}}"#);
        assert!(decide(&p, "x", Tier::Common, "do_it", &Gate::Unknown).is_allow());
    }

    #[test]
    fn truthiness() {
        assert!(truthy(&Value::from(1)) && !truthy(&Value::from(0)) && truthy(&Value::from("x")));
        assert!(!truthy(&Value::Null) && !truthy(&Value::from("")));
    }

    #[test]
    fn word_candidates_split() {
        assert_eq!(
            word_candidates("--mode=create-issue"),
            vec![
                "--mode=create-issue",
                "mode=create-issue",
                "--mode",
                "mode",
                "create-issue"
            ]
        );
        assert_eq!(word_candidates("post"), vec!["post"]);
    }
}
