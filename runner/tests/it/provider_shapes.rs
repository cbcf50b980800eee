//! `schemas` in the providers' shapes (issue 21, item 10), checked against their documented rules: OpenAI's strict
//! mode, the Responses API's function tool, Gemini's FunctionDeclaration, and the 64-character names of
//! OpenAI, Anthropic and Gemini, which `use-tool` maps back when the model calls a shortened one.

use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;

fn schemas(w: &World, args: &[&str]) -> (Value, String) {
    let mut full = vec!["schemas"];
    full.extend_from_slice(args);
    let o = w.run(&full);
    assert!(o.status.success(), "{}", stderr(&o));
    (json(&o), stderr(&o))
}

/// The bundled examples whose schemas carry a `default`: bash-weather and node-counter.
fn examples_world() -> World {
    let w = World::new();
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for (from, name) in [
        ("bash-weather/weather.sh", "weather.sh"),
        ("node-counter/counter.js", "counter.js"),
    ] {
        w.tool(&w.common(), name, &std::fs::read_to_string(ex.join(from)).unwrap());
    }
    w
}

/// Every place in `v` that holds `key`.
fn has_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.contains_key(key) || m.values().any(|x| has_key(x, key)),
        Value::Array(a) => a.iter().any(|x| has_key(x, key)),
        _ => false,
    }
}

#[test]
fn the_bundled_examples_are_strict_only_when_transformed() {
    use awt_llm::providers::strict_check;
    let w = examples_world();
    // Closed and with every property required, their `default` alone still keeps them from strict mode.
    let (v, _) = schemas(&w, &["--format", "anthropic"]);
    for t in v.as_array().unwrap().iter().filter(|t| t["name"] != "weather_cities") {
        let mut s = t["input_schema"].clone();
        s["additionalProperties"] = json!(false);
        s["required"] = json!(s["properties"].as_object().unwrap().keys().collect::<Vec<_>>());
        let why = strict_check(&s).unwrap_err().to_string();
        assert!(
            why.contains("default") || why.contains("examples"),
            "{}: {why}",
            t["name"]
        );
        s.pointer_mut("/properties")
            .unwrap()
            .as_object_mut()
            .unwrap()
            .values_mut()
            .for_each(|p| {
                p.as_object_mut().unwrap().retain(|k, _| k != "examples");
            });
        assert!(
            strict_check(&s).unwrap_err().to_string().contains("default"),
            "{}",
            t["name"]
        );
    }
    for format in ["openai", "openai-responses"] {
        let (v, err) = schemas(&w, &["--format", format]);
        let tools = v.as_array().unwrap();
        assert_eq!(tools.len(), 3, "{v}");
        let fun = |t: &Value| {
            if format == "openai" {
                t["function"].clone()
            } else {
                t.clone()
            }
        };
        for t in tools {
            assert_eq!(fun(t)["strict"], false, "{format}: {t}");
        }
        assert!(
            err.contains("not strict: weather_forecast") && err.contains("not strict: counter_count"),
            "{err}"
        );

        let (v, _) = schemas(&w, &["--format", format, "--strict"]);
        for t in v.as_array().unwrap() {
            let f = fun(t);
            assert_eq!(f["strict"], true, "{format}: {t}");
            let p = &f["parameters"];
            // OpenAI's rules: closed objects, every property required, none of the keywords it refuses.
            assert_eq!(p["additionalProperties"], false);
            let props: Vec<&String> = p["properties"].as_object().unwrap().keys().collect();
            let required: Vec<&str> = p["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            assert_eq!(props.len(), required.len(), "{p}");
            for k in ["default", "examples", "minLength"] {
                assert!(!has_key(p, k), "{format}: {k} in {p}");
            }
        }
        let forecast = v
            .as_array()
            .unwrap()
            .iter()
            .map(fun)
            .find(|f| f["name"] == "weather_forecast")
            .unwrap();
        assert_eq!(
            forecast["parameters"]["properties"]["days"]["description"],
            "How many days (default: 3)"
        );
        if format == "openai-responses" {
            // FunctionToolParam: flat, type "function", name, parameters, strict.
            let keys: Vec<&String> = forecast.as_object().unwrap().keys().collect();
            assert_eq!(keys.len(), 5, "{forecast}");
            assert_eq!(forecast["type"], "function");
        }
    }
}

/// A tool whose schemas Gemini's subset cannot all say, and a schema name longer than 64 characters.
const SHAPES_TOOL: &str = r##"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol": 1, "actions": [
 {"name": "plain", "input_schema": {"type": "object", "properties": {"q": {"type": ["string", "null"]}, "k": {"enum": ["a", "b"]}}}},
 {"name": "reffy", "input_schema": {"type": "object", "properties": {"r": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}}},
 {"name": "none"},
 {"name": "a_very_long_action_name_that_goes_on_and_on_past_what_providers_take_for_names", "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}}}
]}
JSON
exit 0; fi
req=$(cat); printf '%s\n' "$req" | sed -E 's/.*"args":(\{[^}]*\}).*/\1/'
"##;

#[test]
fn gemini_declarations_use_the_schema_subset_or_the_json_schema() {
    let w = World::new();
    w.tool(&w.common(), "shapes.sh", SHAPES_TOOL);
    let (v, err) = schemas(&w, &["--format", "gemini"]);
    let by = |n: &str| v.as_array().unwrap().iter().find(|t| t["name"] == n).unwrap().clone();
    let plain = by("shapes_plain");
    assert_eq!(plain["parameters"]["type"], "OBJECT");
    assert_eq!(
        plain["parameters"]["properties"]["q"],
        json!({"type": "STRING", "nullable": true})
    );
    assert_eq!(plain["parameters"]["properties"]["k"]["type"], "STRING");
    assert!(plain.get("parametersJsonSchema").is_none());
    let reffy = by("shapes_reffy");
    assert!(reffy.get("parameters").is_none(), "{reffy}");
    assert_eq!(reffy["parametersJsonSchema"]["properties"]["r"]["$ref"], "#/$defs/x");
    assert!(
        err.contains("as parametersJsonSchema: shapes_reffy") && err.contains("$ref"),
        "{err}"
    );
    // No arguments: no parameters (Gemini refuses an OBJECT without properties).
    let none = by("shapes_none");
    assert!(
        none.get("parameters").is_none() && none.get("parametersJsonSchema").is_none(),
        "{none}"
    );
    // FunctionDeclaration's fields only; Gemini's Schema has no JSON Schema keywords left.
    for t in v.as_array().unwrap() {
        for k in t.as_object().unwrap().keys() {
            assert!(
                ["name", "description", "parameters", "parametersJsonSchema"].contains(&k.as_str()),
                "{t}"
            );
        }
        if let Some(p) = t.get("parameters") {
            for k in ["$ref", "$defs", "oneOf", "additionalProperties", "const"] {
                assert!(!has_key(p, k), "{k} in {p}");
            }
        }
    }
}

#[test]
fn the_bundled_examples_fit_geminis_schema() {
    let w = examples_world();
    let (v, err) = schemas(&w, &["--format", "gemini"]);
    assert!(!err.contains("parametersJsonSchema"), "{err}");
    let forecast = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "weather_forecast")
        .unwrap();
    assert_eq!(
        forecast["parameters"]["properties"]["days"],
        json!({"type": "INTEGER", "minimum": 1, "maximum": 7, "default": 3, "description": "How many days"})
    );
    assert_eq!(forecast["parameters"]["required"], json!(["city"]));
}

#[test]
fn a_name_past_64_characters_is_shortened_and_mapped_back() {
    let w = World::new();
    w.tool(&w.common(), "shapes.sh", SHAPES_TOOL);
    let long = "shapes_a_very_long_action_name_that_goes_on_and_on_past_what_providers_take_for_names";
    assert!(long.len() > 64);
    let mut given = Vec::new();
    for format in ["anthropic", "openai", "openai-responses", "gemini"] {
        let (v, err) = schemas(&w, &["--format", format]);
        let names: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                t["name"]
                    .as_str()
                    .or(t["function"]["name"].as_str())
                    .unwrap()
                    .to_owned()
            })
            .collect();
        for n in &names {
            // ^[a-zA-Z0-9_-]{1,64}$, and Gemini's: starts with a letter or `_`.
            assert!(
                n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "{n}"
            );
            assert!(n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'), "{n}");
        }
        let short = names
            .iter()
            .find(|n| n.starts_with("shapes_a_very_long"))
            .unwrap()
            .clone();
        assert_eq!(short.len(), 64);
        assert!(err.contains(&format!("shortened: {long} is given as {short}")), "{err}");
        given.push(short);
    }
    given.dedup();
    assert_eq!(
        given.len(),
        1,
        "one stable name for every 64-character provider: {given:?}"
    );
    assert_eq!(
        schemas(&w, &["--format", "anthropic"]).0,
        schemas(&w, &["--format", "anthropic"]).0
    );
    // MCP keeps the schema name (its names may have 128 characters).
    let (v, _) = schemas(&w, &["--format", "mcp"]);
    assert!(v.as_array().unwrap().iter().any(|t| t["name"] == long), "{v}");

    // The model calls the shortened name: Anthropic's tool_use, OpenAI's function call (arguments as a JSON
    // string), Gemini's functionCall.
    let short = &given[0];
    for call in [
        json!({"name": short, "input": {"x": 7}}),
        json!({"name": short, "arguments": "{\"x\": 7}"}),
        json!({"name": short, "args": {"x": 7}}),
        json!({"name": long, "args": {"x": 7}}),
    ] {
        let o = w.feed(&["use-tool"], &call.to_string());
        assert_eq!(o.status.code(), Some(0), "{call}: {}{}", stdout(&o), stderr(&o));
        assert_eq!(
            serde_json::from_str::<Value>(&stdout(&o)).unwrap(),
            json!({"x": 7}),
            "{call}"
        );
    }
    let o = w.feed(
        &["use-tool"],
        &json!({"name": "shapes_nothing_like_it", "args": {}}).to_string(),
    );
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("no permitted action has the function name"),
        "{}",
        stdout(&o)
    );
}

/// Runs runner/tests/provider_sdks/sdk_shapes.py with the provider SDKs (test.sh installs them, pinned).
fn sdk(args: &[&str], input: &str) -> Value {
    use std::process::{Command, Stdio};
    let has = Command::new("python3")
        .args(["-c", "import openai, anthropic, google.genai"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has,
        "the provider SDKs are needed: pip install -r runner/tests/mcp_client/requirements.txt (./test.sh does)"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/provider_sdks/sdk_shapes.py");
    let o = feed(Command::new("python3").arg(script).args(args), input.as_bytes());
    assert!(o.status.success(), "sdk_shapes.py {args:?}: {}", stderr(&o));
    json(&o)
}

/// A Python tool's pydantic schema: `Optional[int] = None` and `Optional[Model] = None`.
const PYDANTIC_TOOL: &str = r##"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol": 1, "actions": [
 {"name": "search", "input_schema": {"type": "object", "title": "Search", "properties": {
   "query": {"type": "string", "title": "Query"},
   "limit": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": null, "title": "Limit", "description": "At most this many"},
   "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": null, "title": "Tags"},
   "either": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}], "default": null}},
  "required": ["query"]}},
 {"name": "nested", "input_schema": {"type": "object", "properties": {
   "where": {"anyOf": [{"$ref": "#/$defs/Place"}, {"type": "null"}], "default": null}},
  "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}}
]}
JSON
exit 0; fi
req=$(cat); printf '%s\n' "$req" | sed -E 's/.*"args":(\{[^}]*\}).*/\1/'
"##;

#[test]
fn geminis_optional_is_nullable_in_its_schema() {
    let w = World::new();
    w.tool(&w.common(), "py.sh", PYDANTIC_TOOL);
    let (v, err) = schemas(&w, &["--format", "gemini"]);
    let by = |n: &str| v.as_array().unwrap().iter().find(|t| t["name"] == n).unwrap().clone();
    let search = by("py_search");
    assert!(search.get("parametersJsonSchema").is_none(), "{search}\n{err}");
    let p = &search["parameters"]["properties"];
    assert_eq!(
        p["limit"],
        json!({"type": "INTEGER", "minimum": 1, "nullable": true, "default": null, "title": "Limit",
            "description": "At most this many"})
    );
    assert_eq!(
        p["tags"],
        json!({"type": "ARRAY", "items": {"type": "STRING"}, "nullable": true, "default": null, "title": "Tags"})
    );
    assert_eq!(
        p["either"],
        json!({"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}], "nullable": true, "default": null})
    );
    // What the subset truly cannot say still falls back: a `$ref`.
    let nested = by("py_nested");
    assert!(nested.get("parameters").is_none(), "{nested}");
    assert!(
        err.contains("as parametersJsonSchema: py_nested") && err.contains("$ref"),
        "{err}"
    );
    // Gemini's own SDK takes every declaration, and reads the nullable ones as such.
    let checked = sdk(&["check", "gemini"], &v.to_string());
    assert_eq!(checked["ok"], 2);
    assert_eq!(checked["nullable"], json!(["either", "limit", "tags"]), "{checked}");
}

#[test]
fn anthropic_strict_is_given_with_strict_and_the_sdk_takes_it() {
    let w = examples_world();
    w.tool(&w.common(), "shapes.sh", SHAPES_TOOL);
    let (plain, _) = schemas(&w, &["--format", "anthropic"]);
    assert!(!has_key(&plain, "strict"), "without --strict nothing changes: {plain}");
    let (v, err) = schemas(&w, &["--format", "anthropic", "--strict"]);
    let tools = v.as_array().unwrap();
    let by = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    for t in tools {
        assert!(t["strict"].is_boolean(), "{t}");
    }
    // Optional stays optional (Anthropic takes it); every object closed; `default` moved into the description.
    let s = by("shapes_plain");
    assert_eq!(s["strict"], true, "{s}\n{err}");
    assert_eq!(s["input_schema"]["additionalProperties"], false);
    assert!(s["input_schema"].get("required").is_none(), "{s}");
    assert_eq!(s["input_schema"]["properties"]["q"]["type"], json!(["string", "null"]));
    let cities = by("counter_count");
    assert_eq!(cities["strict"], true, "{cities}\n{err}");
    assert!(!has_key(&cities["input_schema"], "default"), "{cities}");
    // Numeric bounds are outside Anthropic's strict subset, and never dropped: not strict, and stderr says why.
    let forecast = by("weather_forecast");
    assert_eq!(forecast["strict"], false, "{forecast}");
    assert!(
        err.contains("not strict: weather_forecast: at /days: maximum is not supported in strict mode")
            || err.contains("not strict: weather_forecast: at /days: minimum is not supported in strict mode"),
        "{err}"
    );
    assert_eq!(forecast["input_schema"]["properties"]["days"]["minimum"], 1);
    // `$ref` is in the subset.
    assert_eq!(by("shapes_reffy")["strict"], true, "{err}");
    // Anthropic's own SDK type takes each tool as we give it.
    let checked = sdk(&["check", "anthropic"], &v.to_string());
    assert_eq!(checked["ok"], tools.len(), "{checked}");
}

/// The long action's schema name and the shortened name `schemas` gives it.
const LONG: &str = "shapes_a_very_long_action_name_that_goes_on_and_on_past_what_providers_take_for_names";

#[test]
fn function_calls_are_taken_in_the_wrappers_the_sdks_hand_back() {
    let w = World::new();
    w.tool(&w.common(), "shapes.sh", SHAPES_TOOL);
    let (v, _) = schemas(&w, &["--format", "openai"]);
    let short = v
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .find(|n| n.starts_with("shapes_a_very_long"))
        .unwrap();
    assert_ne!(short, LONG);
    let mut calls = vec![
        json!({"id": "call_abc", "type": "function", "function": {"name": short, "arguments": "{\"x\": 7}"}}),
        json!({"functionCall": {"id": "fc_1", "name": short, "args": {"x": 7}}}),
        json!({"function_call": {"name": LONG, "args": {"x": 7}}}),
    ];
    // As the SDKs' own classes dump them.
    let dumps = sdk(&["calls", &short], "");
    for k in ["openai", "gemini"] {
        calls.extend(dumps[k].as_array().unwrap().iter().cloned());
    }
    for call in &calls {
        let o = w.feed(&["use-tool"], &call.to_string());
        assert_eq!(o.status.code(), Some(0), "{call}: {}{}", stdout(&o), stderr(&o));
        assert_eq!(
            serde_json::from_str::<Value>(&stdout(&o)).unwrap(),
            json!({"x": 7}),
            "{call}"
        );
    }
    // --serve answers with the call's own id, so the answer goes back as that call's result.
    let mut s = w.serve();
    let a = s.ask(&calls[0]);
    assert_eq!((&a["status"], &a["id"]), (&json!("ok"), &json!("call_abc")), "{a}");
    let a = s.ask(&calls[1]);
    assert_eq!((&a["status"], &a["id"]), (&json!("ok"), &json!("fc_1")), "{a}");
    assert_eq!(
        serde_json::from_str::<Value>(a["result"].as_str().unwrap()).unwrap(),
        json!({"x": 7})
    );
    assert!(s.finish().success());
    // A wrapper of something else is still refused as a request.
    let o = w.feed(
        &["use-tool"],
        &json!({"type": "custom", "function": {"name": short}}).to_string(),
    );
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
}
