//! Slots: how many tasks of one anima may run at once, and starting a detached worker to fill a free slot.

use awt_core::dirs::Dirs;
use std::io;
use std::process::{Command, Stdio};

pub use awt_core::settings::DEFAULT_MAX_RUNNING;

/// Start a worker for this anima: `animaworks-tool jobs worker` in a new session, stdio away from the caller, so
/// it outlives the submitting process and its terminal. Returns at once.
/// `log`: the worker's log, opened by the store from its checked folder (see [`super::files::FileStore`]).
pub fn spawn_worker(dirs: &Dirs, log: io::Result<std::fs::File>) -> io::Result<()> {
    let anima = dirs.anima.as_ref().ok_or_else(|| io::Error::other("no anima dir"))?;
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg("--data-dir")
        .arg(&dirs.data)
        .arg("--anima-dir")
        .arg(anima)
        .arg("--cache-dir")
        .arg(&dirs.cache);
    cmd.arg("--python").arg(&dirs.python);
    for c in &dirs.core {
        cmd.arg("--core-dir").arg(c);
    }
    cmd.args(["jobs", "worker"]);
    cmd.env(super::identity::SECRET_VAR, super::identity::new_secret());
    cmd.stdin(Stdio::null()).stdout(Stdio::null());
    match log {
        Ok(f) => cmd.stderr(f),
        Err(_) => cmd.stderr(Stdio::null()),
    };
    if let Some(a) = dirs.anima.as_ref().filter(|a| a.is_dir()) {
        cmd.current_dir(a);
    }
    awt_sys::process::in_new_session(&mut cmd);
    let mut child = awt_sys::reap::start_owned(|| cmd.spawn(), |c| Some(c.id()))?;
    let pid = child.id();
    // Why: a long-lived caller (the MCP server, `use-tool --serve`) would otherwise keep every exited worker as a
    // zombie for its whole life; the thread ends with the worker, or with this process.
    std::thread::spawn(move || {
        let _ = child.wait();
        awt_sys::reap::disown(pid);
    });
    Ok(())
}

/// How long a pending task is left to the worker its submitter started before another command starts one. Why: a
/// task runs in its worker's environment (credentials from environment variables, a legacy module's environment),
/// which is the submitter's; a `jobs show` racing that worker must not run the task with its own.
pub const KICK_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
