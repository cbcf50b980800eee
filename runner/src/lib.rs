//! # animaworks-tool
//!
//! Runs tools written in any language (protocol.md at the repository root is the contract). The binary is a thin
//! layer over this library.
//!
//! ## The path of one call
//! 1. **discover** ([`discover`]): the tier folders are scanned (core, common, personal); the name picks one file.
//! 2. **describe** ([`probe`], [`cache`], [`manifest`]): its `--schemas` comes from the cache when the file is
//!    unchanged, else the tool is probed once and the answer stored.
//! 3. **validate** ([`validate`]): the arguments are checked against the action's `input_schema`.
//! 4. **permit** ([`policy`]): permissions and gates decide; credentials are resolved; the environment is built
//!    (clean, or the caller's for AnimaWorks modules: [`tool_env`]).
//! 5. **spawn** ([`spawn`]): the one place a file becomes a process — its own group, registered with the
//!    [`guardian`] so it dies with the runner.
//! 6. **stream** ([`stream`]): the request goes in; stdout and stderr are drained concurrently; events reach the
//!    caller's [`stream::Observer`] as they arrive; the deadline and cancellation are watched.
//! 7. **reap** ([`reap`]): SIGTERM to the group, a grace period, SIGKILL, and every member reaped.
//!
//! [`call::Runner::call`] runs these steps; every entry point (CLI, `use-tool`, MCP, background tasks) uses it.
//!
//! ## Around it
//! - [`workers`]: long-lived callers keep persistent tool processes (protocol.md §9) under [`Runner::run`].
//! - [`tasks`]: background tasks — a file store, a detached worker, AnimaWorks' pending queue.
//! - [`llm`]: AnimaWorks' `use_tool`, the MCP server, provider schemas, the catalogue they share.
//! - [`check`], [`scaffold`]: `check` and `new` for tool authors; [`pyshim`]: the embedded Python shim.
//! - [`cli`]: the thin command line over all of it.

// Why: a failed call carries its context (message, hint, details) to the user; errors are rare and never on a
// hot loop, so boxing them would buy nothing measurable.
#![allow(clippy::result_large_err)]

pub mod cache;
pub mod call;
pub mod check;
pub mod cli;
pub mod dirs;
pub mod discover;
pub mod error;
pub mod guardian;
pub mod llm;
pub mod locale;
pub mod manifest;
pub mod names;
pub mod policy;
pub mod probe;
pub mod pyshim;
pub mod reap;
pub mod scaffold;
pub mod spawn;
pub mod stream;
pub mod tasks;
pub mod tool_env;
pub mod validate;
pub mod workers;

pub use call::{CallOptions, Resolved, Runner};
pub use dirs::{DirOptions, Dirs};
pub use error::{CallError, ErrorCode};
