//! A tool's `--schemas` output, read and checked once (protocol.md §2, §3) into the [`Manifest`] the rest of
//! the runner uses. Both forms (full document, AnimaWorks-style list) end up in the same shape.

use crate::names::{action_name_problem, canon};
use awt_protocol::{CredentialDecl, Profile, SchemasDoc, SchemasOutput, PROTOCOL_VERSION};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Default deadline of a call when the profile gives none (protocol.md §2.1).
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;

/// What a tool offers, after checking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub protocol: u32,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub events: bool,
    pub persistent: bool,
    /// The tool asks for credentials at run time (`"broker": true`): it gets the credential broker.
    #[serde(default)]
    pub broker: bool,
    pub cli: bool,
    /// The shim says the module follows the AnimaWorks convention (see [`crate::policy::env::EnvPolicy`]).
    #[serde(default)]
    pub legacy: bool,
    #[serde(default)]
    pub legacy_profile: Option<Map<String, Value>>,
    /// The module's `EXECUTION_PROFILE` could not be read: every action counts as gated.
    #[serde(default)]
    pub legacy_profile_error: Option<String>,
    #[serde(default)]
    pub credentials: Vec<CredentialDecl>,
    pub actions: Vec<ActionSpec>,
    /// Entries left out, each with why: a schema name that does not start with the tool's own name (a tool may
    /// not take another tool's names, protocol.md §3). `doctor` shows them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// One callable action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionSpec {
    pub name: String,
    /// What the request's `name` carries: `<tool>_<action>`, or a short-form entry's name as written.
    pub schema_name: String,
    /// A name for people (§2.1 `title`), at most [`MAX_TITLE`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub description: String,
    pub input_schema: Value,
    #[serde(default)]
    pub output_schema: Option<Value>,
    pub profile: Profile,
    /// The MCP annotations the author declared (§2.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<awt_protocol::Annotations>,
}

/// The longest `title` kept, in UTF-8 bytes (a longer one is cut on a character boundary).
pub const MAX_TITLE: usize = 200;

fn bounded_title(t: &str) -> String {
    let cut = (0..=MAX_TITLE.min(t.len())).rev().find(|i| t.is_char_boundary(*i)).unwrap_or(0);
    t[..cut].to_owned()
}

impl ActionSpec {
    /// The deadline in seconds: `timeout_s`, else 60 or 3 × `expected_seconds`, whichever is more.
    /// Never more than [`crate::limits::MAX_SECONDS`] (a manifest is checked when read; this holds for any).
    pub fn timeout_s(&self) -> f64 {
        let t = self.profile.timeout_s.filter(|t| *t > 0.0).unwrap_or_else(|| {
            self.profile
                .expected_seconds
                .map_or(DEFAULT_TIMEOUT_S, |e| (3.0 * e).max(DEFAULT_TIMEOUT_S))
        });
        if t.is_finite() {
            t.min(crate::limits::MAX_SECONDS)
        } else {
            DEFAULT_TIMEOUT_S
        }
    }

    /// The permission key a gated action needs (`<tool>_<gated_as or action>`).
    pub fn gate_name(&self) -> &str {
        self.profile
            .gated_as
            .as_deref()
            .filter(|s| !s.is_empty())
            .unwrap_or(&self.name)
    }
}

impl Manifest {
    /// The action spelled `name`, with `-` and `_` taken as one; a short-form schema name also finds it.
    pub fn action(&self, name: &str) -> Option<&ActionSpec> {
        let want = canon(name);
        self.actions
            .iter()
            .find(|a| a.name == name)
            .or_else(|| self.actions.iter().find(|a| canon(&a.name) == want))
            .or_else(|| self.actions.iter().find(|a| a.schema_name == name))
    }
}

/// Why a `--schemas` answer is not a usable manifest; each message is one sentence.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("--schemas printed invalid UTF-8 ({0})")]
    NotUtf8(std::str::Utf8Error),
    #[error("--schemas printed nothing; it must print one JSON document (protocol.md §2)")]
    Empty,
    /// Not JSON; `first` holds the first characters printed.
    #[error("--schemas did not print one JSON document ({source}); first bytes: {first:?}")]
    NotJson { source: serde_json::Error, first: String },
    #[error("the tool speaks protocol {0}; this runner supports protocol {PROTOCOL_VERSION} only (upgrade animaworks-tool)", PROTOCOL_VERSION = PROTOCOL_VERSION)]
    NewerProtocol(u64),
    #[error("--schemas printed JSON that is neither a protocol document nor a list of schemas ({0})")]
    Shape(serde_json::Error),
    #[error(
        "--schemas lists {0} actions; a tool may have at most {MAX_ACTIONS} (split it into several tools)",
        MAX_ACTIONS = MAX_ACTIONS
    )]
    TooManyActions(usize),
    #[error("--schemas lists no actions")]
    NoActions,
    /// An action or schema name that is not one (the reason says which).
    #[error("{0}")]
    BadName(String),
    #[error("actions {first:?} and {second:?} differ only in '-' and '_'; rename one")]
    DifferOnlyInDash { first: String, second: String },
    /// A profile's `timeout_s` or `expected_seconds` out of range.
    #[error("action {action:?}: {source}")]
    Numbers {
        action: String,
        source: crate::limits::OutOfRange,
    },
    #[error("action {action:?}: invalid input_schema: {source}")]
    InputSchema { action: String, source: SchemaError },
    #[error("action {action:?}: invalid output_schema: {source}")]
    OutputSchema { action: String, source: SchemaError },
    /// Every action was left out; why, one reason each.
    #[error("every action was refused: {}", .0.join("; "))]
    AllRefused(Vec<String>),
}

/// Why a value is not a usable JSON Schema.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("a JSON Schema must be an object")]
    NotObject,
    /// Its draft's meta-schema cannot be had.
    #[error("{0}")]
    NoMetaSchema(jsonschema::ValidationError<'static>),
    /// The draft's meta-schema refuses it (the message names the place unless it is the root).
    #[error("{at}{0}", at = at_prefix(.0))]
    MetaInvalid(jsonschema::ValidationError<'static>),
    /// The meta-schema accepts it but it cannot be compiled (an unresolvable `$ref`, a bad regex).
    #[error("{0}")]
    Unusable(jsonschema::ValidationError<'static>),
    /// Checking a value against it could cost without bound (`schema_size`).
    #[error("{0}")]
    Expansion(#[from] crate::schema_size::ExpansionError),
}

fn at_prefix(e: &jsonschema::ValidationError<'_>) -> String {
    let at = e.instance_path().to_string();
    if at.is_empty() {
        at
    } else {
        format!("at {at}: ")
    }
}

/// Read `--schemas` stdout of tool `tool`. The error says what is wrong, in one sentence.
pub fn parse(tool: &str, stdout: &[u8]) -> Result<Manifest, ManifestError> {
    let text = std::str::from_utf8(stdout).map_err(ManifestError::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(ManifestError::Empty);
    }
    let raw: Value = serde_json::from_str(text).map_err(|source| ManifestError::NotJson {
        source,
        first: first_bytes(text),
    })?;
    if let Some(p) = raw.get("protocol").and_then(Value::as_u64) {
        if p > PROTOCOL_VERSION as u64 {
            return Err(ManifestError::NewerProtocol(p));
        }
    }
    let out: SchemasOutput = serde_json::from_value(raw).map_err(ManifestError::Shape)?;
    let doc = match out {
        SchemasOutput::Full(doc) => doc,
        SchemasOutput::Short(list) => SchemasDoc {
            actions: list
                .into_iter()
                .map(|s| {
                    let prefix = format!("{tool}_");
                    // An entry named like the tool itself is the action of that name (AnimaWorks' `web_search`);
                    // any other name keeps its spelling and is checked in `from_doc`.
                    let (name, schema_name) = match s.name.strip_prefix(&prefix) {
                        Some(rest) if !rest.is_empty() => (rest.to_owned(), Some(s.name.clone())),
                        _ => (s.name.clone(), Some(s.name.clone())),
                    };
                    awt_protocol::ActionDecl {
                        name,
                        description: s.description,
                        input_schema: s.input_schema,
                        schema_name,
                        ..Default::default()
                    }
                })
                .collect(),
            // The short form is protocol 1 (protocol.md §2.2); `Default` would say 0.
            protocol: 1,
            ..Default::default()
        },
    };
    from_doc(tool, doc)
}

fn first_bytes(text: &str) -> String {
    text.chars().take(80).collect()
}

/// Does `schema_name` belong to tool `tool`: the tool's own name, or `<tool>_…`?
pub fn owns_schema_name(tool: &str, schema_name: &str) -> bool {
    schema_name == tool
        || schema_name
            .strip_prefix(tool)
            .is_some_and(|rest| rest.len() > 1 && rest.starts_with('_'))
}

/// The most actions one tool may declare. Why a cap: each action's schema is checked and compiled at discovery,
/// and every listing carries every action; a tool past it is refused whole, never cut.
pub const MAX_ACTIONS: usize = 1024;

fn from_doc(tool: &str, doc: SchemasDoc) -> Result<Manifest, ManifestError> {
    // An AnimaWorks module that lists nothing is still a tool: AnimaWorks hands any action to its `dispatch`.
    if doc.actions.is_empty() && !doc.cli && !doc.legacy {
        return Err(ManifestError::NoActions);
    }
    if doc.actions.len() > MAX_ACTIONS {
        return Err(ManifestError::TooManyActions(doc.actions.len()));
    }
    let mut actions: Vec<ActionSpec> = Vec::with_capacity(doc.actions.len());
    // Each kept action's canonical name, to its index in `actions`.
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut refused = Vec::new();
    let had_actions = !doc.actions.is_empty();
    for a in doc.actions {
        let schema_name = a.schema_name.clone().unwrap_or_else(|| format!("{tool}_{}", a.name));
        if !owns_schema_name(tool, &schema_name) {
            // Why refuse: MCP, provider schemas and AnimaWorks route by schema name; a tool naming its action
            // `gt_delete_all` would take over the tool `gt`'s action.
            refused.push(format!(
                "schema name {schema_name:?} does not start with the tool's own name \"{tool}_\"; left out (protocol.md §3)"
            ));
            continue;
        }
        if let Some(p) = action_name_problem(&a.name, &schema_name) {
            return Err(ManifestError::BadName(p));
        }
        if let Some(&other) = seen.get(&canon(&a.name)) {
            return Err(ManifestError::DifferOnlyInDash {
                first: actions[other].name.clone(),
                second: a.name,
            });
        }
        check_numbers(&a.profile).map_err(|source| ManifestError::Numbers {
            action: a.name.clone(),
            source,
        })?;
        let input_schema = a.input_schema.unwrap_or_else(|| serde_json::json!({"type": "object"}));
        check_schema(&input_schema).map_err(|source| ManifestError::InputSchema {
            action: a.name.clone(),
            source,
        })?;
        if let Some(out) = &a.output_schema {
            check_schema(out).map_err(|source| ManifestError::OutputSchema {
                action: a.name.clone(),
                source,
            })?;
        }
        seen.insert(canon(&a.name), actions.len());
        actions.push(ActionSpec {
            name: a.name,
            schema_name,
            title: a.title.map(|t| bounded_title(&t)),
            description: a.description,
            input_schema,
            output_schema: a.output_schema,
            profile: a.profile,
            annotations: a.annotations,
        });
    }
    if had_actions && actions.is_empty() && !doc.cli {
        return Err(ManifestError::AllRefused(refused));
    }
    Ok(Manifest {
        protocol: doc.protocol,
        version: doc.version,
        description: doc.description,
        events: doc.events,
        persistent: doc.persistent,
        broker: doc.broker,
        cli: doc.cli,
        legacy: doc.legacy,
        legacy_profile: doc.legacy_profile,
        legacy_profile_error: doc.legacy_profile_error,
        credentials: doc.credentials,
        actions,
        refused,
    })
}

/// A profile's numbers must make a deadline: `timeout_s` above 0 (0 or less means the default, as before) and
/// `expected_seconds` at least 0, both at most [`crate::limits::MAX_SECONDS`].
fn check_numbers(p: &Profile) -> Result<(), crate::limits::OutOfRange> {
    if let Some(t) = p.timeout_s.filter(|t| *t > 0.0 || !t.is_finite()) {
        crate::limits::seconds(t, "profile.timeout_s")?;
    }
    if let Some(e) = p.expected_seconds.filter(|e| *e != 0.0) {
        crate::limits::seconds(e, "profile.expected_seconds")?;
    }
    Ok(())
}

/// A JSON Schema is valid when it is an object (or boolean) that its draft's meta-schema accepts.
pub fn check_schema(schema: &Value) -> Result<(), SchemaError> {
    if !schema.is_object() && !schema.is_boolean() {
        return Err(SchemaError::NotObject);
    }
    let meta = jsonschema::meta::validator_for(schema).map_err(SchemaError::NoMetaSchema)?;
    if let Err(e) = meta.validate(schema) {
        return Err(SchemaError::MetaInvalid(e.to_owned()));
    }
    crate::schema_size::expanded_size(schema)?;
    jsonschema::validator_for(schema)
        .map(|_| ())
        .map_err(SchemaError::Unusable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_form_maps_prefix() {
        let m = parse(
            "weather",
            br#"[{"name":"weather_forecast","description":"d","parameters":{"type":"object"}},{"name":"other_x"}]"#,
        )
        .unwrap();
        assert_eq!(m.actions[0].name, "forecast");
        assert_eq!(m.actions[0].schema_name, "weather_forecast");
        assert_eq!(m.actions.len(), 1, "another tool's name is left out");
        assert!(m.refused[0].contains("other_x"), "{:?}", m.refused);
        assert!(!m.events);
        let m = parse("web_search", br#"[{"name":"web_search"},{"name":"web_search_news"}]"#).unwrap();
        assert_eq!(m.actions[0].name, "web_search");
        assert_eq!(m.actions[1].name, "news");
        let e = parse("evil", br#"[{"name":"gt_delete_all"}]"#).unwrap_err();
        assert!(
            matches!(&e, ManifestError::AllRefused(r) if r[0].contains("gt_delete_all")),
            "{e}"
        );
        let m = parse(
            "evil",
            br#"{"actions":[{"name":"x","schema_name":"gt_x"},{"name":"y"}]}"#,
        )
        .unwrap();
        assert_eq!(m.actions.len(), 1);
        assert!(owns_schema_name("a", "a_b") && !owns_schema_name("a", "ab_c") && !owns_schema_name("a", "a_"));
    }

    /// Past [`MAX_ACTIONS`] a tool is refused whole, with the count; at the cap it is kept.
    #[test]
    fn actions_past_the_cap_are_refused() {
        let doc = |n: usize| {
            let actions: Vec<_> = (0..n).map(|i| serde_json::json!({"name": format!("a{i}")})).collect();
            serde_json::json!({"actions": actions}).to_string()
        };
        let m = parse("t", doc(MAX_ACTIONS).as_bytes()).unwrap();
        assert_eq!(m.actions.len(), MAX_ACTIONS);
        let e = parse("t", doc(MAX_ACTIONS + 1).as_bytes()).unwrap_err();
        assert!(
            matches!(e, ManifestError::TooManyActions(n) if n == MAX_ACTIONS + 1),
            "{e}"
        );
        assert!(e.to_string().contains("at most 1024"), "{e}");
    }

    /// A schema whose `$ref`s expand past the measure is refused at discovery, before any call can check it.
    #[test]
    fn an_exploding_schema_is_refused() {
        let mut defs = serde_json::Map::new();
        defs.insert("d0".into(), serde_json::json!({"type": "string"}));
        for i in 1..=59 {
            let r = format!("#/$defs/d{}", i - 1);
            defs.insert(
                format!("d{i}"),
                serde_json::json!({"allOf": [{"$ref": r}, {"$ref": r}]}),
            );
        }
        let schema = serde_json::json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/d59"}}, "$defs": defs});
        let doc = serde_json::json!({"actions": [{"name": "a", "input_schema": schema}]}).to_string();
        let e = parse("t", doc.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("expands to more than"), "{e}");
        let doc = serde_json::json!({"actions": [{"name": "a", "output_schema": schema}]}).to_string();
        assert!(parse("t", doc.as_bytes()).is_err());
    }

    #[test]
    fn refusals() {
        assert!(parse("t", b"").unwrap_err().to_string().contains("printed nothing"));
        assert!(parse("t", b"hello").unwrap_err().to_string().contains("first bytes"));
        assert!(parse("t", br#"{"protocol":2,"actions":[{"name":"a"}]}"#)
            .unwrap_err()
            .to_string()
            .contains("protocol 2"));
        assert!(parse("t", br#"{"actions":[{"name":"a.b"}]}"#)
            .unwrap_err()
            .to_string()
            .contains("a.b"));
        assert!(parse("t", br#"{"actions":[{"name":"a-b"},{"name":"a_b"}]}"#)
            .unwrap_err()
            .to_string()
            .contains("differ only"));
        let e = parse("t", br#"{"actions":[{"name":"a","input_schema":{"type":"nope"}}]}"#).unwrap_err();
        assert!(matches!(e, ManifestError::InputSchema { .. }), "{e}");
        assert!(e.to_string().contains("invalid input_schema"), "{e}");
        assert!(parse("t", br#"{"actions":[]}"#)
            .unwrap_err()
            .to_string()
            .contains("no actions"));
    }

    #[test]
    fn timeout_default_follows_expected_seconds() {
        let m = parse(
            "t",
            br#"{"actions":[{"name":"a","profile":{"expected_seconds":120}},{"name":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(m.actions[0].timeout_s(), 360.0);
        assert_eq!(m.actions[1].timeout_s(), 60.0);
        assert_eq!(m.action("a").unwrap().name, "a");
    }
}
