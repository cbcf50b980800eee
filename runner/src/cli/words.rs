//! The runner's command words and the global options that take a value: what the parsers outside clap
//! (the fast path, completion, the colour flag, the usage message) need to know of clap's tree.

/// The global options that take a value (a test keeps this list equal to clap's).
pub const GLOBALS_WITH_VALUE: &[&str] = &[
    "--core-dir",
    "--data-dir",
    "--anima-dir",
    "--python",
    "--cache-dir",
    "--color",
];

/// Runner commands other than `call` (a test keeps this list equal to clap's).
pub const COMMANDS: &[&str] = &[
    "tools",
    "doctor",
    "refresh",
    "submit",
    "jobs",
    "worker",
    "approvals",
    "use-tool",
    "mcp",
    "schemas",
    "mcp-servers",
    "permissions",
    "share",
    "animaworks",
    "new",
    "check",
    "help",
    "version",
    "completions",
    "man",
];
