//! Every permitted action in a provider's function-calling shape (docs/llm.md, "Provider schemas"). Names are
//! schema names (`<tool>_<action>`, at most 128 characters, protocol.md §3); one longer than a provider allows
//! (64 for OpenAI, Anthropic and Gemini) is given as a stable shortened name ([`provider_name`]), which
//! [`resolve_name`] maps back when the model calls it.
//!
//! OpenAI: `strict: true` only for a schema that already meets strict mode's rules ([`strict_check`]: every
//! object closed and all its properties required, `items` on every array, only the keywords of its subset).
//! With `--strict`, [`strict`] first rewrites a schema so: an optional property becomes required and nullable
//! (`use_tool` drops the `null` it then receives, so the tool gets what it would have), an object without
//! `additionalProperties` is closed to its declared properties, and annotations strict mode refuses (`default`,
//! `examples`, …) are dropped (a `default` moves into the description); a schema that still fails is not strict.
//!
//! Anthropic: `strict` only with `--strict`: the same rewrite, except that optional properties stay optional (its
//! strict tool use takes them), and its subset has no numeric bounds, no `maxItems` and `minItems` only 0 or 1
//! ([`Dialect::Anthropic`]).
//!
//! Gemini: `parameters` in Gemini's Schema (an OpenAPI 3.0 subset, [`gemini_schema`]), else the JSON Schema as
//! `parametersJsonSchema`.

use crate::catalog::{one_line, Entry};
use awt_core::manifest::ActionSpec;
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
    /// OpenAI Responses API `tools` (`FunctionToolParam`): `{"type": "function", name, description, parameters,
    /// strict}`.
    OpenaiResponses,
    /// Gemini `functionDeclarations` (`FunctionDeclaration`): `name`, `description`, and `parameters` in Gemini's
    /// Schema or `parametersJsonSchema`.
    Gemini,
    /// MCP `tools/list` entries: `name`, `description`, `inputSchema`, `outputSchema`, `annotations`.
    Mcp,
}

/// The tools in one shape, and what could not be given as asked.
#[derive(Debug, Default)]
pub struct Rendered {
    pub tools: Vec<Value>,
    /// OpenAI, and Anthropic with `--strict`: `(name, why)` of every action given with `strict: false`.
    pub not_strict: Vec<(String, NotStrict)>,
    /// Gemini only: `(name, why)` of every action given as `parametersJsonSchema`.
    pub json_schema: Vec<(String, String)>,
    /// `(schema name, name given)` of every name shortened for the provider.
    pub shortened: Vec<(String, String)>,
    /// `(name, why)` of actions left out: a schema name another tool already uses.
    pub skipped: Vec<(String, String)>,
}

/// How to render.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// OpenAI: rewrite schemas for strict mode ([`strict`]) instead of marking only those that meet it unchanged.
    /// Anthropic: give `strict`, rewriting as [`strict_for`] does.
    pub strict: bool,
}

/// Every action of `entries` in `format`.
pub fn render(format: Format, entries: &[Entry]) -> Rendered {
    render_with(format, entries, Options::default())
}

/// Every action of `entries` in `format`, with `opts`.
pub fn render_with(format: Format, entries: &[Entry], opts: Options) -> Rendered {
    let mut out = Rendered::default();
    let mut seen = HashSet::new();
    for e in entries {
        for a in &e.actions {
            let name = provider_name(format, &a.schema_name);
            if !seen.insert(name.clone()) {
                out.skipped.push((
                    a.schema_name.clone(),
                    format!("{}.{}: another tool already has this name", e.name(), a.name),
                ));
                continue;
            }
            if name != a.schema_name {
                out.shortened.push((a.schema_name.clone(), name.clone()));
            }
            let anthropic_strict = |out: &mut Rendered| {
                let given = object_schema(&a.input_schema);
                match strict_for(Dialect::Anthropic, &given) {
                    Ok(s) => (s, true),
                    Err(why) => {
                        out.not_strict.push((a.schema_name.clone(), why));
                        (given, false)
                    }
                }
            };
            let openai = |out: &mut Rendered| {
                let given = object_schema(&a.input_schema);
                let checked = if opts.strict {
                    strict(&given)
                } else {
                    strict_check(&given).map(|()| given.clone())
                };
                match checked {
                    Ok(s) => (s, true),
                    Err(why) => {
                        out.not_strict.push((a.schema_name.clone(), why));
                        (given, false)
                    }
                }
            };
            let tool = match format {
                Format::Animaworks => {
                    json!({"name": name, "description": description(e, a), "input_schema": a.input_schema})
                }
                Format::Anthropic if opts.strict => {
                    let (input_schema, strict_ok) = anthropic_strict(&mut out);
                    json!({"name": name, "description": description(e, a), "input_schema": input_schema,
                        "strict": strict_ok})
                }
                Format::Anthropic => {
                    json!({"name": name, "description": description(e, a), "input_schema": object_schema(&a.input_schema)})
                }
                Format::Openai => {
                    let (parameters, strict_ok) = openai(&mut out);
                    json!({"type": "function", "function": {
                        "name": name, "description": description(e, a), "parameters": parameters, "strict": strict_ok}})
                }
                Format::OpenaiResponses => {
                    let (parameters, strict_ok) = openai(&mut out);
                    json!({"type": "function", "name": name, "description": description(e, a),
                        "parameters": parameters, "strict": strict_ok})
                }
                Format::Gemini => {
                    let mut d = json!({"name": name, "description": description(e, a)});
                    let given = object_schema(&a.input_schema);
                    match gemini_schema(&given) {
                        // No parameters at all: Gemini refuses an OBJECT without properties.
                        Ok(p)
                            if p.get("properties")
                                .and_then(Value::as_object)
                                .is_none_or(|m| m.is_empty()) => {}
                        Ok(p) => d["parameters"] = p,
                        Err(why) => {
                            out.json_schema.push((a.schema_name.clone(), why.to_string()));
                            d["parametersJsonSchema"] = given;
                        }
                    }
                    d
                }
                Format::Mcp => mcp_tool(e, a),
            };
            out.tools.push(tool);
        }
    }
    out
}

/// The longest function name OpenAI, Anthropic and Gemini accept.
pub const PROVIDER_NAME_MAX: usize = 64;

/// The name `format` gives the action `schema_name`: the schema name where the provider takes it, else (longer
/// than [`PROVIDER_NAME_MAX`]; for Gemini also one that does not start with a letter or `_`) a stable shortened
/// name: the first 55 characters, `_`, and 8 hex digits of the FNV-1a hash of the whole schema name. The same
/// schema name always gives the same name, on every machine; MCP and AnimaWorks' shape keep the schema name.
pub fn provider_name(format: Format, schema_name: &str) -> String {
    let gemini_start =
        format == Format::Gemini && !schema_name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    let fits = schema_name.len() <= PROVIDER_NAME_MAX && !gemini_start;
    if fits || matches!(format, Format::Mcp | Format::Animaworks) {
        return schema_name.to_owned();
    }
    let mut h: u32 = 0x811c9dc5;
    for b in schema_name.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x01000193);
    }
    let prefix = if gemini_start { "_" } else { "" };
    // Schema names are ASCII (protocol.md §3), so a byte cut is a character cut.
    let keep = schema_name.len().min(PROVIDER_NAME_MAX - 9 - prefix.len());
    format!("{prefix}{}_{h:08x}", &schema_name[..keep])
}

/// The `(tool, action)` a provider's function name means: a schema name, or a name [`provider_name`] gave it in
/// any shape.
pub fn resolve_name<'e>(entries: &'e [Entry], name: &str) -> Option<(&'e str, &'e str)> {
    const SHAPES: [Format; 3] = [Format::Anthropic, Format::Openai, Format::Gemini];
    entries.iter().find_map(|e| {
        e.actions
            .iter()
            .find(|a| a.schema_name == name || SHAPES.iter().any(|f| provider_name(*f, &a.schema_name) == name))
            .map(|a| (e.name(), a.name.as_str()))
    })
}

/// The action's description, else the first line of the tool's.
pub fn description(e: &Entry, a: &ActionSpec) -> String {
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
pub fn mcp_tool(e: &Entry, a: &ActionSpec) -> Value {
    let mut v = json!({
        "name": a.schema_name,
        "title": a.title.clone().unwrap_or_else(|| format!("{}.{}", e.name(), a.name)),
        "description": description(e, a),
        "inputSchema": object_schema(&a.input_schema),
    });
    let gated = !matches!(
        awt_core::call::gate_of(&e.resolved, a),
        awt_core::policy::gate::Gate::Open
    );
    if let Some(ann) = crate::annotations::mcp_object(a, gated) {
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

/// Keywords OpenAI's strict mode does not accept (each refused as soon as [`strict`] meets it; [`strict_check`]
/// refuses every keyword outside [`STRICT_KEYWORDS`]).
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
    "minLength",
    "maxLength",
    "uniqueItems",
    "contains",
    "prefixItems",
    "unevaluatedItems",
];

/// The keywords of OpenAI's strict-mode subset (its Structured Outputs guide, "Supported schemas").
const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "title",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
];

/// String formats strict mode takes.
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Keywords of [`STRICT_KEYWORDS`] outside Anthropic's strict tool use (its structured outputs' JSON Schema
/// limits); `minItems` it takes as 0 or 1 only.
const NOT_ANTHROPIC_KEYWORDS: &[&str] = &[
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxItems",
];

/// Whose strict mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI's: every property required (optional ones become nullable).
    OpenAi,
    /// Anthropic's: optional properties allowed; no numeric bounds, no `maxItems`, `minItems` only 0 or 1, and
    /// `uri` among the formats.
    Anthropic,
}

/// Strict mode's limit on nesting.
const STRICT_MAX_DEPTH: usize = 10;

/// Annotations [`strict`] drops (they do not change which values a schema accepts); `$schema` too, as strict mode
/// reads its own subset whatever the dialect says.
const STRICT_DROPPED: &[&str] = &[
    "default",
    "examples",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$schema",
];

/// Why a schema cannot be given to OpenAI in strict mode; `at` is the JSON pointer of the place (`/` for the
/// root).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotStrict {
    /// A boolean schema, which accepts any value.
    #[error("at {at}: a boolean schema (any value) cannot be strict")]
    BooleanSchema { at: String },
    /// A keyword strict mode does not take (`patternProperties`, `oneOf`, `default`, …).
    #[error("at {at}: {keyword} is not supported in strict mode")]
    Keyword { at: String, keyword: String },
    /// An object that allows extra keys.
    #[error("at {at}: open additionalProperties (any extra key) cannot be strict")]
    OpenAdditionalProperties { at: String },
    /// A nested object without `properties`.
    #[error("at {at}: a free-form object (no properties) cannot be strict")]
    FreeForm { at: String },
    /// An object without `additionalProperties: false` (`--strict` closes it).
    #[error("at {at}: an object must say additionalProperties: false (--strict closes it)")]
    NotClosed { at: String },
    /// An object whose `required` is not every property (`--strict` makes the optional ones nullable).
    #[error("at {at}: every property must be required (--strict makes optional ones nullable)")]
    Optional { at: String },
    /// An array without `items`.
    #[error("at {at}: an array needs items")]
    NoItems { at: String },
    /// A `format` strict mode does not know.
    #[error("at {at}: format {format:?} is not supported in strict mode")]
    Format { at: String, format: String },
    /// The root is not an object schema.
    #[error("at /: the root must be a plain object schema (\"type\": \"object\")")]
    Root,
    /// Nested deeper than strict mode allows.
    #[error("at {at}: nested deeper than {STRICT_MAX_DEPTH} levels")]
    TooDeep { at: String },
}

/// Does `schema` meet OpenAI's strict-mode rules as it is?
pub fn strict_check(schema: &Value) -> Result<(), NotStrict> {
    strict_check_for(Dialect::OpenAi, schema)
}

/// Does `schema` meet `dialect`'s strict-mode rules as it is?
pub fn strict_check_for(dialect: Dialect, schema: &Value) -> Result<(), NotStrict> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(NotStrict::Root);
    }
    check_node(dialect, schema, "", 0)
}

fn check_node(dialect: Dialect, s: &Value, at: &str, depth: usize) -> Result<(), NotStrict> {
    let anthropic = dialect == Dialect::Anthropic;
    let here = || if at.is_empty() { "/".to_owned() } else { at.to_owned() };
    let Value::Object(m) = s else {
        return Err(NotStrict::BooleanSchema { at: here() });
    };
    if depth > STRICT_MAX_DEPTH {
        return Err(NotStrict::TooDeep { at: here() });
    }
    if let Some(k) = m
        .keys()
        .find(|k| !STRICT_KEYWORDS.contains(&k.as_str()) || (anthropic && NOT_ANTHROPIC_KEYWORDS.contains(&k.as_str())))
    {
        return Err(NotStrict::Keyword {
            at: here(),
            keyword: k.clone(),
        });
    }
    if anthropic && m.get("minItems").is_some_and(|n| n.as_u64().is_none_or(|n| n > 1)) {
        return Err(NotStrict::Keyword {
            at: here(),
            keyword: "minItems above 1".into(),
        });
    }
    let types: Vec<&str> = match m.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if types.contains(&"object") || m.contains_key("properties") {
        match m.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            None => return Err(NotStrict::NotClosed { at: here() }),
            Some(_) => return Err(NotStrict::OpenAdditionalProperties { at: here() }),
        }
        let Some(props) = m.get("properties").and_then(Value::as_object) else {
            return Err(NotStrict::FreeForm { at: here() });
        };
        let required: HashSet<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !anthropic && props.keys().any(|k| !required.contains(k.as_str())) {
            return Err(NotStrict::Optional { at: here() });
        }
        for (k, p) in props {
            check_node(dialect, p, &format!("{at}/{k}"), depth + 1)?;
        }
    }
    if types.contains(&"array") && !m.contains_key("items") {
        return Err(NotStrict::NoItems { at: here() });
    }
    if let Some(items) = m.get("items") {
        check_node(dialect, items, &format!("{at}/items"), depth + 1)?;
    }
    if let Some(f) = m.get("format").and_then(Value::as_str) {
        if !(STRICT_FORMATS.contains(&f) || anthropic && f == "uri") {
            return Err(NotStrict::Format {
                at: here(),
                format: f.to_owned(),
            });
        }
    }
    if let Some(Value::Array(alts)) = m.get("anyOf") {
        if at.is_empty() {
            return Err(NotStrict::Root);
        }
        for (i, a) in alts.iter().enumerate() {
            check_node(dialect, a, &format!("{at}/anyOf/{i}"), depth + 1)?;
        }
    }
    for defs in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = m.get(defs) {
            for (k, v) in d {
                check_node(dialect, v, &format!("{at}/{defs}/{k}"), depth + 1)?;
            }
        }
    }
    Ok(())
}

/// `schema` rewritten for OpenAI's strict mode (`--strict`; the module doc says how), or why it cannot be.
pub fn strict(schema: &Value) -> Result<Value, NotStrict> {
    strict_for(Dialect::OpenAi, schema)
}

/// `schema` rewritten for `dialect`'s strict mode, or why it cannot be. Anthropic's keeps optional properties
/// optional; the rest of the rewrite is OpenAI's.
pub fn strict_for(dialect: Dialect, schema: &Value) -> Result<Value, NotStrict> {
    let s = strictify(dialect, schema, "", true)?;
    strict_check_for(dialect, &s)?;
    Ok(s)
}

fn strictify(dialect: Dialect, s: &Value, at: &str, root: bool) -> Result<Value, NotStrict> {
    let here = || if at.is_empty() { "/".to_owned() } else { at.to_owned() };
    let Value::Object(m) = s else {
        return Err(NotStrict::BooleanSchema { at: here() });
    };
    if let Some(k) = NOT_STRICT_KEYWORDS.iter().find(|k| m.contains_key(**k)) {
        return Err(NotStrict::Keyword {
            at: here(),
            keyword: (*k).to_owned(),
        });
    }
    let mut m = m.clone();
    if let Some(d) = m.get("default").cloned() {
        let text = m
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim_end()
            .to_owned();
        let sep = if text.is_empty() { "" } else { " " };
        m.insert("description".into(), format!("{text}{sep}(default: {d})").into());
    }
    for k in STRICT_DROPPED {
        m.remove(*k);
    }
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
            let p = strictify(dialect, p, &format!("{at}/{k}"), false)?;
            let keep = required.contains(k) || dialect == Dialect::Anthropic;
            new_props.insert(k.clone(), if keep { p } else { nullable(p) });
        }
        if dialect == Dialect::OpenAi {
            m.insert(
                "required".into(),
                Value::Array(props.keys().map(|k| Value::String(k.clone())).collect()),
            );
        }
        m.insert("properties".into(), Value::Object(new_props));
        m.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(items) = m.get("items").cloned() {
        m.insert(
            "items".into(),
            strictify(dialect, &items, &format!("{at}/items"), false)?,
        );
    }
    if let Some(Value::Array(alts)) = m.get("anyOf").cloned() {
        let alts = alts
            .iter()
            .enumerate()
            .map(|(i, a)| strictify(dialect, a, &format!("{at}/anyOf/{i}"), false))
            .collect::<Result<_, _>>()?;
        m.insert("anyOf".into(), Value::Array(alts));
    }
    for defs in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = m.get(defs).cloned() {
            let mut nd = Map::new();
            for (k, v) in d {
                nd.insert(k.clone(), strictify(dialect, &v, &format!("{at}/{defs}/{k}"), false)?);
            }
            m.insert(defs.into(), Value::Object(nd));
        }
    }
    Ok(Value::Object(m))
}

/// Keywords of Gemini's Schema that mean what they mean in JSON Schema (`type`, `enum`, `anyOf`, `properties` and
/// `items` are converted apart).
const GEMINI_KEYWORDS: &[&str] = &[
    "description",
    "title",
    "required",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "default",
];

/// `schema` in Gemini's Schema (an OpenAPI 3.0 subset: upper-case `type`, `nullable`, string `enum`s), or why
/// the subset cannot say it (`$ref`, `oneOf`, `const` of a non-string, open `additionalProperties`, …). A closed
/// object (`additionalProperties: false`) is a Gemini object as it is: the model fills only declared properties.
pub fn gemini_schema(schema: &Value) -> Result<Value, NotGemini> {
    gemini_node(schema, "")
}

/// What Gemini's Schema cannot say, and where in the schema (a JSON pointer, `/` the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotGemini {
    pub at: String,
    pub why: String,
}

impl std::fmt::Display for NotGemini {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {}: {}", self.at, self.why)
    }
}

impl std::error::Error for NotGemini {}

fn gemini_node(s: &Value, at: &str) -> Result<Value, NotGemini> {
    let here = if at.is_empty() { "/" } else { at };
    let not = |why: String| NotGemini {
        at: here.to_owned(),
        why,
    };
    let Value::Object(m) = s else {
        return Err(not("a boolean schema".into()));
    };
    let mut out = Map::new();
    // The one alternative of `anyOf: [T, {"type": "null"}]` (pydantic's `Optional`), merged in after the loop.
    let mut only = None;
    for (k, v) in m {
        match k.as_str() {
            "type" => {
                let (t, nullable) = match v {
                    Value::String(t) => (t.as_str(), false),
                    Value::Array(ts) => {
                        let non_null: Vec<&str> =
                            ts.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect();
                        match non_null[..] {
                            [t] if ts.len() == 2 => (t, true),
                            _ => return Err(not(format!("\"type\": {v} is more than one type"))),
                        }
                    }
                    _ => return Err(not("\"type\" is not a string".into())),
                };
                let t = match t {
                    "string" | "number" | "integer" | "boolean" | "array" | "object" => t.to_ascii_uppercase(),
                    other => return Err(not(format!("type {other:?}"))),
                };
                out.insert("type".into(), t.into());
                if nullable {
                    out.insert("nullable".into(), true.into());
                }
            }
            "enum" | "const" => {
                let values: Vec<Value> = if k == "const" {
                    vec![v.clone()]
                } else {
                    v.as_array().cloned().unwrap_or_default()
                };
                if !values.iter().all(Value::is_string) {
                    return Err(not(format!("{k} of values other than strings")));
                }
                out.insert("enum".into(), values.into());
                out.entry("type").or_insert_with(|| "STRING".into());
            }
            "format" => match v.as_str() {
                Some(f @ ("date-time" | "enum" | "float" | "double" | "int32" | "int64")) => {
                    out.insert("format".into(), f.into());
                }
                _ => return Err(not(format!("format {v}"))),
            },
            "additionalProperties" if v == &Value::Bool(false) => {}
            // Annotations that do not change which values are valid.
            "examples" | "$comment" | "deprecated" | "readOnly" | "writeOnly" | "$schema" => {}
            "properties" => {
                let Value::Object(props) = v else {
                    return Err(not("properties is not an object".into()));
                };
                let mut p = Map::new();
                for (name, sub) in props {
                    p.insert(name.clone(), gemini_node(sub, &format!("{at}/{name}"))?);
                }
                out.insert("properties".into(), Value::Object(p));
            }
            "items" => {
                out.insert("items".into(), gemini_node(v, &format!("{at}/items"))?);
            }
            "anyOf" => {
                let alts = v.as_array().cloned().unwrap_or_default();
                let is_null = |a: &Value| a == &json!({"type": "null"});
                let alts = alts
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| !is_null(a))
                    .map(|(i, a)| gemini_node(a, &format!("{at}/anyOf/{i}")))
                    .collect::<Result<Vec<_>, _>>()?;
                if alts.is_empty() {
                    return Err(not("anyOf without a type other than null".into()));
                }
                if alts.len() < v.as_array().map_or(0, Vec::len) {
                    out.insert("nullable".into(), true.into());
                }
                match <[Value; 1]>::try_from(alts) {
                    Ok([one]) => only = Some(one),
                    Err(alts) => {
                        out.insert("anyOf".into(), alts.into());
                    }
                }
            }
            k if GEMINI_KEYWORDS.contains(&k) => {
                out.insert(k.into(), v.clone());
            }
            other => return Err(not(format!("{other} is not in Gemini's Schema"))),
        }
    }
    // The node's own annotations (`description`, `default`, …) win over its alternative's.
    if let Some(Value::Object(one)) = only {
        for (k, v) in one {
            out.entry(k).or_insert(v);
        }
    }
    if out.get("type").and_then(Value::as_str) == Some("OBJECT")
        && !at.is_empty()
        && out
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.is_empty())
    {
        return Err(not("an object without properties".into()));
    }
    Ok(Value::Object(out))
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

    #[test]
    fn strict_only_for_schemas_that_meet_the_rules_unchanged() {
        let ok = json!({"type": "object", "properties": {
            "a": {"type": "string", "format": "date"},
            "b": {"type": ["integer", "null"], "minimum": 1},
            "c": {"type": "array", "items": {"type": "string"}, "maxItems": 3}
        }, "required": ["a", "b", "c"], "additionalProperties": false});
        assert_eq!(strict_check(&ok), Ok(()));
        let with = |path: &str, v: Value| {
            let mut s = ok.clone();
            s.pointer_mut(path)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .extend(v.as_object().unwrap().clone());
            strict_check(&s).unwrap_err().to_string()
        };
        assert_eq!(
            with("/properties/b", json!({"default": 3})),
            "at /b: default is not supported in strict mode"
        );
        assert!(with("/properties/a", json!({"minLength": 1})).contains("minLength"));
        assert!(with("/properties/c", json!({"uniqueItems": true})).contains("uniqueItems"));
        assert!(with("/properties/a", json!({"format": "uri"})).contains("format \"uri\""));
        let mut s = ok.clone();
        s["properties"]["c"].as_object_mut().unwrap().remove("items");
        assert_eq!(strict_check(&s), Err(NotStrict::NoItems { at: "/c".into() }));
        let mut s = ok.clone();
        s.as_object_mut().unwrap().remove("additionalProperties");
        assert_eq!(strict_check(&s), Err(NotStrict::NotClosed { at: "/".into() }));
        let mut s = ok.clone();
        s["required"] = json!(["a"]);
        assert_eq!(strict_check(&s), Err(NotStrict::Optional { at: "/".into() }));
        assert_eq!(strict_check(&json!({"anyOf": [ok.clone()]})), Err(NotStrict::Root));
    }

    #[test]
    fn the_strict_rewrite_moves_default_into_the_description_and_refuses_what_it_cannot_keep() {
        let s = json!({"type": "object", "properties": {
            "days": {"type": "integer", "default": 3, "description": "How many days"}}});
        let t = strict(&s).unwrap();
        assert_eq!(
            t["properties"]["days"],
            json!({"type": ["integer", "null"], "description": "How many days (default: 3)"})
        );
        assert_eq!(strict_check(&t), Ok(()));
        // A constraint strict mode cannot say is never dropped.
        let s = json!({"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}});
        assert!(strict(&s).unwrap_err().to_string().contains("minLength"));
        let s = json!({"type": "object", "properties": {"l": {"type": "array"}}});
        assert_eq!(strict(&s), Err(NotStrict::NoItems { at: "/l".into() }));
    }

    #[test]
    fn anthropics_strict_keeps_optionals_and_refuses_numeric_bounds() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "string", "format": "uri"},
            "b": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "default": []}
        }, "required": ["a"]});
        let t = strict_for(Dialect::Anthropic, &s).unwrap();
        assert_eq!(t["required"], json!(["a"]));
        assert_eq!(t["additionalProperties"], false);
        assert_eq!(t["properties"]["b"]["type"], "array", "not made nullable");
        assert_eq!(t["properties"]["b"]["description"], "(default: [])");
        assert!(strict(&s).unwrap_err().to_string().contains("uri"), "OpenAI has no uri");
        for (k, v) in [("minimum", json!(1)), ("maxItems", json!(3)), ("minItems", json!(2))] {
            let mut bad = s.clone();
            bad["properties"]["b"][k] = v;
            let e = strict_for(Dialect::Anthropic, &bad).unwrap_err().to_string();
            assert!(e.starts_with("at /b: ") && e.contains(k), "{k}: {e}");
        }
    }

    #[test]
    fn gemini_takes_optional_as_nullable() {
        let s = json!({"type": "object", "properties": {
            "o": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "outer"},
            "p": {"anyOf": [{"type": "string", "description": "inner"}, {"type": "null"}]}
        }});
        let g = gemini_schema(&s).unwrap();
        assert_eq!(
            g["properties"]["o"],
            json!({"nullable": true, "description": "outer", "type": "INTEGER"})
        );
        assert_eq!(
            g["properties"]["p"],
            json!({"nullable": true, "type": "STRING", "description": "inner"})
        );
        let only_null = json!({"type": "object", "properties": {"n": {"anyOf": [{"type": "null"}]}}});
        assert!(gemini_schema(&only_null).unwrap_err().to_string().contains("null"));
        let with_ref =
            json!({"type": "object", "properties": {"r": {"anyOf": [{"$ref": "#/$defs/x"}, {"type": "null"}]}}});
        assert!(gemini_schema(&with_ref).unwrap_err().to_string().contains("$ref"));
    }

    #[test]
    fn long_names_are_shortened_stably_for_providers() {
        assert_eq!(provider_name(Format::Openai, "t_greet"), "t_greet");
        let long = format!("notes_{}", "x".repeat(90));
        let other = format!("notes_{}y", "x".repeat(89));
        let (a, b) = (
            provider_name(Format::Anthropic, &long),
            provider_name(Format::Anthropic, &other),
        );
        assert_eq!(a.len(), 64);
        assert!(
            a.starts_with(&long[..55]) && awt_core::names::is_provider_name(&a),
            "{a}"
        );
        assert_ne!(a, b, "names that share the kept prefix stay apart");
        assert_eq!(
            a,
            provider_name(Format::Openai, &long),
            "stable, and the same for every 64-character provider"
        );
        assert_eq!(provider_name(Format::Mcp, &long), long);
        // Gemini's names start with a letter or `_`.
        let g = provider_name(Format::Gemini, "3d_render");
        assert!(g.starts_with("_3d_render_") && g.len() <= 64, "{g}");
    }

    #[test]
    fn gemini_schema_or_why_not() {
        let s = json!({"type": "object", "properties": {
            "q": {"type": ["string", "null"], "description": "d", "default": "x", "examples": ["y"]},
            "k": {"enum": ["a", "b"]},
            "n": {"type": "array", "items": {"type": "integer", "format": "int64"}}
        }, "required": ["k"], "additionalProperties": false});
        assert_eq!(
            gemini_schema(&s).unwrap(),
            json!({"type": "OBJECT", "properties": {
                "q": {"type": "STRING", "nullable": true, "description": "d", "default": "x"},
                "k": {"enum": ["a", "b"], "type": "STRING"},
                "n": {"type": "ARRAY", "items": {"type": "INTEGER", "format": "int64"}}
            }, "required": ["k"]})
        );
        // A pydantic Optional: anyOf of a type and null.
        let optional = json!({"type": "object", "properties": {
            "o": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "d"}}});
        assert_eq!(
            gemini_schema(&optional).unwrap(),
            json!({"type": "OBJECT", "properties": {"o": {"type": "STRING", "nullable": true, "description": "d"}}})
        );
        for (bad, why) in [
            (
                json!({"type": "object", "properties": {"r": {"$ref": "#/$defs/x"}}}),
                "$ref",
            ),
            (
                json!({"type": "object", "properties": {"o": {"oneOf": [{"type": "string"}]}}}),
                "oneOf",
            ),
            (
                json!({"type": "object", "additionalProperties": true}),
                "additionalProperties",
            ),
            (json!({"type": "object", "properties": {"e": {"enum": [1, 2]}}}), "enum"),
            (json!({"type": ["string", "integer"]}), "more than one type"),
        ] {
            let e = gemini_schema(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
