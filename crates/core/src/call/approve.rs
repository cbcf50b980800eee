//! The gate's third answer, where the gate is: a gated action whose grant is neither allowed nor denied but asks
//! ([`crate::policy::approval::asks`]) runs only on an approval of its exact [`Binding`]. How a human is asked
//! depends on the front door ([`Approval`]): a terminal prompts, an MCP client with elicitation is asked, every
//! other path files a signed request with the installed [`Desk`] and answers `approval_pending`.

use super::{Resolved, Runner};
use crate::error::{CallError, Detail, ErrorCode};
use crate::policy::approval::{self, Binding, CallKind};
use crate::policy::gate::{Decision, RefusalKind};
use crate::policy::permissions::{LoadedPermissions, PermissionsError};
use crate::policy::Masker;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// How a call whose gate asks gets its answer.
#[derive(Clone, Default)]
pub enum Approval {
    /// File a request with the installed [`Desk`] and answer `approval_pending` (every path that cannot ask a
    /// human at once: an agent's shell, `use-tool`, `--serve`, `submit`, MCP without elicitation, a worker).
    #[default]
    Pending,
    /// Ask now (a person at a terminal): `true` runs the call once, `false` refuses it.
    Prompt(Arc<dyn Fn(&Request) -> bool + Send + Sync>),
    /// Answer `approval_pending` with the binding in the error ([`Grant::from_error`]) and file nothing: the caller
    /// asks (MCP elicitation) and prepares the call again with [`Approval::Granted`].
    Defer,
    /// A human approved this binding; any other call is refused.
    Granted(Grant),
}

impl std::fmt::Debug for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Approval::Pending => f.write_str("Pending"),
            Approval::Prompt(_) => f.write_str("Prompt"),
            Approval::Defer => f.write_str("Defer"),
            Approval::Granted(g) => write!(f, "Granted({:?})", g.binding),
        }
    }
}

/// One approved call. Only the runner's own code makes one: from a verified, signed approval (a worker), or from
/// a human's answer to a request this process made ([`Grant::from_error`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    binding: Binding,
}

impl Grant {
    /// The grant of a verified approval record's binding.
    pub fn of(binding: Binding) -> Grant {
        Grant { binding }
    }

    /// The grant of the call an [`Approval::Defer`] answer was about, once a human accepted it.
    pub fn from_error(e: &CallError) -> Option<Grant> {
        let b = e.detail(Detail::Binding)?;
        serde_json::from_value(b.clone()).ok().map(|binding| Grant { binding })
    }

    pub fn binding(&self) -> &Binding {
        &self.binding
    }
}

/// A call that waits for a human.
#[derive(Debug, Clone)]
pub struct Request {
    pub binding: Binding,
    /// The arguments as given (an object, or the argv list): never shown, only run.
    pub args: Value,
    /// The arguments with every resolved secret masked: what is shown and stored in the clear.
    pub masked_args: Value,
    /// The grants (`<tool>_<key>`) the call asks for.
    pub keys: Vec<String>,
    /// The permissions file whose `external_tools.allow` would run the call without asking.
    pub permissions_path: PathBuf,
    pub anima_dir: Option<PathBuf>,
    pub timeout_s: Option<f64>,
    pub max_output: Option<u64>,
}

/// The exact grant that runs a call without asking: `add "<tool>_<key>" to external_tools.allow in <file>`.
pub fn allow_line(keys: &[String], permissions_path: &Path) -> String {
    let grants: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
    format!(
        "add {} to external_tools.allow in {}",
        grants.join(", "),
        permissions_path.display()
    )
}

impl Request {
    /// [`allow_line`] of this call.
    pub fn allow_line(&self) -> String {
        allow_line(&self.keys, &self.permissions_path)
    }

    /// What a human is shown: the anima, the tool, the action and the masked arguments, on a few lines.
    pub fn summary(&self) -> String {
        let b = &self.binding;
        format!(
            "anima: {}\ntool: {} ({} tier, {})\naction: {}\nneeds: {}\narguments: {}",
            b.anima.as_deref().unwrap_or("(none)"),
            b.tool,
            b.tier,
            b.tool_path,
            b.action,
            self.keys.join(", "),
            self.masked_args,
        )
    }
}

/// A filed request, as its caller is told of it.
#[derive(Debug, Clone)]
pub struct Ticket {
    pub id: String,
    /// RFC 3339, UTC.
    pub expires_at: String,
    /// The command a human runs to approve it.
    pub approve: String,
}

/// Where pending requests are filed and signed (`awt_tasks::approvals`: the runner's key, its data dir or the
/// Postgres rows). Installed once by the binary; without one, an asking gate refuses as before.
pub trait Desk: Send + Sync {
    fn file(&self, runner: &Runner, req: &Request) -> Result<Ticket, CallError>;
}

static DESK: OnceLock<Box<dyn Desk>> = OnceLock::new();

/// Install the process's desk (the first call wins).
pub fn install(desk: Box<dyn Desk>) {
    let _ = DESK.set(desk);
}

/// What the gate (with `ask`) decided for one call: the permissions the call runs under (with the approved grants
/// added, so that a legacy shim does not refuse the subcommand the human approved), or the error to answer.
#[allow(clippy::too_many_arguments)]
pub(crate) fn settle(
    runner: &Runner,
    resolved: &Resolved,
    kind: CallKind,
    action: &str,
    args: &Value,
    masker: &Masker,
    perms: Result<LoadedPermissions, PermissionsError>,
    decide: &dyn Fn(&Result<LoadedPermissions, PermissionsError>) -> Decision,
    opts: &super::CallOptions,
    to_error: &dyn Fn(Decision) -> Result<(), CallError>,
) -> Result<Result<LoadedPermissions, PermissionsError>, CallError> {
    let first = decide(&perms);
    let permissions_path = match &first {
        Decision::Deny(r) => r.permissions_path.clone(),
        Decision::Allow => PathBuf::new(),
    };
    let asked = match (&first, &perms) {
        (Decision::Deny(r), Ok(p)) if r.kind == RefusalKind::GrantMissing => {
            let settings = runner.settings().map(|s| s.approvals.clone()).unwrap_or_default();
            r.key
                .as_deref()
                .is_some_and(|k| approval::asks(&p.permissions, &settings, resolved.file.tier, k))
                .then_some(settings)
        }
        _ => None,
    };
    let Some(settings) = asked else {
        to_error(first)?;
        return Ok(perms);
    };
    // Each gated word of a legacy argv may ask on its own: the call runs only when every one that refuses asks.
    let mut extended = perms;
    let mut keys = Vec::new();
    let mut d = first;
    for _ in 0..64 {
        let (key, p) = match (&d, &mut extended) {
            (Decision::Deny(r), Ok(p)) if r.kind == RefusalKind::GrantMissing => match r.key.clone() {
                Some(k) if approval::asks(&p.permissions, &settings, resolved.file.tier, &k) => (k, p),
                _ => break,
            },
            _ => break,
        };
        p.permissions.external_tools.allow.push(key.clone());
        keys.push(key);
        d = decide(&extended);
    }
    to_error(d)?;
    let tool_sha256 = approval::tool_sha256(&resolved.file).map_err(|e| {
        CallError::new(
            ErrorCode::PermissionDenied,
            format!(
                "cannot read the tool file {} to bind an approval to it: {e}",
                resolved.file.path.display()
            ),
        )
        .with(Detail::Tool, resolved.file.name.clone())
        .with(Detail::Reason, "approval_unavailable")
    })?;
    let binding = Binding {
        anima: runner.dirs.anima_name(),
        tool: resolved.file.name.clone(),
        tier: resolved.file.tier,
        tool_path: resolved.file.path.to_string_lossy().into_owned(),
        tool_sha256,
        action: action.to_owned(),
        kind,
        args_sha256: approval::args_sha256(kind, args),
    };
    let refused = |reason: &str, message: String| {
        CallError::new(ErrorCode::PermissionDenied, message)
            .with(Detail::Tool, resolved.file.name.clone())
            .with(Detail::Action, action.to_owned())
            .with(Detail::Reason, reason.to_owned())
            .with(Detail::Key, keys.join(","))
    };
    let request = || Request {
        binding: binding.clone(),
        args: args.clone(),
        masked_args: masker.mask_value(args),
        keys: keys.clone(),
        permissions_path: permissions_path.clone(),
        anima_dir: runner.dirs.anima.clone(),
        timeout_s: opts.timeout.map(|t| t.as_secs_f64()),
        max_output: opts.max_output,
    };
    match &opts.approval {
        Approval::Granted(g) if g.binding == binding => Ok(extended),
        Approval::Granted(g) => Err(refused(
            "approval_mismatch",
            format!(
                "the approval does not cover this call: it was given for {} of '{}' with other {}",
                g.binding.action,
                g.binding.tool,
                mismatch(&g.binding, &binding)
            ),
        )
        .hint("a changed argument, tool file or anima is a new call: ask again")),
        Approval::Prompt(ask) => {
            if ask(&request()) {
                Ok(extended)
            } else {
                Err(refused(
                    "approval_declined",
                    format!(
                        "{action} of tool '{}' was not approved at the prompt",
                        resolved.file.name
                    ),
                )
                .hint(format!(
                    "answer y at the prompt to run it once; to run it without asking, {}",
                    allow_line(&keys, &permissions_path)
                )))
            }
        }
        Approval::Defer => Err(pending_error(resolved, action, &keys, None)
            .with(Detail::Binding, serde_json::to_value(&binding).unwrap_or(Value::Null))),
        Approval::Pending => match DESK.get() {
            Some(desk) => {
                let ticket = desk.file(runner, &request())?;
                Err(pending_error(resolved, action, &keys, Some(&ticket)))
            }
            None => {
                // No desk in this process (a library caller): the refusal stands.
                Err(refused(
                    "grant_missing",
                    format!(
                        "{action} of tool '{}' asks a human's approval, and this program cannot file a request: {} \
                         to run it",
                        resolved.file.name,
                        allow_line(&keys, &permissions_path)
                    ),
                ))
            }
        },
    }
}

fn mismatch(a: &Binding, b: &Binding) -> &'static str {
    if a.args_sha256 != b.args_sha256 {
        "arguments"
    } else if a.tool_sha256 != b.tool_sha256 || a.tool_path != b.tool_path || a.tier != b.tier {
        "tool file"
    } else if a.anima != b.anima {
        "anima"
    } else {
        "action"
    }
}

fn pending_error(resolved: &Resolved, action: &str, keys: &[String], ticket: Option<&Ticket>) -> CallError {
    let tool = &resolved.file.name;
    let mut e = CallError::new(
        ErrorCode::ApprovalPending,
        match ticket {
            Some(t) => format!(
                "{action} of tool '{tool}' needs a human's approval: request {} waits until {}; approved, it runs once \
                 in the background and the anima is notified in its inbox",
                t.id, t.expires_at
            ),
            None => format!("{action} of tool '{tool}' needs a human's approval"),
        },
    )
    .with(Detail::Tool, tool.clone())
    .with(Detail::Action, action.to_owned())
    .with(Detail::Reason, "approval_pending")
    .with(Detail::Key, keys.join(","));
    if let Some(t) = ticket {
        e = e
            .hint(format!(
                "a human approves with `{}` (or denies with `animaworks-tool approvals deny {}`)",
                t.approve, t.id
            ))
            .with(Detail::ApprovalId, t.id.clone())
            .with(Detail::Approve, t.approve.clone())
            .with(Detail::ExpiresAt, t.expires_at.clone());
    }
    e
}
