//! The audit line of one attempt. Every attempt writes exactly one: a failure before the tool starts (unknown
//! tool or action, bad arguments, a refusal) where it happens, a prepared call when it ends.

use super::Runner;
use crate::error::{CallError, Detail, ErrorCode};
use crate::policy::audit::{AuditLog, AuditRecord};
use crate::policy::gate::{Decision, Refusal, RefusalKind};
use crate::policy::Masker;
use crate::tier::Tier;
use serde_json::Value;
use std::fs::File;
use std::path::PathBuf;
use std::time::Instant;

/// Who was called with what: the fields every line of one attempt shares.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub tool: String,
    pub tier: Option<Tier>,
    /// The action, or `cli` for a legacy argv.
    pub action: Option<String>,
    /// Unmasked; masked when written.
    pub args: Value,
    pub started: Instant,
    /// The sandbox planned for it, once it is known (docs/sandbox.md).
    pub sandbox: Option<Value>,
    /// The environment policy it ran (or would have run) under (protocol.md §8).
    pub env: &'static str,
    /// The credentials granted and refused (names), once decided.
    pub credentials: Option<Value>,
    /// The broker's answers, when the call has one.
    pub brokered: Option<crate::broker::Ledger>,
}

impl Attempt {
    pub fn new(tool: &str, tier: Option<Tier>, action: Option<&str>, args: Value) -> Attempt {
        Attempt {
            tool: tool.to_owned(),
            tier,
            action: action.map(str::to_owned),
            args,
            started: Instant::now(),
            sandbox: None,
            env: crate::policy::env::EnvPolicy::Clean.as_str(),
            credentials: None,
            brokered: None,
        }
    }

    /// Record an attempt that ended before a tool started, and hand its error back.
    pub fn failed(&self, runner: &Runner, e: CallError, masker: &Masker) -> CallError {
        let decision = decision_of(&e);
        let ms = self.started.elapsed().as_millis() as u64;
        write(
            runner,
            None,
            self,
            &decision,
            ms,
            e.code.as_str(),
            Some(e.code.exit_code()),
            masker,
        );
        e
    }
}

/// The audit file of one prepared call, opened when it was prepared.
pub(crate) struct Handle {
    pub file: Option<File>,
    /// The call has started and its line is not written yet: dropped now (a future dropped mid-call, as when an
    /// MCP client goes away), it writes the line of a cancelled call.
    pub running: bool,
}

impl Handle {
    /// Open the audit log now. A call whose line cannot be written is refused when its action is gated ("no
    /// audit, no call"); others run, with a warning.
    pub fn open(runner: &Runner, gated: bool) -> Result<Handle, CallError> {
        let log = runner.audit_log();
        match log.open() {
            Ok(f) => Ok(Handle {
                file: Some(f),
                running: false,
            }),
            Err(e) if gated => Err(CallError::new(
                ErrorCode::PermissionDenied,
                format!("the audit log {} cannot be written: {e}", log.path().display()),
            )
            .hint("a gated action runs only when its call can be audited: fix the audit log's folder or file")
            .with(Detail::Reason, "audit_unavailable")
            .with(Detail::Path, log.path().to_string_lossy().into_owned())),
            Err(e) => {
                tracing::warn!("the audit log {} cannot be written: {e}", log.path().display());
                Ok(Handle {
                    file: None,
                    running: false,
                })
            }
        }
    }
}

/// The decision an error stands for: a refusal of the gate or of a missing credential, else allowed.
fn decision_of(e: &CallError) -> Decision {
    if !matches!(e.code, ErrorCode::PermissionDenied | ErrorCode::ApprovalPending) {
        return Decision::Allow;
    }
    let kind = match e.detail(Detail::Reason).and_then(Value::as_str) {
        Some("permissions_unusable") => RefusalKind::PermissionsUnusable,
        Some("tool_denied") => RefusalKind::ToolDenied,
        Some("tool_not_allowed") => RefusalKind::ToolNotAllowed,
        Some("grant_denied") => RefusalKind::GrantDenied,
        Some("credential_missing") => RefusalKind::CredentialMissing,
        Some("credential_not_granted") => RefusalKind::CredentialNotGranted,
        Some("shadow_grants") => RefusalKind::ShadowGrants,
        Some("sandbox_not_granted") => RefusalKind::SandboxNotGranted,
        Some("sandbox_unsupported") => RefusalKind::SandboxUnsupported,
        Some("sandbox_invalid" | "sandbox_grants_invalid") => RefusalKind::SandboxInvalid,
        Some("not_background_eligible") => RefusalKind::NotBackgroundEligible,
        _ => RefusalKind::GrantMissing,
    };
    Decision::Deny(Refusal {
        kind,
        message: e.message.clone(),
        hint: e.hint.clone().unwrap_or_default(),
        key: e.detail(Detail::Key).and_then(Value::as_str).map(str::to_owned),
        permissions_path: PathBuf::new(),
    })
}

/// The line of an attempt that ran (or was refused after it was prepared).
pub(crate) fn outcome(
    runner: &Runner,
    handle: &mut Handle,
    a: &Attempt,
    out: Result<Option<i32>, &CallError>,
    masker: &Masker,
) {
    handle.running = false;
    let ms = a.started.elapsed().as_millis() as u64;
    match out {
        Ok(exit) => {
            let outcome = if exit.unwrap_or(0) == 0 { "ok" } else { "exit_nonzero" };
            write(
                runner,
                handle.file.as_mut(),
                a,
                &Decision::Allow,
                ms,
                outcome,
                exit,
                masker,
            )
        }
        Err(e) => {
            let exit = e
                .detail(Detail::ExitCode)
                .and_then(Value::as_i64)
                .map(|c| c as i32)
                .or(Some(e.code.exit_code()));
            write(
                runner,
                handle.file.as_mut(),
                a,
                &decision_of(e),
                ms,
                e.code.as_str(),
                exit,
                masker,
            )
        }
    }
}

/// The line of a call whose future was dropped before it ended (its process group is ended by the drop).
pub(crate) fn abandoned(runner: &Runner, handle: &mut Handle, a: &Attempt, masker: &Masker) {
    if handle.running {
        let e = CallError::new(ErrorCode::Cancelled, "the call was dropped before it ended");
        outcome(runner, handle, a, Err(&e), masker);
    }
}

#[allow(clippy::too_many_arguments)]
fn write(
    runner: &Runner,
    file: Option<&mut File>,
    a: &Attempt,
    decision: &Decision,
    ms: u64,
    outcome: &str,
    exit: Option<i32>,
    masker: &Masker,
) {
    let mut rec = AuditRecord::new(
        runner.dirs.anima_name().as_deref(),
        &a.tool,
        a.action.as_deref(),
        a.tier,
        decision,
        ms,
        outcome,
        exit,
        a.args.clone(),
    );
    rec.sandbox = a.sandbox.clone();
    rec.env = a.env;
    rec.credentials = a.credentials.clone().map(|mut c| {
        if let Some(l) = &a.brokered {
            c["brokered"] = l.to_value();
        }
        c
    });
    let log = runner.audit_log();
    let res = match file {
        Some(f) => AuditLog::append_to(f, log.path(), &rec, masker),
        None => log.append(&rec, masker),
    };
    if let Err(e) = res {
        tracing::warn!("could not append to the audit log: {e}");
    }
}
