//! "Did you mean …?": the closest names to a mistyped tool, action, flag, command or task id, and the notes that
//! explain an unknown tool (a personal tier that was not searched). Hints that reach an LLM are rewritten here to
//! name what an LLM can do (the meta tools, `tools/list`), never a shell command.

use crate::dirs::Dirs;
use crate::error::{CallError, Detail, ErrorCode};
use serde_json::{json, Value};

/// How far a candidate may be from the word: one edit per three characters, at least one.
fn max_distance(word: &str) -> usize {
    (word.chars().count() / 3).max(1)
}

fn key(s: &str) -> String {
    s.to_lowercase().replace('-', "_")
}

/// The candidates close to `word`, closest first (at most three): within a few edits (a swap counts as one),
/// or starting with it. Case and `-`/`_` do not count.
pub fn close<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let w = key(word);
    if w.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter_map(|c| {
            let k = key(c);
            if k == w {
                return None;
            }
            let d = strsim::damerau_levenshtein(&w, &k);
            if d <= max_distance(&w) {
                Some((d, c))
            } else if (w.chars().count() >= 2 && k.starts_with(&w)) || (w.chars().count() >= 4 && k.contains(&w)) {
                Some((max_distance(&w) + 1, c))
            } else {
                None
            }
        })
        .collect();
    // Stable: on a tie, the candidate given first wins (tools before runner commands).
    scored.sort_by_key(|s| s.0);
    let mut seen = std::collections::HashSet::new();
    scored.retain(|s| seen.insert(s.1));
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

/// The one candidate closest to `word`, if any is close.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    close(word, candidates).into_iter().next()
}

/// `did you mean "a"?` / `did you mean "a" or "b"?`, or nothing.
pub fn did_you_mean(names: &[&str]) -> Option<String> {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    match quoted.as_slice() {
        [] => None,
        [one] => Some(format!("did you mean {one}?")),
        [init @ .., last] => Some(format!("did you mean {} or {last}?", init.join(", "))),
    }
}

/// Why the personal tier did not take part, when it did not: the commonest reason a tool is "unknown".
pub fn personal_tier_note(dirs: &Dirs) -> Option<String> {
    match &dirs.anima {
        None => Some(
            "the personal tier was not searched: no anima dir (set ANIMAWORKS_ANIMA_DIR or pass --anima-dir)".into(),
        ),
        Some(a) if !a.is_dir() => Some(format!(
            "the anima dir {} does not exist, so no personal tool was found (a typo in ANIMAWORKS_ANIMA_DIR or --anima-dir?)",
            a.display()
        )),
        Some(a) if !a.join("tools").is_dir() => Some(format!(
            "the anima dir {} has no tools folder, so it has no personal tools",
            a.display()
        )),
        Some(_) => None,
    }
}

/// The error for a tool no tier has: the closest tool names (or runner commands), and why the personal tier did
/// not take part when it did not.
pub fn unknown_tool(tool: &str, why: &str, tools: &[&str], dirs: &Dirs) -> CallError {
    let commands = crate::names::RESERVED.iter().copied().filter(|c| !c.contains('_'));
    let near = close(tool, tools.iter().copied().chain(commands));
    let mut hint = did_you_mean(&near).map(|d| format!("{d} ")).unwrap_or_default();
    hint.push_str("`animaworks-tool tools` shows every tool");
    let mut message = format!("no tool named {tool:?} in any tier{why}");
    if let Some(note) = personal_tier_note(dirs) {
        message.push_str("; ");
        message.push_str(&note);
    }
    let mut e = CallError::new(ErrorCode::UnknownTool, message)
        .hint(hint)
        .with(Detail::Tool, tool);
    if let Some(n) = near.first() {
        e = e.with(Detail::DidYouMean, *n);
    }
    e
}

/// The error for an action a tool does not have, with the closest of its actions.
pub fn unknown_action(tool: &str, action: &str, actions: &[&str]) -> CallError {
    let near = close(action, actions.iter().copied());
    let listed = if actions.is_empty() {
        "none".to_owned()
    } else {
        actions.join(", ")
    };
    let mut hint = did_you_mean(&near).map(|d| format!("{d} ")).unwrap_or_default();
    hint.push_str(&format!("`animaworks-tool {tool} --help` lists them"));
    let mut e = CallError::new(
        ErrorCode::UnknownAction,
        format!("tool {tool} has no action {action:?}; its actions: {listed}"),
    )
    .hint(hint)
    .with(Detail::Tool, tool)
    .with(Detail::Action, action);
    if let Some(n) = near.first() {
        e = e.with(Detail::DidYouMean, *n);
    }
    e
}

/// Who reads a hint: an LLM through `use_tool` (which has the meta tools) or an MCP client (which has
/// `tools/list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    UseTool,
    Mcp,
}

fn request(tool: &str, action: &str, args: Value) -> String {
    json!({"tool_name": tool, "action": action, "args": args}).to_string()
}

/// The same error with a hint an LLM can act on: the closest name and the meta tool (or `tools/list`) that
/// shows more. A hint that names a shell command is replaced, never passed on.
pub fn for_llm(e: &CallError, reader: Reader) -> CallError {
    let tool = e.detail(Detail::Tool).and_then(Value::as_str);
    let action = e.detail(Detail::Action).and_then(Value::as_str);
    let near = e.detail(Detail::DidYouMean).and_then(Value::as_str);
    let mean = |n: &str| did_you_mean(&[n]).map(|d| format!("{d} ")).unwrap_or_default();
    let hint = match (reader, e.code, tool) {
        (Reader::UseTool, ErrorCode::UnknownTool, _) => Some(format!(
            "{}{} lists the tools you may call",
            near.map(mean).unwrap_or_default(),
            request("help", "list", json!({}))
        )),
        (Reader::UseTool, ErrorCode::UnknownAction, Some(t)) => Some(format!(
            "{}{} shows its actions",
            near.map(mean).unwrap_or_default(),
            request("help", "describe", json!({"tool": t}))
        )),
        (Reader::UseTool, ErrorCode::InvalidArguments | ErrorCode::Usage, Some(t)) => {
            let mut args = json!({"tool": t});
            if let Some(a) = action {
                args["action"] = a.into();
            }
            Some(format!("{} shows the arguments", request("help", "describe", args)))
        }
        (Reader::Mcp, ErrorCode::UnknownTool | ErrorCode::UnknownAction, _) => Some(format!(
            "{}tools/list shows every tool this server offers",
            near.map(mean).unwrap_or_default()
        )),
        (Reader::Mcp, ErrorCode::InvalidArguments | ErrorCode::Usage, Some(_)) => {
            Some("the tool's inputSchema in tools/list gives the arguments".to_owned())
        }
        _ => e.hint.clone().filter(|h| !names_a_command(h)),
    };
    let mut out = e.clone();
    out.hint = hint;
    out
}

/// Whether a hint tells someone to run something in a shell.
fn names_a_command(hint: &str) -> bool {
    hint.contains("animaworks-tool") || hint.contains("export ") || hint.contains("pip install")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_by_edits_swaps_and_prefixes() {
        let tools = ["hello", "weather", "notes_tool"];
        assert_eq!(closest("helo", tools), Some("hello"));
        assert_eq!(closest("hlelo", tools), Some("hello"));
        assert_eq!(closest("wether", tools), Some("weather"));
        assert_eq!(closest("notes-tool", ["notes_tool_x", "notes_tol"]), Some("notes_tol"));
        assert_eq!(closest("note", tools), Some("notes_tool"));
        assert_eq!(closest("zzz", tools), None);
        assert_eq!(closest("hello", tools), None, "the word itself is no suggestion");
        assert_eq!(closest("--wh", ["--who", "--json"]), Some("--who"));
        assert_eq!(closest("lst", ["list", "tools"]), Some("list"));
        assert_eq!(did_you_mean(&["a", "b"]).unwrap(), "did you mean \"a\" or \"b\"?");
    }

    #[test]
    fn hints_for_an_llm_name_meta_tools_never_commands() {
        let e = unknown_tool("helo", "", &["hello"], &Dirs::resolve(&Default::default()));
        let u = for_llm(&e, Reader::UseTool);
        let h = u.hint.unwrap();
        assert!(
            h.contains("\"hello\"") && h.contains(r#"{"tool_name":"help","action":"list","args":{}}"#),
            "{h}"
        );
        assert!(!h.contains("animaworks-tool"), "{h}");
        let e = unknown_action("hello", "gret", &["greet"]);
        let h = for_llm(&e, Reader::UseTool).hint.unwrap();
        assert!(h.contains("\"greet\"") && h.contains("describe"), "{h}");
        let h = for_llm(&e, Reader::Mcp).hint.unwrap();
        assert!(h.contains("tools/list") && !h.contains("animaworks-tool"), "{h}");
        let e = CallError::new(ErrorCode::Internal, "x").hint("run `animaworks-tool refresh`");
        assert_eq!(for_llm(&e, Reader::UseTool).hint, None);
    }
}
