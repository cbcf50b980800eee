//! The kinds of limit and their amounts, and the anima's schema for lowering them (`permissions.json` `"limits"`):
//! the part of the limits that the permission files name, below the limits of a call.

use serde::{Deserialize, Serialize};

/// One kind of limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Memory,
    Processes,
    OpenFiles,
    FileSize,
    Cpu,
}

impl Key {
    pub const ALL: [Key; 5] = [Key::Memory, Key::Processes, Key::OpenFiles, Key::FileSize, Key::Cpu];

    /// The settings key.
    pub fn name(self) -> &'static str {
        match self {
            Key::Memory => "memory_mib",
            Key::Processes => "processes",
            Key::OpenFiles => "open_files",
            Key::FileSize => "file_size_mib",
            Key::Cpu => "cpu_s",
        }
    }

    pub(crate) fn what(self) -> &'static str {
        match self {
            Key::Memory => "memory limit",
            Key::Processes => "process limit",
            Key::OpenFiles => "open-file limit",
            Key::FileSize => "file-size limit",
            Key::Cpu => "CPU-time limit",
        }
    }

    pub(crate) fn amount(self, v: u64) -> String {
        match self {
            Key::Memory | Key::FileSize => format!("{v} MiB"),
            Key::Processes => format!("{v} processes"),
            Key::OpenFiles => format!("{v} open files"),
            Key::Cpu => format!("{v} s of CPU time"),
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One amount per [`Key`] (`None`: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Amounts(pub [Option<u64>; 5]);

impl Amounts {
    pub fn get(&self, k: Key) -> Option<u64> {
        self.0[k.index()]
    }

    /// The defaults of the common and personal tiers.
    pub const TOOL_DEFAULT: Amounts = Amounts([Some(2048), Some(256), Some(1024), Some(1024), None]);
}

/// An anima's limits: `permissions.json` `"limits"` (a runner extension; AnimaWorks ignores it). They only lower
/// the tier's: a value above it is without effect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Lower {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_files: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_size_mib: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<u64>,
}

impl Lower {
    pub fn is_default(&self) -> bool {
        *self == Lower::default()
    }

    pub(crate) fn get(&self, k: Key) -> Option<u64> {
        match k {
            Key::Memory => self.memory_mib,
            Key::Processes => self.processes,
            Key::OpenFiles => self.open_files,
            Key::FileSize => self.file_size_mib,
            Key::Cpu => self.cpu_s,
        }
        // 0 would refuse every start; the lowest amount is 1.
        .map(|v| v.max(1))
    }
}
