//! The Python shim that runs `.py` tools (AnimaWorks modules and tool-sdk-py tools) ships inside the binary:
//! the files of tool-sdk-py's package are embedded and written once per content hash into the cache dir, so
//! there is no install step. The runner also writes the package's byte code, once per interpreter
//! ([`compile_in_background`]), because a sandboxed tool's Python cannot.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The embedded package: (path relative to the package folder, contents).
const FILES: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/__init__.py"),
    ),
    (
        "_action.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_action.py"),
    ),
    (
        "_broker.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_broker.py"),
    ),
    (
        "_context.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_context.py"),
    ),
    (
        "_credentials.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_credentials.py"),
    ),
    (
        "_errors.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_errors.py"),
    ),
    (
        "_runtime.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_runtime.py"),
    ),
    (
        "_shim.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_shim.py"),
    ),
    (
        "_start.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_start.py"),
    ),
    (
        "_use_tool.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_use_tool.py"),
    ),
    (
        "_vault.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_vault.py"),
    ),
    (
        "_wire.py",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/_wire.py"),
    ),
    (
        "py.typed",
        include_str!("../../../tool-sdk-py/src/animaworks_tool_sdk/py.typed"),
    ),
];

/// FNV-1a over `bytes`, continued from `h` (a `const fn`: the shim's hash is computed at compile time).
const fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x100000001b3);
        i += 1;
    }
    h
}

const FNV_START: u64 = 0xcbf29ce484222325;

/// Identifies this build's shim: schemas cached by another shim are probed again. Computed when the runner is
/// compiled: hashing the whole package at run time cost every `.py` call (bench/README.md).
// A package several times today's 67 KB would trip the lint; the loop ends whatever its size.
#[allow(long_running_const_eval)]
const CONTENT_HASH: u64 = {
    let mut h = FNV_START;
    let mut i = 0;
    while i < FILES.len() {
        h = fnv(h, FILES[i].0.as_bytes());
        h = fnv(h, FILES[i].1.as_bytes());
        i += 1;
    }
    h
};

pub fn content_hash() -> u64 {
    CONTENT_HASH
}

/// The path of the script Python starts (`_start.py`, which imports the shim so that its byte code is cached),
/// writing the package on first use (atomically: a temp dir renamed into place).
///
/// Before each use the extracted package is checked against the bytes compiled into this runner, in folders
/// that are this user's own and writable by nobody else ([`crate::owned`]): a copy that differs is replaced,
/// one another user owns or could change is refused (it runs in every Python tool, core tools included).
pub fn shim_path(cache: &Path) -> io::Result<PathBuf> {
    // Concurrent probes of one listing all ask on a fresh cache: one extracts, the others then find its copy.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    crate::owned::dir(cache, "cache dir")?;
    let root = cache.join(format!("pysdk-{:016x}", content_hash()));
    let shim = root.join("animaworks_tool_sdk").join("_start.py");
    // Why more than once: a compiler still running for the copy moved aside may recreate its folders by path.
    for _ in 0..3 {
        if intact(&root)? {
            return Ok(shim);
        }
        extract(cache, &root)?;
    }
    if intact(&root)? {
        Ok(shim)
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("could not write the Python shim under {}", root.display()),
        ))
    }
}

/// Write the package into a fresh folder and rename it to `root`; a copy already there that differs from this
/// runner's (checked to be our own) is moved aside and removed first. One that is intact by now (another runner
/// wrote it meanwhile) is kept: its callers may be starting Python on it.
fn extract(cache: &Path, root: &Path) -> io::Result<()> {
    let tmp = tempfile::Builder::new().prefix(".pysdk-").tempdir_in(cache)?;
    let pkg = tmp.path().join("animaworks_tool_sdk");
    std::fs::DirBuilder::new().mode(0o755).create(&pkg)?;
    for (name, text) in FILES {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(pkg.join(name))?;
        f.write_all(text.as_bytes())?;
    }
    if intact(root)? {
        return Ok(());
    }
    let tmp = tmp.keep();
    if root.exists() {
        let old = tempfile::Builder::new().prefix(".pysdk-old-").tempdir_in(cache)?.keep();
        if std::fs::rename(root, old.join("x")).is_ok() {
            let _ = std::fs::remove_dir_all(&old);
        }
    }
    if std::fs::rename(&tmp, root).is_err() {
        // Another runner won the race; its copy is checked by the caller.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(())
}

/// The package under `root` is this runner's, byte for byte, in folders of this user's own.
fn intact(root: &Path) -> io::Result<bool> {
    let pkg = root.join("animaworks_tool_sdk");
    for d in [root, &pkg] {
        if !crate::owned::existing_dir(d, "Python shim folder")? {
            return Ok(false);
        }
    }
    // Byte code there runs too: its folder must be as much our own (`false` when absent is fine).
    crate::owned::existing_dir(&pkg.join("__pycache__"), "Python shim folder")?;
    for (name, text) in FILES {
        if !crate::owned::file_is(&pkg.join(name), text.as_bytes(), "Python shim file")? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What the compiler needs of the tool's environment: where to find the interpreter (a version manager's shim
/// resolves through `HOME` and its own variables), nothing else: the tool's credentials stay out of a process that
/// runs unconfined.
fn compiler_env(env: &[(OsString, OsString)]) -> impl Iterator<Item = (&OsString, &OsString)> {
    env.iter()
        .filter(|(k, _)| {
            let k = k.to_string_lossy();
            k == "PATH" || k == "HOME" || k.starts_with("PYENV_") || k.starts_with("ASDF_")
        })
        .map(|(k, v)| (k, v))
}

/// Compiles the package's modules into `__pycache__` for `python`, unless that was done already; never waits.
///
/// Why the runner does it: Python caches an imported module's byte code beside it, but a sandboxed tool cannot
/// write under the cache dir (which must stay so: byte code there runs in every tool), and
/// `PYTHONDONTWRITEBYTECODE`, common in containers, forbids it anyway; the shim was then compiled on every call
/// (milliseconds). The compiler is the tool's own interpreter, isolated (`-I -S`: no `PYTHON*` variables, no
/// `site`, no user site-packages), so nothing but the standard library's `py_compile` runs unconfined (the
/// interpreter is the operator's, `--python`, `$ANIMAWORKS_PYTHON` or `python3` on the tool's `PATH`, which the
/// runner already runs unconfined for core tools and the AnimaWorks CLI). It runs
/// in the background, in a group of its own: the call that starts it does not wait, later calls load the byte
/// code. Python checks each `.pyc` against its source's mtime and size, as for byte code it writes itself. A
/// marker per interpreter (its path, size, mtime, inode) says it is done; a claim keeps concurrent runners
/// from compiling twice and expires after a minute, should the compiler have died.
pub fn compile_in_background(shim: &Path, python: &Path, env: &[(OsString, OsString)]) {
    let Some(pkg) = shim.parent() else { return };
    let cache = pkg.join("__pycache__");
    let key = interpreter_key(python);
    let done = cache.join(format!(".compiled-{key:016x}"));
    if done.exists() {
        return;
    }
    let claim = cache.join(format!(".compiling-{key:016x}"));
    let made = std::fs::DirBuilder::new().mode(0o755).create(&cache);
    if made.is_err() && !cache.is_dir() || !take_claim(&claim) {
        return;
    }
    let mut cmd = std::process::Command::new(python);
    cmd.args(["-I", "-S", "-c", COMPILE])
        .arg(pkg)
        .arg(&done)
        .arg(&claim)
        .env_clear()
        .envs(compiler_env(env))
        .current_dir(pkg)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    match awt_sys::reap::start_owned(|| cmd.spawn(), |c| Some(c.id())) {
        Ok(mut child) => {
            // Reaped by a thread, so a long-lived runner keeps no zombie; a one-shot call exits without waiting.
            let _ = std::thread::Builder::new()
                .name("pyshim-compile".into())
                .spawn(move || {
                    let _ = child.wait();
                    awt_sys::reap::disown(child.id());
                });
        }
        Err(_) => {
            let _ = std::fs::remove_file(&claim);
        }
    }
}

/// What the isolated interpreter runs: argv = package dir, done marker, claim. A module this interpreter
/// cannot compile is left out (it is then compiled, or fails, as without byte code) and the rest marked done,
/// so it is not tried again on every call. The claim becomes the marker in one rename: whoever reads the folder
/// sees either the claim or the marker, never both.
const COMPILE: &str = "\
import os, py_compile, sys
pkg, done, claim = sys.argv[1:4]
for name in sorted(os.listdir(pkg)):
    if name.endswith('.py'):
        for level in (0, 1, 2):
            try:
                py_compile.compile(os.path.join(pkg, name), optimize=level, doraise=True,
                                   invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
            except Exception:
                pass
try:
    os.replace(claim, done)
except OSError:
    open(done, 'a').close()
";

/// The interpreter as a file: its canonical path and what changes when it is replaced.
fn interpreter_key(python: &Path) -> u64 {
    let real = std::fs::canonicalize(python).unwrap_or_else(|_| python.to_path_buf());
    let h = fnv(FNV_START, real.as_os_str().as_bytes());
    match std::fs::metadata(&real) {
        Ok(m) => {
            let stamp = [m.len(), m.mtime() as u64, m.mtime_nsec() as u64, m.ino(), m.dev()];
            stamp.iter().fold(h, |h, v| fnv(h, &v.to_le_bytes()))
        }
        Err(_) => h,
    }
}

/// Create the claim, or take over one older than a minute (its compiler died).
fn take_claim(claim: &Path) -> bool {
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(claim)
            .is_ok()
    };
    if create() {
        return true;
    }
    let stale = std::fs::metadata(claim)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(60));
    stale && std::fs::remove_file(claim).is_ok() && create()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compile_time_hash_is_fnv_of_every_name_and_text() {
        // FNV-1a written out again, over every name and text in order.
        let at_run_time = FILES
            .iter()
            .flat_map(|(name, text)| name.bytes().chain(text.bytes()))
            .fold(FNV_START, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
        assert_eq!(content_hash(), at_run_time);
    }

    #[test]
    fn every_package_file_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tool-sdk-py/src/animaworks_tool_sdk");
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") {
                assert!(
                    super::FILES.iter().any(|(n, _)| *n == name),
                    "{name} is not embedded in pyshim.rs"
                );
            }
        }
    }

    /// The claim is renamed onto the marker: no moment shows both (a reader that saw the marker beside the claim
    /// took the compile for unfinished), nor neither.
    #[test]
    fn the_claim_becomes_the_done_marker_in_one_rename() {
        use std::os::unix::fs::MetadataExt;
        let Ok(python) = which::which("python3") else {
            awt_sys::skipped!("python3 is not on PATH");
            return;
        };
        let t = tempfile::tempdir().unwrap();
        let pkg = t.path().join("pkg");
        std::fs::create_dir_all(pkg.join("__pycache__")).unwrap();
        std::fs::write(pkg.join("m.py"), "X = 1\n").unwrap();
        let (done, claim) = (pkg.join("__pycache__/.compiled-1"), pkg.join("__pycache__/.compiling-1"));
        assert!(take_claim(&claim));
        let claimed = std::fs::metadata(&claim).unwrap().ino();
        let out = std::process::Command::new(python)
            .args(["-I", "-S", "-c", COMPILE])
            .args([&pkg, &done, &claim])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(!claim.exists(), "the claim is left");
        assert_eq!(std::fs::metadata(&done).unwrap().ino(), claimed, "the marker is not the claim renamed");
        let pycs = pkg.join("__pycache__").read_dir().unwrap().flatten();
        assert!(pycs.into_iter().any(|e| e.file_name().to_string_lossy().ends_with(".pyc")));
    }

    /// The unconfined compiler gets where to find the interpreter, never the tool's credentials.
    #[test]
    fn the_compiler_gets_no_credential() {
        let env: Vec<(OsString, OsString)> = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/a"),
            ("PYENV_VERSION", "3.12"),
            ("GITHUB_TOKEN", "secret"),
            ("ANIMAWORKS_ANIMA_DIR", "/a"),
            ("XPATH", "x"),
        ]
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
        let kept: Vec<String> = compiler_env(&env)
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept, ["PATH", "HOME", "PYENV_VERSION"]);
    }
}
