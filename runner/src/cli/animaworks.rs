//! `animaworks install|uninstall|status|manifests`: the adapter that routes AnimaWorks' own server through the
//! runner (tool-sdk-py/src/animaworks_tool_adapter). Installing and removing it is the adapter's own Python,
//! run by the virtualenv's interpreter from a copy of the package embedded here, so that one program decides
//! which AnimaWorks it knows; this side only finds the interpreter and hands over the runner's path.

use awt_core::call::Runner;
use awt_core::tier::Tier;
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The adapter's files, as the runner ships them.
const ADAPTER: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_adapter/__init__.py"),
    ),
    (
        "_hook.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_adapter/_hook.py"),
    ),
    (
        "_known.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_adapter/_known.py"),
    ),
    (
        "_client.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_adapter/_client.py"),
    ),
    (
        "_patches.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_adapter/_patches.py"),
    ),
    (
        "_manage.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_adapter/_manage.py"),
    ),
];

#[derive(Args, Debug)]
#[command(after_help = "\
The adapter makes AnimaWorks' own server ask the runner for the schemas, calls and gate profiles of common and
personal tools instead of importing their modules in its process (docs/animaworks.md). It goes into the
virtualenv AnimaWorks is installed in; nothing of AnimaWorks' files is changed, and an AnimaWorks version the
adapter does not know is left as it is.")]
pub struct AnimaworksArgs {
    #[command(subcommand)]
    cmd: AwCmd,
}

#[derive(Subcommand, Debug)]
enum AwCmd {
    /// Install the adapter into AnimaWorks' virtualenv (idempotent).
    Install {
        /// The virtualenv AnimaWorks is installed in (it has bin/python).
        #[arg(long, value_name = "DIR")]
        venv: PathBuf,
        /// Also put this runner in place of the virtualenv's `animaworks-tool` script (the original is kept as
        /// `animaworks-tool.orig`).
        #[arg(long)]
        replace_script: bool,
    },
    /// Remove the adapter and restore the original `animaworks-tool` script (idempotent).
    Uninstall {
        /// The virtualenv AnimaWorks is installed in.
        #[arg(long, value_name = "DIR")]
        venv: PathBuf,
    },
    /// Whether the adapter is installed, the AnimaWorks version found, and each path it reroutes.
    Status {
        /// The virtualenv AnimaWorks is installed in.
        #[arg(long, value_name = "DIR")]
        venv: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// For the adapter: every common and personal tool's schemas and profile, as JSON.
    #[command(hide = true)]
    Manifests,
}

pub async fn animaworks(runner: &Runner, args: AnimaworksArgs) -> i32 {
    match args.cmd {
        AwCmd::Install { venv, replace_script } => {
            let exe = match std::env::current_exe() {
                Ok(p) => p,
                Err(e) => {
                    tell!("animaworks-tool animaworks install: cannot find the runner's own path: {e}");
                    return 13;
                }
            };
            let mut extra = vec!["--runner".into(), exe.into_os_string()];
            if replace_script {
                extra.push("--replace-script".into());
            }
            manage(&venv, "install", &extra)
        }
        AwCmd::Uninstall { venv } => manage(&venv, "uninstall", &[]),
        AwCmd::Status { venv, json } => {
            let extra = if json { vec!["--json".into()] } else { vec![] };
            manage(&venv, "status", &extra)
        }
        AwCmd::Manifests => manifests(runner).await,
    }
}

/// Why a folder given as `--venv` has no interpreter to run.
#[derive(Debug)]
enum NotAVenv {
    NoPyvenvCfg(PathBuf),
    NoPython(PathBuf),
}

impl std::fmt::Display for NotAVenv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotAVenv::NoPyvenvCfg(venv) => write!(f, "{} is not a virtualenv (no pyvenv.cfg)", venv.display()),
            NotAVenv::NoPython(venv) => write!(f, "{} has no bin/python", venv.display()),
        }
    }
}

/// The virtualenv's interpreter, or why there is none.
fn venv_python(venv: &Path) -> Result<PathBuf, NotAVenv> {
    let python = venv.join("bin").join("python");
    if !venv.join("pyvenv.cfg").is_file() {
        return Err(NotAVenv::NoPyvenvCfg(venv.to_path_buf()));
    }
    if !python.is_file() {
        return Err(NotAVenv::NoPython(venv.to_path_buf()));
    }
    Ok(python)
}

const MANAGE: &str = "import sys
for m in [m for m in sys.modules if m.split('.')[0] == 'animaworks_tool_adapter']:
    del sys.modules[m]
sys.path.insert(0, sys.argv.pop(1))
from animaworks_tool_adapter import _manage
sys.exit(_manage.main(sys.argv[1:]))
";

/// `python -I -c … <verb> --venv V` running the adapter's `_manage` from a fresh copy of the embedded package
/// (the folder lives as long as the returned guard). `-I`: neither the caller's PYTHONPATH nor the working
/// directory may put another adapter in front of this one; an installed one that the `.pth` line imported at
/// start is dropped from `sys.modules`, so that an update installs the embedded copy.
fn manage_command(python: &Path, verb: &str, venv: &Path) -> std::io::Result<(Command, tempfile::TempDir)> {
    let tmp = tempfile::Builder::new().prefix("animaworks-tool-adapter-").tempdir()?;
    let pkg = tmp.path().join("animaworks_tool_adapter");
    std::fs::create_dir(&pkg)?;
    for (name, text) in ADAPTER {
        std::fs::write(pkg.join(name), text)?;
    }
    let mut c = Command::new(python);
    c.arg("-I")
        .arg("-c")
        .arg(MANAGE)
        .arg(tmp.path())
        .arg(verb)
        .arg("--venv")
        .arg(venv)
        .env_remove(awt_core::env_vars::PROTOCOL.name);
    Ok((c, tmp))
}

/// Runs the adapter's `_manage <verb>` with the virtualenv's interpreter; its exit code is the command's.
fn manage(venv: &Path, verb: &str, extra: &[std::ffi::OsString]) -> i32 {
    let python = match venv_python(venv) {
        Ok(p) => p,
        Err(e) => {
            tell!("animaworks-tool animaworks {verb}: {e}");
            return 2;
        }
    };
    let (mut c, _tmp) = match manage_command(&python, verb, venv) {
        Ok(v) => v,
        Err(e) => {
            tell!("animaworks-tool animaworks {verb}: cannot write the adapter to a temporary folder: {e}");
            return 13;
        }
    };
    match c.args(extra).status() {
        Ok(s) => s.code().unwrap_or(13),
        Err(e) => {
            tell!(
                "animaworks-tool animaworks {verb}: cannot run {}: {e}",
                python.display()
            );
            9
        }
    }
}

/// `animaworks manifests`: what the adapter needs of every common and personal tool, from the schema cache (a
/// cold module is probed confined, as `tools` does). Never the core tier: AnimaWorks runs its own.
async fn manifests(runner: &Runner) -> i32 {
    let (resolved, problems, _) = awt_llm::catalog::manifests(runner).await;
    let tools: Vec<Value> = resolved
        .iter()
        .filter(|r| r.file.tier != Tier::Core)
        .map(|r| {
            let m = &r.manifest;
            json!({
                "name": r.file.name,
                "tier": r.file.tier,
                "path": r.file.path,
                "legacy": m.legacy,
                "legacy_profile": m.legacy_profile,
                "legacy_profile_error": m.legacy_profile_error,
                "actions": m.actions.iter().map(|a| json!({
                    "name": a.name,
                    "schema_name": a.schema_name,
                    "description": a.description,
                    "input_schema": a.input_schema,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let problems: Vec<Value> = problems
        .iter()
        .filter(|p| p.tier != Tier::Core)
        .map(|p| json!({"tool": p.tool, "path": p.path, "kind": p.kind, "message": p.message}))
        .collect();
    say!("{}", json!({"tools": tools, "problems": problems}));
    0
}

/// `doctor`'s lines on the adapter: for the virtualenv of the configured Python (`--python`,
/// `$ANIMAWORKS_PYTHON`) and of this runner when it stands in a virtualenv's bin/, whatever the adapter says of it.
pub fn doctor_lines(runner: &Runner) -> Vec<String> {
    let mut venvs: Vec<PathBuf> = Vec::new();
    let python = PathBuf::from(&runner.dirs.python);
    if python.is_absolute() {
        if let Some(v) = python.parent().and_then(Path::parent) {
            venvs.push(v.to_path_buf());
        }
    }
    if let Some(v) = std::env::current_exe()
        .ok()
        .as_deref()
        .and_then(Path::parent)
        .and_then(Path::parent)
    {
        venvs.push(v.to_path_buf());
    }
    venvs.dedup();
    let mut lines = Vec::new();
    for venv in venvs.iter().filter(|v| v.join("pyvenv.cfg").is_file()) {
        let Ok(python) = venv_python(venv) else { continue };
        let out = manage_command(&python, "status", venv).and_then(|(mut c, tmp)| {
            let out = c.arg("--doctor").output();
            drop(tmp);
            out
        });
        match out {
            Ok(o) => lines.extend(String::from_utf8_lossy(&o.stdout).lines().map(str::to_owned)),
            Err(e) => lines.push(format!(
                "AnimaWorks adapter: {}: cannot run {}: {e}",
                venv.display(),
                python.display()
            )),
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    /// A file added to the adapter is installed too.
    #[test]
    fn every_adapter_file_is_embedded() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tool-sdk-py/src/animaworks_tool_adapter"
        );
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".py"))
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = super::ADAPTER.iter().map(|(n, _)| (*n).to_owned()).collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
    }
}
