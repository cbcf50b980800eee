//! `"limits"`: the resource limits of each tier's calls (docs/limits.md), as the file says
//! them. [`crate::resources`] turns them into the amounts of a call.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// One amount as written: absent (the tier's default), `null` (no limit) or a whole number above 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Amount {
    /// Not in the file: the tier's default.
    #[default]
    Default,
    /// `null`: no limit.
    Unlimited,
    /// A whole number above 0.
    Set(u64),
}

impl Amount {
    fn is_default(&self) -> bool {
        *self == Amount::Default
    }

    /// The amount over a tier's default.
    pub fn over(self, default: Option<u64>) -> Option<u64> {
        match self {
            Amount::Default => default,
            Amount::Unlimited => None,
            Amount::Set(n) => Some(n),
        }
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Amount, D::Error> {
        // Reached only for a key that is present (absent keys take `Default`).
        Ok(match Option::<u64>::deserialize(d)? {
            None => Amount::Unlimited,
            Some(n) => Amount::Set(n),
        })
    }
}

impl JsonSchema for Amount {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Amount".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A whole number above 0, or null for no limit; absent: the tier's default.",
            "type": ["integer", "null"],
            "minimum": 1
        })
    }
}

/// The limits of one tier's calls; each key absent (the tier's default), `null` (no limit) or a whole number
/// above 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TierAmounts {
    /// Memory, in MiB (the call's cgroup, else `RLIMIT_DATA` of each process).
    #[serde(skip_serializing_if = "Amount::is_default")]
    pub memory_mib: Amount,
    /// Processes and threads (the call's cgroup; not enforced without one).
    #[serde(skip_serializing_if = "Amount::is_default")]
    pub processes: Amount,
    /// Open files of each process (`RLIMIT_NOFILE`).
    #[serde(skip_serializing_if = "Amount::is_default")]
    pub open_files: Amount,
    /// The largest file a process may write, in MiB (`RLIMIT_FSIZE`).
    #[serde(skip_serializing_if = "Amount::is_default")]
    pub file_size_mib: Amount,
    /// CPU time of each process, in seconds (`RLIMIT_CPU`).
    #[serde(skip_serializing_if = "Amount::is_default")]
    pub cpu_s: Amount,
}

impl TierAmounts {
    /// The first key that is 0 (which would refuse every start).
    pub fn zero(&self) -> Option<&'static str> {
        self.each()
            .into_iter()
            .find(|(_, v)| *v == Amount::Set(0))
            .map(|(k, _)| k)
    }

    /// Each key with its name, in the order of [`crate::resources::Key::ALL`].
    pub fn each(&self) -> [(&'static str, Amount); 5] {
        [
            ("memory_mib", self.memory_mib),
            ("processes", self.processes),
            ("open_files", self.open_files),
            ("file_size_mib", self.file_size_mib),
            ("cpu_s", self.cpu_s),
        ]
    }
}

/// Per tier (common and personal: 2048 MiB, 256 processes, 1024 open files, 1024 MiB files, no CPU limit;
/// core: none), and whether a cgroup may be made for a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSettings {
    /// Core tools' limits (default: none).
    #[serde(deserialize_with = "super::object")]
    pub core: TierAmounts,
    /// Common tools' limits.
    #[serde(deserialize_with = "super::object")]
    pub common: TierAmounts,
    /// Personal tools' limits.
    #[serde(deserialize_with = "super::object")]
    pub personal: TierAmounts,
    /// `false`: rlimits only, even where a cgroup could be made for the call.
    #[schemars(extend("default" = true))]
    pub cgroups: Option<bool>,
}

impl LimitsSettings {
    /// The first amount that is 0 (which would refuse every start), as `tier.key`.
    pub fn zero(&self) -> Option<String> {
        [
            ("core", &self.core),
            ("common", &self.common),
            ("personal", &self.personal),
        ]
        .into_iter()
        .flat_map(|(t, a)| a.each().map(move |(k, v)| (t, k, v)))
        .find(|(_, _, v)| *v == Amount::Set(0))
        .map(|(t, k, _)| format!("{t}.{k}"))
    }
}
