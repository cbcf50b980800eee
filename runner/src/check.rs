//! The conformance check for tool authors (`animaworks-tool check <path>`): `--schemas` parses, names and JSON
//! Schemas are valid, and every action, called with arguments made from its schema, answers in the protocol.
//!
//! The tool runs in a throwaway world (temporary data, anima and cache dirs) so a check never touches a real
//! anima's files, the real schema cache, or the real `outputs/` folder.

use awt_core::cache::Probed;
use awt_core::call::{CallOptions, OpenTool, Runner};
use awt_core::dirs::{DirOptions, Dirs};
use awt_core::discover::Launch;
use awt_core::error::{Detail, ErrorCode};
use awt_core::manifest::ActionSpec;
use awt_core::stream::{Cancel, Observer};
use awt_protocol::Event;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest a checked call may take unless the caller says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Warn,
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub level: Verdict,
    /// What was checked: `file`, `name`, `schemas`, or `action <name>`.
    pub subject: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub path: PathBuf,
    pub tool: String,
    pub passed: bool,
    pub findings: Vec<Finding>,
}

/// How to check.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// The Python for `.py` tools (else `$ANIMAWORKS_PYTHON`, else `python3`).
    pub python: Option<OsString>,
    /// Deadline of each call; default: the action's `timeout_s`, at most [`DEFAULT_CALL_TIMEOUT`].
    pub timeout: Option<Duration>,
    /// Also call actions marked gated or destructive (by default they are checked but not called).
    pub call_all: bool,
}

struct Findings(Vec<Finding>);

impl Findings {
    fn add(&mut self, level: Verdict, subject: &str, message: impl Into<String>, hint: Option<String>) {
        self.0.push(Finding {
            level,
            subject: subject.to_owned(),
            message: message.into(),
            hint,
        });
    }
    fn pass(&mut self, subject: &str, message: impl Into<String>) {
        self.add(Verdict::Pass, subject, message, None);
    }
    fn warn(&mut self, subject: &str, message: impl Into<String>, hint: impl Into<String>) {
        self.add(Verdict::Warn, subject, message, Some(hint.into()));
    }
    fn fail(&mut self, subject: &str, message: impl Into<String>, hint: impl Into<String>) {
        self.add(Verdict::Fail, subject, message, Some(hint.into()));
    }
}

/// Check the tool file at `path`.
pub async fn check(path: &Path, opts: &CheckOptions) -> CheckReport {
    let tool = tool_name(path);
    let mut f = Findings(Vec::new());
    check_into(path, &tool, opts, &mut f).await;
    let passed = !f.0.iter().any(|x| x.level == Verdict::Fail);
    CheckReport {
        path: path.to_path_buf(),
        tool,
        passed,
        findings: f.0,
    }
}

fn tool_name(path: &Path) -> String {
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match file_name.rsplit_once('.') {
        Some((s, _)) if !s.is_empty() => s.to_owned(),
        _ => file_name,
    }
}

async fn check_into(path: &Path, tool: &str, opts: &CheckOptions, f: &mut Findings) {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            return f.fail(
                "file",
                format!("{}: cannot read ({e})", path.display()),
                "give the path of a tool file",
            )
        }
    };
    if meta.is_dir() {
        let hint = if path.join("Cargo.toml").is_file() {
            format!(
                "a cargo project: build it (cargo build --release) and check the binary, e.g. {}",
                path.join("target/release").join(tool).display()
            )
        } else {
            "give the path of the tool file inside it".to_owned()
        };
        return f.fail("file", format!("{} is a folder, not a tool file", path.display()), hint);
    }
    match awt_core::names::tool_name_problem(tool) {
        Some(p) => f.fail(
            "name",
            p,
            "rename the file; the tool's name is its file name without the extension",
        ),
        None => f.pass("name", format!("tool name {tool:?} is valid")),
    }
    let launch = Launch::for_path(path);
    if launch == Launch::Exec && meta.permissions().mode() & 0o111 == 0 {
        return f.fail(
            "file",
            format!("{} is not executable and has no .py/.js/.sh extension", path.display()),
            format!("chmod +x {}", path.display()),
        );
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let world = match tempfile::Builder::new().prefix("animaworks-tool-check-").tempdir() {
        Ok(t) => t,
        Err(e) => {
            return f.fail(
                "file",
                format!("cannot make a temporary folder for the check: {e}"),
                "check TMPDIR",
            )
        }
    };
    let dirs = Dirs::resolve(&DirOptions {
        core_dirs: vec![world.path().join("core")],
        data_dir: Some(world.path().join("data")),
        anima_dir: Some(world.path().join("animas").join("checker")),
        cache_dir: Some(world.path().join("cache")),
        python: opts.python.clone(),
    });
    for d in [dirs.anima.clone().unwrap_or_default(), dirs.data.clone()] {
        let _ = std::fs::create_dir_all(d);
    }
    let runner = Runner::new(dirs);
    let tool = match runner.open_file(tool, &abs).await {
        Ok(t) => t,
        Err(Probed::Failed {
            reason, stderr_tail, ..
        }) => {
            let last = last_line(&stderr_tail);
            let msg = if last.is_empty() {
                reason
            } else {
                format!("{reason} (stderr: {last})")
            };
            return f.fail(
                "schemas",
                msg,
                "`TOOL --schemas` must print one JSON document and exit 0 (protocol.md §2)",
            );
        }
        Err(Probed::Ok(_)) => unreachable!("a probe that answered opens"),
    };
    let manifest = &tool.resolved().manifest;
    let names: Vec<&str> = manifest.actions.iter().map(|a| a.name.as_str()).collect();
    f.pass(
        "schemas",
        format!(
            "--schemas parses: protocol {}, {} action{} ({}), {} output",
            manifest.protocol,
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            names.join(", "),
            if manifest.events { "event" } else { "value" }
        ),
    );
    for a in &manifest.actions {
        if a.description.trim().is_empty() {
            f.warn(
                &format!("action {}", a.name),
                "has no description",
                "describe it: people and LLMs choose actions by it",
            );
        }
        match &a.profile.sandbox {
            // An AnimaWorks module has no way to declare one: it gets what AnimaWorks tools need.
            None if manifest.legacy => {}
            None => f.warn(
                &format!("action {}", a.name),
                "declares no sandbox: where tools are confined it gets the default for AnimaWorks tools (its anima's folder, the shared folders, the network if permitted)",
                "declare what it needs in its profile's \"sandbox\" (protocol.md §2.4): least privilege",
            ),
            Some(d) => {
                let problems = awt_core::sandbox::validate(d);
                if problems.is_empty() {
                    f.pass(&format!("action {}", a.name), "sandbox declaration is valid");
                }
                for p in problems {
                    f.fail(&format!("action {}", a.name), p, "see protocol.md §2.4 for the fields and placeholders");
                }
            }
        }
        if a.schema_name.len() > awt_core::mcp_servers::names::MAX_SCHEMA_NAME {
            use awt_core::mcp_servers::names::{CLIENT_LIMIT, CLIENT_PREFIX};
            f.warn(
                &format!("action {}", a.name),
                format!(
                    "its schema name {} ({} characters) is too long for Claude Code, which names it {CLIENT_PREFIX}{} and refuses names past {CLIENT_LIMIT}",
                    a.schema_name,
                    a.schema_name.len(),
                    a.schema_name
                ),
                format!(
                    "keep the tool and action names within {} characters together",
                    awt_core::mcp_servers::names::MAX_SCHEMA_NAME - 1
                ),
            );
        }
        let mut formats = Vec::new();
        formats_in(&a.input_schema, String::new(), &mut formats, 0);
        if !formats.is_empty() {
            f.warn(
                &format!("action {}", a.name),
                format!(
                    "\"format\" is not checked by the runner (an annotation in JSON Schema 2020-12): {}",
                    formats.join(", ")
                ),
                "check these values in the tool itself, or add a \"pattern\" the runner checks",
            );
        }
    }
    let resolved = tool.resolved();
    if opts.call_all {
        // The throwaway anima grants what the author asked to call: the call still goes through the gate.
        let grants: Vec<String> = resolved
            .manifest
            .actions
            .iter()
            .map(|a| format!("{}_{}", resolved.file.name, a.gate_name()))
            .collect();
        if let Some(anima) = &runner.dirs.anima {
            let perms = serde_json::json!({"version": 1, "external_tools": {"allow_all": true, "allow": grants}});
            let _ = std::fs::write(anima.join("permissions.json"), perms.to_string());
        }
    }
    for act in &resolved.manifest.actions {
        // Why: a sample call of a gated or destructive action could do real harm outside the throwaway world
        // (a network API, an absolute path); the author opts in.
        if !opts.call_all && (act.profile.gated || act.profile.hints.destructive) {
            f.pass(
                &format!("action {}", act.name),
                "not called: it is gated or destructive (pass --call-all to call it with sample arguments)",
            );
            continue;
        }
        call_action(&tool, act, opts, f).await;
    }
}

async fn call_action(tool: &OpenTool<'_>, act: &ActionSpec, opts: &CheckOptions, f: &mut Findings) {
    let r = tool.resolved();
    let subject = format!("action {}", act.name);
    let args = match sample_args(&act.input_schema) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if let Err(e) = awt_core::validate::check_args(
        &r.file.name,
        act,
        &args,
        &Default::default(),
        std::time::Duration::from_secs_f64(act.timeout_s()),
    ) {
        return f.warn(
            &subject,
            format!(
                "not called: the arguments made from its schema ({}) do not validate: {}",
                Value::Object(args),
                e.message
            ),
            "give the required properties a `default` or `examples` value so a sample call can be made",
        );
    }
    let timeout = opts.timeout.unwrap_or_else(|| {
        awt_core::call::timeout_from_secs(act.timeout_s(), "timeout_s")
            .unwrap_or(DEFAULT_CALL_TIMEOUT)
            .min(DEFAULT_CALL_TIMEOUT)
    });
    let call_opts = CallOptions {
        timeout: Some(timeout),
        ..Default::default()
    };
    let mut seen = Seen::default();
    let shown = Value::Object(args.clone());
    let out = match tool.clone().action(&act.name) {
        Ok(target) => match target.prepare(args, &call_opts) {
            Ok(call) => call.run(&mut seen, Cancel::never()).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    let events = if r.manifest.events {
        format!("; events: {}", seen.summary())
    } else {
        String::new()
    };
    match out {
        // The sample call ran confined, as it will in a tier: a failure the sandbox caused fails the check.
        Err(e) if e.detail(Detail::Reason).and_then(Value::as_str) == Some("sandbox_denied") => f.fail(
            &subject,
            format!("called with {shown}: fails in the sandbox: {}", e.message),
            e.hint.unwrap_or_default(),
        ),
        Err(e) if e.code == ErrorCode::BadOutput && e.detail(Detail::Result).is_some() => f.fail(
            &subject,
            format!(
                "called with {shown}: {}",
                e.message
                    .strip_prefix(&format!("{}.{}: ", r.file.name, act.name))
                    .unwrap_or(&e.message)
            ),
            "fix the result or the output_schema",
        ),
        Ok(v) => {
            f.pass(
                &subject,
                format!("called with {shown}: result {}{events}", describe(&v)),
            );
        }
        Err(e) if e.code == ErrorCode::ToolError => {
            let code = e.detail(Detail::ToolCode).and_then(Value::as_str).unwrap_or("-");
            f.pass(
                &subject,
                format!(
                    "called with {shown}: the tool's own error ({code}: {}){events}",
                    e.message
                ),
            );
        }
        Err(e) if e.code == ErrorCode::PermissionDenied => f.warn(
            &subject,
            format!("not called: {}", e.message),
            "set the credential in the environment to check this action",
        ),
        Err(e) if e.code == ErrorCode::OutputCapped => f.warn(
            &subject,
            format!("called with {shown}: the result passed the output cap ({})", e.message),
            "results over 8 MiB are written to a file; keep results small",
        ),
        Err(e) => {
            let tail = e
                .detail(Detail::StderrTail)
                .and_then(Value::as_str)
                .map(last_line)
                .unwrap_or_default();
            let msg = format!(
                "called with {shown}: {}: {}{}",
                e.code,
                e.message,
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(" (stderr: {tail})")
                }
            );
            f.fail(&subject, msg, e.hint.unwrap_or_else(|| "see protocol.md §5".to_owned()));
        }
    }
    for t in &seen.unknown {
        f.warn(
            &subject,
            format!("printed an event of unknown type {t:?}; the runner ignores it"),
            "use progress, log, partial, result or error",
        );
    }
}

fn last_line(text: &str) -> String {
    let l = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    l.chars().take(300).collect()
}

fn describe(v: &Value) -> String {
    format!("{}, {} bytes as JSON", awt_core::flags::kind(v), v.to_string().len())
}

/// Counts the events of a call, and notes unknown ones.
#[derive(Default)]
struct Seen {
    progress: usize,
    log: usize,
    partial: usize,
    unknown: Vec<String>,
}

impl Seen {
    fn summary(&self) -> String {
        format!("{} progress, {} log, {} partial", self.progress, self.log, self.partial)
    }
}

impl Observer for Seen {
    fn event(&mut self, event: &Event, _raw: &[u8]) {
        match event {
            Event::Progress { .. } => self.progress += 1,
            Event::Log { .. } => self.log += 1,
            Event::Partial { .. } => self.partial += 1,
            _ => {}
        }
    }
    fn unknown(&mut self, raw: &[u8]) {
        let t = serde_json::from_slice::<Value>(raw)
            .ok()
            .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned));
        self.unknown.push(t.unwrap_or_else(|| "?".into()));
    }
}

/// Arguments made from an input schema: every required property, from `const`, `default`, `examples`,
/// `enum`, or a sample value of its type that honours the usual bounds.
pub fn sample_args(schema: &Value) -> Value {
    let v = sample(schema, schema, 0);
    if v.is_object() {
        v
    } else {
        json!({})
    }
}

fn sample(s: &Value, root: &Value, depth: usize) -> Value {
    if depth > 16 {
        return Value::Null;
    }
    let Some(o) = s.as_object() else { return Value::Null };
    if let Some(target) = o
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|p| root.pointer(p))
    {
        return sample(target, root, depth + 1);
    }
    if let Some(v) = o.get("const") {
        return v.clone();
    }
    if let Some(v) = o.get("default") {
        return v.clone();
    }
    if let Some(v) = o.get("examples").and_then(Value::as_array).and_then(|a| a.first()) {
        return v.clone();
    }
    if let Some(v) = o.get("enum").and_then(Value::as_array).and_then(|a| a.first()) {
        return v.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(list) = o.get(key).and_then(Value::as_array) {
            let pick = list
                .iter()
                .find(|x| x.get("type").and_then(Value::as_str) != Some("null"))
                .or(list.first());
            if let Some(x) = pick {
                return sample(x, root, depth + 1);
            }
        }
    }
    let ty = match o.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if o.contains_key("properties") => "object",
        _ => "string",
    };
    let num = |k: &str| o.get(k).and_then(Value::as_f64);
    match ty {
        "object" => {
            let mut m = Map::new();
            let props = o.get("properties").and_then(Value::as_object);
            for name in o
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let v = props
                    .and_then(|p| p.get(name))
                    .map(|p| sample(p, root, depth + 1))
                    .unwrap_or(json!("sample"));
                m.insert(name.to_owned(), v);
            }
            Value::Object(m)
        }
        "array" => {
            let n = o
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1)
                .min(o.get("maxItems").and_then(Value::as_u64).unwrap_or(u64::MAX));
            let item = o
                .get("items")
                .map(|i| sample(i, root, depth + 1))
                .unwrap_or(json!("sample"));
            Value::Array(vec![item; n as usize])
        }
        "integer" | "number" => {
            let lo = num("minimum").or_else(|| num("exclusiveMinimum").map(|x| x.floor() + 1.0));
            let hi = num("maximum").or_else(|| num("exclusiveMaximum").map(|x| x.ceil() - 1.0));
            let x = match (lo, hi) {
                (Some(l), _) => l.max(1.0).min(hi.unwrap_or(f64::MAX)).max(l),
                (None, Some(h)) if h < 1.0 => h,
                _ => 1.0,
            };
            if ty == "integer" {
                json!(x.ceil() as i64)
            } else {
                json!(x)
            }
        }
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => {
            let text = match o.get("format").and_then(Value::as_str) {
                Some("date-time") => "2024-01-01T00:00:00Z",
                Some("date") => "2024-01-01",
                Some("time") => "00:00:00Z",
                Some("email") => "ada@example.com",
                Some("uri" | "url") => "https://example.com/",
                Some("uuid") => "00000000-0000-4000-8000-000000000000",
                _ => "sample",
            };
            let min = o.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max = o
                .get("maxLength")
                .and_then(Value::as_u64)
                .map(|m| m as usize)
                .unwrap_or(usize::MAX);
            let mut t: String = text.to_owned();
            while t.chars().count() < min {
                t.push('x');
            }
            Value::String(t.chars().take(max).collect())
        }
    }
}

/// Every `format` keyword of a schema, as `"date-time" at /properties/when` (nesting bounded).
fn formats_in(schema: &Value, at: String, out: &mut Vec<String>, depth: usize) {
    let Value::Object(m) = schema else { return };
    if depth > 32 || out.len() >= 20 {
        return;
    }
    if let Some(Value::String(f)) = m.get("format") {
        out.push(format!("{f:?} at {}", if at.is_empty() { "/" } else { &at }));
    }
    for (k, v) in m {
        match (k.as_str(), v) {
            ("properties" | "patternProperties" | "$defs" | "definitions", Value::Object(props)) => {
                for (name, sub) in props {
                    formats_in(sub, format!("{at}/{k}/{name}"), out, depth + 1);
                }
            }
            ("items" | "additionalProperties" | "not" | "contains" | "propertyNames", sub) => {
                formats_in(sub, format!("{at}/{k}"), out, depth + 1)
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(subs)) => {
                for (i, sub) in subs.iter().enumerate() {
                    formats_in(sub, format!("{at}/{k}/{i}"), out, depth + 1);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_fill_required_properties_only() {
        let s = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "examples": ["tokyo"]},
                "days": {"type": "integer", "minimum": 2, "maximum": 7},
                "unit": {"enum": ["c", "f"]},
                "opt": {"type": "string"},
                "where": {"$ref": "#/$defs/Where"},
                "tags": {"type": "array", "items": {"type": "string", "minLength": 8}, "minItems": 2}
            },
            "required": ["city", "days", "unit", "where", "tags"],
            "$defs": {"Where": {"type": "object", "properties": {"lat": {"type": ["number", "null"]}}, "required": ["lat"]}}
        });
        assert_eq!(
            sample_args(&s),
            json!({"city": "tokyo", "days": 2, "unit": "c", "where": {"lat": 1.0}, "tags": ["samplexx", "samplexx"]})
        );
        assert_eq!(sample_args(&json!({"type": "object"})), json!({}));
        assert_eq!(
            sample(&json!({"type": "integer", "maximum": -3}), &json!({}), 0),
            json!(-3)
        );
        assert_eq!(
            sample(&json!({"type": "integer", "exclusiveMinimum": 5}), &json!({}), 0),
            json!(6)
        );
    }
}
