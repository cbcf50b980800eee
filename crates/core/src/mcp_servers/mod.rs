//! MCP servers as tools: a server declared in the settings (or in AnimaWorks' own configuration) is one more tool
//! of its tier, whose MCP tools are its actions.
//!
//! Nothing here starts a server for a call. Discovery ([`crate::discover`]) lists each declared server as a
//! [`crate::discover::ToolFile`] with [`crate::discover::Launch::Mcp`]; the pipeline then treats it as any tool:
//! validation, gates, credential grants, the sandbox of its tier, limits, audit and masking. What the pipeline
//! starts is the runner's own binary as a bridge ([`bridge`]): a protocol-1 tool (`--schemas`, one call,
//! `--serve`) that speaks MCP to the server it starts as its child, inside the same sandbox and process group.
//!
//! Where servers are declared, in the order their tiers are scanned:
//! - `<data dir>/animaworks-tool.json` `"mcp_servers"`: `{"name": {"command", "args", "env", "credentials",
//!   "tier": "core"|"common", "gated", "sandbox", "timeout_s"}}`;
//! - AnimaWorks' `config.json` `anima_defaults.extra_mcp_servers` (the servers every anima has): common tier;
//! - the anima's `status.json` `extra_mcp_servers` (AnimaWorks' per-anima override): personal tier.

pub mod asks;
pub mod bridge;
mod client;
mod content;
pub mod names;
pub mod install;
pub mod spec_fd;

use crate::tier::Tier;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// The largest `config.json` / `status.json` read for server declarations.
const MAX_DECL_FILE: u64 = 4 * 1024 * 1024;

pub use crate::settings::mcp::ServerSpec;

/// Where a declaration was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `animaworks-tool.json` `mcp_servers`.
    Settings,
    /// AnimaWorks' `config.json` `anima_defaults.extra_mcp_servers`.
    AnimaworksDefaults,
    /// AnimaWorks' `<anima>/status.json` `extra_mcp_servers`.
    AnimaworksStatus,
}

/// One declared server, ready for discovery.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Declared {
    pub name: String,
    pub tier: Tier,
    /// The file that declares it (its identity keys the schema cache).
    pub file: PathBuf,
    pub origin: Origin,
    pub spec: ServerSpec,
    /// What its start runs: an `npx`/`uvx` package installed beforehand, or the command as declared.
    pub install: install::Install,
}

/// A declaration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclProblem {
    pub name: String,
    pub tier: Tier,
    pub file: PathBuf,
    pub message: String,
}

impl Declared {
    /// A stable digest of what the server is, for the schema cache's key.
    pub fn digest(&self) -> String {
        let json = serde_json::to_vec(&self.spec).unwrap_or_default();
        let mut h: u64 = 0xcbf29ce484222325;
        // A new installation is a new server: its listing is not the old one's.
        let installed = match &self.install {
            install::Install::Installed { root, version, .. } => format!("{}\0{version}", root.display()),
            _ => String::new(),
        };
        for b in json.iter().chain(self.name.as_bytes()).chain(installed.as_bytes()) {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        format!("mcp {h:016x}")
    }

    /// What the bridge is told on its command line: how to start the server (no secret: credentials reach it
    /// through the environment the pipeline builds), and the client capabilities `forward` a session declares to
    /// it ([`asks`]).
    pub fn bridge_arg(&self, forward: &[&str]) -> String {
        let (command, args) = match &self.install {
            install::Install::Installed { command, args, .. } => (command, args),
            _ => (&self.spec.command, &self.spec.args),
        };
        serde_json::json!({
            "name": self.name,
            "command": command,
            "args": args,
            "env": self.spec.env,
            "handshake_s": self.spec.handshake_s,
            "timeout_s": self.spec.timeout_s,
            "short_names": self.spec.short_names,
            "forward": forward,
        })
        .to_string()
    }

    /// Is the action `action` gated by the declaration's `"gated"` list? The list names MCP tools, and a tool whose
    /// name is not an action name is offered under another (`repo.delete` as `repo_delete`, or shortened with
    /// `"short_names"`, [`names`]): a name gates the action its tool is offered as. Where a shortened name cannot
    /// tell (a prefix longer than what it kept), it gates more, never less.
    pub fn gated_by_name(&self, action: &str) -> bool {
        let shortened = self
            .spec
            .short_names
            .then(|| action.rsplit_once('_'))
            .flatten()
            .filter(|(_, h)| h.len() == 8 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(|(head, _)| head);
        self.spec.gated.iter().any(|p| {
            let (name, prefix) = match p.strip_suffix('*') {
                Some(q) => (q, true),
                None => (p.as_str(), false),
            };
            let fits = |a: &str, q: &str| if prefix { a.starts_with(q) } else { a == q };
            let mapped = names::mapped(name);
            fits(action, name)
                || fits(action, &mapped)
                || shortened.is_some_and(|head| match prefix {
                    true => mapped.starts_with(head) || head.starts_with(&mapped),
                    false => names::short(&self.name, &mapped, name).as_deref() == Some(action),
                })
        })
    }
}

/// Every server declared for `tier`, and what is wrong with the others. Reads at most three small files, and
/// only parses one when it names servers at all, so a call costs nothing measurable when none is declared.
pub fn declared(data_dir: &Path, anima_dir: Option<&Path>, tier: Tier) -> (Vec<Declared>, Vec<DeclProblem>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    match tier {
        Tier::Core | Tier::Common => {
            let settings = data_dir.join(crate::settings::SETTINGS_FILE);
            for (name, v) in settings_servers(&settings) {
                {
                    // Said once, as the common tier's problem: both tiers read the same declarations.
                    let mut refuse = |why: String| {
                        if tier == Tier::Common {
                            problems.push(problem(&name, Tier::Common, &settings, why));
                        }
                    };
                    let parsed = if v.is_object() {
                        ServerSpec::deserialize(&v)
                    } else {
                        Err(serde::de::Error::custom(format!("must be an object, not {v}")))
                    };
                    let spec: ServerSpec = match parsed {
                        Ok(s) => s,
                        Err(e) => {
                            refuse(
                                crate::settings::diagnose::<ServerSpec>(&v, &format!("mcp_servers.{name}"), &[])
                                    .map_or_else(|| format!("mcp_servers.{name}: {e}"), |d| d.reason),
                            );
                            continue;
                        }
                    };
                    if let Some(k) = spec.limits.as_ref().and_then(|l| l.zero()) {
                        refuse(format!(
                            "mcp_servers.{name}.limits.{k} is 0, which would refuse every start: give a whole number above 0, or null for no limit"
                        ));
                        continue;
                    }
                    let declared_tier = match spec.tier.as_deref() {
                        None | Some("common") => Tier::Common,
                        Some("core") => Tier::Core,
                        Some(other) => {
                            refuse(format!(
                                "mcp_servers.{name}.tier is \"{other}\": use \"core\" or \"common\" (a personal server is declared in the anima's status.json \"extra_mcp_servers\")"
                            ));
                            continue;
                        }
                    };
                    if declared_tier == tier {
                        push(
                            data_dir,
                            &mut out,
                            &mut problems,
                            name,
                            tier,
                            &settings,
                            Origin::Settings,
                            spec,
                        );
                    }
                }
            }
            if tier == Tier::Common {
                let config = data_dir.join(crate::policy::credentials::CONFIG_FILE);
                if let Some(servers) =
                    servers_in(&config, &["anima_defaults", "extra_mcp_servers"], &mut problems, tier)
                {
                    for (name, v) in servers {
                        if let Some(spec) = from_animaworks(&name, tier, &config, v, &mut problems) {
                            push(
                                data_dir,
                                &mut out,
                                &mut problems,
                                name,
                                tier,
                                &config,
                                Origin::AnimaworksDefaults,
                                spec,
                            );
                        }
                    }
                }
            }
        }
        Tier::Personal => {
            if let Some(anima) = anima_dir {
                let status = anima.join("status.json");
                // Never through a link a tool could have put there (it decides which programs start).
                let bytes = match crate::beneath::read_if_present(anima, Path::new("status.json"), MAX_DECL_FILE) {
                    Ok(b) => b,
                    Err(e) => {
                        problems.push(problem("extra_mcp_servers", tier, &status, e.to_string()));
                        None
                    }
                };
                let servers = bytes.and_then(|b| servers_in_bytes(&b, &status, &["extra_mcp_servers"], &mut problems, tier));
                if let Some(servers) = servers {
                    for (name, v) in servers {
                        if let Some(spec) = from_animaworks(&name, tier, &status, v, &mut problems) {
                            push(
                                data_dir,
                                &mut out,
                                &mut problems,
                                name,
                                tier,
                                &status,
                                Origin::AnimaworksStatus,
                                spec,
                            );
                        }
                    }
                }
            }
        }
    }
    (out, problems)
}

fn problem(name: &str, tier: Tier, file: &Path, message: String) -> DeclProblem {
    DeclProblem {
        name: name.to_owned(),
        tier,
        file: file.to_path_buf(),
        message,
    }
}

#[allow(clippy::too_many_arguments)]
fn push(
    data_dir: &Path,
    out: &mut Vec<Declared>,
    problems: &mut Vec<DeclProblem>,
    name: String,
    tier: Tier,
    file: &Path,
    origin: Origin,
    spec: ServerSpec,
) {
    if let Some(url) = &spec.url {
        problems.push(problem(
            &name,
            tier,
            file,
            format!("MCP server '{name}' at {url}: only stdio servers (a \"command\") are supported so far"),
        ));
        return;
    }
    if !matches!(spec.transport.as_deref(), None | Some("stdio")) {
        problems.push(problem(
            &name,
            tier,
            file,
            format!(
                "MCP server '{name}': transport \"{}\" is not supported; only stdio servers are",
                spec.transport.as_deref().unwrap_or_default()
            ),
        ));
        return;
    }
    if spec.command.is_empty() {
        problems.push(problem(
            &name,
            tier,
            file,
            format!("MCP server '{name}': \"command\" is empty"),
        ));
        return;
    }
    let install = install::resolve(data_dir, &name, &spec);
    out.push(Declared {
        name,
        tier,
        file: file.to_path_buf(),
        origin,
        spec,
        install,
    });
}

/// The servers of the runner's settings file, when it names any (the file is only parsed then). A file that
/// cannot be used declares none here: its error is the settings' own, reported by every command and `doctor`.
fn settings_servers(file: &Path) -> Map<String, Value> {
    let Ok(Some(bytes)) = crate::fsread::read_if_present(file, crate::settings::MAX_SETTINGS_BYTES) else {
        return Map::new();
    };
    if memchr::memmem::find(&bytes, b"mcp_servers").is_none() {
        return Map::new();
    }
    crate::settings::Settings::parse(file.to_owned(), &bytes).map_or_else(|_| Map::new(), |s| s.mcp_servers)
}

/// The object at `path` inside the JSON file, when the file exists and mentions servers at all.
fn servers_in(file: &Path, path: &[&str], problems: &mut Vec<DeclProblem>, tier: Tier) -> Option<Map<String, Value>> {
    let bytes = crate::fsread::read_if_present(file, MAX_DECL_FILE).ok()??;
    servers_in_bytes(&bytes, file, path, problems, tier)
}

fn servers_in_bytes(
    bytes: &[u8],
    file: &Path,
    path: &[&str],
    problems: &mut Vec<DeclProblem>,
    tier: Tier,
) -> Option<Map<String, Value>> {
    let last = path.last().expect("a key");
    if memchr::memmem::find(bytes, last.as_bytes()).is_none() {
        return None;
    }
    let mut v: Value = serde_json::from_slice(bytes).ok()?;
    for key in path {
        v = v.as_object_mut()?.remove(*key)?;
    }
    match v {
        Value::Object(m) => Some(m),
        Value::Null => None,
        _ => {
            problems.push(problem(
                &path.join("."),
                tier,
                file,
                format!(
                    "{}: {} must be an object of servers by name",
                    file.display(),
                    path.join(".")
                ),
            ));
            None
        }
    }
}

/// An AnimaWorks (Claude SDK `mcpServers`) entry: `{"command", "args", "env"}` or `{"type": "http", "url"}`;
/// other keys are AnimaWorks' own and ignored.
fn from_animaworks(
    name: &str,
    tier: Tier,
    file: &Path,
    v: Value,
    problems: &mut Vec<DeclProblem>,
) -> Option<ServerSpec> {
    let Value::Object(m) = v else {
        problems.push(problem(
            name,
            tier,
            file,
            format!("extra_mcp_servers.{name} must be an object"),
        ));
        return None;
    };
    let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
    let args = m
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let env = m
        .get("env")
        .and_then(Value::as_object)
        .map(|e| {
            e.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Some(ServerSpec {
        command: s("command").unwrap_or_default(),
        args,
        env,
        credentials: Vec::new(),
        tier: None,
        gated: Vec::new(),
        sandbox: None,
        limits: None,
        timeout_s: None,
        handshake_s: None,
        workers: None,
        idle_s: None,
        short_names: false,
        transport: s("type"),
        url: s("url"),
    })
}

/// The runner's own word over what the bridge reported (the bridge runs beside the server, which the runner does
/// not trust): every action not declared read-only, or named by `"gated"`, is gated; the credentials are the
/// declaration's; the sandbox is the declaration's; the deadline is the declaration's.
pub fn enforce(m: &mut crate::manifest::Manifest, d: &Declared) {
    m.credentials = d.spec.credentials.clone();
    m.legacy = false;
    m.cli = false;
    for a in m.actions.iter_mut() {
        let p = &mut a.profile;
        p.gated = !p.hints.read_only || d.gated_by_name(&a.name);
        p.gated_as = None;
        p.credentials = Vec::new();
        p.sandbox = Some(sandbox_for(d));
        if let Some(t) = d.spec.timeout_s {
            p.timeout_s = Some(t);
        }
    }
}

/// What a server may touch: its entry's `"sandbox"`, or, when it declares none, its `$TMP` and the network (never
/// the anima's write grants, which are an AnimaWorks tool's default: one server must not write another's data).
pub fn sandbox_of(spec: &ServerSpec) -> awt_protocol::Sandbox {
    spec.sandbox.clone().unwrap_or_else(|| awt_protocol::Sandbox {
        net: awt_protocol::Net::All(true),
        ..Default::default()
    })
}

/// [`sandbox_of`] the declaration, with its installed package (`mcp-servers install`) to read and run.
pub fn sandbox_for(d: &Declared) -> awt_protocol::Sandbox {
    let mut s = sandbox_of(&d.spec);
    if let install::Install::Installed { root, .. } = &d.install {
        let r = root.to_string_lossy().into_owned();
        s.read.push(r.clone());
        s.exec.push(r);
    }
    s
}

/// Why a server cannot start confined as declared: a starter (`npx`, `uvx`) whose package is not installed.
pub fn not_installed(d: &Declared) -> Option<crate::error::CallError> {
    let install::Install::Missing { why } = &d.install else {
        return None;
    };
    Some(
        crate::error::CallError::new(
            crate::error::ErrorCode::SpawnFailed,
            format!(
                "MCP server '{}' is started by `{}`, which downloads its package at start and runs it from a cache it writes; confined, it cannot ({why})",
                d.name, d.spec.command
            ),
        )
        .hint(format!(
            "install it once, outside any call: `{}` (docs/mcp-servers-install.md); or declare it \"tier\": \"core\" to run it unconfined",
            install::install_command(&d.name)
        ))
        .with(crate::error::Detail::Tool, d.name.as_str()),
    )
}

/// The runner's own executable, which is the bridge.
pub fn runner_exe() -> std::io::Result<PathBuf> {
    std::env::current_exe()
}

/// How long a server may take to start and answer `initialize`.
pub fn handshake(spec: &ServerSpec) -> std::time::Duration {
    std::time::Duration::from_secs_f64(spec.handshake_s.unwrap_or(30.0).clamp(0.1, 600.0))
}

/// What a server that failed confined is told (its listing, its call): that it ran confined, with what, and the
/// key of its own entry that grants more.
pub fn confined_words(d: &Declared, plan: &crate::sandbox::Plan, stderr: &str) -> String {
    let Some(g) = plan.given() else { return String::new() };
    let net = match (g.hosts, g.net) {
        (Some(h), _) => format!("only {} through the runner's proxy", h.join(", ")),
        (None, crate::sandbox::NetPlan::None) => "none".into(),
        (None, crate::sandbox::NetPlan::All) => "open".into(),
        (None, crate::sandbox::NetPlan::Ports(p)) => format!("TCP ports {p:?}"),
    };
    let cause = match crate::confined::cause(plan, stderr) {
        Some(crate::confined::Cause::Path(p)) => format!("{} is outside what it may write; ", p.display()),
        Some(crate::confined::Cause::Network | crate::confined::Cause::Refused(_)) => {
            "it had no network for that; ".to_owned()
        }
        _ => String::new(),
    };
    // An installed starter runs its installed program: only one that is not installed downloads at start.
    let starter = !matches!(d.install, install::Install::Installed { .. })
        && matches!(
            Path::new(&d.spec.command).file_name().and_then(|n| n.to_str()),
            Some("npx" | "uvx" | "uv" | "pipx" | "bunx" | "pnpm" | "yarn")
        );
    let key = match d.origin {
        Origin::Settings => format!(
            "give the server more with \"mcp_servers\".\"{}\".\"sandbox\" in {}",
            d.name,
            d.file.display()
        ),
        _ => format!(
            "to give the server more, declare it in {} \"mcp_servers\" with a \"sandbox\" (it is read from {})",
            crate::settings::SETTINGS_FILE,
            d.file.display()
        ),
    };
    format!(
        "{cause}it ran confined, by the {} tier's sandbox (network {net}; writes to its $TMP{}): {key} (protocol.md §2.4: \"read\", \"write\", \"net\", \"exec\"){}{}",
        d.tier,
        if g.write.is_empty() { String::new() } else { format!(" and {} more", g.write.len()) },
        if starter {
            format!(
                " ({} downloads and runs a package at start: install it once with `{}`)",
                d.spec.command,
                install::install_command(&d.name)
            )
        } else {
            String::new()
        },
        if d.origin == Origin::Settings {
            ", or \"tier\": \"core\" there to run it unconfined"
        } else {
            ""
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(gated: &[&str], short_names: bool) -> Declared {
        Declared {
            name: "pics".into(),
            tier: Tier::Common,
            file: PathBuf::from("animaworks-tool.json"),
            origin: Origin::Settings,
            spec: serde_json::from_value(serde_json::json!({"command": "x", "gated": gated, "short_names": short_names}))
                .unwrap(),
            install: install::Install::AsDeclared,
        }
    }

    #[test]
    fn gated_names_are_mcp_names_and_gate_the_action_they_are_offered_as() {
        let long = "a.tool.with.a.name.long.enough.to.pass.a.clients.limit.with.its.prefix";
        let action = names::short("pics", &names::mapped(long), long).unwrap();
        assert!(declared(&[long], true).gated_by_name(&action), "{action}");
        assert!(declared(&["a.tool.*"], true).gated_by_name(&action), "{action}");
        assert!(declared(&["a.tool.with.a.name.long.enough.to.pass.a.clients.limit.*"], true).gated_by_name(&action));
        assert!(!declared(&["other.*"], true).gated_by_name(&action));
        assert!(!declared(&["another.tool.with.a.long.name.that.is.shortened.too.and.ends"], true).gated_by_name(&action));
        assert!(declared(&["repo.delete"], false).gated_by_name("repo_delete"));
        assert!(declared(&["repo/*"], false).gated_by_name("repo_delete"));
        assert!(!declared(&["repo.delete"], false).gated_by_name("repo_search"));
        assert!(declared(&["write_file"], false).gated_by_name("write_file"));
    }
}
