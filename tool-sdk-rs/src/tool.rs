//! Declaring a tool: [`Tool`], [`Action`], [`NoArgs`], and credential builders.

use crate::names::{canon, is_name, same_spelling};
use std::fmt::Write as _;

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::context::Context;
use crate::error::ToolError;
use crate::protocol::{ActionDecl, CredentialDecl, Hints, Request, SchemasDoc, PROTOCOL_VERSION};

type Handler = Box<dyn Fn(Map<String, Value>, &mut Context<'_>) -> Result<Value, ToolError>>;

/// A tool: its name, version, description, credentials and actions. Build it, then call [`Tool::run`] from
/// `main`, or test it with [`crate::testing`].
///
/// A tool built with this SDK always declares `"events": true` (every call's stdout is an event stream, §5.2)
/// and, unless [`Tool::persistent`] says otherwise, `"persistent": true` (it answers `--serve`, §9).
pub struct Tool {
    pub(crate) name: String,
    version: Option<String>,
    description: Option<String>,
    persistent: bool,
    broker: bool,
    credentials: Vec<CredentialDecl>,
    pub(crate) actions: Vec<Action>,
}

impl Tool {
    /// A tool with no actions yet. `name` is informative: the runner names a tool by its file stem (§3).
    pub fn new(name: impl Into<String>) -> Self {
        Tool {
            name: name.into(),
            version: None,
            description: None,
            persistent: true,
            broker: false,
            credentials: Vec::new(),
            actions: Vec::new(),
        }
    }

    /// The tool's own version, shown by `animaworks-tool list`; `env!("CARGO_PKG_VERSION")` is the usual value.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = Some(version.into());
        self
    }

    /// One paragraph about the tool.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Whether to declare `"persistent": true` (default `true`). `--serve` works either way; this only says
    /// whether the runner may keep one process for many calls, which a tool holding per-call global state
    /// should refuse.
    pub fn persistent(mut self, persistent: bool) -> Self {
        self.persistent = persistent;
        self
    }

    /// Declares `"broker": true`: the tool asks for credentials at run time with [`crate::get_credential`], so the
    /// runner hands it its credential broker (docs/credentials.md). Without it, only declared credentials reach
    /// the tool (in their variables).
    pub fn broker(mut self) -> Self {
        self.broker = true;
        self
    }

    /// A credential every action needs (build one with [`CredentialDecl::new`]).
    pub fn credential(mut self, credential: CredentialDecl) -> Self {
        self.credentials.push(credential);
        self
    }

    /// Adds an action.
    pub fn action(mut self, action: Action) -> Self {
        self.actions.push(action);
        self
    }

    /// The tool's name as given to [`Tool::new`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `--schemas` document (full form, §2.1).
    pub fn schemas(&self) -> SchemasDoc {
        SchemasDoc {
            protocol: PROTOCOL_VERSION,
            name: Some(self.name.clone()),
            version: self.version.clone(),
            description: self.description.clone(),
            events: true,
            persistent: self.persistent,
            broker: self.broker,
            credentials: self.credentials.clone(),
            actions: self.actions.iter().map(|a| a.decl.clone()).collect(),
            ..SchemasDoc::default()
        }
    }

    /// Checks what the runner would refuse at discovery (§2.3, §3): names, duplicate spellings, schema name
    /// length, non-object input schemas, negative or non-finite times. [`Tool::run`] and
    /// [`crate::testing`] call it first, so a mistake shows up in the author's unit tests, not in production.
    pub fn check(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if !is_name(&self.name) {
            problems.push(format!(
                "tool name {:?} does not match ^[A-Za-z0-9][A-Za-z0-9_-]*$",
                self.name
            ));
        }
        if self.actions.is_empty() {
            problems.push("the tool has no actions".to_owned());
        }
        for (i, action) in self.actions.iter().enumerate() {
            let d = &action.decl;
            if !is_name(&d.name) {
                problems.push(format!(
                    "action name {:?} does not match ^[A-Za-z0-9][A-Za-z0-9_-]*$",
                    d.name
                ));
            }
            let schema_name = format!("{}_{}", self.name, d.name);
            if schema_name.len() > 64 {
                problems.push(format!("schema name {schema_name:?} is longer than 64 characters"));
            }
            if let Some(other) = self.actions[..i].iter().find(|o| same_spelling(&o.decl.name, &d.name)) {
                problems.push(format!(
                    "actions {:?} and {:?} differ only in '-' and '_'",
                    other.decl.name, d.name
                ));
            }
            match &d.input_schema {
                Some(Value::Object(schema)) => match schema.get("type") {
                    None => {}
                    Some(Value::String(t)) if t == "object" => {}
                    Some(t) => problems.push(format!(
                        "action {:?}: input_schema has type {t}, but arguments are always a JSON object \
                         (use a struct, or tool_sdk::NoArgs)",
                        d.name
                    )),
                },
                Some(other) => problems.push(format!(
                    "action {:?}: input_schema is not a JSON object: {other}",
                    d.name
                )),
                None => {}
            }
            for (field, value) in [
                ("timeout_s", d.profile.timeout_s),
                ("expected_seconds", d.profile.expected_seconds),
            ] {
                if let Some(v) = value {
                    if !(v.is_finite() && v > 0.0) {
                        problems.push(format!(
                            "action {:?}: {field} must be a positive number, not {v}",
                            d.name
                        ));
                    }
                }
            }
            if let Some(g) = &d.profile.gated_as {
                if !is_name(g) {
                    problems.push(format!("action {:?}: gated_as {g:?} is not a valid name", d.name));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// The action a request names. In order: `context.action`, then `name` as `<tool>_<action>` or the bare
    /// action name, then the action whose name ends `name` after a `_` (the runner may know the tool by another
    /// file stem); `-` and `_` are the same letter throughout (§3).
    pub fn find_action(&self, request: &Request) -> Option<&Action> {
        let by_name = |n: &str| self.actions.iter().find(|a| same_spelling(&a.decl.name, n));
        if let Some(a) = Some(request.context.action.as_str())
            .filter(|s| !s.is_empty())
            .and_then(by_name)
        {
            return Some(a);
        }
        let name = request.name.as_str();
        let own = format!("{}_", self.name);
        if let Some(a) = strip_prefix_spelling(name, &own).and_then(by_name) {
            return Some(a);
        }
        if let Some(a) = by_name(name) {
            return Some(a);
        }
        self.actions
            .iter()
            .filter(|a| {
                let n = canon(name);
                let a = canon(&a.decl.name);
                n.len() > a.len() + 1 && n.ends_with(&a) && n.as_bytes()[n.len() - a.len() - 1] == b'_'
            })
            .max_by_key(|a| a.decl.name.len())
    }

    /// The text `--help` prints (and a bare start on a terminal): what the tool is and how to call it.
    pub fn help(&self) -> String {
        let mut s = String::new();
        let _ = write!(s, "{}", self.name);
        if let Some(v) = &self.version {
            let _ = write!(s, " {v}");
        }
        s.push('\n');
        if let Some(d) = &self.description {
            let _ = writeln!(s, "{d}");
        }
        let _ = writeln!(
            s,
            "\nThis is a tool for animaworks-tool (protocol {PROTOCOL_VERSION}); call it through the runner\n\
             (`animaworks-tool {} --help`).\n\nActions:",
            self.name
        );
        for a in &self.actions {
            let d = &a.decl;
            let _ = writeln!(
                s,
                "  {}{}",
                d.name,
                if d.description.is_empty() {
                    String::new()
                } else {
                    format!("  {}", d.description)
                }
            );
            for line in describe_args(d.input_schema.as_ref()) {
                let _ = writeln!(s, "      {line}");
            }
        }
        let example = self.actions.first().map(|a| a.decl.name.as_str()).unwrap_or("action");
        let n = &self.name;
        let _ = writeln!(s, "\nBy hand:");
        for (command, what) in [
            (format!("{n} --schemas"), "print the schemas document"),
            (format!("{n} --serve"), "a persistent worker: one request per line"),
            (
                format!("echo '{{\"name\":\"{n}_{example}\",\"args\":{{}}}}' | {n}"),
                "one call: events on stdout",
            ),
        ] {
            let _ = writeln!(s, "  {command}\n      {what}");
        }
        s
    }
}

/// One action: its name, argument type, handler and profile.
pub struct Action {
    pub(crate) decl: ActionDecl,
    pub(crate) handler: Handler,
}

impl Action {
    /// An action whose arguments are `A`, with the input schema derived from `A` by `schemars`.
    ///
    /// The handler receives the deserialized arguments and the call's [`Context`]; what it returns in `Ok` is
    /// serialized into the `result` event, an `Err` becomes the `error` event. Arguments that do not
    /// deserialize into `A` end the call with an `invalid_arguments` error carrying serde's message.
    pub fn new<A, R, F>(name: impl Into<String>, handler: F) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        R: Serialize,
        F: Fn(A, &mut Context<'_>) -> Result<R, ToolError> + 'static,
    {
        Self::with_input_schema(name, input_schema_for::<A>(), handler)
    }

    /// An action whose input schema is given as JSON; `A` is only deserialized (use
    /// `serde_json::Map<String, Value>` to take the arguments as they come).
    pub fn with_input_schema<A, R, F>(name: impl Into<String>, input_schema: Value, handler: F) -> Self
    where
        A: DeserializeOwned,
        R: Serialize,
        F: Fn(A, &mut Context<'_>) -> Result<R, ToolError> + 'static,
    {
        let handler = move |args: Map<String, Value>, ctx: &mut Context<'_>| {
            let args: A =
                serde_json::from_value(Value::Object(args)).map_err(|e| ToolError::invalid_arguments(e.to_string()))?;
            let out = handler(args, ctx)?;
            serde_json::to_value(out).map_err(|e| ToolError::internal(format!("the result did not serialize: {e}")))
        };
        Action {
            decl: ActionDecl {
                name: name.into(),
                input_schema: Some(input_schema),
                ..ActionDecl::default()
            },
            handler: Box::new(handler),
        }
    }

    /// What the action does, for people and LLMs.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.decl.description = description.into();
        self
    }

    /// Declares the shape of the result, derived from `R` (as it serializes).
    pub fn output<R: JsonSchema>(mut self) -> Self {
        self.decl.output_schema = Some(schema_for::<R>(SchemaSettings::draft2020_12().for_serialize()));
        self
    }

    /// Declares the shape of the result as JSON Schema.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.decl.output_schema = Some(schema);
        self
    }

    /// Replaces the input schema (e.g. to add constraints a derive cannot express). The runner validates
    /// arguments against it before the call; the handler still deserializes them into its own type.
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.decl.input_schema = Some(schema);
        self
    }

    /// How long a call usually takes, in seconds.
    pub fn expected_seconds(mut self, seconds: f64) -> Self {
        self.decl.profile.expected_seconds = Some(seconds);
        self
    }

    /// The call's deadline in seconds (default 60, or 3 × `expected_seconds` when that is more).
    pub fn timeout_s(mut self, seconds: f64) -> Self {
        self.decl.profile.timeout_s = Some(seconds);
        self
    }

    /// Fit to run as a background task (default `false`).
    pub fn background_eligible(mut self, eligible: bool) -> Self {
        self.decl.profile.background_eligible = eligible;
        self
    }

    /// The action runs only with an explicit grant (`<tool>_<action>`).
    pub fn gated(mut self) -> Self {
        self.decl.profile.gated = true;
        self
    }

    /// The action is gated under another grant name (`<tool>_<name>`); implies [`Action::gated`].
    pub fn gated_as(mut self, name: impl Into<String>) -> Self {
        self.decl.profile.gated = true;
        self.decl.profile.gated_as = Some(name.into());
        self
    }

    /// A credential this action needs, besides the tool's.
    pub fn credential(mut self, credential: CredentialDecl) -> Self {
        self.decl.profile.credentials.push(credential);
        self
    }

    /// What the action may touch when the runner confines it (protocol.md §2.4): e.g.
    /// `Sandbox { read: vec!["$ANIMA_DIR/notes".into()], net: Net::Only(vec!["api.example.com:443".into()]), ..Default::default() }`.
    pub fn sandbox(mut self, sandbox: crate::protocol::Sandbox) -> Self {
        self.decl.profile.sandbox = Some(sandbox);
        self
    }

    /// Sets all four hints at once.
    pub fn hints(mut self, hints: Hints) -> Self {
        self.decl.profile.hints = hints;
        self
    }

    /// MCP tool annotations (protocol.md §2.1), announced as declared: e.g.
    /// `Annotations { read_only_hint: Some(true), open_world_hint: Some(false), ..Default::default() }`.
    /// What is left `None` is not announced (MCP clients then assume the cautious default).
    pub fn annotations(mut self, annotations: crate::protocol::Annotations) -> Self {
        self.decl.annotations = Some(annotations);
        self
    }

    /// Hint: the action changes nothing.
    pub fn read_only(mut self) -> Self {
        self.decl.profile.hints.read_only = true;
        self
    }

    /// Hint: the action may destroy data.
    pub fn destructive(mut self) -> Self {
        self.decl.profile.hints.destructive = true;
        self
    }

    /// Hint: calling twice with the same arguments does no more than calling once.
    pub fn idempotent(mut self) -> Self {
        self.decl.profile.hints.idempotent = true;
        self
    }

    /// Hint: the action reaches outside systems (the network, other services).
    pub fn open_world(mut self) -> Self {
        self.decl.profile.hints.open_world = true;
        self
    }

    /// The declaration as `--schemas` prints it.
    pub fn decl(&self) -> &ActionDecl {
        &self.decl
    }
}

/// The argument type of an action that takes none: any object deserializes into it, and its schema is
/// `{"type": "object", "properties": {}}`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NoArgs {}

/// The input schema the SDK derives for an argument type: JSON Schema 2020-12 as the type deserializes,
/// subschemas inlined (some LLM providers refuse `$ref`), without `$schema` and the root `title` (the Rust type
/// name means nothing to a caller).
pub fn input_schema_for<A: JsonSchema>() -> Value {
    schema_for::<A>(SchemaSettings::draft2020_12().for_deserialize())
}

fn schema_for<T: JsonSchema>(settings: SchemaSettings) -> Value {
    let generator = settings
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("title");
    }
    schema
}

fn strip_prefix_spelling<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    same_spelling(head, prefix).then(|| &s[prefix.len()..])
}

/// One line per property of an object schema: `name: type (required)  description`.
fn describe_args(schema: Option<&Value>) -> Vec<String> {
    let Some(props) = schema.and_then(|s| s.get("properties")).and_then(Value::as_object) else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    props
        .iter()
        .map(|(name, p)| {
            let ty = match p.get("type") {
                Some(Value::String(t)) => t.clone(),
                Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|"),
                _ => "any".to_owned(),
            };
            let mut line = format!("{name}: {ty}");
            if required.contains(&name.as_str()) {
                line.push_str(" (required)");
            }
            if let Some(d) = p.get("description").and_then(Value::as_str) {
                let _ = write!(line, "  {d}");
            }
            line
        })
        .collect()
}
