//! Every permitted action in a provider's function-calling shape. Names are schema names (`<tool>_<action>`),
//! which discovery already holds to `^[a-zA-Z0-9_-]{1,64}$`, the pattern every provider accepts.
//!
//! OpenAI's strict mode wants every object closed (`additionalProperties: false`) and every property required;
//! [`strict`] rewrites a schema so (an optional property becomes nullable, and `use_tool` drops the `null` such a
//! property then receives), or says why it cannot: open `additionalProperties`, a free-form nested object,
//! `patternProperties` and the other keywords strict mode does not take.

use crate::llm::catalog::{one_line, Entry};
use crate::manifest::Action;
use serde_json::{json, Map, Value};
use std::collections::HashSet;

/// A provider's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// AnimaWorks' `get_tool_schemas()` form: `name`, `description`, `input_schema`.
    Animaworks,
    /// Anthropic Messages API `tools`: `name`, `description`, `input_schema` (an object schema).
    Anthropic,
    /// OpenAI Chat Completions `tools`: `{"type": "function", "function": {name, description, parameters, strict}}`.
    Openai,
    /// MCP `tools/list` entries: `name`, `description`, `inputSchema`, `outputSchema`, `annotations`.
    Mcp,
}

/// The tools in one shape, and what could not be given as asked.
#[derive(Debug, Default)]
pub struct Rendered {
    pub tools: Vec<Value>,
    /// OpenAI only: `(name, why)` of every action given with `strict: false`.
    pub not_strict: Vec<(String, NotStrict)>,
    /// `(name, why)` of actions left out: a schema name another tool already uses.
    pub skipped: Vec<(String, String)>,
}

/// Every action of `entries` in `format`.
pub fn render(format: Format, entries: &[Entry]) -> Rendered {
    let mut out = Rendered::default();
    let mut seen = HashSet::new();
    for e in entries {
        for a in &e.actions {
            if !seen.insert(a.schema_name.clone()) {
                out.skipped.push((
                    a.schema_name.clone(),
                    format!("{}.{}: another tool already has this name", e.name(), a.name),
                ));
                continue;
            }
            out.tools.push(match format {
                Format::Animaworks => {
                    json!({"name": a.schema_name, "description": description(e, a), "input_schema": a.input_schema})
                }
                Format::Anthropic => {
                    json!({"name": a.schema_name, "description": description(e, a), "input_schema": object_schema(&a.input_schema)})
                }
                Format::Openai => {
                    let (parameters, strict_ok) = match strict(&object_schema(&a.input_schema)) {
                        Ok(s) => (s, true),
                        Err(why) => {
                            out.not_strict.push((a.schema_name.clone(), why));
                            (object_schema(&a.input_schema), false)
                        }
                    };
                    json!({"type": "function", "function": {
                        "name": a.schema_name, "description": description(e, a), "parameters": parameters, "strict": strict_ok}})
                }
                Format::Mcp => mcp_tool(e, a),
            });
        }
    }
    out
}

/// The action's description, else the first line of the tool's.
pub fn description(e: &Entry, a: &Action) -> String {
    if a.description.trim().is_empty() {
        one_line(e.resolved.manifest.description.as_deref().unwrap_or(""))
    } else {
        a.description.clone()
    }
}

/// An input schema as providers want it: a JSON object with `"type": "object"`.
pub fn object_schema(s: &Value) -> Value {
    match s {
        Value::Object(m) => {
            let mut m = m.clone();
            m.entry("type").or_insert_with(|| "object".into());
            Value::Object(m)
        }
        _ => json!({"type": "object"}),
    }
}

/// One action as an MCP tool (the shape of a `tools/list` entry).
pub fn mcp_tool(e: &Entry, a: &Action) -> Value {
    let mut v = json!({
        "name": a.schema_name,
        "title": format!("{}.{}", e.name(), a.name),
        "description": description(e, a),
        "inputSchema": object_schema(&a.input_schema),
    });
    let gated = !matches!(crate::call::gate_of(&e.resolved, a), crate::policy::gate::Gate::Open);
    if let Some(ann) = crate::llm::annotations::mcp_object(a, gated) {
        v["annotations"] = ann;
    }
    // MCP's outputSchema must describe an object (structuredContent is an object); other shapes are left out.
    if let Some(o) = a
        .output_schema
        .as_ref()
        .filter(|o| o.get("type").and_then(Value::as_str) == Some("object"))
    {
        v["outputSchema"] = o.clone();
    }
    v
}

/// Keywords OpenAI's strict mode does not accept.
const NOT_STRICT_KEYWORDS: &[&str] = &[
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "if",
    "then",
    "else",
    "not",
    "allOf",
    "oneOf",
    "minProperties",
    "maxProperties",
];

/// Why a schema cannot be given to OpenAI in strict mode; `at` is the JSON pointer of the place (`/` for the
/// root).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotStrict {
    /// A boolean schema, which accepts any value.
    #[error("at {at}: a boolean schema (any value) cannot be strict")]
    BooleanSchema { at: String },
    /// A keyword strict mode does not take (`patternProperties`, `oneOf`, …).
    #[error("at {at}: {keyword} is not supported in strict mode")]
    Keyword { at: String, keyword: &'static str },
    /// An object that allows extra keys.
    #[error("at {at}: open additionalProperties (any extra key) cannot be strict")]
    OpenAdditionalProperties { at: String },
    /// A nested object without `properties`.
    #[error("at {at}: a free-form object (no properties) cannot be strict")]
    FreeForm { at: String },
}

/// `schema` rewritten for OpenAI's strict mode, or why it cannot be.
pub fn strict(schema: &Value) -> Result<Value, NotStrict> {
    strictify(schema, "", true)
}

fn strictify(s: &Value, at: &str, root: bool) -> Result<Value, NotStrict> {
    let here = || if at.is_empty() { "/".to_owned() } else { at.to_owned() };
    let Value::Object(m) = s else {
        return Err(NotStrict::BooleanSchema { at: here() });
    };
    if let Some(k) = NOT_STRICT_KEYWORDS.iter().find(|k| m.contains_key(**k)) {
        return Err(NotStrict::Keyword { at: here(), keyword: k });
    }
    let mut m = m.clone();
    let is_object = m.get("type").and_then(Value::as_str) == Some("object") || m.contains_key("properties");
    if is_object {
        match m.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            Some(_) => return Err(NotStrict::OpenAdditionalProperties { at: here() }),
        }
        if !root && !m.contains_key("properties") {
            return Err(NotStrict::FreeForm { at: here() });
        }
        let required: HashSet<String> = m
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        let props = m
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut new_props = Map::new();
        for (k, p) in &props {
            let p = strictify(p, &format!("{at}/{k}"), false)?;
            new_props.insert(k.clone(), if required.contains(k) { p } else { nullable(p) });
        }
        m.insert(
            "required".into(),
            Value::Array(props.keys().map(|k| Value::String(k.clone())).collect()),
        );
        m.insert("properties".into(), Value::Object(new_props));
        m.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(items) = m.get("items").cloned() {
        m.insert("items".into(), strictify(&items, &format!("{at}/items"), false)?);
    }
    if let Some(Value::Array(alts)) = m.get("anyOf").cloned() {
        let alts = alts
            .iter()
            .enumerate()
            .map(|(i, a)| strictify(a, &format!("{at}/anyOf/{i}"), false))
            .collect::<Result<_, _>>()?;
        m.insert("anyOf".into(), Value::Array(alts));
    }
    for defs in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = m.get(defs).cloned() {
            let mut nd = Map::new();
            for (k, v) in d {
                nd.insert(k.clone(), strictify(&v, &format!("{at}/{defs}/{k}"), false)?);
            }
            m.insert(defs.into(), Value::Object(nd));
        }
    }
    Ok(Value::Object(m))
}

/// `p` that also accepts `null`.
fn nullable(p: Value) -> Value {
    let Value::Object(mut m) = p else { return p };
    let has_ref_or_alts = m.contains_key("$ref") || m.contains_key("anyOf");
    match m.get_mut("type") {
        Some(Value::String(t)) if !has_ref_or_alts => {
            let t = t.clone();
            m.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) if !has_ref_or_alts => {
            if !ts.iter().any(|t| t == "null") {
                ts.push("null".into());
            }
        }
        _ => return json!({"anyOf": [Value::Object(m), {"type": "null"}]}),
    }
    if let Some(Value::Array(e)) = m.get_mut("enum") {
        if !e.contains(&Value::Null) {
            e.push(Value::Null);
        }
    }
    Value::Object(m)
}

/// Size of each tool's schemas in `format`: `(tool, actions, bytes)`, in catalogue order.
pub fn sizes(format: Format, entries: &[Entry]) -> Vec<(String, usize, usize)> {
    entries
        .iter()
        .map(|e| {
            let r = render(format, std::slice::from_ref(e));
            let bytes = r
                .tools
                .iter()
                .map(|t| serde_json::to_string(t).map(|s| s.len()).unwrap_or(0))
                .sum();
            (e.name().to_owned(), r.tools.len(), bytes)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_closes_objects_and_makes_optionals_nullable() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "string"},
            "b": {"type": "integer", "enum": [1, 2]},
            "c": {"type": "object", "properties": {"d": {"$ref": "#/$defs/x"}}}
        }, "required": ["a"], "$defs": {"x": {"type": "string"}}});
        let t = strict(&s).unwrap();
        assert_eq!(t["required"], json!(["a", "b", "c"]));
        assert_eq!(t["additionalProperties"], false);
        assert_eq!(t["properties"]["a"]["type"], "string");
        assert_eq!(t["properties"]["b"]["type"], json!(["integer", "null"]));
        assert_eq!(t["properties"]["b"]["enum"], json!([1, 2, null]));
        assert_eq!(t["properties"]["c"]["type"], json!(["object", "null"]));
        assert_eq!(t["properties"]["c"]["additionalProperties"], false);
        assert_eq!(
            t["properties"]["c"]["properties"]["d"]["anyOf"],
            json!([{"$ref": "#/$defs/x"}, {"type": "null"}])
        );
        assert!(strict(&json!({"type": "object"})).is_ok());
    }

    #[test]
    fn strict_refusals_name_the_place() {
        let e = strict(&json!({"type": "object", "additionalProperties": true})).unwrap_err();
        assert_eq!(e, NotStrict::OpenAdditionalProperties { at: "/".into() });
        assert_eq!(
            e.to_string(),
            "at /: open additionalProperties (any extra key) cannot be strict"
        );
        let e = strict(
            &json!({"type": "object", "properties": {"m": {"type": "object", "patternProperties": {"^x": {}}}}}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "at /m: patternProperties is not supported in strict mode"
        );
        let e = strict(&json!({"type": "object", "properties": {"m": {"type": "object"}}})).unwrap_err();
        assert_eq!(e, NotStrict::FreeForm { at: "/m".into() });
    }
}
