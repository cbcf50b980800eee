//! Arguments are checked against the action's `input_schema` before any process starts.

use crate::error::{CallError, Detail, ErrorCode};
use crate::manifest::ActionSpec;
use crate::policy::mask::Masker;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The most bytes of a bad value shown in an `invalid_arguments` problem.
const SHOWN_MAX: usize = 200;

/// Check `args` against the action's input schema. The error names the JSON pointer, the value found and what
/// was expected, for every problem (at most 10). Each value shown is masked with `masker` whole before it is cut,
/// so no fragment of a secret survives the cut.
///
/// Why two validators: compiling the first schema in a process costs about a millisecond (the jsonschema crate
/// builds its meta-schema validator), which would be most of a call's overhead. Most tool schemas use a small
/// subset of keywords, which [`quick`] checks exactly; it answers only when it is sure the arguments are valid,
/// and everything else — invalid arguments, keywords outside the subset — goes to the jsonschema crate.
///
/// The full validator runs on a thread of its own for at most `within` (the call's timeout): a schema whose
/// validation costs more than that is refused with `timeout`, and the runtime that called goes on serving.
pub fn check_args(
    tool: &str,
    action: &ActionSpec,
    args: &Map<String, Value>,
    masker: &Masker,
    within: Duration,
) -> Result<(), CallError> {
    let instance = Value::Object(args.clone());
    if quick(&action.input_schema, &instance) == Some(true) {
        return Ok(());
    }
    let schema = action.input_schema.clone();
    let found = bounded(schema_key(&schema), within, move || {
        let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
        Ok::<_, String>(
            validator
                .iter_errors(&instance)
                .take(10)
                .map(|e| (e.instance_path().to_string(), e.instance().to_string(), e.to_string()))
                .collect::<Vec<_>>(),
        )
    })
    .map_err(|o| o.error(tool, &action.name, "arguments", within))?;
    let found = found.map_err(|e| {
        CallError::new(
            ErrorCode::UnknownAction,
            format!("{tool}.{}: its input_schema does not compile: {e}", action.name),
        )
        .hint("fix the tool's --schemas; `animaworks-tool doctor` shows every problem")
    })?;
    let problems: Vec<Value> = found
        .into_iter()
        .map(|(pointer, instance, expected)| {
            let (mut shown, cut) = masker.head(&instance, SHOWN_MAX);
            if cut {
                shown.push('…');
            }
            serde_json::json!({"pointer": pointer, "value": shown, "expected": expected})
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    let first = &problems[0];
    let at = first["pointer"]
        .as_str()
        .filter(|p| !p.is_empty())
        .unwrap_or("/ (the arguments object)");
    let message = format!(
        "invalid arguments for {tool}.{}: at {at}: {}{}",
        action.name,
        first["expected"].as_str().unwrap_or_default(),
        if problems.len() > 1 {
            let more = problems.len() - 1;
            format!(" (and {more} more problem{})", if more == 1 { "" } else { "s" })
        } else {
            String::new()
        }
    );
    Err(CallError::new(ErrorCode::InvalidArguments, message)
        .hint(format!(
            "see `animaworks-tool {tool} {} --help` for the arguments",
            action.name
        ))
        .with(Detail::Tool, tool)
        .with(Detail::Action, action.name.clone())
        .with(Detail::Pointer, first["pointer"].clone())
        .with(Detail::Problems, Value::Array(problems)))
}

/// Check a result against the action's `output_schema`, when it declares one (protocol.md §5). A mismatch is
/// `bad_output` naming the JSON pointer, with the result kept in the error. Like [`check_args`], the full
/// validator runs for at most `within`.
pub fn check_output(tool: &str, action: &ActionSpec, result: &Value, within: Duration) -> Result<(), CallError> {
    let Some(schema) = &action.output_schema else {
        return Ok(());
    };
    if quick(schema, result) == Some(true) {
        return Ok(());
    }
    let (schema, instance) = (schema.clone(), result.clone());
    let first = bounded(schema_key(&schema), within, move || {
        // `format` is asserted here (not in input schemas): MCP clients validate `structuredContent` with format
        // assertions (the TypeScript SDK: AJV with ajv-formats), so a result they would refuse is `bad_output`.
        // Discovery refuses an output_schema that does not compile; nothing to hold the result to.
        let validator = jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .ok()?;
        let first = validator.iter_errors(&instance).next()?;
        Some((first.instance_path().to_string(), first.to_string()))
    })
    .map_err(|o| o.error(tool, &action.name, "result", within))?;
    let Some((pointer, first)) = first else {
        return Ok(());
    };
    let at = if pointer.is_empty() { "/ (the result)" } else { &pointer };
    Err(CallError::new(
        ErrorCode::BadOutput,
        format!(
            "{tool}.{}: the result does not match its output_schema: at {at}: {first}",
            action.name
        ),
    )
    .hint("fix the tool's result or its output_schema (`animaworks-tool check` calls every action)")
    .with(Detail::Pointer, pointer.clone())
    .with(Detail::Result, result.clone()))
}

/// Why a bounded validation gave no answer.
#[derive(Debug, PartialEq)]
pub(crate) enum Overrun {
    /// It did not end within the time it had; its thread runs on and is counted in [`RUNAWAY`].
    Late,
    /// A validation against the same schema still runs past an earlier call's deadline.
    StillRunning,
}

impl Overrun {
    fn error(&self, tool: &str, action: &str, what: &str, within: Duration) -> CallError {
        let message = match self {
            Overrun::Late => format!(
                "{tool}.{action}: checking the {what} against its schema took longer than the call's timeout ({:.3}s)",
                within.as_secs_f64()
            ),
            Overrun::StillRunning => format!(
                "{tool}.{action}: refused: a check of the {what} against the same schema is still running past an \
                 earlier call's timeout"
            ),
        };
        CallError::new(ErrorCode::Timeout, message)
            .hint("the action's schema is too costly to check: make it simpler (fewer nested allOf/anyOf/$ref)")
            .with(Detail::Tool, tool)
            .with(Detail::Action, action)
    }
}

/// Validations that overran their deadline and still run, by schema. Why: a thread cannot be stopped, so while
/// one runs, another against the same schema is refused at once rather than started beside it.
static RUNAWAY: Mutex<Option<HashMap<u64, usize>>> = Mutex::new(None);

fn schema_key(schema: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    schema.to_string().hash(&mut h);
    h.finish()
}

/// Run `work` (a validation against the schema of `key`) on a thread of its own and wait for it at most
/// `within`. The wait leaves the runtime's worker (`block_in_place` on a multi-thread runtime), so a long-lived
/// server goes on answering other requests while it waits. A panic in `work` is the caller's, as before.
pub(crate) fn bounded<T: Send + 'static>(
    key: u64,
    within: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Overrun> {
    if RUNAWAY
        .lock()
        .expect("runaway lock")
        .as_ref()
        .is_some_and(|m| m.contains_key(&key))
    {
        return Err(Overrun::StillRunning);
    }
    // (the answer, whether the waiter gave up on it)
    let slot = Arc::new((Mutex::new((None::<std::thread::Result<T>>, false)), Condvar::new()));
    let theirs = slot.clone();
    let spawned = std::thread::Builder::new().name("validate".into()).spawn(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        let (lock, done) = &*theirs;
        let mut s = lock.lock().expect("validation slot");
        if s.1 {
            forget_runaway(key);
        } else {
            s.0 = Some(out);
            done.notify_one();
        }
    });
    if spawned.is_err() {
        return Err(Overrun::Late);
    }
    let wait = || {
        let (lock, done) = &*slot;
        let s = lock.lock().expect("validation slot");
        let (mut s, _) = done
            .wait_timeout_while(s, within, |s| s.0.is_none())
            .expect("validation slot");
        match s.0.take() {
            Some(Ok(out)) => Ok(out),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => {
                s.1 = true;
                *RUNAWAY
                    .lock()
                    .expect("runaway lock")
                    .get_or_insert_with(HashMap::new)
                    .entry(key)
                    .or_default() += 1;
                Err(Overrun::Late)
            }
        }
    };
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(wait),
        _ => wait(),
    }
}

fn forget_runaway(key: u64) {
    let mut m = RUNAWAY.lock().expect("runaway lock");
    if let Some(m) = m.as_mut() {
        if let Some(n) = m.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                m.remove(&key);
            }
        }
    }
}

/// Keywords that constrain nothing (annotations), which [`quick`] may pass over.
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "default",
    "examples",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];

/// Largest integer an f64 holds exactly; past it, numeric keywords go to the full validator.
const EXACT: f64 = 9_007_199_254_740_992.0;

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|n| n.abs() <= EXACT)
}

/// JSON equality as JSON Schema means it: numbers by value (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> Option<bool> {
    Some(match (a, b) {
        (Value::Number(_), Value::Number(_)) => num(a)? == num(b)?,
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            for (p, q) in x.iter().zip(y) {
                if !same(p, q)? {
                    return Some(false);
                }
            }
            true
        }
        (Value::Object(x), Value::Object(y)) => {
            if x.len() != y.len() {
                return Some(false);
            }
            for (k, p) in x {
                match y.get(k) {
                    Some(q) if same(p, q)? => {}
                    _ => return Some(false),
                }
            }
            true
        }
        _ => a == b,
    })
}

fn has_type(v: &Value, t: &str) -> Option<bool> {
    Some(match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => match v {
            Value::Number(n) => n.is_i64() || n.is_u64() || num(v)?.fract() == 0.0,
            _ => false,
        },
        _ => return None,
    })
}

/// Validate `v` against `schema` when the schema uses only the subset of JSON Schema this function knows
/// (type, properties, required, additionalProperties, items, enum, const, the numeric bounds, the length and
/// count bounds, and annotations). `None` means "not sure": the caller asks the full validator.
pub fn quick(schema: &Value, v: &Value) -> Option<bool> {
    let s = match schema {
        Value::Bool(b) => return Some(*b),
        Value::Object(s) => s,
        _ => return None,
    };
    let mut ok = true;
    for (k, rule) in s {
        let pass = match k.as_str() {
            "type" => match rule {
                Value::String(t) => has_type(v, t)?,
                Value::Array(ts) => {
                    let mut any = false;
                    for t in ts {
                        any |= has_type(v, t.as_str()?)?;
                    }
                    any
                }
                _ => return None,
            },
            "enum" => {
                let mut any = false;
                for e in rule.as_array()? {
                    any |= same(v, e)?;
                }
                any
            }
            "const" => same(v, rule)?,
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => match v {
                Value::Number(_) => {
                    let (x, bound) = (num(v)?, num(rule)?);
                    match k.as_str() {
                        "minimum" => x >= bound,
                        "maximum" => x <= bound,
                        "exclusiveMinimum" => x > bound,
                        _ => x < bound,
                    }
                }
                _ => true,
            },
            "minLength" | "maxLength" => match v {
                Value::String(text) => {
                    let n = text.chars().count() as u64;
                    let bound = rule.as_u64()?;
                    if k == "minLength" {
                        n >= bound
                    } else {
                        n <= bound
                    }
                }
                _ => true,
            },
            "minItems" | "maxItems" => match v {
                Value::Array(a) => {
                    let bound = rule.as_u64()?;
                    if k == "minItems" {
                        a.len() as u64 >= bound
                    } else {
                        a.len() as u64 <= bound
                    }
                }
                _ => true,
            },
            "required" => match v {
                Value::Object(o) => {
                    let mut all = true;
                    for r in rule.as_array()? {
                        all &= o.contains_key(r.as_str()?);
                    }
                    all
                }
                _ => true,
            },
            "properties" => match v {
                Value::Object(o) => {
                    let mut all = true;
                    for (name, sub) in rule.as_object()? {
                        if let Some(x) = o.get(name) {
                            all &= quick(sub, x)?;
                        }
                    }
                    all
                }
                _ => true,
            },
            "additionalProperties" => match v {
                Value::Object(o) => {
                    let declared = s.get("properties").map(|p| p.as_object()).unwrap_or(None);
                    let mut all = true;
                    for (name, x) in o {
                        if declared.is_some_and(|d| d.contains_key(name)) {
                            continue;
                        }
                        all &= quick(rule, x)?;
                    }
                    all
                }
                _ => true,
            },
            "items" => match v {
                Value::Array(a) => {
                    let mut all = true;
                    for x in a {
                        all &= quick(rule, x)?;
                    }
                    all
                }
                _ => true,
            },
            other if ANNOTATIONS.contains(&other) => true,
            _ => return None,
        };
        ok &= pass;
    }
    Some(ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SOON: Duration = Duration::from_secs(60);

    #[test]
    fn output_formats_are_asserted() {
        let mut a = action(json!({"type": "object"}));
        a.output_schema =
            Some(json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}}));
        assert!(check_output("t", &a, &json!({"at": "2025-11-25T10:30:00Z"}), SOON).is_ok());
        let e = check_output("t", &a, &json!({"at": "yesterday"}), SOON).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadOutput);
        assert!(e.message.contains("/at"), "{}", e.message);
    }

    fn action(schema: Value) -> ActionSpec {
        ActionSpec {
            name: "a".into(),
            schema_name: "t_a".into(),
            title: None,
            description: String::new(),
            input_schema: schema,
            output_schema: None,
            profile: Default::default(),
            annotations: None,
        }
    }

    /// A recursive schema that checks each level twice: 2^depth steps for a value `depth` levels deep.
    pub(crate) fn twice_per_level() -> Value {
        json!({"type": "object", "allOf": [
            {"properties": {"a": {"$ref": "#"}}},
            {"properties": {"a": {"$ref": "#"}}, "description": "twice"}
        ]})
    }

    pub(crate) fn deep(levels: usize) -> Map<String, Value> {
        let mut v = json!({});
        for _ in 0..levels {
            v = json!({"a": v});
        }
        v.as_object().unwrap().clone()
    }

    /// Validation costlier than the call's timeout is refused with `timeout` when the timeout passes, and a
    /// second call against the same schema is refused at once while the first one's check still runs.
    #[test]
    fn validation_is_bounded_by_the_timeout() {
        let a = action(twice_per_level());
        assert!(crate::schema_size::expanded_size(&a.input_schema).is_ok());
        assert!(check_args("t", &a, &deep(3), &Masker::default(), SOON).is_ok());
        let e = check_args("t", &a, &deep(60), &Masker::default(), Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.code, ErrorCode::Timeout);
        assert!(
            e.message.contains("took longer than the call's timeout"),
            "{}",
            e.message
        );
        let e = check_args("t", &a, &deep(2), &Masker::default(), SOON).unwrap_err();
        assert_eq!(e.code, ErrorCode::Timeout);
        assert!(e.message.contains("still running"), "{}", e.message);
    }

    /// `quick` never disagrees with the jsonschema crate when it answers.
    #[test]
    fn quick_agrees_with_jsonschema() {
        let schemas = [
            json!({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":5}},"required":["n"]}),
            json!({"type":"object","properties":{"s":{"type":"string","minLength":2,"maxLength":3}},"additionalProperties":false}),
            json!({"type":"object","properties":{"t":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2}}}),
            json!({"type":"object","properties":{"e":{"enum":["a",1,null,[1]]},"c":{"const":{"k":1}}}}),
            json!({"type":"object","properties":{"x":{"type":["number","null"],"exclusiveMinimum":0,"exclusiveMaximum":1}}}),
            json!({"type":"object","additionalProperties":{"type":"boolean"},"properties":{"a":{"type":"string"}}}),
            json!({"type":"object","properties":{"o":{"type":"object","properties":{"d":{"type":"integer"}},"required":["d"]}}}),
            json!({"type":"object","properties":{"p":{"type":"string","pattern":"^a"}}}),
            json!({"type":"object","properties":{"f":false,"t":true}}),
            json!({}),
        ];
        let values = [
            json!({}),
            json!({"n": 1}),
            json!({"n": 0}),
            json!({"n": 5.0}),
            json!({"n": 2.5}),
            json!({"n": "1"}),
            json!({"s": "ab"}),
            json!({"s": "é😀x"}),
            json!({"s": "a"}),
            json!({"s": "abcd"}),
            json!({"s": "ab", "z": 1}),
            json!({"t": ["a"]}),
            json!({"t": []}),
            json!({"t": ["a", 1]}),
            json!({"t": ["a", "b", "c"]}),
            json!({"e": "a"}),
            json!({"e": 1.0}),
            json!({"e": null}),
            json!({"e": [1]}),
            json!({"e": "b"}),
            json!({"c": {"k": 1}}),
            json!({"c": {"k": 2}}),
            json!({"x": 0.5}),
            json!({"x": 0}),
            json!({"x": null}),
            json!({"a": "s", "b": true}),
            json!({"a": "s", "b": 1}),
            json!({"o": {"d": 1}}),
            json!({"o": {}}),
            json!({"p": "abc"}),
            json!({"f": 1}),
            json!({"t": 1}),
            json!([1]),
            json!("x"),
        ];
        let mut answered = 0;
        for s in &schemas {
            for v in &values {
                let full = jsonschema::is_valid(s, v);
                if let Some(q) = quick(s, v) {
                    answered += 1;
                    assert_eq!(q, full, "schema {s} value {v}");
                }
            }
        }
        assert!(answered > 200, "quick answered only {answered} cases");
        assert_eq!(
            quick(&schemas[7], &json!({"p": "abc"})),
            None,
            "pattern goes to the full validator"
        );
    }

    #[test]
    fn names_pointer_value_and_expectation() {
        let a = action(json!({"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}));
        assert!(check_args("t", &a, json!({"n": 3}).as_object().unwrap(), &Masker::default(), SOON).is_ok());
        let e = check_args("t", &a, json!({"n": 0}).as_object().unwrap(), &Masker::default(), SOON).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert_eq!(e.detail(Detail::Pointer).unwrap(), "/n");
        assert!(
            e.message.contains("/n") && e.message.contains("minimum"),
            "{}",
            e.message
        );
        let e = check_args("t", &a, json!({}).as_object().unwrap(), &Masker::default(), SOON).unwrap_err();
        assert!(e.message.contains("\"n\" is a required property"), "{}", e.message);
    }

    /// A shown value is masked whole, then cut: a secret straddling the cut leaves no fragment behind.
    #[test]
    fn a_shown_value_is_masked_before_it_is_cut() {
        let secret = "SUPERSECRETVALUE-42";
        let m = Masker::new([secret]);
        let a = action(json!({"type":"object","properties":{"n":{"type":"integer"}}}));
        for pad in 180..SHOWN_MAX {
            let v = format!("{}{secret} tail", "x".repeat(pad));
            let e = check_args("t", &a, json!({"n": v}).as_object().unwrap(), &m, SOON).unwrap_err();
            let shown = e.detail(Detail::Problems).unwrap()[0]["value"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(shown.len() <= SHOWN_MAX + '…'.len_utf8(), "{shown}");
            for k in 4..=secret.len() {
                assert!(
                    !shown.contains(&secret[..k]),
                    "pad {pad}: a fragment of the secret in {shown}"
                );
            }
        }
    }
}
