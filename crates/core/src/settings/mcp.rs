//! `"mcp_servers"`: MCP servers declared as tools of the core or common tier (docs/mcp-servers.md). Each entry
//! is read on its own by [`crate::mcp_servers`], so one bad declaration is a problem of that server only.

use awt_protocol::{CredentialDecl, Sandbox};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One server's declaration as the operator wrote it (`animaworks-tool.json` `"mcp_servers"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// The program (looked up on the tool's `PATH`).
    #[serde(default)]
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set for the server, over the tool environment of its tier.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Credentials injected into the server's environment at its start (only as granted), each as a tool
    /// declares one (protocol.md §2.1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<serde_json::Value>")]
    pub credentials: Vec<CredentialDecl>,
    /// `core` or `common` (personal servers are declared in the anima's own `status.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "common"))]
    pub tier: Option<String>,
    /// MCP tool names (a trailing `*` matches a prefix) gated besides those not declared `readOnlyHint: true`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gated: Vec<String>,
    /// What the server may touch (protocol.md §2.4), for every one of its actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub sandbox: Option<Sandbox>,
    /// The resource limits of the server process, as `"limits"` of a tier in the settings: each key given here
    /// replaces the tier's for this server (`null`: no limit); the anima's `permissions.json` still lowers them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<super::limits::TierAmounts>,
    /// The deadline of each call, in seconds (default: protocol.md's 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// How long the server may take to start and answer `initialize`, in seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_s: Option<f64>,
    /// How many sessions of the server run at once (default 1: one session takes every call, concurrently). A
    /// second session is started only while every session has a call in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub workers: Option<usize>,
    /// Seconds a session without calls lives before it is ended (default: as long as the runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_s: Option<f64>,
    /// Offer a tool whose schema name would pass Claude Code's 64 characters (`mcp__animaworks__<name>`) under a
    /// shorter action name ending in a stable hash of its MCP name (default: offered as it is, and warned of).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub short_names: bool,
    /// `stdio` (the default). Other transports are refused with a clear problem.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// A Streamable HTTP server's address (not supported yet: listed as a problem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}
