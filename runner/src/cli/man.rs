//! `man`: the manual pages and the docs' command reference, both drawn from the one clap tree, so that neither
//! names a command or option the parser does not have.

use clap::{Arg, Args, Command};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write every page into DIR (one per command, as the pages name each other), e.g. ~/.local/share/man/man1.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The command reference as Markdown (docs/commands.md is this output).
    #[arg(long, hide = true, conflicts_with = "dir")]
    pub markdown: bool,
    /// The background tasks' commands as Markdown (docs/commands-tasks.md is this output).
    #[arg(long, hide = true, conflicts_with_all = ["dir", "markdown"])]
    pub markdown_tasks: bool,
    /// The setup commands as Markdown (docs/commands-setup.md is this output).
    #[arg(long, hide = true, conflicts_with_all = ["dir", "markdown", "markdown_tasks"])]
    pub markdown_setup: bool,
    /// The configuration page as Markdown (docs/configuration.md is this output), from the settings' types and
    /// the environment variable registry.
    #[arg(long, hide = true, conflicts_with_all = ["dir", "markdown", "config_schema"])]
    pub config_markdown: bool,
    /// The JSON Schema of animaworks-tool.json (docs/animaworks-tool.schema.json is this output).
    #[arg(long, hide = true, conflicts_with_all = ["dir", "markdown"])]
    pub config_schema: bool,
    /// The command whose page to print (`man jobs list`); none: the runner's own page.
    pub command: Vec<String>,
}

/// The tree the pages describe: clap's, built (so each command knows its full name).
fn tree(root: fn() -> Command) -> Command {
    let mut cmd = root().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// `man`, over the command tree `root` builds.
pub fn man(a: &ManArgs, root: fn() -> Command) -> i32 {
    let fail = |e: &dyn std::fmt::Display| {
        tell!("animaworks-tool: {e}");
        awt_core::ErrorCode::Internal.exit_code()
    };
    if a.markdown || a.markdown_tasks || a.markdown_setup {
        let page = match (a.markdown, a.markdown_tasks) {
            (true, _) => Page::Commands,
            (_, true) => Page::Tasks,
            _ => Page::Setup,
        };
        let _ = std::io::stdout().lock().write_all(markdown(root, page).as_bytes());
        return 0;
    }
    if a.config_markdown {
        let _ = std::io::stdout()
            .lock()
            .write_all(awt_core::settings::reference::markdown().as_bytes());
        return 0;
    }
    if a.config_schema {
        let _ = std::io::stdout()
            .lock()
            .write_all(awt_core::settings::reference::schema_text().as_bytes());
        return 0;
    }
    if let Some(dir) = &a.dir {
        if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| clap_mangen::generate_to(root(), dir)) {
            return fail(&format!("cannot write the man pages into {}: {e}", dir.display()));
        }
        tell!("animaworks-tool: man pages written into {}", dir.display());
        return 0;
    }
    let mut cmd = tree(root);
    for word in &a.command {
        let Some(sub) = cmd.find_subcommand(word).filter(|s| !s.is_hide_set()).cloned() else {
            tell!(
                "animaworks-tool: no man page for {:?}; `animaworks-tool man` lists the commands",
                a.command.join(" ")
            );
            return awt_core::ErrorCode::Usage.exit_code();
        };
        cmd = sub;
    }
    let mut buf = Vec::new();
    if let Err(e) = clap_mangen::Man::new(cmd).render(&mut buf) {
        return fail(&e);
    }
    let _ = std::io::stdout().lock().write_all(&buf);
    0
}

/// Which page of the command reference to print. The commands of background tasks and the setup commands are on
/// pages of their own, so that each page of the reference stays short enough to read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// docs/commands.md: the global options and every command of the other pages' lists.
    Commands,
    /// docs/commands-tasks.md: the background tasks' commands.
    Tasks,
    /// docs/commands-setup.md: the commands that install and set up.
    Setup,
}

/// A page of its own: its file, the flag that prints it, its title and first sentence, and its commands.
struct OwnPage {
    page: Page,
    file: &'static str,
    flag: &'static str,
    title: &'static str,
    intro: &'static str,
    commands: &'static [&'static str],
}

const OWN_PAGES: [OwnPage; 2] = [
    OwnPage {
        page: Page::Tasks,
        file: "commands-tasks.md",
        flag: "--markdown-tasks",
        title: "background tasks",
        intro: "The commands that submit, run, watch and approve background tasks ([background-tasks.md](background-tasks.md)).",
        commands: &["submit", "jobs", "worker", "approvals"],
    },
    OwnPage {
        page: Page::Setup,
        file: "commands-setup.md",
        flag: "--markdown-setup",
        title: "setting up",
        intro: "The commands that install MCP servers and the AnimaWorks adapter, migrate permissions, share a tool, \
                and install completions and man pages.",
        commands: &["mcp-servers", "animaworks", "permissions", "share", "completions", "man"],
    },
];

/// The command reference: the global options once, then every command with its usage and options; the commands of
/// `OWN_PAGES` on pages of their own.
pub fn markdown(root: fn() -> Command, page: Page) -> String {
    let root = tree(root);
    let elsewhere = |c: &&Command| OWN_PAGES.iter().any(|p| p.commands.contains(&c.get_name()));
    if let Some(own) = OWN_PAGES.iter().find(|p| p.page == page) {
        let mut out = format!(
            "# Command reference: {}\n\n<!-- Generated from the command tree: \
             `animaworks-tool man {} > docs/{}`. A test (tests/it/cli.rs) fails when this file is stale. -->\n\n",
            own.title, own.flag, own.file
        );
        let _ = writeln!(
            out,
            "{} The global options and every other command: [commands.md](commands.md).\n",
            own.intro
        );
        for sub in visible(&root).filter(|c| own.commands.contains(&c.get_name())) {
            command(&mut out, sub);
        }
        return out;
    }
    let mut out = String::from(
        "# Command reference\n\n<!-- Generated from the command tree: `animaworks-tool man --markdown > docs/commands.md`. \
         A test (tests/it/cli.rs) fails when this file is stale. -->\n\n",
    );
    let _ = writeln!(out, "{}\n", root.get_about().map(|a| a.to_string()).unwrap_or_default());
    let _ = writeln!(out, "```text\n{}\n```\n", usage(&root));
    out.push_str("Man pages: `animaworks-tool man --dir ~/.local/share/man/man1` writes one per command (`man animaworks-tool-jobs-list`).\n\n");
    for own in &OWN_PAGES {
        let names: Vec<String> = visible(&root)
            .filter(|c| own.commands.contains(&c.get_name()))
            .map(|c| format!("`{}`", c.get_name()))
            .collect();
        let _ = writeln!(
            out,
            "The commands of {} ({}) are on a page of their own: [{}]({}).\n",
            own.title,
            names.join(", "),
            own.file,
            own.file
        );
    }
    out.push_str("## Global options\n\nAccepted before the command word and among a runner command's own options (not after a tool's action, whose words are the tool's).\n\n");
    options(&mut out, root.get_arguments().filter(|a| a.is_global_set()));
    if let Some(after) = root.get_after_help() {
        let _ = writeln!(out, "```text\n{}\n```\n", after.to_string().trim_end());
    }
    for sub in visible(&root).filter(|c| !elsewhere(c)) {
        command(&mut out, sub);
    }
    out
}

fn visible(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands().filter(|s| !s.is_hide_set())
}

fn usage(cmd: &Command) -> String {
    let u = cmd.clone().render_usage().to_string();
    u.trim_start_matches("Usage: ").trim().to_owned()
}

fn command(out: &mut String, cmd: &Command) {
    let name = cmd.get_bin_name().unwrap_or(cmd.get_name());
    let _ = writeln!(out, "## `{name}`\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{}\n", about.to_string().trim_end());
    }
    let _ = writeln!(out, "```text\n{}\n```\n", usage(cmd));
    let positionals: Vec<&Arg> = cmd.get_positionals().filter(|a| !a.is_hide_set()).collect();
    if !positionals.is_empty() {
        options(out, positionals.into_iter());
    }
    options(
        out,
        cmd.get_opts()
            .chain(
                cmd.get_arguments()
                    .filter(|a| !a.is_positional() && a.get_long().is_some() && !a.get_action().takes_values()),
            )
            .filter(|a| !a.is_global_set() && !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version"),
    );
    if let Some(after) = cmd.get_after_help() {
        let _ = writeln!(out, "```text\n{}\n```\n", after.to_string().trim_end());
    }
    if cmd.has_subcommands() {
        let names: Vec<String> = visible(cmd).map(|s| format!("`{}`", s.get_name())).collect();
        let _ = writeln!(out, "Subcommands: {}.\n", names.join(", "));
    }
    for sub in visible(cmd) {
        command(out, sub);
    }
}

/// A list of arguments: how each is written, then its help, values and default.
fn options<'a>(out: &mut String, args: impl Iterator<Item = &'a Arg>) {
    let mut any = false;
    let mut seen = std::collections::BTreeSet::new();
    for a in args {
        if !seen.insert(a.get_id().to_string()) {
            continue;
        }
        any = true;
        let value = a
            .get_value_names()
            .map(|v| v.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| format!("<{}>", a.get_id().as_str().to_uppercase()));
        let spelled = match (a.get_short(), a.get_long()) {
            (_, None) => value,
            (s, Some(l)) => {
                let short = s.map(|s| format!("-{s}, ")).unwrap_or_default();
                if a.get_action().takes_values() {
                    format!("{short}--{l} {value}")
                } else {
                    format!("{short}--{l}")
                }
            }
        };
        let help = a
            .get_long_help()
            .or(a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let _ = write!(out, "- `{spelled}`: {}", help.trim_end().replace('\n', " "));
        let values: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        if !values.is_empty() && a.get_action().takes_values() {
            let _ = write!(out, " Values: {}.", values.join(", "));
        }
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() && !a.is_hide_default_value_set() && a.get_action().takes_values() {
            let _ = write!(out, " Default: `{}`.", defaults.join(","));
        }
        out.push('\n');
    }
    if any {
        out.push('\n');
    }
}
