//! The command line: a thin layer over the library. Parses words, calls [`crate::Runner`], prints, and maps
//! outcomes to exit codes.

pub mod admin;
pub mod args;
pub mod author;
pub mod help;
pub mod list;
pub mod llm;
pub mod render;
pub mod task;

use crate::call::{CallOptions, Runner};
use crate::dirs::{DirOptions, Dirs};
use crate::error::{CallError, ErrorCode};
use crate::stream::{Cancel, Observer};
use clap::{Parser, Subcommand};
use serde_json::Value;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

const AFTER_HELP: &str = "\
Calling tools:
  animaworks-tool <tool> --help                     the tool's actions
  animaworks-tool <tool> <action> [--param value…]  call an action (flags come from its input_schema)
  animaworks-tool <tool> <action> --json '{…}'       arguments as JSON (also @file, or - for stdin)
  animaworks-tool call <tool> <action> --json '{…}'  the uniform form for programs (JSON error on stdout)
  animaworks-tool <tool> <argv…>                    an AnimaWorks module with cli_main: argv passes unchanged

Call options (after the action): --timeout SECONDS, --max-output BYTES, --events (raw event stream).
Exit codes: 0 ok, 1 tool_error, 2 usage, 3 unknown_tool, 4 unknown_action, 5 invalid_arguments,
6 permission_denied, 7 timeout, 8 cancelled, 9 spawn_failed, 10 bad_output, 11 crashed, 12 output_capped,
13 internal. See protocol.md and the README.";

#[derive(Parser, Debug)]
#[command(
    name = "animaworks-tool",
    version,
    about = "Run tools written in any language: three tiers, validated arguments, gates, timeouts, live progress.",
    after_help = AFTER_HELP,
    allow_external_subcommands = true
)]
struct Cli {
    /// A core tools folder (repeatable). Default: $ANIMAWORKS_CORE_TOOLS (colon-separated), else <data dir>/core_tools.
    #[arg(long = "core-dir", value_name = "DIR", global = true)]
    core_dirs: Vec<PathBuf>,
    /// The AnimaWorks data dir. Default: $ANIMAWORKS_DATA_DIR, else ~/.animaworks.
    #[arg(long, value_name = "DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// The calling anima's dir (personal tools, permissions). Default: $ANIMAWORKS_ANIMA_DIR.
    #[arg(long, value_name = "DIR", global = true)]
    anima_dir: Option<PathBuf>,
    /// The Python for .py tools. Default: $ANIMAWORKS_PYTHON, else python3.
    #[arg(long, value_name = "PATH", global = true)]
    python: Option<OsString>,
    /// The schema cache dir. Default: $ANIMAWORKS_TOOL_CACHE_DIR, else <data dir>/cache/animaworks-tool.
    #[arg(long, value_name = "DIR", global = true)]
    cache_dir: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Every tool with its tier, path and actions, and every problem. (`list` is AnimaWorks' `anima list`.)
    Tools {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Print every problem with the tools; exit 1 while there are any.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Forget the schema cache and probe every tool again.
    Refresh,
    /// Call an action: `call <tool> <action> --json '{…}'` (flags work too). Errors are JSON on stdout.
    Call {
        tool: String,
        action: String,
        /// --json JSON|@FILE|-, --param value…, --timeout S, --max-output BYTES, --events
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        rest: Vec<String>,
    },
    /// Run an action in the background; prints a task id at once.
    Submit(task::SubmitArgs),
    /// Watch and control background tasks (`task` is AnimaWorks' own command).
    Jobs(task::TaskArgs),
    /// AnimaWorks' use_tool: {"tool_name", "action", "args"} on stdin, the answer on stdout.
    #[command(name = "use-tool")]
    UseTool(llm::UseToolArgs),
    /// Serve every permitted action as an MCP server over stdio.
    Mcp(llm::McpArgs),
    /// Print every permitted action's schema in a provider's shape.
    Schemas(llm::SchemasArgs),
    /// Write a new, working tool: `new <name> --lang python|rust|bash|node [--dir DIR]`.
    New(author::NewArgs),
    /// The conformance check for tool authors: `check <path> [--json]`.
    Check(author::CheckArgs),
    /// Show the anima's effective permissions, or write permissions.json explicitly.
    Permissions(admin::PermissionsArgs),
    /// Copy a personal tool into the common tier (needs tool_creation.shared).
    Share(admin::ShareArgs),
    #[command(external_subcommand)]
    Tool(Vec<OsString>),
}

/// Run the CLI; returns the process exit code.
pub fn main() -> i32 {
    // Started up front for every command that may start a tool (lazily otherwise); it shares the runner's address
    // space (guardian::start_process), so when it starts does not change what it costs.
    if !matches!(
        std::env::args_os().nth(1).as_deref().and_then(|a| a.to_str()),
        Some("--version" | "-V" | "--help" | "-h" | "help") | None
    ) {
        let _ = crate::guardian::start();
    }
    let cli = fast_parse().unwrap_or_else(Cli::parse);
    init_logging();
    let dirs = Dirs::resolve(&DirOptions {
        core_dirs: cli.core_dirs,
        data_dir: cli.data_dir,
        anima_dir: cli.anima_dir,
        cache_dir: cli.cache_dir,
        python: cli.python,
    });
    let runner = Runner::new(dirs);
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("animaworks-tool: cannot start: {e}");
            return ErrorCode::Internal.exit_code();
        }
    };
    rt.block_on(async move {
        match cli.cmd {
            None => {
                let _ = <Cli as clap::CommandFactory>::command().print_help();
                println!();
                2
            }
            Some(Cmd::Tools { json }) => list::list(&runner, json).await,
            Some(Cmd::Doctor { json }) => list::doctor(&runner, json).await,
            Some(Cmd::Refresh) => list::refresh(&runner).await,
            Some(Cmd::Call { tool, action, rest }) => structured(&runner, &tool, &action, &rest, true).await,
            Some(Cmd::Submit(a)) => task::submit(&runner, a).await,
            Some(Cmd::Jobs(a)) => task::task(&runner, a).await,
            Some(Cmd::UseTool(a)) => llm::use_tool(&runner, a).await,
            Some(Cmd::Mcp(a)) => llm::mcp(&runner, a).await,
            Some(Cmd::Schemas(a)) => llm::schemas(&runner, a).await,
            Some(Cmd::New(a)) => author::new(&runner, a).await,
            Some(Cmd::Check(a)) => author::check(&runner, a).await,
            Some(Cmd::Permissions(a)) => admin::permissions(&runner, a),
            Some(Cmd::Share(a)) => admin::share(&runner, a),
            Some(Cmd::Tool(words)) => tool_form(&runner, words).await,
        }
    })
}

/// Runner commands other than `call` (a test keeps this list equal to clap's).
const COMMANDS: &[&str] = &[
    "tools",
    "doctor",
    "refresh",
    "submit",
    "jobs",
    "use-tool",
    "mcp",
    "schemas",
    "permissions",
    "share",
    "new",
    "check",
    "help",
];

/// The two call forms without global options, parsed without building clap's whole command tree (about a fifth
/// of a one-shot call's own time). Anything else — a global option, a runner command, help — goes to clap.
fn fast_parse() -> Option<Cli> {
    let mut args = std::env::args_os().skip(1);
    let first = args.next()?;
    let first = first.to_str()?;
    if first.starts_with('-') || COMMANDS.contains(&first) {
        return None;
    }
    let cmd = if first == "call" {
        let tool = args.next()?.into_string().ok()?;
        let action = args.next()?.into_string().ok()?;
        let rest = args.map(|a| a.into_string().ok()).collect::<Option<Vec<_>>>()?;
        Cmd::Call { tool, action, rest }
    } else {
        Cmd::Tool(std::iter::once(OsString::from(first)).chain(args).collect())
    };
    Some(Cli {
        core_dirs: Vec::new(),
        data_dir: None,
        anima_dir: None,
        python: None,
        cache_dir: None,
        cmd: Some(cmd),
    })
}

/// The runner's own diagnostics (a cache it cannot write, a group that will not die) go to stderr at `warn`;
/// `ANIMAWORKS_TOOL_LOG=debug` (any tracing filter) shows more.
fn init_logging() {
    let fmt = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time();
    // Why two forms: parsing a filter costs time on every call; the plain level does not.
    let _ = match std::env::var("ANIMAWORKS_TOOL_LOG") {
        Ok(filter) => fmt
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .try_init(),
        Err(_) => fmt.with_max_level(tracing::Level::WARN).try_init(),
    };
}

fn fail(e: &CallError, json_on_stdout: bool) -> i32 {
    render::print_error(e, json_on_stdout);
    e.code.exit_code()
}

/// Cancel on Ctrl-C or SIGTERM: the tool's group is ended the same way as at a deadline.
pub(crate) fn cancel_on_signals() -> Cancel {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, cancel) = Cancel::new();
    // Why the listeners are made here and not in the task: a Ctrl-C between spawning the tool and the task's
    // first poll must already be ours, not the default (which would kill the runner with no answer).
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return cancel;
    };
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        let _ = tx.send(true);
        std::future::pending::<()>().await
    });
    cancel
}

async fn structured(runner: &Runner, tool: &str, action: &str, words: &[String], uniform: bool) -> i32 {
    let json_errors = uniform || !std::io::IsTerminal::is_terminal(&std::io::stdout());
    let resolved = match runner.resolve(tool).await {
        Ok(r) => r,
        Err(e) => return fail(&e, json_errors),
    };
    let act = match runner.action(&resolved, action) {
        Ok(a) => a.clone(),
        Err(e) => {
            if words.iter().any(|w| w == "--help" || w == "-h")
                || action == "--help"
                || action == "-h"
                || action == "help"
            {
                print!("{}", help::tool_help(&resolved));
                return 0;
            }
            return fail(&e, json_errors);
        }
    };
    let (args, flags) = match args::parse(&act, words) {
        Ok(v) => v,
        Err(e) => return fail(&e, json_errors),
    };
    if flags.help {
        print!("{}", help::action_help(&resolved, &act));
        return 0;
    }
    if let Err(e) = crate::validate::check_args(tool, &act, &args) {
        return fail(&e, json_errors);
    }
    if let Err(e) = runner.permit(&resolved, &act) {
        return fail(&e, json_errors);
    }
    let opts = CallOptions {
        timeout: flags.timeout.map(Duration::from_secs_f64),
        max_output: flags.max_output,
        call_id: None,
    };
    let cancel = cancel_on_signals();
    if flags.events {
        let mut obs = render::Events::new();
        let out = runner.run(&resolved, &act, args, &opts, &mut obs, cancel).await;
        obs.finish(&out);
        return match &out {
            Ok(_) => 0,
            Err(e) => {
                render::print_error(e, false);
                e.code.exit_code()
            }
        };
    }
    let mut obs = render::Human::new();
    let out = runner
        .run(&resolved, &act, args, &opts, &mut obs as &mut dyn Observer, cancel)
        .await;
    obs.finish();
    match out {
        Ok(v) => {
            render::print_result(&v);
            0
        }
        Err(e) => fail(&e, json_errors),
    }
}

async fn tool_form(runner: &Runner, words: Vec<OsString>) -> i32 {
    let words: Vec<String> = match words
        .iter()
        .map(|w| w.to_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
    {
        Some(w) => w,
        None => {
            return fail(
                &CallError::new(ErrorCode::Usage, "arguments must be valid UTF-8"),
                false,
            )
        }
    };
    let tool = words[0].as_str();
    let rest = &words[1..];
    let json_errors = !std::io::IsTerminal::is_terminal(&std::io::stdout());
    let resolved = match runner.resolve(tool).await {
        Ok(r) => r,
        Err(e) => return fail(&e, json_errors),
    };
    if resolved.manifest.cli && !rest.is_empty() {
        if let Err(e) = runner.permit_cli(&resolved, rest) {
            return fail(&e, json_errors);
        }
        let timeout = cli_timeout(&resolved, rest);
        let argv: Vec<OsString> = rest.iter().map(OsString::from).collect();
        return match runner.cli(&resolved, &argv, timeout, cancel_on_signals()).await {
            Ok(code) => code,
            Err(e) => fail(&e, json_errors),
        };
    }
    match rest.first().map(String::as_str) {
        None | Some("--help" | "-h" | "help") => {
            print!("{}", help::tool_help(&resolved));
            if rest.is_empty() {
                2
            } else {
                0
            }
        }
        Some(action) => structured(runner, tool, action, &rest[1..], false).await,
    }
}

/// A `cli_main` call's deadline: the longest timeout of the actions its argv names, else the default.
fn cli_timeout(r: &crate::call::Resolved, argv: &[String]) -> Duration {
    let named: Vec<f64> = argv
        .iter()
        .filter_map(|w| r.manifest.action(w))
        .map(|a| a.timeout_s())
        .collect();
    let legacy = r.manifest.legacy_profile.as_ref().and_then(|p| {
        argv.iter()
            .filter_map(|w| p.get(w).or_else(|| p.get(&w.replace('_', "-"))))
            .filter_map(|v| v.get("expected_seconds").and_then(Value::as_f64))
            .map(|e| (3.0 * e).max(crate::manifest::DEFAULT_TIMEOUT_S))
            .reduce(f64::max)
    });
    let secs = named
        .into_iter()
        .chain(legacy)
        .reduce(f64::max)
        .unwrap_or(crate::manifest::DEFAULT_TIMEOUT_S);
    Duration::from_secs_f64(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_knows_every_runner_command() {
        let cmd = <Cli as clap::CommandFactory>::command();
        for sub in cmd.get_subcommands() {
            let name = sub.get_name();
            assert!(
                name == "call" || COMMANDS.contains(&name),
                "{name} is missing from COMMANDS"
            );
        }
    }
}
