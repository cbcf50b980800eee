//! Validate, permit, resolve secrets, build the environment and the masker, open the audit log: what turns a
//! [`Target`] into a [`PreparedCall`] (or an [`OpenTool`] and a legacy argv into a [`PreparedCli`]). Nothing else
//! can make these values, so nothing runs a tool that did not pass here.

use super::audit::{self, Attempt};
use super::masking::lenient_masker;
use super::target::{OpenTool, Target};
use super::{new_call_id, now_ms, timeout_from_secs, CallOptions, Resolved, Runner, CLI_TIMEOUT};
use crate::broker::{self, Broker, Ledger};
use crate::error::{CallError, Detail, ErrorCode};
use crate::manifest::ActionSpec;
use crate::policy::credentials::{self, ResolvedCredential};
use crate::policy::gate::{self, Decision, Gate, LegacyProfile};
use crate::policy::grants::CredentialGrants;
use crate::policy::mask::LateSecrets;
use crate::policy::permissions::{LoadedPermissions, PermissionsError};
use crate::policy::Masker;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// How a prepared call reaches its tool.
pub(crate) enum Route {
    /// A process for this call alone, with this environment.
    OneShot { env: Vec<(OsString, OsString)> },
    /// A persistent worker of the runner's pool (protocol.md §9), keyed by this environment and the anima's
    /// sandbox grants. `perms` (what the gate read) plans a new worker's sandbox; `worker_sandbox` receives the
    /// sandbox of the worker that ran the call, for its audit line. `asks` answers an MCP server's requests to
    /// its client.
    Pooled {
        env: Vec<(OsString, OsString)>,
        perms: Box<Result<LoadedPermissions, PermissionsError>>,
        worker_sandbox: std::sync::Mutex<Option<Value>>,
        asks: Option<crate::mcp_servers::asks::ClientAsks>,
    },
}

/// A call that passed every check, ready to run. Dropped without running, it writes no audit line (a `submit`
/// stores the task; its worker prepares the call again and audits it); dropped while it runs, it writes the
/// line of a cancelled call.
pub struct PreparedCall<'r> {
    pub(crate) runner: &'r Runner,
    pub(crate) resolved: Resolved,
    pub(crate) action: ActionSpec,
    pub(crate) args: Map<String, Value>,
    pub(crate) call_id: String,
    pub(crate) timeout: Duration,
    pub(crate) deadline_ms: u64,
    pub(crate) max_output: u64,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) last_spawn: bool,
    pub(crate) masker: Masker,
    pub(crate) launch: Route,
    pub(crate) secrets: Vec<ResolvedCredential>,
    /// The credential broker the tool gets, when it is a `.py` tool started for this call alone.
    pub(crate) broker: Option<BrokerPlan>,
    /// The sandbox of a one-shot process (a pooled worker has its own, planned when it starts).
    pub(crate) sandbox: crate::sandbox::Plan,
    pub(crate) attempt: Attempt,
    pub(crate) audit: audit::Handle,
}

/// A legacy module's `cli_main(argv)` that passed every check, ready to run.
pub struct PreparedCli<'r> {
    pub(crate) runner: &'r Runner,
    pub(crate) resolved: Resolved,
    pub(crate) argv: Vec<String>,
    pub(crate) call_id: String,
    pub(crate) timeout: Duration,
    pub(crate) max_output: u64,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) last_spawn: bool,
    pub(crate) masker: Masker,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) secrets: Vec<ResolvedCredential>,
    pub(crate) broker: Option<BrokerPlan>,
    pub(crate) sandbox: crate::sandbox::Plan,
    pub(crate) attempt: Attempt,
    pub(crate) audit: audit::Handle,
}

impl<'r> Target<'r> {
    /// Validate `args`, ask the gate, resolve the credentials, build the environment: a call ready to run.
    /// Every failure here is audited as an attempt.
    pub fn prepare(self, args: Map<String, Value>, opts: &CallOptions) -> Result<PreparedCall<'r>, CallError> {
        let runner = self.tool.runner;
        let resolved = self.tool.resolved;
        let action = self.action;
        let tool = resolved.file.name.clone();
        let mut attempt = Attempt::new(
            &tool,
            Some(resolved.file.tier),
            Some(&action.name),
            Value::Object(args.clone()),
        );
        // A refused attempt is logged with its arguments, which may hold a declared secret, and its error (an
        // invalid argument is quoted in it) is masked with the same values.
        let fail = |a: &Attempt, e: CallError, m: &Masker| Err(super::masking::mask_error(a.failed(runner, e, m), m));
        let early = || lenient_masker(runner, &resolved, Some(&action));
        let masker = early();
        let timeout = match opts.timeout {
            Some(t) => timeout_from_secs(t.as_secs_f64(), "the call's timeout"),
            None => timeout_from_secs(action.timeout_s(), &format!("{tool}.{}: timeout_s", action.name)),
        };
        // Validation is bounded by the call's timeout too (a schema can cost more to check than any call).
        let within = timeout.as_ref().map_or(CLI_TIMEOUT, |t| *t);
        if let Err(e) = crate::validate::check_args(&tool, &action, &args, &masker, within) {
            return fail(&attempt, e, &masker);
        }
        let gate = gate_of(&resolved, &action);
        let perms = super::approve::settle(
            runner,
            &resolved,
            crate::policy::approval::CallKind::Action,
            &action.name,
            &Value::Object(args.clone()),
            &masker,
            runner.permissions(),
            &|p| gate::decide(p, &tool, resolved.file.tier, &action.name, &gate),
            opts,
            &|d| refusal_to_error(d, &tool, Some(&action.name)),
        );
        let perms = match perms.and_then(|p| shadow_refusal(runner, &resolved, &p).map(|_| p)) {
            Ok(p) => p,
            Err(e) => return fail(&attempt, e, &early()),
        };
        let timeout = match timeout {
            Ok(t) => t,
            Err(e) => return fail(&attempt, e, &early()),
        };
        let pooled = runner.pool.is_some() && resolved.manifest.persistent && resolved.manifest.events;
        let declared = action.profile.sandbox.as_ref();
        let needs = if pooled || opts.check_only {
            crate::sandbox::Needs::Decide(declared)
        } else {
            crate::sandbox::Needs::Call(declared)
        };
        let env = if pooled { EnvFor::Worker } else { EnvFor::Call };
        let step = Rest {
            resolved: &resolved,
            action: Some(&action),
            perms: &perms,
            needs,
            env,
            timeout,
            gated: gate != Gate::Open,
        };
        let Settled {
            sandbox,
            secrets,
            broker,
            masker,
            call_id,
            deadline_ms,
            env,
            max_output,
            audit,
        } = match step.settle(runner, opts, &mut attempt) {
            Ok(s) => s,
            Err((e, m)) => return fail(&attempt, e, &m),
        };
        let launch = match pooled {
            true => Route::Pooled {
                env,
                perms: Box::new(perms),
                worker_sandbox: Default::default(),
                asks: opts.server_requests.clone(),
            },
            false => Route::OneShot { env },
        };
        Ok(PreparedCall {
            runner,
            action,
            args,
            call_id,
            timeout,
            deadline_ms,
            max_output,
            cwd: opts.cwd.clone(),
            last_spawn: opts.last_spawn,
            masker,
            launch,
            secrets,
            broker,
            sandbox,
            attempt,
            audit,
            resolved,
        })
    }
}

impl<'r> OpenTool<'r> {
    /// A legacy module's `cli_main(argv)`: every argv word that names a gated subcommand needs its grant; the
    /// credentials, environment and audit are a call's. Every failure here is audited as an attempt.
    pub fn prepare_cli(self, argv: &[String], opts: &CallOptions) -> Result<PreparedCli<'r>, CallError> {
        let runner = self.runner;
        let resolved = self.resolved;
        let tool = resolved.file.name.clone();
        let mut attempt = Attempt::new(&tool, Some(resolved.file.tier), Some("cli"), Value::from(argv.to_vec()));
        // A refused attempt is logged with its argv, which may hold a declared secret, and its error is masked with
        // the same values.
        let fail = |a: &Attempt, e: CallError, m: &Masker| Err(super::masking::mask_error(a.failed(runner, e, m), m));
        let early = || lenient_masker(runner, &resolved, None);
        if !resolved.manifest.cli {
            return fail(
                &attempt,
                CallError::new(
                    ErrorCode::Usage,
                    format!("{tool} has no cli_main: name one of its actions"),
                )
                .hint(format!("`animaworks-tool {tool} --help` lists them")),
                &early(),
            );
        }
        let profile = match (
            &resolved.manifest.legacy_profile_error,
            &resolved.manifest.legacy_profile,
        ) {
            (Some(_), _) => LegacyProfile::Unreadable,
            (None, Some(map)) => LegacyProfile::Known(map),
            (None, None) => LegacyProfile::Absent,
        };
        let gated = match profile {
            LegacyProfile::Unreadable => true,
            LegacyProfile::Known(map) => map
                .values()
                .any(|v| v.get("gated").and_then(Value::as_bool).unwrap_or(false)),
            LegacyProfile::Absent => false,
        };
        let perms = super::approve::settle(
            runner,
            &resolved,
            crate::policy::approval::CallKind::Cli,
            "cli",
            &Value::from(argv.to_vec()),
            &early(),
            runner.permissions(),
            &|p| gate::decide_cli(p, &tool, resolved.file.tier, argv, profile),
            opts,
            &|d| refusal_to_error(d, &tool, None),
        );
        let perms = match perms.and_then(|p| shadow_refusal(runner, &resolved, &p).map(|_| p)) {
            Ok(p) => p,
            Err(e) => return fail(&attempt, e, &early()),
        };
        let timeout = match opts.timeout {
            Some(t) => timeout_from_secs(t.as_secs_f64(), "the call's timeout"),
            None => cli_timeout(&resolved, argv),
        };
        let timeout = match timeout {
            Ok(t) => t,
            Err(e) => return fail(&attempt, e, &early()),
        };
        let step = Rest {
            resolved: &resolved,
            action: None,
            perms: &perms,
            needs: crate::sandbox::Needs::serve(&resolved.manifest),
            env: EnvFor::Call,
            timeout,
            gated,
        };
        let Settled {
            sandbox,
            secrets,
            broker,
            masker,
            call_id,
            mut env,
            max_output,
            audit,
            ..
        } = match step.settle(runner, opts, &mut attempt) {
            Ok(s) => s,
            Err((e, m)) => return fail(&attempt, e, &m),
        };
        // The gated subcommands this anima may not run, for the shim to refuse under any other name.
        env.extend(crate::call::cli_alias::env_for(&perms, &resolved));
        Ok(PreparedCli {
            runner,
            argv: argv.to_vec(),
            call_id,
            timeout,
            max_output,
            cwd: opts.cwd.clone(),
            last_spawn: opts.last_spawn,
            masker,
            env,
            secrets,
            broker,
            sandbox,
            attempt,
            audit,
            resolved,
        })
    }
}

/// Which environment a call's tool gets: a pooled worker's (no call id, no deadline) or this call's.
#[derive(Clone, Copy)]
enum EnvFor {
    Worker,
    Call,
}

/// What a call ([`Target::prepare`]) and a legacy `cli_main` call ([`OpenTool::prepare_cli`]) share once the gate
/// has said yes and the timeout is known: one order of steps for both.
struct Rest<'a> {
    resolved: &'a Resolved,
    action: Option<&'a ActionSpec>,
    perms: &'a Result<LoadedPermissions, PermissionsError>,
    needs: crate::sandbox::Needs<'a>,
    env: EnvFor,
    timeout: Duration,
    gated: bool,
}

/// The sandbox, the credentials and their broker, the masker, the call's id and deadline, the environment, the
/// output cap and the audit log.
struct Settled {
    sandbox: crate::sandbox::Plan,
    secrets: Vec<ResolvedCredential>,
    broker: Option<BrokerPlan>,
    masker: Masker,
    call_id: String,
    deadline_ms: u64,
    env: Vec<(OsString, OsString)>,
    max_output: u64,
    audit: audit::Handle,
}

impl Rest<'_> {
    /// Each failure comes with the masker its audit line and error are masked with: the lenient one until the
    /// credentials are resolved, theirs after.
    fn settle(self, runner: &Runner, opts: &CallOptions, attempt: &mut Attempt) -> Result<Settled, (CallError, Masker)> {
        let r = self.resolved;
        let early = || lenient_masker(runner, r, self.action);
        let sandbox = runner
            .plan_sandbox(&r.file, self.perms, self.needs)
            .map_err(|e| (e, early()))?;
        attempt.sandbox = Some(sandbox.summary());
        let grants = grants_of(runner, r, self.perms).map_err(|e| (e, early()))?;
        let mut creds = Credentials::default();
        let pooled = matches!(self.env, EnvFor::Worker);
        let found = secrets(runner, r, self.action, pooled, &grants, &mut creds);
        attempt.credentials = Some(creds.audit());
        found.map_err(|e| (e, early()))?;
        let secrets = creds.values;
        let broker = BrokerPlan::new(runner, r, grants);
        let masker = Masker::new(secrets.iter().map(|s| s.value.as_str()));
        let masker = match &broker {
            Some(b) => {
                attempt.brokered = Some(b.ledger.clone());
                masker.with_late(b.late.clone())
            }
            None => masker,
        };
        let call_id = opts.call_id.clone().unwrap_or_else(new_call_id);
        let deadline_ms = now_ms().saturating_add(self.timeout.as_millis() as u64);
        let policy = runner.env_policy(r);
        attempt.env = policy.as_str();
        let env = match self.env {
            EnvFor::Worker => runner.env_for("worker", 0, &secrets, policy),
            EnvFor::Call => runner.env_for(&call_id, deadline_ms, &secrets, policy),
        };
        let env = match env {
            Ok(e) => e,
            Err(e) => return Err((e, masker)),
        };
        let max_output = match runner.max_output_for(opts) {
            Ok(n) => n,
            Err(e) => return Err((e, masker)),
        };
        let audit = match audit::Handle::open(runner, self.gated) {
            Ok(h) => h,
            Err(e) => return Err((e, masker)),
        };
        Ok(Settled {
            sandbox,
            secrets,
            broker,
            masker,
            call_id,
            deadline_ms,
            env,
            max_output,
            audit,
        })
    }
}

impl PreparedCall<'_> {
    /// The credentials resolved for it (a task records where they sit, never their values).
    pub fn secrets(&self) -> &[ResolvedCredential] {
        &self.secrets
    }
    pub fn call_id(&self) -> &str {
        &self.call_id
    }
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }
    pub fn action(&self) -> &ActionSpec {
        &self.action
    }
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
    /// The arguments as given (secrets included): never write these anywhere but to the tool.
    pub fn args(&self) -> &Map<String, Value> {
        &self.args
    }
    /// The arguments with every resolved secret masked: what may be stored or shown.
    pub fn masked_args(&self) -> Value {
        self.masker.mask_value(&Value::Object(self.args.clone()))
    }
}

impl PreparedCli<'_> {
    /// The credentials resolved for it (a task records where they sit, never their values).
    pub fn secrets(&self) -> &[ResolvedCredential] {
        &self.secrets
    }
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }
    pub fn argv(&self) -> &[String] {
        &self.argv
    }
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
    /// `v` with every resolved secret masked.
    pub fn mask(&self, v: &Value) -> Value {
        self.masker.mask_value(v)
    }
    /// The argv with every resolved secret masked.
    pub fn masked_argv(&self) -> Value {
        self.masker.mask_value(&Value::from(self.argv.clone()))
    }
}

/// How an action is gated. A legacy profile that could not be read gates every action the tool has (fail closed).
pub fn gate_of(r: &Resolved, act: &ActionSpec) -> Gate {
    match r.manifest.legacy_profile_error {
        Some(_) => Gate::Unknown,
        None => Gate::from_profile(&act.profile),
    }
}

impl Runner {
    /// The credentials a tool's action (or its `cli_main`) declares, resolved here, by the one resolver a prepared
    /// call uses: a worker on another machine puts its own values back into a task's masked arguments with them.
    pub async fn declared_secrets(
        &self,
        tool: &str,
        action: Option<&str>,
    ) -> Result<Vec<ResolvedCredential>, CallError> {
        let resolved = self.resolve(tool).await?;
        let act = match action {
            Some(a) => Some(resolved.manifest.action(a).cloned().ok_or_else(|| {
                let names: Vec<&str> = resolved.manifest.actions.iter().map(|x| x.name.as_str()).collect();
                crate::suggest::unknown_action(tool, a, &names)
            })?),
            None => None,
        };
        let perms = self.permissions();
        let grants = grants_of(self, &resolved, &perms)?;
        let mut c = Credentials::default();
        secrets(self, &resolved, act.as_ref(), false, &grants, &mut c)?;
        Ok(c.values)
    }
}

/// A legacy argv's deadline: [`CLI_TIMEOUT`] (AnimaWorks' 30 minutes: its CLI has no deadline and its background
/// runner gives a task 30 minutes), or the longest timeout of the actions it names when that is longer (an
/// `EXECUTION_PROFILE`'s `expected_seconds` counts three times). Never the 60 s default of an action: `cli_main`
/// is the module's own program, whose subcommands AnimaWorks never bounded.
fn cli_timeout(r: &Resolved, argv: &[String]) -> Result<Duration, CallError> {
    let named = argv.iter().filter_map(|w| r.manifest.action(w)).map(|a| a.timeout_s());
    let legacy = r.manifest.legacy_profile.as_ref().into_iter().flat_map(|p| {
        argv.iter()
            .filter_map(|w| p.get(w).or_else(|| p.get(&w.replace('_', "-"))))
            .filter_map(|v| v.get("expected_seconds").and_then(Value::as_f64))
            .map(|e| (3.0 * e).max(crate::manifest::DEFAULT_TIMEOUT_S))
            .collect::<Vec<_>>()
    });
    match named.chain(legacy).reduce(f64::max) {
        Some(secs) if secs > CLI_TIMEOUT.as_secs_f64() => {
            timeout_from_secs(secs, &format!("{}: the timeout its profile gives", r.file.name))
        }
        _ => Ok(CLI_TIMEOUT),
    }
}

/// The credentials of one call: the values resolved, and the names granted and refused (for its audit line).
#[derive(Debug, Default)]
pub(crate) struct Credentials {
    pub values: Vec<ResolvedCredential>,
    pub granted: Vec<String>,
    pub refused: Vec<String>,
}

impl Credentials {
    /// The audit line's `credentials` field; `brokered` is filled in when the call ends.
    pub fn audit(&self) -> Value {
        serde_json::json!({"granted": self.granted, "refused": self.refused, "brokered": []})
    }
}

/// The grants of `r`'s tool under `perms` and the operator's tier defaults.
pub(crate) fn grants_of(
    runner: &Runner,
    r: &Resolved,
    perms: &Result<LoadedPermissions, PermissionsError>,
) -> Result<CredentialGrants, CallError> {
    let defaults = runner.settings()?.credential_defaults;
    Ok(CredentialGrants::of(perms, &r.file.name, r.file.tier, &defaults))
}

/// Resolve the credentials the tool and the action declared that the anima's permissions grant. A declared
/// credential that is not granted (or is another anima's key) stops the call when it is required and is left
/// out when it is optional; a missing required one stops the call. A pooled worker serves every action of its
/// tool, so it also gets the other actions' credentials where they are granted and set.
fn secrets(
    runner: &Runner,
    r: &Resolved,
    act: Option<&ActionSpec>,
    pooled: bool,
    grants: &CredentialGrants,
    out: &mut Credentials,
) -> Result<(), CallError> {
    let others: Vec<_> = if pooled {
        r.manifest
            .actions
            .iter()
            .flat_map(|a| a.profile.credentials.iter())
            .map(|d| awt_protocol::CredentialDecl {
                required: false,
                ..d.clone()
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut decls = r
        .manifest
        .credentials
        .iter()
        .chain(act.into_iter().flat_map(|a| a.profile.credentials.iter()))
        .chain(others.iter())
        .peekable();
    // Most tools declare none: skip copying the whole environment on the call path then.
    if decls.peek().is_none() {
        return Ok(());
    }
    let caller: HashMap<String, String> = std::env::vars().collect();
    let resolver = credentials::Resolver::new(&runner.dirs.data, runner.dirs.anima_name().as_deref(), caller)
        .in_animas(crate::animas::folders(&runner.dirs));
    let refuse = |message: String, hint: String, key: Option<String>| {
        let mut e = CallError::new(ErrorCode::PermissionDenied, message)
            .hint(hint)
            .with(Detail::Tool, r.file.name.clone())
            .with(Detail::Reason, "credential_not_granted")
            .with(Detail::PermissionsPath, grants.path().to_string_lossy().into_owned());
        if let Some(k) = key {
            e = e.with(Detail::Key, k);
        }
        e
    };
    let mut seen: Vec<&str> = Vec::new();
    for decl in decls {
        if seen.contains(&decl.env.as_str()) {
            continue;
        }
        seen.push(&decl.env);
        let note = |list: &mut Vec<String>| {
            if !list.contains(&decl.name) {
                list.push(decl.name.clone());
            }
        };
        if !grants.allows(&decl.name) {
            note(&mut out.refused);
            if decl.required {
                return Err(refuse(
                    grants.refusal(&decl.name),
                    format!(
                        "a tool's --schemas asks for a credential; the anima's permissions grant it (docs/credentials.md): add {}",
                        grants.grant_line(&decl.name)
                    ),
                    Some(grants.grant_line(&decl.name)),
                ));
            }
            continue;
        }
        let covered = grants.allows_env(&decl.name, &decl.env);
        let resolved = if covered {
            resolver.resolve(decl)
        } else {
            resolver.resolve_config_only(decl)
        };
        if !covered && matches!(resolved, Ok(None)) {
            note(&mut out.refused);
            if decl.required {
                return Err(refuse(
                    grants.env_refusal(&decl.name, &decl.env),
                    format!(
                        "a tool's --schemas picks the key a credential is looked up under; a grant covers its own \
                         name's keys (docs/credentials.md): add {}",
                        grants.grant_line(&decl.env)
                    ),
                    Some(grants.grant_line(&decl.env)),
                ));
            }
            continue;
        }
        match resolved {
            Ok(Some(found)) => {
                note(&mut out.granted);
                out.values.push(found);
            }
            Ok(None) => {}
            Err(e @ credentials::CredentialError::Foreign { .. }) => {
                note(&mut out.refused);
                if decl.required {
                    return Err(refuse(
                        e.to_string(),
                        "a per-anima key is resolved only for that anima's own calls".into(),
                        None,
                    ));
                }
            }
            Err(e) => {
                return Err(CallError::new(ErrorCode::PermissionDenied, e.to_string())
                    .hint("set the credential in one of the places named, then call again")
                    .with(Detail::Tool, r.file.name.clone())
                    .with(Detail::Reason, "credential_missing"))
            }
        }
    }
    Ok(())
}

/// A personal tool named like a common tool does not inherit the grants written for that name (docs/credentials.md):
/// while permissions name the tool without a tier, such a shadow is refused.
fn shadow_refusal(
    runner: &Runner,
    r: &Resolved,
    perms: &Result<LoadedPermissions, PermissionsError>,
) -> Result<(), CallError> {
    let tool = &r.file.name;
    let Ok(p) = perms else { return Ok(()) };
    if r.file.tier != crate::tier::Tier::Personal {
        return Ok(());
    }
    let named = crate::policy::grants::untiered_grants(&p.permissions, tool);
    if named.is_empty() || !common_has(runner, tool) {
        return Ok(());
    }
    Err(CallError::new(
        ErrorCode::PermissionDenied,
        format!(
            "the personal tool '{tool}' shadows the common tool '{tool}', and {} grants that name ({}): grants written \
             for the common tool are not the personal one's",
            p.path().display(),
            named.join(", ")
        ),
    )
    .hint(format!(
        "rename the personal tool, or write its credential grant as \"personal:{tool}\" and keep no other grant naming '{tool}'"
    ))
    .with(Detail::Tool, tool.clone())
    .with(Detail::Reason, "shadow_grants")
    .with(Detail::PermissionsPath, p.path().to_string_lossy().into_owned()))
}

/// Does the common tier hold a tool file named `tool` (any extension)?
fn common_has(runner: &Runner, tool: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(runner.dirs.common_dir()) else {
        return false;
    };
    entries.filter_map(Result::ok).any(|e| {
        let n = e.file_name();
        let n = n.to_string_lossy();
        !n.starts_with(['.', '_']) && std::path::Path::new(&*n).file_stem().is_some_and(|s| s == tool)
    })
}

pub(super) fn refusal_to_error(d: Decision, tool: &str, action: Option<&str>) -> Result<(), CallError> {
    match d {
        Decision::Allow => Ok(()),
        Decision::Deny(r) => {
            let mut e = CallError::new(ErrorCode::PermissionDenied, r.message)
                .hint(r.hint)
                .with(Detail::Tool, tool)
                .with(Detail::Reason, r.kind.as_str())
                .with(
                    Detail::PermissionsPath,
                    r.permissions_path.to_string_lossy().into_owned(),
                );
            if let Some(a) = action {
                e = e.with(Detail::Action, a);
            }
            if let Some(k) = r.key {
                e = e.with(Detail::Key, k);
            }
            Err(e)
        }
    }
}

/// The broker a call will start with its tool (or the pooled worker's broker answers for it): only a `.py` tool
/// (an AnimaWorks module or an SDK tool, whose `get_credential` the shim routes to it) and a tool that declares
/// `"broker": true` (tool-sdk-rs's `Tool::broker`) get one, so a call of any other tool costs nothing more.
pub(crate) struct BrokerPlan {
    grants: CredentialGrants,
    pub ledger: Ledger,
    pub late: LateSecrets,
}

impl BrokerPlan {
    fn new(_runner: &Runner, r: &Resolved, grants: CredentialGrants) -> Option<BrokerPlan> {
        (r.file.launch == crate::discover::Launch::Python || r.manifest.broker).then(|| BrokerPlan {
            grants,
            ledger: Ledger::default(),
            late: LateSecrets::default(),
        })
    }

    /// What the broker answers for this call.
    pub(crate) fn call(&self, runner: &Runner, tool: &str) -> (broker::CallScope, Ledger, LateSecrets) {
        let ctx = broker::CallScope {
            data_dir: runner.dirs.data.clone(),
            anima_name: runner.dirs.anima_name(),
            animas: crate::animas::folders(&runner.dirs),
            grants: self.grants.clone(),
            tool: tool.to_owned(),
        };
        (ctx, self.ledger.clone(), self.late.clone())
    }

    /// Start a broker for this call alone; `env` gets the variable naming the descriptor. A broker that cannot
    /// start leaves the tool without one (its `get_credential` then works as without the runner).
    pub(crate) fn start(&self, runner: &Runner, tool: &str, env: &mut Vec<(OsString, OsString)>) -> Option<Broker> {
        let (ctx, ledger, late) = self.call(runner, tool);
        broker::start_into(broker::for_call(ctx, ledger, late), env)
    }
}
