//! Integration tests of the `animaworks-tool` binary and library: real processes, real files, real pipes.
//! One test binary, split into topic modules; `support` builds temporary tiers.

mod pg_cluster;
mod support;

mod animaworks_adapter;
mod approvals;
mod author;
mod cache;
mod cli;
mod confined;
mod core;
mod credentials;
mod dropin;
mod dropin_surface;
mod hidden_by_construction;
mod dropin_table;
mod init;
mod layers;
mod legacy_tools;
mod limits;
mod llm;
mod mcp;
mod mcp_clients;
mod mcp_real_servers;
mod mcp_servers;
mod output;
mod pinned;
mod pipeline;
mod policy;
mod policy_paths;
mod processes;
mod protocol_schema;
mod provider_shapes;
mod sandbox;
mod special_files;
mod startup;
mod tasks;
mod tasks_pg;
mod transcripts;
mod workers;
