//! Names of tools and actions (protocol.md §3).

/// The runner's own commands; no tool may take these names.
pub const RESERVED: &[&str] = &[
    "call",
    "list",
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

pub use tool_sdk::names::{canon, is_name, is_provider_name, same_spelling};

/// Why a tool name is refused, or `None` when it is fine.
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

/// Why an action name (with its schema name) is refused, or `None` when it is fine.
pub fn action_name_problem(action: &str, schema_name: &str) -> Option<String> {
    if !is_name(action) {
        return Some(format!(
            "action name {action:?} must start with a letter or digit and hold only letters, digits, '_' and '-'"
        ));
    }
    if !is_provider_name(schema_name) {
        return Some(format!(
            "schema name {schema_name:?} must match ^[a-zA-Z0-9_-]{{1,64}}$ (the pattern every LLM provider accepts); \
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
        assert!(tool_name_problem("list").is_some());
        assert!(action_name_problem("get", "t_get").is_none());
        assert!(action_name_problem("get", &"x".repeat(65)).is_some());
        assert!(action_name_problem("g et", "t_g et").is_some());
        assert_eq!(canon("create-issue"), "create_issue");
    }
}
