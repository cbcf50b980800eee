//! Integration tests of the `animaworks-tool` binary: real processes, real files, real pipes (each library crate
//! tests itself in crates/<crate>/tests).
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
mod hardening;
mod hidden_by_construction;
mod dropin_table;
mod events_content;
mod init;
mod layers;
mod legacy_tools;
mod limits;
mod llm;
mod manual;
mod mcp;
mod mcp_clients;
mod mcp_forward;
mod mcp_content;
mod mcp_real_servers;
mod mcp_servers;
mod output;
mod pinned;
mod pipeline;
mod policy_paths;
mod processes;
mod provider_shapes;
mod sandbox;
mod sandbox_data_dir;
mod special_files;
mod startup;
mod tasks;
mod tasks_pg;
mod transcripts;
