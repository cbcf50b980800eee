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
///
/// Read once per file as it is: every LLM call asks, so the answer is kept per data dir with the file's identity
/// (inode, size, modification and change times) and read again only when that changes (an operator turning a
/// service on while an MCP server runs is seen at its next call).
pub fn disabled(data_dir: &Path) -> Vec<&'static str> {
    let path = data_dir.join("config.json");
    let id = identity(&path);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = cache.get(&path).filter(|c| c.id == id) {
        return c.off.clone();
    }
    let off = read_disabled(&path);
    let reads = cache.get(&path).map_or(0, |c| c.reads) + 1;
    if cache.len() >= MAX_CACHED {
        cache.clear();
    }
    cache.insert(
        path,
        Cached {
            id,
            off: off.clone(),
            reads,
        },
    );
    off
}

/// What says a file changed: `None` when there is nothing to stat.
type Identity = Option<(u64, u64, u64, i64, i64, i64, i64)>;

struct Cached {
    id: Identity,
    off: Vec<&'static str>,
    /// How many times the file was read, for the tests.
    reads: u64,
}

/// Data dirs remembered at once (a process serves one, a test many).
const MAX_CACHED: usize = 64;

static CACHE: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, Cached>>> =
    std::sync::LazyLock::new(Default::default);

fn identity(path: &Path) -> Identity {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

fn read_disabled(path: &Path) -> Vec<&'static str> {
    let v: Option<Value> = awt_core::fsread::read(path, MAX_CONFIG_BYTES)
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

    fn reads(data: &Path) -> u64 {
        let cache = CACHE.lock().unwrap();
        cache.get(&data.join("config.json")).map_or(0, |c| c.reads)
    }

    /// Every LLM call asks: the file is read once while it stays as it is, and a change (rewritten in place, replaced,
    /// removed) is seen at the next call.
    #[test]
    fn config_is_read_once_until_it_changes() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("config.json");
        std::fs::write(&f, r#"{"external_messaging": {"slack": {"enabled": true}}}"#).unwrap();
        for _ in 0..5 {
            assert_eq!(disabled(d.path()), ["chatwork"]);
        }
        assert_eq!(reads(d.path()), 1, "read on every call");
        // Rewritten in place, same size: the change time moves.
        std::fs::write(&f, r#"{"external_messaging": {"slack": {"enabled": false}}}"#).unwrap();
        std::fs::write(&f, r#"{"external_messaging": {"chatwork":{"enabled":true}}}"#).unwrap();
        assert_eq!(disabled(d.path()), ["slack"]);
        // Replaced by a rename.
        let new = d.path().join("config.json.new");
        std::fs::write(&new, r#"{}"#).unwrap();
        std::fs::rename(&new, &f).unwrap();
        assert_eq!(disabled(d.path()), ["slack", "chatwork"]);
        std::fs::remove_file(&f).unwrap();
        assert_eq!(disabled(d.path()), ["slack", "chatwork"]);
        assert_eq!(reads(d.path()), 4);
    }
}
