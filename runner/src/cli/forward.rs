//! AnimaWorks' own command words. Its skill documents teach agents `animaworks-tool task list`,
//! `animaworks-tool vault get KEY`, `animaworks-tool internal check-background-task ID`, …: the original
//! `animaworks-tool` runs a word that names no tool as the `animaworks` CLI (`cli_dispatch` in AnimaWorks'
//! `core/integrations/__init__.py`). We do the same, after the tool lookup, by exec'ing that CLI: the argv, the
//! working directory, the environment, the streams and the exit code are the caller's and the CLI's.

use awt_core::error::{CallError, Detail, ErrorCode};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// AnimaWorks 0.15's `_MAIN_CLI_COMMANDS`: forwarded as `animaworks <word> …`.
pub const MAIN_CLI_COMMANDS: &[&str] = &[
    "init",
    "start",
    "serve",
    "stop",
    "restart",
    "reset",
    "chat",
    "heartbeat",
    "send",
    "status",
    "logs",
    "board",
    "anima",
    "config",
    "task",
    "internal",
    "supervisor",
    "vault",
    "models",
    "cost",
    "optimize-assets",
    "remake",
    "profile",
];

/// AnimaWorks 0.15's `_ANIMA_SUBCOMMANDS`: forwarded as `animaworks anima <word> …` (a word in both lists, such
/// as `status`, is a main command, as in the original).
pub const ANIMA_SUBCOMMANDS: &[&str] = &[
    "list",
    "info",
    "status",
    "restart",
    "create",
    "delete",
    "enable",
    "disable",
    "set-model",
    "set-background-model",
    "set-outbound-limit",
    "reload",
    "set-role",
    "rename",
    "audit",
];

/// The `animaworks` argv (without the program) for `words`, or `None` when its first word is not AnimaWorks'.
pub fn animaworks_argv(words: &[OsString]) -> Option<Vec<OsString>> {
    let first = words.first()?.to_str()?;
    if MAIN_CLI_COMMANDS.contains(&first) {
        Some(words.to_vec())
    } else if ANIMA_SUBCOMMANDS.contains(&first) {
        Some(
            std::iter::once(OsString::from("anima"))
                .chain(words.iter().cloned())
                .collect(),
        )
    } else {
        None
    }
}

/// Where the `animaworks` CLI is, in this order:
/// 1. next to the Python that runs `.py` tools (`--python`, else `$ANIMAWORKS_PYTHON`), when that is a path —
///    the interpreter AnimaWorks is installed in, so its `bin/` holds the CLI of that very installation;
/// 2. the first `animaworks` on `PATH`.
pub fn find_cli(python: &OsStr, path_var: Option<&OsStr>) -> Option<PathBuf> {
    let python = Path::new(python);
    let beside = python
        .as_os_str()
        .to_str()
        .is_some_and(|s| s.contains('/'))
        .then(|| python.parent().map(|d| d.join("animaworks")))
        .flatten();
    let on_path = path_var
        .into_iter()
        .flat_map(std::env::split_paths)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join("animaworks"));
    beside.into_iter().chain(on_path).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Global options given before the words, passed on as the variables AnimaWorks reads them from.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub anima_dir: Option<PathBuf>,
}

/// Run `words` as the `animaworks` CLI, replacing this process (it returns only on failure, with the error).
/// `None` when the first word is not one of AnimaWorks' (the caller then reports the unknown tool).
pub fn forward(words: &[OsString], python: &OsStr, overrides: &Overrides) -> Option<CallError> {
    let argv = animaworks_argv(words)?;
    let word = words[0].to_string_lossy().into_owned();
    let Some(cli) = find_cli(python, std::env::var_os(awt_core::env_vars::PATH.name).as_deref()) else {
        return Some(
            CallError::new(
                ErrorCode::SpawnFailed,
                format!(
                    "{word:?} is an AnimaWorks command, run by the `animaworks` CLI, which is not installed: \
                     no `animaworks` next to the Python {:?} nor on PATH",
                    python.to_string_lossy()
                ),
            )
            .hint(format!(
                "install AnimaWorks (`pip install animaworks`), or set {} to the Python it is \
                 installed in (its `animaworks` script sits next to it)",
                awt_core::env_vars::PYTHON.name
            ))
            .with(Detail::Tool, word),
        );
    };
    let mut cmd = std::process::Command::new(&cli);
    cmd.arg0("animaworks").args(&argv);
    if let Some(d) = &overrides.data_dir {
        cmd.env(awt_core::env_vars::DATA_DIR.name, d);
    }
    if let Some(d) = &overrides.anima_dir {
        cmd.env(awt_core::env_vars::ANIMA_DIR.name, d);
    }
    // Why: the guardian made this process the subreaper of its descendants; the CLI (a server may daemonise
    // from it) must leave its orphans to init as it would when started directly.
    let _ = rustix::process::set_child_subreaper(None);
    use std::os::unix::process::CommandExt;
    let e = cmd.exec();
    Some(
        CallError::new(
            ErrorCode::SpawnFailed,
            format!("cannot run the AnimaWorks CLI {}: {e}", cli.display()),
        )
        .hint(format!(
            "reinstall AnimaWorks, or set {} to the Python it is installed in",
            awt_core::env_vars::PYTHON.name
        ))
        .with(Detail::Tool, word),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn words_map_as_in_the_original() {
        assert_eq!(animaworks_argv(&os(&["task", "list"])), Some(os(&["task", "list"])));
        assert_eq!(animaworks_argv(&os(&["list"])), Some(os(&["anima", "list"])));
        assert_eq!(animaworks_argv(&os(&["status", "x"])), Some(os(&["status", "x"])));
        assert_eq!(
            animaworks_argv(&os(&["set-model", "a", "m"])),
            Some(os(&["anima", "set-model", "a", "m"]))
        );
        assert_eq!(animaworks_argv(&os(&["weather"])), None);
        assert_eq!(animaworks_argv(&[]), None);
    }

    #[test]
    fn no_runner_command_shadows_an_animaworks_word() {
        for w in super::super::words::COMMANDS.iter().chain(&["call"]) {
            assert!(
                !MAIN_CLI_COMMANDS.contains(w) && !ANIMA_SUBCOMMANDS.contains(w),
                "the runner's command {w:?} would shadow AnimaWorks' {w:?}"
            );
        }
    }

    #[test]
    fn the_cli_beside_the_python_comes_first() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let (venv, path) = (d.path().join("venv/bin"), d.path().join("path"));
        for dir in [&venv, &path] {
            std::fs::create_dir_all(dir).unwrap();
            let f = dir.join("animaworks");
            std::fs::write(&f, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let py = venv.join("python");
        assert_eq!(
            find_cli(py.as_os_str(), Some(path.as_os_str())),
            Some(venv.join("animaworks"))
        );
        assert_eq!(
            find_cli(OsStr::new("python3"), Some(path.as_os_str())),
            Some(path.join("animaworks"))
        );
        std::fs::set_permissions(venv.join("animaworks"), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            find_cli(py.as_os_str(), Some(path.as_os_str())),
            Some(path.join("animaworks"))
        );
        assert_eq!(find_cli(py.as_os_str(), None), None);
    }
}
