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
