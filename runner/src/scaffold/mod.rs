//! `animaworks-tool new`: the files of a new, working tool in one of four languages. The templates are files
//! under `templates/`, compiled in; `{{name}}` and friends are filled in here.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The language of a new tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// One `<name>.py` on tool-sdk-py (the runner's shim provides the SDK).
    Python,
    /// A cargo project on the Rust SDK; build it and link the binary into a tier.
    Rust,
    /// One `<name>.sh`, plain bash, no SDK.
    Bash,
    /// One `<name>.js`, plain Node.js, no SDK.
    Node,
}

const PYTHON: &str = include_str!("templates/python.py");
const BASH: &str = include_str!("templates/bash.sh");
const NODE: &str = include_str!("templates/node.js");
const RUST_CARGO: &str = include_str!("templates/rust_Cargo.toml");
const RUST_MAIN: &str = include_str!("templates/rust_main.rs");
const RUST_README: &str = include_str!("templates/rust_README.md");

/// What `write` made.
#[derive(Debug, Clone)]
pub struct Written {
    /// The tool file, or for Rust the project folder.
    pub path: PathBuf,
    pub files: Vec<PathBuf>,
    /// What to do next, one command a line.
    pub next: Vec<String>,
}

/// Where the tool (or, for Rust, its project) goes in `dir`. In a tier folder a Rust project is `<name>-rs/`,
/// so that the binary can be linked as `<name>` next to it.
pub fn target(name: &str, lang: Lang, dir: &Path, in_tier: bool) -> PathBuf {
    match lang {
        Lang::Python => dir.join(format!("{name}.py")),
        Lang::Bash => dir.join(format!("{name}.sh")),
        Lang::Node => dir.join(format!("{name}.js")),
        Lang::Rust if in_tier => dir.join(format!("{name}-rs")),
        Lang::Rust => dir.join(name),
    }
}

/// The SDK dependency line of a generated Cargo.toml: this repo's `tool-sdk-rs` by path when it is there (a
/// runner built from a checkout), else the published version.
pub fn sdk_dependency() -> String {
    let repo_sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("tool-sdk-rs");
    match repo_sdk
        .join("Cargo.toml")
        .is_file()
        .then(|| std::fs::canonicalize(&repo_sdk).ok())
        .flatten()
    {
        Some(p) => format!("{{ path = {:?} }}", p.to_string_lossy()),
        None => format!("{:?}", env!("CARGO_PKG_VERSION")),
    }
}

fn fill(template: &str, name: &str, tier_dir: &Path) -> String {
    template
        .replace("{{name}}", name)
        .replace("{{sdk_dep}}", &sdk_dependency())
        .replace("{{tier_dir}}", &tier_dir.to_string_lossy())
}

/// Another file in `dir` that already is (or would shadow) tool `name`: same stem, any extension.
fn existing_with_stem(dir: &Path, name: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    entries.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
        let file_name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        !p.is_dir() && (file_name == name || file_name.rsplit_once('.').is_some_and(|(stem, _)| stem == name))
    })
}

/// Why `new` wrote nothing, or stopped part-way.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name is not a tool name, or is reserved (the reason says which).
    #[error("{0}")]
    BadName(String),
    /// The tool's file or folder exists already.
    #[error("{} already exists; pick another name or remove it", .0.display())]
    Exists(PathBuf),
    /// Another file in the folder already is tool `name` (same stem, another extension).
    #[error("{} is already tool {name:?} in that folder; pick another name or remove it", other.display())]
    SameStem { other: PathBuf, name: String },
    /// A folder could not be created.
    #[error("cannot create {}: {source}", path.display())]
    CreateDir { path: PathBuf, source: std::io::Error },
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    /// A written file's mode could not be set.
    #[error("cannot chmod {}: {source}", path.display())]
    Chmod { path: PathBuf, source: std::io::Error },
}

/// Write a new tool `name` in `lang` into `dir`. `in_tier`: `dir` is a tier folder (the binary of a Rust
/// tool is linked there). Refuses an invalid or reserved name and anything already in the way.
pub fn write(name: &str, lang: Lang, dir: &Path, in_tier: bool) -> Result<Written, ScaffoldError> {
    if let Some(p) = awt_core::names::tool_name_problem(name) {
        return Err(ScaffoldError::BadName(p));
    }
    let path = target(name, lang, dir, in_tier);
    if path.symlink_metadata().is_ok() {
        return Err(ScaffoldError::Exists(path));
    }
    if lang != Lang::Rust || in_tier {
        if let Some(other) = existing_with_stem(dir, name) {
            return Err(ScaffoldError::SameStem {
                other,
                name: name.to_owned(),
            });
        }
    }
    let create_dir = |p: &Path| {
        std::fs::create_dir_all(p).map_err(|source| ScaffoldError::CreateDir {
            path: p.to_owned(),
            source,
        })
    };
    create_dir(dir)?;
    let write = |p: &Path, text: &str, mode: u32| -> Result<(), ScaffoldError> {
        let failed = |source| ScaffoldError::Write {
            path: p.to_owned(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
            .map_err(failed)?;
        std::io::Write::write_all(&mut f, text.as_bytes()).map_err(failed)?;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(|source| ScaffoldError::Chmod {
            path: p.to_owned(),
            source,
        })
    };
    let shown = path.display().to_string();
    match lang {
        Lang::Python | Lang::Bash | Lang::Node => {
            let (template, mode) = match lang {
                // Executable with a shebang, so `./<name>.py --schemas` works as the SDK's help says.
                Lang::Python => (PYTHON, 0o755),
                Lang::Bash => (BASH, 0o755),
                _ => (NODE, 0o755),
            };
            write(&path, &fill(template, name, dir), mode)?;
            let mut next = vec![format!("animaworks-tool check {shown}")];
            if in_tier {
                next.push(format!("animaworks-tool {name} echo --text hello"));
            } else {
                next.push(format!(
                    "put it in a tier folder (e.g. <anima dir>/tools/), then: animaworks-tool {name} echo --text hello"
                ));
            }
            Ok(Written {
                path: path.clone(),
                files: vec![path],
                next,
            })
        }
        Lang::Rust => {
            let src = path.join("src");
            create_dir(&src)?;
            let files = vec![path.join("Cargo.toml"), src.join("main.rs"), path.join("README.md")];
            let tier_dir = if in_tier {
                dir.to_path_buf()
            } else {
                PathBuf::from("<anima dir>/tools")
            };
            for (file, template) in files.iter().zip([RUST_CARGO, RUST_MAIN, RUST_README]) {
                write(file, &fill(template, name, &tier_dir), 0o644)?;
            }
            let binary = path.join("target").join("release").join(name);
            Ok(Written {
                path: path.clone(),
                files,
                next: vec![
                    format!("cd {shown} && cargo build --release"),
                    format!("ln -s {} {}", binary.display(), tier_dir.join(name).display()),
                    format!("animaworks-tool check {}", binary.display()),
                ],
            })
        }
    }
}
