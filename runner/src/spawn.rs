//! The one place where a tool file becomes a process. Every choice here has a reason:
//! - interpreter by extension (protocol.md §1), so a `.py` module needs no exec bit and no shebang;
//! - its own process group, so the whole tree can be signalled and reaped;
//! - `PR_SET_PDEATHSIG` and registration with the [`guardian`](crate::guardian), so it dies with the runner;
//! - a cleared environment (the caller's secrets stay out), built by the policy engine;
//! - arguments never on the command line (other users can read it): the request goes through stdin.

use crate::discover::{Launch, ToolFile};
use crate::dirs::Dirs;
use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::Stdio;
use tokio::process::Command;

/// What the process is started for.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// `TOOL --schemas`
    Schemas,
    /// `TOOL`, one request on stdin.
    Call,
    /// `TOOL --serve`, a persistent worker.
    Serve,
    /// A legacy module's `cli_main(argv)`; stdio is the caller's.
    Cli(&'a [OsString]),
}

/// Build the command for `file` in `mode`. `env` is the whole environment the tool gets.
pub fn command(file: &ToolFile, dirs: &Dirs, mode: Mode<'_>, env: &[(OsString, OsString)], cwd: Option<&Path>) -> io::Result<Command> {
    let mut cmd = match file.launch {
        Launch::Python => {
            let shim = crate::pyshim::shim_path(&dirs.cache)?;
            let mut c = Command::new(&dirs.python);
            c.arg(shim).arg(&file.path);
            c
        }
        Launch::Node => {
            let mut c = Command::new("node");
            c.arg(&file.path);
            c
        }
        Launch::Bash => {
            let mut c = Command::new("bash");
            c.arg(&file.path);
            c
        }
        Launch::Exec => Command::new(&file.path),
    };
    match mode {
        Mode::Schemas => {
            cmd.arg("--schemas").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        Mode::Call => {
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        Mode::Serve => {
            cmd.arg("--serve").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        Mode::Cli(argv) => {
            if file.launch == Launch::Python {
                cmd.arg("--cli");
            }
            cmd.args(argv).stdin(Stdio::inherit()).stdout(Stdio::inherit()).stderr(Stdio::inherit());
        }
    }
    cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = cwd.filter(|d| d.is_dir()) {
        cmd.current_dir(dir);
    }
    cmd.process_group(0);
    // Why: a future dropped mid-call (a cancelled MCP request) must not leave the main process running; the
    // group guard in `reap` handles the rest of the group.
    cmd.kill_on_drop(true);
    crate::guardian::start()?;
    // SAFETY: only async-signal-safe calls (prctl, getpid, write) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            crate::guardian::register_self();
            Ok(())
        });
    }
    Ok(cmd)
}

/// Turn a spawn failure into a sentence that says what is wrong and what to do.
pub fn explain_spawn_error(file: &ToolFile, dirs: &Dirs, e: &io::Error) -> (String, String) {
    let path = file.path.display();
    let interp = match file.launch {
        Launch::Python => Some(dirs.python.to_string_lossy().into_owned()),
        Launch::Node => Some("node".to_owned()),
        Launch::Bash => Some("bash".to_owned()),
        Launch::Exec => None,
    };
    match (e.raw_os_error(), interp) {
        (Some(libc::ENOENT), Some(i)) => (
            format!("cannot start {path}: its interpreter `{i}` was not found"),
            if file.launch == Launch::Python {
                "install Python 3 or set ANIMAWORKS_PYTHON to an interpreter".into()
            } else {
                format!("install `{i}` or put it on PATH")
            },
        ),
        (Some(libc::ENOENT), None) => (
            format!("cannot start {path}: the file or the interpreter named on its #! line was not found"),
            "check the #! line (e.g. `#!/usr/bin/env bash`) and that the interpreter is installed".into(),
        ),
        (Some(libc::EACCES), _) => {
            (format!("cannot start {path}: permission denied (not executable?)"), format!("run `chmod +x {path}`"))
        }
        (Some(libc::ENOEXEC), _) => (
            format!("cannot start {path}: wrong format: neither a binary for this machine nor a script with a #! line"),
            "add a #! line (e.g. `#!/usr/bin/env bash`) or build the tool for this machine".into(),
        ),
        (Some(libc::ETXTBSY), _) => (
            format!("cannot start {path}: the file is being written right now"),
            "try again when the write has finished".into(),
        ),
        _ => (format!("cannot start {path}: {e}"), "check the file and its interpreter".into()),
    }
}
