//! `use-tool`, `mcp` and `schemas`: LLMs as callers (filled by the LLM-callers work).

use crate::call::Runner;
use clap::Args;

#[derive(Args, Debug)]
pub struct UseToolArgs {
    /// Read one request per line and answer one per line.
    #[arg(long)]
    pub serve: bool,
}

#[derive(Args, Debug)]
pub struct McpArgs {}

#[derive(Args, Debug)]
pub struct SchemasArgs {}

pub async fn use_tool(_runner: &Runner, _args: UseToolArgs) -> i32 {
    eprintln!("animaworks-tool: use-tool is not built yet");
    crate::ErrorCode::Usage.exit_code()
}

pub async fn mcp(_runner: &Runner, _args: McpArgs) -> i32 {
    eprintln!("animaworks-tool: mcp is not built yet");
    crate::ErrorCode::Usage.exit_code()
}

pub async fn schemas(_runner: &Runner, _args: SchemasArgs) -> i32 {
    eprintln!("animaworks-tool: schemas is not built yet");
    crate::ErrorCode::Usage.exit_code()
}
