//! AnimaWorks' own warning of `submit` (`_handle_submit` in its `core/integrations/__init__.py`): a core module's
//! subcommand that its `EXECUTION_PROFILE` does not mark `background_eligible`, said word for word on stderr, as
//! agents trained on the original read it.

use awt_core::discover::ToolFile;
use awt_core::manifest::Manifest;
use awt_core::tier::Tier;
use serde_json::{Map, Value};

/// The original's line for `submit <tool> <words…>`, or `None` where the original says nothing: a tool that is
/// not a core module, no subcommand (the first word not starting with `-`), a subcommand that is not a key of
/// the profile as written, an entry that is not an object, or one marked background-eligible.
pub fn of(file: &ToolFile, manifest: &Manifest, words: &[String]) -> Option<String> {
    if !manifest.legacy {
        return None;
    }
    line(&file.name, file.tier, manifest.legacy_profile.as_ref()?, words)
}

fn line(tool: &str, tier: Tier, profile: &Map<String, Value>, words: &[String]) -> Option<String> {
    if tier != Tier::Core {
        return None;
    }
    let sub = super::subcommand_of(words);
    let entry = profile.get(sub)?.as_object()?;
    if sub.is_empty() || entry.get("background_eligible").is_some_and(awt_core::policy::truthy) {
        return None;
    }
    let seconds = entry.get("expected_seconds").map_or_else(|| "?".to_owned(), python_str);
    Some(format!(
        "Warning: {tool} {sub} is not marked as long-running (expected ~{seconds}s). Consider running directly instead."
    ))
}

/// `str()` of the JSON value as Python loaded it.
fn python_str(v: &Value) -> String {
    match v {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn said(tier: Tier, profile: Value, words: &[&str]) -> Option<String> {
        let words: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
        line("chatwork", tier, profile.as_object().unwrap(), &words)
    }

    #[test]
    fn said_as_the_original_says_it() {
        let p = json!({"rooms": {"expected_seconds": 10, "background_eligible": false},
                       "sync": {"expected_seconds": 60, "background_eligible": true},
                       "bare": {}, "half": {"expected_seconds": 1.5}, "draft-update": {"expected_seconds": 15}});
        assert_eq!(
            said(Tier::Core, p.clone(), &["--json", "rooms", "x"]).as_deref(),
            Some("Warning: chatwork rooms is not marked as long-running (expected ~10s). Consider running directly instead.")
        );
        assert!(said(Tier::Core, p.clone(), &["bare"])
            .unwrap()
            .contains("(expected ~?s)"));
        assert!(said(Tier::Core, p.clone(), &["half"])
            .unwrap()
            .contains("(expected ~1.5s)"));
        assert_eq!(said(Tier::Core, p.clone(), &["sync"]), None);
        assert_eq!(
            said(Tier::Core, p.clone(), &["draft_update"]),
            None,
            "the key as written only"
        );
        assert_eq!(said(Tier::Core, p.clone(), &["-n", "5"]), None);
        assert_eq!(said(Tier::Personal, p.clone(), &["rooms"]), None, "core modules only");
        assert_eq!(said(Tier::Common, p, &["rooms"]), None);
    }
}
