//! The three tiers a tool is found in: the base of every rule, so it sits at the bottom of the crate.

use serde::{Deserialize, Serialize};

/// Where a tool was found. The permission rules differ by tier (see [`crate::policy::gate::decide`]), so every call path
/// states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Shipped with the installation.
    Core,
    /// `<data dir>/common_tools/`, shared by every anima.
    Common,
    /// `<anima dir>/tools/`, the anima's own.
    Personal,
}

impl Tier {
    /// The lowercase name used in audit records and messages (`core`, `common`, `personal`).
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Core => "core",
            Tier::Common => "common",
            Tier::Personal => "personal",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
