//! The closed set of outcomes a call can end with (protocol.md §6), each with its own exit code.

use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;

/// Why a call did not produce a result. The set is closed: callers match on it and exit codes derive from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The tool ran and reported its own failure.
    ToolError,
    /// The runner's own command line is wrong.
    Usage,
    /// No tool of that name in any tier.
    UnknownTool,
    /// The tool has no such action, or its `--schemas` failed.
    UnknownAction,
    /// The arguments do not match the action's `input_schema`.
    InvalidArguments,
    /// A permission rule or a gate refused the call.
    PermissionDenied,
    /// The deadline passed and the tool's process group was ended.
    Timeout,
    /// The caller cancelled the call.
    Cancelled,
    /// The tool could not be started.
    SpawnFailed,
    /// The tool's stdout broke the protocol.
    BadOutput,
    /// The tool died by a signal or exited non-zero without a protocol error.
    Crashed,
    /// The result passed the output cap; the whole output is in a file.
    OutputCapped,
    /// The runner itself failed.
    Internal,
    /// A gated action that asks a human: the call did not run; a request waits for approval.
    ApprovalPending,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::ToolError,
        ErrorCode::Usage,
        ErrorCode::UnknownTool,
        ErrorCode::UnknownAction,
        ErrorCode::InvalidArguments,
        ErrorCode::PermissionDenied,
        ErrorCode::Timeout,
        ErrorCode::Cancelled,
        ErrorCode::SpawnFailed,
        ErrorCode::BadOutput,
        ErrorCode::Crashed,
        ErrorCode::OutputCapped,
        ErrorCode::Internal,
        ErrorCode::ApprovalPending,
    ];

    /// The process exit code of `animaworks-tool` for this outcome.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorCode::ToolError => 1,
            ErrorCode::Usage => 2,
            ErrorCode::UnknownTool => 3,
            ErrorCode::UnknownAction => 4,
            ErrorCode::InvalidArguments => 5,
            ErrorCode::PermissionDenied => 6,
            ErrorCode::Timeout => 7,
            ErrorCode::Cancelled => 8,
            ErrorCode::SpawnFailed => 9,
            ErrorCode::BadOutput => 10,
            ErrorCode::Crashed => 11,
            ErrorCode::OutputCapped => 12,
            ErrorCode::Internal => 13,
            ErrorCode::ApprovalPending => 14,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ToolError => "tool_error",
            ErrorCode::Usage => "usage",
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::UnknownAction => "unknown_action",
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::SpawnFailed => "spawn_failed",
            ErrorCode::BadOutput => "bad_output",
            ErrorCode::Crashed => "crashed",
            ErrorCode::OutputCapped => "output_capped",
            ErrorCode::Internal => "internal",
            ErrorCode::ApprovalPending => "approval_pending",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The keys of [`CallError::details`] (protocol.md §6, and the runner's own refusal fields), so that the code that
/// writes a detail and the code that reads it can never disagree on its spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Detail {
    /// The tool's name.
    Tool,
    /// The action's name.
    Action,
    /// The tool's exit code.
    ExitCode,
    /// The signal that ended the tool (`SIGKILL`, …).
    Signal,
    /// The bounded tail of the tool's stderr.
    StderrTail,
    /// The first characters of a stdout that broke the protocol.
    StdoutHead,
    /// How long the call ran.
    DurationMs,
    /// A file: the whole output of a capped result, a settings file at fault.
    Path,
    /// The size of a capped output.
    Bytes,
    /// The JSON pointer of an invalid argument or result value.
    Pointer,
    /// A tool error's own data.
    Data,
    /// A tool error's own code.
    ToolCode,
    /// Why a gate or a check refused, as a stable word (`grant_missing`, `sandbox_not_granted`, …).
    Reason,
    /// The permissions key (or credential key) a refusal is about.
    Key,
    /// The permissions file a refusal read.
    PermissionsPath,
    /// The closest existing name to an unknown tool or action.
    DidYouMean,
    /// Every problem found in the arguments.
    Problems,
    /// A result that does not match the action's `output_schema`.
    Result,
    /// The id of an approval request (`approval_pending`).
    ApprovalId,
    /// The command a human runs to approve it.
    Approve,
    /// When the request expires (RFC 3339).
    ExpiresAt,
    /// What an approval would bind ([`crate::call::approve::Grant::from_error`]).
    Binding,
}

impl Detail {
    /// The key as it appears in the error object.
    pub fn as_str(self) -> &'static str {
        match self {
            Detail::Tool => "tool",
            Detail::Action => "action",
            Detail::ExitCode => "exit_code",
            Detail::Signal => "signal",
            Detail::StderrTail => "stderr_tail",
            Detail::StdoutHead => "stdout_head",
            Detail::DurationMs => "duration_ms",
            Detail::Path => "path",
            Detail::Bytes => "bytes",
            Detail::Pointer => "pointer",
            Detail::Data => "data",
            Detail::ToolCode => "tool_code",
            Detail::Reason => "reason",
            Detail::Key => "key",
            Detail::PermissionsPath => "permissions_path",
            Detail::DidYouMean => "did_you_mean",
            Detail::Problems => "problems",
            Detail::Result => "result",
            Detail::ApprovalId => "approval_id",
            Detail::Approve => "approve",
            Detail::ExpiresAt => "expires_at",
            Detail::Binding => "binding",
        }
    }
}

/// A failed call: a code, a message that says what was wrong, a hint that says what to do, and details.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    pub code: ErrorCode,
    pub message: String,
    pub hint: Option<String>,
    /// Optional fields of protocol.md §6, keyed by [`Detail::as_str`]; written with [`CallError::with`].
    pub details: Map<String, Value>,
}

impl CallError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CallError {
            code,
            message: message.into(),
            hint: None,
            details: Map::new(),
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn with(mut self, key: Detail, value: impl Into<Value>) -> Self {
        self.details.insert(key.as_str().to_owned(), value.into());
        self
    }

    pub fn detail(&self, key: Detail) -> Option<&Value> {
        self.details.get(key.as_str())
    }

    /// The `{"error": {...}}` object printed on stdout (protocol.md §6).
    pub fn to_json(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("code".into(), self.code.as_str().into());
        obj.insert("message".into(), self.message.clone().into());
        if let Some(h) = &self.hint {
            obj.insert("hint".into(), h.clone().into());
        }
        for (k, v) in &self.details {
            obj.insert(k.clone(), v.clone());
        }
        let mut outer = Map::new();
        outer.insert("error".into(), Value::Object(obj));
        Value::Object(outer)
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if let Some(h) = &self.hint {
            write!(f, " (hint: {h})")?;
        }
        Ok(())
    }
}

impl std::error::Error for CallError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct_and_nonzero() {
        let mut seen = std::collections::HashSet::new();
        for c in ErrorCode::ALL {
            assert!(c.exit_code() != 0);
            assert!(seen.insert(c.exit_code()), "{c} reuses an exit code");
            assert_eq!(serde_json::to_value(c).unwrap(), Value::from(c.as_str()));
        }
    }
}
