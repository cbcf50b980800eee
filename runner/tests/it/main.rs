//! Integration tests of the `animaworks-tool` binary and library: real processes, real files, real pipes.
//! One test binary, split into topic modules; `support` builds temporary tiers.

mod support;

mod core;
mod policy_paths;
mod protocol_schema;
mod cache;
mod processes;
mod output;
mod legacy_tools;
mod workers;
mod author;
mod transcripts;
mod llm;
mod tasks;
