//! Secrets inside a task's arguments, for a store that must never hold them (Postgres).
//!
//! The rule: at submit, every occurrence of a resolved credential's value inside an argument string (the same
//! forms the masker hides: as given, trimmed, JSON-escaped) is masked in `tool_args`, and `arg_secrets` records
//! where it was, by the credential's *name*: `[{"pointer": "/token", "parts": ["Bearer ", {"credential":
//! "github", "form": "trimmed"}]}]`. The worker resolves the tool's declared credentials itself, on its own machine
//! (its vault, config and environment), and rebuilds the strings from them. Only credentials the tool or the action
//! declares can be named (a forged entry naming anything else is refused), and a worker that cannot resolve one
//! fails the task as a foreground call would. A secret inside an argument's *name* (an object key) stays masked.

use awt_core::error::{CallError, Detail, ErrorCode};
use awt_core::policy::credentials::ResolvedCredential;
use awt_core::policy::mask::MIN_SECRET_CHARS;
use serde_json::{json, Value};

const FORMS: [&str; 3] = ["raw", "trimmed", "json"];

fn form_of(value: &str, form: &str) -> Option<String> {
    let trimmed = value.trim();
    if trimmed.chars().count() < MIN_SECRET_CHARS {
        return None;
    }
    match form {
        "raw" => Some(value.to_owned()),
        "trimmed" => Some(trimmed.to_owned()),
        "json" => {
            let e = serde_json::to_string(trimmed).ok()?;
            Some(e[1..e.len() - 1].to_owned())
        }
        _ => None,
    }
}

/// Split `s` into literal text and credential references; `None` when no secret occurs in it.
fn split(s: &str, secrets: &[ResolvedCredential]) -> Option<Vec<Value>> {
    let mut needles: Vec<(String, &str, &str)> = Vec::new();
    for c in secrets {
        for f in FORMS {
            if let Some(n) = form_of(&c.value, f) {
                if !needles.iter().any(|x| x.0 == n) {
                    needles.push((n, c.name.as_str(), f));
                }
            }
        }
    }
    needles.sort_by_key(|n| std::cmp::Reverse(n.0.len()));
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut rest = s;
    let mut found = false;
    'outer: while !rest.is_empty() {
        for (n, name, form) in &needles {
            if rest.starts_with(n.as_str()) {
                if !lit.is_empty() {
                    parts.push(Value::String(std::mem::take(&mut lit)));
                }
                parts.push(json!({"credential": name, "form": form}));
                rest = &rest[n.len()..];
                found = true;
                continue 'outer;
            }
        }
        let c = rest.chars().next().expect("rest is not empty");
        lit.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if !lit.is_empty() {
        parts.push(Value::String(lit));
    }
    found.then_some(parts)
}

fn walk(v: &Value, pointer: &mut String, secrets: &[ResolvedCredential], out: &mut Vec<Value>) {
    match v {
        Value::String(s) => {
            if let Some(parts) = split(s, secrets) {
                out.push(json!({"pointer": pointer.clone(), "parts": parts}));
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let len = pointer.len();
                pointer.push_str(&format!("/{i}"));
                walk(x, pointer, secrets, out);
                pointer.truncate(len);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
                walk(x, pointer, secrets, out);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// Where the resolved `secrets` occur in `raw` (the unmasked arguments); `None` when nowhere.
pub fn template(secrets: &[ResolvedCredential], raw: &Value) -> Option<Value> {
    if secrets.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    walk(raw, &mut String::new(), secrets, &mut out);
    (!out.is_empty()).then(|| Value::Array(out))
}

fn bad(msg: impl Into<String>) -> CallError {
    CallError::new(ErrorCode::InvalidArguments, msg).hint("submit the task again")
}

/// Put the worker's own resolved `secrets` back into the masked arguments at the places `template` names.
pub fn fill(masked: &Value, template: &Value, secrets: &[ResolvedCredential]) -> Result<Value, CallError> {
    let mut args = masked.clone();
    let entries = template
        .as_array()
        .ok_or_else(|| bad("the task's arg_secrets is not a list"))?;
    for e in entries {
        let pointer = e
            .get("pointer")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("an arg_secrets entry has no pointer"))?;
        let parts = e
            .get("parts")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("an arg_secrets entry has no parts"))?;
        let mut s = String::new();
        for p in parts {
            match p {
                Value::String(lit) => s.push_str(lit),
                Value::Object(r) => {
                    let name = r.get("credential").and_then(Value::as_str).unwrap_or_default();
                    let form = r.get("form").and_then(Value::as_str).unwrap_or_default();
                    let c = secrets.iter().find(|c| c.name == name).ok_or_else(|| {
                        CallError::new(
                            ErrorCode::PermissionDenied,
                            format!(
                                "the task's arguments hold credential {name:?}, which the tool does not declare or \
                                 this worker cannot resolve"
                            ),
                        )
                        .hint("set the credential on the worker's machine (vault, config.json or environment)")
                        .with(Detail::Reason, "credential_missing")
                    })?;
                    s.push_str(&form_of(&c.value, form).ok_or_else(|| bad("an arg_secrets entry is malformed"))?);
                }
                _ => return Err(bad("an arg_secrets part is neither text nor a credential")),
            }
        }
        let slot = args
            .pointer_mut(pointer)
            .filter(|v| v.is_string())
            .ok_or_else(|| bad(format!("the task's arguments have no string at {pointer}")))?;
        *slot = Value::String(s);
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use awt_core::policy::credentials::CredentialSource;
    use awt_core::policy::Masker;

    fn cred(name: &str, value: &str) -> ResolvedCredential {
        ResolvedCredential {
            name: name.into(),
            env: "X".into(),
            value: value.into(),
            source: CredentialSource::Environment { var: "X".into() },
        }
    }

    #[test]
    fn a_template_holds_no_secret_and_rebuilds_the_arguments() {
        let s = [cred("gh", "sk-secret-1234\n"), cred("other", "zzzzzz")];
        let raw =
            json!({"h": "Bearer sk-secret-1234 and zzzzzz", "n": 3, "l": ["x", "sk-secret-1234"], "a/b": "zzzzzz"});
        let t = template(&s, &raw).expect("secrets occur");
        let text = t.to_string();
        assert!(!text.contains("sk-secret") && !text.contains("zzzzzz"), "{text}");
        let masked = Masker::new(s.iter().map(|c| c.value.as_str())).mask_value(&raw);
        assert_eq!(fill(&masked, &t, &s).unwrap(), raw);
        // A worker that resolves another value uses its own.
        let rotated = [cred("gh", "sk-rotated-999"), cred("other", "yyyyyy")];
        let got = fill(&masked, &t, &rotated).unwrap();
        assert_eq!(got["h"], "Bearer sk-rotated-999 and yyyyyy");
        // A credential the worker does not have fails the call; it is never guessed.
        let e = fill(&masked, &t, &rotated[..1]).unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
    }

    #[test]
    fn no_secret_no_template() {
        assert!(template(&[cred("gh", "sk-secret-1234")], &json!({"a": "plain"})).is_none());
        assert!(template(&[], &json!({"a": "sk-secret-1234"})).is_none());
    }
}
