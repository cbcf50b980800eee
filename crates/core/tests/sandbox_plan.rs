//! The sandbox planner without a kernel: its refusals, each naming the grant that allows what was refused, and
//! what a plan made only to decide leaves on disk (nothing).

// Why: a refusal carries its context (message, hint, details), as in the crate itself.
#![allow(clippy::result_large_err)]

use awt_core::discover::{Launch, ToolFile};
use awt_core::sandbox::{self, Needs};
use awt_core::tier::Tier;
use awt_core::{CallError, Detail, DirOptions, Dirs, ErrorCode};
use awt_protocol::Sandbox as Declared;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A data dir, an anima `alice` with `permissions.json` (`perms`) and `status.json` (`status`), a personal tool
/// `t`, a folder `outside` no grant names, and the runner's cache: all under one temp dir.
struct World {
    root: tempfile::TempDir,
    dirs: Dirs,
    file: ToolFile,
}

impl World {
    fn new(perms: Value, status: Value) -> World {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let anima = r.join("animas/alice");
        for d in [
            "data/shared",
            "data/tmp",
            "outside",
            "animas/alice/tools",
            "animas/alice/bin",
        ] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::fs::write(r.join("data/vault.key"), "k").unwrap();
        std::fs::write(anima.join("permissions.json"), perms.to_string()).unwrap();
        std::fs::write(anima.join("status.json"), status.to_string()).unwrap();
        let path = anima.join("tools/t");
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let dirs = Dirs::resolve(&DirOptions {
            core_dirs: vec![r.join("core")],
            data_dir: Some(r.join("data")),
            anima_dir: Some(anima),
            cache_dir: Some(r.join("cache")),
            python: None,
        });
        let file = ToolFile {
            name: "t".into(),
            tier: Tier::Personal,
            path,
            launch: Launch::Exec,
            mcp: None,
            stat: None,
        };
        World { root, dirs, file }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn perms_path(&self) -> PathBuf {
        self.path("animas/alice/permissions.json")
    }

    fn plan(&self, needs: Needs<'_>) -> Result<sandbox::Plan, CallError> {
        let perms = awt_core::policy::permissions::load(self.dirs.anima.as_deref().unwrap());
        sandbox::plan(&self.dirs, &self.file, &perms, needs)
    }

    /// The plan of one call of an action declaring `decl`.
    fn call(&self, decl: &Value) -> Result<sandbox::Plan, CallError> {
        let d: Declared = serde_json::from_value(decl.clone()).unwrap();
        self.plan(Needs::Call(Some(&d)))
    }
}

/// Every entry under `root`: its type, mode, owner, and its bytes (a file) or target (a link).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, (String, u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let (kind, bytes) = if m.is_dir() {
                todo.push(p.clone());
                ("dir", Vec::new())
            } else if m.file_type().is_symlink() {
                (
                    "link",
                    std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes(),
                )
            } else {
                ("file", std::fs::read(&p).unwrap())
            };
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            out.insert(rel, (format!("{kind} uid {}", m.uid()), m.mode(), bytes));
        }
    }
    out
}

/// A plan made only to decide (a pooled call's, a submit's, `check`'s) and a refused call's plan leave the data
/// dir, the anima dir and the cache byte for byte as they were: no tier folder, no `state/` files, no audit
/// log, no empty credentials file made for mounts that no process will have.
#[test]
fn a_plan_made_to_decide_or_refused_writes_nothing() {
    let w = World::new(json!({}), json!({}));
    let before = snapshot(w.root.path());
    for decl in [None, Some(json!({"read": ["$ANIMA_DIR"]}))] {
        let d: Option<Declared> = decl.map(|v| serde_json::from_value(v).unwrap());
        let p = w.plan(Needs::Decide(d.as_ref())).unwrap();
        assert!(p.is_confined(), "the personal tier is confined by default");
        assert!(
            p.mounts().is_empty(),
            "a deciding plan plans no mounts: {:?}",
            p.mounts()
        );
        let tmp = p.tmp().unwrap();
        assert!(!tmp.exists(), "a deciding plan made its temp dir {}", tmp.display());
        drop(p);
        assert_eq!(
            snapshot(w.root.path()),
            before,
            "a deciding plan wrote (declaration {d:?})"
        );
    }
    let outside = w.path("outside");
    let e = w.call(&json!({"read": [outside]})).unwrap_err();
    assert_eq!(e.detail(Detail::Reason), Some(&json!("sandbox_not_granted")), "{e:?}");
    assert_eq!(snapshot(w.root.path()), before, "a refused plan wrote");
}

/// One row: the anima's `permissions.json`, the action's declaration; the refusal's reason, `key` detail, and a
/// piece of its message and of its hint (the grant that allows it).
struct Row {
    name: &'static str,
    perms: Value,
    decl: Value,
    reason: &'static str,
    key: Option<String>,
    message: String,
    hint: String,
}

#[test]
fn the_planners_refusals_name_the_grant() {
    let rows = |w: &World| {
        let perms = w.perms_path().display().to_string();
        let o_here = w.path("outside").display().to_string();
        vec![
            Row {
                name: "a read beyond the grants",
                perms: json!({}),
                decl: json!({"read": [o_here]}),
                reason: "sandbox_not_granted",
                key: Some("sandbox.read".into()),
                message: format!("t declares sandbox.read {o_here:?}"),
                hint: format!("add {o_here:?} (or a folder above it) to \"sandbox\": {{\"read\": [...]}} in {perms}"),
            },
            Row {
                name: "a write beyond the grants",
                perms: json!({}),
                decl: json!({"write": [o_here]}),
                reason: "sandbox_not_granted",
                key: Some("sandbox.write".into()),
                message: format!("t declares sandbox.write {o_here:?}"),
                hint: format!("add {o_here:?} (or a folder above it) to \"sandbox\": {{\"write\": [...]}} in {perms}"),
            },
            Row {
                name: "an exec beyond the grants",
                perms: json!({}),
                decl: json!({"exec": [o_here]}),
                reason: "sandbox_not_granted",
                key: Some("sandbox.exec".into()),
                message: format!("t declares sandbox.exec {o_here:?}"),
                hint: format!("add {o_here:?} (or a folder above it) to \"sandbox\": {{\"exec\": [...]}} in {perms}"),
            },
            Row {
                name: "a writable place declared to run (write xor execute)",
                perms: json!({}),
                decl: json!({"exec": ["$ANIMA_DIR/bin"]}),
                reason: "sandbox_not_granted",
                key: Some("sandbox.exec".into()),
                message: "t declares sandbox.exec \"$ANIMA_DIR/bin\"".into(),
                hint: format!("add \"$ANIMA_DIR/bin\" to \"sandbox\": {{\"exec\": [...]}} in {perms}"),
            },
            Row {
                name: "the runner's own state, inside a granted folder",
                perms: json!({"sandbox": {"read": ["$DATA_DIR"]}}),
                decl: json!({"read": ["$DATA_DIR/vault.key"]}),
                reason: "sandbox_not_granted",
                key: Some("sandbox.read".into()),
                message: "t declares sandbox.read \"$DATA_DIR/vault.key\"".into(),
                hint: "is never granted".into(),
            },
            Row {
                name: "the network, not granted",
                perms: json!({"sandbox": {"net": false}}),
                decl: json!({"net": ["api.example.com:443"]}),
                reason: "sandbox_not_granted",
                key: Some("sandbox.net: [\"t\"]".into()),
                message: "t (personal) declares network access".into(),
                hint: format!("add \"sandbox\": {{\"net\": [\"t\"]}} (or true) to {perms}"),
            },
            Row {
                name: "the network, granted to other tools only",
                perms: json!({"sandbox": {"net": ["other"]}}),
                decl: json!({"net": ["api.example.com:443"]}),
                reason: "sandbox_not_granted",
                key: Some("sandbox.net: [\"t\"]".into()),
                message: "t (personal) declares network access".into(),
                hint: format!("add \"sandbox\": {{\"net\": [\"t\"]}} (or true) to {perms}"),
            },
            Row {
                name: "a relative path declared",
                perms: json!({}),
                decl: json!({"read": ["relative"]}),
                reason: "sandbox_invalid",
                key: None,
                message: "t: invalid sandbox declaration:".into(),
                hint: "fix the tool's profile".into(),
            },
            Row {
                name: "an unknown placeholder declared",
                perms: json!({}),
                decl: json!({"read": ["$NOPE/x"]}),
                reason: "sandbox_invalid",
                key: None,
                message: "$NOPE".into(),
                hint: "`animaworks-tool check` shows every problem".into(),
            },
            Row {
                name: "an unknown placeholder granted",
                perms: json!({"sandbox": {"read": ["$NOPE/x"]}}),
                decl: json!({}),
                reason: "sandbox_grants_invalid",
                key: Some("sandbox".into()),
                message: format!("the sandbox grants in {perms} are invalid"),
                hint: "fix \"sandbox\" in that file".into(),
            },
        ]
    };
    let count = rows(&World::new(json!({}), json!({}))).len();
    for i in 0..count {
        // Each row in a world of its own, with that row's permissions.
        let w = World::new(json!({}), json!({}));
        let row = rows(&w).remove(i);
        std::fs::write(w.perms_path(), row.perms.to_string()).unwrap();
        let name = row.name;
        let e = match w.call(&row.decl) {
            Ok(p) => panic!("{name}: planned, not refused: {:?}", p.summary()),
            Err(e) => e,
        };
        assert_eq!(e.code, ErrorCode::PermissionDenied, "{name}: {e:?}");
        assert_eq!(e.detail(Detail::Reason), Some(&json!(row.reason)), "{name}: {e:?}");
        assert_eq!(e.detail(Detail::Tool), Some(&json!("t")), "{name}: {e:?}");
        assert_eq!(
            e.detail(Detail::Key),
            row.key.clone().map(Value::from).as_ref(),
            "{name}: {e:?}"
        );
        assert!(
            e.message.contains(&row.message),
            "{name}: {:?} lacks {:?}",
            e.message,
            row.message
        );
        let hint = e.hint.clone().unwrap_or_default();
        assert!(hint.contains(&row.hint), "{name}: {hint:?} lacks {:?}", row.hint);
        if row.key.is_some() && row.reason != "sandbox_invalid" {
            let at = w.perms_path().display().to_string();
            assert_eq!(e.detail(Detail::PermissionsPath), Some(&json!(at)), "{name}: {e:?}");
        }
    }
}

/// The same declarations, granted, plan (the table's refusals come from the grants, not the declarations).
#[test]
fn what_the_grants_cover_is_planned() {
    let w = World::new(json!({}), json!({}));
    let o = w.path("outside").display().to_string();
    let perms = json!({"sandbox": {"read": [o], "write": [o], "exec": [o, "$ANIMA_DIR/bin"], "net": ["t"]}});
    std::fs::write(w.perms_path(), perms.to_string()).unwrap();
    for decl in [
        json!({"read": [o]}),
        json!({"write": [o]}),
        json!({"exec": [o]}),
        json!({"exec": ["$ANIMA_DIR/bin"]}),
        json!({"net": ["api.example.com:443"]}),
        json!({"write": ["$TMP"]}),
    ] {
        let d: Declared = serde_json::from_value(decl.clone()).unwrap();
        match w.plan(Needs::Decide(Some(&d))) {
            Ok(p) => assert!(p.warnings.is_empty(), "{decl}: {:?}", p.warnings),
            Err(e) => panic!("{decl}: refused: {e:?}"),
        }
    }
}

fn with_companies(n: usize) -> World {
    let w = World::new(json!({}), json!({"company": "acme"}));
    std::fs::create_dir_all(w.path("data/companies/acme")).unwrap();
    for i in 0..n {
        std::fs::create_dir(w.path(&format!("data/companies/c{i}"))).unwrap();
    }
    w
}

/// Every other company is hidden from an anima of a company, one by one: past the cap, the plan is refused
/// (never some hidden and the rest readable), and the message names the folder.
#[test]
fn too_many_other_companies_refuse_the_plan_rather_than_leave_one_visible() {
    let cap = sandbox::MAX_COMPANIES;
    let at_cap = with_companies(cap);
    if let Err(e) = at_cap.plan(Needs::Decide(None)) {
        panic!("{cap} other companies are hidden, not refused: {e:?}");
    }
    let past = with_companies(cap + 1);
    let Err(e) = past.plan(Needs::Decide(None)) else {
        panic!("{} other companies were planned, not refused", cap + 1)
    };
    assert_eq!(e.detail(Detail::Reason), Some(&json!("sandbox_unsupported")), "{e:?}");
    let folder = past.path("data/companies").display().to_string();
    assert!(e.message.contains(&folder), "{e:?}");
    assert!(e.message.contains(&cap.to_string()), "{e:?}");
    // An anima of no company is denied none, whatever the folder holds.
    std::fs::write(past.path("animas/alice/status.json"), "{}").unwrap();
    if let Err(e) = past.plan(Needs::Decide(None)) {
        panic!("an anima of no company: {e:?}");
    }
}

/// What the planner says without refusing: a grant of a place that does not exist names the grant and the file
/// it is in, and a process that serves several actions leaves out those the grants do not cover (each is refused
/// when called) rather than refuse them all.
#[test]
fn a_missing_grant_is_said_and_a_server_leaves_out_what_is_not_granted() {
    let w = World::new(json!({}), json!({}));
    let gone = w.path("gone");
    std::fs::write(w.perms_path(), json!({"sandbox": {"write": [gone]}}).to_string()).unwrap();
    let p = w.plan(Needs::Decide(None)).unwrap();
    let perms = w.perms_path().display().to_string();
    let said = format!(
        "\"sandbox\": {{\"write\": [{:?}]}} in {perms}",
        gone.display().to_string()
    );
    assert!(
        p.warnings
            .iter()
            .any(|x| x.contains(&said) && x.contains("does not exist")),
        "{:?} lacks {said}",
        p.warnings
    );

    std::fs::write(w.perms_path(), "{}").unwrap();
    let outside = w.path("outside");
    let granted: Declared = serde_json::from_value(json!({"write": ["$ANIMA_DIR"]})).unwrap();
    let beyond: Declared = serde_json::from_value(json!({"write": [outside]})).unwrap();
    let p = match w.plan(Needs::Serve(vec![Some(&granted), Some(&beyond)])) {
        Ok(p) => p,
        Err(e) => panic!("a server of one action beyond the grants: {e:?}"),
    };
    let outside = std::fs::canonicalize(&outside).unwrap();
    assert!(!p.writable().contains(&outside), "{:?}", p.writable());
    let anima = std::fs::canonicalize(w.path("animas/alice")).unwrap();
    assert!(p.writable().contains(&anima), "{:?}", p.writable());
}
