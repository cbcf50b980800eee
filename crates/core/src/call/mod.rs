//! One call, start to end. A call is a value that can only be built by passing every check:
//!
//! ```text
//! runner.open(tool)                 discover + describe            → Tool      (an unknown tool is audited)
//! runner.open_file(name, path)      probe a file outside the tiers → Tool      (`check`: its own manifest only)
//! tool.action(name)                 pick the action                → Target    (an unknown action is audited)
//! target.parse_flags(words)         the schema-driven flags (CLI)               (a bad flag is audited)
//! target.prepare(args, &opts)       validate + permit + secrets + env + masker + audit handle → PreparedCall
//! call.run(obs, cancel)             one-shot process or pooled worker; mask; output_schema; audit outcome
//! tool.prepare_cli(argv, &opts)     a legacy cli_main argv: its gates, the same secrets, env and audit → PreparedCli
//! ```
//!
//! Only [`Target::prepare`] and [`OpenTool::prepare_cli`] make a prepared call, and nothing public runs a tool
//! without one: every front door (the generated CLI, `call`, legacy argv, `submit`, the task worker,
//! `run-pending`, `use-tool`, MCP, `check`) keeps only its own concern — parsing its input, rendering its output.
//! Each attempt writes exactly one audit line: a refusal or failure before the tool starts writes it where it
//! happens, a prepared call writes it when it ends.

//! Nothing else starts a tool for a call; these do not compile outside the crate:
//!
//! ```compile_fail
//! let _ = awt_core::spawn::start_tool_with; // spawn a tool file with any environment
//! ```
//! ```compile_fail
//! let _ = awt_core::pool::WorkerPool::run; // hand any request to a pooled worker
//! ```
//! ```compile_fail
//! let _ = awt_core::pool::Worker::spawn; // start `TOOL --serve` with any environment
//! ```
//! ```compile_fail
//! let _ = awt_core::pool::Worker::call;
//! ```
//! ```compile_fail
//! let _ = awt_core::Runner::open_resolved; // prepare a call from a forged manifest (its own gates)
//! ```
//! ```compile_fail
//! // a call opened on a forged manifest, field by field
//! fn forge<'r>(runner: &'r awt_core::Runner, resolved: awt_core::Resolved) -> awt_core::call::OpenTool<'r> {
//!     awt_core::call::OpenTool { runner, resolved }
//! }
//! ```

pub mod approve;
mod audit;
pub mod cli_alias;
mod masking;
mod passthrough;
mod prepare;
mod run;
mod target;
pub mod tool_env;

pub use prepare::{gate_of, PreparedCall, PreparedCli};
pub use target::{OpenTool, Target};

use crate::dirs::Dirs;
use crate::discover::ToolFile;
use crate::error::{CallError, ErrorCode};
use crate::manifest::Manifest;
use crate::policy::audit::AuditLog;
use crate::policy::permissions::{self, LoadedPermissions, PermissionsError};
use crate::pool::WorkerPool;
use crate::settings::{Settings, SettingsError};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use crate::limits::{DEFAULT_MAX_OUTPUT, MAX_OUTPUT_CEILING, MAX_OUTPUT_ENV};

/// `n` as an output cap, when at most [`MAX_OUTPUT_CEILING`]; `from` names where it came from.
pub fn check_max_output(n: u64, from: &str) -> Result<u64, CallError> {
    if n <= MAX_OUTPUT_CEILING {
        return Ok(n);
    }
    Err(CallError::new(
        ErrorCode::Usage,
        format!("{from} is {n} bytes, past the ceiling of {MAX_OUTPUT_CEILING} bytes (1 GiB)"),
    )
    .hint(format!(
        "give at most {MAX_OUTPUT_CEILING}; output past the cap is kept whole in a file anyway"
    )))
}

/// The longest deadline a call may have; longer ones are refused where they enter.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(crate::limits::MAX_SECONDS as u64);
/// A legacy argv that names no action with a timeout gets AnimaWorks' own background timeout, in the foreground
/// too (AnimaWorks has no deadline on a foreground `cli_main`; `expected_seconds` is a hint there).
pub const CLI_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Per-call options a caller may set.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Overrides the action's `timeout_s`.
    pub timeout: Option<Duration>,
    /// Overrides the runner's output cap.
    pub max_output: Option<u64>,
    /// Use this call id instead of a new one (background tasks reuse their task id).
    pub call_id: Option<String>,
    /// The tool's working directory; the anima dir when `None`.
    pub cwd: Option<PathBuf>,
    /// This process starts no other tool after this call (a one-shot command line): once the call's process
    /// group has ended, the guardian is retired ([`awt_sys::guardian::retire`]), so that its exit overlaps the rest
    /// of the call instead of delaying the runner's own.
    pub last_spawn: bool,
    /// The call is checked here and run elsewhere (a submit: its worker prepares it again): its sandbox is
    /// planned for the decisions and refusals only ([`crate::sandbox::Needs::Decide`]), and it can start nothing.
    pub check_only: bool,
    /// How a gated action that asks a human gets its answer ([`approve::Approval`]).
    pub approval: approve::Approval,
    /// Who answers the requests of MCP servers to their client (a front door's own MCP client); `None`: no
    /// capability is declared to servers ([`crate::mcp_servers::asks`]). Give every call of one client the same
    /// handler: its identity is part of a server session's key.
    pub server_requests: Option<crate::mcp_servers::asks::ClientAsks>,
}

/// A tool that was found and described.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub file: ToolFile,
    pub manifest: Manifest,
}

/// The runner: where tools are and how calls are bounded.
#[derive(Debug, Clone)]
pub struct Runner {
    pub dirs: Dirs,
    pub max_output: u64,
    /// Persistent workers for long-lived callers; `None` (the CLI) spawns one process per call.
    pub pool: Option<Arc<WorkerPool>>,
    settings: Arc<OnceLock<Result<Settings, SettingsError>>>,
    /// `$ANIMAWORKS_TOOL_MAX_OUTPUT` when it is not a usable cap: every call is refused with it.
    bad_max_output_env: Option<String>,
}

/// A fresh call id: `c-` and 12 hex digits.
pub fn new_call_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mix = nanos
        ^ ((std::process::id() as u64) << 32)
        ^ COUNTER.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9e3779b97f4a7c15);
    format!("c-{:012x}", mix & 0xffff_ffff_ffff)
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Seconds from a schema, a flag or a setting as a deadline: finite, positive, at most [`MAX_TIMEOUT`]
/// ([`crate::limits`]), else a usage error.
pub fn timeout_from_secs(secs: f64, what: &str) -> Result<Duration, CallError> {
    crate::limits::seconds(secs, what).map_err(|m| CallError::new(ErrorCode::Usage, m.to_string()))
}

impl Runner {
    pub fn new(dirs: Dirs) -> Runner {
        let env = std::env::var_os(MAX_OUTPUT_ENV).map(|v| v.to_string_lossy().into_owned());
        let parsed = env
            .as_deref()
            .map(|v| v.trim().parse::<u64>().ok().filter(|n| *n <= MAX_OUTPUT_CEILING));
        Runner {
            dirs,
            max_output: parsed.flatten().unwrap_or(DEFAULT_MAX_OUTPUT),
            pool: None,
            settings: Arc::new(OnceLock::new()),
            bad_max_output_env: env.filter(|_| parsed == Some(None)),
        }
    }

    /// The output cap of a call: its own, else the runner's; an unusable one is a usage error naming it.
    pub(crate) fn max_output_for(&self, opts: &CallOptions) -> Result<u64, CallError> {
        if let Some(n) = opts.max_output {
            return check_max_output(n, "the output cap (--max-output / \"max_output\")");
        }
        if let Some(v) = &self.bad_max_output_env {
            return Err(CallError::new(
                ErrorCode::Usage,
                format!("${MAX_OUTPUT_ENV} is {v:?}: not a number of bytes from 0 to {MAX_OUTPUT_CEILING}"),
            )
            .hint(format!(
                "set ${MAX_OUTPUT_ENV} to a number of bytes (e.g. 8388608), or unset it"
            )));
        }
        check_max_output(self.max_output, "the runner's output cap")
    }

    /// `<data dir>/animaworks-tool.json`, read once. A file that cannot be used stops every call that needs it.
    pub fn settings(&self) -> Result<&Settings, CallError> {
        self.settings_file().map_err(SettingsError::to_call_error)
    }

    /// [`Runner::settings`] with the file's own error, for callers that report it in their own terms.
    pub fn settings_file(&self) -> Result<&Settings, &SettingsError> {
        self.settings.get_or_init(|| Settings::load(&self.dirs.data)).as_ref()
    }

    /// The environment of a tool process (protocol.md §8), built by the policy engine under `policy`
    /// ([`Runner::env_policy`]).
    pub(crate) fn env_for(
        &self,
        call_id: &str,
        deadline_ms: u64,
        secrets: &[crate::policy::credentials::ResolvedCredential],
        policy: crate::policy::env::EnvPolicy,
    ) -> Result<Vec<(OsString, OsString)>, CallError> {
        let passthrough = &self.settings()?.env_passthrough;
        let ctx = crate::policy::env::CallContext {
            call_id: call_id.to_owned(),
            data_dir: self.dirs.data.clone(),
            anima_dir: self.dirs.anima.clone(),
            anima_name: self.dirs.anima_name(),
            deadline_ms,
        };
        Ok(crate::policy::env::build_env(
            std::env::vars_os(),
            &ctx,
            secrets,
            passthrough,
            policy,
        ))
    }

    /// The whole pipeline in one step, for programs that have the arguments as JSON: open → action → prepare →
    /// run. Progress and logs go to `obs` as they arrive.
    pub async fn call(
        &self,
        tool: &str,
        action: &str,
        args: serde_json::Map<String, serde_json::Value>,
        opts: &CallOptions,
        obs: &mut dyn crate::stream::Observer,
        cancel: crate::stream::Cancel,
    ) -> Result<serde_json::Value, CallError> {
        self.open(tool)
            .await?
            .action(action)?
            .prepare(args, opts)?
            .run(obs, cancel)
            .await
    }

    /// The anima's permissions. With no anima, the defaults: every tool, no gated action (fail closed).
    pub fn permissions(&self) -> Result<LoadedPermissions, PermissionsError> {
        match &self.dirs.anima {
            Some(a) => permissions::load(a),
            None => Ok(LoadedPermissions {
                permissions: Default::default(),
                source: permissions::PermissionsFile::Defaults(PathBuf::from(format!(
                    "<anima dir: pass --anima-dir or set {}>/permissions.json",
                    crate::env_vars::ANIMA_DIR.name
                ))),
            }),
        }
    }

    /// Where audit lines go: `$ANIMAWORKS_TOOL_AUDIT_LOG`, else `<anima dir>/state/tool_audit.jsonl`, else
    /// `<data dir>/state/tool_audit.jsonl`.
    pub fn audit_log(&self) -> AuditLog {
        match crate::env_vars::AUDIT_LOG.get_os() {
            Some(p) => AuditLog::at(PathBuf::from(p)),
            // A named anima dir that does not exist is not created by its first audit line (a typo in
            // ANIMAWORKS_ANIMA_DIR must stay visible); the data dir's log takes the line.
            None => AuditLog::for_anima(
                self.dirs
                    .anima
                    .as_deref()
                    .filter(|a| a.is_dir())
                    .unwrap_or(&self.dirs.data),
            ),
        }
    }
}

impl Runner {
    /// The sandbox plan of a process of `file` ([`crate::sandbox::for_call`] with this runner's dirs and settings).
    pub(crate) fn plan_sandbox(
        &self,
        file: &ToolFile,
        perms: &Result<LoadedPermissions, PermissionsError>,
        needs: crate::sandbox::Needs<'_>,
    ) -> Result<crate::sandbox::Plan, CallError> {
        let plans = self.pool.as_deref().map(WorkerPool::decisions);
        crate::sandbox::for_call(&self.dirs, self.settings()?, file, perms, needs, plans)
    }
}
