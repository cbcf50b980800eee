//! Running a prepared call: spawn (or borrow a pooled worker), stream, reap; then mask what comes back, hold the
//! result to the action's `output_schema`, and write the audit line.

use super::audit;
use super::masking::mask_error;
use super::prepare::{PreparedCall, PreparedCli, Route};
use crate::error::{CallError, Detail, ErrorCode};
use crate::policy::Masker;
use crate::pool::{Job, WorkerSpec};
use crate::spawn::{self, Purpose};
use crate::stream::{self, Cancel, Drive, Observer};
use serde_json::Value;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;

impl PreparedCall<'_> {
    /// Run the call. Progress and logs reach `obs` as they arrive, every resolved secret masked.
    pub async fn run(mut self, obs: &mut dyn Observer, cancel: Cancel) -> Result<Value, CallError> {
        self.audit.running = true;
        let out = self.execute(obs, cancel).await;
        note_proxy(&self.sandbox, &mut self.attempt);
        self.note_worker_sandbox();
        let out = out.and_then(|v| {
            let v = self.masker.mask_value(&v);
            crate::validate::check_output(&self.resolved.file.name, &self.action, &v, self.timeout).map(|_| v)
        });
        settle(self.runner, &mut self.audit, &self.attempt, &self.masker, out)
    }

    async fn execute(&self, obs: &mut dyn Observer, cancel: Cancel) -> Result<Value, CallError> {
        let runner = self.runner;
        let file = &self.resolved.file;
        let request = awt_protocol::Request {
            name: self.action.schema_name.clone(),
            args: self.args.clone(),
            context: awt_protocol::RequestContext {
                protocol: 1,
                call_id: self.call_id.clone(),
                tool: file.name.clone(),
                action: self.action.name.clone(),
                anima_name: runner.dirs.anima_name(),
                anima_dir: runner.dirs.anima.as_ref().map(|p| p.to_string_lossy().into_owned()),
                data_dir: Some(runner.dirs.data.to_string_lossy().into_owned()),
                timeout_s: Some(self.timeout.as_secs_f64()),
                deadline_ms: Some(self.deadline_ms),
            },
        };
        let mut line = serde_json::to_vec(&request).map_err(|e| CallError::new(ErrorCode::Internal, e.to_string()))?;
        line.push(b'\n');
        if self.masker.is_empty() {
            self.launch(line, obs, cancel).await
        } else {
            let mut masking = Masking::new(obs, &self.masker);
            let out = self.launch(line, &mut masking, cancel).await;
            masking.finish();
            out
        }
    }

    async fn launch(&self, line: Vec<u8>, obs: &mut dyn Observer, cancel: Cancel) -> Result<Value, CallError> {
        let runner = self.runner;
        let file = &self.resolved.file;
        let spill = crate::spill::SpillTo::dir(runner.dirs.outputs_dir()).masked(&self.masker);
        match &self.launch {
            Route::Pooled {
                env,
                perms,
                worker_sandbox,
                asks,
            } => {
                let pool = runner
                    .pool
                    .as_ref()
                    .expect("a pooled call was prepared on a runner with a pool");
                // A new worker serves every action: planned from the same permissions the gate read.
                let plan = || runner.plan_sandbox(file, perms, crate::sandbox::Needs::serve(&self.resolved.manifest));
                let spec = WorkerSpec {
                    file,
                    dirs: &runner.dirs,
                    env,
                    cwd: self.cwd.as_deref().or(runner.dirs.anima.as_deref()),
                    grants: grants_key(perms),
                    plan: &plan,
                    sandbox_seen: worker_sandbox,
                    broker: self.broker.as_ref().map(|b| b.call(runner, &file.name)),
                    asks: asks.as_ref(),
                };
                let job = Job {
                    tool: &file.name,
                    action: &self.action.name,
                    call_id: &self.call_id,
                    request: line,
                    deadline: tokio::time::Instant::now() + self.timeout,
                    timeout: self.timeout,
                    max_output: self.max_output,
                    spill: &spill,
                };
                pool.run(&spec, job, obs, cancel).await
            }
            Route::OneShot { env } => {
                let cwd = self.cwd.as_deref().or(runner.dirs.anima.as_deref());
                let (process, _call_end) = start_brokered(
                    self.broker.as_ref(),
                    runner,
                    file,
                    Purpose::Call,
                    env,
                    cwd,
                    &self.sandbox,
                    self.last_spawn,
                )
                .await?;
                let d = Drive {
                    tool: &file.name,
                    action: &self.action.name,
                    call_id: &self.call_id,
                    request: Some(line),
                    events: self.resolved.manifest.events,
                    timeout: self.timeout,
                    max_output: self.max_output,
                    spill,
                };
                let finished = stream::drive(process, d, obs, cancel).await;
                if self.last_spawn {
                    awt_sys::guardian::retire();
                }
                stream::interpret(finished, &file.name, &self.action.name, self.timeout, self.max_output)
                    .map_err(|e| explain_failure(&self.sandbox, file, runner, e))
            }
        }
    }
}

impl PreparedCall<'_> {
    /// Refuse the call for a reason of its front door (`submit --strict`): the attempt's one audit line says so.
    pub fn refuse(mut self, e: CallError) -> CallError {
        let e = mask_error(e, &self.masker);
        audit::outcome(self.runner, &mut self.audit, &self.attempt, Err(&e), &self.masker);
        e
    }
}

impl PreparedCli<'_> {
    /// Run `cli_main(argv)` with the caller's stdio; the deadline holds. Returns the module's exit code.
    pub async fn run_inherit(mut self, cancel: Cancel) -> Result<i32, CallError> {
        self.audit.running = true;
        let out = self
            .drive(true, &mut stream::Quiet, cancel)
            .await
            .and_then(|f| match f.ending {
                stream::Ending::Exited(s) => Ok(s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))),
                _ => stream::interpret(f, &self.resolved.file.name, "cli", self.timeout, self.max_output).map(|_| 0),
            })
            .map_err(|e| explain_failure(&self.sandbox, &self.resolved.file, self.runner, e));
        note_proxy(&self.sandbox, &mut self.attempt);
        let out = out.map_err(|e| mask_error(e, &self.masker));
        audit::outcome(
            self.runner,
            &mut self.audit,
            &self.attempt,
            out.as_ref().map(|c| Some(*c)),
            &self.masker,
        );
        out
    }

    /// Run `cli_main(argv)` with its stdout captured as the result (value output, protocol.md §5.1), as a
    /// background task does.
    pub async fn run_captured(mut self, obs: &mut dyn Observer, cancel: Cancel) -> Result<Value, CallError> {
        self.audit.running = true;
        let mut masking = Masking::new(obs, &self.masker);
        let out = match self.drive(false, &mut masking, cancel).await {
            Ok(f) => match cli_refusal(&f, &self.resolved) {
                Some(e) => Err(e),
                None => {
                    // AnimaWorks keeps a legacy task's stdout as printed (stripped), not parsed.
                    let printed = match &f.stdout {
                        stream::Stdout::Value(b) => {
                            std::str::from_utf8(b).ok().map(|s| Value::String(s.trim().to_owned()))
                        }
                        _ => None,
                    };
                    stream::interpret(f, &self.resolved.file.name, "cli", self.timeout, self.max_output)
                        .map(|v| printed.unwrap_or(v))
                        .map_err(|e| explain_failure(&self.sandbox, &self.resolved.file, self.runner, e))
                }
            },
            Err(e) => Err(e),
        };
        masking.finish();
        note_proxy(&self.sandbox, &mut self.attempt);
        settle(self.runner, &mut self.audit, &self.attempt, &self.masker, out)
    }

    async fn drive(
        &self,
        inherit: bool,
        obs: &mut dyn Observer,
        cancel: Cancel,
    ) -> Result<stream::Finished, CallError> {
        let runner = self.runner;
        let argv: Vec<OsString> = self.argv.iter().map(OsString::from).collect();
        let cwd = self.cwd.as_deref().or(runner.dirs.anima.as_deref());
        let mode = Purpose::Cli { argv: &argv, inherit };
        let (process, _call_end) = start_brokered(
            self.broker.as_ref(),
            runner,
            &self.resolved.file,
            mode,
            &self.env,
            cwd,
            &self.sandbox,
            self.last_spawn,
        )
        .await?;
        let mut process = process;
        // The caller's streams: the tool's output passes through the runner, masked.
        let through = inherit.then(|| super::passthrough::start(&mut process.child, &self.masker));
        let d = Drive {
            tool: &self.resolved.file.name,
            action: "cli",
            call_id: &self.call_id,
            request: None,
            events: false,
            timeout: self.timeout,
            max_output: self.max_output,
            // The caller's own stdio is never spilled; captured output is, masked.
            spill: if inherit {
                crate::spill::SpillTo::never()
            } else {
                crate::spill::SpillTo::dir(runner.dirs.outputs_dir()).masked(&self.masker)
            },
        };
        let finished = stream::drive(process, d, obs, cancel).await;
        if let Some(t) = through {
            t.finish().await;
        }
        if self.last_spawn {
            awt_sys::guardian::retire();
        }
        Ok(finished)
    }
}

/// Start a call's tool, with its credential broker when it has one: the broker's end of the socket pair is the
/// one descriptor handed over ([`spawn::start_tool_async_with`]), its number in the tool's environment. The guard
/// returned ends the broker's call when the caller drops it, after the call. `last`: the process starts nothing
/// after this call (a one-shot command), so the start runs on this thread ([`spawn::start_tool_with`]): no other
/// call waits for the thread meanwhile, and a thread made for the start would cost more (its creation,
/// the hand-offs and its end at exit, bench/README.md) than the start's wait.
async fn start_brokered(
    plan: Option<&super::prepare::BrokerPlan>,
    runner: &crate::call::Runner,
    file: &crate::discover::ToolFile,
    mode: Purpose<'_>,
    env: &[(OsString, OsString)],
    cwd: Option<&std::path::Path>,
    sandbox: &crate::sandbox::Plan,
    last: bool,
) -> Result<(spawn::Started, Option<crate::broker::CallEnd>), CallError> {
    let Some(plan) = plan else {
        let started = if last {
            spawn::start_tool_with(file, &runner.dirs, mode, env, cwd, Some(sandbox), &[])
        } else {
            spawn::start_tool_async(file, &runner.dirs, mode, env, cwd, Some(sandbox)).await
        };
        return Ok((started?, None));
    };
    let mut env = env.to_vec();
    let mut broker = plan.start(runner, &file.name, &mut env);
    let hand: Vec<_> = broker.as_ref().and_then(|b| b.handover()).into_iter().collect();
    let started = if last {
        spawn::start_tool_with(file, &runner.dirs, mode, &env, cwd, Some(sandbox), &hand)
    } else {
        spawn::start_tool_async_with(file, &runner.dirs, mode, &env, cwd, Some(sandbox), &hand).await
    };
    drop(hand);
    let end = broker.as_mut().map(|b| {
        b.started();
        b.call_end()
    });
    Ok((started?, end))
}

/// The shim refused a gated subcommand reached under another name (an argparse alias): `permission_denied`.
fn cli_refusal(f: &stream::Finished, r: &crate::call::Resolved) -> Option<CallError> {
    let refused =
        matches!(f.ending, stream::Ending::Exited(s) if s.code() == Some(ErrorCode::PermissionDenied.exit_code()));
    let line = f
        .stderr_tail
        .lines()
        .rev()
        .find(|l| l.starts_with(crate::call::cli_alias::REFUSAL_MARK))?;
    refused.then(|| {
        CallError::new(
            ErrorCode::PermissionDenied,
            line[crate::call::cli_alias::REFUSAL_MARK.len()..].trim().to_owned(),
        )
        .hint("add the grant named to external_tools.allow in permissions.json")
        .with(Detail::Tool, r.file.name.clone())
        .with(Detail::Reason, "grant_missing")
    })
}

impl PreparedCall<'_> {
    /// A pooled call ran under its worker's sandbox (every action's union), not its own action's plan: the
    /// attempt says the worker's, once a worker took the call.
    fn note_worker_sandbox(&mut self) {
        if let Route::Pooled { worker_sandbox, .. } = &self.launch {
            if let Some(s) = worker_sandbox.lock().expect("worker sandbox lock").take() {
                self.attempt.sandbox = Some(s);
            }
        }
    }
}

impl Drop for PreparedCall<'_> {
    fn drop(&mut self) {
        // Dropped while a worker had it: that worker's sandbox, as for a call that ends.
        self.note_worker_sandbox();
        audit::abandoned(self.runner, &mut self.audit, &self.attempt, &self.masker);
    }
}

impl Drop for PreparedCli<'_> {
    fn drop(&mut self) {
        audit::abandoned(self.runner, &mut self.audit, &self.attempt, &self.masker);
    }
}

/// The anima's sandbox grants as a key of the pool: a worker started under other grants (a revoked network, a
/// narrowed folder) is not reused. (Unreadable permissions never get here: the gate refuses every call then.)
fn grants_key(
    perms: &Result<crate::policy::permissions::LoadedPermissions, crate::policy::permissions::PermissionsError>,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    perms.as_ref().ok().map(|p| &p.permissions.sandbox).hash(&mut h);
    h.finish()
}

/// What the sandbox proxy of an enforced host list relayed and refused, into the audit line's `sandbox`.
/// A failed call says which limit ended it, or what the sandbox did not give it (docs/sandbox.md).
fn explain_failure(
    plan: &crate::sandbox::Plan,
    file: &crate::discover::ToolFile,
    runner: &crate::call::Runner,
    e: CallError,
) -> CallError {
    let e = plan.limits.explain(e);
    let perms = runner
        .dirs
        .anima
        .as_ref()
        .map(|a| a.join(crate::policy::permissions::JSON_FILE));
    crate::confined::explain(e, plan, file, perms.as_deref())
}

fn note_proxy(plan: &crate::sandbox::Plan, attempt: &mut audit::Attempt) {
    if let (Some(log), Some(s)) = (plan.proxy_log(), attempt.sandbox.as_mut()) {
        s["proxy"] = log;
    }
    // How each limit was enforced once the process started (a cgroup that could not be made falls back).
    if let Some(s) = attempt.sandbox.as_mut() {
        s["limits"] = plan.limits.summary();
    }
}

/// The end of a call that returns a value: every secret masked (a result is masked before it is held to its
/// schema), one audit line.
fn settle(
    runner: &crate::call::Runner,
    handle: &mut audit::Handle,
    attempt: &audit::Attempt,
    masker: &Masker,
    out: Result<Value, CallError>,
) -> Result<Value, CallError> {
    let out = match out {
        Ok(v) => Ok(masker.mask_value(&v)),
        Err(e) => Err(mask_error(e, masker)),
    };
    audit::outcome(runner, handle, attempt, out.as_ref().map(|_| Some(0)), masker);
    out
}

/// Passes events on with every resolved secret masked; stderr is masked as a stream (a secret split across reads
/// is still masked), and what it held back is passed on when the observer is dropped.
pub(crate) struct Masking<'a> {
    inner: &'a mut dyn Observer,
    masker: &'a Masker,
    stderr: crate::policy::mask::StreamMasker,
}

impl<'a> Masking<'a> {
    pub(crate) fn new(inner: &'a mut dyn Observer, masker: &'a Masker) -> Self {
        let stderr = crate::policy::mask::StreamMasker::new(masker);
        Masking { inner, masker, stderr }
    }
}

impl Masking<'_> {
    /// The stream has ended: pass on what was held back (also done on drop).
    pub(crate) fn finish(&mut self) {
        let mut rest = Vec::new();
        self.stderr.finish(&mut rest);
        if !rest.is_empty() {
            self.inner.stderr(&rest);
        }
    }
}

impl Drop for Masking<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Masking<'_> {
    /// A result's blocks that hold a secret inside their base64 are left out first; then every string is masked.
    fn event_checked(&mut self, event: &awt_protocol::Event, raw: &[u8]) {
        if let awt_protocol::Event::Result { content: Some(blocks), .. } = event {
            if let Some(kept) = crate::stream::content::without_encoded_secrets(blocks, self.masker) {
                let mut ev = event.clone();
                if let awt_protocol::Event::Result { content, .. } = &mut ev {
                    *content = Some(kept);
                }
                if let Ok(line) = serde_json::to_string(&ev) {
                    return self.event_masked(&ev, line.as_bytes());
                }
                return;
            }
        }
        self.event_masked(event, raw)
    }

    fn event_masked(&mut self, event: &awt_protocol::Event, raw: &[u8]) {
        let text = String::from_utf8_lossy(raw);
        let masked = self.masker.mask_str(&text);
        if masked != text {
            if let Ok(ev) = serde_json::from_str(&masked) {
                self.inner.event(&ev, masked.as_bytes());
            }
            return;
        }
        // A secret the tool's JSON escaped its own way (`\u0026` for `&`, as Go writes it) shows only decoded.
        let Ok(decoded) = serde_json::to_value(event) else {
            return;
        };
        let masked = self.masker.mask_value(&decoded);
        if masked == decoded {
            self.inner.event(event, raw);
        } else if let Ok(ev) = serde_json::from_value(masked.clone()) {
            self.inner.event(&ev, masked.to_string().as_bytes());
        }
    }
}

impl Observer for Masking<'_> {
    fn event(&mut self, event: &awt_protocol::Event, raw: &[u8]) {
        self.event_checked(event, raw);
    }
    fn unknown(&mut self, raw: &[u8]) {
        let masked = self.masker.mask_str(&String::from_utf8_lossy(raw));
        self.inner.unknown(masked.as_bytes());
    }
    fn stderr(&mut self, chunk: &[u8]) {
        let mut out = Vec::with_capacity(chunk.len());
        self.stderr.push(chunk, &mut out);
        if !out.is_empty() {
            self.inner.stderr(&out);
        }
    }
    fn flush(&mut self) {
        self.inner.flush();
    }
}
