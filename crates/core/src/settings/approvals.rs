//! `"approvals"`: which gated actions ask a human instead of being refused, how long a request waits, and the
//! command told of each new request (docs/policy.md#approvals).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The longest a request may wait: 30 days.
pub const MAX_TTL_S: f64 = 30.0 * 86400.0;
/// How long a request waits unless `ttl_s` says otherwise: 24 hours.
pub const DEFAULT_TTL_S: f64 = 86400.0;

/// Per tier, grants (`<tool>_<gated_as or action>`, `*` matching any run of characters) that ask a human when
/// `permissions.json` neither allows nor denies them; an anima's own `external_tools.ask` adds to these.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct AskDefaults {
    /// Core tools.
    pub core: Vec<String>,
    /// Common tools.
    pub common: Vec<String>,
    /// Personal tools (possibly written by an LLM).
    pub personal: Vec<String>,
}

/// Approvals of gated actions: `{"ask": {"personal": ["*"]}, "ttl_s": 86400, "notify": ["notify-send", "…"]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalsSettings {
    /// Per tier, the gated grants that ask instead of being refused.
    pub ask: Option<AskDefaults>,
    /// Seconds a request waits for a human before it expires.
    #[schemars(range(min = 1, max = 2592000), extend("default" = 86400))]
    pub ttl_s: Option<f64>,
    /// A command (program and arguments) run, unconfined, with each new request as JSON on stdin.
    pub notify: Option<Vec<String>>,
}

impl ApprovalsSettings {
    /// `ttl_s`, checked.
    pub fn ttl_s(&self) -> f64 {
        self.ttl_s
            .filter(|t| t.is_finite() && (1.0..=MAX_TTL_S).contains(t))
            .unwrap_or(DEFAULT_TTL_S)
    }

    /// The tier's default ask list.
    pub fn ask_of(&self, tier: crate::tier::Tier) -> &[String] {
        let Some(a) = &self.ask else { return &[] };
        match tier {
            crate::tier::Tier::Core => &a.core,
            crate::tier::Tier::Common => &a.common,
            crate::tier::Tier::Personal => &a.personal,
        }
    }
}
