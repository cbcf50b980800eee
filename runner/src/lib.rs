//! # animaworks-tool: the command line
//!
//! The binary is a thin layer over the workspace's crates, from the bottom up: `awt_protocol` (the wire types),
//! `awt_sys` (every `unsafe` block), `awt_core` (the call pipeline: find, validate, permit, confine, spawn,
//! stream, reap), `awt_tasks` (background tasks), `awt_llm` (use_tool, MCP, providers). This crate adds [`cli`],
//! and, for tool authors, [`check`] and [`scaffold`] (`new`).
//!
//! ## The path of one call from the command line
//! 1. [`cli::main`] parses the command line and builds an `awt_core::Runner` (`Runner::open`).
//! 2. `awt_core::call::OpenTool::action` picks the action; `Target::parse_flags` reads its flags.
//! 3. `Target::prepare` validates, permits and confines: a `PreparedCall`, the only thing that starts a tool.
//! 4. `PreparedCall::run` spawns (`awt_core::spawn`), streams to the display ([`cli`]'s renderer), reaps, and
//!    returns the outcome, which [`cli`] prints.

#![forbid(unsafe_code)]
#![allow(clippy::result_large_err)]

pub mod check;
pub mod cli;
#[cfg(test)]
mod proptests;
pub mod scaffold;
