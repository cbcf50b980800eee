//! A temporary AnimaWorks world per test: data dir (common tier), anima dir (personal tier), core dir, and the
//! library `Runner` for it. runner/tests/it/support.rs adds the binary's side (`cmd`, `run`, …) to the same `World`.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub struct World {
    pub tmp: tempfile::TempDir,
    pub core: PathBuf,
    pub data: PathBuf,
    pub anima: PathBuf,
}

impl World {
    pub fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let core = tmp.path().join("core");
        let data = tmp.path().join("data");
        let anima = tmp.path().join("animas").join("alice");
        for d in [&core, &data.join("common_tools"), &anima.join("tools")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let w = World { tmp, core, data, anima };
        w.settings("{}");
        w
    }

    /// A world whose tools run in the sandbox (the default settings). Every other world turns it off: those
    /// tests are about the runner, and their tools leave markers in places a sandbox refuses.
    pub fn sandboxed() -> World {
        let w = World::new();
        std::fs::remove_file(w.data.join("animaworks-tool.json")).unwrap();
        w
    }

    /// Write `<data dir>/animaworks-tool.json` (a JSON object), with the sandbox off unless it says otherwise.
    pub fn settings(&self, json: &str) {
        let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
        if v.get("sandbox").is_none() {
            v["sandbox"] = serde_json::json!({"common": "off", "personal": "off"});
        }
        std::fs::write(self.data.join("animaworks-tool.json"), v.to_string()).unwrap();
    }

    pub fn common(&self) -> PathBuf {
        self.data.join("common_tools")
    }

    pub fn personal(&self) -> PathBuf {
        self.anima.join("tools")
    }

    /// Write an executable file.
    pub fn tool(&self, dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// Merge `"credentials": {tool: names}` into the anima's permissions.json (docs/credentials.md): common and
    /// personal tools get only the credentials granted there.
    pub fn grant_credentials(&self, tool: &str, names: &[&str]) {
        let p = self.anima.join("permissions.json");
        let mut v: serde_json::Value = std::fs::read_to_string(&p)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| serde_json::json!({}));
        v["credentials"][tool] = serde_json::json!(names);
        std::fs::write(p, v.to_string()).unwrap();
    }

    /// A library `Runner` for this world.
    pub fn runner(&self) -> awt_core::Runner {
        awt_core::Runner::new(awt_core::Dirs::resolve(&awt_core::DirOptions {
            core_dirs: vec![self.core.clone()],
            data_dir: Some(self.data.clone()),
            anima_dir: Some(self.anima.clone()),
            cache_dir: None,
            python: None,
        }))
    }
}

/// A bash tool with the short-form schemas and a body that handles the request in `$req`.
pub fn bash_tool(schemas: &str, body: &str) -> String {
    format!("#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then cat <<'JSON'\n{schemas}\nJSON\nexit 0; fi\nreq=$(cat)\n{body}\n")
}

/// Poll `cond` until it holds or `secs` pass; never a fixed sleep then assert.
pub fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() > end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `(state, ppid, pgid)` of a process, from /proc/<pid>/stat.
pub fn proc_stat(pid: i32) -> Option<(String, i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')').map(|i| i + 2).unwrap_or(0)..];
    let f: Vec<&str> = after.split_whitespace().collect();
    Some((f.first()?.to_string(), f.get(1)?.parse().ok()?, f.get(2)?.parse().ok()?))
}

fn all_pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
}

/// Processes whose process group is `pgid` (zombies included), from /proc.
pub fn group_members(pgid: i32) -> Vec<i32> {
    all_pids()
        .filter(|p| proc_stat(*p).is_some_and(|(_, _, g)| g == pgid))
        .collect()
}

/// Children of `parent` that are zombies, from /proc.
pub fn zombie_children_of(parent: u32) -> Vec<i32> {
    all_pids()
        .filter(|p| proc_stat(*p).is_some_and(|(st, pp, _)| st == "Z" && pp == parent as i32))
        .collect()
}

/// Processes whose command line contains `needle`.
pub fn pids_with_cmdline(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            out.push(pid);
        }
    }
    out
}
