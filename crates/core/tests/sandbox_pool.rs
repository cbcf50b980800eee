//! The sandbox of a pooled call, through the library: what a caller that gives up mid-call leaves in the audit.

use awt_core::{CallOptions, DirOptions, Dirs, Runner};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;

/// Landlock is there (the kernel this project's CI runs on has it); where it is not, say so and skip.
fn landlock() -> bool {
    let k = awt_core::sandbox::kernel::support();
    if k.landlock_abi < 6 || !k.seccomp {
        awt_sys::skipped!(
            "this kernel has Landlock ABI {} and seccomp {}: the sandbox cannot be tested here",
            k.landlock_abi,
            k.seccomp
        );
        return false;
    }
    true
}

/// A pooled call whose future is dropped while its worker has it (a library caller giving up) is audited as
/// cancelled, with the sandbox of that worker (which serves `online` too: the network is open), as a call that
/// ends is.
#[test]
fn a_pooled_call_dropped_mid_call_audits_its_workers_sandbox() {
    if !landlock() {
        return;
    }
    // A world whose tools run in the sandbox (no settings file: the defaults).
    let tmp = tempfile::tempdir().unwrap();
    let (core, data, anima) = (
        tmp.path().join("core"),
        tmp.path().join("data"),
        tmp.path().join("animas/alice"),
    );
    for d in [&core, &data.join("common_tools"), &anima.join("tools")] {
        std::fs::create_dir_all(d).unwrap();
    }
    let source = r#"
import os, time
from animaworks_tool_sdk import Context, action, run

@action(sandbox={"net": True})
def online() -> str:
    """Needs the network."""
    return "online"

@action(sandbox={"net": False})
def slow(ctx: Context) -> str:
    """Takes its time."""
    ctx.progress(0, 1, "started")
    time.sleep(60)
    return "late"

if __name__ == "__main__":
    run()
"#;
    let tool = anima.join("tools/slowpoke.py");
    std::fs::write(&tool, source).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(anima.join("permissions.json"), r#"{"sandbox": {"net": ["slowpoke"]}}"#).unwrap();
    /// Says when the tool has reported that it started.
    struct Started(tokio::sync::watch::Sender<bool>);
    impl awt_core::stream::Observer for Started {
        fn event(&mut self, _: &awt_protocol::Event, _: &[u8]) {
            let _ = self.0.send(true);
        }
    }
    let (tx, mut rx) = tokio::sync::watch::channel(false);
    let mut r = Runner::new(Dirs::resolve(&DirOptions {
        core_dirs: vec![core],
        data_dir: Some(data),
        anima_dir: Some(anima.clone()),
        cache_dir: None,
        python: None,
    }));
    r.pool = Some(std::sync::Arc::new(awt_core::pool::WorkerPool::new(Default::default())));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let opts = CallOptions::default();
    let mut obs = Started(tx);
    rt.block_on(async {
        let call = r.call(
            "slowpoke",
            "slow",
            Default::default(),
            &opts,
            &mut obs,
            awt_core::stream::Cancel::never(),
        );
        tokio::select! {
            out = call => panic!("the call ended: {out:?}"),
            _ = rx.wait_for(|started| *started) => {}
        }
    });
    let audit = std::fs::read_to_string(anima.join("state/tool_audit.jsonl")).unwrap();
    let line: Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(line["action"], "slow", "{line}");
    assert_eq!(line["outcome"], "cancelled", "{line}");
    assert_eq!(line["sandbox"]["tcp"], "open", "{line}");
}

/// A world with one persistent tool, `reader`, in the anima's tier, and a runner with a pool over it.
struct Pooled {
    _tmp: tempfile::TempDir,
    data: std::path::PathBuf,
    anima: std::path::PathBuf,
    runner: Runner,
    rt: tokio::runtime::Runtime,
}

impl Pooled {
    fn new() -> Pooled {
        let tmp = tempfile::tempdir().unwrap();
        let (core, data, anima) = (
            tmp.path().join("core"),
            tmp.path().join("data"),
            tmp.path().join("animas/alice"),
        );
        for d in [
            &core,
            &data.join("common_tools"),
            &data.join("shared/notes"),
            &data.join("outputs"),
            &data.join("companies/acme"),
            &data.join("companies/beta"),
            &anima.join("tools"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let source = r#"
from animaworks_tool_sdk import action, run

@action(sandbox={"net": True})
def online() -> str:
    """Needs the network."""
    return "online"

@action(sandbox={"read": ["$DATA_DIR/shared/notes"]})
def notes() -> str:
    """Reads the shared notes."""
    return "notes"

@action(sandbox={"read": ["$DATA_DIR/companies/beta"]})
def beta() -> str:
    """Reads a company's folder."""
    return "beta"

if __name__ == "__main__":
    run()
"#;
        let tool = anima.join("tools/reader.py");
        std::fs::write(&tool, source).unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(anima.join("status.json"), "{}").unwrap();
        let grants = r#"{"sandbox": {"net": ["reader"], "read": ["$DATA_DIR/companies"]}}"#;
        std::fs::write(anima.join("permissions.json"), grants).unwrap();
        let mut runner = Runner::new(Dirs::resolve(&DirOptions {
            core_dirs: vec![core],
            data_dir: Some(data.clone()),
            anima_dir: Some(anima.clone()),
            cache_dir: None,
            python: None,
        }));
        runner.pool = Some(std::sync::Arc::new(awt_core::pool::WorkerPool::new(Default::default())));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // Folders changed just now are not trusted to show a later change (their timestamps' tick): let them settle,
        // as a runner's folders are between warm calls.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Pooled {
            _tmp: tmp,
            data,
            anima,
            runner,
            rt,
        }
    }

    fn call(&self, action: &str) -> Result<Value, awt_core::CallError> {
        struct Quiet;
        impl awt_core::stream::Observer for Quiet {
            fn event(&mut self, _: &awt_protocol::Event, _: &[u8]) {}
        }
        self.rt.block_on(self.runner.call(
            "reader",
            action,
            Default::default(),
            &CallOptions::default(),
            &mut Quiet,
            awt_core::stream::Cancel::never(),
        ))
    }

    fn remembered(&self) -> usize {
        self.runner.pool.as_ref().unwrap().decisions_remembered()
    }
}

/// A grant revoked between two warm calls of a pooled worker refuses the next call, and given back it is allowed
/// again: the plan each call makes to decide is never an older grant's.
#[test]
fn a_grant_changed_between_warm_calls_takes_effect_on_the_next_call() {
    if !landlock() {
        return;
    }
    let w = Pooled::new();
    assert_eq!(w.call("online").unwrap(), "online");
    assert_eq!(w.call("online").unwrap(), "online");
    std::fs::write(w.anima.join("permissions.json"), r#"{"sandbox": {"net": false}}"#).unwrap();
    let e = w.call("online").unwrap_err();
    assert_eq!(e.code, awt_core::error::ErrorCode::PermissionDenied, "{e}");
    assert!(e.to_string().contains("network"), "{e}");
    std::fs::write(w.anima.join("permissions.json"), r#"{"sandbox": {"net": ["reader"]}}"#).unwrap();
    assert_eq!(w.call("online").unwrap(), "online");
}

/// A declared place swapped for a link into the runner's own state between two warm calls: the next call is
/// refused, as a call planned afresh is.
#[test]
fn a_declared_place_linked_into_the_runners_state_between_warm_calls_is_refused() {
    if !landlock() {
        return;
    }
    let w = Pooled::new();
    assert_eq!(w.call("notes").unwrap(), "notes");
    assert_eq!(w.call("notes").unwrap(), "notes");
    let notes = w.data.join("shared/notes");
    std::fs::remove_dir(&notes).unwrap();
    std::os::unix::fs::symlink(w.data.join("outputs"), &notes).unwrap();
    let e = w.call("notes").unwrap_err();
    assert_eq!(e.code, awt_core::error::ErrorCode::PermissionDenied, "{e}");
    assert!(e.to_string().contains("sandbox.read"), "{e}");
}

/// An anima assigned to a company between two warm calls (its `status.json` rewritten in place, its folder
/// unchanged): the next call that declares another company's folder is refused, as a call planned afresh is.
#[test]
fn an_anima_assigned_to_a_company_between_warm_calls_is_refused_another_companys_folder() {
    if !landlock() {
        return;
    }
    let w = Pooled::new();
    assert_eq!(w.call("beta").unwrap(), "beta");
    assert_eq!(w.call("beta").unwrap(), "beta");
    std::fs::write(w.anima.join("status.json"), r#"{"company": "acme"}"#).unwrap();
    let e = w.call("beta").unwrap_err();
    assert_eq!(e.code, awt_core::error::ErrorCode::PermissionDenied, "{e}");
    assert!(e.to_string().contains("sandbox.read"), "{e}");
}

/// Warm calls of a pooled worker take the decision of the first one rather than planning their sandbox again,
/// while nothing it depends on changed.
#[test]
fn warm_pooled_calls_take_the_remembered_decision() {
    if !landlock() {
        return;
    }
    let w = Pooled::new();
    assert_eq!(w.call("online").unwrap(), "online");
    let before = w.remembered();
    for _ in 0..3 {
        assert_eq!(w.call("online").unwrap(), "online");
    }
    assert_eq!(w.remembered(), before + 3, "warm calls planned their sandbox again");
}
