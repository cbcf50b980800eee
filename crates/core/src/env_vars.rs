//! Every environment variable the runner reads or sets, once: name, meaning, default and who reads it. The code
//! names a variable through this registry (`env_vars::DATA_DIR.name`), the top-level `--help` lists the ones the
//! runner reads, and docs/configuration.md's table is generated from it (`settings::reference`). A test
//! holds that no `ANIMAWORKS_*` name is spelt anywhere else in the runner's code.

/// Who reads a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// The runner reads it from its own environment.
    Runner,
    /// The runner sets it for the tool it starts (protocol.md §8); a caller's own value never reaches a tool.
    Tool,
    /// The runner reads it, and sets it for the tool too.
    Both,
    /// The build (`runner/build.rs`) reads it.
    Build,
}

/// One variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Var {
    pub name: &'static str,
    /// What it means, one sentence.
    pub meaning: &'static str,
    /// The value when it is unset (`""`: none).
    pub default: &'static str,
    pub reader: Reader,
    /// The code that reads it.
    pub read_by: &'static str,
}

/// The prefix of every variable of AnimaWorks and the runner.
pub const PREFIX: &str = "ANIMAWORKS_";
/// The prefix of the runner's own variables.
pub const TOOL_PREFIX: &str = "ANIMAWORKS_TOOL_";

pub const DATA_DIR: Var = Var {
    name: "ANIMAWORKS_DATA_DIR",
    meaning: "the AnimaWorks data dir (`--data-dir` wins); set for each tool to the call's",
    default: "~/.animaworks",
    reader: Reader::Both,
    read_by: "awt_core::dirs; awt_core::policy::env sets it",
};
pub const ANIMA_DIR: Var = Var {
    name: "ANIMAWORKS_ANIMA_DIR",
    meaning: "the calling anima's dir: personal tools, permissions (`--anima-dir` wins); set for each tool when the call has an anima",
    default: "",
    reader: Reader::Both,
    read_by: "awt_core::dirs; awt_core::policy::env sets it",
};
pub const CORE_TOOLS: Var = Var {
    name: "ANIMAWORKS_CORE_TOOLS",
    meaning: "core tools folders, colon-separated (`--core-dir` wins)",
    default: "<data dir>/core_tools",
    reader: Reader::Runner,
    read_by: "awt_core::dirs",
};
pub const PYTHON: Var = Var {
    name: "ANIMAWORKS_PYTHON",
    meaning: "the Python that runs `.py` tools and AnimaWorks' own CLI (`--python` wins)",
    default: "python3",
    reader: Reader::Runner,
    read_by: "awt_core::dirs, cli::forward",
};
pub const CACHE_DIR: Var = Var {
    name: "ANIMAWORKS_TOOL_CACHE_DIR",
    meaning: "the schema cache dir (`--cache-dir` wins)",
    default: "<data dir>/cache/animaworks-tool",
    reader: Reader::Runner,
    read_by: "awt_core::dirs",
};
pub const MAX_OUTPUT: Var = Var {
    name: "ANIMAWORKS_TOOL_MAX_OUTPUT",
    meaning: "the output cap of a call, in bytes, at most 1 GiB (`--max-output` wins)",
    default: "8388608 (8 MiB)",
    reader: Reader::Runner,
    read_by: "awt_core::call",
};
pub const MAX_SPILL: Var = Var {
    name: "ANIMAWORKS_TOOL_MAX_SPILL",
    meaning: "bytes one call may write to `outputs/` (at least the output cap)",
    default: "268435456 (256 MiB)",
    reader: Reader::Runner,
    read_by: "awt_core::spill",
};
pub const AUDIT_LOG: Var = Var {
    name: "ANIMAWORKS_TOOL_AUDIT_LOG",
    meaning: "where audit lines go, a path (never writable by a sandboxed tool)",
    default: "<anima dir>/state/tool_audit.jsonl, else the data dir's",
    reader: Reader::Runner,
    read_by: "awt_core::call, awt_core::sandbox",
};
pub const LOG: Var = Var {
    name: "ANIMAWORKS_TOOL_LOG",
    meaning: "the runner's own diagnostics on stderr: a tracing filter (`debug`, `animaworks_tool=trace`)",
    default: "warn",
    reader: Reader::Runner,
    read_by: "cli",
};
pub const TASKS_URL: Var = Var {
    name: "ANIMAWORKS_TOOL_TASKS_URL",
    meaning: "the task database's URL, instead of `\"tasks\".\"url\"` (so that a password need not sit in a file); never passed to a tool",
    default: "",
    reader: Reader::Runner,
    read_by: "awt_tasks::config",
};
pub const COMPLETE: Var = Var {
    name: "ANIMAWORKS_TOOL_COMPLETE",
    meaning: "set by a shell's completion script (`completions`): the runner answers with candidates",
    default: "",
    reader: Reader::Runner,
    read_by: "cli::complete",
};
pub const WORKER_SECRET: Var = Var {
    name: "ANIMAWORKS_TOOL_WORKER_SECRET",
    meaning: "a background-task worker's proof of identity, set by the runner that starts it; never passed to a tool",
    default: "",
    reader: Reader::Runner,
    read_by: "awt_tasks::identity",
};
pub const CLI_REFUSE: Var = Var {
    name: "ANIMAWORKS_TOOL_CLI_REFUSE",
    meaning: "the gated `cli_main` subcommands this anima may not run (a JSON list), for the Python shim",
    default: "",
    reader: Reader::Tool,
    read_by: "awt_core::call::cli_alias",
};
pub const BROKER_FD: Var = Var {
    name: "ANIMAWORKS_TOOL_BROKER_FD",
    meaning: "the descriptor of the call's credential broker (docs/credentials.md); a caller's own is dropped",
    default: "",
    reader: Reader::Tool,
    read_by: "awt_core::policy::env, awt_core::broker",
};
pub const PROTOCOL: Var = Var {
    name: "ANIMAWORKS_TOOL_PROTOCOL",
    meaning: "the tool protocol's version (`1`)",
    default: "",
    reader: Reader::Tool,
    read_by: "awt_core::policy::env",
};
pub const CALL_ID: Var = Var {
    name: "ANIMAWORKS_CALL_ID",
    meaning: "the call's id, as in the audit line",
    default: "",
    reader: Reader::Tool,
    read_by: "awt_core::policy::env",
};
pub const ANIMA_NAME: Var = Var {
    name: "ANIMAWORKS_ANIMA_NAME",
    meaning: "the calling anima's name, when the call has an anima",
    default: "",
    reader: Reader::Tool,
    read_by: "awt_core::policy::env",
};
pub const DEADLINE_MS: Var = Var {
    name: "ANIMAWORKS_DEADLINE_MS",
    meaning: "the call's deadline, milliseconds since the Unix epoch",
    default: "",
    reader: Reader::Tool,
    read_by: "awt_core::policy::env",
};
pub const FRESH_NETNS: Var = Var {
    name: "ANIMAWORKS_TOOL_FRESH_NETNS",
    meaning: "`1`: every networked call makes a network namespace of its own, none is kept for the next call of its tool (docs/sandbox-network.md#kept-network-namespaces)",
    default: "",
    reader: Reader::Runner,
    read_by: "awt_core::sandbox::netns",
};
pub const SHARED_LIBGCC: Var = Var {
    name: "ANIMAWORKS_TOOL_SHARED_LIBGCC",
    meaning: "`1`: link the shared unwinder (libgcc_s) instead of the static one",
    default: "",
    reader: Reader::Build,
    read_by: "runner/build.rs",
};
pub const NO_COLOR: Var = Var {
    name: "NO_COLOR",
    meaning: "set: no colour in messages under `--color auto` (docs/command-line.md#colour)",
    default: "",
    reader: Reader::Runner,
    read_by: "cli::term (anstream)",
};
pub const CLICOLOR_FORCE: Var = Var {
    name: "CLICOLOR_FORCE",
    meaning: "set (and `NO_COLOR` not): colour even when stderr is not a terminal, under `--color auto`",
    default: "",
    reader: Reader::Runner,
    read_by: "cli::term (anstream)",
};

pub const HOME: Var = Var {
    name: "HOME",
    meaning: "the home directory: `~` in a path, `$HOME` in a sandbox place",
    default: "",
    reader: Reader::Runner,
    read_by: "awt_core::dirs, awt_core::sandbox",
};
pub const PATH: Var = Var {
    name: "PATH",
    meaning: "where the AnimaWorks CLI is looked for when a word names no tool (a tool's programs are looked up on the tool's own `PATH`)",
    default: "",
    reader: Reader::Runner,
    read_by: "cli::forward",
};
pub const TERM: Var = Var {
    name: "TERM",
    meaning: "`dumb`: no live progress display on a terminal",
    default: "",
    reader: Reader::Runner,
    read_by: "cli::render",
};

/// Every variable, in the order `--help` and the docs list them.
pub const ALL: &[Var] = &[
    DATA_DIR,
    ANIMA_DIR,
    CORE_TOOLS,
    PYTHON,
    CACHE_DIR,
    MAX_OUTPUT,
    MAX_SPILL,
    AUDIT_LOG,
    LOG,
    TASKS_URL,
    FRESH_NETNS,
    NO_COLOR,
    CLICOLOR_FORCE,
    HOME,
    PATH,
    TERM,
    COMPLETE,
    WORKER_SECRET,
    CLI_REFUSE,
    BROKER_FD,
    PROTOCOL,
    CALL_ID,
    ANIMA_NAME,
    DEADLINE_MS,
    SHARED_LIBGCC,
];

impl Var {
    /// Its value in the runner's environment, when set and not empty.
    pub fn get_os(&self) -> Option<std::ffi::OsString> {
        std::env::var_os(self.name).filter(|v| !v.is_empty())
    }

    /// Its value as UTF-8, when set and not empty.
    pub fn get(&self) -> Option<String> {
        std::env::var(self.name).ok().filter(|v| !v.is_empty())
    }

    /// Whether an operator sets it for the runner (not one the runner sets for its own children, nor the shell's own).
    fn for_users(&self) -> bool {
        matches!(self.reader, Reader::Runner | Reader::Both)
            && ![WORKER_SECRET, COMPLETE, HOME, PATH, TERM].contains(self)
    }
}

/// The variables an operator sets, as the top-level `--help` lists them.
pub fn help_section() -> String {
    let vars: Vec<&Var> = ALL.iter().filter(|v| v.for_users()).collect();
    let width = vars.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let mut out = String::from("Environment (docs/configuration.md):\n");
    for v in vars {
        let default = if v.default.is_empty() {
            String::new()
        } else {
            format!(" [default: {}]", v.default)
        };
        out.push_str(&format!("  {:width$}  {}{default}\n", v.name, short(v.meaning)));
    }
    out
}

/// A meaning up to its first `;`, for one help line.
fn short(meaning: &str) -> &str {
    meaning.split(';').next().unwrap_or(meaning).trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The part of a source file before its test module (tests may spell a name to pin it).
    fn code_of(text: &str) -> &str {
        text.find("#[cfg(test)]").map_or(text, |i| &text[..i])
    }

    #[test]
    fn no_variable_name_is_spelt_outside_the_registry() {
        // Every crate's code: runner/src and crates/*/src.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut stack = vec![root.join("runner/src")];
        for c in std::fs::read_dir(root.join("crates")).unwrap() {
            stack.push(c.unwrap().path().join("src"));
        }
        assert!(stack.iter().any(|d| d.ends_with("core/src")), "{stack:?}");
        let mut found = Vec::new();
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                    continue;
                }
                // proptests.rs is a test module (lib.rs: `#[cfg(test)] mod proptests`); test_skip.rs is the tests'
                // own support, below this crate (its variables are the test harness's, not the runner's).
                let skip = ["env_vars.rs", "proptests.rs", "test_skip.rs"].iter().any(|f| p.ends_with(f));
                if p.extension().is_none_or(|x| x != "rs") || skip {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                for (n, line) in code_of(&text).lines().enumerate() {
                    let code = line.trim_start();
                    if code.starts_with("//") {
                        continue;
                    }
                    let spelt = code.contains("\"ANIMAWORKS_")
                        || ALL.iter().any(|v| v.name.starts_with(PREFIX) && code.contains(v.name))
                        || ["var(\"", "var_os(\"", ".env(\"", "remove_var(\"", "set_var(\""]
                            .iter()
                            .any(|read| code.contains(read));
                    if spelt {
                        found.push(format!(
                            "{}:{}: {}",
                            p.strip_prefix(&root).unwrap().display(),
                            n + 1,
                            code
                        ));
                    }
                }
            }
        }
        assert!(
            found.is_empty(),
            "name these through runner/src/env_vars.rs (env_vars::X.name, X.get()):\n{}",
            found.join("\n")
        );
    }

    #[test]
    fn every_name_is_listed_once_with_a_meaning() {
        let mut names: Vec<&str> = ALL.iter().map(|v| v.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL.len(), "a variable listed twice");
        for v in ALL {
            assert!(!v.meaning.is_empty() && !v.read_by.is_empty(), "{}", v.name);
        }
        for (v, n) in [
            (MAX_OUTPUT, crate::call::DEFAULT_MAX_OUTPUT),
            (MAX_SPILL, crate::spill::DEFAULT_MAX_SPILL),
        ] {
            assert!(
                v.default.starts_with(&format!("{n} ")),
                "{}: {} is not {n}",
                v.name,
                v.default
            );
        }
        let help = help_section();
        assert!(
            help.contains("ANIMAWORKS_DATA_DIR") && help.contains("[default: ~/.animaworks]"),
            "{help}"
        );
        assert!(!help.contains(WORKER_SECRET.name), "{help}");
    }
}
