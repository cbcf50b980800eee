//! LLMs as callers: AnimaWorks' `use_tool` ([`use_tool`]), provider function-calling schemas ([`providers`]) and an
//! MCP server ([`mcp`]). All three list what [`catalog`] finds and call through the same
//! resolve → validate → permit → run path as the CLI.
//!
//! ## The path of one call from an LLM
//! 1. [`catalog::permitted`]: the tools this anima may call (discovered, described, gated), for the listings of
//!    [`use_tool::schema`], [`providers::render`] and the MCP server's `tools/list` ([`mcp::serve`]).
//! 2. A request ([`use_tool::parse_request`], or an MCP `tools/call`) names a tool and an action;
//!    [`use_tool::answer`] opens it (`awt_core::Runner::open`), prepares it (`Target::prepare`: validated,
//!    permitted, confined) and runs it (`PreparedCall::run`).
//! 3. The outcome becomes the caller's shape: AnimaWorks' answer text ([`use_tool::result_text`],
//!    [`use_tool::render_error`]) or an MCP result ([`mcp::failure`] for an error); a long call may run as a
//!    background task ([`background`], `awt_tasks`).

#![forbid(unsafe_code)]

pub mod annotations;
pub mod background;
pub mod catalog;
pub mod content;
mod elicit;
pub mod lines;
pub mod mcp;
mod mcp_front;
pub mod providers;
pub mod services;
pub mod use_tool;

use awt_core::error::{CallError, ErrorCode};
use futures::FutureExt;

/// Run one request of a long-lived mode (`use-tool --serve`, `mcp`) so that a bug in the runner fails that
/// request only: a panic becomes an `internal` error, and the server answers it and goes on.
pub async fn answered<F: std::future::Future>(f: F) -> Result<F::Output, CallError> {
    std::panic::AssertUnwindSafe(f).catch_unwind().await.map_err(|p| {
        let why = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        CallError::new(ErrorCode::Internal, format!("the runner failed on this request: {why}"))
            .hint("this is a bug of animaworks-tool; please report it with the request")
    })
}
