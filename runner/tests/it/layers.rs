//! The workspace's layers (README "Layout"): each crate depends only on the crates below it, and only
//! `awt_sys` may hold unsafe code. Cargo refuses a cycle by itself; these tests refuse an arrow back up that
//! would not be a cycle yet (core depending on tasks) and a crate that drops its `forbid(unsafe_code)`.

use std::path::{Path, PathBuf};

/// Bottom to top.
const LAYERS: &[(&str, &str)] = &[
    ("animaworks-tool-protocol", "crates/protocol"),
    ("animaworks-tool-sys", "crates/sys"),
    ("animaworks-tool-core", "crates/core"),
    ("animaworks-tool-tasks", "crates/tasks"),
    ("animaworks-tool-llm", "crates/llm"),
    ("animaworks-tool", "runner"),
];

/// Crates beside the layers (for tool authors): unsafe code denied, allowed item by item where it cannot be avoided.
const BESIDE: &[&str] = &["tool-sdk-rs"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The workspace packages `[dependencies]` of `manifest` names (by package name).
fn workspace_deps(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_deps = l == "[dependencies]";
            continue;
        }
        if !in_deps || !l.contains("path =") {
            continue;
        }
        let package = l
            .split("package = \"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .map(str::to_owned)
            .unwrap_or_else(|| l.split([' ', '=']).next().unwrap().to_owned());
        out.push(package);
    }
    out
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    for (i, (name, dir)) in LAYERS.iter().enumerate() {
        let manifest = std::fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "{dir}/Cargo.toml is not {name}"
        );
        let deps = workspace_deps(&manifest);
        for d in &deps {
            let at = LAYERS.iter().position(|(n, _)| n == d);
            assert!(
                at.is_some_and(|at| at < i),
                "{name} depends on {d}, which is not a layer below it (README \"Layout\")"
            );
        }
    }
    // The parser above must see the real dependencies, or the test would pass on nothing.
    let core = std::fs::read_to_string(root().join("crates/core/Cargo.toml")).unwrap();
    assert_eq!(
        workspace_deps(&core),
        ["animaworks-tool-protocol", "animaworks-tool-sys"]
    );
}

#[test]
fn only_the_sys_crate_may_hold_unsafe_code() {
    for (name, dir) in LAYERS {
        let lib = std::fs::read_to_string(root().join(dir).join("src/lib.rs")).unwrap();
        let forbids = lib.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]");
        if *name == "animaworks-tool-sys" {
            assert!(!forbids, "awt_sys is where the unsafe code lives");
        } else {
            assert!(forbids, "{dir}/src/lib.rs must say #![forbid(unsafe_code)]");
        }
    }
    for dir in BESIDE {
        let lib = std::fs::read_to_string(root().join(dir).join("src/lib.rs")).unwrap();
        assert!(
            lib.lines().any(|l| l.trim() == "#![deny(unsafe_code)]"),
            "{dir}/src/lib.rs must say #![deny(unsafe_code)]"
        );
    }
}

/// The kernel-call layer knows nothing of AnimaWorks (its animas, their folders, its modules): the callers above
/// give it plain paths and names. Only the package's own name, which the layer list above needs, says it.
#[test]
fn the_sys_crate_names_nothing_of_animaworks() {
    let sys = root().join("crates/sys");
    let mut stack = vec![sys.clone()];
    let (mut files, mut found) = (0, Vec::new());
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            files += 1;
            for (n, line) in text.lines().enumerate() {
                let own_name = p.ends_with("Cargo.toml") && line.trim() == "name = \"animaworks-tool-sys\"";
                if line.to_lowercase().contains("anima") && !own_name {
                    found.push(format!(
                        "{}:{}: {}",
                        p.strip_prefix(&sys).unwrap().display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    // The walk must see the crate's sources, or the test would pass on nothing.
    assert!(files > 10, "only {files} files read under {}", sys.display());
    assert!(
        found.is_empty(),
        "crates/sys names AnimaWorks; give the meaning to the caller in crates/core:\n{}",
        found.join("\n")
    );
}
