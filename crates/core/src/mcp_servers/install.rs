//! Servers a package runner starts (`npx -y pkg`, `uvx pkg`), installed once outside any call.
//!
//! Such a starter downloads its package at every start and runs it from a cache it writes: a confined call has
//! neither the network for the download nor a place that is writable and executable at once (write xor execute).
//! `animaworks-tool mcp-servers install` resolves the declared package into `<data dir>/mcp_servers/<name>/`
//! (an npm prefix or a Python virtualenv), with the files made read-only, and records what it installed in
//! `lock.json` there. A call then runs the installed entry point: readable and executable for the server, never
//! writable by any call (the folder is the runner's, as the tier folders are).
//!
//! The decision what to run is made here from the declaration and the lock ([`resolve`]); nothing is downloaded
//! by a call.

use super::ServerSpec;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The folder of the data dir that holds every installed server.
pub const DIR: &str = "mcp_servers";
/// The lock of one installed server, in its folder.
pub const LOCK: &str = "lock.json";
const MAX_LOCK: u64 = 1024 * 1024;
/// The largest package-lock.json of an installed server read for its pins (a package's whole dependency tree).
const MAX_NPM_LOCK: u64 = 64 * 1024 * 1024;

/// The package manager a starter uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Manager {
    /// `npx`: the npm registry.
    Npm,
    /// `uvx`, `uv tool run`, `pipx run`: PyPI.
    Pypi,
}

/// A declaration that starts a package: what to install and what to run from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Starter {
    pub manager: Manager,
    /// The package as declared (`@scope/name@1.2.3`, `name==1.2`, `name`), with `--with` packages for PyPI.
    pub packages: Vec<String>,
    /// The package's name, without version or extras.
    pub name: String,
    /// The program of the package to run (npm: a `bin` name; PyPI: a console script), when the declaration names
    /// it; else the package's own.
    pub program: Option<String>,
    /// The server's own arguments.
    pub rest: Vec<String>,
}

impl Starter {
    /// What the lock must have been installed for (the declaration's package words).
    pub fn requested(&self) -> String {
        let mut s = self.packages.join(" ");
        if let Some(p) = &self.program {
            s.push_str(" run ");
            s.push_str(p);
        }
        s
    }
}

/// The starter a declaration uses, when it is one the runner installs: `npx`, `uvx`, `uv tool run`, `pipx run`.
pub fn starter(spec: &ServerSpec) -> Option<Starter> {
    let base = Path::new(&spec.command).file_name()?.to_str()?;
    let args: Vec<&str> = spec.args.iter().map(String::as_str).collect();
    match base {
        "npx" => npx(&args),
        "uvx" => uvx(&args),
        "uv" if args.len() >= 2 && args[0] == "tool" && args[1] == "run" => uvx(&args[2..]),
        "pipx" if args.first() == Some(&"run") => uvx(&args[1..]),
        _ => None,
    }
}

fn npx(args: &[&str]) -> Option<Starter> {
    let mut package: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        match a {
            "-y" | "--yes" | "-q" | "--quiet" | "--silent" | "--prefer-offline" | "--prefer-online" => {}
            "-p" | "--package" => {
                i += 1;
                package = Some((*args.get(i)?).to_owned());
            }
            "--" => {
                i += 1;
                break;
            }
            _ if a.starts_with("--package=") => package = Some(a["--package=".len()..].to_owned()),
            _ if a.starts_with('-') => return None,
            _ => break,
        }
        i += 1;
    }
    let first = (*args.get(i)?).to_owned();
    let rest = args[i + 1..].iter().map(|s| (*s).to_owned()).collect();
    let (packages, program) = match package {
        Some(p) => (vec![p], Some(first)),
        None => (vec![first], None),
    };
    Some(Starter {
        manager: Manager::Npm,
        name: npm_name(&packages[0]).to_owned(),
        packages,
        program,
        rest,
    })
}

/// `@scope/name@1.2` and `name@^1` without their version.
fn npm_name(spec: &str) -> &str {
    let at = if let Some(s) = spec.strip_prefix('@') {
        s.find('@').map(|i| i + 1)
    } else {
        spec.find('@')
    };
    at.map_or(spec, |i| &spec[..i])
}

fn uvx(args: &[&str]) -> Option<Starter> {
    let mut from: Option<String> = None;
    let mut with: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        match a {
            "-q" | "--quiet" | "--offline" | "-n" | "--no-cache" | "--isolated" => {}
            "--from" => {
                i += 1;
                from = Some((*args.get(i)?).to_owned());
            }
            "--with" => {
                i += 1;
                with.push((*args.get(i)?).to_owned());
            }
            "--python" | "-p" => i += 1,
            "--" => {
                i += 1;
                break;
            }
            _ if a.starts_with("--from=") => from = Some(a["--from=".len()..].to_owned()),
            _ if a.starts_with("--with=") => with.push(a["--with=".len()..].to_owned()),
            _ if a.starts_with("--python=") => {}
            _ if a.starts_with('-') => return None,
            _ => break,
        }
        i += 1;
    }
    let first = *args.get(i)?;
    let rest = args[i + 1..].iter().map(|s| (*s).to_owned()).collect();
    // uvx's `tool@1.2` is pip's `tool==1.2`.
    let (command, version) = match first.split_once('@') {
        Some((c, v)) if from.is_none() => (c, Some(v)),
        _ => (first, None),
    };
    let (package, program) = match from {
        Some(f) => (f, Some(command.to_owned())),
        None => (
            version.map_or_else(|| command.to_owned(), |v| format!("{command}=={v}")),
            None,
        ),
    };
    let name = pypi_name(&package).to_owned();
    let mut packages = vec![package];
    packages.extend(with);
    Some(Starter {
        manager: Manager::Pypi,
        name,
        packages,
        program,
        rest,
    })
}

/// `name[extra]==1.2` and `name>=1` without extras and version.
fn pypi_name(spec: &str) -> &str {
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(spec.len());
    &spec[..end]
}

/// What one installed server holds: `<data dir>/mcp_servers/<name>/lock.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub server: String,
    pub manager: Manager,
    /// [`Starter::requested`] of the declaration it was installed for.
    pub requested: String,
    pub package: String,
    /// The version installed of the package.
    pub version: String,
    /// Every package installed, pinned (`name@1.2.3` for npm, `name==1.2.3` for PyPI).
    pub pinned: Vec<String>,
    /// The folder of the installation, beside the lock.
    pub dir: String,
    /// How to start it, relative to that folder: `["node", "node_modules/x/dist/index.js"]`,
    /// `["python", "bin/x"]` (the virtualenv's interpreter), or `["exec", "node_modules/.bin/x"]`.
    pub run: Vec<String>,
}

/// Where a declaration's server comes from at its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Install {
    /// As declared: not a starter the runner installs.
    #[default]
    AsDeclared,
    /// Installed: run `command` `args` (the declared arguments after the package's).
    Installed {
        command: String,
        args: Vec<String>,
        /// The installation's folder (canonical), which the server may read and run.
        root: PathBuf,
        version: String,
    },
    /// A starter whose package is not installed (or was for another declaration): confined, it cannot start.
    Missing { why: String },
}

/// The folder of every installed server.
pub fn root(data: &Path) -> PathBuf {
    data.join(DIR)
}

/// Is `name` usable as a folder name (a server's name can be any JSON key)?
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The lock of server `name`, when there is one that parses.
pub fn read_lock(data: &Path, name: &str) -> Option<Lock> {
    if !safe_name(name) {
        return None;
    }
    let bytes = crate::fsread::read_if_present(&root(data).join(name).join(LOCK), MAX_LOCK).ok()??;
    serde_json::from_slice(&bytes).ok()
}

/// The command that installs server `name`, as a refusal names it.
pub fn install_command(name: &str) -> String {
    format!("animaworks-tool mcp-servers install {name}")
}

/// What a declaration runs: its installation, or as declared.
pub fn resolve(data: &Path, name: &str, spec: &ServerSpec) -> Install {
    let Some(s) = starter(spec) else {
        return Install::AsDeclared;
    };
    let missing = |why: String| Install::Missing { why };
    let Some(lock) = read_lock(data, name) else {
        return missing(format!("`{}` is not installed", s.requested()));
    };
    if lock.manager != s.manager || lock.requested != s.requested() {
        return missing(format!(
            "what is installed ({}) was for another declaration ({} {})",
            lock.requested,
            spec.command,
            s.requested()
        ));
    }
    let Some(dir) = safe_name(&lock.dir)
        .then(|| root(data).join(name).join(&lock.dir))
        .and_then(|d| std::fs::canonicalize(d).ok())
    else {
        return missing(format!("its folder {} is gone", lock.dir));
    };
    let entry = |rel: &str| -> Option<PathBuf> {
        let p = dir.join(rel);
        (!Path::new(rel).is_absolute() && !rel.split('/').any(|c| c == "..") && p.exists()).then_some(p)
    };
    let (command, mut args) = match lock.run.as_slice() {
        [how, rel] => match (how.as_str(), entry(rel)) {
            ("node", Some(p)) => ("node".to_owned(), vec![p.to_string_lossy().into_owned()]),
            // The virtualenv's own interpreter runs the script: its `#!` line may name a folder it was made in.
            ("python", Some(p)) => (
                dir.join("bin/python3").to_string_lossy().into_owned(),
                vec![p.to_string_lossy().into_owned()],
            ),
            ("exec", Some(p)) => (p.to_string_lossy().into_owned(), Vec::new()),
            _ => return missing(format!("its entry point {rel} is missing")),
        },
        _ => return missing(format!("{} is not a lock this runner wrote", LOCK)),
    };
    args.extend(s.rest);
    Install::Installed {
        command,
        args,
        root: dir,
        version: lock.version,
    }
}

/// Why `install` did not install a server; each says what to do where it can.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("{name} is started by `{command}`, not by npx or uvx: there is nothing to install")]
    NotInstallable { name: String, command: String },
    #[error("{0}")]
    NotRegistry(String),
    #[error("{0:?} cannot be a folder name: give the server a name of letters, digits, '-', '_' and '.'")]
    BadName(String),
    #[error("cannot make {}: {err}", path.display())]
    CannotMake { path: PathBuf, err: std::io::Error },
    #[error("cannot write {}: {err}", path.display())]
    CannotWrite { path: PathBuf, err: std::io::Error },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Lock(#[from] serde_json::Error),
    #[error("cannot run {what}: {err}")]
    CannotRun { what: &'static str, err: std::io::Error },
    #[error(
        "{registry} could not be reached ({what} failed: {tail}); check the network or the registry setting, then \
         run the install again"
    )]
    Unreachable {
        registry: &'static str,
        what: &'static str,
        tail: String,
    },
    #[error("{what} failed: {tail}")]
    Failed { what: &'static str, tail: String },
    #[error("npm installed no {0} (no node_modules/{0}/package.json)")]
    NoPackage(String),
    #[error("{package} {version} has no program to run{} (its package.json \"bin\")", named_as(.named))]
    NoBin {
        package: String,
        version: String,
        named: Option<String>,
    },
    #[error("{package} {version} has no program {program} (no console script of that name in the virtualenv's bin/)")]
    NoScript {
        package: String,
        version: String,
        program: String,
    },
}

fn named_as(program: &Option<String>) -> String {
    program.as_deref().map(|p| format!(" named {p}")).unwrap_or_default()
}

/// Whose declaration an installation is for, which decides whether the packages' own code may run while they are
/// installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// A person declared it (the settings, AnimaWorks' config.json): npm and pip run as `npx` and `uvx` would,
    /// install scripts included.
    Person,
    /// The anima declared it (its status.json), and its shell can run `install` as well as a person: only packages
    /// of the registry by name, without running any of their code (no npm scripts, wheels only, no interpreter
    /// of the new virtualenv started), so that installing is never a way out of the sandbox.
    Anima,
}

/// Why `package` (an npm or pip requirement) cannot be installed for an anima's declaration: anything but a
/// registry name with a version (a path, a URL, a git or `file:` source, an alias) would build or run code that
/// the anima wrote.
fn registry_only(manager: Manager, package: &str) -> Result<(), InstallError> {
    let ok = match manager {
        Manager::Npm => {
            let body = package.strip_prefix('@').unwrap_or(package);
            let (name, version) = body.split_once('@').unwrap_or((body, ""));
            let scoped_ok = match name.split_once('/') {
                Some((scope, n)) => package.starts_with('@') && npm_word(scope) && npm_word(n),
                None => !package.starts_with('@') && npm_word(name),
            };
            scoped_ok && !archive(name) && !version.contains(['/', ':', '\\'])
        }
        Manager::Pypi => {
            let name = pypi_name(package);
            !name.is_empty()
                && !name.starts_with(['.', '-'])
                && !archive(name)
                && !package.contains(['/', '\\', ':', '@', ';'])
        }
    };
    if ok {
        Ok(())
    } else {
        Err(InstallError::NotRegistry(format!(
            "{package:?} is not a registry package by name: a server an anima declares (its status.json) is installed \
             only from the registry, by name and version; declare it in the settings' \"mcp_servers\" to install it \
             from elsewhere"
        )))
    }
}

/// A name npm and pip would take for a file of the working folder.
fn archive(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        ".zip", ".whl", ".tar", ".gz", ".tgz", ".bz2", ".tbz", ".xz", ".txz", ".lz", ".tlz", ".lzma", ".7z",
    ]
    .iter()
    .any(|e| n.ends_with(e))
}

fn npm_word(w: &str) -> bool {
    !w.is_empty()
        && !w.starts_with('.')
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~'))
}

/// How `install` went for one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Installed(Lock),
    /// The lock matches the declaration and its folder is there (`--update` installs anew).
    Kept(Lock),
}

/// Install server `name`'s package into `<data>/mcp_servers/<name>/`, unless the lock already matches (and
/// `update` is false). The new installation is made beside the old one and the lock switched to it at once, so
/// a server starting meanwhile runs one or the other, whole.
pub fn install(
    data: &Path,
    name: &str,
    spec: &ServerSpec,
    update: bool,
    python: &std::ffi::OsStr,
    trust: Trust,
) -> Result<Outcome, InstallError> {
    let Some(s) = starter(spec) else {
        return Err(InstallError::NotInstallable {
            name: name.to_owned(),
            command: spec.command.clone(),
        });
    };
    if trust == Trust::Anima {
        for p in &s.packages {
            registry_only(s.manager, p)?;
        }
    }
    if !safe_name(name) {
        return Err(InstallError::BadName(name.to_owned()));
    }
    if !update {
        if let (Some(lock), Install::Installed { .. }) = (read_lock(data, name), resolve(data, name, spec)) {
            return Ok(Outcome::Kept(lock));
        }
    }
    let folder = root(data).join(name);
    std::fs::create_dir_all(&folder).map_err(|err| InstallError::CannotMake {
        path: folder.clone(),
        err,
    })?;
    let old = read_lock(data, name);
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let dir_name = format!(
        "{}-{stamp}-{}",
        match s.manager {
            Manager::Npm => "npm",
            Manager::Pypi => "venv",
        },
        std::process::id()
    );
    let dir = folder.join(&dir_name);
    let made = match s.manager {
        Manager::Npm => install_npm(&dir, &s, trust),
        Manager::Pypi => install_pypi(&dir, &s, python, trust),
    };
    let (version, pinned, run) = match made {
        Ok(m) => m,
        Err(e) => {
            remove_tree(&dir);
            return Err(e);
        }
    };
    read_only(&dir);
    let lock = Lock {
        server: name.to_owned(),
        manager: s.manager,
        requested: s.requested(),
        package: s.name.clone(),
        version,
        pinned,
        dir: dir_name,
        run,
    };
    let text = serde_json::to_string_pretty(&lock)? + "\n";
    let tmp = folder.join(format!(".{LOCK}.{}", std::process::id()));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, folder.join(LOCK)))
        .map_err(|err| InstallError::CannotWrite {
            path: folder.join(LOCK),
            err,
        })?;
    if let Some(old) = old.filter(|o| o.dir != lock.dir && safe_name(&o.dir)) {
        remove_tree(&folder.join(old.dir));
    }
    Ok(Outcome::Installed(lock))
}

/// Run an installer; its failure as a sentence, with the registry named when it could not be reached.
fn run(cmd: &mut Command, what: &'static str, registry: &'static str) -> Result<String, InstallError> {
    let o = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|err| InstallError::CannotRun { what, err })?;
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    if o.status.success() {
        return Ok(out);
    }
    let err = String::from_utf8_lossy(&o.stderr);
    let unreachable = [
        "ENOTFOUND",
        "EAI_AGAIN",
        "ECONNREFUSED",
        "ETIMEDOUT",
        "ECONNRESET",
        "ENETUNREACH",
        "Failed to establish a new connection",
        "Temporary failure in name resolution",
        "Network is unreachable",
        "NewConnectionError",
        "ConnectTimeoutError",
        "ProxyError",
    ]
    .iter()
    .any(|m| err.contains(m));
    let last: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).rev().take(3).collect();
    let tail = last.into_iter().rev().collect::<Vec<_>>().join(" / ");
    if unreachable {
        Err(InstallError::Unreachable { registry, what, tail })
    } else {
        Err(InstallError::Failed { what, tail })
    }
}

fn install_npm(dir: &Path, s: &Starter, trust: Trust) -> Result<(String, Vec<String>, Vec<String>), InstallError> {
    std::fs::create_dir_all(dir).map_err(|err| InstallError::CannotMake {
        path: dir.to_path_buf(),
        err,
    })?;
    // A prefix of its own: npm writes package.json and package-lock.json there, the pins of the whole tree.
    std::fs::write(dir.join("package.json"), "{\"private\": true}\n")?;
    let mut cmd = Command::new("npm");
    cmd.arg("install")
        .arg("--prefix")
        .arg(dir)
        .args(["--no-audit", "--no-fund", "--loglevel=error", "--save-exact"])
        .args((trust == Trust::Anima).then_some("--ignore-scripts"))
        .args(&s.packages);
    if trust == Trust::Anima {
        // Nothing of the caller's working folder is a package: a name is only ever the registry's.
        cmd.current_dir(dir);
    }
    run(&mut cmd, "npm install", "the npm registry")?;
    let pkg_dir = dir.join("node_modules").join(&s.name);
    let manifest: serde_json::Value = crate::fsread::read(&pkg_dir.join("package.json"), MAX_LOCK)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| InstallError::NoPackage(s.name.clone()))?;
    let version = manifest["version"].as_str().unwrap_or_default().to_owned();
    let unscoped = s.name.rsplit('/').next().unwrap_or(&s.name);
    let bin = match (&manifest["bin"], &s.program) {
        (serde_json::Value::String(b), _) => Some(b.clone()),
        (serde_json::Value::Object(m), Some(p)) => m.get(p).and_then(|v| v.as_str()).map(str::to_owned),
        (serde_json::Value::Object(m), None) if m.len() == 1 => {
            m.values().next().and_then(|v| v.as_str()).map(str::to_owned)
        }
        (serde_json::Value::Object(m), None) => m.get(unscoped).and_then(|v| v.as_str()).map(str::to_owned),
        _ => None,
    };
    let Some(bin) = bin else {
        return Err(InstallError::NoBin {
            package: s.name.clone(),
            version,
            named: s.program.clone(),
        });
    };
    let rel = format!("node_modules/{}/{}", s.name, bin.trim_start_matches("./"));
    let file = dir.join(&rel);
    let head = std::fs::File::open(&file)
        .and_then(|f| {
            use std::io::Read;
            let mut head = Vec::new();
            f.take(128).read_to_end(&mut head).map(|_| head)
        })
        .unwrap_or_default();
    let is_node = [".js", ".mjs", ".cjs"].iter().any(|e| rel.ends_with(e))
        || (head.starts_with(b"#!")
            && String::from_utf8_lossy(&head)
                .lines()
                .next()
                .is_some_and(|l| l.contains("node")));
    let run = if is_node {
        vec!["node".into(), rel]
    } else {
        vec!["exec".into(), rel]
    };
    let mut pinned = Vec::new();
    if let Some(lock) = crate::fsread::read(&dir.join("package-lock.json"), MAX_NPM_LOCK)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    {
        if let Some(pkgs) = lock["packages"].as_object() {
            for (path, p) in pkgs {
                if let (Some(n), Some(v)) = (path.rsplit_once("node_modules/").map(|(_, n)| n), p["version"].as_str()) {
                    pinned.push(format!("{n}@{v}"));
                }
            }
        }
    }
    pinned.sort();
    pinned.dedup();
    Ok((version, pinned, run))
}

fn install_pypi(
    dir: &Path,
    s: &Starter,
    python: &std::ffi::OsStr,
    trust: Trust,
) -> Result<(String, Vec<String>, Vec<String>), InstallError> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|err| InstallError::CannotMake {
            path: parent.to_path_buf(),
            err,
        })?;
    }
    run(
        Command::new(python).arg("-m").arg("venv").arg(dir),
        "python3 -m venv",
        "PyPI",
    )?;
    let py = dir.join("bin/python3");
    let mut pip = Command::new(&py);
    if trust == Trust::Anima {
        pip.current_dir(dir);
    }
    run(
        pip.args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-input",
        ])
        .args(match trust {
            Trust::Person => &[][..],
            Trust::Anima => &["--only-binary", ":all:"][..],
        })
        .args(&s.packages),
        "pip install",
        "PyPI",
    )?;
    let pinned: Vec<String> = match trust {
        Trust::Person => run(
            Command::new(&py).args(["-m", "pip", "freeze", "--disable-pip-version-check", "--all"]),
            "pip freeze",
            "PyPI",
        )?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect(),
        // The new virtualenv's interpreter would run the `.pth` files its packages installed.
        Trust::Anima => dist_infos(dir),
    };
    let norm = |n: &str| n.to_ascii_lowercase().replace(['_', '.'], "-");
    let version = pinned
        .iter()
        .find_map(|l| {
            l.split_once("==")
                .filter(|(n, _)| norm(n) == norm(&s.name))
                .map(|(_, v)| v.to_owned())
        })
        .unwrap_or_default();
    let program = s.program.clone().unwrap_or_else(|| s.name.clone());
    let rel = format!("bin/{program}");
    if !dir.join(&rel).is_file() {
        return Err(InstallError::NoScript {
            package: s.name.clone(),
            version,
            program,
        });
    }
    Ok((version, pinned, vec!["python".into(), rel]))
}

/// `name==version` of every package of the virtualenv at `dir`, read from its `*.dist-info/METADATA` files.
fn dist_infos(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(libs) = std::fs::read_dir(dir.join("lib")) else {
        return out;
    };
    for lib in libs.flatten() {
        let Ok(dists) = std::fs::read_dir(lib.path().join("site-packages")) else {
            continue;
        };
        for d in dists.flatten() {
            if !d.file_name().to_string_lossy().ends_with(".dist-info") {
                continue;
            }
            let Ok(meta) = crate::fsread::read(&d.path().join("METADATA"), MAX_LOCK) else {
                continue;
            };
            let meta = String::from_utf8_lossy(&meta);
            let field = |k: &str| {
                meta.lines()
                    .take_while(|l| !l.is_empty())
                    .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_owned()))
            };
            if let (Some(n), Some(v)) = (field("Name:"), field("Version:")) {
                out.push(format!("{n}=={v}"));
            }
        }
    }
    out.sort_by_key(|p| p.to_ascii_lowercase());
    out
}

/// Every file and folder under `dir` without write permission: defence beside the sandbox, which never grants
/// writing there.
fn read_only(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(m) = std::fs::symlink_metadata(dir) else { return };
    if m.file_type().is_symlink() {
        return;
    }
    if m.is_dir() {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                read_only(&e.path());
            }
        }
    }
    let mode = m.permissions().mode() & !0o222;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode));
}

/// Remove an installation made read-only.
pub fn remove_tree(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fn writable(p: &Path) {
        let Ok(m) = std::fs::symlink_metadata(p) else { return };
        if m.is_dir() {
            let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(m.permissions().mode() | 0o700));
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    writable(&e.path());
                }
            }
        }
    }
    writable(dir);
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(command: &str, args: &[&str]) -> ServerSpec {
        serde_json::from_value(serde_json::json!({"command": command, "args": args})).unwrap()
    }

    #[test]
    fn starters_are_read_as_their_package_and_arguments() {
        let s = starter(&spec(
            "npx",
            &["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"],
        ))
        .unwrap();
        assert_eq!(s.manager, Manager::Npm);
        assert_eq!(s.name, "@modelcontextprotocol/server-filesystem");
        assert_eq!(s.rest, vec!["/srv/docs"]);
        let s = starter(&spec("/usr/bin/npx", &["@scope/x@1.2.3"])).unwrap();
        assert_eq!(
            (s.name.as_str(), s.packages[0].as_str()),
            ("@scope/x", "@scope/x@1.2.3")
        );
        let s = starter(&spec("npx", &["--package=a@1", "a-cli", "--flag"])).unwrap();
        assert_eq!(
            (s.program.as_deref(), s.rest.clone()),
            (Some("a-cli"), vec!["--flag".to_owned()])
        );
        let s = starter(&spec("uvx", &["mcp-server-git", "--repository", "/r"])).unwrap();
        assert_eq!((s.manager, s.name.as_str()), (Manager::Pypi, "mcp-server-git"));
        assert_eq!(s.rest, vec!["--repository", "/r"]);
        let s = starter(&spec("uvx", &["mcp-server-time@2026.10.19"])).unwrap();
        assert_eq!(s.packages, vec!["mcp-server-time==2026.10.19"]);
        let s = starter(&spec("uvx", &["--from", "pkg[x]==1", "cmd"])).unwrap();
        assert_eq!((s.name.as_str(), s.program.as_deref()), ("pkg", Some("cmd")));
        assert_eq!(starter(&spec("uv", &["tool", "run", "x"])).unwrap().name, "x");
        assert!(starter(&spec("node", &["x.js"])).is_none());
        assert!(
            starter(&spec("npx", &["-c", "echo"])).is_none(),
            "an unknown flag is left as declared"
        );
    }

    #[test]
    fn an_animas_declaration_installs_only_registry_names() {
        for ok in ["left-pad", "left-pad@1.3.0", "@scope/x@^1.2", "x@~1.2.3", "x@latest"] {
            assert!(registry_only(Manager::Npm, ok).is_ok(), "{ok}");
        }
        for bad in [
            "./x",
            "/abs/x",
            "x@file:../y",
            "user/repo",
            "github:u/r",
            "x.tgz",
            "@s/x@file:/y",
            "@/x",
            ".x",
        ] {
            assert!(registry_only(Manager::Npm, bad).is_err(), "{bad}");
        }
        for ok in [
            "mcp-server-time",
            "mcp-server-time==2026.10.19",
            "pkg[x]>=1,<2",
            "a_b.c~=1.0",
        ] {
            assert!(registry_only(Manager::Pypi, ok).is_ok(), "{ok}");
        }
        for bad in [
            "./x",
            "/abs/x",
            "x @ file:///y",
            "git+https://h/r",
            "x.zip",
            "x.whl",
            "x; python_version>'3'",
        ] {
            assert!(registry_only(Manager::Pypi, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_starter_without_its_lock_is_missing_and_with_it_runs_the_installed_entry() {
        let data = tempfile::tempdir().unwrap();
        let s = spec("npx", &["-y", "pkg", "/srv"]);
        assert!(matches!(resolve(data.path(), "p", &s), Install::Missing { .. }));
        assert_eq!(resolve(data.path(), "p", &spec("node", &["x"])), Install::AsDeclared);
        let dir = root(data.path()).join("p/npm-1");
        std::fs::create_dir_all(dir.join("node_modules/pkg")).unwrap();
        std::fs::write(dir.join("node_modules/pkg/index.js"), "").unwrap();
        let lock = Lock {
            server: "p".into(),
            manager: Manager::Npm,
            requested: "pkg".into(),
            package: "pkg".into(),
            version: "1.0.0".into(),
            pinned: vec!["pkg@1.0.0".into()],
            dir: "npm-1".into(),
            run: vec!["node".into(), "node_modules/pkg/index.js".into()],
        };
        std::fs::write(
            root(data.path()).join("p").join(LOCK),
            serde_json::to_string(&lock).unwrap(),
        )
        .unwrap();
        match resolve(data.path(), "p", &s) {
            Install::Installed { command, args, .. } => {
                assert_eq!(command, "node");
                assert!(
                    args[0].ends_with("node_modules/pkg/index.js") && args[1] == "/srv",
                    "{args:?}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Another package under the same name is not what was installed.
        assert!(matches!(
            resolve(data.path(), "p", &spec("npx", &["other"])),
            Install::Missing { .. }
        ));
        // A lock naming a path out of its folder is refused.
        let bad = Lock {
            run: vec!["node".into(), "../../x.js".into()],
            ..lock
        };
        std::fs::write(
            root(data.path()).join("p").join(LOCK),
            serde_json::to_string(&bad).unwrap(),
        )
        .unwrap();
        assert!(matches!(resolve(data.path(), "p", &s), Install::Missing { .. }));
    }
}
