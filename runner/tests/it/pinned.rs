//! What a confined tool may write but must not change: the anima's `state/` (the runner's files live there), the
//! files that decide which code runs (`status.json`, `package.json`, `node_modules/`), the caller's working
//! directory when it is a place whose files run; and what the runner does whatever the file system says: it never
//! follows a link below the anima dir, a worker runs only its own anima's tasks, one anima's probe never answers
//! for another. Each test is the attack, made by a real confined tool or as a tool would leave the files.

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn confinable() -> bool {
    let k = awt_core::sandbox::kernel::support();
    if k.landlock_abi < 6 || !k.seccomp || !k.pid_namespace {
        let msg = format!(
            "this kernel has Landlock ABI {}, seccomp {}, PID namespace {}: the mounts cannot be tested here",
            k.landlock_abi, k.seccomp, k.pid_namespace
        );
        awt_sys::skipped!("{msg}");
        return false;
    }
    true
}

/// Another anima beside the world's own, with an audit log of its own.
fn bob(w: &World) -> PathBuf {
    let bob = w.anima.parent().unwrap().join("bob");
    std::fs::create_dir_all(bob.join("state/background_notifications")).unwrap();
    std::fs::create_dir_all(bob.join("tools")).unwrap();
    std::fs::write(bob.join("state/tool_audit.jsonl"), "bob's line\n").unwrap();
    bob
}

/// A personal tool `sh` (action `run`) that runs the shell command in its argument `c` and answers its output.
fn shell_tool(w: &World) {
    w.tool(
        &w.personal(),
        "sh.sh",
        &bash_tool(
            r#"[{"name":"sh_run","input_schema":{"type":"object","properties":{"c":{"type":"string"}}}}]"#,
            r#"c=$(printf '%s' "$req" | python3 -c 'import json,sys; print(json.load(sys.stdin)["args"]["c"])')
out=$(bash -c "$c" 2>&1)
printf '%s' "$out" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))'"#,
        ),
    );
}

fn sh(w: &World, c: &str) -> String {
    let o = w.run(&["call", "sh", "run", "--json", &json!({ "c": c }).to_string()]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// A confined tool renamed `state/` away and put a link to another anima's in its place: the runner then wrote
/// the anima's audit lines, tasks and notifications there (hostile tools, fourth round, item 1).
#[test]
fn a_confined_tool_cannot_move_its_state_folder_away() {
    if !confinable() {
        return;
    }
    let w = World::sandboxed();
    std::fs::write(w.anima.join("permissions.json"), "{}").unwrap();
    bob(&w);
    shell_tool(&w);
    let out = sh(
        &w,
        r#"a="$ANIMAWORKS_ANIMA_DIR"; if mv "$a/state" "$a/state.old"; then ln -s ../bob/state "$a/state"; echo SWAPPED; else echo REFUSED; fi; rmdir "$a/state" && echo REMOVED; touch "$a/state/mine.txt" && echo WROTE"#,
    );
    assert!(!out.contains("SWAPPED") && !out.contains("REMOVED"), "{out}");
    assert!(
        out.contains("REFUSED") && out.contains("WROTE"),
        "the rest of state/ stays writable: {out}"
    );
    let m = std::fs::symlink_metadata(w.anima.join("state")).unwrap();
    assert!(m.is_dir(), "state/ was replaced");
    assert!(!w.anima.join("state.old").exists());
}

/// The link left there (by a tool that ran unconfined, or before this runner): nothing the runner writes or reads
/// goes through it; it says what is wrong instead.
#[test]
fn the_runner_never_follows_a_state_folder_swapped_for_a_link() {
    let w = World::new();
    let bob = bob(&w);
    echo_tool(&w);
    assert_eq!(code(&w.run(&["call", "echo", "say"])), 0);
    std::fs::rename(w.anima.join("state"), w.anima.join("state.old")).unwrap();
    std::os::unix::fs::symlink("../bob/state", w.anima.join("state")).unwrap();
    let _ = w.run(&["call", "echo", "say"]);
    let _ = w.run(&["call", "nosuchtool", "run"]);
    assert_eq!(
        std::fs::read_to_string(bob.join("state/tool_audit.jsonl")).unwrap(),
        "bob's line\n",
        "alice's audit lines went to bob's log"
    );
    for args in [&["jobs", "list"][..], &["submit", "echo", "say"][..]] {
        let o = w.run(args);
        assert_ne!(code(&o), 0, "{args:?}: {}", stdout(&o));
        let said = format!("{}{}", stdout(&o), stderr(&o));
        assert!(said.contains("symbolic link"), "{args:?}: {said}");
    }
    assert!(
        !bob.join("state/background_tasks").exists(),
        "a task went into bob's store"
    );
}

/// A task of another anima, validly signed, found in this anima's store (stores merged by a link, a copied
/// file): the worker never runs it (item 1, "a task is run only by its own anima's worker").
#[test]
fn a_worker_never_runs_another_animas_task() {
    let w = World::new();
    let bob = bob(&w);
    w.tool(
        &w.common(),
        "mark.sh",
        &bash_tool(
            r#"[{"name":"mark_put","input_schema":{"type":"object"},"profile":{"background_eligible":true}}]"#,
            r#"echo ran >> "$ANIMAWORKS_ANIMA_DIR/ran.txt"; echo '"ok"'"#,
        ),
    );
    let o = w
        .cmd()
        .env("ANIMAWORKS_ANIMA_DIR", &bob)
        .args(["submit", "mark", "put"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let bob_task = bob.join(format!("state/background_tasks/{id}.json"));
    assert!(
        eventually(60, || std::fs::read_to_string(&bob_task)
            .is_ok_and(|t| t.contains("\"completed\""))),
        "bob's task did not finish"
    );
    assert!(bob.join("ran.txt").exists());
    let mut t: Value = serde_json::from_str(&std::fs::read_to_string(&bob_task).unwrap()).unwrap();
    t["status"] = json!("pending");
    for k in [
        "started_at",
        "completed_at",
        "outcome",
        "result_value",
        "pid",
        "pid_start_time",
        "boot_id",
        "worker_token",
    ] {
        t.as_object_mut().unwrap().remove(k);
    }
    let alice_tasks = w.anima.join("state/background_tasks");
    std::fs::create_dir_all(&alice_tasks).unwrap();
    std::fs::write(alice_tasks.join(format!("{id}.json")), t.to_string()).unwrap();
    let o = run_guarded(w.cmd().args(["jobs", "worker"]), 60).expect("the worker hung");
    assert!(!w.anima.join("ran.txt").exists(), "alice's worker ran bob's task");
    let listing: Vec<_> = std::fs::read_dir(&alice_tasks)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        alice_tasks.join(format!("{id}.json.refused")).exists(),
        "{listing:?} {} {} {} {}",
        std::fs::read_to_string(alice_tasks.join(format!("{id}.json"))).unwrap_or_default(),
        code(&o),
        stdout(&o),
        stderr(&o)
    );
    assert!(stderr(&o).contains("\"bob\""), "{}", stderr(&o));
}

/// `status.json` (its `extra_mcp_servers` start programs), `package.json` and `node_modules/` (a Node.js tool's
/// `require()`) are read-only inside calls (items 5 and 11); the anima dir's top level stays writable.
#[test]
fn files_that_decide_which_code_runs_are_read_only_inside_calls() {
    if !confinable() {
        return;
    }
    let w = World::sandboxed();
    std::fs::write(w.anima.join("permissions.json"), "{}").unwrap();
    std::fs::write(w.anima.join("status.json"), r#"{"enabled": true}"#).unwrap();
    shell_tool(&w);
    let out = sh(
        &w,
        r#"a="$ANIMAWORKS_ANIMA_DIR"
echo '{"extra_mcp_servers":{"mailer":{"command":"/bin/true"}}}' > "$a/status.json" && echo STATUS
echo '{"name":"x","exports":"./evil.js"}' > "$a/package.json" && echo PACKAGE
mkdir -p "$a/node_modules/lodash" && echo 'module.exports=1' > "$a/node_modules/lodash/index.js" && echo MODULE
mv "$a/status.json" "$a/s.old" && echo MOVED
touch "$a/report.md" && echo TOP"#,
    );
    for planted in ["STATUS", "PACKAGE", "MODULE", "MOVED"] {
        assert!(!out.contains(planted), "{planted}: {out}");
    }
    assert!(out.contains("TOP"), "{out}");
    assert_eq!(
        std::fs::read_to_string(w.anima.join("status.json")).unwrap(),
        r#"{"enabled": true}"#
    );
    assert!(!w.anima.join("node_modules/lodash").exists());
    let pkg = std::fs::read_to_string(w.anima.join("package.json")).unwrap();
    assert!(!pkg.contains("evil"), "{pkg}");
}

/// The caller's working directory is writable by an undeclared tool, but not when it is a place whose files run:
/// a folder on `PATH` (a tool dropped an executable `git` in `~/.local/bin`), a dot-folder of the home folder
/// (item 15).
#[test]
fn the_working_directory_is_not_writable_when_its_files_run() {
    if !confinable() {
        return;
    }
    let w = World::sandboxed();
    std::fs::write(w.anima.join("permissions.json"), "{}").unwrap();
    shell_tool(&w);
    let home = w.tmp.path();
    let bin = home.join(".local/bin");
    let conf = home.join(".config/fish");
    let project = home.join("project");
    let path_dir = home.join("mybin");
    for d in [&bin, &conf, &project, &path_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let path = format!("{}:{}", path_dir.display(), std::env::var("PATH").unwrap_or_default());
    let drop_git = |cwd: &Path| -> String {
        let o = w
            .cmd()
            .current_dir(cwd)
            .env("PATH", &path)
            .args([
                "call",
                "sh",
                "run",
                "--json",
                &json!({"c": "printf x > git && echo WROTE"}).to_string(),
            ])
            .output()
            .unwrap();
        format!("{}{}", stdout(&o), stderr(&o))
    };
    assert!(
        drop_git(&project).contains("WROTE"),
        "an ordinary working directory stays writable"
    );
    for cwd in [&bin, &conf, &path_dir] {
        let out = drop_git(cwd);
        assert!(
            !out.contains("WROTE") && !cwd.join("git").exists(),
            "{}: {out}",
            cwd.display()
        );
    }
}

/// A common tool whose `--schemas` depends on the anima: the answer probed for alice decided bob's listing and
/// gate (item 13). Each anima gets its own probe.
#[test]
fn one_animas_probe_never_answers_for_another() {
    let w = World::new();
    let bob = bob(&w);
    w.tool(
        &w.common(),
        "who.sh",
        "#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then n=$(basename \"$ANIMAWORKS_ANIMA_DIR\"); \
         echo \"[{\\\"name\\\":\\\"who_$n\\\",\\\"input_schema\\\":{\\\"type\\\":\\\"object\\\"}}]\"; exit 0; fi\ncat >/dev/null; echo 1\n",
    );
    let names = |anima: &Path| -> String {
        let o = w
            .cmd()
            .env("ANIMAWORKS_ANIMA_DIR", anima)
            .args(["tools", "--json"])
            .output()
            .unwrap();
        stdout(&o)
    };
    assert!(names(&w.anima).contains("who_alice"));
    let b = names(&bob);
    assert!(b.contains("who_bob") && !b.contains("who_alice"), "{b}");
    assert!(names(&w.anima).contains("who_alice"));
}
