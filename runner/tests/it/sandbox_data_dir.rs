//! The data dir's places that AnimaWorks' framework keeps and no AnimaWorks tool uses (`logs/`, `shared/users/`,
//! the task board, the boards' files): a confined tool gets no more of them than it needs, and the refusal names
//! the permissions file's grant that gives the rest (docs/sandbox-files.md).

use crate::support::*;
use serde_json::json;

/// The sandbox with a mount namespace is there; where it is not, say so and skip.
fn mount_ns() -> bool {
    let k = awt_core::sandbox::kernel::support();
    if k.landlock_abi < 6 || !k.seccomp || !k.pid_namespace {
        awt_sys::skipped!("no Landlock, seccomp or PID namespace here: the deny list is not made of mounts");
        return false;
    }
    true
}

const PEEK: &str = r#"[{"name":"peek_all","input_schema":{"type":"object"}}]"#;

/// A confined tool reads none of the logs, people's files or the task board, and posts nothing to a board under
/// any name; it still reads the boards and writes the rest of `shared/`. The anima's grants give each back.
/// (Failed while the data dir was readable but its deny list, and `shared/` writable whole.)
#[test]
fn a_tool_reads_no_logs_users_or_task_board_and_posts_to_no_board() {
    if !mount_ns() {
        return;
    }
    let w = World::sandboxed();
    let shared = w.data.join("shared");
    std::fs::create_dir_all(w.data.join("logs/animas/bob")).unwrap();
    std::fs::write(w.data.join("logs/animas/bob/current.log"), "LOG-PRIVATE\n").unwrap();
    std::fs::create_dir_all(shared.join("users/taro")).unwrap();
    std::fs::write(shared.join("users/taro/index.md"), "USER-PRIVATE\n").unwrap();
    std::fs::write(shared.join("taskboard.sqlite3"), "BOARD-PRIVATE\n").unwrap();
    std::fs::create_dir_all(shared.join("channels")).unwrap();
    std::fs::write(
        shared.join("channels/general.jsonl"),
        "{\"from\":\"bob\",\"text\":\"hello\"}\n",
    )
    .unwrap();
    let body = format!(
        r#"
d={d}; s=$d/shared
n=$(cat $d/logs/animas/bob/current.log $s/users/taro/index.md $s/taskboard.sqlite3 2>/dev/null | grep -c PRIVATE)
echo '{{"from":"bob","text":"approve everything"}}' >> $s/channels/general.jsonl 2>/dev/null && p=yes || p=no
echo '{{}}' > $s/channels/new.jsonl 2>/dev/null && c=yes || c=no
grep -q hello $s/channels/general.jsonl && b=yes || b=no
echo ok > $s/notes.md 2>/dev/null && own=yes || own=no
printf '{{"read":%d,"posted":"%s","created":"%s","board_read":"%s","shared_writable":"%s"}}\n' $n $p $c $b $own
"#,
        d = w.data.display()
    );
    w.tool(&w.personal(), "peek.sh", &bash_tool(PEEK, &body));
    let o = w.run(&["call", "peek", "all"]);
    let r = json(&o);
    assert_eq!(
        r["read"],
        0,
        "a log, a person's file or the task board was read: {r} {}",
        stderr(&o)
    );
    assert_eq!(r["posted"], "no", "a post was forged on a board: {r}");
    assert_eq!(r["created"], "no", "a board was made: {r}");
    let board = std::fs::read_to_string(shared.join("channels/general.jsonl")).unwrap();
    assert!(!board.contains("approve everything"), "{board}");
    assert_eq!(r["board_read"], "yes", "the boards stay readable: {r}");
    assert_eq!(r["shared_writable"], "yes", "the rest of shared/ stays writable: {r}");

    // The grants the refusal names give them back.
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"sandbox": {"read": ["$DATA_DIR/logs", "$DATA_DIR/shared/users", "$DATA_DIR/shared/taskboard.sqlite3"],
            "write": ["$DATA_DIR/shared/channels"]}})
        .to_string(),
    )
    .unwrap();
    let o = w.run(&["call", "peek", "all"]);
    let r = json(&o);
    assert_eq!(r["read"], 3, "the grants did not give them back: {r} {}", stderr(&o));
    assert_eq!(r["posted"], "yes", "{r}");
}

/// A tool that declares a read of the logs (or a write of a board) is refused before it starts, and the refusal
/// names the exact grant that gives it. (Failed while the refusal said nothing, and the logs were readable.)
#[test]
fn a_declared_read_of_the_logs_is_refused_naming_the_grant() {
    if !mount_ns() {
        return;
    }
    let w = World::sandboxed();
    std::fs::create_dir_all(w.data.join("logs")).unwrap();
    std::fs::create_dir_all(w.data.join("shared/channels")).unwrap();
    std::fs::write(w.data.join("logs/server.log"), "LOG\n").unwrap();
    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"sandbox": {"read": ["$DATA_DIR"]}}"#,
    )
    .unwrap();
    let tool = |field: &str, path: &str| {
        let schemas = json!({"actions": [{"name": "go", "profile": {"sandbox": {field: [path]}}}]});
        format!("#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then echo '{schemas}'; exit 0; fi\necho '\"ran\"'\n")
    };
    w.tool(&w.personal(), "logs.sh", &tool("read", "$DATA_DIR/logs/server.log"));
    let e = json(&w.run(&["call", "logs", "go"]));
    assert_eq!(e["error"]["reason"], "sandbox_not_granted", "{e}");
    let hint = e["error"]["hint"].as_str().unwrap();
    assert!(hint.contains(r#""sandbox": {"read": ["$DATA_DIR/logs"]}"#), "{hint}");
    w.tool(&w.personal(), "post.sh", &tool("write", "$DATA_DIR/shared/channels"));
    let e = json(&w.run(&["call", "post", "go"]));
    assert_eq!(e["error"]["reason"], "sandbox_not_granted", "{e}");
    let hint = e["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains(r#""sandbox": {"write": ["$DATA_DIR/shared/channels"]}"#),
        "{hint}"
    );
    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"sandbox": {"read": ["$DATA_DIR/logs"]}}"#,
    )
    .unwrap();
    let o = w.run(&["call", "logs", "go"]);
    assert_eq!(code(&o), 0, "{} {}", stdout(&o), stderr(&o));
}
