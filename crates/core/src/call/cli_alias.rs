//! A legacy `cli_main` dispatches on what argparse resolves, which the argv words do not always show: an alias
//! (`add_parser("delete-all", aliases=["rmall"])`) reaches a gated subcommand under a name the profile never
//! mentions. The runner hands the Python shim the gated keys this anima may not run ([`REFUSE_VAR`], a JSON
//! list); the shim refuses, before any handler runs, a subcommand reached under any of its names (the name
//! itself, an alias, an abbreviation) when one of them is refused, printing [`REFUSAL_MARK`] on stderr and exiting
//! with the runner's own `permission_denied` code (6).

use super::Resolved;
use crate::discover::Launch;
use crate::policy::permissions::{LoadedPermissions, PermissionsError};
use std::ffi::OsString;

/// The environment variable that carries the refused keys to the shim.
pub const REFUSE_VAR: &str = crate::env_vars::CLI_REFUSE.name;
/// How the shim's refusal starts on stderr.
pub const REFUSAL_MARK: &str = "animaworks-tool: permission_denied:";

/// The variable for a `cli_main` call of `r`, when its profile gates something this anima may not run. `perms`
/// are the ones the gate already read for this call.
pub fn env_for(perms: &Result<LoadedPermissions, PermissionsError>, r: &Resolved) -> Option<(OsString, OsString)> {
    if r.file.launch != Launch::Python {
        return None;
    }
    let profile = r.manifest.legacy_profile.as_ref()?;
    let keys = crate::policy::gate::refused_cli_keys(perms, &r.file.name, r.file.tier, profile);
    if keys.is_empty() {
        return None;
    }
    Some((REFUSE_VAR.into(), serde_json::to_string(&keys).ok()?.into()))
}
