//! Arguments are checked against the action's `input_schema` before any process starts.

use crate::error::{CallError, ErrorCode};
use crate::manifest::Action;
use serde_json::{Map, Value};

/// Check `args` against the action's input schema. The error names the JSON pointer, the value found and what
/// was expected, for every problem (at most 10).
pub fn check_args(tool: &str, action: &Action, args: &Map<String, Value>) -> Result<(), CallError> {
    let validator = jsonschema::validator_for(&action.input_schema).map_err(|e| {
        CallError::new(ErrorCode::UnknownAction, format!("{tool}.{}: its input_schema does not compile: {e}", action.name))
            .hint(format!("fix the tool's --schemas; `animaworks-tool doctor` shows every problem"))
    })?;
    let instance = Value::Object(args.clone());
    let problems: Vec<Value> = validator
        .iter_errors(&instance)
        .take(10)
        .map(|e| {
            let pointer = e.instance_path().to_string();
            let mut shown = e.instance().to_string();
            if shown.len() > 200 {
                let cut = (0..=200).rev().find(|i| shown.is_char_boundary(*i)).unwrap_or(0);
                shown.truncate(cut);
                shown.push('…');
            }
            serde_json::json!({"pointer": pointer, "value": shown, "expected": e.to_string()})
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    let first = &problems[0];
    let at = first["pointer"].as_str().filter(|p| !p.is_empty()).unwrap_or("/ (the arguments object)");
    let message = format!(
        "invalid arguments for {tool}.{}: at {at}: {}{}",
        action.name,
        first["expected"].as_str().unwrap_or_default(),
        if problems.len() > 1 { format!(" (and {} more problems)", problems.len() - 1) } else { String::new() }
    );
    Err(CallError::new(ErrorCode::InvalidArguments, message)
        .hint(format!("see `animaworks-tool {tool} {} --help` for the arguments", action.name))
        .with("pointer", first["pointer"].clone())
        .with("problems", Value::Array(problems)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn action(schema: Value) -> Action {
        Action {
            name: "a".into(),
            schema_name: "t_a".into(),
            description: String::new(),
            input_schema: schema,
            output_schema: None,
            profile: Default::default(),
        }
    }

    #[test]
    fn names_pointer_value_and_expectation() {
        let a = action(json!({"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}));
        assert!(check_args("t", &a, json!({"n": 3}).as_object().unwrap()).is_ok());
        let e = check_args("t", &a, json!({"n": 0}).as_object().unwrap()).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert_eq!(e.detail("pointer").unwrap(), "/n");
        assert!(e.message.contains("/n") && e.message.contains("minimum"), "{}", e.message);
        let e = check_args("t", &a, json!({}).as_object().unwrap()).unwrap_err();
        assert!(e.message.contains("\"n\" is a required property"), "{}", e.message);
    }
}
