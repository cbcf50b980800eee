//! Pins the wire: protocol.schema.json, the examples in protocol.md, the Rust wire types and the error codes
//! must agree. A change to any of them without the others fails here.

use awt_core::error::{CallError, Detail, ErrorCode};
use awt_protocol::{Event, Level, Request, RequestContext, SchemasDoc, ToolErrorBody};
use serde_json::{json, Value};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema() -> Value {
    serde_json::from_str(&std::fs::read_to_string(root().join("protocol.schema.json")).unwrap()).unwrap()
}

fn validator(def: &str) -> jsonschema::Validator {
    let mut s = schema();
    s["$ref"] = json!(format!("#/$defs/{def}"));
    jsonschema::validator_for(&s).unwrap_or_else(|e| panic!("protocol.schema.json does not compile: {e}"))
}

fn assert_valid(def: &str, v: &Value) {
    let val = validator(def);
    let errors: Vec<String> = val
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{def} rejects {v}: {errors:?}");
}

fn assert_invalid(def: &str, v: &Value) {
    assert!(
        !validator(def).is_valid(v),
        "{def} accepts {v}, which the protocol forbids"
    );
}

/// Every JSON example in protocol.md, each validated against the message it shows.
#[test]
fn examples_in_protocol_md_validate() {
    let doc = std::fs::read_to_string(root().join("protocol.md")).unwrap();
    let mut checked = 0;
    let mut in_block = false;
    let mut block = String::new();
    for line in doc.lines() {
        if line.starts_with("```") {
            if in_block {
                let text = block.trim();
                let values: Vec<Value> = match serde_json::from_str::<Value>(text) {
                    Ok(v) => vec![v],
                    Err(_) => text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect(),
                };
                for v in values {
                    let def = if v.is_array() {
                        "schemasShort"
                    } else if v.get("actions").is_some() {
                        "schemasFull"
                    } else if v.get("context").is_some() {
                        "request"
                    } else if v.get("error").is_some() {
                        "runnerError"
                    } else if v.get("type").is_some() {
                        "event"
                    } else if v.get("env").is_some() {
                        "credential"
                    } else {
                        continue;
                    };
                    assert_valid(def, &v);
                    checked += 1;
                }
                block.clear();
            }
            in_block = !in_block;
        } else if in_block {
            block.push_str(line);
            block.push('\n');
        }
    }
    assert!(checked >= 8, "only {checked} examples found in protocol.md");
}

#[test]
fn rust_wire_types_validate() {
    let events = [
        Event::progress(1.0, Some(3.0), Some("x".into())),
        Event::log(Level::Warning, "w"),
        Event::Partial {
            data: json!({"a": 1}),
            call_id: Some("c-1".into()),
        },
        Event::result(json!([1, "ü"])),
        Event::Error {
            error: ToolErrorBody {
                code: Some("c".into()),
                message: "m".into(),
                hint: Some("h".into()),
                data: None,
            },
            call_id: None,
        },
    ];
    for e in &events {
        assert_valid("event", &serde_json::to_value(e).unwrap());
    }
    let req = Request {
        name: "t_a".into(),
        args: Default::default(),
        context: RequestContext {
            call_id: "c-1".into(),
            tool: "t".into(),
            action: "a".into(),
            protocol: 1,
            ..Default::default()
        },
    };
    assert_valid("request", &serde_json::to_value(&req).unwrap());
    let doc: SchemasDoc =
        serde_json::from_value(json!({"actions":[{"name":"a","profile":{"gated":true,"hints":{"read_only":true}}}]}))
            .unwrap();
    assert_valid("schemasFull", &serde_json::to_value(&doc).unwrap());
    let sandbox = json!({"read": ["$ANIMA_DIR/notes", "/usr/share/dict"], "write": ["$TMP"], "net": ["api.example.com:443"], "exec": ["$TOOL_DIR/bin"]});
    let doc: SchemasDoc =
        serde_json::from_value(json!({"actions":[{"name":"a","profile":{"sandbox": sandbox}}]})).unwrap();
    let back = serde_json::to_value(&doc).unwrap();
    assert_eq!(
        back["actions"][0]["profile"]["sandbox"], sandbox,
        "the sandbox declaration round-trips"
    );
    assert_valid("schemasFull", &back);
    for net in [json!(true), json!(false)] {
        let doc: SchemasDoc =
            serde_json::from_value(json!({"actions":[{"name":"a","profile":{"sandbox": {"net": net}}}]})).unwrap();
        assert_valid("schemasFull", &serde_json::to_value(&doc).unwrap());
    }
    // MCP annotations beside input_schema (§2.1): MCP's names, each absent unless declared.
    let ann = json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false});
    let doc: SchemasDoc = serde_json::from_value(json!({"actions":[{"name":"a","annotations": ann}]})).unwrap();
    let back = serde_json::to_value(&doc).unwrap();
    assert_eq!(back["actions"][0]["annotations"], ann, "annotations round-trip");
    assert_valid("schemasFull", &back);
    let doc: SchemasDoc =
        serde_json::from_value(json!({"actions":[{"name":"a","annotations": {"openWorldHint": true}}]})).unwrap();
    assert_eq!(
        serde_json::to_value(&doc).unwrap()["actions"][0]["annotations"],
        json!({"openWorldHint": true}),
        "an undeclared hint stays absent"
    );
    assert!(!serde_json::to_value(SchemasDoc::default())
        .unwrap()
        .to_string()
        .contains("annotations"));
    // The shim's mark of an AnimaWorks module (§2.1 `legacy`, which decides the §8 environment policy).
    let legacy: SchemasDoc = serde_json::from_value(json!({"actions": [], "cli": true, "legacy": true})).unwrap();
    assert!(legacy.legacy);
    let v = serde_json::to_value(&legacy).unwrap();
    assert_eq!(v["legacy"], true);
    assert_valid("schemasFull", &v);
    assert_invalid("schemasFull", &json!({"actions": [], "legacy": "yes"}));
}

#[test]
fn the_schema_refuses_what_the_protocol_forbids() {
    assert_invalid("event", &json!({"type": "progress"}));
    assert_invalid("event", &json!({"type": "error", "code": "x"}));
    assert_invalid("event", &json!({"progress": 1}));
    assert_invalid("request", &json!({"name": "t_a", "args": {}}));
    assert_invalid("schemasShort", &json!([{"name": "has.dot"}]));
    assert_invalid("action", &json!({"name": "a", "annotations": {"readOnlyHint": "yes"}}));
    assert_invalid(
        "runnerError",
        &json!({"error": {"code": "no_such_code", "message": "x"}}),
    );
    assert_valid("event", &json!({"type": "from_the_future", "anything": 1}));
    for bad in [
        json!({"read": ["relative/path"]}),
        json!({"write": ["$TMP/../etc"]}),
        json!({"read": ["$NOPE/x"]}),
        json!({"net": ["no-port"]}),
        json!({"net": ["host:70000"]}),
        json!({"net": "yes"}),
    ] {
        assert_invalid("profile", &json!({"sandbox": bad}));
    }
    // `$CWD` (the caller's working directory) is a placeholder of §2.4 (issue 20).
    assert_valid("profile", &json!({"sandbox": {"write": ["$CWD", "$CWD/out"]}}));
    assert!(
        awt_core::sandbox::validate(&serde_json::from_value(json!({"write": ["$CWD", "$CWD/out"]})).unwrap())
            .is_empty()
    );
    assert_invalid(
        "runnerError",
        &json!({"error": {"code": "unknown_tool", "message": "x", "did_you_mean": ["a"]}}),
    );
}

/// protocol.md §6's table, the code and every error the runner can print agree.
#[test]
fn error_codes_match_protocol_md() {
    let doc = std::fs::read_to_string(root().join("protocol.md")).unwrap();
    for code in ErrorCode::ALL {
        let row = format!("| `{}` | {} |", code.as_str(), code.exit_code());
        assert!(doc.contains(&row), "protocol.md §6 lacks the row {row}");
        let e = CallError::new(code, "m")
            .hint("h")
            .with(Detail::Tool, "t")
            .with(Detail::DurationMs, 3u64)
            .with(Detail::DidYouMean, "t2");
        assert_valid("runnerError", &e.to_json());
    }
}
