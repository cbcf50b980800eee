//! Background tasks for LLM callers. `use-tool` takes `{"tool_name": "task", "action": "submit" | "show", "args":
//! …}`; the MCP server offers the same as the tools `task_submit` and `task_show`. `task` is one of the runner's
//! reserved names, so these never clash with a tool's schema names. A submit is checked exactly as
//! `animaworks-tool submit` checks it (tool, arguments, permissions and gates, credentials) before anything is
//! stored.

use awt_core::call::Runner;
use awt_core::error::{CallError, Detail, ErrorCode};
use awt_tasks::{content, submit, Task};
use serde_json::{json, Map, Value};
use std::path::Path;

/// The reserved tool name of the background actions.
pub const TASK_TOOL: &str = "task";

/// `(schema name, description, input schema)` of each background action, for catalogues.
pub fn actions() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "task_submit",
            "Run a tool's action in the background; answers at once with a task id. Checked like a call \
             (arguments, permissions, gates, credentials) before it is queued.",
            json!({"type": "object", "properties": {
                "tool": {"type": "string", "description": "The tool's name"},
                "action": {"type": "string", "description": "The action's name"},
                "args": {"type": "object", "description": "The action's arguments"}},
                "required": ["tool", "action"]}),
        ),
        (
            "task_show",
            "The state of a background task: status, progress, and its result or error once it has ended.",
            json!({"type": "object", "properties": {
                "task_id": {"type": "string", "description": "The id task_submit answered"}},
                "required": ["task_id"]}),
        ),
    ]
}

fn text_arg<'a>(args: &'a Map<String, Value>, key: &str, what: &str) -> Result<&'a str, CallError> {
    args.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            CallError::new(
                ErrorCode::InvalidArguments,
                format!("task {what}: \"{key}\" (a string) is required"),
            )
            .with(Detail::Pointer, format!("/{key}"))
        })
}

/// A task's record as it is shown (`jobs show`, `jobs list --json`, `task_show`): its content blocks, if any, as
/// the lines a call prints (a text block's text, a description of any other, `[image/png, 12 KB]`, and the file
/// it was written to when `save` names a folder), never their base64.
pub fn shown(t: &Task, save: Option<&Path>) -> Value {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Some(blocks) = &t.content {
        v["content"] = json!(crate::content::lines(&content::read_back(blocks), save));
    }
    v
}

/// Run background action `action` (`submit` or `show`) with `args`: the answer, and for `show` the content
/// blocks of the task's result (checked again: a task file may be forged), for a caller that sends blocks on.
/// A block is saved under `save` when given.
pub async fn answer(
    runner: &Runner,
    action: &str,
    args: &Map<String, Value>,
    save: Option<&Path>,
) -> Result<(Value, Option<Vec<Value>>), CallError> {
    match action {
        "submit" => {
            let tool = text_arg(args, "tool", "submit")?;
            let act = text_arg(args, "action", "submit")?;
            let call_args = match args.get("args") {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(v @ Value::Object(_)) => v.clone(),
                Some(_) => {
                    return Err(
                        CallError::new(ErrorCode::InvalidArguments, "task submit: \"args\" must be an object")
                            .with(Detail::Pointer, "/args"),
                    )
                }
            };
            let words = vec![act.to_owned(), "--json".to_owned(), call_args.to_string()];
            let checked = submit::submit(runner, tool, &words, false).await?;
            let mut receipt = checked.task.receipt();
            let warnings: Vec<&String> = checked.said.iter().chain(&checked.warnings).collect();
            if !warnings.is_empty() {
                receipt["warnings"] = json!(warnings);
            }
            Ok((receipt, None))
        }
        "show" => {
            let id = text_arg(args, "task_id", "show")?;
            let t = submit::show(runner, id)?;
            Ok((shown(&t, save), t.content.as_deref().map(content::read_back)))
        }
        other => Err(CallError::new(
            ErrorCode::UnknownAction,
            format!("the task tool has no action {other:?}"),
        )
        .hint("its actions: submit, show")),
    }
}
