//! The task store and the approvals folder against a forged or changing anima dir and data dir: no link is
//! followed (planted before the look, or swapped in after its check), no listing or read is without bound, no
//! special file is opened as a record.

use awt_tasks::approvals::{Approvals, DIR as APPROVALS_DIR, MAX_ENTRIES};
use awt_tasks::files::FileStore;
use awt_tasks::{Status, Task, TaskStore};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn task(id: &str, status: &str) -> Task {
    serde_json::from_value(
        serde_json::json!({"task_id": id, "anima_name": "alice", "tool_name": "echo:say",
        "tool_args": {}, "status": status, "created_at": 1.0, "completed_at": null, "result": null,
        "error": null, "tool": "echo", "action": "say", "kind": "action", "updated_at": 1.0}),
    )
    .unwrap()
}

/// Every file below `dir` (links not followed), by path.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(files_below(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Two animas side by side; `alice`'s store, with `outside` a folder that must stay empty.
struct Animas {
    _t: tempfile::TempDir,
    alice: PathBuf,
    outside: PathBuf,
}

fn animas() -> Animas {
    let t = tempfile::tempdir().unwrap();
    let alice = t.path().join("alice");
    let outside = t.path().join("outside");
    fs::create_dir_all(alice.join("state/background_tasks")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    Animas { alice, outside, _t: t }
}

/// A link planted for one of the store's own files or folders: the store refuses it or goes around it, and
/// nothing is written where it points.
#[test]
fn a_link_planted_in_the_task_folder_is_never_followed() {
    for planted in [".lock", ".index", ".private"] {
        let a = animas();
        let tasks = a.alice.join("state/background_tasks");
        let target = if planted == ".lock" {
            a.outside.join("lock")
        } else {
            a.outside.clone()
        };
        std::os::unix::fs::symlink(&target, tasks.join(planted)).unwrap();
        let store = FileStore::for_anima(&a.alice);
        let _ = store.create(
            &task("00000000000a", "pending"),
            Some(&serde_json::json!({"secret": "s3cret"})),
        );
        let _ = store.update("00000000000a", &mut |t| {
            t.finish(Status::Completed);
            true
        });
        assert_eq!(
            files_below(&a.outside),
            Vec::<PathBuf>::new(),
            "a link at {planted} was followed"
        );
    }
}

/// The folder checked, then `state/` swapped for a link to another folder while the store works: what it writes
/// lands in the folder it checked, or nowhere; never where the link points.
#[test]
fn a_link_swapped_in_after_the_check_is_never_followed() {
    let a = animas();
    let state = a.alice.join("state");
    let real = a.alice.join("state.real");
    fs::create_dir_all(a.outside.join("background_tasks")).unwrap();
    fs::create_dir_all(a.outside.join("background_notifications")).unwrap();
    let store = FileStore::for_anima(&a.alice);
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, state, real, outside) = (stop.clone(), state.clone(), real.clone(), a.outside.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if fs::rename(&state, &real).is_ok() {
                    let _ = std::os::unix::fs::symlink(&outside, &state);
                    std::thread::yield_now();
                    let _ = fs::remove_file(&state);
                    let _ = fs::rename(&real, &state);
                }
                std::thread::yield_now();
            }
        })
    };
    for i in 0..1500u32 {
        let id = format!("{i:012x}");
        let _ = store.create(&task(&id, "pending"), None);
        let _ = store.notify(&task(&id, "completed"));
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let landed: Vec<PathBuf> = files_below(&a.outside);
    assert!(landed.is_empty(), "written through the swapped link: {landed:?}");
    // And the store did work (some looks fell between swaps).
    assert!(!files_below(&state.join("background_tasks")).is_empty());
}

fn approvals() -> (tempfile::TempDir, Approvals, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let a = Approvals::open(t.path()).unwrap();
    let dir = t.path().join(APPROVALS_DIR);
    (t, a, dir)
}

#[test]
fn a_forged_approvals_folder_of_too_many_files_is_refused_not_listed_short() {
    let (_t, a, dir) = approvals();
    for i in 0..10_000u32 {
        fs::write(dir.join(format!("{i:012x}.json")), "{}").unwrap();
    }
    let e = a.list().unwrap_err();
    assert!(
        e.message.contains(&format!("more than {MAX_ENTRIES} entries")),
        "{}",
        e.message
    );
    assert!(
        e.hint.as_deref().unwrap_or("").contains("approvals list --all"),
        "{:?}",
        e.hint
    );
}

#[test]
fn an_approval_record_that_is_a_link_a_fifo_or_huge_is_refused() {
    let (t, a, dir) = approvals();
    // A link to a file elsewhere (a tool's, or another data dir's request): never followed.
    let elsewhere = t.path().join("elsewhere.json");
    fs::write(&elsewhere, "{}").unwrap();
    std::os::unix::fs::symlink(&elsewhere, dir.join("00000000000a.json")).unwrap();
    let e = a.get("00000000000a").unwrap_err();
    assert!(e.message.contains("symbolic link"), "{}", e.message);
    // A FIFO: refused at once (the look does not block on it).
    let fifo = dir.join("00000000000b.json");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let e = a.get("00000000000b").unwrap_err();
    assert!(e.message.contains("FIFO"), "{}", e.message);
    // A file larger than a request can be.
    fs::write(dir.join("00000000000c.json"), vec![b' '; 2 * 1024 * 1024]).unwrap();
    let e = a.get("00000000000c").unwrap_err();
    assert!(e.message.contains("larger than"), "{}", e.message);
    // The listing skips all three, and does not block.
    assert!(a.list().unwrap().is_empty());
}

/// AnimaWorks' `pending/invalid/` swapped for a link to another folder while `run-pending` sets bad descriptors
/// aside: the descriptors and their reasons land in the folder that was checked, or nowhere; never where the link
/// points. (Failed while the folder was checked by path and then written and renamed into by path again.)
#[test]
fn a_pending_folder_swapped_for_a_link_after_its_check_is_never_followed() {
    let a = animas();
    let pending = a.alice.join("state/background_tasks/pending");
    let invalid = pending.join("invalid");
    let real = pending.join("invalid.real");
    fs::create_dir_all(&invalid).unwrap();
    let runner = awt_core::call::Runner::new(awt_core::dirs::Dirs {
        core: Vec::new(),
        data: a._t.path().join("data"),
        anima: Some(a.alice.clone()),
        cache: a._t.path().join("cache"),
        python: "python3".into(),
    });
    let store = FileStore::for_anima(&a.alice);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, invalid, real, outside) = (stop.clone(), invalid.clone(), real.clone(), a.outside.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if fs::rename(&invalid, &real).is_ok() {
                    let _ = std::os::unix::fs::symlink(&outside, &invalid);
                    std::thread::yield_now();
                    let _ = fs::remove_file(&invalid);
                    let _ = fs::rename(&real, &invalid);
                }
                std::thread::yield_now();
            }
        })
    };
    for i in 0..1500u32 {
        let _ = fs::write(pending.join(format!("{i:012x}.json")), "{not json");
        let _ = rt.block_on(awt_tasks::pending::take_over(&runner, &pending, &store));
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let landed: Vec<PathBuf> = files_below(&a.outside);
    assert!(landed.is_empty(), "written through the swapped link: {landed:?}");
    // And descriptors were set aside (some looks fell between swaps).
    let aside = files_below(&invalid).len() + files_below(&real).len();
    assert!(aside > 0);
}
