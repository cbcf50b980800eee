//! The error a handler returns: [`ToolError`].

use std::fmt;

use serde_json::Value;

use crate::protocol::ToolErrorBody;

/// The tool's own error, sent as the final `error` event of a call (protocol.md §5.2) and reported by the runner
/// as `tool_error`.
///
/// Build one with [`ToolError::new`] and the `with_*` methods, or let `?` convert any
/// [`std::error::Error`] into an error of code [`ToolError::INTERNAL`] whose message is the error and its
/// sources, joined by `": "`.
///
/// Like `anyhow::Error`, `ToolError` does not itself implement [`std::error::Error`]: that is what lets every
/// error type convert into it with `?`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    /// A short, stable, machine-readable code such as `not_found` (snake case by convention).
    pub code: String,
    /// What went wrong, for a person or an LLM.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
    /// Anything else a caller may use, as JSON. (Boxed so that `Result<T, ToolError>` stays small.)
    pub data: Option<Box<Value>>,
}

impl ToolError {
    /// The code of errors converted by `?` and of other failures the tool did not name.
    pub const INTERNAL: &'static str = "internal";
    /// The code of arguments that do not deserialize into the action's argument type.
    pub const INVALID_ARGUMENTS: &'static str = "invalid_arguments";
    /// The code of a handler that panicked.
    pub const PANIC: &'static str = "panic";
    /// The code of a request that names no action of this tool.
    pub const UNKNOWN_ACTION: &'static str = "unknown_action";
    /// The code of a request line that is not a protocol request.
    pub const BAD_REQUEST: &'static str = "bad_request";

    /// An error with a code and a message.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError {
            code: code.into(),
            message: message.into(),
            hint: None,
            data: None,
        }
    }

    /// An error of code [`ToolError::INTERNAL`].
    pub fn internal(message: impl fmt::Display) -> Self {
        ToolError::new(Self::INTERNAL, message.to_string())
    }

    /// An error of code [`ToolError::INVALID_ARGUMENTS`], for checks the argument type cannot express.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        ToolError::new(Self::INVALID_ARGUMENTS, message)
    }

    /// Adds a hint: what the caller should do.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds data. A value that does not serialize is dropped.
    pub fn with_data(mut self, data: impl serde::Serialize) -> Self {
        self.data = serde_json::to_value(data).ok().map(Box::new);
        self
    }

    /// The wire form of this error.
    pub fn to_body(&self) -> ToolErrorBody {
        ToolErrorBody {
            code: Some(self.code.clone()),
            message: self.message.clone(),
            hint: self.hint.clone(),
            data: self.data.as_deref().cloned(),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(err: E) -> Self {
        let mut message = err.to_string();
        let mut source = err.source();
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        ToolError::internal(message)
    }
}

impl From<ToolError> for ToolErrorBody {
    fn from(err: ToolError) -> Self {
        ToolErrorBody {
            code: Some(err.code),
            message: err.message,
            hint: err.hint,
            data: err.data.map(|d| *d),
        }
    }
}

impl ToolError {
    /// The error a tool's `error` line carries (the blanket `From<E: Error>` rules out a `From` impl here).
    pub fn from_body(body: ToolErrorBody) -> Self {
        ToolError {
            code: body.code.unwrap_or_else(|| Self::INTERNAL.to_owned()),
            message: body.message,
            hint: body.hint,
            data: body.data.map(Box::new),
        }
    }
}
