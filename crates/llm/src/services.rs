//! AnimaWorks' switch for messaging services: its `use_tool` offers `slack` and `chatwork` only while
//! `config.json` `external_messaging.<service>.enabled` is true (false by default; `_disabled_service_tools` in
//! AnimaWorks' `core/tooling/permissions.py`). The LLM paths (`use-tool`, its catalogue, MCP, provider schemas)
//! do the same; the command line does not, as in the original.

use awt_core::error::{CallError, Detail, ErrorCode};
use serde_json::Value;
use std::path::Path;

/// The tools the switch covers.
pub const SERVICES: &[&str] = &["slack", "chatwork"];

const MAX_CONFIG_BYTES: u64 = 8 * 1024 * 1024;

/// The services switched off in `data_dir`'s `config.json`. A missing or unreadable file is the default: off
/// (an LLM never gets more than the operator turned on).
pub fn disabled(data_dir: &Path) -> Vec<&'static str> {
    let v: Option<Value> = awt_core::fsread::read(&data_dir.join("config.json"), MAX_CONFIG_BYTES)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    SERVICES
        .iter()
        .copied()
        .filter(|s| {
            v.as_ref()
                .and_then(|v| v.pointer(&format!("/external_messaging/{s}/enabled")))
                .and_then(Value::as_bool)
                != Some(true)
        })
        .collect()
}

/// The refusal of `tool` when its service is switched off: the original's "not permitted".
pub fn refusal(data_dir: &Path, tool: &str) -> Option<CallError> {
    if !SERVICES.contains(&tool) || !disabled(data_dir).contains(&tool) {
        return None;
    }
    Some(
        CallError::new(
            ErrorCode::PermissionDenied,
            format!("{tool} is switched off for LLM calls: config.json external_messaging.{tool}.enabled is not true"),
        )
        .hint(format!(
            "set \"external_messaging\": {{\"{tool}\": {{\"enabled\": true}}}} in {}",
            data_dir.join("config.json").display()
        ))
        .with(Detail::Tool, tool)
        .with(Detail::Reason, "tool_not_allowed"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_unless_the_config_turns_it_on() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(disabled(d.path()), ["slack", "chatwork"]);
        let f = d.path().join("config.json");
        for (text, want) in [
            (
                r#"{"external_messaging": {"slack": {"enabled": true}}}"#,
                &["chatwork"][..],
            ),
            (
                r#"{"external_messaging": {"slack": {"enabled": "yes"}, "chatwork": {"enabled": true}}}"#,
                &["slack"],
            ),
            ("not json", &["slack", "chatwork"]),
        ] {
            std::fs::write(&f, text).unwrap();
            assert_eq!(disabled(d.path()), want, "{text}");
        }
        assert!(refusal(d.path(), "github").is_none());
        assert!(refusal(d.path(), "slack").is_some());
    }
}
