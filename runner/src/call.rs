//! One call, start to end: discover → validate → permit → spawn → stream → reap. Every entry point (the CLI,
//! `use-tool`, the MCP server, background tasks, the library) goes through [`Runner::call`].

use crate::cache::Probed;
use crate::dirs::Dirs;
use crate::discover::{self, ToolFile};
use crate::error::{CallError, ErrorCode};
use crate::manifest::{Action, Manifest};
use crate::policy::audit::{AuditLog, AuditRecord};
use crate::policy::credentials::{self, ResolvedCredential};
use crate::policy::env::{CallContext, EnvPolicy};
use crate::policy::gate::{self, Decision, Gate, LegacyProfile, Refusal, RefusalKind};
use crate::policy::permissions::{self, LoadedPermissions, PermissionsError};
use crate::policy::Masker;
use crate::probe;
use crate::spawn::{self, Mode};
use crate::stream::{self, Cancel, Drive, Observer};
use crate::workers::WorkerPool;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Default output cap: 8 MiB (protocol.md §5.3).
pub const DEFAULT_MAX_OUTPUT: u64 = 8 * 1024 * 1024;

/// Per-call options a caller may set.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Overrides the action's `timeout_s`.
    pub timeout: Option<Duration>,
    /// Overrides the runner's output cap.
    pub max_output: Option<u64>,
    /// Use this call id instead of a new one (background tasks reuse their task id).
    pub call_id: Option<String>,
    /// The tool's working directory. `None`: the anima dir when there is one, else the runner's. The CLI's
    /// foreground calls give the caller's, as AnimaWorks does (relative file arguments then mean what they say).
    pub cwd: Option<PathBuf>,
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

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Runner {
    pub fn new(dirs: Dirs) -> Runner {
        let max_output = std::env::var("ANIMAWORKS_TOOL_MAX_OUTPUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_MAX_OUTPUT);
        Runner {
            dirs,
            max_output,
            pool: None,
        }
    }

    /// The environment of a tool process (protocol.md §8), built by the policy engine under `policy`
    /// ([`Runner::env_policy`]).
    pub fn env(
        &self,
        call_id: &str,
        deadline_ms: u64,
        secrets: &[ResolvedCredential],
        policy: EnvPolicy,
    ) -> Result<Vec<(OsString, OsString)>, CallError> {
        let passthrough = self.env_settings()?.passthrough;
        let ctx = CallContext {
            call_id: call_id.to_owned(),
            data_dir: self.dirs.data.clone(),
            anima_dir: self.dirs.anima.clone(),
            anima_name: self.dirs.anima_name(),
            deadline_ms,
        };
        Ok(
            crate::policy::env::build_env(std::env::vars_os(), &ctx, secrets, &passthrough, policy)
                .into_iter()
                .collect(),
        )
    }

    /// Resolve the credentials the tool and the action declared; a missing required one stops the call here.
    pub fn secrets(&self, r: &Resolved, act: Option<&Action>) -> Result<Vec<ResolvedCredential>, CallError> {
        let mut decls = r
            .manifest
            .credentials
            .iter()
            .chain(act.into_iter().flat_map(|a| a.profile.credentials.iter()))
            .peekable();
        // Most tools declare none: skip copying the whole environment on the call path then.
        if decls.peek().is_none() {
            return Ok(Vec::new());
        }
        let caller: HashMap<String, String> = std::env::vars().collect();
        credentials::resolve_all(&self.dirs.data, self.dirs.anima_name().as_deref(), caller, decls).map_err(|e| {
            CallError::new(ErrorCode::PermissionDenied, e.to_string())
                .hint("set the credential in one of the places named, then call again")
                .with("tool", r.file.name.clone())
                .with("reason", "credential_missing")
        })
    }

    /// Find `tool` in the tiers and read its manifest (from the cache when it is unchanged).
    pub async fn resolve(&self, tool: &str) -> Result<Resolved, CallError> {
        let found = discover::scan_for(&self.dirs, tool);
        let Some(file) = found.tools.get(tool).cloned() else {
            // Not there: the full scan, for the reason and the names that come close.
            let scan = discover::scan(&self.dirs);
            let why = scan
                .problems
                .iter()
                .find(|p| p.tool == tool)
                .map(|p| format!(": {}", p.message))
                .unwrap_or_default();
            let mut close: Vec<&str> = scan
                .tools
                .keys()
                .filter(|k| k.contains(tool) || tool.contains(k.as_str()))
                .map(String::as_str)
                .collect();
            close.truncate(5);
            let hint = if close.is_empty() {
                "`animaworks-tool tools` shows every tool".to_owned()
            } else {
                format!(
                    "did you mean {}? `animaworks-tool tools` shows every tool",
                    close.join(", ")
                )
            };
            return Err(CallError::new(
                ErrorCode::UnknownTool,
                format!("no tool named {tool:?} in any tier{why}"),
            )
            .hint(hint)
            .with("tool", tool));
        };
        // Why the cache first: the probe's environment costs file reads that a cached tool does not need.
        let probed = match probe::cached(&file, &self.dirs) {
            Some(p) => p,
            None => probe::manifest(&file, &self.dirs, &self.probe_env()?).await.0,
        };
        match probed {
            Probed::Ok(manifest) => Ok(Resolved { file, manifest }),
            Probed::Failed {
                reason,
                stderr_tail,
                spawn,
            } => {
                let mut e = CallError::new(
                    if spawn {
                        ErrorCode::SpawnFailed
                    } else {
                        ErrorCode::UnknownAction
                    },
                    format!("{tool} ({}) cannot be called: {reason}", file.path.display()),
                )
                .hint("fix the tool; after installing a missing dependency run `animaworks-tool refresh`")
                .with("tool", tool);
                if !stderr_tail.is_empty() {
                    e = e.with("stderr_tail", stderr_tail);
                }
                Err(e)
            }
        }
    }

    /// Look up `action` (either spelling) in a resolved tool.
    pub fn action<'a>(&self, r: &'a Resolved, action: &str) -> Result<&'a Action, CallError> {
        r.manifest.action(action).ok_or_else(|| {
            let names: Vec<&str> = r.manifest.actions.iter().map(|a| a.name.as_str()).collect();
            CallError::new(
                ErrorCode::UnknownAction,
                format!(
                    "tool {} has no action {action:?}; its actions: {}",
                    r.file.name,
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                ),
            )
            .hint(format!("`animaworks-tool {} --help` lists them", r.file.name))
            .with("tool", r.file.name.clone())
            .with("action", action)
        })
    }

    /// Call `tool`'s `action` with `args`. Progress and logs go to `obs` as they arrive.
    pub async fn call(
        &self,
        tool: &str,
        action: &str,
        args: Map<String, Value>,
        opts: &CallOptions,
        obs: &mut dyn Observer,
        cancel: Cancel,
    ) -> Result<Value, CallError> {
        let resolved = self.resolve(tool).await?;
        let act = self.action(&resolved, action)?.clone();
        crate::validate::check_args(tool, &act, &args)?;
        self.permit(&resolved, &act)?;
        self.run(&resolved, &act, args, opts, obs, cancel).await
    }

    /// The anima's permissions. With no anima, the defaults: every tool, no gated action (fail closed).
    pub fn permissions(&self) -> Result<LoadedPermissions, PermissionsError> {
        match &self.dirs.anima {
            Some(a) => permissions::load(a),
            None => Ok(LoadedPermissions {
                permissions: Default::default(),
                source: permissions::Source::Defaults(PathBuf::from(
                    "<anima dir: pass --anima-dir or set ANIMAWORKS_ANIMA_DIR>/permissions.json",
                )),
            }),
        }
    }

    /// May this action of this tool run? The one gate of every call path.
    pub fn permit(&self, r: &Resolved, act: &Action) -> Result<(), CallError> {
        let perms = self.permissions();
        let gate = gate_of(r, act);
        let d = gate::decide(&perms, &r.file.name, r.file.tier, &act.name, &gate);
        self.audit_refusal(r, Some(&act.name), &d);
        refusal_to_error(d, &r.file.name, Some(&act.name))
    }

    /// May this legacy `cli_main` argv run? Every word naming a gated subcommand needs its grant.
    pub fn permit_cli(&self, r: &Resolved, argv: &[String]) -> Result<(), CallError> {
        let perms = self.permissions();
        let profile = match (&r.manifest.legacy_profile_error, &r.manifest.legacy_profile) {
            (Some(_), _) => LegacyProfile::Unreadable,
            (None, Some(map)) => LegacyProfile::Known(map),
            (None, None) => LegacyProfile::Absent,
        };
        let d = gate::decide_cli(&perms, &r.file.name, r.file.tier, argv, profile);
        self.audit_refusal(r, None, &d);
        refusal_to_error(d, &r.file.name, None)
    }

    /// Where audit lines go: `$ANIMAWORKS_TOOL_AUDIT_LOG`, else `<anima dir>/state/tool_audit.jsonl`, else
    /// `<data dir>/state/tool_audit.jsonl`.
    pub fn audit_log(&self) -> AuditLog {
        match std::env::var_os("ANIMAWORKS_TOOL_AUDIT_LOG").filter(|v| !v.is_empty()) {
            Some(p) => AuditLog::at(PathBuf::from(p)),
            None => AuditLog::for_anima(self.dirs.anima.as_deref().unwrap_or(&self.dirs.data)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn audit(
        &self,
        r: &Resolved,
        action: Option<&str>,
        d: &Decision,
        ms: u64,
        outcome: &str,
        exit: Option<i32>,
        args: Value,
        m: &Masker,
    ) {
        let rec = AuditRecord::new(
            self.dirs.anima_name().as_deref(),
            &r.file.name,
            action,
            r.file.tier,
            d,
            ms,
            outcome,
            exit,
            args,
        )
        .with_env(self.env_policy(r));
        if let Err(e) = self.audit_log().append(&rec, m) {
            tracing::warn!("could not append to the audit log: {e}");
        }
    }

    fn audit_refusal(&self, r: &Resolved, action: Option<&str>, d: &Decision) {
        if let Decision::Deny(_) = d {
            self.audit(
                r,
                action,
                d,
                0,
                "refused",
                Some(ErrorCode::PermissionDenied.exit_code()),
                Value::Null,
                &Masker::default(),
            );
        }
    }

    fn audit_outcome(
        &self,
        r: &Resolved,
        action: &str,
        started: std::time::Instant,
        out: &Result<Value, CallError>,
        args: Value,
        m: &Masker,
    ) {
        let (outcome, exit) = match out {
            Ok(_) => ("ok", 0),
            Err(e) => (e.code.as_str(), e.code.exit_code()),
        };
        // The only refusal after the gate: a required credential that is set nowhere.
        let decision = match out {
            Err(e) if e.code == ErrorCode::PermissionDenied => Decision::Deny(Refusal {
                kind: RefusalKind::CredentialMissing,
                message: e.message.clone(),
                hint: e.hint.clone().unwrap_or_default(),
                key: None,
                permissions_path: PathBuf::new(),
            }),
            _ => Decision::Allow,
        };
        self.audit(
            r,
            Some(action),
            &decision,
            started.elapsed().as_millis() as u64,
            outcome,
            Some(exit),
            args,
            m,
        );
    }

    /// Run an already resolved and validated action.
    pub async fn run(
        &self,
        resolved: &Resolved,
        act: &Action,
        args: Map<String, Value>,
        opts: &CallOptions,
        obs: &mut dyn Observer,
        cancel: Cancel,
    ) -> Result<Value, CallError> {
        let started = std::time::Instant::now();
        let audit_args = Value::Object(args.clone());
        let mut masker = Masker::default();
        let out = self
            .run_inner(resolved, act, args, opts, obs, cancel, &mut masker)
            .await;
        self.audit_outcome(resolved, &act.name, started, &out, audit_args, &masker);
        out
    }

    // Why the out-parameter: the masker is made half-way (once the secrets are known) and the audit line needs it
    // whether the call succeeded or not.
    #[allow(clippy::too_many_arguments)]
    async fn run_inner(
        &self,
        resolved: &Resolved,
        act: &Action,
        args: Map<String, Value>,
        opts: &CallOptions,
        obs: &mut dyn Observer,
        cancel: Cancel,
        masker: &mut Masker,
    ) -> Result<Value, CallError> {
        let tool = resolved.file.name.as_str();
        let call_id = opts.call_id.clone().unwrap_or_else(new_call_id);
        let timeout = opts.timeout.unwrap_or_else(|| Duration::from_secs_f64(act.timeout_s()));
        let deadline_ms = now_ms() + timeout.as_millis() as u64;
        let max_output = opts.max_output.unwrap_or(self.max_output);
        let request = tool_sdk::protocol::Request {
            name: act.schema_name.clone(),
            args,
            context: tool_sdk::protocol::Context {
                protocol: 1,
                call_id: call_id.clone(),
                tool: tool.to_owned(),
                action: act.name.clone(),
                anima_name: self.dirs.anima_name(),
                anima_dir: self.dirs.anima.as_ref().map(|p| p.to_string_lossy().into_owned()),
                data_dir: Some(self.dirs.data.to_string_lossy().into_owned()),
                timeout_s: Some(timeout.as_secs_f64()),
                deadline_ms: Some(deadline_ms),
            },
        };
        let mut line = serde_json::to_vec(&request).map_err(|e| CallError::new(ErrorCode::Internal, e.to_string()))?;
        line.push(b'\n');
        let secrets = self.secrets(resolved, Some(act))?;
        *masker = Masker::new(secrets.iter().map(|s| s.value.as_str()));
        let masker: &Masker = masker;
        if let Some(pool) = self
            .pool
            .as_ref()
            .filter(|_| resolved.manifest.persistent && resolved.manifest.events)
        {
            return pool
                .run(self, resolved, act, &call_id, line, timeout, max_output, obs, cancel)
                .await;
        }
        let env = self.env(&call_id, deadline_ms, &secrets, self.env_policy(resolved))?;
        let child = self.spawn(&resolved.file, Mode::Call, &env, opts.cwd.as_deref())?;
        let d = Drive {
            tool,
            action: &act.name,
            call_id: &call_id,
            request: Some(line),
            events: resolved.manifest.events,
            timeout,
            max_output,
            spill_dir: self.dirs.outputs_dir(),
        };
        let finished = if masker.is_empty() {
            stream::drive(child, d, obs, cancel).await
        } else {
            stream::drive(child, d, &mut Masking { inner: obs, masker }, cancel).await
        };
        match stream::interpret(finished, tool, &act.name, timeout, max_output) {
            Ok(v) => Ok(masker.mask_value(&v)),
            Err(e) => Err(mask_error(e, masker)),
        }
    }

    fn spawn(
        &self,
        file: &ToolFile,
        mode: Mode<'_>,
        env: &[(OsString, OsString)],
        cwd: Option<&std::path::Path>,
    ) -> Result<tokio::process::Child, CallError> {
        let cwd = cwd.or(self.dirs.anima.as_deref());
        let explain = |e: std::io::Error| {
            let (msg, hint) = spawn::explain_spawn_error(file, &self.dirs, &e);
            CallError::new(ErrorCode::SpawnFailed, msg)
                .hint(hint)
                .with("tool", file.name.clone())
        };
        let mut cmd = spawn::command(file, &self.dirs, mode, env, cwd).map_err(explain)?;
        spawn::start(&mut cmd).map_err(explain)
    }

    /// A legacy module's `cli_main(argv)`: argv passes unchanged, stdio is the caller's, the deadline holds
    /// (`opts.timeout`, else the default); `opts.cwd` as in a call.
    pub async fn cli(
        &self,
        resolved: &Resolved,
        argv: &[OsString],
        opts: &CallOptions,
        cancel: Cancel,
    ) -> Result<i32, CallError> {
        let timeout = opts
            .timeout
            .unwrap_or_else(|| Duration::from_secs_f64(crate::manifest::DEFAULT_TIMEOUT_S));
        let call_id = new_call_id();
        let deadline_ms = now_ms() + timeout.as_millis() as u64;
        let secrets = self.secrets(resolved, None)?;
        let env = self.env(&call_id, deadline_ms, &secrets, self.env_policy(resolved))?;
        let child = self.spawn(&resolved.file, Mode::Cli(argv), &env, opts.cwd.as_deref())?;
        let d = Drive {
            tool: &resolved.file.name,
            action: "cli",
            call_id: &call_id,
            request: None,
            events: false,
            timeout,
            max_output: self.max_output,
            spill_dir: self.dirs.outputs_dir(),
        };
        let started = std::time::Instant::now();
        let f = stream::drive(child, d, &mut stream::Quiet, cancel).await;
        let masker = Masker::new(secrets.iter().map(|s| s.value.as_str()));
        let argv_json = Value::Array(
            argv.iter()
                .map(|a| Value::String(a.to_string_lossy().into_owned()))
                .collect(),
        );
        let outcome = match f.ending {
            stream::Ending::Exited(s) if s.success() => "ok",
            stream::Ending::Exited(_) => "exit_nonzero",
            stream::Ending::TimedOut => "timeout",
            stream::Ending::Cancelled => "cancelled",
        };
        let exit = match f.ending {
            stream::Ending::Exited(s) => s.code(),
            stream::Ending::TimedOut => Some(ErrorCode::Timeout.exit_code()),
            stream::Ending::Cancelled => Some(ErrorCode::Cancelled.exit_code()),
        };
        self.audit(
            resolved,
            Some("cli"),
            &Decision::Allow,
            started.elapsed().as_millis() as u64,
            outcome,
            exit,
            argv_json,
            &masker,
        );
        match f.ending {
            stream::Ending::Exited(s) => {
                use std::os::unix::process::ExitStatusExt;
                Ok(s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)))
            }
            _ => stream::interpret(f, &resolved.file.name, "cli", timeout, self.max_output).map(|_| 0),
        }
    }
}

/// How an action is gated. A legacy profile that could not be read gates every action the tool has (fail closed).
pub fn gate_of(r: &Resolved, act: &Action) -> Gate {
    match r.manifest.legacy_profile_error {
        Some(_) => Gate::Unknown,
        None => Gate::from_profile(&act.profile),
    }
}

fn refusal_to_error(d: Decision, tool: &str, action: Option<&str>) -> Result<(), CallError> {
    match d {
        Decision::Allow => Ok(()),
        Decision::Deny(r) => {
            let mut e = CallError::new(ErrorCode::PermissionDenied, r.message)
                .hint(r.hint)
                .with("tool", tool)
                .with("reason", r.kind.as_str())
                .with("permissions_path", r.permissions_path.to_string_lossy().into_owned());
            if let Some(a) = action {
                e = e.with("action", a);
            }
            if let Some(k) = r.key {
                e = e.with("key", k);
            }
            Err(e)
        }
    }
}

pub(crate) fn mask_error(mut e: CallError, m: &Masker) -> CallError {
    if m.is_empty() {
        return e;
    }
    e.message = m.mask_str(&e.message);
    e.hint = e.hint.map(|h| m.mask_str(&h));
    for v in e.details.values_mut() {
        m.mask_value_in_place(v);
    }
    e
}

/// Passes events on with every resolved secret masked.
pub(crate) struct Masking<'a> {
    pub(crate) inner: &'a mut dyn Observer,
    pub(crate) masker: &'a Masker,
}

impl Observer for Masking<'_> {
    fn event(&mut self, event: &tool_sdk::protocol::Event, raw: &[u8]) {
        let text = String::from_utf8_lossy(raw);
        let masked = self.masker.mask_str(&text);
        if masked == text {
            self.inner.event(event, raw);
        } else if let Ok(ev) = serde_json::from_str(&masked) {
            self.inner.event(&ev, masked.as_bytes());
        }
    }
    fn unknown(&mut self, raw: &[u8]) {
        let masked = self.masker.mask_str(&String::from_utf8_lossy(raw));
        self.inner.unknown(masked.as_bytes());
    }
    fn stderr(&mut self, chunk: &[u8]) {
        let masked = self.masker.mask_str(&String::from_utf8_lossy(chunk));
        self.inner.stderr(masked.as_bytes());
    }
    fn flush(&mut self) {
        self.inner.flush();
    }
}
