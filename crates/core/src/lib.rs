//! # animaworks-tool-core: the call pipeline
//!
//! Discovery, settings, policy, sandbox planning, spawn, stream and the worker pool. A call is a value that only
//! the pipeline in [`call`] can build; every entry point (the generated CLI, `call`, a legacy argv, `submit`, the
//! task worker, `use-tool`, MCP, `check`) goes through it, and this crate's API starts a tool's process from
//! nothing else, with one exception: the `--schemas` probe of a discovered file ([`probe::probe`]), confined as
//! its tier's probes are, which describes a tool and runs no action. It has no `unsafe` code: the kernel work is
//! `awt_sys`'s, behind plain specs.
//!
//! ## The path of one call
//! 1. **find** ([`Runner::open`] → [`discover::scan`]): the tier folders are searched and the tool's `--schemas`
//!    read from the [`cache`] when the file is unchanged, else probed ([`probe::manifest`], [`manifest::parse`]).
//! 2. **pick the action** ([`call::OpenTool::action`]); the generated CLI parses flags ([`call::Target::parse_flags`]).
//! 3. **validate** ([`call::Target::prepare`] → [`validate`]) against the action's `input_schema`.
//! 4. **permit** ([`policy::decide`]: the gate; [`policy::credentials`] and the [`broker`]: the grants).
//! 5. **confine** ([`sandbox::plan`] → [`sandbox::Plan`]; [`resources::CallLimits`]): what the process may touch.
//!    The result of 2–5 is a [`call::PreparedCall`], which only this pipeline builds.
//! 6. **spawn** ([`spawn`]'s `start_tool_async`, reached only from a prepared call): its own process group, registered
//!    with `awt_sys::guardian`, or a persistent worker of the [`pool`].
//! 7. **stream** ([`stream::drive`]) events to the caller's [`stream::Observer`]; deadline and cancel watched.
//! 8. **reap** (`awt_sys::reap`) and **outcome** ([`call::PreparedCall::run`], [`stream::interpret`]): masked,
//!    held to the `output_schema`, one audit line ([`policy::audit`]).

#![forbid(unsafe_code)]
// Why: a failed call carries its context (message, hint, details) to the user; errors are rare and never on a
// hot loop, so boxing them would buy nothing measurable.
#![allow(clippy::result_large_err)]

pub mod animas;
pub mod beneath;
pub mod broker;
pub mod cache;
pub mod call;
pub mod confined;
pub mod dirs;
pub mod discover;
pub mod env_vars;
pub mod error;
pub mod flags;
pub mod fsread;
pub mod hex;
pub mod limits;
pub mod locale;
pub mod manifest;
pub mod mcp_servers;
pub mod names;
pub mod netpolicy;
pub mod owned;
pub mod policy;
pub mod pool;
pub mod probe;
pub mod pyshim;
pub mod resources;
pub mod sandbox;
pub mod schema_size;
pub mod settings;
pub mod spawn;
pub mod spill;
pub mod stream;
pub mod suggest;
pub mod tier;
pub mod validate;
mod width;

pub use call::{CallOptions, Resolved, Runner};
pub use dirs::{DirOptions, Dirs};
pub use error::{CallError, Detail, ErrorCode};
