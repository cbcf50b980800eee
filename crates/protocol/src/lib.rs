//! The wire types of protocol v1 (see `protocol.md` at the repository root). This module is the one
//! definition used by both the runner and the SDK. Every struct ignores unknown fields, so a newer peer never
//! breaks an older one.

#![forbid(unsafe_code)]

pub mod content;
pub mod names;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// The full form of a `--schemas` document (protocol.md §2.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchemasDoc {
    #[serde(default = "one")]
    pub protocol: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `true`: stdout of every call is an event stream (§5.2).
    #[serde(default)]
    pub events: bool,
    /// The tool can serve many calls in one process (§9).
    #[serde(default)]
    pub persistent: bool,
    /// The tool asks for credentials at run time: the runner hands it its credential broker (§8), as it does to
    /// every `.py` tool.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub broker: bool,
    /// Runner extension used by the Python shim: the module has an AnimaWorks `cli_main(argv)`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cli: bool,
    /// Runner extension used by the Python shim: the module follows the AnimaWorks convention (not tool-sdk-py).
    /// The runner honours it only for `.py` files, which it runs through its own shim; it decides the
    /// environment policy (protocol.md §8).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legacy: bool,
    /// Runner extension used by the Python shim: a legacy module's `EXECUTION_PROFILE` as written (keys in CLI
    /// spelling), so that gates also hold for actions reachable only through `cli_main`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy_profile: Option<Map<String, Value>>,
    /// Runner extension used by the Python shim: the module's `EXECUTION_PROFILE` exists but cannot be read. The
    /// runner then treats every action (and every `cli_main` word) as gated: a gate fails closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy_profile_error: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<CredentialDecl>,
    #[serde(default)]
    pub actions: Vec<ActionDecl>,
}

fn one() -> u32 {
    1
}

/// One action of a tool (§2.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActionDecl {
    pub name: String,
    /// A name for people (MCP's `title`), shown instead of `<tool>.<action>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default, alias = "parameters", skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub profile: Profile,
    /// MCP tool annotations the author declares (§2.1); what is not declared is not announced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// The name the request carries, when it is not `<tool>_<action>` (short form, §2.2). Not on the wire of
    /// a full-form document; the runner fills it when it normalises a short-form list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_name: Option<String>,
}

/// How an action behaves (§2.1). Every field is optional on the wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    #[serde(default)]
    pub background_eligible: bool,
    #[serde(default)]
    pub gated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gated_as: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<CredentialDecl>,
    #[serde(default)]
    pub hints: Hints,
    /// What the action may touch when the runner confines it (§2.4). `None`: the tool declared nothing and gets
    /// the runner's default for undeclared tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
}

/// An action's declared needs (§2.4). Paths may start with a placeholder: `$ANIMA_DIR`, `$DATA_DIR`, `$TMP`,
/// `$TOOL_DIR`, `$HOME`. Everything not declared (beyond the runner's baseline) is refused by the kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sandbox {
    /// Folders or files the action reads (and lists).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Folders or files the action writes, creates and removes in (reading them too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// The network: `false` (none, the default), `true` (any), or `"host:port"` entries.
    #[serde(default, skip_serializing_if = "Net::is_none")]
    pub net: Net,
    /// Programs (files or folders) the action runs, besides the system's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exec: Vec<String>,
}

/// `"net"` of a [`Sandbox`]: `false`, `true`, or a list of `"host:port"` (`"*:443"` for any host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Net {
    All(bool),
    Only(Vec<String>),
}

impl Default for Net {
    fn default() -> Self {
        Net::All(false)
    }
}

impl Net {
    /// No network at all.
    pub fn is_none(&self) -> bool {
        matches!(self, Net::All(false)) || matches!(self, Net::Only(v) if v.is_empty())
    }
}

/// MCP-style annotations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hints {
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub destructive: bool,
    #[serde(default)]
    pub idempotent: bool,
    #[serde(default)]
    pub open_world: bool,
}

/// MCP tool annotations as the author declares them (§2.1): each absent unless declared, so a client applies
/// MCP's defaults (not read-only, destructive, not idempotent, open world) to what the author left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// A credential an action or tool needs (§2.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialDecl {
    pub name: String,
    pub env: String,
    #[serde(default = "api_key")]
    pub key: String,
    #[serde(default)]
    pub per_anima: bool,
    #[serde(default = "yes")]
    pub required: bool,
}

fn api_key() -> String {
    "api_key".into()
}
fn yes() -> bool {
    true
}

/// An entry of the short form (§2.2): `{"name", "description", "input_schema" | "parameters"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShortSchema {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default, alias = "parameters")]
    pub input_schema: Option<Value>,
}

/// What `--schemas` may print: the full form or the short form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SchemasOutput {
    Full(SchemasDoc),
    Short(Vec<ShortSchema>),
}

/// The request written to a tool's stdin (§4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub name: String,
    #[serde(default)]
    pub args: Map<String, Value>,
    #[serde(default)]
    pub context: RequestContext,
}

/// The context of a call (§4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestContext {
    #[serde(default = "one")]
    pub protocol: u32,
    #[serde(default)]
    pub call_id: String,
    #[serde(default)]
    pub tool: String,
    #[serde(default)]
    pub action: String,
    #[serde(default)]
    pub anima_name: Option<String>,
    #[serde(default)]
    pub anima_dir: Option<String>,
    #[serde(default)]
    pub data_dir: Option<String>,
    #[serde(default)]
    pub timeout_s: Option<f64>,
    #[serde(default)]
    pub deadline_ms: Option<u64>,
}

/// A log level of a `log` event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Debug,
    #[default]
    Info,
    #[serde(alias = "warn")]
    Warning,
    Error,
}

/// The tool's own error (§5, §6 `tool_error`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolErrorBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// One event line of an event stream (§5.2). `call_id` is present only for persistent workers (§9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Event {
    Progress {
        progress: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    Log {
        #[serde(default)]
        level: Level,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    Partial {
        data: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    Result {
        #[serde(default)]
        result: Value,
        /// Content blocks beside the value (MCP's `ContentBlock`s, [`content`]), passed to MCP clients whole.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Vec<Value>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    Error {
        #[serde(flatten)]
        error: ToolErrorBody,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
}

impl Event {
    /// `result` and `error` end a call.
    pub fn is_final(&self) -> bool {
        matches!(self, Event::Result { .. } | Event::Error { .. })
    }

    pub fn call_id(&self) -> Option<&str> {
        match self {
            Event::Progress { call_id, .. }
            | Event::Log { call_id, .. }
            | Event::Partial { call_id, .. }
            | Event::Result { call_id, .. }
            | Event::Error { call_id, .. } => call_id.as_deref(),
        }
    }

    pub fn result(result: Value) -> Self {
        Event::Result {
            result,
            content: None,
            call_id: None,
        }
    }

    pub fn error(message: impl Into<String>) -> Self {
        Event::Error {
            error: ToolErrorBody {
                message: message.into(),
                ..Default::default()
            },
            call_id: None,
        }
    }

    pub fn progress(progress: f64, total: Option<f64>, message: Option<String>) -> Self {
        Event::Progress {
            progress,
            total,
            message,
            call_id: None,
        }
    }

    pub fn log(level: Level, message: impl Into<String>) -> Self {
        Event::Log {
            level,
            message: message.into(),
            call_id: None,
        }
    }
}

/// How one stdout line of an event stream reads (§5.2): a known event, an object of an unknown type (ignored),
/// or not a protocol line at all.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    Event(Event),
    Unknown(Map<String, Value>),
    Blank,
    NotProtocol(String),
}

const KNOWN_TYPES: [&str; 5] = ["progress", "log", "partial", "result", "error"];

/// Classify one line of an event stream.
pub fn parse_line(line: &[u8]) -> Line {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return Line::Blank;
    }
    // Fast path: almost every line is a well-formed known event.
    if let Ok(ev) = serde_json::from_slice::<Event>(trimmed) {
        return Line::Event(ev);
    }
    let value: Value = match serde_json::from_slice(trimmed) {
        Ok(v) => v,
        Err(e) => return Line::NotProtocol(format!("not JSON ({e})")),
    };
    let Value::Object(map) = value else {
        return Line::NotProtocol("a JSON value that is not an object".into());
    };
    let kind = map.get("type").and_then(Value::as_str).map(str::to_owned);
    match kind {
        None => Line::NotProtocol("a JSON object with no string \"type\" field".into()),
        Some(t) if KNOWN_TYPES.contains(&t.as_str()) => match serde_json::from_value::<Event>(Value::Object(map)) {
            Ok(ev) => Line::Event(ev),
            Err(e) => Line::NotProtocol(format!("a malformed \"{t}\" event ({e})")),
        },
        Some(_) => Line::Unknown(map),
    }
}

impl CredentialDecl {
    /// A credential: `name` is the entry in AnimaWorks' `config.json` `credentials`, `env` the variable the
    /// tool reads the secret from. Defaults: key `api_key`, not per anima, required.
    pub fn new(name: impl Into<String>, env: impl Into<String>) -> Self {
        CredentialDecl {
            name: name.into(),
            env: env.into(),
            key: "api_key".into(),
            per_anima: false,
            required: true,
        }
    }

    /// The key inside the `config.json` entry (default `api_key`).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }

    /// Try `<ENV>__<anima name>` first.
    pub fn per_anima(mut self) -> Self {
        self.per_anima = true;
        self
    }

    /// A missing secret does not stop the call; the tool copes without it.
    pub fn optional(mut self) -> Self {
        self.required = false;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn short_and_full_forms_parse() {
        let short: SchemasOutput =
            serde_json::from_value(json!([{"name": "x_y", "parameters": {"type": "object"}}])).unwrap();
        assert!(matches!(short, SchemasOutput::Short(ref v) if v[0].input_schema.is_some()));
        let full: SchemasOutput =
            serde_json::from_value(json!({"protocol": 1, "actions": [{"name": "a"}], "future": 1})).unwrap();
        assert!(matches!(full, SchemasOutput::Full(ref d) if d.actions.len() == 1 && !d.events));
    }

    #[test]
    fn lines_classify() {
        assert!(matches!(parse_line(b"  \n"), Line::Blank));
        assert!(matches!(parse_line(b"{\"type\":\"future\",\"x\":1}"), Line::Unknown(_)));
        assert!(matches!(parse_line(b"hello"), Line::NotProtocol(_)));
        assert!(matches!(parse_line(b"{\"type\":\"progress\"}"), Line::NotProtocol(_)));
        match parse_line(br#"{"type":"error","message":"m","code":"c","extra":true}"#) {
            Line::Event(Event::Error { error, .. }) => assert_eq!(error.code.as_deref(), Some("c")),
            other => panic!("{other:?}"),
        }
        match parse_line(br#"{"type":"result","result":{"a":1}}"#) {
            Line::Event(e) => assert!(e.is_final()),
            other => panic!("{other:?}"),
        }
    }
}
