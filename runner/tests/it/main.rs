//! Integration tests of the `animaworks-tool` binary and library: real processes, real files, real pipes.
//! One test binary, split into topic modules; `support` builds temporary tiers.

mod pg_cluster;
mod support;

mod audit;
mod author;
mod cache;
mod cli;
mod confined;
mod core;
mod credentials;
mod dropin;
mod dropin_surface;
mod hardening;
mod init;
mod layers;
mod legacy_tools;
mod limits;
mod llm;
mod mcp;
mod mcp_clients;
mod mcp_servers;
mod output;
mod pipeline;
mod pipeline_review;
mod policy_paths;
mod processes;
mod protocol_schema;
mod provider_shapes;
mod review;
mod sandbox;
mod secrets_hardening;
mod startup;
mod tasks;
mod tasks_pg;
mod transcripts;
mod workers;
