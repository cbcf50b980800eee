//! Background tasks: submit, the detached worker, the store, watching and control, and lost workers.

use crate::support::*;
use serde_json::json;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;

const SCHEMAS: &str = r#"{"protocol":1,"events":true,"actions":[
 {"name":"quick","input_schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]},"profile":{"background_eligible":true}},
 {"name":"sleepy","profile":{"background_eligible":true}},
 {"name":"marked","profile":{"background_eligible":true}},
 {"name":"tree","profile":{"background_eligible":true}},
 {"name":"plain"},
 {"name":"locked","profile":{"gated":true,"background_eligible":true}},
 {"name":"needs_key","profile":{"background_eligible":true,"credentials":[{"name":"svc","env":"SVC_TOKEN"}]}}
]}"#;

/// One events tool with an action per behaviour; files it leaves go to `<anima dir>/out/`.
const BODY: &str = r#"
act=$(echo "$req" | sed -E 's/.*"action":"([^"]*)".*/\1/')
out="$ANIMAWORKS_ANIMA_DIR/out"; mkdir -p "$out"
case "$act" in
quick)
  n=$(echo "$req" | sed -E 's/.*"n":([0-9]+).*/\1/')
  echo '{"type":"progress","progress":1,"total":2,"message":"half"}'
  echo '{"type":"progress","progress":2,"total":2}'
  echo "{\"type\":\"result\",\"result\":{\"n\":$n,\"id\":\"$ANIMAWORKS_CALL_ID\"}}";;
sleepy)
  echo $$ > "$out/$ANIMAWORKS_CALL_ID.pid"
  echo '{"type":"progress","progress":0}'
  sleep 120
  echo '{"type":"result","result":"woke"}';;
marked)
  echo "S $ANIMAWORKS_CALL_ID" >> "$out/markers"
  sleep 0.1
  echo "E $ANIMAWORKS_CALL_ID" >> "$out/markers"
  echo '{"type":"result","result":"done"}';;
tree)
  (sleep 120 & echo $! >> "$out/tree.pids"; wait) &
  echo $! >> "$out/tree.pids"
  sleep 120 &
  echo $! >> "$out/tree.pids"
  echo '{"type":"progress","progress":1}'
  wait;;
*)
  echo '{"type":"result","result":"ran"}';;
esac
"#;

fn world() -> World {
    let w = World::new();
    w.tool(&w.common(), "bg", &bash_tool(SCHEMAS, BODY));
    w
}

fn tasks_dir(w: &World) -> PathBuf {
    w.anima.join("state").join("background_tasks")
}

fn submit(w: &World, args: &[&str]) -> (i32, Value) {
    let mut a = vec!["submit"];
    a.extend_from_slice(args);
    let o = w.run(&a);
    (o.status.code().expect("submit killed by a signal"), json(&o))
}

fn submit_ok(w: &World, args: &[&str]) -> String {
    let (code, v) = submit(w, args);
    assert_eq!(code, 0, "{v}");
    v["task_id"].as_str().unwrap().to_owned()
}

/// The task file itself, as a reader of the store sees it.
fn task_file(w: &World, id: &str) -> Value {
    let text = std::fs::read(tasks_dir(w).join(format!("{id}.json"))).unwrap();
    serde_json::from_slice(&text).unwrap()
}

fn show(w: &World, id: &str) -> Value {
    let o = w.run(&["jobs", "show", id]);
    assert!(o.status.success(), "{}", stderr(&o));
    json(&o)
}

/// The finer status: `outcome` of a finished task (its `status` is AnimaWorks' word), else `status`.
fn fine(t: &Value) -> &Value {
    if t["outcome"].is_string() {
        &t["outcome"]
    } else {
        &t["status"]
    }
}

fn status_becomes(w: &World, id: &str, want: &str, secs: u64) -> Value {
    let mut last = Value::Null;
    let ok = eventually(secs, || {
        last = show(w, id);
        fine(&last) == want
    });
    assert!(ok, "task {id} never became {want}: {last}");
    last
}

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s[s.rfind(')').unwrap() + 2..].starts_with('Z'),
        Err(_) => false,
    }
}

fn task_json_files(w: &World) -> Vec<PathBuf> {
    match std::fs::read_dir(tasks_dir(w)) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn submit_then_wait_gives_the_result_under_the_printed_id() {
    let w = world();
    let (code, receipt) = submit(&w, &["bg", "quick", "--n", "7"]);
    assert_eq!(code, 0, "{receipt}");
    // What AnimaWorks' submit prints.
    assert_eq!(receipt["status"], "submitted");
    assert_eq!(receipt["tool"], "bg");
    assert_eq!(receipt["subcommand"], "quick");
    let id = receipt["task_id"].as_str().unwrap();
    assert!(
        receipt["message"]
            .as_str()
            .unwrap()
            .contains(&format!("(task_id: {id})")),
        "{receipt}"
    );
    assert!(id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    let o = w.run(&["jobs", "wait", id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let result = json(&o);
    assert_eq!(result["n"], 7);
    assert_eq!(result["id"], id, "the call id is the task id");
    assert!(
        stderr(&o).contains("half") || task_file(&w, id)["progress"]["progress"] == 2.0,
        "{}",
        stderr(&o)
    );
    let t = task_file(&w, id);
    for k in [
        "task_id",
        "anima_name",
        "tool_name",
        "tool_args",
        "status",
        "created_at",
        "completed_at",
        "result",
        "error",
    ] {
        assert!(t.get(k).is_some(), "AnimaWorks field {k} missing: {t}");
    }
    assert_eq!(t["anima_name"], "alice");
    assert_eq!(t["tool_name"], "bg:quick");
    assert_eq!(t["tool_args"]["n"], 7);
    assert_eq!(t["status"], "completed");
    assert!(
        t["result"].is_string() && t["created_at"].is_f64() && t["completed_at"].is_f64(),
        "{t}"
    );
    // The notification is written just after the task is final.
    let note_path = w.anima.join(format!("state/background_notifications/{id}.md"));
    assert!(eventually(10, || note_path.exists()), "no notification");
    let note = std::fs::read_to_string(note_path).unwrap();
    assert!(note.contains(id) && note.contains("completed"), "{note}");
}

#[test]
fn sigkilled_worker_is_reported_lost_and_its_tool_dies() {
    let w = world();
    let id = submit_ok(&w, &["bg", "sleepy"]);
    let pid_file = w.anima.join(format!("out/{id}.pid"));
    assert!(eventually(20, || pid_file.exists()), "the tool never started");
    let t = status_becomes(&w, &id, "running", 5);
    let worker = t["pid"].as_i64().unwrap() as i32;
    assert!(t["pid_start_time"].as_u64().is_some(), "{t}");
    let tool_pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    // SAFETY: the worker this test started.
    unsafe { libc::kill(worker, libc::SIGKILL) };
    let t = status_becomes(&w, &id, "lost", 10);
    assert_eq!(t["status"], "failed", "AnimaWorks' word");
    assert_eq!(t["error_code"], "lost");
    assert!(t["completed_at"].is_f64());
    assert!(eventually(10, || !alive(tool_pid)), "the tool outlived its worker");
    assert!(w.anima.join(format!("state/background_notifications/{id}.md")).exists());
    // `task wait` on a lost task ends at once with the crashed code.
    let o = w.run(&["jobs", "wait", &id]);
    assert_eq!(o.status.code(), Some(11), "{}", stdout(&o));
    assert_eq!(json(&o)["error"]["status"], "lost");
}

#[test]
fn fifty_submits_at_once_never_run_more_than_the_limit_and_all_finish() {
    let w = world();
    w.settings(r#"{"max_running_tasks": 4}"#);
    let children: Vec<_> = (0..50)
        .map(|_| {
            w.cmd()
                .args(["submit", "bg", "marked"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut ids = Vec::new();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        ids.push(json(&o)["task_id"].as_str().unwrap().to_owned());
    }
    let mut last = String::new();
    let all_done = eventually(120, || {
        let o = w.run(&["jobs", "list", "--json"]);
        let list = json(&o);
        let done = list
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["status"] == "completed")
            .count();
        last = format!("{done} of 50 completed");
        done == 50
    });
    assert!(all_done, "{last}");
    let markers = std::fs::read_to_string(w.anima.join("out/markers")).unwrap();
    let (mut running, mut most, mut starts) = (0i32, 0i32, 0);
    for line in markers.lines() {
        if line.starts_with("S ") {
            running += 1;
            starts += 1;
        } else {
            running -= 1;
        }
        most = most.max(running);
    }
    assert_eq!(starts, 50, "{markers}");
    assert!(most <= 4, "{most} tasks ran at once:\n{markers}");
    for id in ids {
        assert_eq!(task_file(&w, &id)["status"], "completed");
    }
}

#[test]
fn limit_of_one_starts_tasks_in_submit_order() {
    let w = world();
    w.settings(r#"{"max_running_tasks": 1}"#);
    let ids: Vec<String> = (0..5).map(|_| submit_ok(&w, &["bg", "marked"])).collect();
    assert!(eventually(60, || ids
        .iter()
        .all(|id| task_file(&w, id)["status"] == "completed")));
    let markers = std::fs::read_to_string(w.anima.join("out/markers")).unwrap();
    let started: Vec<&str> = markers.lines().filter_map(|l| l.strip_prefix("S ")).collect();
    assert_eq!(started, ids.iter().map(String::as_str).collect::<Vec<_>>(), "{markers}");
}

#[test]
fn a_task_past_its_timeout_ends_as_timeout() {
    let w = world();
    let id = submit_ok(&w, &["bg", "sleepy", "--timeout", "1"]);
    let o = w.run(&["jobs", "wait", &id]);
    assert_eq!(o.status.code(), Some(7), "{}", stdout(&o));
    assert_eq!(json(&o)["error"]["code"], "timeout");
    let t = task_file(&w, &id);
    // AnimaWorks' loader knows only pending/running/completed/failed: the finer word is in `outcome`.
    assert_eq!(t["status"], "failed");
    assert_eq!(t["outcome"], "timeout");
    assert_eq!(t["timeout_s"], 1.0);
    let tool_pid: i32 = std::fs::read_to_string(w.anima.join(format!("out/{id}.pid")))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(eventually(10, || !alive(tool_pid)));
}

#[test]
fn cancel_ends_the_task_and_every_grandchild() {
    let w = world();
    let id = submit_ok(&w, &["bg", "tree"]);
    let pids_file = w.anima.join("out/tree.pids");
    let mut pids: Vec<i32> = Vec::new();
    assert!(eventually(20, || {
        pids = std::fs::read_to_string(&pids_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        pids.len() >= 3
    }));
    // The grandchild inside the subshell.
    let inner: Vec<i32> = pids.clone();
    assert!(inner.iter().all(|p| alive(*p)), "{inner:?}");
    status_becomes(&w, &id, "running", 10);
    let o = w.run(&["jobs", "cancel", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o)["status"], "cancelled");
    let t = task_file(&w, &id);
    assert_eq!(t["status"], "failed");
    assert_eq!(t["outcome"], "cancelled");
    assert_eq!(t["error_code"], "cancelled");
    assert!(
        eventually(10, || inner.iter().all(|p| !alive(*p))),
        "survivors: {:?}",
        inner.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
    let o = w.run(&["jobs", "wait", &id]);
    assert_eq!(o.status.code(), Some(8));
}

#[test]
fn cancel_of_a_pending_task_never_starts_it() {
    let w = world();
    w.settings(r#"{"max_running_tasks": 1}"#);
    let first = submit_ok(&w, &["bg", "sleepy"]);
    status_becomes(&w, &first, "running", 20);
    let second = submit_ok(&w, &["bg", "quick", "--n", "1"]);
    assert_eq!(task_file(&w, &second)["status"], "pending");
    let o = w.run(&["jobs", "cancel", &second]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(task_file(&w, &second)["outcome"], "cancelled");
    let o = w.run(&["jobs", "cancel", &first]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(task_file(&w, &first)["outcome"], "cancelled");
    assert!(task_file(&w, &second)["started_at"].is_null());
}

#[test]
fn readers_polling_the_store_never_see_a_broken_file() {
    let w = world();
    let ids: Vec<String> = (0..20)
        .map(|i| submit_ok(&w, &["bg", "quick", "--n", &i.to_string()]))
        .collect();
    let mut reads = 0;
    let done = eventually(120, || {
        // Every file straight from the folder, as another program would read it.
        for p in task_json_files(&w) {
            if let Ok(bytes) = std::fs::read(&p) {
                let parsed: Result<Value, _> = serde_json::from_slice(&bytes);
                assert!(
                    parsed.is_ok(),
                    "half-written {}: {:?}",
                    p.display(),
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
        let o = w.run(&["jobs", "list", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let list = json(&o);
        reads += 1;
        list.as_array()
            .unwrap()
            .iter()
            .filter(|t| t["status"] == "completed")
            .count()
            == ids.len()
    });
    assert!(done && reads > 0);
}

#[test]
fn refused_submits_write_nothing() {
    let w = world();
    let cases: [(&[&str], i32); 4] = [
        (&["nope", "run"], 3),
        (&["bg", "quick", "--n", "seven"], 5),
        (&["bg", "quick"], 5),
        (&["bg", "needs_key"], 6),
    ];
    for (args, want) in cases {
        let (code, out) = submit(&w, args);
        assert_eq!(code, want, "{args:?}: {out}");
        assert!(out["error"]["message"].is_string(), "{out}");
        assert!(task_json_files(&w).is_empty(), "{args:?} wrote a task");
    }
    // A gated action without its grant: refused as AnimaWorks' submit refuses it (docs/migrating.md).
    let o = w.run(&["submit", "bg", "locked"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("Error: ") && stderr(&o).contains("bg_locked"), "{}", stderr(&o));
    assert!(task_json_files(&w).is_empty());
    let (code, out) = submit(&w, &["--strict", "bg", "plain"]);
    assert_eq!(code, 6, "{out}");
    assert!(task_json_files(&w).is_empty());
    // Without --strict it is a warning.
    let o = w.run(&["submit", "bg", "plain"]);
    assert!(o.status.success());
    assert!(stderr(&o).contains("background-eligible"), "{}", stderr(&o));
}

#[test]
fn without_an_anima_dir_submit_is_refused() {
    let w = world();
    let o = w
        .cmd()
        .env_remove("ANIMAWORKS_ANIMA_DIR")
        .args(["submit", "bg", "quick", "--n", "1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("anima"), "{}", stderr(&o));
}

#[test]
fn run_pending_takes_over_animaworks_descriptors_and_sets_bad_ones_aside() {
    let w = world();
    let pending = tasks_dir(&w).join("pending");
    std::fs::create_dir_all(&pending).unwrap();
    let good = r#"{"task_id":"0123456789ab","tool_name":"bg","subcommand":"quick","raw_args":["quick","--n","3"],"anima_name":"alice","anima_dir":"x","submitted_at":1.5,"status":"pending"}"#;
    std::fs::write(pending.join("0123456789ab.json"), good).unwrap();
    std::fs::write(pending.join("broken.json"), "{not json").unwrap();
    std::fs::write(
        pending.join("ghost.json"),
        r#"{"task_id":"aaaaaaaaaaaa","tool_name":"ghost","raw_args":[]}"#,
    )
    .unwrap();
    let o = w.run(&["jobs", "run-pending"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rep = json(&o);
    assert_eq!(rep["queued"][0]["task_id"], "0123456789ab", "{rep}");
    assert_eq!(rep["invalid"].as_array().unwrap().len(), 2, "{rep}");
    let t = status_becomes(&w, "0123456789ab", "completed", 30);
    assert_eq!(t["result_value"]["n"], 3);
    assert!(pending.join("done/0123456789ab.json").exists());
    for name in ["broken.json", "ghost.json"] {
        assert!(pending.join("invalid").join(name).exists(), "{name} was not kept");
        let reason = std::fs::read_to_string(pending.join("invalid").join(format!("{name}.reason.txt"))).unwrap();
        assert!(!reason.trim().is_empty());
    }
    assert!(std::fs::read_to_string(pending.join("invalid/ghost.json.reason.txt"))
        .unwrap()
        .contains("unknown_tool"));
}

#[test]
fn prune_deletes_only_old_finished_tasks() {
    let w = world();
    let id = submit_ok(&w, &["bg", "quick", "--n", "1"]);
    status_becomes(&w, &id, "completed", 30);
    let o = w.run(&["jobs", "prune", "--older-than", "7d"]);
    assert!(o.status.success());
    assert!(json(&o)["pruned"].as_array().unwrap().is_empty());
    let o = w.run(&["jobs", "prune", "--older-than", "0s"]);
    assert_eq!(json(&o)["pruned"][0], id.as_str());
    assert!(task_json_files(&w).is_empty());
    let o = w.run(&["jobs", "prune", "--older-than", "soon"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn legacy_cli_main_argv_runs_in_the_background_with_json_output() {
    let w = world();
    // A repo-owned module in the shape of ../shared's cli_only_tool.py (the test must not need ../shared).
    std::fs::write(
        w.common().join("cli_only_tool.py"),
        "import argparse, json\n\
         def get_tool_schemas():\n    return []\n\
         def cli_main(argv=None):\n\
         \x20   p = argparse.ArgumentParser(prog='cli_only_tool')\n\
         \x20   sub = p.add_subparsers(dest='action', required=True)\n\
         \x20   g = sub.add_parser('greet')\n\
         \x20   g.add_argument('--name', required=True)\n\
         \x20   g.add_argument('-j', '--json', action='store_true')\n\
         \x20   ns = p.parse_args(argv)\n\
         \x20   print(json.dumps({'greeting': 'hello, ' + ns.name}) if ns.json else 'hello, ' + ns.name)\n",
    )
    .unwrap();
    let (code, receipt) = submit(&w, &["cli_only_tool", "greet", "--name", "Ada"]);
    assert_eq!(code, 0, "{receipt}");
    assert_eq!(receipt["subcommand"], "greet");
    let id = receipt["task_id"].as_str().unwrap();
    let o = w.run(&["jobs", "wait", id]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(json(&o)["greeting"], "hello, Ada");
    let t = task_file(&w, id);
    assert_eq!(t["kind"], "cli");
    // AnimaWorks' shape of a legacy task: `tool:subcommand`, the dict of tool_args, stdout as printed.
    assert_eq!(t["tool_name"], "cli_only_tool:greet");
    assert_eq!(
        t["tool_args"],
        serde_json::json!({"subcommand": "greet", "raw_args": ["greet", "--name", "Ada"], "anima_dir": w.anima})
    );
    assert_eq!(t["result"], r#"{"greeting": "hello, Ada"}"#);
}

// ---------------------------------------------------------------- forged task files and cancel; AnimaWorks argvs submitted

/// A forged task file naming another process's pid made `jobs cancel` kill it (issue 12 item 7).
#[test]
fn a_forged_task_file_cannot_make_cancel_kill_another_process() {
    let w = World::new();
    echo_tool(&w);
    let mut victim = Command::new("sleep").arg("1000").spawn().unwrap();
    let pid = victim.id() as i32;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let start: u64 = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_owned();
    let dir = w.anima.join("state/background_tasks");
    std::fs::create_dir_all(&dir).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let t = json!({"task_id": "00000000f0f0", "anima_name": "alice", "tool_name": "echo:say", "tool_args": {},
        "status": "running", "created_at": now, "completed_at": null, "result": null, "error": null,
        "tool": "echo", "action": "say", "kind": "action", "updated_at": now, "started_at": now,
        "pid": pid, "pid_start_time": start, "boot_id": boot, "worker_token": "0123456789abcdef0123456789abcdef"});
    std::fs::write(dir.join("00000000f0f0.json"), t.to_string()).unwrap();
    let o = run_guarded(w.cmd().args(["jobs", "cancel", "00000000f0f0"]), 60).unwrap();
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(alive, "jobs cancel killed a process that is no worker: {}", stderr(&o));
    assert!(stderr(&o).contains("not signalled"), "{}", stderr(&o));
}

/// The fix of the forged-pid cancel must still kill a real worker that does not answer (issue 12 item 7).
#[test]
fn cancel_still_kills_a_real_worker_that_does_not_answer() {
    let w = World::new();
    w.tool(
        &w.personal(),
        "slow.sh",
        &bash_tool(
            r#"{"protocol":1,"actions":[{"name":"go","profile":{"background_eligible":true}}]}"#,
            "sleep 100; echo '\"late\"'",
        ),
    );
    let o = w.run(&["submit", "slow", "go"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let mut pid = 0;
    assert!(eventually(30, || {
        let t = json(&w.run(&["jobs", "show", &id]));
        pid = t["pid"].as_i64().unwrap_or(0) as i32;
        t["status"] == "running" && t["worker_token"].is_string()
    }));
    // SAFETY: kill takes numbers; the pid is the worker this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let o = run_guarded(w.cmd().args(["jobs", "cancel", &id]), 60).unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let t = json(&w.run(&["jobs", "show", &id]));
    assert_eq!(t["outcome"], "cancelled", "{t}");
    assert!(t["error"].as_str().unwrap().contains("was killed"), "{t}");
    assert!(eventually(10, || proc_stat(pid).is_none_or(|(st, _, _)| st == "Z")));
}

/// A module with schemas *and* a `cli_main` whose subcommands are named like its actions, as AnimaWorks tools are.
const NOTES: &str = "import argparse, json\n\
def get_tool_schemas():\n\
\x20   return [{'name': 'notes_add', 'description': 'Add.', 'input_schema': {'type': 'object',\n\
\x20            'properties': {'title': {'type': 'string'}, 'body': {'type': 'string'}}, 'required': ['title']}}]\n\
def dispatch(name, args):\n\
\x20   return {'via': 'dispatch', 'title': args['title']}\n\
def cli_main(argv=None):\n\
\x20   p = argparse.ArgumentParser(prog='notes')\n\
\x20   sub = p.add_subparsers(dest='action', required=True)\n\
\x20   a = sub.add_parser('add')\n\
\x20   a.add_argument('title')\n\
\x20   a.add_argument('--body', default='')\n\
\x20   a.add_argument('-j', '--json', action='store_true')\n\
\x20   ns = p.parse_args(argv)\n\
\x20   print(json.dumps({'via': 'cli_main', 'title': ns.title, 'body': ns.body}))\n";

fn wait_done(w: &World, id: &str) -> serde_json::Value {
    let o = w.run(&["jobs", "wait", id]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    json(&o)
}

/// How the submitted task calls its tool (`cli` or `action`), from `jobs show`.
fn kind(w: &World, receipt: &serde_json::Value) -> String {
    let o = w.run(&["jobs", "show", receipt["task_id"].as_str().unwrap()]);
    json(&o)["kind"].as_str().unwrap().to_owned()
}

#[test]
fn submit_passes_an_animaworks_argv_to_cli_main_even_when_its_first_word_is_an_action() {
    let w = World::new();
    std::fs::write(w.common().join("notes.py"), NOTES).unwrap();
    // The form AnimaWorks' skill documents teach: a positional argument, not the action's --flags.
    let o = w.run(&["submit", "notes", "add", "my title", "--body", "x"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let receipt = json(&o);
    assert_eq!(receipt["subcommand"], "add", "{receipt}");
    assert_eq!(kind(&w, &receipt), "cli");
    let r = wait_done(&w, receipt["task_id"].as_str().unwrap());
    assert_eq!(r["via"], "cli_main");
    assert_eq!(r["title"], "my title");
    // Words that are the action's own flags still make a structured task.
    let o = w.run(&["submit", "notes", "add", "--title", "t2"]);
    let receipt = json(&o);
    assert_eq!(receipt["subcommand"], "add", "{receipt}");
    assert_eq!(kind(&w, &receipt), "action");
    let r = wait_done(&w, receipt["task_id"].as_str().unwrap());
    assert_eq!(r["via"], "dispatch", "{r}");
}

#[test]
fn run_pending_runs_an_animaworks_descriptor_whose_subcommand_is_an_action() {
    let w = World::new();
    std::fs::write(w.common().join("notes.py"), NOTES).unwrap();
    let pending = w.anima.join("state/background_tasks/pending");
    std::fs::create_dir_all(&pending).unwrap();
    let d = r#"{"task_id":"0123456789ab","tool_name":"notes","subcommand":"add","raw_args":["add","a title","--body","b"],"anima_name":"alice","submitted_at":1.5,"status":"pending"}"#;
    std::fs::write(pending.join("0123456789ab.json"), d).unwrap();
    let o = w.run(&["jobs", "run-pending"]);
    let rep = json(&o);
    assert_eq!(rep["queued"][0]["task_id"], "0123456789ab", "{rep}");
    let r = wait_done(&w, "0123456789ab");
    assert_eq!(r["via"], "cli_main");
    assert_eq!(r["body"], "b");
}

/// Links left in AnimaWorks' pending folder are never followed by `run-pending`: a descriptor that is a link (to
/// another anima's descriptor) is set aside, not run as this anima's task; and a `done/` that is a link (to another
/// anima's pending folder) is refused before anything is taken, so no descriptor of this anima lands there to
/// become that anima's task. (Failed while the descriptor was read through the link and `done/` made with
/// `create_dir_all`.)
#[test]
fn run_pending_never_follows_a_link_in_the_pending_folder() {
    let w = world();
    let pending = tasks_dir(&w).join("pending");
    std::fs::create_dir_all(&pending).unwrap();
    let bobs = r#"{"task_id":"bbbbbbbbbbbb","tool_name":"bg","subcommand":"quick","raw_args":["quick","--n","7"],"anima_name":"bob","submitted_at":1.0,"status":"pending"}"#;
    std::fs::write(w.tmp.path().join("bobs.json"), bobs).unwrap();
    std::os::unix::fs::symlink(w.tmp.path().join("bobs.json"), pending.join("bbbbbbbbbbbb.json")).unwrap();
    let o = w.run(&["jobs", "run-pending"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rep = json(&o);
    assert!(
        rep["queued"].as_array().unwrap().is_empty(),
        "a linked descriptor was run: {rep}"
    );
    assert_eq!(rep["invalid"].as_array().unwrap().len(), 1, "{rep}");
    assert!(std::fs::symlink_metadata(pending.join("invalid/bbbbbbbbbbbb.json"))
        .unwrap()
        .file_type()
        .is_symlink());

    let bob_pending = w.anima.parent().unwrap().join("bob/state/background_tasks/pending");
    std::fs::create_dir_all(&bob_pending).unwrap();
    std::fs::remove_dir_all(pending.join("done")).ok();
    std::os::unix::fs::symlink(&bob_pending, pending.join("done")).unwrap();
    let good = r#"{"task_id":"0123456789ab","tool_name":"bg","subcommand":"quick","raw_args":["quick","--n","3"],"anima_name":"alice","submitted_at":1.5,"status":"pending"}"#;
    std::fs::write(pending.join("0123456789ab.json"), good).unwrap();
    let o = w.run(&["jobs", "run-pending"]);
    assert_ne!(code(&o), 0, "a linked done/ was used: {}", stdout(&o));
    assert!(stderr(&o).contains("symbolic link"), "{}", stderr(&o));
    let landed: Vec<_> = std::fs::read_dir(&bob_pending)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        landed.is_empty(),
        "alice's descriptor landed in bob's pending folder: {landed:?}"
    );
    assert!(
        pending.join("0123456789ab.json").exists(),
        "the descriptor waits where it was"
    );
}
