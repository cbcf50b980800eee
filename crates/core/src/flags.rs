//! Flags generated from an action's `input_schema`: `--name value` for strings, numbers, integers and enums;
//! `--flag` / `--no-flag` for booleans; repeated flags (or a JSON array) for arrays; JSON for objects. `--json`
//! gives the whole arguments object (`'{…}'`, `@file` or `-` for stdin); flags given with it override its keys.

use crate::error::{CallError, Detail, ErrorCode};
use crate::manifest::ActionSpec;
use crate::names::canon;
use serde_json::{Map, Value};
use std::io::Read;

/// The runner's own flags, accepted after the action.
#[derive(Debug, Default, Clone)]
pub struct RunnerFlags {
    pub json: Option<String>,
    pub timeout: Option<f64>,
    pub max_output: Option<u64>,
    pub events: bool,
    pub help: bool,
    /// Where a result's image, audio and resource blocks are written (protocol.md §5.2).
    pub save_content: Option<std::path::PathBuf>,
}

pub const RUNNER_FLAGS: &[&str] = &["json", "timeout", "max-output", "events", "save-content", "help"];

fn usage(msg: String, hint: String) -> CallError {
    CallError::new(ErrorCode::Usage, msg).hint(hint)
}

/// The JSON type a property takes (first non-null of `type`), if declared.
pub fn prop_type(schema: &Value) -> Option<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => {
            if schema.get("enum").is_some() {
                Some("string")
            } else {
                None
            }
        }
    }
}

/// Read `--json` text: a literal, `@file`, or `-` for stdin.
pub fn read_json_arg(src: &str) -> Result<Map<String, Value>, CallError> {
    let text = if src == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| {
            usage(
                format!("--json -: cannot read stdin: {e}"),
                "pipe a JSON object to stdin".into(),
            )
        })?;
        s
    } else if let Some(path) = src.strip_prefix('@') {
        std::fs::read_to_string(path).map_err(|e| {
            usage(
                format!("--json @{path}: cannot read the file: {e}"),
                "check the path".into(),
            )
        })?
    } else {
        src.to_owned()
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(CallError::new(
            ErrorCode::InvalidArguments,
            format!("--json must be a JSON object of arguments, not {}", kind(&other)),
        )
        .hint("e.g. --json '{\"city\": \"Tokyo\"}'")),
        Err(e) => Err(
            CallError::new(ErrorCode::InvalidArguments, format!("--json is not valid JSON: {e}"))
                .hint("quote it for the shell: --json '{\"key\": \"value\"}'"),
        ),
    }
}

/// `a string`, `an object`, …: what a JSON value is, for messages.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn convert(flag: &str, ty: Option<&str>, item_schema: Option<&Value>, raw: &str) -> Result<Value, CallError> {
    let bad = |what: &str| {
        CallError::new(
            ErrorCode::InvalidArguments,
            format!("--{flag} expects {what}, got {raw:?}"),
        )
        .hint(format!("give --{flag} {what}"))
        .with(Detail::Pointer, format!("/{flag}"))
    };
    match ty {
        Some("integer") => raw
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| bad("an integer")),
        Some("number") => {
            let n: f64 = raw.trim().parse().map_err(|_| bad("a number"))?;
            Ok(serde_json::Number::from_f64(n)
                .map(Value::Number)
                .ok_or_else(|| bad("a finite number"))?)
        }
        Some("boolean") => match raw {
            "true" | "yes" | "1" => Ok(Value::Bool(true)),
            "false" | "no" | "0" => Ok(Value::Bool(false)),
            _ => Err(bad("true or false")),
        },
        Some("object") => serde_json::from_str::<Value>(raw).map_err(|_| bad("a JSON object")),
        Some("array") => {
            let it = item_schema.and_then(prop_type);
            convert(flag, it, None, raw)
        }
        Some("string") => Ok(Value::String(raw.to_owned())),
        _ => Ok(serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))),
    }
}

/// Parse the words after `<tool> <action>` into arguments and runner flags. Arguments are not validated here
/// (the schema check follows); flags that match no property are refused with the list of valid ones.
pub fn parse(action: &ActionSpec, words: &[String]) -> Result<(Map<String, Value>, RunnerFlags), CallError> {
    let props = action
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let find = |flag: &str| -> Option<(String, Value)> {
        let want = canon(flag);
        props
            .iter()
            .find(|(k, _)| canon(k) == want)
            .map(|(k, v)| (k.clone(), v.clone()))
    };
    let mut flags = RunnerFlags::default();
    let mut args = Map::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        i += 1;
        if w == "-h" || w == "--help" {
            flags.help = true;
            continue;
        }
        let Some(body) = w.strip_prefix("--") else {
            return Err(usage(
                format!("unexpected argument {w:?}: arguments are given as --name value"),
                format!("see `animaworks-tool <tool> {} --help`", action.name),
            ));
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (body.to_owned(), None),
        };
        let mut take_value = |what: &str| -> Result<String, CallError> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            if i < words.len() {
                i += 1;
                return Ok(words[i - 1].clone());
            }
            Err(usage(
                format!("--{name} needs {what}"),
                format!("give it as --{name} VALUE"),
            ))
        };
        match name.as_str() {
            "json" => {
                flags.json = Some(take_value("a JSON object, @file or -")?);
                continue;
            }
            "timeout" => {
                let v = take_value("a number of seconds")?;
                let t: f64 = v
                    .parse()
                    .ok()
                    .filter(|t: &f64| crate::limits::seconds(*t, "--timeout").is_ok())
                    .ok_or_else(|| {
                        usage(
                            format!(
                                "--timeout expects a number of seconds above 0 and at most {}, got {v:?}",
                                crate::limits::MAX_SECONDS as u64
                            ),
                            "e.g. --timeout 30".into(),
                        )
                    })?;
                flags.timeout = Some(t);
                continue;
            }
            "max-output" | "max_output" => {
                let v = take_value("a number of bytes")?;
                let n = v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n <= crate::limits::MAX_OUTPUT_CEILING)
                    .ok_or_else(|| {
                        usage(
                            format!(
                                "--max-output expects a number of bytes from 0 to {} (1 GiB), got {v:?}",
                                crate::limits::MAX_OUTPUT_CEILING
                            ),
                            "e.g. --max-output 1048576".into(),
                        )
                    })?;
                flags.max_output = Some(n);
                continue;
            }
            "events" => {
                flags.events = true;
                continue;
            }
            "save-content" | "save_content" => {
                flags.save_content = Some(take_value("a folder")?.into());
                continue;
            }
            _ => {}
        }
        let (negated, lookup) = match (find(&name), name.strip_prefix("no-")) {
            (Some(p), _) => (false, Some(p)),
            (None, Some(rest)) => (true, find(rest).filter(|(_, s)| prop_type(s) == Some("boolean"))),
            (None, None) => (false, None),
        };
        let Some((key, schema)) = lookup else {
            let mut valid: Vec<String> = props.keys().map(|k| format!("--{}", k.replace('_', "-"))).collect();
            valid.extend(RUNNER_FLAGS.iter().map(|f| format!("--{f}")));
            let flag = format!("--{name}");
            let near = crate::suggest::close(&flag, valid.iter().map(String::as_str));
            let mean = crate::suggest::did_you_mean(&near)
                .map(|d| format!("{d} "))
                .unwrap_or_default();
            return Err(usage(
                format!("unknown option {flag} for {}; valid: {}", action.name, valid.join(", ")),
                format!("{mean}see `animaworks-tool <tool> {} --help`", action.name),
            ));
        };
        let ty = prop_type(&schema);
        let value = if ty == Some("boolean") {
            if negated {
                Value::Bool(false)
            } else if let Some(v) = &inline {
                convert(&name, ty, None, v)?
            } else if i < words.len() && matches!(words[i].as_str(), "true" | "false") {
                i += 1;
                Value::Bool(words[i - 1] == "true")
            } else {
                Value::Bool(true)
            }
        } else if ty == Some("array") {
            let raw = take_value("a value")?;
            let items = schema.get("items");
            let new: Vec<Value> = match serde_json::from_str::<Value>(&raw) {
                Ok(Value::Array(a)) if raw.trim_start().starts_with('[') => a,
                _ => vec![convert(&name, ty, items, &raw)?],
            };
            let entry = args.entry(key.clone()).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(a) = entry {
                a.extend(new);
            }
            continue;
        } else {
            let raw = take_value("a value")?;
            convert(&name, ty, None, &raw)?
        };
        args.insert(key, value);
    }
    if let Some(src) = &flags.json {
        let mut base = read_json_arg(src)?;
        for (k, v) in args {
            base.insert(k, v);
        }
        return Ok((base, flags));
    }
    Ok((args, flags))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn action() -> ActionSpec {
        ActionSpec {
            name: "add".into(),
            schema_name: "t_add".into(),
            title: None,
            description: String::new(),
            input_schema: json!({"type":"object","properties":{
                "title":{"type":"string"},"count":{"type":"integer"},"ratio":{"type":"number"},
                "dry_run":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}},
                "meta":{"type":"object"},"mode":{"enum":["a","b"]}}}),
            output_schema: None,
            profile: Default::default(),
            annotations: None,
        }
    }

    fn w(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_by_type() {
        let (a, f) = parse(
            &action(),
            &w(&[
                "--title",
                "hi",
                "--count=3",
                "--ratio",
                "0.5",
                "--dry-run",
                "--tags",
                "x",
                "--tags",
                "y",
                "--meta",
                "{\"k\":1}",
                "--mode",
                "b",
                "--timeout",
                "5",
                "--events",
            ]),
        )
        .unwrap();
        assert_eq!(
            Value::Object(a),
            json!({"title":"hi","count":3,"ratio":0.5,"dry_run":true,"tags":["x","y"],"meta":{"k":1},"mode":"b"})
        );
        assert_eq!(f.timeout, Some(5.0));
        assert!(f.events);
        let (a, _) = parse(&action(), &w(&["--no-dry-run", "--tags", "[\"a\",\"b\"]"])).unwrap();
        assert_eq!(Value::Object(a), json!({"dry_run":false,"tags":["a","b"]}));
    }

    #[test]
    fn errors_name_the_flag() {
        let e = parse(&action(), &w(&["--count", "x"])).unwrap_err();
        assert!(e.message.contains("--count expects an integer"), "{}", e.message);
        let e = parse(&action(), &w(&["--titel", "x"])).unwrap_err();
        assert!(
            e.hint.as_deref().unwrap().contains("did you mean \"--title\"?"),
            "{:?}",
            e.hint
        );
        let e = parse(&action(), &w(&["--nope", "1"])).unwrap_err();
        assert!(
            e.message.contains("unknown option --nope") && e.message.contains("--title"),
            "{}",
            e.message
        );
        let e = parse(&action(), &w(&["stray"])).unwrap_err();
        assert_eq!(e.code, ErrorCode::Usage);
        let (a, _) = parse(
            &action(),
            &w(&["--json", "{\"title\":\"t\",\"count\":1}", "--count", "2"]),
        )
        .unwrap();
        assert_eq!(Value::Object(a), json!({"title":"t","count":2}));
    }
}
