//! The language of the messages an agent reads, as AnimaWorks picks it: `<data dir>/config.json` `"locale"`
//! (`ja`, `en`, `ko`, `zh`), `ja` when the file, the key or the value is missing or unusable. A string that
//! AnimaWorks has only in Japanese and English falls back to English, as its `t()` does.

use serde_json::Value;
use std::path::Path;

/// The locale of AnimaWorks' messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Locale {
    #[default]
    Ja,
    En,
    Ko,
    Zh,
}

/// config.json larger than this is not read for its locale (the default applies).
const MAX_CONFIG_BYTES: u64 = 8 * 1024 * 1024;

impl Locale {
    /// The locale configured in `<data dir>/config.json`.
    pub fn of_data_dir(data_dir: &Path) -> Locale {
        // fsread: a regular file only, opened without blocking (a FIFO named config.json must not hang a call).
        let v: Option<Value> = crate::fsread::read(&data_dir.join("config.json"), MAX_CONFIG_BYTES)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        match v.as_ref().and_then(|v| v.get("locale")).and_then(Value::as_str) {
            Some("en") => Locale::En,
            Some("ko") => Locale::Ko,
            Some("zh") => Locale::Zh,
            _ => Locale::Ja,
        }
    }

    /// The original's marker after a cut answer (`handler.output_truncated`).
    pub fn output_truncated(self, size: usize) -> String {
        match self {
            Locale::Ja => format!("[出力が50KBを超えたためトランケーションしました。元のサイズ: {size}]"),
            _ => format!("[Output truncated because it exceeded 50KB. Original size: {size}]"),
        }
    }

    /// What `submit` tells the agent (the original says it in Japanese whatever the locale; we say it in the
    /// configured one, with the original's words for `ja`).
    pub fn submitted(self, task_id: &str) -> String {
        match self {
            Locale::Ja => {
                format!("バックグラウンドタスクを投入しました。完了時にinboxに通知されます。(task_id: {task_id})")
            }
            Locale::Ko => {
                format!("백그라운드 작업을 제출했습니다. 완료되면 inbox로 알림이 전달됩니다. (task_id: {task_id})")
            }
            _ => format!(
                "Background task submitted. You will be notified in your inbox when it completes. (task_id: {task_id})"
            ),
        }
    }

    /// `anima.bg_task_done` / `anima.bg_task_failed`.
    pub fn task_title(self, failed: bool, tool: &str) -> String {
        match (self, failed) {
            (Locale::Ja, false) => format!("バックグラウンドタスク完了: {tool}"),
            (Locale::Ja, true) => format!("バックグラウンドタスク失敗: {tool}"),
            (_, false) => format!("Background task completed: {tool}"),
            (_, true) => format!("Background task failed: {tool}"),
        }
    }

    /// `anima.bg_notif_task_id`, `_tool`, `_status`, `_result`: the notification's four lines.
    pub fn task_lines(self, task_id: &str, tool: &str, status: &str, summary: &str) -> String {
        match self {
            Locale::Ja => {
                format!("- タスクID: {task_id}\n- ツール: {tool}\n- ステータス: {status}\n- 結果: {summary}\n")
            }
            _ => format!("- Task ID: {task_id}\n- Tool: {tool}\n- Status: {status}\n- Result: {summary}\n"),
        }
    }

    /// `tooling.tool_not_permitted`.
    pub fn tool_not_permitted(self, tool: &str) -> String {
        match self {
            Locale::Ja => format!(
                "ツール '{tool}' は許可されていません。permissions.json の external_tools で許可されていることを確認してください。"
            ),
            _ => format!(
                "Tool '{tool}' is not permitted. Check that it is allowed in external_tools in permissions.json."
            ),
        }
    }

    /// `tooling.tool_denied`.
    pub fn tool_denied(self, tool: &str) -> String {
        match self {
            Locale::Ja => format!("ツール '{tool}' は外部ツール設定（external_tools.deny）で拒否されています。"),
            _ => format!("Tool '{tool}' is denied by the external tools configuration (external_tools.deny)."),
        }
    }

    /// `tooling.gated_action_denied`, naming the grant that works (`key` is `<tool>_<gated_as or action>`; the
    /// original names the raw action, which is not always the key).
    pub fn gated_action_denied(self, tool: &str, action: &str, key: &str) -> String {
        match self {
            Locale::Ja => format!(
                "アクション '{action}' (ツール '{tool}') は明示的な許可が必要です。permissions.json の external_tools.allow に '{key}' を追加してください（上司または人間に依頼）。"
            ),
            Locale::Ko => format!(
                "액션 '{action}' (도구 '{tool}')은 명시적인 허가가 필요합니다. permissions.json의 external_tools.allow에 '{key}'을 추가하세요(상사 또는 담당자에게 요청)."
            ),
            _ => format!(
                "Action '{action}' on tool '{tool}' requires explicit permission. Add '{key}' to external_tools.allow in permissions.json (ask your supervisor or a human)."
            ),
        }
    }

    /// A permission refusal in the original's words (`check_tool_access`'s message), from the runner's error
    /// (its `reason` and `key`); `action` names the action when the key does not. `None` when AnimaWorks has no
    /// such refusal (a missing credential, a sandbox grant).
    pub fn refusal(self, e: &crate::error::CallError, tool: &str, action: &str) -> Option<String> {
        use crate::error::Detail;
        let reason = e.detail(Detail::Reason).and_then(Value::as_str).unwrap_or("");
        let key = e.detail(Detail::Key).and_then(Value::as_str);
        Some(match reason {
            "tool_denied" => self.tool_denied(tool),
            "tool_not_allowed" => self.tool_not_permitted(tool),
            "grant_missing" | "grant_denied" => {
                let key = key.map_or_else(|| format!("{tool}_{action}"), str::to_owned);
                let action = key.strip_prefix(&format!("{tool}_")).unwrap_or(action).to_owned();
                self.gated_action_denied(tool, &action, &key)
            }
            "permissions_unusable" => self.permission_check_failed(tool, python_exception(&e.message)),
            _ => return None,
        })
    }

    /// What an anima reads when a gated action waits for a human's approval (no such string in the original:
    /// written in its register, naming the inbox as `submitted` does).
    pub fn approval_pending(self, tool: &str, action: &str, id: &str) -> String {
        match self {
            Locale::Ja => format!(
                "アクション '{action}' (ツール '{tool}') は人間の承認が必要です。承認リクエストを送信しました。承認されると実行され、結果はinboxに通知されます。却下・期限切れの場合も通知されます。(approval_id: {id})"
            ),
            Locale::Ko => format!(
                "액션 '{action}' (도구 '{tool}')은 사람의 승인이 필요합니다. 승인 요청을 보냈습니다. 승인되면 실행되고 결과가 inbox로 알림됩니다. 거절되거나 만료되어도 알림이 전달됩니다. (approval_id: {id})"
            ),
            _ => format!(
                "Action '{action}' on tool '{tool}' needs a human's approval. An approval request was sent; once approved it runs and you will be notified in your inbox with the result (also if it is denied or expires). (approval_id: {id})"
            ),
        }
    }

    /// The notification of a request that will not run: `denied` or `expired`.
    pub fn approval_closed(self, tool: &str, id: &str, denied: bool, by: &str, reason: &str) -> String {
        let reason = if reason.is_empty() { "-" } else { reason };
        match (self, denied) {
            (Locale::Ja, true) => format!(
                "# 承認リクエスト却下: {tool}\n\n- 承認ID: {id}\n- ツール: {tool}\n- ステータス: denied\n- 却下者: {by}\n- 理由: {reason}\n"
            ),
            (Locale::Ja, false) => format!(
                "# 承認リクエスト期限切れ: {tool}\n\n- 承認ID: {id}\n- ツール: {tool}\n- ステータス: expired\n- 結果: 期限内に承認されなかったため実行されませんでした\n"
            ),
            (_, true) => format!(
                "# Approval request denied: {tool}\n\n- Approval ID: {id}\n- Tool: {tool}\n- Status: denied\n- Denied by: {by}\n- Reason: {reason}\n"
            ),
            (_, false) => format!(
                "# Approval request expired: {tool}\n\n- Approval ID: {id}\n- Tool: {tool}\n- Status: expired\n- Result: not approved in time, so it did not run\n"
            ),
        }
    }

    /// `tooling.permission_check_failed`.
    pub fn permission_check_failed(self, tool: &str, error: &str) -> String {
        match self {
            Locale::Ja => format!("ツール '{tool}' の権限判定に失敗しました（{error}）。安全のため実行を拒否します。"),
            _ => format!("Permission check for tool '{tool}' failed ({error}); denied for safety."),
        }
    }
}

/// The exception AnimaWorks' loader raises for the fault a permissions refusal describes: `json.loads`'
/// `JSONDecodeError` for text that is not JSON, pydantic's `ValidationError` for JSON of the wrong shape (serde's
/// data errors); the runner's own name for a file it cannot read.
fn python_exception(message: &str) -> &'static str {
    const SHAPE: &[&str] = &[
        "invalid type",
        "invalid value",
        "invalid length",
        "missing field",
        "unknown field",
        "unknown variant",
        "duplicate",
        // a number Python reads as a float infinity, which pydantic then refuses
        "number out of range",
    ];
    // What Python's `read_text` raises for the faults [`crate::policy::permissions`] names in its own words.
    const UNREADABLE: &[(&str, &str)] = &[
        ("it is a directory, not a file", "IsADirectoryError"),
        ("a directory is not a regular file", "IsADirectoryError"),
        ("it is not valid UTF-8 text", "UnicodeDecodeError"),
        ("it is a dangling symbolic link", "FileNotFoundError"),
        ("Permission denied", "PermissionError"),
    ];
    if !message.contains("invalid permissions file") {
        UNREADABLE
            .iter()
            .find(|(why, _)| message.contains(why))
            .map_or("PermissionsError", |(_, name)| name)
    } else if SHAPE.iter().any(|s| message.contains(s)) {
        "ValidationError"
    } else {
        "JSONDecodeError"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permissions_fault_is_named_as_animaworks_names_it() {
        let m = |r: &str| format!("every tool call is refused: invalid permissions file /a/permissions.json:1:2: {r}");
        assert_eq!(python_exception(&m("EOF while parsing an object")), "JSONDecodeError");
        assert_eq!(python_exception(&m("invalid type: sequence, expected a map")), "ValidationError");
        assert_eq!(python_exception(&m("number out of range")), "ValidationError");
        let unreadable = |r: &str| format!("every tool call is refused: cannot read permissions file /a: {r}");
        let named = |r: &str| python_exception(&unreadable(r));
        assert_eq!(named("a directory is not a regular file; refused"), "IsADirectoryError");
        assert_eq!(named("it is not valid UTF-8 text"), "UnicodeDecodeError");
        assert_eq!(python_exception("cannot read permissions file /a: denied"), "PermissionsError");
    }

    #[test]
    fn locale_from_config_json_with_ja_by_default() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(Locale::of_data_dir(d.path()), Locale::Ja);
        let f = d.path().join("config.json");
        for (text, want) in [
            (r#"{"locale": "en"}"#, Locale::En),
            (r#"{"locale": "ko", "credentials": {}}"#, Locale::Ko),
            (r#"{"locale": "fr"}"#, Locale::Ja),
            (r#"{"locale": 1}"#, Locale::Ja),
            ("not json", Locale::Ja),
        ] {
            std::fs::write(&f, text).unwrap();
            assert_eq!(Locale::of_data_dir(d.path()), want, "{text}");
        }
        assert!(Locale::Ko.output_truncated(7).starts_with("[Output truncated"));
        assert!(Locale::Ja.output_truncated(7).ends_with("元のサイズ: 7]"));
    }

    #[test]
    fn a_fifo_as_config_json_is_the_default_locale_not_a_hang() {
        let d = tempfile::tempdir().unwrap();
        let c = d.path().join("config.json");
        assert!(std::process::Command::new("mkfifo").arg(c).status().unwrap().success());
        assert_eq!(Locale::of_data_dir(d.path()), Locale::Ja);
        std::fs::remove_file(d.path().join("config.json")).unwrap();
        std::fs::write(d.path().join("config.json"), r#"{"locale": "en"}"#).unwrap();
        assert_eq!(Locale::of_data_dir(d.path()), Locale::En);
    }
}
