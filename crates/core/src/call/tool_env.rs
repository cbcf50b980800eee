//! Which environment policy a tool gets (protocol.md §8, [`crate::policy::env`]), and the environments of
//! `--schemas` probes, which run before the shim has said which convention a `.py` module follows.

use super::{Resolved, Runner};
use crate::discover::Launch;
use crate::error::CallError;
use crate::policy::env::{self, EnvPolicy, EnvSettings};
use crate::probe::ProbeEnv;

impl Runner {
    /// `<data dir>/animaworks-tool.json`'s environment settings; an unusable file is an error naming it.
    pub fn env_settings(&self) -> Result<EnvSettings, CallError> {
        self.settings().map(EnvSettings::from_runner)
    }

    /// The policy of a resolved tool: `inherit` for an AnimaWorks module (a `.py` file the shim runs by the
    /// AnimaWorks convention) unless `legacy_env` says `clean`; `clean` for every other tool, and whenever the
    /// settings cannot be read.
    pub fn env_policy(&self, r: &Resolved) -> EnvPolicy {
        let legacy = r.file.launch == Launch::Python && r.manifest.legacy;
        self.env_settings().map_or(EnvPolicy::Clean, |s| s.policy(legacy))
    }

    /// The environments of `--schemas` probes (no call id, no deadline, no secrets).
    pub fn probe_env(&self) -> Result<ProbeEnv, CallError> {
        let legacy = self.env_settings()?.policy(true);
        Ok(ProbeEnv {
            clean: self.env_for("probe", 0, &[], EnvPolicy::Clean)?,
            legacy: self.env_for("probe", 0, &[], legacy)?,
        })
    }

    /// What reaches a tool under `policy` from this caller, as a sentence for `--help` and `doctor`: variable
    /// names only, never values.
    pub fn env_summary(&self, policy: EnvPolicy) -> String {
        let passthrough = self.env_settings().map(|s| s.passthrough).unwrap_or_default();
        let names = env::visible_names(std::env::vars_os(), policy, &passthrough);
        match policy {
            EnvPolicy::Clean => format!(
                "clean: {} (from the caller), the ANIMAWORKS_* context and the credentials it declares",
                if names.is_empty() {
                    "nothing".to_owned()
                } else {
                    names.join(", ")
                }
            ),
            EnvPolicy::Inherit => format!(
                "inherit: the caller's whole environment ({} variables, as AnimaWorks gives its tools), the \
                 ANIMAWORKS_* context of the call and the credentials it declares",
                names.len()
            ),
        }
    }
}
