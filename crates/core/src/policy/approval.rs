//! The third answer of the gate: a gated action whose grant is neither allowed nor denied, but listed in
//! `external_tools.ask` (or the settings' default for its tier), may run once when a human approves that exact call.
//!
//! What is approved is a [`Binding`]: the anima, the tool file (its path, tier and the SHA-256 of its content),
//! the action (`cli` for a legacy argv) and the SHA-256 of the arguments in a canonical form. A call runs on an
//! approval only when its own binding is the same, so an approval is never stretched to other arguments, another
//! anima, or a tool file rewritten after the human looked at it.

use super::permissions::Permissions;
use crate::settings::approvals::ApprovalsSettings;
use crate::tier::Tier;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;

/// `pattern` (with `*` for any run of characters) matches `grant`; `-` and `_` are one letter.
pub fn pattern_matches(pattern: &str, grant: &str) -> bool {
    let p = crate::names::canon(pattern);
    let g = crate::names::canon(grant);
    glob(p.as_bytes(), g.as_bytes())
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    // Iterative wildcard match with one backtrack point: linear in practice, never exponential.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Does the anima's `external_tools.ask`, or the settings' list for `tier`, name `grant` (`<tool>_<key>`)?
/// Only asked of a grant that `allow` and `deny` do not hold: they win over `ask`.
pub fn asks(p: &Permissions, settings: &ApprovalsSettings, tier: Tier, grant: &str) -> bool {
    p.external_tools
        .ask
        .iter()
        .chain(settings.ask_of(tier))
        .any(|pat| pattern_matches(pat, grant))
}

/// May a call the gate decided `d` on be made at all: allowed, or asking a human? What listings (`tools/list`,
/// `use_tool`'s catalogue) offer, so that an anima can ask for an action it may not run alone.
pub fn callable(
    d: &super::gate::Decision,
    perms: &Result<super::permissions::LoadedPermissions, super::permissions::PermissionsError>,
    settings: &ApprovalsSettings,
    tier: Tier,
) -> bool {
    match (d, perms) {
        (super::gate::Decision::Allow, _) => true,
        (super::gate::Decision::Deny(r), Ok(p)) => {
            r.kind == super::gate::RefusalKind::GrantMissing
                && r.key
                    .as_deref()
                    .is_some_and(|k| asks(&p.permissions, settings, tier, k))
        }
        _ => false,
    }
}

/// How the call names its tool: a structured action, or a legacy `cli_main` argv.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    Action,
    Cli,
}

/// Exactly what an approval lets run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// The calling anima's name, `null` without one.
    pub anima: Option<String>,
    pub tool: String,
    pub tier: Tier,
    /// The tool file as found in its tier.
    pub tool_path: String,
    /// The SHA-256 of the tool file's content, in hex.
    pub tool_sha256: String,
    /// The action, or `cli` for a legacy argv.
    pub action: String,
    pub kind: CallKind,
    /// [`args_sha256`] of the arguments (unmasked).
    pub args_sha256: String,
}

/// The SHA-256 of `args` in a canonical form (object keys sorted). A legacy argv is hashed as the module runs it
/// in the background (`-j` appended when absent), so that a foreground request and its background run agree.
pub fn args_sha256(kind: CallKind, args: &Value) -> String {
    let normal;
    let v = match (kind, args) {
        (CallKind::Cli, Value::Array(a)) if !a.iter().any(|w| w == "-j") => {
            let mut a = a.clone();
            a.push(Value::from("-j"));
            normal = Value::Array(a);
            &normal
        }
        _ => args,
    };
    let mut out = Vec::new();
    canonical(v, &mut out);
    crate::hex::encode(Sha256::digest(&out))
}

/// Files past this size among an MCP server's command and arguments (an interpreter, a large binary) are bound by
/// their size and modification time instead of their content.
const HASHED_UP_TO: u64 = 16 * 1024 * 1024;

/// What an approval (and a task of a shared queue) binds of a tool, in hex: its file's SHA-256; for an MCP server,
/// that of the file that declares it together with what its start runs that could change after an approval: the
/// installation it runs (an installed package's folder and version; `mcp-servers install --update` makes a new
/// folder) and every absolute path among its command and arguments that is a file (a server script).
pub fn tool_sha256(file: &crate::discover::ToolFile) -> std::io::Result<String> {
    let own = file_sha256(&file.path)?;
    let Some(decl) = &file.mcp else {
        return Ok(own);
    };
    let mut h = Sha256::new();
    h.update(own.as_bytes());
    let (command, args) = match &decl.install {
        crate::mcp_servers::install::Install::Installed {
            command,
            args,
            root,
            version,
        } => {
            h.update(root.as_os_str().as_encoded_bytes());
            h.update(b"\0");
            h.update(version.as_bytes());
            (command, args)
        }
        _ => (&decl.spec.command, &decl.spec.args),
    };
    for word in std::iter::once(command).chain(args) {
        let path = Path::new(word);
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        if !path.is_absolute() || !meta.is_file() {
            continue;
        }
        h.update(b"\0");
        h.update(word.as_bytes());
        h.update(b"\0");
        if meta.len() <= HASHED_UP_TO {
            h.update(file_sha256(path)?.as_bytes());
        } else {
            use std::os::unix::fs::MetadataExt;
            h.update(format!("{}:{}.{}", meta.len(), meta.mtime(), meta.mtime_nsec()).as_bytes());
        }
    }
    Ok(crate::hex::encode(h.finalize()))
}

/// The SHA-256 of a tool file's content, in hex.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(crate::hex::encode(h.finalize()))
}

/// `v` as JSON with every object's keys sorted.
pub fn canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            out.push(b'{');
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(Value::from(k.as_str()).to_string().as_bytes());
                out.push(b':');
                canonical(&m[k], out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(x, out);
            }
            out.push(b']');
        }
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patterns() {
        assert!(pattern_matches("github_*", "github_create_issue"));
        assert!(pattern_matches("github_create-issue", "github_create_issue"));
        assert!(pattern_matches("*", "x_y"));
        assert!(pattern_matches("*_send", "gmail_send"));
        assert!(!pattern_matches("gmail_send", "gmail_send_all"));
        assert!(!pattern_matches("github_*", "gitlab_x"));
        assert!(pattern_matches("a*b*c", "axxbyyc") && !pattern_matches("a*b*c", "axxbyy"));
    }

    #[test]
    fn the_digest_sees_every_argument_and_ignores_key_order() {
        let a = args_sha256(CallKind::Action, &json!({"to": "a", "n": 1}));
        assert_eq!(a, args_sha256(CallKind::Action, &json!({"n": 1, "to": "a"})));
        assert_ne!(a, args_sha256(CallKind::Action, &json!({"n": 1, "to": "b"})));
        assert_ne!(a, args_sha256(CallKind::Action, &json!({"n": 1, "to": "a", "x": null})));
        assert_eq!(
            args_sha256(CallKind::Cli, &json!(["send", "x"])),
            args_sha256(CallKind::Cli, &json!(["send", "x", "-j"]))
        );
    }
}
