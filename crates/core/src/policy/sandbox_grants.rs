//! The sandbox's grant schema: `permissions.json` `"sandbox"`, what an anima allows its tools beyond the tier's default.

use crate::settings::sandbox::Mode;
use crate::tier::Tier;
use serde::{Deserialize, Serialize};

/// An anima's grants: `permissions.json` `"sandbox"` (a runner extension; AnimaWorks ignores it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Grants {
    /// Per-tier overrides of the operator's [`crate::sandbox::SandboxSettings`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core: Option<Mode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub common: Option<Mode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub personal: Option<Mode>,
    /// The network: `true`, `false`, or a list of the tools that may use it and of the non-public targets
    /// (`"127.0.0.1:5432"`, entries with a port) tools may reach. Absent (or a list of targets only): every tool
    /// may, as in AnimaWorks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<NetGrant>,
    /// Tools whose network is not routed through the runner's proxy (for protocols that are not HTTP: SMTP, IMAP,
    /// a database); their connections are not in the audit line, and loopback and private addresses are then
    /// reachable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub direct_net: Vec<String>,
    /// More paths this anima's tools never read (placeholders allowed), beyond the built-in deny list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// More places tools may declare (placeholders allowed), beyond the defaults.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub exec: Vec<String>,
}

impl Grants {
    pub fn is_default(&self) -> bool {
        *self == Grants::default()
    }

    pub(crate) fn mode(&self, tier: Tier) -> Option<Mode> {
        match tier {
            Tier::Core => self.core,
            Tier::Common => self.common,
            Tier::Personal => self.personal,
        }
    }

    pub(crate) fn net_for(&self, tool: &str) -> bool {
        match &self.net {
            Some(NetGrant::All(b)) => *b,
            // `[]` is nobody; a list of targets only keeps the default (every tool).
            Some(NetGrant::Tools(t)) if t.is_empty() => false,
            Some(NetGrant::Tools(t)) => {
                let mut names = t.iter().filter(|x| !is_target(x)).peekable();
                names.peek().is_none() || names.any(|x| x == tool)
            }
            None => true,
        }
    }

    /// The non-public targets the grants name (`"host:port"` entries of `"net"`), for the proxy.
    pub(crate) fn private_targets(&self) -> Vec<String> {
        match &self.net {
            Some(NetGrant::Tools(t)) => t.iter().filter(|x| is_target(x)).cloned().collect(),
            _ => Vec::new(),
        }
    }
}

/// A `"net"` grant entry naming a target (`host:port`) rather than a tool.
fn is_target(e: &str) -> bool {
    e.contains(':')
}

/// `"net"` of [`Grants`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NetGrant {
    All(bool),
    Tools(Vec<String>),
}
