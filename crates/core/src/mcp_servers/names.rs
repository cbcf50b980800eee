//! Schema names that a known MCP client cannot take. Claude Code names a tool of our `mcp` server
//! `mcp__<server>__<schema name>` (with the server registered as `animaworks`, as docs/mcp.md shows) and its
//! provider refuses names past 64 characters. A server's tool whose name would pass that is warned of, or, with
//! `"short_names": true` in its `mcp_servers` entry, offered under a shorter action name that ends in a hash of
//! its MCP name: the same name on every listing, mapped back to the MCP name on every call.

/// The prefix Claude Code puts before a schema name, for the server registered as `animaworks`.
pub const CLIENT_PREFIX: &str = "mcp__animaworks__";
/// The longest tool name Claude Code's provider takes.
pub const CLIENT_LIMIT: usize = 64;
/// The longest schema name that fits behind [`CLIENT_PREFIX`].
pub const MAX_SCHEMA_NAME: usize = CLIENT_LIMIT - CLIENT_PREFIX.len();

/// The schema name of `action` of server `server` fits a client's limit.
pub fn fits(server: &str, action: &str) -> bool {
    server.len() + 1 + action.len() <= MAX_SCHEMA_NAME
}

/// A stable shorter action name for the MCP tool `mcp` (offered as `action`): its start, `_`, and eight hex
/// digits of an FNV-1a hash of `mcp`. `None` when the server's own name leaves no room.
pub fn short(server: &str, action: &str, mcp: &str) -> Option<String> {
    let room = MAX_SCHEMA_NAME.checked_sub(server.len() + 1 + 9)?;
    if room == 0 {
        return None;
    }
    let mut h: u32 = 0x811c9dc5;
    for b in mcp.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x01000193);
    }
    let head = action[..room.min(action.len())].trim_end_matches(['_', '-']);
    Some(format!("{head}_{h:08x}"))
}

/// An MCP tool name as an action name's letters: each character that is not a letter, digit, `_` or `-` made `_`
/// (MCP allows `.` and `/`: `repo.search` is `repo_search`), without a leading `_` or `-`.
pub fn mapped(mcp: &str) -> String {
    let m: String = mcp
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .collect();
    m.trim_start_matches(['_', '-']).to_owned()
}

/// The warning for a name that does not fit.
pub fn warning(server: &str, action: &str, mcp: &str) -> String {
    let schema = format!("{server}_{action}");
    format!(
        "MCP tool '{mcp}' of server '{server}' is offered as '{schema}' ({} characters): Claude Code names it \
         {CLIENT_PREFIX}{schema}, past its limit of {CLIENT_LIMIT}; set \"short_names\": true in \
         mcp_servers.{server} to offer it under a shorter stable name",
        schema.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_fit_and_are_stable() {
        let long = "a_tool_with_a_name_long_enough_to_pass_a_clients_limit_with_its_prefix";
        assert!(!fits("pics", long));
        let s = short("pics", long, long).unwrap();
        assert!(fits("pics", &s), "{s}");
        assert_eq!(s, short("pics", long, long).unwrap());
        assert_ne!(s, short("pics", long, "another").unwrap());
        assert_eq!(short(&"s".repeat(40), long, long), None);
    }
}
