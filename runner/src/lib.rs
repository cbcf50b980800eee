//! # animaworks-tool
//!
//! Runs tools written in any language (protocol.md at the repository root is the contract). The binary is a thin
//! layer over this library.
//!
//! ## The path of one call
//! A call is a value that only the pipeline in [`call`] can build; every entry point (the generated CLI, `call`,
//! a legacy argv, `submit`, the task worker, `run-pending`, `use-tool`, MCP, `check`) goes through it:
//! 1. **discover + describe** ([`Runner::open`]): the tier folders are searched ([`discover`]) and the tool's
//!    `--schemas` read from the [`cache`] when the file is unchanged, else probed once ([`probe`], [`manifest`]).
//! 2. **pick the action** ([`call::Tool::action`]); the generated CLI parses its flags with
//!    [`call::Target::parse_flags`] ([`flags`]).
//! 3. **prepare** ([`call::Target::prepare`], or [`call::Tool::prepare_cli`] for a legacy `cli_main` argv): the
//!    arguments are checked against the `input_schema` ([`validate`]), the gate decides ([`policy::gate`]),
//!    credentials are resolved ([`policy::credentials`]), the environment is built ([`policy::env`]: clean, or the
//!    caller's for AnimaWorks modules, [`tool_env`]) from the [`settings`], the masker made, the audit log opened. The result is a [`call::PreparedCall`].
//! 4. **spawn** ([`spawn`]'s `start_tool_async`, which only a prepared call reaches): the one place a file becomes a
//!    process — its own group, registered with the [`guardian`] so it dies with the runner — or a persistent
//!    worker of the [`pool`] pool.
//! 5. **stream** ([`stream::drive`]): the request goes in; stdout and stderr are drained concurrently; events
//!    reach the caller's [`stream::Observer`] as they arrive; the deadline and cancellation are watched.
//! 6. **reap** ([`reap`]): SIGTERM to the group, a grace period, SIGKILL, and every member reaped.
//! 7. **outcome** ([`call::PreparedCall::run`]): the exit becomes a result or an error ([`stream::interpret`]),
//!    secrets are masked, the result is held to the `output_schema`, and one audit line is written.
//!
//! Every attempt writes exactly one audit line, including an unknown tool or action, bad arguments and refusals.
//!
//! ## Around it
//! - [`pool`]: long-lived callers keep persistent tool processes (protocol.md §9); a prepared call borrows one.
//! - [`tasks`]: background tasks — a file store, a detached worker, AnimaWorks' pending queue.
//! - [`llm`]: AnimaWorks' `use_tool`, the MCP server, provider schemas, the catalogue they share.
//! - [`check`], [`scaffold`]: `check` and `new` for tool authors; [`pyshim`]: the embedded Python shim.
//! - [`cli`]: the thin command line over all of it.

// Why: a failed call carries its context (message, hint, details) to the user; errors are rare and never on a
// hot loop, so boxing them would buy nothing measurable.
#![allow(clippy::result_large_err)]

pub(crate) mod broker;
pub mod cache;
pub mod call;
pub mod check;
pub mod cli;
pub mod confined;
pub mod dirs;
pub mod discover;
pub mod env_vars;
pub mod error;
pub mod flags;
pub mod fsread;
pub mod guardian;
pub mod limits;
pub mod llm;
pub mod locale;
pub mod manifest;
pub mod mcp_servers;
pub mod names;
pub mod owned;
pub mod policy;
pub mod pool;
pub mod probe;
pub mod process;
#[cfg(test)]
mod proptests;
pub mod pyshim;
pub mod reap;
pub mod resources;
pub mod sandbox;
pub mod scaffold;
pub mod settings;
pub mod spawn;
pub mod spill;
pub mod stream;
pub mod suggest;
pub(crate) mod sys;
pub mod tasks;
pub mod tool_env;
pub mod validate;

pub use call::{CallOptions, Resolved, Runner};
pub use dirs::{DirOptions, Dirs};
pub use error::{CallError, Detail, ErrorCode};
