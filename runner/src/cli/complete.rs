//! Shell completions.
//!
//! `completions bash|zsh|fish|elvish|powershell` prints a small script that asks the runner itself for
//! candidates (clap_complete's dynamic completion: the shell runs `ANIMAWORKS_TOOL_COMPLETE=<shell>
//! animaworks-tool -- <words…>`). To answer, the runner builds its command tree with one subcommand per tool,
//! one per action and one flag per property, read from the schema cache only: completing never starts a tool,
//! and a tool whose schemas are not cached yet completes by name only.
//!
//! Completion offers only what the parser takes: the global options (`--anima-dir`, `--color`, …) where clap
//! reads them (before the command word, and among a runner command's own options), never inside a tool or after
//! its action, whose words are the tool's.

use awt_core::cache;
use awt_core::dirs::{DirOptions, Dirs};
use awt_core::manifest::{ActionSpec, Manifest};
use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, Command};
use clap_complete::env::{CompleteEnv, Shells};
use clap_complete::{ArgValueCandidates, CompletionCandidate};
use serde_json::Value;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

/// The variable that switches the binary into answering completions.
pub const VAR: &str = awt_core::env_vars::COMPLETE.name;

/// Answer a completion request and exit, when the shell's script asked for one; otherwise return at once. `root`
/// builds the runner's command tree (only when asked: it is a large part of a one-shot call's own time).
pub fn answer_if_asked(root: fn() -> Command) {
    if std::env::var_os(VAR).is_none() {
        return;
    }
    let words: Vec<OsString> = std::env::args_os().collect();
    let dirs = dirs_of(&words);
    CompleteEnv::with_factory(move || command(root, &dirs)).var(VAR).complete();
}

/// `completions <shell>`: the script that hooks the runner into the shell.
pub fn completions(shell: &str) -> i32 {
    let shells = Shells::builtins();
    let Some(sh) = shells.completer(shell) else {
        let names: Vec<&str> = shells.names().collect();
        tell!(
            "animaworks-tool: no completions for shell {shell:?}; one of: {}",
            names.join(", ")
        );
        return awt_core::ErrorCode::Usage.exit_code();
    };
    let me = std::env::args_os()
        .next()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_else(|| "animaworks-tool".into());
    // A relative path (./target/debug/animaworks-tool) would break in another directory.
    let me = if me.contains('/') {
        awt_core::dirs::expand_home(std::path::Path::new(&me))
            .to_string_lossy()
            .into_owned()
    } else {
        me
    };
    let mut buf = Vec::new();
    if let Err(e) = sh.write_registration(VAR, "animaworks-tool", "animaworks-tool", &me, &mut buf) {
        tell!("animaworks-tool: {e}");
        return awt_core::ErrorCode::Internal.exit_code();
    }
    let _ = std::io::stdout().lock().write_all(&buf);
    0
}

/// The global options that choose the tiers, read from the words being completed (then the environment).
fn dirs_of(words: &[OsString]) -> Dirs {
    let mut o = DirOptions::default();
    let mut it = words.iter().map(|w| w.to_string_lossy().into_owned());
    while let Some(w) = it.next() {
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (w.clone(), None),
        };
        if !matches!(
            name.as_str(),
            "--core-dir" | "--data-dir" | "--anima-dir" | "--cache-dir" | "--python"
        ) {
            continue;
        }
        let Some(v) = inline.or_else(|| it.next()) else {
            break;
        };
        match name.as_str() {
            "--core-dir" => o.core_dirs.push(PathBuf::from(v)),
            "--data-dir" => o.data_dir = Some(v.into()),
            "--anima-dir" => o.anima_dir = Some(v.into()),
            "--cache-dir" => o.cache_dir = Some(v.into()),
            _ => o.python = Some(v.into()),
        }
    }
    Dirs::resolve(&o)
}

/// Every visible tool with its cached manifest (`None` when it was never probed or has changed since).
pub fn cached_tools(dirs: &Dirs) -> Vec<(String, Option<Manifest>)> {
    // One lookup for them all: a folder's pack is read once, not once per tool.
    let mut lookup = cache::Lookup::new(dirs);
    awt_core::discover::scan(dirs)
        .tools
        .into_values()
        .map(|f| {
            let key = cache::FileKey::of(&f, dirs).ok();
            let m = key.and_then(|k| lookup.load(&f, &k)).and_then(|p| match p {
                cache::Probed::Ok(m) => Some(m),
                _ => None,
            });
            (f.name, m)
        })
        .collect()
}

/// The runner's command tree with the tools of `dirs` in it (under the top level, `call`, `submit` and `help`).
pub fn command(root: fn() -> Command, dirs: &Dirs) -> Command {
    let cached = cached_tools(dirs);
    let tools: Vec<Command> = cached.iter().map(|(name, m)| tool_command(name, m.as_ref())).collect();
    // At the top level a module with its own CLI takes its argv, which only its argparse knows: its actions (in
    // the schemas' spelling, which that argparse may refuse) are offered under `call` and `submit` only.
    let top: Vec<Command> = cached
        .iter()
        .map(|(name, m)| match m {
            Some(m) if m.cli => Command::new(name.to_owned())
                .about(format!("its own CLI (`animaworks-tool {name} -h`); `call {name}` for the runner's form"))
                .arg(clap::Arg::new("argv").num_args(0..).trailing_var_arg(true).allow_hyphen_values(true)),
            _ => tool_command(name, m.as_ref()),
        })
        .collect();
    let ids = task_ids(dirs);
    let with_id = |c: Command| {
        let ids = ids.clone();
        c.mut_arg("id", move |a| {
            a.add(ArgValueCandidates::new(move || {
                ids.iter()
                    .map(|(id, about)| CompletionCandidate::new(id).help(Some(about.into())))
                    .collect()
            }))
        })
    };
    runner_globals(root())
        .subcommands(top)
        .mut_subcommand("call", |c| tools_under(c, &tools))
        .mut_subcommand("submit", |c| tools_under(c, &tools))
        .mut_subcommand("jobs", |j| {
            j.mut_subcommand("show", with_id)
                .mut_subcommand("wait", with_id)
                .mut_subcommand("cancel", with_id)
        })
        .mut_subcommand("approvals", |a| {
            let ids = crate::cli::approvals::completion_ids(&dirs.data);
            let with = move |c: Command| {
                let ids = ids.clone();
                c.mut_arg("id", move |a| {
                    a.add(ArgValueCandidates::new(move || {
                        ids.iter()
                            .map(|(id, about)| CompletionCandidate::new(id).help(Some(about.into())))
                            .collect()
                    }))
                })
            };
            a.mut_subcommand("show", with.clone())
                .mut_subcommand("approve", with.clone())
                .mut_subcommand("deny", with)
        })
}

/// The tree with its global options made local to the top level and to each runner command (clap would otherwise
/// hand them down into the tools added below it, where the parser does not take them).
fn runner_globals(root: Command) -> Command {
    let globals: Vec<Arg> = root
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.clone().global(false))
        .collect();
    let root = globals
        .iter()
        .fold(root, |c, g| c.mut_arg(g.get_id().clone(), |a| a.global(false)));
    fn down(c: Command, globals: &[Arg]) -> Command {
        let names: Vec<String> = c.get_subcommands().map(|s| s.get_name().to_owned()).collect();
        names.iter().fold(c, |c, n| {
            c.mut_subcommand(n, |s| down(s.args(globals.iter().cloned()), globals))
        })
    }
    down(root, &globals)
}

/// `call`/`submit` with their positionals replaced by the tool tree (their options kept).
fn tools_under(c: Command, tools: &[Command]) -> Command {
    let keep: Vec<Arg> = c.get_arguments().filter(|a| a.get_long().is_some()).cloned().collect();
    Command::new(c.get_name().to_owned())
        .about(c.get_about().cloned().unwrap_or_default())
        .args(keep)
        .subcommands(tools.iter().cloned())
}

fn one_line(s: &str) -> String {
    awt_llm::catalog::one_line(s)
}

fn tool_command(name: &str, m: Option<&Manifest>) -> Command {
    let mut c = Command::new(name.to_owned()).disable_help_subcommand(true);
    let Some(m) = m else {
        return c.about("(schemas not cached yet: run the tool once, or `animaworks-tool refresh`)");
    };
    if let Some(d) = m.description.as_deref() {
        c = c.about(one_line(d));
    }
    let mut seen = BTreeSet::new();
    for a in &m.actions {
        if seen.insert(awt_core::names::canon(&a.name)) {
            c = c.subcommand(action_command(a));
        }
    }
    c
}

/// One action with a flag per property (as `cli::args` reads them) and the runner's call options.
fn action_command(a: &ActionSpec) -> Command {
    let mut c = Command::new(a.name.clone()).about(one_line(&a.description));
    let mut longs: BTreeSet<String> = awt_core::flags::RUNNER_FLAGS.iter().map(|f| f.to_string()).collect();
    let props = a.input_schema.get("properties").and_then(Value::as_object);
    for (prop, schema) in props.into_iter().flatten() {
        let long = prop.replace('_', "-");
        if !awt_core::names::is_name(&long) || !longs.insert(long.clone()) {
            continue;
        }
        let help = schema
            .get("description")
            .and_then(Value::as_str)
            .map(one_line)
            .unwrap_or_default();
        let mut arg = Arg::new(format!("p:{prop}")).long(long.clone()).help(help);
        arg = match awt_core::flags::prop_type(schema) {
            Some("boolean") => {
                if longs.insert(format!("no-{long}")) {
                    c = c.arg(
                        Arg::new(format!("n:{prop}"))
                            .long(format!("no-{long}"))
                            .action(ArgAction::SetTrue),
                    );
                }
                arg.action(ArgAction::SetTrue)
            }
            Some("array") => values(arg.action(ArgAction::Append), schema.get("items")),
            _ => values(arg.action(ArgAction::Set), Some(schema)),
        };
        c = c.arg(arg);
    }
    c.arg(
        Arg::new("r:json")
            .long("json")
            .value_name("JSON|@FILE|-")
            .help("all arguments as one JSON object"),
    )
    .arg(
        Arg::new("r:timeout")
            .long("timeout")
            .value_name("SECONDS")
            .help("deadline"),
    )
    .arg(
        Arg::new("r:max-output")
            .long("max-output")
            .value_name("BYTES")
            .help("output cap"),
    )
    .arg(
        Arg::new("r:events")
            .long("events")
            .action(ArgAction::SetTrue)
            .help("the raw event stream as JSON lines"),
    )
}

/// An enum's values as the candidates of a flag.
fn values(arg: Arg, schema: Option<&Value>) -> Arg {
    let Some(e) = schema.and_then(|s| s.get("enum")).and_then(Value::as_array) else {
        return arg;
    };
    let mut seen = BTreeSet::new();
    let names: Vec<String> = e
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .filter(|s| !s.is_empty() && seen.insert(s.clone()))
        .collect();
    if names.is_empty() {
        return arg;
    }
    arg.value_parser(PossibleValuesParser::new(names))
}

/// Task ids of the anima, newest first, with their state and tool (at most 100).
fn task_ids(dirs: &Dirs) -> Vec<(String, String)> {
    let Some(anima) = &dirs.anima else {
        return Vec::new();
    };
    let store = awt_tasks::files::FileStore::for_anima(anima);
    if store.checked().is_err() {
        return Vec::new();
    }
    let dir = store.dir;
    let mut found: Vec<(std::time::SystemTime, String, String)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = name.strip_suffix(".json")?.to_owned();
            if id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return None;
            }
            let meta = e.metadata().ok().filter(|m| m.is_file() && m.len() < 1 << 20)?;
            let about = awt_core::fsread::read(&e.path(), awt_core::fsread::TASK)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .map(|v| {
                    format!(
                        "{} {}",
                        v["status"].as_str().unwrap_or(""),
                        v["tool_name"].as_str().unwrap_or("")
                    )
                })
                .unwrap_or_default();
            Some((meta.modified().ok()?, id, about))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    found.truncate(100);
    found.into_iter().map(|(_, id, about)| (id, about)).collect()
}
