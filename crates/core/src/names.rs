//! Names of tools and actions (protocol.md §3).

/// Names no tool may take: the runner's own command words, and `task`/`help`, the names of `use-tool`'s meta
/// tools (`task` is also an AnimaWorks command word, which the CLI forwards to the `animaworks` CLI). AnimaWorks'
/// other words (`list`, `status`, …) are not reserved: a tool of that name wins over forwarding, as in the original.
pub const RESERVED: &[&str] = &[
    "call",
    "tools",
    "doctor",
    "refresh",
    "new",
    "check",
    "submit",
    "task",
    "jobs",
    "use-tool",
    "use_tool",
    "mcp",
    "schemas",
    "permissions",
    "share",
    "help",
    "version",
    "completions",
    "man",
];

pub use awt_protocol::names::{canon, is_name, is_provider_name, same_spelling};

/// The names a tool file cannot take at all: `use-tool`'s meta tools, which answer before any tool of the name.
/// A tool named like another runner command is found and callable (AnimaWorks has no such words but `submit`);
/// on the command line the runner's command wins, `animaworks-tool -- <tool> …` calls the tool, and `doctor` warns.
pub const META_NAMES: &[&str] = &["help", "task"];

/// Why a tool file's name makes it no tool, or `None` when it is a tool: [`tool_name_problem`] but for the
/// runner's command words other than [`META_NAMES`] (an AnimaWorks module named `check` keeps working).
pub fn found_tool_name_problem(name: &str) -> Option<String> {
    match tool_name_problem(name) {
        Some(_) if RESERVED.contains(&name) && !META_NAMES.contains(&name) => None,
        p => p,
    }
}

/// Why a tool name is refused for a new tool (`new`, `share`), or `None` when it is fine.
pub fn tool_name_problem(name: &str) -> Option<String> {
    if !is_name(name) {
        return Some(format!(
            "tool name {name:?} must start with a letter or digit and hold only letters, digits, '_' and '-'"
        ));
    }
    if RESERVED.contains(&name) {
        return Some(format!("tool name {name:?} is reserved for the runner's own command"));
    }
    None
}

/// The longest schema name (MCP's bound on tool names). Providers that take fewer (OpenAI, Anthropic, Gemini: 64)
/// get a stable shortened name (`awt_llm::providers::provider_name`).
pub const SCHEMA_NAME_MAX: usize = 128;

/// `^[a-zA-Z0-9_-]{1,128}$` (protocol.md §3).
pub fn is_schema_name(s: &str) -> bool {
    (1..=SCHEMA_NAME_MAX).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why an action name (with its schema name) is refused, or `None` when it is fine.
pub fn action_name_problem(action: &str, schema_name: &str) -> Option<String> {
    if !is_name(action) {
        return Some(format!(
            "action name {action:?} must start with a letter or digit and hold only letters, digits, '_' and '-'"
        ));
    }
    if !is_schema_name(schema_name) {
        return Some(format!(
            "schema name {schema_name:?} must match ^[a-zA-Z0-9_-]{{1,{SCHEMA_NAME_MAX}}}$ (MCP's tool names); \
             shorten the tool or action name"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(tool_name_problem("weather_tool").is_none());
        assert!(tool_name_problem("my-tool2").is_none());
        assert!(tool_name_problem("a.b").is_some());
        assert!(tool_name_problem("_x").is_some());
        assert!(tool_name_problem("tools").is_some());
        assert!(
            tool_name_problem("list").is_none(),
            "AnimaWorks' `anima list` word: a tool may take it"
        );
        assert!(action_name_problem("get", "t_get").is_none());
        assert!(action_name_problem("get", &"x".repeat(128)).is_none());
        assert!(action_name_problem("get", &"x".repeat(129)).is_some());
        assert!(action_name_problem("g et", "t_g et").is_some());
        assert_eq!(canon("create-issue"), "create_issue");
    }
}
