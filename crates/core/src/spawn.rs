//! The one place where a tool file becomes a process. Every choice here has a reason:
//! - interpreter by extension (protocol.md §1), so a `.py` module needs no exec bit and no shebang;
//! - its own session (so its own process group, and no controlling terminal), so the whole tree can be signalled
//!   and reaped, and a tool cannot open `/dev/tty` to write past masking or read what a person types;
//! - `PR_SET_PDEATHSIG` and registration with the [`guardian`](awt_sys::guardian), so it dies with the runner;
//! - a cleared environment (the caller's secrets stay out), built by the policy engine;
//! - arguments never on the command line (other users can read it): the request goes through stdin.

use crate::dirs::Dirs;
use crate::discover::{Launch, ToolFile};
use crate::error::{CallError, ErrorCode};
pub(crate) use awt_sys::process::Handover;
use awt_sys::process::{Child, Io};
use awt_sys::start::{start, DirectExec, Prepared};
use awt_sys::start_error::{StartError, Step};
use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What the process is started for.
#[derive(Debug, Clone, Copy)]
pub enum Purpose<'a> {
    /// `TOOL --schemas`
    Schemas,
    /// `TOOL`, one request on stdin.
    Call,
    /// `TOOL --serve`, a persistent worker.
    Serve,
    /// A legacy module's `cli_main(argv)`: stdio is the caller's when `inherit`, else piped (the output is the
    /// result, as for a background task).
    Cli { argv: &'a [OsString], inherit: bool },
}

/// A started tool process. It leads its own process group, so `pgid` is its pid — never 0, which would signal
/// the runner's own group.
#[derive(Debug)]
pub struct Started {
    pub child: Child,
    pub pgid: i32,
}

/// The one way a tool file becomes a running process: the command, the start, and every spawn error as a
/// sentence that says what to do ([`start_tool_async`] on the runtime). `handover`: each `fd` becomes the tool's
/// descriptor `at` (3 or above); every other descriptor from 3 up is closed at the exec, whatever the runner's
/// caller left open.
pub(crate) fn start_tool_with(
    file: &ToolFile,
    dirs: &Dirs,
    mode: Purpose<'_>,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
    sandbox: Option<&crate::sandbox::Plan>,
    handover: &[Handover<'_>],
) -> Result<Started, CallError> {
    start_forwarding(file, dirs, mode, env, cwd, sandbox, handover, &[])
}

/// An MCP server's session (`--serve`) whose bridge declares to the server the client capabilities `forward`
/// ([`crate::mcp_servers::asks`]); otherwise [`start_tool_with`].
pub(crate) fn start_session(
    file: &ToolFile,
    dirs: &Dirs,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
    sandbox: &crate::sandbox::Plan,
    forward: &[&str],
) -> Result<Started, CallError> {
    start_forwarding(file, dirs, Purpose::Serve, env, cwd, Some(sandbox), &[], forward)
}

#[allow(clippy::too_many_arguments)]
fn start_forwarding(
    file: &ToolFile,
    dirs: &Dirs,
    mode: Purpose<'_>,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
    sandbox: Option<&crate::sandbox::Plan>,
    handover: &[Handover<'_>],
    forward: &[&str],
) -> Result<Started, CallError> {
    if let Some(e) = not_installed(file, sandbox) {
        return Err(e);
    }
    let explain = |e: io::Error| spawn_failed(file, dirs, &e);
    let spec = bridge_spec(file, forward).map_err(explain)?;
    let (handover, prepared) = begin(file, dirs, mode, env, cwd, sandbox, handover, spec.as_ref()).map_err(explain)?;
    let p = Prepared {
        handover: &handover,
        ..prepared
    };
    finish(file, sandbox, start(&p).map_err(|e| explain(e.into()))?)
}

/// [`start_tool_with`] for a caller on the async runtime, handing nothing over: a start that waits for its sandboxed child's report (a PID
/// namespace: until the tool has exec'd) waits on one of the runner's starter threads ([`starters`]),
/// so the runtime's thread goes on with other calls and probes meanwhile. Dropped before the start is done, the child is dropped too, which
/// kills it.
pub(crate) async fn start_tool_async(
    file: &ToolFile,
    dirs: &Dirs,
    mode: Purpose<'_>,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
    sandbox: Option<&crate::sandbox::Plan>,
) -> Result<Started, CallError> {
    start_tool_async_with(file, dirs, mode, env, cwd, sandbox, &[]).await
}

/// [`start_tool_async`], handing `handover` to the tool as [`start_tool_with`] does. The descriptors are copied
/// for the start's thread, so they stay open for it even when this future is dropped mid-start.
pub(crate) async fn start_tool_async_with(
    file: &ToolFile,
    dirs: &Dirs,
    mode: Purpose<'_>,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
    sandbox: Option<&crate::sandbox::Plan>,
    handover: &[Handover<'_>],
) -> Result<Started, CallError> {
    if let Some(e) = not_installed(file, sandbox) {
        return Err(e);
    }
    let explain = |e: io::Error| spawn_failed(file, dirs, &e);
    let spec = bridge_spec(file, &[]).map_err(explain)?;
    let (handover, prepared) = begin(file, dirs, mode, env, cwd, sandbox, handover, spec.as_ref()).map_err(explain)?;
    let waits = prepared.confined.as_ref().is_some_and(|c| c.pid_ns.is_some());
    if !waits {
        let p = Prepared {
            handover: &handover,
            ..prepared
        };
        return finish(file, sandbox, start(&p).map_err(|e| explain(e.into()))?);
    }
    let owned: Vec<(std::os::fd::OwnedFd, std::os::fd::RawFd)> = handover
        .iter()
        .map(|h| h.fd.try_clone_to_owned().map(|o| (o, h.at)))
        .collect::<io::Result<_>>()
        .map_err(explain)?;
    let child = starters::run(move || {
        use std::os::fd::AsFd as _;
        let hs: Vec<Handover<'_>> = owned
            .iter()
            .map(|(o, at)| Handover { fd: o.as_fd(), at: *at })
            .collect();
        let p = Prepared {
            handover: &hs,
            ..prepared
        };
        start(&p).map_err(io::Error::from)
    })
    .await
    .unwrap_or_else(|_| Err(io::Error::other("the start's thread failed")));
    finish(file, sandbox, child.map_err(explain)?)
}

/// The first half of every start: what is handed over (with an MCP server's description, `spec`), checked, and
/// the start prepared ([`prepare`]) without it, for the caller to hand it over on the thread that starts.
#[allow(clippy::too_many_arguments)]
fn begin<'a>(
    file: &ToolFile,
    dirs: &Dirs,
    mode: Purpose<'_>,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
    sandbox: Option<&crate::sandbox::Plan>,
    handover: &[Handover<'a>],
    spec: Option<&'a std::os::fd::OwnedFd>,
) -> io::Result<(Vec<Handover<'a>>, Prepared<'static>)> {
    let handover = with_spec(handover, spec);
    awt_sys::process::check_handovers(&handover)?;
    let spec_at = spec.map(std::os::fd::AsRawFd::as_raw_fd);
    let prepared = prepare(file, dirs, mode, env, cwd, sandbox, spec_at)?;
    Ok((handover, prepared))
}

/// The last half of every start: the plan keeps the temp dir of the process it confined, and the child is
/// checked to have a process id.
fn finish(file: &ToolFile, sandbox: Option<&crate::sandbox::Plan>, child: Child) -> Result<Started, CallError> {
    if let Some(p) = sandbox {
        p.started(child.id());
    }
    started(file, child)
}

/// An MCP server whose starter (`npx`, `uvx`) has no installed package cannot start confined: said before the
/// start, with the command that installs it. Unconfined, it starts as declared.
fn not_installed(file: &ToolFile, sandbox: Option<&crate::sandbox::Plan>) -> Option<CallError> {
    let decl = file.mcp.as_ref().filter(|_| file.launch == Launch::Mcp)?;
    sandbox.filter(|p| p.is_confined())?;
    crate::mcp_servers::not_installed(decl)
}

/// The description an MCP server's bridge is handed ([`crate::mcp_servers::spec_fd`]); `None` for other tools.
fn bridge_spec(file: &ToolFile, forward: &[&str]) -> io::Result<Option<std::os::fd::OwnedFd>> {
    match (&file.launch, &file.mcp) {
        (Launch::Mcp, Some(decl)) => crate::mcp_servers::spec_fd::make(&decl.bridge_arg(forward)).map(Some),
        _ => Ok(None),
    }
}

/// `handover` and, last, the bridge's description under its own number.
fn with_spec<'a>(handover: &[Handover<'a>], spec: Option<&'a std::os::fd::OwnedFd>) -> Vec<Handover<'a>> {
    use std::os::fd::{AsFd, AsRawFd};
    let mut v = handover.to_vec();
    v.extend(spec.map(|s| Handover {
        fd: s.as_fd(),
        at: s.as_raw_fd(),
    }));
    v
}

/// The threads on which the starts that wait for a report run. Why not tokio's blocking pool: a child's
/// `PR_SET_PDEATHSIG` fires when the *thread* that cloned it ends (prctl(2)), not the process, and that pool ends
/// a thread idle for 10 s, which killed every sandboxed call that ran longer. These threads never end; there are
/// at most [`crate::width::start_width`] of them, made as starts overlap, and a start waits for a free one.
mod starters {
    use std::collections::VecDeque;
    use std::sync::{Condvar, Mutex, MutexGuard};

    type Job = Box<dyn FnOnce() + Send>;

    struct Pool {
        jobs: VecDeque<Job>,
        idle: usize,
        threads: usize,
    }

    static POOL: Mutex<Pool> = Mutex::new(Pool {
        jobs: VecDeque::new(),
        idle: 0,
        threads: 0,
    });
    static WORK: Condvar = Condvar::new();

    fn pool() -> MutexGuard<'static, Pool> {
        POOL.lock().unwrap_or_else(|e| e.into_inner())
    }

    use crate::width::start_width as width;

    /// `f` on a starter thread, in the caller's runtime; its answer on the receiver (an error only when `f`
    /// panicked).
    pub(super) fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> tokio::sync::oneshot::Receiver<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // The child's pipes are registered with the caller's runtime.
        let rt = tokio::runtime::Handle::current();
        // A receiver dropped mid-start drops what `f` made (a child dropped is killed).
        let job: Job = Box::new(move || {
            let _in_rt = rt.enter();
            let _ = tx.send(f());
        });
        let mut p = pool();
        if p.jobs.len() >= p.idle && p.threads < width() {
            let made = std::thread::Builder::new().name("start".into()).spawn(serve);
            match made {
                Ok(_) => p.threads += 1,
                Err(e) if p.threads == 0 => {
                    // No thread at all: start here, on the caller's thread, which the child outlives no more
                    // than it outlives the runtime.
                    tracing::warn!("no thread to start tools on, starting on the runtime's: {e}");
                    drop(p);
                    job();
                    return rx;
                }
                Err(_) => {}
            }
        }
        p.jobs.push_back(job);
        drop(p);
        WORK.notify_one();
        rx
    }

    fn serve() {
        let mut p = pool();
        loop {
            match p.jobs.pop_front() {
                Some(job) => {
                    drop(p);
                    // A panic ends the job, never the thread (its other children would get its death signal).
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    p = pool();
                }
                None => {
                    p.idle += 1;
                    p = WORK.wait(p).unwrap_or_else(|e| e.into_inner());
                    p.idle -= 1;
                }
            }
        }
    }
}

fn spawn_failed(file: &ToolFile, dirs: &Dirs, e: &io::Error) -> CallError {
    let (msg, hint) = explain_spawn_error(file, dirs, e);
    let err = CallError::new(ErrorCode::SpawnFailed, msg)
        .hint(hint)
        .with(crate::error::Detail::Tool, file.name.clone());
    match StartError::of(e).is_some_and(|s| s.step.is_namespace_setup()) {
        true => err.with(crate::error::Detail::Reason, SANDBOX_SETUP_FAILED),
        false => err,
    }
}

/// The reason of a start whose sandbox could not be set up (a path it hides or binds changed meanwhile).
pub const SANDBOX_SETUP_FAILED: &str = "sandbox_setup_failed";

fn started(file: &ToolFile, child: Child) -> Result<Started, CallError> {
    match child.id().and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0) {
        Some(pgid) => Ok(Started { child, pgid }),
        None => Err(CallError::new(
            ErrorCode::Internal,
            format!("{} was started but has no process id", file.path.display()),
        )),
    }
}

/// Prepare the start of `file` in `mode`. `env` is the whole environment the tool gets; `sandbox`, when given,
/// confines the process (docs/sandbox.md). `spec_at`: the descriptor an MCP server's bridge reads its description
/// from. It hands nothing over: the caller sets the handovers on the thread that starts.
fn prepare(
    file: &ToolFile,
    dirs: &Dirs,
    mode: Purpose<'_>,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
    sandbox: Option<&crate::sandbox::Plan>,
    spec_at: Option<std::os::fd::RawFd>,
) -> io::Result<Prepared<'static>> {
    let args = mode_args(file, mode);
    let (program, argv) = program_and_args(file, dirs, env, cwd, args, spec_at)?;
    let confined = sandbox.map(|p| p.confine(&program)).transpose()?.flatten();
    // A PID namespace's init is in the call's cgroup too, beside the tool's processes.
    let init = u64::from(confined.as_ref().is_some_and(|c| c.pid_ns.is_some()));
    let limits = sandbox.map(|p| p.limits.prepare(init)).transpose()?;
    let env = &crate::sandbox::with_env(env, sandbox);
    let io = match mode {
        Purpose::Schemas => [Io::Null, Io::Piped, Io::Piped],
        Purpose::Call | Purpose::Serve => [Io::Piped, Io::Piped, Io::Piped],
        // Its output passes through the runner, masked (`call::passthrough`).
        Purpose::Cli { inherit: true, .. } => [Io::Inherit, Io::Piped, Io::Piped],
        Purpose::Cli { inherit: false, .. } => [Io::Null, Io::Piped, Io::Piped],
    };
    let cwd = cwd
        .filter(|d| d.is_dir())
        .map(|d| CString::new(d.as_os_str().as_bytes()))
        .transpose()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the working directory"))?;
    awt_sys::guardian::start()?;
    Ok(Prepared {
        exec: DirectExec::new(&program, &argv, env)?,
        confined,
        limits,
        io,
        cwd,
        handover: &[],
    })
}

/// The program to exec (an absolute path) and its arguments. An interpreter is looked up on the tool's `PATH`
/// here, before any fork, so a missing one is reported as such and never leaves a half-started process.
fn program_and_args(
    file: &ToolFile,
    dirs: &Dirs,
    env: &[(OsString, OsString)],
    cwd: Option<&Path>,
    mode_args: Vec<OsString>,
    spec_at: Option<std::os::fd::RawFd>,
) -> io::Result<(PathBuf, Vec<OsString>)> {
    let interpreter = match file.launch {
        Launch::Python => Some(dirs.python.clone()),
        Launch::Node => Some("node".into()),
        Launch::Bash => Some("bash".into()),
        Launch::Exec => None,
        Launch::Mcp => {
            let decl = file
                .mcp
                .as_ref()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "an MCP server without its declaration"))?;
            let _ = decl;
            let fd = spec_at
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "an MCP server without its description"))?;
            let mut argv: Vec<OsString> = vec![
                "__mcp-bridge".into(),
                crate::mcp_servers::spec_fd::FLAG.into(),
                fd.to_string().into(),
            ];
            argv.extend(mode_args);
            return Ok((crate::mcp_servers::runner_exe()?, argv));
        }
    };
    let Some(interp) = interpreter else {
        return Ok((file.path.clone(), mode_args));
    };
    let path_var = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let here = cwd
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    let program =
        which::which_in(&interp, Some(path_var), here).map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
    let mut argv: Vec<OsString> = Vec::with_capacity(mode_args.len() + 2);
    if file.launch == Launch::Python {
        let shim = crate::pyshim::shim_path(&dirs.cache)?;
        crate::pyshim::compile_in_background(&shim, &program, env);
        argv.push(shim.into_os_string());
    }
    argv.push(file.path.clone().into_os_string());
    argv.extend(mode_args);
    Ok((program, argv))
}

/// The arguments after the program (or after the file, for an interpreter).
fn mode_args(file: &ToolFile, mode: Purpose<'_>) -> Vec<OsString> {
    match mode {
        Purpose::Schemas => vec!["--schemas".into()],
        Purpose::Call => Vec::new(),
        Purpose::Serve => vec!["--serve".into()],
        Purpose::Cli { argv, .. } => {
            let flag: Option<OsString> = (file.launch == Launch::Python).then(|| "--cli".into());
            flag.into_iter().chain(argv.iter().cloned()).collect()
        }
    }
}

/// Turn a spawn failure into a sentence that says what is wrong and what to do.
fn explain_spawn_error(file: &ToolFile, dirs: &Dirs, e: &io::Error) -> (String, String) {
    let path = file.path.display();
    let failed = StartError::of(e);
    if let Some(setup) = failed.filter(|s| s.step.is_namespace_setup()) {
        return (
            format!("cannot start {path}: {setup}"),
            "a path the sandbox hides or binds changed while the call started: try again; if it persists, \
             `animaworks-tool doctor` says what this machine's sandbox can do"
                .into(),
        );
    }
    let interp = match file.launch {
        Launch::Python => Some(dirs.python.to_string_lossy().into_owned()),
        Launch::Node => Some("node".to_owned()),
        Launch::Bash => Some("bash".to_owned()),
        Launch::Exec | Launch::Mcp => None,
    };
    // Only the exec's errno speaks of the tool's file: an ENOENT of another step (a working folder gone) does not.
    let errno = match failed {
        Some(s) if s.step == Step::Exec => Some(s.errno),
        Some(_) => None,
        None => e.raw_os_error(),
    };
    match (errno, interp) {
        (Some(libc::ENOENT), Some(i)) => (
            format!("cannot start {path}: its interpreter `{i}` was not found"),
            if file.launch == Launch::Python {
                format!(
                    "install Python 3 or set {} to an interpreter",
                    crate::env_vars::PYTHON.name
                )
            } else {
                format!("install `{i}` or put it on PATH")
            },
        ),
        (Some(libc::ENOENT), None) => (
            format!("cannot start {path}: the file or the interpreter named on its #! line was not found"),
            "check the #! line (e.g. `#!/usr/bin/env bash`) and that the interpreter is installed".into(),
        ),
        (Some(libc::EACCES), _) => (
            format!("cannot start {path}: permission denied (not executable?)"),
            format!("run `chmod +x {path}`"),
        ),
        (Some(libc::ENOEXEC), _) => (
            format!("cannot start {path}: wrong format: neither a binary for this machine nor a script with a #! line"),
            "add a #! line (e.g. `#!/usr/bin/env bash`) or build the tool for this machine".into(),
        ),
        (Some(libc::ETXTBSY), _) => (
            format!("cannot start {path}: the file is being written right now"),
            "try again when the write has finished".into(),
        ),
        _ => (
            format!("cannot start {path}: {e}"),
            "check the file and its interpreter".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dirs::DirOptions;
    use crate::tier::Tier;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// A world whose personal tier holds one sandboxed tool `t` with `script` as its body: the world (to keep),
    /// its dirs, the tool, its probe's sandbox plan and environment.
    fn one_tool(
        script: &str,
    ) -> (
        tempfile::TempDir,
        Dirs,
        ToolFile,
        crate::sandbox::Plan,
        crate::probe::ProbeEnv,
    ) {
        one_tool_in(script, |_| {})
    }

    /// [`one_tool`], with `prepare` run on the world's root before the plan is made.
    fn one_tool_in(
        script: &str,
        prepare: impl FnOnce(&std::path::Path),
    ) -> (
        tempfile::TempDir,
        Dirs,
        ToolFile,
        crate::sandbox::Plan,
        crate::probe::ProbeEnv,
    ) {
        let world = tempfile::tempdir().unwrap();
        prepare(world.path());
        let dirs = Dirs::resolve(&DirOptions {
            core_dirs: vec![world.path().join("core")],
            data_dir: Some(world.path().join("data")),
            anima_dir: Some(world.path().join("animas").join("alice")),
            cache_dir: Some(world.path().join("cache")),
            python: None,
        });
        let tools = world.path().join("animas/alice/tools");
        std::fs::create_dir_all(&tools).unwrap();
        std::fs::create_dir_all(&dirs.data).unwrap();
        let path = tools.join("t");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = ToolFile {
            name: "t".into(),
            tier: Tier::Personal,
            path,
            launch: Launch::Exec,
            mcp: None,
            stat: None,
        };
        let plan = crate::sandbox::for_process(&dirs, &file, crate::sandbox::Needs::Probe).unwrap();
        let env = crate::call::Runner::new(dirs.clone()).probe_env().unwrap();
        (world, dirs, file, plan, env)
    }

    /// Why the start would not wait on this machine, if it would not.
    fn no_wait(plan: &crate::sandbox::Plan, file: &ToolFile) -> Option<&'static str> {
        match plan.confine(&file.path).unwrap() {
            None => Some("skipped: no sandbox on this machine (the start is unconfined and never waits)"),
            Some(c) if c.pid_ns.is_none() => {
                Some("skipped: no PID namespace on this machine (the start never waits for a report)")
            }
            Some(_) => None,
        }
    }

    /// A path the plan hides that is gone by the time of the mount (the data dir's `vault.key`, removed) fails
    /// the start before any program runs; the error says the sandbox's setup failed, not that a file or
    /// interpreter is missing (which an ENOENT from the exec would mean).
    #[tokio::test(flavor = "current_thread")]
    async fn a_mount_whose_target_went_away_is_said_to_be_the_sandboxs_not_the_tools() {
        let (world, dirs, file, plan, env) = one_tool_in(
            "#!/bin/sh\necho '{\"protocol\":1,\"actions\":[{\"name\":\"go\"}]}'\n",
            |root| {
                std::fs::create_dir_all(root.join("data")).unwrap();
                std::fs::write(root.join("data/vault.key"), "k").unwrap();
            },
        );
        if let Some(why) = no_wait(&plan, &file) {
            awt_sys::skipped!("{why}");
            return;
        }
        if !plan.mounts().iter().any(|m| m.path.ends_with("data/vault.key")) {
            awt_sys::skipped!("no mount namespace here (the vault key is not hidden by a mount)");
            return;
        }
        std::fs::remove_file(world.path().join("data/vault.key")).unwrap();
        let err = match start_tool_async(&file, &dirs, Purpose::Schemas, env.for_file(&file), None, Some(&plan)).await {
            Ok(started) => {
                let mut child = started.child;
                let _ = awt_sys::reap::wait(&mut child).await;
                panic!("started although a hidden path was gone");
            }
            Err(e) => e,
        };
        let msg = err.to_string();
        assert!(msg.contains("step `mounts`"), "{msg}");
        assert_eq!(
            err.detail(crate::error::Detail::Reason).and_then(|r| r.as_str()),
            Some(SANDBOX_SETUP_FAILED)
        );
        assert!(!msg.contains("not found"), "{msg}");
    }

    /// A tool may write its anima's folder but not move a folder that holds one the runner protects: renamed,
    /// `state/` would take its unmasked task arguments out from under every later call's plan. Landlock refuses
    /// it (the moved folder's protected contents would gain the write right of their new place), though
    /// rename(2) itself allows moving a folder that holds a mount point.
    #[tokio::test]
    async fn a_tool_cannot_rename_away_a_folder_that_holds_a_protected_one() {
        let script = r#"#!/bin/sh
a=$(dirname "$(dirname "$0")")
r=$(mv "$a/state" "$a/moved" 2>&1)
printf '{"protocol":1,"actions":[{"name":"go","description":"%s"}]}' "$(echo $r | tr -d '"\\')"
"#;
        let (world, dirs, file, plan, env) = one_tool_in(script, |_| {});
        if let Some(why) = no_wait(&plan, &file) {
            awt_sys::skipped!("{why}");
            return;
        }
        if !plan.mounts().iter().any(|m| m.path.ends_with("state/background_tasks")) {
            awt_sys::skipped!("no mount namespace here");
            return;
        }
        drop(plan);
        let got = crate::probe::probe(&file, &dirs, &env).await;
        let anima = world.path().join("animas/alice");
        assert!(anima.join("state/background_tasks").is_dir());
        assert!(!anima.join("moved").exists(), "the tool renamed state/ away: {got:?}");
        let crate::cache::Probed::Ok(m) = got else {
            panic!("{got:?}")
        };
        assert!(
            m.actions[0].description.contains("mv: cannot move"),
            "{:?}",
            m.actions[0].description
        );
    }

    const SCHEMAS: &str = "#!/bin/sh\necho '{\"protocol\":1,\"actions\":[{\"name\":\"go\"}]}'\n";

    /// A listing's plans in which `file`'s probe plan was made once and then taken by a second probe, which is
    /// returned.
    fn planned_then_taken(dirs: &Dirs, file: &ToolFile, plans: &crate::sandbox::ProbePlans) -> crate::sandbox::Plan {
        // A folder changed within the file system's timestamp tick is not trusted to show the next change.
        std::thread::sleep(std::time::Duration::from_millis(150));
        drop(crate::sandbox::for_probe(dirs, file, plans).unwrap());
        let second = crate::sandbox::for_probe(dirs, file, plans).unwrap();
        assert_eq!(plans.taken(), 1, "the second probe did not take the first one's plan");
        second
    }

    /// A listing takes a plan an earlier probe of it made only while the folders that plan looked in are as they
    /// were: another anima's folder made meanwhile is hidden from the next probe, as from a plan made afresh.
    #[test]
    fn a_remembered_probe_plan_is_not_taken_once_another_animas_folder_appears() {
        let (world, dirs, file, plan, _env) = one_tool_in(SCHEMAS, |root| {
            std::fs::create_dir_all(root.join("animas/bob")).unwrap()
        });
        let whole = |p: &crate::sandbox::Plan| {
            p.mounts()
                .iter()
                .any(|m| matches!(m.kind, crate::sandbox::MountKind::HideAnimas) && m.path.ends_with("animas"))
        };
        if whole(&plan) {
            // One mount over the folder of animas hides bob, and whatever is made in it later, by construction:
            // a remembered plan stays right, and is taken.
            drop(plan);
            let plans = crate::sandbox::ProbePlans::default();
            drop(planned_then_taken(&dirs, &file, &plans));
            std::fs::create_dir_all(world.path().join("animas/carol/memory")).unwrap();
            let third = crate::sandbox::for_probe(&dirs, &file, &plans).unwrap();
            assert!(whole(&third), "{:?}", third.mounts());
            return;
        }
        if !plan.mounts().iter().any(|m| m.path.ends_with("animas/bob")) {
            awt_sys::skipped!("no mount namespace here (other animas are not hidden by a mount)");
            return;
        }
        drop(plan);
        let plans = crate::sandbox::ProbePlans::default();
        let second = planned_then_taken(&dirs, &file, &plans);
        // What it took is what it would have planned, but for its own temp dir.
        let fresh = crate::sandbox::for_process(&dirs, &file, crate::sandbox::Needs::Probe).unwrap();
        let seen = |p: &crate::sandbox::Plan| {
            let tmp = p.tmp().unwrap().to_string_lossy().into_owned();
            let text = format!("{:?} {:?} {}", p.mounts(), p.writable(), p.summary());
            text.replace(&tmp, "$TMP")
        };
        assert_eq!(seen(&second), seen(&fresh));
        assert!(second.mounts().iter().any(|m| m.path.ends_with("animas/bob")));
        drop((second, fresh));
        std::fs::create_dir_all(world.path().join("animas/carol/memory")).unwrap();
        let third = crate::sandbox::for_probe(&dirs, &file, &plans).unwrap();
        assert!(
            third.mounts().iter().any(|m| m.path.ends_with("animas/carol")),
            "a folder made after the remembered plan is not hidden: {:?}",
            third.mounts()
        );
        assert_eq!(plans.taken(), 1);
    }

    /// A deny entry named through a link (`current/secret`, `current` a link to a release folder) is hidden where
    /// the link leads when the probe is planned: a link swapped during a listing makes the next probe plan afresh.
    #[test]
    fn a_remembered_probe_plan_is_not_taken_once_a_link_on_the_way_to_a_denied_path_is_swapped() {
        let (world, dirs, file, plan, _env) = one_tool_in(SCHEMAS, |root| {
            for v in ["v1", "v2"] {
                std::fs::create_dir_all(root.join("srv/app/rel").join(v).join("secret")).unwrap();
            }
            std::os::unix::fs::symlink(root.join("srv/app/rel/v1"), root.join("srv/app/current")).unwrap();
            std::fs::create_dir_all(root.join("data")).unwrap();
            let deny = root.join("srv/app/current/secret").to_string_lossy().into_owned();
            let settings = serde_json::json!({"sandbox": {"deny": [deny]}});
            std::fs::write(
                root.join("data").join(crate::settings::SETTINGS_FILE),
                settings.to_string(),
            )
            .unwrap();
        });
        let hides =
            |p: &crate::sandbox::Plan, v: &str| p.mounts().iter().any(|m| m.path.ends_with(format!("rel/{v}/secret")));
        if !hides(&plan, "v1") {
            awt_sys::skipped!("no mount namespace here (a deny entry is not hidden by a mount)");
            return;
        }
        drop(plan);
        let plans = crate::sandbox::ProbePlans::default();
        drop(planned_then_taken(&dirs, &file, &plans));
        std::fs::remove_file(world.path().join("srv/app/current")).unwrap();
        std::os::unix::fs::symlink(
            world.path().join("srv/app/rel/v2"),
            world.path().join("srv/app/current"),
        )
        .unwrap();
        let third = crate::sandbox::for_probe(&dirs, &file, &plans).unwrap();
        assert!(
            hides(&third, "v2"),
            "the denied path the link now leads to is not hidden: {:?}",
            third.mounts()
        );
    }

    /// The cache's entries folder is hidden whole from a Python probe only if it is there when the probe is
    /// planned: on a cold cache it is made first, so that the entries the listing's probes write next are not
    /// readable by the probes planned before them.
    #[test]
    fn a_python_probe_planned_on_a_cold_cache_hides_the_entries_folder() {
        let (_world, dirs, mut file, plan, _env) = one_tool(SCHEMAS);
        if plan.reads() != Some(crate::sandbox::Reads::DenyList) {
            awt_sys::skipped!("no mount namespace here (the cache is not readable through Landlock's rules)");
            return;
        }
        drop(plan);
        let _ = std::fs::remove_dir_all(dirs.cache.join(crate::cache::ENTRIES_DIR));
        file.launch = Launch::Python;
        let plan = crate::sandbox::for_process(&dirs, &file, crate::sandbox::Needs::Probe).unwrap();
        let entries = awt_sys::confine::rules::canonical(&dirs.cache.join(crate::cache::ENTRIES_DIR))
            .expect("the entries folder was made");
        assert!(
            plan.mounts().iter().any(|m| m.path == entries),
            "{} is not hidden: {:?}",
            entries.display(),
            plan.mounts()
        );
    }

    /// A mount the start cannot prepare because its path is gone since the plan (a remembered probe plan's) is a
    /// failure of the sandbox's setup, which a listing plans afresh and starts once more, not the tool's failure.
    #[test]
    fn a_planned_mount_whose_path_is_gone_is_a_failure_of_the_sandboxs_setup() {
        let (_world, _dirs, file, plan, _env) = one_tool(SCHEMAS);
        let tmp = plan.tmp().map(Path::to_path_buf);
        let Some(tmp) = tmp.filter(|t| plan.mounts().iter().any(|m| m.path == *t)) else {
            awt_sys::skipped!("no mount namespace here (the temp dir is not mounted)");
            return;
        };
        std::fs::remove_dir_all(&tmp).unwrap();
        let err = plan
            .confine(&file.path)
            .err()
            .expect("confined although its temp dir is gone");
        assert_eq!(StartError::of(&err).map(|s| s.step), Some(Step::Mounts), "{err}");
    }

    /// On the single-threaded runtime the CLI uses: a task spawned before a sandboxed start has run by the time the
    /// start returns only if the start gave the thread back while it waited for its child's report. A start whose
    /// report is in before its first poll gives nothing back, and a loaded machine may see that now and then: of a
    /// few starts, one must have given the thread back (a start that holds the thread never does).
    #[tokio::test(flavor = "current_thread")]
    async fn a_sandboxed_start_gives_the_runtime_thread_back_while_it_waits() {
        let (_world, dirs, file, plan, env) =
            one_tool("#!/bin/sh\necho '{\"protocol\":1,\"actions\":[{\"name\":\"go\"}]}'\n");
        let mut waited = false;
        for _ in 0..5 {
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            let task = tokio::spawn(async move { r.store(true, Ordering::SeqCst) });
            let started = start_tool_async(&file, &dirs, Purpose::Schemas, env.for_file(&file), None, Some(&plan))
                .await
                .unwrap();
            waited |= ran.load(Ordering::SeqCst);
            let mut child = started.child;
            let _ = awt_sys::reap::wait(&mut child).await;
            let _ = task.await;
            if waited {
                break;
            }
        }
        if let Some(why) = no_wait(&plan, &file) {
            awt_sys::skipped!("{why}");
            return;
        }
        assert!(
            waited,
            "the start held the runtime's thread until its child had reported"
        );
    }

    /// A sandboxed tool outlives the thread its start waited on. Its init's `PR_SET_PDEATHSIG` fires when the
    /// thread that cloned it ends, and tokio's blocking pool ends a thread idle for 10 s (here 20 ms): every
    /// sandboxed call that ran longer was killed (a 1 GiB event stream cut mid-line, seen as bad_output).
    #[test]
    fn a_sandboxed_tool_outlives_the_thread_that_started_it() {
        let (_world, dirs, file, plan, env) =
            one_tool("#!/bin/sh\nsleep 0.5\necho '{\"protocol\":1,\"actions\":[{\"name\":\"go\"}]}'\n");
        if let Some(why) = no_wait(&plan, &file) {
            awt_sys::skipped!("{why}");
            return;
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_keep_alive(std::time::Duration::from_millis(20))
            .build()
            .unwrap();
        let status = rt.block_on(async {
            let started = start_tool_async(&file, &dirs, Purpose::Schemas, env.for_file(&file), None, Some(&plan))
                .await
                .unwrap();
            let mut child = started.child;
            awt_sys::reap::wait(&mut child).await.unwrap()
        });
        assert!(
            status.success(),
            "the tool ended with {status:?} when its start's thread ended"
        );
    }
}
