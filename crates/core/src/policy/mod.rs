//! The policy engine: who may call what, with which secrets, in which environment, and what is recorded.
//!
//! Everything here is pure: files are read and written, no process is started. The call path uses it in this
//! order, for every call whatever its entry point (`call`, `<tool> <argv…>`, `submit`, MCP, `use-tool`):
//!
//! 1. [`permissions::load`] the anima's `permissions.json` (or `permissions.md`). A broken file is an error
//!    value, not a panic and not the defaults: it is handed to the gate as it is, and the gate refuses.
//! 2. [`gate::decide`] (structured calls) or [`gate::decide_cli`] (legacy `cli_main` passthrough): one
//!    [`gate::Decision`] that is either `Allow` or `Deny(Refusal)`; a refusal names the key to add and the file.
//! 3. [`credentials::resolve_all`] the credentials the tool and the action declared, through the AnimaWorks
//!    chain (config.json, [`vault`], shared/credentials.json, environment).
//! 4. [`env::build_env`] the tool's environment from scratch: a few of the caller's variables, the context,
//!    the resolved secrets, and the operator's passthrough list.
//! 5. After the call, [`audit::AuditLog::append`] one JSON line, with arguments masked by a [`mask::Masker`]
//!    that holds every resolved secret.

pub mod approval;
pub mod addresses;
pub mod audit;
pub mod credentials;
pub mod env;
pub mod gate;
pub mod grants;
pub mod lax;
pub mod limit_grants;
pub mod mask;
pub mod permissions;
pub mod sandbox_grants;
pub mod vault;

pub use crate::tier::Tier;
pub use gate::{decide, decide_cli, truthy, Decision, Gate, LegacyProfile, Refusal, RefusalKind};
pub use mask::Masker;
pub use permissions::{LoadedPermissions, Permissions, PermissionsError};
