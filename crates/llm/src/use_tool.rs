//! AnimaWorks' `use_tool`: `{"tool_name", "action", "args"}` in, the text an LLM reads out.
//!
//! A result is text: a string result as it is, `null` as `(no output)`, any other JSON value pretty-printed
//! (indent 2, non-ASCII kept, as the original's `json.dumps(..., ensure_ascii=False, indent=2)`). Text longer
//! than the cap (default 50,000 UTF-8 bytes) is cut on a character boundary and ends with the original's marker.
//!
//! A failure is answered as the original answers it ([`render_error`]). The tool's own error (and an action the
//! tool does not have, which the original hands to the module's `dispatch`) is the original's plain text
//! `Error executing <tool>_<action>: <message>`. The runner's refusals are one compact JSON line
//! `{"status": "error", "error_type", "message", "suggestion", "code"}`: `error_type` and `message` in the
//! original's words and in `config.json`'s locale, `suggestion` the runner's own message and hint (the exact key
//! and file), `code` the runner's code (protocol.md §6):
//!
//! | code | error_type |
//! |---|---|
//! | `invalid_arguments`, `usage` (a malformed request) | `InvalidArguments` |
//! | `permission_denied`, `unknown_tool` (unknown and private tools: "not permitted", as the original) | `PermissionDenied` |
//! | `unknown_action` of a tool whose `--schemas` failed (it cannot be loaded) | `ToolExecutionError` |
//! | `timeout` | `Timeout` |
//! | `cancelled` | `Cancelled` |
//! | `spawn_failed`, `bad_output`, `crashed`, `output_capped`, `internal` | `ToolExecutionError` |
//! | `approval_pending` (a human is asked; the anima is notified in its inbox) | `ApprovalPending` |
//!
//! The meta tool `help` (a name no tool can take: it is reserved) keeps the catalogue out of the LLM's context
//! until it needs it: action `list` gives the compact catalogue, `describe` (`{"tool": "<tool>"}`, optional
//! `"action"`) one tool's full schemas, `search` (`{"query": "words"}`) the catalogue lines that match.

use crate::catalog::{self, Entry};
use awt_core::call::{CallOptions, Runner};
use awt_core::error::{CallError, Detail, ErrorCode};
use awt_core::locale::Locale;
use awt_core::stream::{Cancel, Observer};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// The original's cap on the text an LLM gets, in UTF-8 bytes.
pub const DEFAULT_MAX_BYTES: usize = 50_000;
/// The meta tool's name.
pub const META_TOOL: &str = "help";

/// How `use_tool` bounds a call.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Cap on the answer text, in UTF-8 bytes.
    pub max_bytes: usize,
    /// Overrides every action's `timeout_s`.
    pub timeout: Option<Duration>,
    /// Where a result's non-text content blocks are written (`--save-content`); else they are only described.
    pub save_content: Option<std::path::PathBuf>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: DEFAULT_MAX_BYTES,
            timeout: None,
            save_content: None,
        }
    }
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq)]
pub struct UseToolCall {
    pub tool_name: String,
    pub action: String,
    pub args: Map<String, Value>,
}

/// What `use_tool` answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The result text (already cut to the cap).
    Text(String),
    /// The error object, and the runner's code (for an exit status).
    Error(Value, ErrorCode),
}

impl Answer {
    /// The answer as one JSON line of `--serve`: `{"status": "ok", "result": text}` or the error object.
    pub fn to_line(&self, id: Option<&Value>) -> Value {
        let mut v = match self {
            Answer::Text(t) => json!({"status": "ok", "result": t}),
            Answer::Error(Value::String(t), code) => json!({"status": "error", "result": t, "code": code.as_str()}),
            Answer::Error(e, _) => e.clone(),
        };
        if let (Some(id), Some(obj)) = (id, v.as_object_mut()) {
            obj.insert("id".into(), id.clone());
        }
        v
    }
}

/// The `use_tool` error type for a runner code (table in the module doc).
pub fn error_type(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidArguments | ErrorCode::Usage => "InvalidArguments",
        ErrorCode::PermissionDenied => "PermissionDenied",
        ErrorCode::UnknownTool | ErrorCode::UnknownAction => "UnknownTool",
        ErrorCode::Timeout => "Timeout",
        ErrorCode::Cancelled => "Cancelled",
        ErrorCode::ToolError
        | ErrorCode::SpawnFailed
        | ErrorCode::BadOutput
        | ErrorCode::Crashed
        | ErrorCode::OutputCapped
        | ErrorCode::Internal => "ToolExecutionError",
        ErrorCode::ApprovalPending => "ApprovalPending",
    }
}

/// The error object an LLM reads for a failed call.
pub fn error_answer(e: &CallError) -> Answer {
    let e = &awt_core::suggest::for_llm(e, awt_core::suggest::Reader::UseTool);
    let mut obj = Map::new();
    obj.insert("status".into(), "error".into());
    obj.insert("error_type".into(), error_type(e.code).into());
    obj.insert("message".into(), e.message.clone().into());
    if let Some(h) = &e.hint {
        obj.insert("suggestion".into(), h.clone().into());
    }
    obj.insert("code".into(), e.code.as_str().into());
    if let Some(k) = e.detail(Detail::Key) {
        obj.insert("key".into(), k.clone());
    }
    if let Some(id) = e.detail(Detail::ApprovalId) {
        obj.insert("approval_id".into(), id.clone());
    }
    Answer::Error(Value::Object(obj), e.code)
}

/// A result value as the text the original gives an LLM.
pub fn result_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "(no output)".to_owned(),
        other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
    }
}

/// Cut `text` to at most `max` UTF-8 bytes on a character boundary, with the original's English marker.
pub fn truncate(text: String, max: usize) -> String {
    truncate_in(text, max, Locale::En)
}

/// Cut `text` to at most `max` UTF-8 bytes on a character boundary, with the original's marker in `locale`.
/// (The original cuts `max` characters and then drops 1,000 characters at a time until the bytes fit, so
/// Japanese text keeps about 16,000 characters there; here it keeps every character that fits.)
pub fn truncate_in(text: String, max: usize, locale: Locale) -> String {
    if text.len() <= max {
        return text;
    }
    let cut = (0..=max).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    format!("{}\n\n{}", &text[..cut], locale.output_truncated(text.len()))
}

/// Read a request object. `args` may be absent (no arguments), an object, or a string holding a JSON object
/// (some models send it so). A provider's function call is a request too: `{"name": <function name>,
/// "arguments" (OpenAI, often a JSON string) | "input" (Anthropic) | "args" (Gemini): {...}}`, the name as
/// `schemas` gave it (shortened names included); it is parsed with an empty `tool_name` and the name as `action`,
/// and [`answer`] finds the action it names. The call may come in the wrapper its SDK hands back: OpenAI's tool
/// call `{"id", "type": "function", "function": {"name", "arguments"}}`, or Gemini's `Part` `{"functionCall" |
/// "function_call": {"id"?, "name", "args"}}` ([`function_call_of`]).
pub fn parse_request(v: &Value) -> Result<UseToolCall, CallError> {
    let v = function_call_of(v).unwrap_or(v);
    if let Some(obj) = v.as_object().filter(|o| !o.contains_key("tool_name")) {
        if let Some(Value::String(name)) = obj.get("name").filter(|n| n.as_str().is_some_and(|n| !n.is_empty())) {
            let args = ["arguments", "input", "args"].iter().find_map(|k| obj.get(*k)).cloned();
            let mut req = parse_request(&json!({"tool_name": "-", "action": name, "args": args}))?;
            req.tool_name.clear();
            return Ok(req);
        }
    }
    let bad = |what: String| {
        CallError::new(ErrorCode::Usage, format!("invalid use_tool request: {what}"))
            .hint(r#"send {"tool_name": "<tool>", "action": "<action>", "args": {...}}; {"tool_name": "help", "action": "list"} lists the tools"#)
    };
    let Some(obj) = v.as_object() else {
        return Err(bad(format!("expected a JSON object, got {}", short(v))));
    };
    // A missing or empty name is answered in the original's words.
    let both = || {
        let mut e = bad(String::new());
        e.message = "use_tool requires both 'tool_name' and 'action'".to_owned();
        e
    };
    let field = |k: &str| -> Result<String, CallError> {
        match obj.get(k) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            None | Some(Value::String(_)) | Some(Value::Null) => Err(both()),
            Some(other) => Err(bad(format!("{k:?} must be a non-empty string, got {}", short(other)))),
        }
    };
    let tool_name = field("tool_name")?;
    let action = field("action")?;
    let args = match obj.get("args") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(bad(format!(
                    "\"args\" must be an object, got the string {}",
                    short(&Value::String(s.clone()))
                )))
            }
        },
        Some(other) => return Err(bad(format!("\"args\" must be an object, got {}", short(other)))),
    };
    Ok(UseToolCall {
        tool_name,
        action,
        args,
    })
}

/// The function call inside a provider SDK's wrapper: OpenAI's `ChatCompletionMessageFunctionToolCall` (its
/// `function`) or Gemini's `Part` (its `functionCall`, `function_call` in the Python SDK's dumps); `None` for
/// anything else.
pub fn function_call_of(v: &Value) -> Option<&Value> {
    let obj = v
        .as_object()
        .filter(|o| !o.contains_key("tool_name") && !o.contains_key("name"))?;
    let inner = match obj.get("type") {
        Some(t) if t == "function" => obj.get("function"),
        Some(_) => None,
        None => obj.get("functionCall").or_else(|| obj.get("function_call")),
    }?;
    inner.get("name").and_then(Value::as_str).map(|_| inner)
}

/// The id a provider gave its function call (OpenAI's tool call id, Gemini's `functionCall.id`), which `--serve`
/// echoes back with the answer; else the request's own `"id"`.
pub fn request_id(v: &Value) -> Option<&Value> {
    v.get("id")
        .or_else(|| function_call_of(v).and_then(|c| c.get("id")).filter(|id| !id.is_null()))
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

/// Answer one request: the meta tool, or validate → permit → run of a tool action.
pub async fn answer(
    runner: &Runner,
    req: &UseToolCall,
    limits: &Limits,
    obs: &mut dyn Observer,
    cancel: Cancel,
) -> Answer {
    let by_function;
    let req = if req.tool_name.is_empty() {
        match function_call(runner, req).await {
            Ok(r) => {
                by_function = r;
                &by_function
            }
            Err(e) => return error_answer(&e),
        }
    } else {
        req
    };
    let out = if req.tool_name == META_TOOL {
        meta(runner, &req.action, &req.args).await.map(|v| (v, None))
    } else if req.tool_name == super::background::TASK_TOOL {
        // A task's blocks are in the record, described (and saved): the record is the answer.
        super::background::answer(runner, &req.action, &req.args, limits.save_content.as_deref())
            .await
            .map(|(v, _)| (v, None))
    } else {
        call(runner, req, limits, obs, cancel).await
    };
    let locale = Locale::of_data_dir(&runner.dirs.data);
    match out {
        Ok((v, None)) => Answer::Text(truncate_in(result_text(&v), limits.max_bytes, locale)),
        Ok((_, Some(blocks))) => {
            let text = crate::content::text(&blocks, limits.save_content.as_deref());
            Answer::Text(truncate_in(text, limits.max_bytes, locale))
        }
        Err(e) if req.tool_name == META_TOOL || req.tool_name == super::background::TASK_TOOL => error_answer(&e),
        Err(e) => render_error(&e, req, limits, locale),
    }
}

/// The request a provider's function call means (its name as `schemas` gave it).
async fn function_call(runner: &Runner, req: &UseToolCall) -> Result<UseToolCall, CallError> {
    let entries = catalog::permitted(runner).await;
    let Some((tool, action)) = super::providers::resolve_name(&entries, &req.action) else {
        return Err(runner.refuse_unknown(
            &req.action,
            CallError::new(
                ErrorCode::UnknownTool,
                format!("no permitted action has the function name {:?}", req.action),
            )
            .hint(r#"{"tool_name": "help", "action": "list"} lists the tools"#)
            .with(Detail::Tool, req.action.clone()),
        ));
    };
    Ok(UseToolCall {
        tool_name: tool.to_owned(),
        action: action.to_owned(),
        args: req.args.clone(),
    })
}

/// A failed call as the original's `use_tool` words it (table in the module doc), in `locale`.
pub fn render_error(e: &CallError, req: &UseToolCall, limits: &Limits, locale: Locale) -> Answer {
    // Hints name what an LLM can do (the meta tools, the closest name), never a shell command.
    let e = &awt_core::suggest::for_llm(e, awt_core::suggest::Reader::UseTool);
    let tool = req.tool_name.as_str();
    let ours = || match &e.hint {
        Some(h) => format!("{}; {h}", e.message),
        None => e.message.clone(),
    };
    let structured = |error_type: &str, message: String, suggestion: String| {
        let mut obj = Map::new();
        obj.insert("status".into(), "error".into());
        obj.insert("error_type".into(), error_type.into());
        obj.insert("message".into(), message.into());
        obj.insert("suggestion".into(), suggestion.into());
        obj.insert("code".into(), e.code.as_str().into());
        if let Some(k) = e.detail(Detail::Key) {
            obj.insert("key".into(), k.clone());
        }
        if let Some(id) = e.detail(Detail::ApprovalId) {
            obj.insert("approval_id".into(), id.clone());
        }
        Answer::Error(Value::Object(obj), e.code)
    };
    // The tool's own error, and an action the tool does not have (the original hands any name to the module's
    // dispatch, whose exception it reports): the original's plain text.
    let plain =
        e.code == ErrorCode::ToolError || (e.code == ErrorCode::UnknownAction && e.detail(Detail::Action).is_some());
    match e.code {
        _ if plain => {
            let mut text = if e.message.starts_with("Error executing ") {
                e.message.clone()
            } else {
                format!("Error executing {tool}_{}: {}", req.action, e.message)
            };
            if let Some(h) = e.hint.as_deref().filter(|h| !h.is_empty()) {
                text.push_str(&format!("\n{h}"));
            }
            Answer::Error(Value::String(truncate_in(text, limits.max_bytes, locale)), e.code)
        }
        // A tool that cannot be loaded (its --schemas failed): the original's ToolExecutionError.
        ErrorCode::UnknownAction => structured(
            "ToolExecutionError",
            format!("use_tool execution failed: {tool}/{}: {}", req.action, e.message),
            e.hint.clone().unwrap_or_default(),
        ),
        // Unknown and private tools: the original answers that the tool is not permitted.
        ErrorCode::UnknownTool => structured("PermissionDenied", locale.tool_not_permitted(tool), ours()),
        ErrorCode::PermissionDenied => {
            let message = locale
                .refusal(e, tool, &req.action)
                .unwrap_or_else(|| e.message.clone());
            structured("PermissionDenied", message, ours())
        }
        ErrorCode::ApprovalPending => {
            let id = e.detail(Detail::ApprovalId).and_then(Value::as_str).unwrap_or("");
            structured("ApprovalPending", locale.approval_pending(tool, &req.action, id), ours())
        }
        _ => error_answer(e),
    }
}

/// The original's one-line JSON (`json.dumps(obj, ensure_ascii=False)`: `", "` and `": "` separators).
pub fn python_json(v: &Value) -> String {
    struct Py;
    impl serde_json::ser::Formatter for Py {
        fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
            if first {
                Ok(())
            } else {
                w.write_all(b", ")
            }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Py);
    let _ = serde::Serialize::serialize(v, &mut ser);
    String::from_utf8(out).unwrap_or_default()
}

async fn call(
    runner: &Runner,
    req: &UseToolCall,
    limits: &Limits,
    obs: &mut dyn Observer,
    cancel: Cancel,
) -> Result<(Value, Option<Vec<Value>>), CallError> {
    if let Some(e) = super::services::refusal(&runner.dirs.data, &req.tool_name) {
        return Err(runner.refuse_unknown(&req.tool_name, e));
    }
    let target = runner.open(&req.tool_name).await?.action_or_dispatch(&req.action)?;
    let mut args = req.args.clone();
    drop_strict_nulls(&target.action().input_schema, &mut args);
    let opts = CallOptions {
        timeout: limits.timeout,
        ..Default::default()
    };
    let mut catch = awt_core::stream::content::Catch::new(obs);
    let v = target.prepare(args, &opts)?.run(&mut catch, cancel).await?;
    Ok((v, catch.content()))
}

/// OpenAI's strict mode makes every property required and sends `null` for an absent optional one; such a
/// `null` is dropped when the property is optional and its schema does not accept `null`, so the call means
/// what the model meant. In nested objects too (and objects in arrays), as `schemas --strict` rewrites them.
pub fn drop_strict_nulls(schema: &Value, args: &mut Map<String, Value>) {
    drop_nulls_here(schema, args);
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (k, v) in args.iter_mut() {
        let Some(p) = props.get(k) else { continue };
        match v {
            Value::Object(m) => drop_strict_nulls(p, m),
            Value::Array(items) => {
                if let Some(item_schema) = p.get("items") {
                    for item in items.iter_mut().filter_map(Value::as_object_mut) {
                        drop_strict_nulls(item_schema, item);
                    }
                }
            }
            _ => {}
        }
    }
}

fn drop_nulls_here(schema: &Value, args: &mut Map<String, Value>) {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    args.retain(|k, v| {
        if !v.is_null() || required.contains(&k.as_str()) {
            return true;
        }
        match props.get(k) {
            // A sub-schema that does not compile alone (a $ref to the root) keeps the value: validation decides.
            Some(p) => jsonschema::validator_for(p)
                .map(|v| v.is_valid(&Value::Null))
                .unwrap_or(true),
            None => true,
        }
    });
}

async fn meta(runner: &Runner, action: &str, args: &Map<String, Value>) -> Result<Value, CallError> {
    let entries = catalog::permitted(runner).await;
    match action {
        "list" | "catalog" => Ok(Value::String(match catalog::permissions_problem(runner) {
            Some(p) => format!("{}\n{}", p.message, catalog::compact(&entries)),
            None => catalog::compact(&entries),
        })),
        "describe" => {
            let tool = args.get("tool").and_then(Value::as_str).ok_or_else(|| {
                CallError::new(
                    ErrorCode::InvalidArguments,
                    "help.describe needs \"tool\": the name of a tool",
                )
                .hint(r#"{"tool_name": "help", "action": "describe", "args": {"tool": "<tool>"}}"#)
                .with(Detail::Pointer, "/tool")
            })?;
            let Some(e) = entries.iter().find(|e| e.name() == tool) else {
                return Err(
                    CallError::new(ErrorCode::UnknownTool, format!("no permitted tool named {tool:?}"))
                        .hint(r#"{"tool_name": "help", "action": "list"} lists the tools"#)
                        .with(Detail::Tool, tool),
                );
            };
            let only = args.get("action").and_then(Value::as_str);
            Ok(describe(e, only))
        }
        "search" => {
            let query = args.get("query").and_then(Value::as_str).unwrap_or("").to_lowercase();
            let words: Vec<&str> = query.split_whitespace().collect();
            if words.is_empty() {
                return Err(CallError::new(
                    ErrorCode::InvalidArguments,
                    "help.search needs \"query\": words to look for",
                )
                .with(Detail::Pointer, "/query"));
            }
            let hits: Vec<Entry> = entries
                .into_iter()
                .filter_map(|mut e| {
                    let tool_text = format!(
                        "{} {}",
                        e.name(),
                        e.resolved.manifest.description.as_deref().unwrap_or("")
                    )
                    .to_lowercase();
                    if words.iter().all(|w| tool_text.contains(w)) {
                        return Some(e);
                    }
                    e.actions.retain(|a| {
                        let t = format!("{tool_text} {} {}", a.name, a.description).to_lowercase();
                        words.iter().all(|w| t.contains(w))
                    });
                    (!e.actions.is_empty()).then_some(e)
                })
                .collect();
            Ok(Value::String(if hits.is_empty() {
                format!("no tool matches {query:?}")
            } else {
                catalog::compact(&hits)
            }))
        }
        other => Err(CallError::new(
            ErrorCode::UnknownAction,
            format!("the meta tool help has no action {other:?}"),
        )
        .hint("its actions: list, describe (args.tool), search (args.query)")),
    }
}

/// One tool's full schemas, as `help.describe` answers.
pub fn describe(e: &Entry, only: Option<&str>) -> Value {
    let actions: Vec<Value> = e
        .actions
        .iter()
        .filter(|a| only.is_none_or(|o| awt_core::names::canon(o) == awt_core::names::canon(&a.name)))
        .map(|a| {
            let mut v = json!({"action": a.name, "description": a.description, "input_schema": a.input_schema});
            if let Some(o) = &a.output_schema {
                v["output_schema"] = o.clone();
            }
            v
        })
        .collect();
    json!({
        "tool": e.name(),
        "description": e.resolved.manifest.description.clone().unwrap_or_default(),
        "call_as": {"tool_name": e.name(), "action": "<action>", "args": "<an object matching input_schema>"},
        "actions": actions,
    })
}

/// The `use_tool` tool itself, in AnimaWorks' shape (`name`, `description`, `input_schema`).
pub fn schema() -> Value {
    json!({
        "name": "use_tool",
        "description": "Call an action of an external tool. The catalogue lists every tool and its actions. Before \
            calling an action whose arguments you do not know, get its schema with {\"tool_name\": \"help\", \"action\": \
            \"describe\", \"args\": {\"tool\": \"<tool>\"}}; {\"tool_name\": \"help\", \"action\": \"search\", \"args\": \
            {\"query\": \"<words>\"}} finds tools. A long action can run in the background: {\"tool_name\": \"task\", \
            \"action\": \"submit\", \"args\": {\"tool\": \"<tool>\", \"action\": \"<action>\", \"args\": {...}}} answers at \
            once with a task_id; {\"tool_name\": \"task\", \"action\": \"show\", \"args\": {\"task_id\": \"<id>\"}} tells its \
            status and result. Errors come back as JSON with status \"error\", error_type, message and suggestion.",
        "input_schema": {
            "type": "object",
            "properties": {
                "tool_name": {"type": "string", "description": "The tool, e.g. \"github\", or \"help\" for the catalogue."},
                "action": {"type": "string", "description": "The action of that tool, e.g. \"create_issue\"."},
                "args": {"type": "object", "description": "The action's arguments, as its input_schema says.", "additionalProperties": true}
            },
            "required": ["tool_name", "action", "args"],
            "additionalProperties": false
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_a_char_boundary_with_the_marker() {
        let s = "é".repeat(30_000); // 60,000 bytes
        let t = truncate(s, DEFAULT_MAX_BYTES);
        let (body, marker) = t.split_once("\n\n").unwrap();
        assert_eq!(body.len(), 50_000);
        assert_eq!(
            marker,
            "[Output truncated because it exceeded 50KB. Original size: 60000]"
        );
        let t = truncate("aé".into(), 2);
        assert!(t.starts_with("a\n\n"), "{t}");
        assert_eq!(truncate("short".into(), 5), "short");
    }

    #[test]
    fn result_text_like_the_original() {
        assert_eq!(result_text(&json!("plain")), "plain");
        assert_eq!(result_text(&Value::Null), "(no output)");
        assert_eq!(result_text(&json!({"a": "日本"})), "{\n  \"a\": \"日本\"\n}");
    }

    #[test]
    fn every_code_has_an_error_type() {
        for c in ErrorCode::ALL {
            assert!(!error_type(c).is_empty());
        }
        assert_eq!(error_type(ErrorCode::ToolError), "ToolExecutionError");
    }

    #[test]
    fn requests() {
        let r = parse_request(&json!({"tool_name": "t", "action": "a", "args": "{\"x\": 1}"})).unwrap();
        assert_eq!(r.args["x"], 1);
        // The provider SDKs' own shapes of a call, as they hand them back.
        let openai =
            json!({"id": "call_1", "type": "function", "function": {"name": "t_a", "arguments": "{\"x\": 1}"}});
        let gemini = json!({"functionCall": {"name": "t_a", "args": {"x": 1}}});
        for v in [openai, gemini] {
            let r = parse_request(&v).unwrap_or_else(|e| panic!("{v}: {e:?}"));
            assert_eq!((r.tool_name.as_str(), r.action.as_str()), ("", "t_a"), "{v}");
            assert_eq!(r.args["x"], 1, "{v}");
        }
        let e = parse_request(&json!({"tool_name": "t"})).unwrap_err();
        assert_eq!(e.message, "use_tool requires both 'tool_name' and 'action'");
        assert!(parse_request(&json!([1])).is_err());
    }

    #[test]
    fn strict_nulls_dropped_only_when_optional_and_not_nullable() {
        let schema = json!({"type": "object", "required": ["r"], "properties": {
            "r": {"type": "integer"}, "o": {"type": "integer"}, "n": {"type": ["integer", "null"]}}});
        let mut args = json!({"r": null, "o": null, "n": null}).as_object().unwrap().clone();
        drop_strict_nulls(&schema, &mut args);
        assert!(args.contains_key("r") && args.contains_key("n") && !args.contains_key("o"));
        let schema = json!({"type": "object", "properties": {
            "in": {"type": "object", "properties": {"o": {"type": "string"}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {"o": {"type": "string"}}}}}});
        let mut args = json!({"in": {"o": null}, "list": [{"o": null}, {"o": "x"}]})
            .as_object()
            .unwrap()
            .clone();
        drop_strict_nulls(&schema, &mut args);
        assert_eq!(Value::Object(args), json!({"in": {}, "list": [{}, {"o": "x"}]}));
    }
}
