//! The command line: a thin layer over the library. Parses words, calls [`awt_core::Runner`], prints, and maps
//! outcomes to exit codes.

/// A line on stdout. A closed pipe (`… | head -c1`) ends the output, never the runner with a panic (Rust ignores
/// SIGPIPE, so `say!` would panic there; the runner must ignore it, as it writes into tools' pipes).
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

/// [`say!`] without the newline.
macro_rules! say_raw {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

/// A line on stderr; a closed stderr is no reason to panic either.
macro_rules! tell {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

pub mod admin;
pub mod animaworks;
pub mod approvals;
pub mod author;
pub mod complete;
mod content;
pub mod forward;
pub mod help;
pub mod list;
pub mod llm;
mod log;
pub mod man;
pub mod mcp_servers;
pub mod render;
pub mod task;
pub mod term;
pub mod usage;
pub mod signals;
pub mod version;
pub mod words;

use awt_core::call::{CallOptions, Runner};
use awt_core::env_vars;
use awt_core::dirs::{DirOptions, Dirs};
use awt_core::error::{CallError, ErrorCode};
use clap::{Parser, Subcommand};
use signals::cancel_on_signals;
use words::{COMMANDS, GLOBALS_WITH_VALUE};
use std::ffi::OsString;
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Calling tools:
  animaworks-tool <tool> --help                     the tool's actions
  animaworks-tool <tool> <action> [--param value…]  call an action (flags come from its input_schema)
  animaworks-tool <tool> <action> --json '{…}'       arguments as JSON (also @file, or - for stdin)
  animaworks-tool call <tool> <action> --json '{…}'  the uniform form for programs (JSON error on stdout)
  animaworks-tool <tool> <argv…>                    an AnimaWorks module with cli_main: argv passes unchanged
  animaworks-tool task list | vault get K | …       a word of AnimaWorks' CLI that names no tool runs `animaworks`

Call options (after the action): --timeout SECONDS, --max-output BYTES, --events (raw event stream),
--save-content DIR (write a result's images, audio and resources to files in DIR; else they are described).
Exit codes: 0 ok, 1 tool_error, 2 usage, 3 unknown_tool, 4 unknown_action, 5 invalid_arguments,
6 permission_denied, 7 timeout, 8 cancelled, 9 spawn_failed, 10 bad_output, 11 crashed, 12 output_capped,
13 internal, 14 approval_pending. See protocol.md and docs/ (docs/command-line.md).";

/// [`AFTER_HELP`] and the variables an operator sets, from the registry ([`awt_core::env_vars`]).
/// An option's help that names the variable it defaults to, from the registry: "<what> Default: $VAR<how>, else
/// <its default>" (without a final period, as clap shows a doc comment).
fn from_env(what: &str, var: &env_vars::Var, how: &str) -> String {
    match var.default {
        "" => format!("{what} Default: ${}{how}", var.name),
        d => format!("{what} Default: ${}{how}, else {d}", var.name),
    }
}

fn after_help() -> String {
    format!("{AFTER_HELP}\n\n{}", awt_core::env_vars::help_section().trim_end())
}

#[derive(Parser, Debug)]
#[command(
    name = "animaworks-tool",
    version = version::LINE,
    about = "Run tools written in any language: three tiers, validated arguments, gates, timeouts, live progress.",
    after_help = after_help(),
    allow_external_subcommands = true,
    disable_help_subcommand = true
)]
pub(crate) struct Cli {
    #[arg(long = "core-dir", value_name = "DIR", global = true, help = from_env("A core tools folder (repeatable).", &env_vars::CORE_TOOLS, " (colon-separated)"))]
    core_dirs: Vec<PathBuf>,
    #[arg(long, value_name = "DIR", global = true, help = from_env("The AnimaWorks data dir.", &env_vars::DATA_DIR, ""))]
    data_dir: Option<PathBuf>,
    #[arg(long, value_name = "DIR", global = true, help = from_env("The calling anima's dir (personal tools, permissions).", &env_vars::ANIMA_DIR, ""))]
    anima_dir: Option<PathBuf>,
    #[arg(long, value_name = "PATH", global = true, help = from_env("The Python for .py tools.", &env_vars::PYTHON, ""))]
    python: Option<OsString>,
    #[arg(long, value_name = "DIR", global = true, help = from_env("The schema cache dir.", &env_vars::CACHE_DIR, ""))]
    cache_dir: Option<PathBuf>,
    /// Colour in messages: auto (a terminal, unless NO_COLOR is set; CLICOLOR_FORCE forces it), always, never.
    #[arg(
        long,
        value_name = "WHEN",
        global = true,
        default_value = "auto",
        hide_default_value = true
    )]
    color: term::ColorWhen,
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
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Forget the schema cache and probe every tool again.
    Refresh,
    /// Call an action: `call <tool> <action> --json '{…}'` (flags work too). Errors are JSON on stdout.
    Call {
        /// The tool's name.
        tool: String,
        /// The action (`-` and `_` alike).
        action: String,
        /// --json JSON|@FILE|-, --param value…, --timeout S, --max-output BYTES, --events, --save-content DIR
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        rest: Vec<String>,
    },
    /// Run an action in the background; prints a task id at once.
    Submit(task::SubmitArgs),
    /// Watch and control background tasks (`task` is AnimaWorks' own command).
    Jobs(task::TaskArgs),
    /// Run background tasks from the shared Postgres queue on this machine (until SIGTERM).
    Worker(task::WorkerArgs),
    /// Answer gated calls that ask a human: `approvals list|show|approve|deny <id>`, `approvals prune`.
    Approvals(approvals::ApprovalsArgs),
    /// AnimaWorks' use_tool: {"tool_name", "action", "args"} on stdin, the answer on stdout.
    #[command(name = "use-tool", after_help = llm::USE_TOOL_HELP)]
    UseTool(llm::UseToolArgs),
    /// Serve every permitted action as an MCP server over stdio.
    Mcp(llm::McpArgs),
    /// Print every permitted action's schema in a provider's shape.
    Schemas(llm::SchemasArgs),
    /// Install the packages of MCP servers declared with npx/uvx, to run confined: `mcp-servers install [NAME…]`.
    #[command(name = "mcp-servers")]
    McpServers(mcp_servers::McpServersArgs),
    /// Write a new, working tool: `new <name> --lang python|rust|bash|node [--dir DIR]`.
    New(author::NewArgs),
    /// The conformance check for tool authors: `check <path> [--json]`.
    Check(author::CheckArgs),
    /// Show the anima's effective permissions, or write permissions.json explicitly.
    Permissions(admin::PermissionsArgs),
    /// Copy a personal tool into the common tier (needs tool_creation.shared).
    Share(admin::ShareArgs),
    /// Route AnimaWorks' own server through the runner: `animaworks install|uninstall|status --venv DIR`.
    Animaworks(animaworks::AnimaworksArgs),
    /// Print a shell's completion script (tools, actions and flags come from the schema cache).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: String,
    },
    /// Print a man page (roff), or write every page: `animaworks-tool man --dir ~/.local/share/man/man1`.
    Man(man::ManArgs),
    /// Help on a tool or action (`help <tool> [<action>]`, from its schema) or on a runner command.
    Help {
        /// A tool and action, or a runner command and subcommand.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        topic: Vec<String>,
    },
    /// The runner's version and the tool protocol versions it speaks.
    Version {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    #[command(external_subcommand)]
    Tool(Vec<OsString>),
}

/// Run the CLI; returns the process exit code.
pub fn main() -> i32 {
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new("__mcp-bridge")) {
        let rest: Vec<OsString> = std::env::args_os().skip(2).collect();
        return awt_core::mcp_servers::bridge::main(&rest);
    }
    complete::answer_if_asked(command);
    // Started up front for every command that may start a tool (lazily otherwise); it shares the runner's address
    // space (guardian::start_process), so when it starts does not change what it costs. `submit` starts no tool
    // (its worker is detached, in a session of its own, and guards its own tools): it pays for none.
    if !matches!(
        std::env::args_os().nth(1).as_deref().and_then(|a| a.to_str()),
        Some("--version" | "-V" | "--help" | "-h" | "help" | "version" | "submit") | None
    ) {
        let _ = awt_sys::guardian::start();
    }
    let cli = match fast_parse().map(Ok).unwrap_or_else(parse) {
        Ok(cli) => cli,
        Err(e) => match top_level_help() {
            Some(cli) => return help::top_help(&Dirs::resolve(&dir_options(&cli)), 0, command),
            None => usage::clap_error(e),
        },
    };
    init_logging(matches!(cli.cmd, Some(Cmd::Mcp(_))));
    let fwd = forward::Overrides {
        data_dir: cli.data_dir.as_deref().map(awt_core::dirs::expand_home),
        anima_dir: cli.anima_dir.as_deref().map(awt_core::dirs::expand_home),
    };
    let dirs = Dirs::resolve(&dir_options(&cli));
    let runner = Runner::new(dirs);
    // The settings carry limits, deny paths and the sandbox's defaults: a file that cannot be used stops every
    // command, never leaves it to the defaults. `doctor` reports it with the rest; a call refuses itself (audited);
    // help, version, completions and man read no settings.
    let needs_settings = !matches!(
        cli.cmd,
        None | Some(
            Cmd::Doctor { .. }
                | Cmd::Call { .. }
                | Cmd::Tool(_)
                | Cmd::Version { .. }
                | Cmd::Help { .. }
                | Cmd::Completions { .. }
                | Cmd::Man(_)
        )
    );
    if needs_settings {
        if let Err(e) = runner.settings() {
            return fail(&e, false);
        }
    }
    awt_tasks::approvals::install();
    // Why threads only for the two servers (`use-tool --serve`, `mcp`): their concurrent calls' own work
    // (validation, the gate, the sandbox's plan and namespaces, the audit line) ran on one thread, which limited
    // calls in flight to little more than one (serve) and held MCP's sandboxed calls to one core; a one-shot command pays
    // for no threads it cannot use.
    let serving = matches!(&cli.cmd, Some(Cmd::UseTool(a)) if a.serve) || matches!(&cli.cmd, Some(Cmd::Mcp(_)));
    let rt = if serving {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            tell!("animaworks-tool: cannot start: {e}");
            return ErrorCode::Internal.exit_code();
        }
    };
    // Each command's future is boxed behind `dyn`: a single future over every command would be as large as the
    // largest (the MCP server's), and its poll's stack frame, probed page by page, cost a call page faults.
    let code = rt.block_on(async move {
        let (runner, fwd) = (&runner, &fwd);
        let command = match cli.cmd {
            None => boxed(async move { help::top_help(&runner.dirs, 2, command) }),
            Some(Cmd::Tools { json }) => boxed(async move { list::list(runner, json).await }),
            Some(Cmd::Doctor { json }) => boxed(async move { list::doctor(runner, json).await }),
            Some(Cmd::Refresh) => boxed(async move { list::refresh(runner).await }),
            Some(Cmd::Call { tool, action, rest }) => {
                boxed(async move { structured(runner, &tool, &action, &rest, true).await })
            }
            Some(Cmd::Submit(a)) => boxed(async move { task::submit(runner, a).await }),
            Some(Cmd::Jobs(a)) => boxed(async move { task::task(runner, a).await }),
            Some(Cmd::Worker(a)) => boxed(async move { task::worker(runner, a).await }),
            Some(Cmd::Approvals(a)) => boxed(async move { approvals::approvals(runner, a) }),
            Some(Cmd::UseTool(a)) => boxed(async move { llm::use_tool(runner, a).await }),
            Some(Cmd::Mcp(a)) => boxed(async move { llm::mcp(runner, a).await }),
            Some(Cmd::Schemas(a)) => boxed(async move { llm::schemas(runner, a).await }),
            Some(Cmd::McpServers(a)) => boxed(async move { mcp_servers::mcp_servers(runner, a) }),
            Some(Cmd::New(a)) => boxed(async move { author::new(runner, a).await }),
            Some(Cmd::Check(a)) => boxed(async move { author::check(runner, a).await }),
            Some(Cmd::Permissions(a)) => boxed(async move { admin::permissions(runner, a) }),
            Some(Cmd::Share(a)) => boxed(async move { admin::share(runner, a) }),
            Some(Cmd::Animaworks(a)) => boxed(async move { animaworks::animaworks(runner, a).await }),
            Some(Cmd::Version { json }) => boxed(async move { version::version(json) }),
            Some(Cmd::Help { topic }) if topic.is_empty() => boxed(async move { help::top_help(&runner.dirs, 0, command) }),
            Some(Cmd::Help { topic }) => boxed(async move { help::help(runner, &topic, command).await }),
            Some(Cmd::Completions { shell }) => boxed(async move { complete::completions(&shell) }),
            Some(Cmd::Man(a)) => boxed(async move { man::man(&a, command) }),
            Some(Cmd::Tool(words)) => boxed(async move { tool_form(runner, words, fwd).await }),
        };
        command.await
    });
    drop(rt);
    awt_sys::guardian::shutdown();
    code
}

/// clap's parse, its messages coloured by the runner's policy (`--color` is read first for them).
fn parse() -> Result<Cli, clap::Error> {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(when) = term::color_from_args(&args, GLOBALS_WITH_VALUE, COMMANDS) {
        term::set_color(when);
    }
    let matches = command().color(term::clap_color()).try_get_matches_from(&args)?;
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches)?;
    term::set_color(cli.color);
    Ok(cli)
}

fn boxed<'a>(
    f: impl std::future::Future<Output = i32> + 'a,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = i32> + 'a>> {
    Box::pin(f)
}

/// The command tree clap parses (tools are external subcommands in it).
pub(crate) fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

fn dir_options(cli: &Cli) -> DirOptions {
    DirOptions {
        core_dirs: cli.core_dirs.clone(),
        data_dir: cli.data_dir.clone(),
        anima_dir: cli.anima_dir.clone(),
        cache_dir: cli.cache_dir.clone(),
        python: cli.python.clone(),
    }
}

/// `animaworks-tool [global options] --help|-h|help`: clap's help plus the tools, as the original lists them.
/// Returns the global options when the command line is exactly that.
fn top_level_help() -> Option<Cli> {
    const WITH_VALUE: &[&str] = GLOBALS_WITH_VALUE;
    let args: Vec<OsString> = std::env::args_os().collect();
    let mut i = 1;
    let mut help_at = None;
    while i < args.len() {
        let a = args[i].to_str()?;
        if WITH_VALUE.contains(&a) {
            i += 2;
            continue;
        }
        if WITH_VALUE.iter().any(|o| a.starts_with(&format!("{o}="))) {
            i += 1;
            continue;
        }
        if !matches!(a, "--help" | "-h" | "help") || help_at.is_some() {
            return None;
        }
        help_at = Some(i);
        i += 1;
    }
    let at = help_at?;
    let globals = args.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, a)| a);
    Cli::try_parse_from(globals).ok()
}



impl Cli {
    /// A command line of `cmd` without global options (what the fast parse makes).
    fn bare(cmd: Cmd) -> Cli {
        Cli {
            core_dirs: Vec::new(),
            data_dir: None,
            anima_dir: None,
            python: None,
            cache_dir: None,
            color: term::ColorWhen::Auto,
            cmd: Some(cmd),
        }
    }
}

/// The two call forms and `submit <tool> <action> …` without global options, parsed without building clap's
/// whole command tree (a large part of a one-shot call's own time). Anything else — a global option, a runner
/// command, help — goes to clap.
fn fast_parse() -> Option<Cli> {
    fast_parse_of(std::env::args_os().skip(1))
}

fn fast_parse_of(mut args: impl Iterator<Item = OsString>) -> Option<Cli> {
    let first = args.next()?;
    let first = first.to_str()?;
    if first == "submit" {
        // What clap makes of it: after the tool, the first word not starting with `-` begins `rest`, which takes
        // every word after it as it is (`trailing_var_arg`); a `-` before it (`--strict`, `--help`, `--`, a
        // global option) is clap's to read.
        let words = args.map(|a| a.into_string().ok()).collect::<Option<Vec<String>>>()?;
        let (tool, rest) = words.split_first()?;
        if tool.starts_with('-') || rest.first().is_none_or(|a| a.starts_with('-')) {
            return None;
        }
        return Some(Cli::bare(Cmd::Submit(task::SubmitArgs {
            strict: false,
            tool: tool.clone(),
            rest: rest.to_vec(),
        })));
    }
    // `-- <tool> …`: the tool form even when the tool is named like a runner command (`-- check …`).
    if first == "--" {
        let words: Vec<OsString> = args.collect();
        return (!words.is_empty()).then(|| Cli::bare(Cmd::Tool(words)));
    }
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
    Some(Cli::bare(cmd))
}

/// The runner's own diagnostics (a cache it cannot write, a group that will not die) go to stderr at `warn`, one
/// line each, coloured only on a terminal; `ANIMAWORKS_TOOL_LOG=debug` (any tracing filter) shows more. The MCP
/// server's records carry the time, and the MCP library's own (which dump Rust structures) only at `error`.
fn init_logging(server: bool) {
    let fmt = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(render::color());
    let filter = std::env::var(awt_core::env_vars::LOG.name).ok();
    if server {
        let filter = filter.unwrap_or_else(|| "warn,rmcp=error".into());
        let _ = fmt
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .try_init();
        return;
    }
    // Why two forms: the filter and the formatter's registry cost time on every call; the plain warnings do not.
    match filter {
        Some(filter) => {
            let _ = fmt
                .without_time()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .try_init();
        }
        None => {
            let _ = tracing::subscriber::set_global_default(log::Warnings { ansi: render::color() });
        }
    }
}

fn fail(e: &CallError, json_on_stdout: bool) -> i32 {
    render::print_error(e, json_on_stdout);
    e.code.exit_code()
}


async fn structured(runner: &Runner, tool: &str, action: &str, words: &[String], uniform: bool) -> i32 {
    let json_errors = uniform || !std::io::IsTerminal::is_terminal(&std::io::stdout());
    match runner.open(tool).await {
        Ok(t) => structured_on(t, action, words, json_errors).await,
        Err(e) => fail(&e, json_errors),
    }
}

async fn structured_on(tool: awt_core::call::OpenTool<'_>, action: &str, words: &[String], json_errors: bool) -> i32 {
    let asks_help = matches!(action, "--help" | "-h" | "help")
        || (tool.resolved().manifest.action(action).is_none() && words.iter().any(|w| w == "--help" || w == "-h"));
    if asks_help {
        say_raw!("{}", term::for_stdout(&help::tool_help(tool.runner(), tool.resolved())));
        return 0;
    }
    let target = match tool.action(action) {
        Ok(t) => t,
        Err(e) => return fail(&e, json_errors),
    };
    let (args, flags) = match target.parse_flags(words) {
        Ok(v) => v,
        Err(e) => return fail(&e, json_errors),
    };
    if flags.help {
        say_raw!(
            "{}",
            term::for_stdout(&help::action_help(target.resolved(), target.action()))
        );
        return 0;
    }
    let timeout = match flags
        .timeout
        .map(|s| awt_core::call::timeout_from_secs(s, "--timeout"))
        .transpose()
    {
        Ok(t) => t,
        Err(e) => return fail(&e, json_errors),
    };
    let opts = CallOptions {
        timeout,
        max_output: flags.max_output,
        cwd: std::env::current_dir().ok(),
        last_spawn: true,
        approval: approvals::from_terminal(),
        ..Default::default()
    };
    let call = match target.prepare(args, &opts) {
        Ok(c) => c,
        Err(e) => return fail(&e, json_errors),
    };
    let cancel = cancel_on_signals();
    if flags.events {
        // The raw stream for programs: the result line carries its content blocks whole (bounded by the output
        // cap, as every event line); with --save-content they are also written to files, said on stderr.
        let mut obs = render::Events::new();
        let mut catch = awt_core::stream::content::Catch::new(&mut obs);
        let out = call.run(&mut catch, cancel).await;
        let blocks = catch.content().filter(|_| out.is_ok());
        obs.finish(&out, blocks.as_deref());
        if let (Some(dir), Some(b)) = (flags.save_content.as_deref(), &blocks) {
            content::tell_saved(b, dir);
        }
        return match &out {
            Ok(_) => 0,
            Err(e) => {
                render::print_error(e, false);
                e.code.exit_code()
            }
        };
    }
    let mut obs = render::Human::new();
    let mut catch = awt_core::stream::content::Catch::new(&mut obs);
    let out = call.run(&mut catch, cancel).await;
    let blocks = catch.content();
    obs.finish();
    match out {
        Ok(v) => {
            match blocks {
                Some(b) => content::print(&v, &b, flags.save_content.as_deref()),
                None => render::print_result(&v),
            }
            0
        }
        Err(e) => {
            render::print_call_error(&e, json_errors);
            e.code.exit_code()
        }
    }
}

async fn tool_form(runner: &Runner, words: Vec<OsString>, fwd: &forward::Overrides) -> i32 {
    let json_errors = !std::io::IsTerminal::is_terminal(&std::io::stdout());
    // Tools first, then AnimaWorks' own words, as in the original.
    let first = words[0].to_string_lossy().into_owned();
    let tool = match runner.open_unaudited(&first).await {
        Ok(t) => t,
        Err(e) if e.code == ErrorCode::UnknownTool => {
            if let Some(fe) = forward::forward(&words, &runner.dirs.python, fwd) {
                return fail(&fe, json_errors);
            }
            // Not one of AnimaWorks' words either: an attempt at an unknown tool, audited.
            return fail(&runner.refuse_open(&first, e), json_errors);
        }
        Err(e) => {
            let e = runner.refuse_open(&first, e);
            // An AnimaWorks module refused before it is described (its anima's permissions file is unusable):
            // refused in AnimaWorks' words, as its `cli_main` argv would be.
            let rest: Vec<String> = words[1..].iter().map(|w| w.to_string_lossy().into_owned()).collect();
            let refused = || {
                runner
                    .is_animaworks_module(&first)
                    .then(|| legacy_refusal(&e, runner, &first, &rest))
                    .flatten()
            };
            return legacy_import_failure(&e)
                .or_else(refused)
                .unwrap_or_else(|| fail(&e, json_errors));
        }
    };
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
    let rest = &words[1..];
    // `<tool>` alone too: the original runs `cli_main([])` (a module may answer without arguments).
    if tool.resolved().manifest.cli {
        help::cli_argv_notes(tool.resolved(), rest);
        // The caller's working directory, as AnimaWorks runs a CLI call (relative file arguments).
        let opts = CallOptions {
            cwd: std::env::current_dir().ok(),
            last_spawn: true,
            approval: approvals::from_terminal(),
            ..Default::default()
        };
        let call = match tool.prepare_cli(rest, &opts) {
            Ok(c) => c,
            Err(e) => return legacy_refusal(&e, runner, &first, rest).unwrap_or_else(|| fail(&e, json_errors)),
        };
        return match call.run_inherit(cancel_on_signals()).await {
            Ok(code) => code,
            Err(e) => fail(&e, json_errors),
        };
    }
    match rest.first().map(String::as_str) {
        None | Some("--help" | "-h" | "help") => {
            say_raw!("{}", term::for_stdout(&help::tool_help(runner, tool.resolved())));
            if rest.is_empty() {
                2
            } else {
                0
            }
        }
        Some(action) => structured_on(tool, action, &rest[1..], json_errors).await,
    }
}

/// A permission refusal of a legacy `cli_main` argv or of `submit` as AnimaWorks' CLI gives it: `Error: <its
/// message>` in the configured locale on stderr, exit 1 (agents run this path with stdout a pipe, and read what
/// AnimaWorks wrote); the runner's own sentence, with the file to edit, follows as a hint. `None` for other
/// errors.
pub(super) fn legacy_refusal(e: &CallError, runner: &Runner, tool: &str, argv: &[String]) -> Option<i32> {
    let word = argv.iter().find(|w| !w.starts_with('-')).map_or("", String::as_str);
    if e.code == ErrorCode::ApprovalPending {
        // Its own exit code (14), the message in AnimaWorks' words and locale, how a human approves as the hint.
        let id = e.detail(awt_core::error::Detail::ApprovalId).and_then(serde_json::Value::as_str).unwrap_or("");
        let locale = awt_core::locale::Locale::of_data_dir(&runner.dirs.data);
        tell!("Error: {}", locale.approval_pending(tool, word, id));
        tell!("  hint: {}", e.hint.as_deref().unwrap_or(&e.message));
        return Some(e.code.exit_code());
    }
    if e.code != ErrorCode::PermissionDenied {
        return None;
    }
    let message = awt_core::locale::Locale::of_data_dir(&runner.dirs.data).refusal(e, tool, word)?;
    tell!("Error: {message}");
    tell!("  hint: {}", e.hint.as_deref().unwrap_or(&e.message));
    Some(1)
}

/// A module that cannot be imported, called by its legacy argv, as AnimaWorks' CLI shows it: the traceback on
/// stderr, exit 1 (Python's own for an uncaught exception), nothing on stdout. `None` for other errors.
fn legacy_import_failure(e: &CallError) -> Option<i32> {
    if e.code != ErrorCode::UnknownAction || !e.message.contains("animaworks-tool: cannot import ") {
        return None;
    }
    let tail = e.detail(awt_core::error::Detail::StderrTail)?.as_str()?;
    tell!("{}", tail.trim_end());
    Some(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_global_option_with_a_value_is_known() {
        let cmd = <Cli as clap::CommandFactory>::command();
        let mut clap: Vec<String> = cmd
            .get_arguments()
            .filter(|a| a.is_global_set() && a.get_action().takes_values())
            .map(|a| format!("--{}", a.get_long().unwrap()))
            .collect();
        let mut ours: Vec<String> = GLOBALS_WITH_VALUE.iter().map(|s| s.to_string()).collect();
        clap.sort();
        ours.sort();
        assert_eq!(clap, ours);
    }

    /// `submit` skips clap when it can: what it makes of the words is what clap makes of them, and every form
    /// clap must see (help, `--strict`, `--`, a global option, no action) still goes to clap.
    #[test]
    fn the_fast_submit_parses_as_clap_does() {
        let argv = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        for words in [
            &["submit", "tiny", "go"][..],
            &["submit", "tiny", "go", "--json", "{}"],
            &["submit", "tiny", "go", "--help"],
            &["submit", "tiny", "go", "--strict", "--", "-x"],
            &["submit", "tiny", "go", "--data-dir", "/x", "--color", "never"],
            &["submit", "legacy_mod", "sub", "-v", "--flag=1"],
        ] {
            let fast = fast_parse_of(argv(words).into_iter()).expect("the fast path takes it");
            let full = Cli::try_parse_from(argv(&[&["animaworks-tool"][..], words].concat())).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{full:?}"), "{words:?}");
        }
        for words in [
            &["submit"][..],
            &["submit", "tiny"],
            &["submit", "tiny", "--help"],
            &["submit", "tiny", "--strict", "go"],
            &["submit", "tiny", "--", "go"],
            &["submit", "--data-dir", "/x", "tiny", "go"],
            &["submit", "--help"],
        ] {
            assert!(fast_parse_of(argv(words).into_iter()).is_none(), "{words:?} is clap's");
        }
    }

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
