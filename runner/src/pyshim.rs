//! The Python shim that runs `.py` tools (AnimaWorks modules and tool-sdk-py tools) ships inside the binary:
//! the files of tool-sdk-py's package are embedded and written once per content hash into the cache dir, so
//! there is no install step.

use std::io;
use std::path::{Path, PathBuf};

/// The embedded package: (path relative to the package folder, contents).
const FILES: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/__init__.py"),
    ),
    (
        "_action.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_action.py"),
    ),
    (
        "_context.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_context.py"),
    ),
    (
        "_credentials.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_credentials.py"),
    ),
    (
        "_errors.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_errors.py"),
    ),
    (
        "_runtime.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_runtime.py"),
    ),
    (
        "_shim.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_shim.py"),
    ),
    (
        "_start.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_start.py"),
    ),
    (
        "_use_tool.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_use_tool.py"),
    ),
    (
        "_vault.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_vault.py"),
    ),
    (
        "_wire.py",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/_wire.py"),
    ),
    (
        "py.typed",
        include_str!("../../tool-sdk-py/src/animaworks_tool_sdk/py.typed"),
    ),
];

/// Identifies this build's shim: schemas cached by another shim are probed again.
pub fn content_hash() -> u64 {
    static HASH: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HASH.get_or_init(|| {
        let mut h: u64 = 0xcbf29ce484222325;
        for (name, text) in FILES {
            for b in name.bytes().chain(text.bytes()) {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        }
        h
    })
}

/// The path of the script Python starts (`_start.py`, which imports the shim so that its byte code is cached),
/// writing the package on first use (atomically: a temp dir renamed into place).
pub fn shim_path(cache: &Path) -> io::Result<PathBuf> {
    let root = cache.join(format!("pysdk-{:016x}", content_hash()));
    let shim = root.join("animaworks_tool_sdk").join("_start.py");
    if shim.is_file() {
        return Ok(shim);
    }
    std::fs::create_dir_all(cache)?;
    let tmp = tempfile::Builder::new().prefix(".pysdk-").tempdir_in(cache)?;
    for (name, text) in FILES {
        let p = tmp.path().join("animaworks_tool_sdk").join(name);
        std::fs::create_dir_all(p.parent().expect("has parent"))?;
        std::fs::write(p, text)?;
    }
    let tmp = tmp.keep();
    if std::fs::rename(&tmp, &root).is_err() {
        // Another runner won the race; its copy is identical.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    if shim.is_file() {
        Ok(shim)
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("could not write the Python shim under {}", root.display()),
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_package_file_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tool-sdk-py/src/animaworks_tool_sdk");
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
}
