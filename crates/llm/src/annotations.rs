//! MCP tool annotations, from what the author declared and nothing else (protocol.md §2.1, docs/mcp.md).
//!
//! - A hint is announced only when declared: in the action's `annotations` object, or as a `true` in its
//!   profile's `hints` (their `false` is the old default, not a declaration). Undeclared hints are absent, so a
//!   client applies MCP's cautious defaults (destructive, open world).
//! - A gated action is never announced as harmless: its `readOnlyHint: true` and `destructiveHint: false` are
//!   dropped (a host must not auto-approve what the owner reserved).
//! - `openWorldHint` follows the network the action declares in its sandbox: any network is `true` whatever the
//!   author wrote; a sandbox without network is `false` unless the author declared `true`.

use awt_core::manifest::ActionSpec;
use awt_protocol::Annotations;
use serde_json::{Map, Value};

/// The annotations announced for `action`; `gated`: the action needs a grant (or its gate is unknown).
pub fn announced(action: &ActionSpec, gated: bool) -> Annotations {
    let declared = action.annotations.unwrap_or_default();
    let h = &action.profile.hints;
    let or_hint = |d: Option<bool>, hint: bool| d.or(hint.then_some(true));
    let mut a = Annotations {
        read_only_hint: or_hint(declared.read_only_hint, h.read_only),
        destructive_hint: or_hint(declared.destructive_hint, h.destructive),
        idempotent_hint: or_hint(declared.idempotent_hint, h.idempotent),
        open_world_hint: or_hint(declared.open_world_hint, h.open_world),
    };
    if gated {
        if a.read_only_hint == Some(true) {
            a.read_only_hint = None;
        }
        if a.destructive_hint == Some(false) {
            a.destructive_hint = None;
        }
    }
    if let Some(sb) = &action.profile.sandbox {
        if !sb.net.is_none() {
            a.open_world_hint = Some(true);
        } else if a.open_world_hint.is_none() {
            a.open_world_hint = Some(false);
        }
    }
    a
}

/// [`announced`] as the MCP `annotations` object, or `None` when nothing is declared.
pub fn mcp_object(action: &ActionSpec, gated: bool) -> Option<Value> {
    let v = serde_json::to_value(announced(action, gated)).ok()?;
    v.as_object()
        .filter(|m| !m.is_empty())
        .map(|m: &Map<String, Value>| Value::Object(m.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use awt_protocol::{Net, Sandbox};
    use serde_json::json;

    fn action(v: Value) -> ActionSpec {
        let mut a = json!({"name": "a", "schema_name": "t_a", "description": "", "input_schema": {"type": "object"},
            "profile": {}});
        for (k, x) in v.as_object().unwrap() {
            a[k] = x.clone();
        }
        serde_json::from_value(a).unwrap()
    }

    #[test]
    fn undeclared_is_absent() {
        assert_eq!(mcp_object(&action(json!({})), false), None);
        assert_eq!(mcp_object(&action(json!({})), true), None);
    }

    #[test]
    fn declared_annotations_and_true_hints_are_announced() {
        let a = action(json!({"annotations": {"readOnlyHint": true, "idempotentHint": false},
            "profile": {"hints": {"open_world": true}}}));
        assert_eq!(
            mcp_object(&a, false),
            Some(json!({"readOnlyHint": true, "idempotentHint": false, "openWorldHint": true}))
        );
    }

    #[test]
    fn gated_is_never_harmless() {
        let a = action(json!({"annotations": {"readOnlyHint": true, "destructiveHint": false}}));
        assert_eq!(mcp_object(&a, true), None);
        let a = action(json!({"annotations": {"destructiveHint": true}}));
        assert_eq!(mcp_object(&a, true), Some(json!({"destructiveHint": true})));
    }

    #[test]
    fn open_world_follows_the_network() {
        let mut a = action(json!({"annotations": {"openWorldHint": false}}));
        a.profile.sandbox = Some(Sandbox {
            net: Net::Only(vec!["api.example.com:443".into()]),
            ..Default::default()
        });
        assert_eq!(announced(&a, false).open_world_hint, Some(true));
        a.profile.sandbox = Some(Sandbox::default());
        a.annotations = None;
        assert_eq!(announced(&a, false).open_world_hint, Some(false));
    }
}
