//! `submit` and `task …`: background tasks (filled by the background-tasks work).

use crate::call::Runner;
use clap::{Args, Subcommand};

/// `submit <tool> <action> [--param …|--json …]` or `submit <tool> <argv…>` for cli_main modules.
#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// Refuse (instead of warning) when the action is not background-eligible.
    #[arg(long)]
    pub strict: bool,
    pub tool: String,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

#[derive(Args, Debug)]
pub struct TaskArgs {
    #[command(subcommand)]
    pub cmd: TaskCmd,
}

#[derive(Subcommand, Debug)]
pub enum TaskCmd {
    /// List tasks.
    List {
        #[arg(long)]
        status: Option<String>,
    },
}

pub async fn submit(_runner: &Runner, _args: SubmitArgs) -> i32 {
    eprintln!("animaworks-tool: submit is not built yet");
    crate::ErrorCode::Usage.exit_code()
}

pub async fn task(_runner: &Runner, _args: TaskArgs) -> i32 {
    eprintln!("animaworks-tool: task is not built yet");
    crate::ErrorCode::Usage.exit_code()
}
