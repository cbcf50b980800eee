//! `"sandbox"`: the operator's confinement per tier (docs/sandbox.md). The planner ([`crate::sandbox`]) reads it;
//! it lives here, apart from the planner, because it is part of the settings file's one shape.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether the tools of a tier are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Enforce,
    Off,
}

/// What to do when the kernel cannot enforce all of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Unsupported {
    /// Refuse the call before it starts.
    Refuse,
    /// Run with what the kernel can enforce (nothing, without Landlock), warning on every call and in the audit.
    Warn,
}

/// Confinement per tier (`enforce` or `off`), what to do on a kernel that cannot enforce a plan, the PID
/// namespace, and more paths no sandboxed tool reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxSettings {
    /// Core tools (trusted, the operator's own).
    pub core: Mode,
    /// Common tools (`<data dir>/common_tools`).
    pub common: Mode,
    /// Personal tools (`<anima dir>/tools`, possibly written by an LLM).
    pub personal: Mode,
    /// When the kernel cannot enforce all of a plan: `refuse` the call, or `warn` and run less confined.
    pub unsupported: Unsupported,
    /// Run each sandboxed call in its own PID namespace where the kernel allows it.
    pub pid_namespace: bool,
    /// More paths no sandboxed tool reads (placeholders allowed), beyond the built-in deny list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            core: Mode::Off,
            common: Mode::Enforce,
            personal: Mode::Enforce,
            unsupported: Unsupported::Warn,
            pid_namespace: true,
            deny: Vec::new(),
        }
    }
}
