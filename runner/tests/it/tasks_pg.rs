//! Background tasks on both stores: one suite run on the file store and on a real Postgres server (with
//! `animaworks-tool worker` processes), then what only a shared queue has: the schema, tool versions, the per-anima
//! limit across workers, leases and the rescuer, and faults (workers killed, paused, Postgres restarted).

use crate::need_postgres;
use crate::pg_cluster::{self, scalar};
use crate::support::*;
use awt_tasks::pg::schema::VERSION;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const SCHEMAS: &str = r#"{"protocol":1,"events":true,"actions":[
 {"name":"quick","input_schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]},"profile":{"background_eligible":true}},
 {"name":"sleepy","profile":{"background_eligible":true}},
 {"name":"once","profile":{"background_eligible":true}},
 {"name":"idem","profile":{"background_eligible":true,"hints":{"idempotent":true}}},
 {"name":"long_once","profile":{"background_eligible":true}},
 {"name":"long_idem","profile":{"background_eligible":true,"hints":{"idempotent":true}}},
 {"name":"needs_key","input_schema":{"type":"object","properties":{"auth":{"type":"string"}}},"profile":{"background_eligible":true,"credentials":[{"name":"svc","env":"SVC_TOKEN"}]}},
 {"name":"pic","input_schema":{"type":"object","properties":{"kb":{"type":"integer"}}},"profile":{"background_eligible":true}}
]}"#;

/// A 1×1 PNG, as the `pic` action returns it in an image block (protocol.md §5.2).
const PNG_B64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// Each run appends `S <id> <anima>` at its start and `E <id> <anima>` at its end to `<animas>/runs.log` (one
/// file, O_APPEND: its order is the order in time); pids go to `<animas>/<id>.pid`.
const BODY: &str = r#"
act=$(echo "$req" | sed -E 's/.*"action":"([^"]*)".*/\1/')
root=$(dirname "$ANIMAWORKS_ANIMA_DIR"); me=$(basename "$ANIMAWORKS_ANIMA_DIR")
log="$root/runs.log"
case "$act" in
quick)
  n=$(echo "$req" | sed -E 's/.*"n":([0-9]+).*/\1/')
  echo '{"type":"progress","progress":1,"total":2,"message":"half"}'
  echo "{\"type\":\"result\",\"result\":{\"n\":$n,\"id\":\"$ANIMAWORKS_CALL_ID\"}}";;
sleepy)
  echo $$ > "$root/$ANIMAWORKS_CALL_ID.pid"
  echo '{"type":"progress","progress":0}'
  sleep 120
  echo '{"type":"result","result":"woke"}';;
once|idem|long_once|long_idem)
  echo $$ > "$root/$ANIMAWORKS_CALL_ID.pid"
  echo "S $ANIMAWORKS_CALL_ID $me" >> "$log"
  case "$act" in long_*) sleep 4;; *) sleep 0.05;; esac
  echo "E $ANIMAWORKS_CALL_ID $me" >> "$log"
  echo "{\"type\":\"result\",\"result\":\"$ANIMAWORKS_CALL_ID\"}";;
needs_key)
  echo "$req" | sed -E 's/.*"auth":"([^"]*)".*/\1/' > "$root/$ANIMAWORKS_CALL_ID.auth"
  echo '{"type":"result","result":"ok"}';;
pic)
  kb=$(echo "$req" | sed -nE 's/.*"kb":([0-9]+).*/\1/p')
  data=PNG_B64
  [ -n "$kb" ] && data=$(head -c $((kb * 1024)) /dev/zero | base64 -w0)
  printf '{"type":"result","result":"a red dot","content":[{"type":"text","text":"a red dot"},{"type":"image","data":"%s","mimeType":"image/png"}]}\n' "$data";;
esac
"#;

/// Give the worker machine `to` the task key of `from` (made there first when missing), as an operator copies
/// `tasks.key` to each machine (docs/background-tasks.md): a row is run only with a MAC made with it.
pub fn share_task_key(from: &Path, to: &Path) {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let rel = "state/animaworks-tool/tasks.key";
    let src = from.join(rel);
    for p in [&src, &to.join(rel)] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(p.parent().unwrap())
            .unwrap();
    }
    if !src.exists() {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&src)
            .unwrap();
        std::io::Write::write_all(&mut f, crate::tasks_pg::random_hex().as_bytes()).unwrap();
    }
    if src != to.join(rel) && !to.join(rel).exists() {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(to.join(rel))
            .unwrap();
        std::io::Write::write_all(&mut f, &std::fs::read(&src).unwrap()).unwrap();
    }
}

fn random_hex() -> String {
    let mut b = [0u8; 32];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut b).unwrap();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Backend {
    Files,
    Postgres,
}

/// One world (tools, anima dirs) and, on Postgres, its database and workers.
struct Env {
    w: World,
    backend: Backend,
    url: Option<String>,
    workers: Vec<(Child, PathBuf)>,
    settings: Value,
}

impl Drop for Env {
    fn drop(&mut self) {
        for (c, _) in &mut self.workers {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Env {
    /// A world on `backend`; on Postgres a new database with the schema applied (by the operator command).
    fn new(backend: Backend, settings: Value) -> Env {
        let e = Env::unmigrated(backend, settings);
        if backend == Backend::Postgres {
            let o = e.run(&["jobs", "migrate"]);
            assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
        }
        e
    }

    fn unmigrated(backend: Backend, settings: Value) -> Env {
        let w = World::new();
        w.tool(
            &w.common(),
            "bg",
            &bash_tool(SCHEMAS, &BODY.replace("PNG_B64", PNG_B64)),
        );
        let url = (backend == Backend::Postgres).then(|| pg_cluster::shared().new_db());
        let env = Env {
            w,
            backend,
            url,
            workers: Vec::new(),
            settings,
        };
        env.write_settings(&env.w.data);
        env
    }

    fn animas(&self) -> PathBuf {
        self.w.tmp.path().join("animas")
    }

    fn write_settings(&self, data: &Path) {
        let mut s = self.settings.clone();
        if let Some(url) = &self.url {
            let mut tasks = json!({"backend": "postgres", "url": url, "lease_s": 6, "drain_s": 2, "poll_s": 1});
            if let Some(extra) = s.get("tasks").and_then(Value::as_object) {
                for (k, v) in extra {
                    tasks[k] = v.clone();
                }
            }
            s["tasks"] = tasks;
        } else if let Some(o) = s.as_object_mut() {
            o.remove("tasks");
        }
        // The test tools write their run records where a sandbox would refuse it: the sandbox is another test's.
        if s.get("sandbox").is_none() {
            s["sandbox"] = json!({"common": "off", "personal": "off"});
        }
        std::fs::write(data.join("animaworks-tool.json"), s.to_string()).unwrap();
    }

    /// A worker machine: its own data dir (settings and a copy of the common tools), the shared anima dirs.
    fn machine(&self, n: usize) -> PathBuf {
        let data = self.w.tmp.path().join(format!("machine{n}"));
        std::fs::create_dir_all(data.join("common_tools")).unwrap();
        for e in std::fs::read_dir(self.w.common()).unwrap().flatten() {
            std::fs::copy(e.path(), data.join("common_tools").join(e.file_name())).unwrap();
        }
        self.write_settings(&data);
        share_task_key(&self.w.data, &data);
        data
    }

    /// Start a worker on machine `n` (Postgres only); returns its index.
    fn start_worker(&mut self, n: usize, concurrency: usize) -> usize {
        let data = self.machine(n);
        self.start_worker_in(&data, concurrency, &[])
    }

    fn start_worker_in(&mut self, data: &Path, concurrency: usize, env: &[(&str, &str)]) -> usize {
        let log = data.join(format!("worker{}.log", self.workers.len()));
        let mut c = self.w.cmd();
        c.env("ANIMAWORKS_DATA_DIR", data).env_remove("ANIMAWORKS_ANIMA_DIR");
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c
            .args(["worker", "--concurrency", &concurrency.to_string(), "--animas-dir"])
            .arg(self.animas())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        self.workers.push((child, log));
        self.workers.len() - 1
    }

    fn worker_pid(&self, i: usize) -> i32 {
        self.workers[i].0.id() as i32
    }

    fn worker_log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.workers[i].1).unwrap_or_default()
    }

    fn all_worker_logs(&self) -> String {
        (0..self.workers.len())
            .map(|i| format!("--- worker {i}\n{}", self.worker_log(i)))
            .collect()
    }

    /// The store's ready to take tasks: on Postgres, one worker runs.
    fn ready(backend: Backend, settings: Value) -> Env {
        let mut e = Env::new(backend, settings);
        if backend == Backend::Postgres {
            e.start_worker(1, 4);
        }
        e
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        self.w.run(args)
    }

    fn run_as(&self, anima: &str, args: &[&str]) -> std::process::Output {
        let dir = self.animas().join(anima);
        std::fs::create_dir_all(dir.join("tools")).unwrap();
        self.w
            .cmd()
            .env("ANIMAWORKS_ANIMA_DIR", dir)
            .args(args)
            .output()
            .unwrap()
    }

    fn submit(&self, args: &[&str]) -> String {
        let mut a = vec!["submit"];
        a.extend_from_slice(args);
        let o = self.run(&a);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}{}\n{}",
            stdout(&o),
            stderr(&o),
            self.all_worker_logs()
        );
        json(&o)["task_id"].as_str().unwrap().to_owned()
    }

    /// The task as `jobs show` prints it, with `status` the finer word (`outcome`: on disk and on the wire,
    /// `status` keeps to AnimaWorks' words, as Task's own reader does).
    fn show(&self, id: &str) -> Value {
        let o = self.run(&["jobs", "show", id]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let mut t = json(&o);
        if let Some(out) = t.get("outcome").cloned().filter(Value::is_string) {
            t["status"] = out;
        }
        t
    }

    fn status_becomes(&self, id: &str, want: &str, secs: u64) -> Value {
        let mut last = Value::Null;
        let ok = eventually(secs, || {
            last = self.show(id);
            last["status"] == want
        });
        assert!(
            ok,
            "task {id} never became {want}: {last:#}\n{}",
            self.all_worker_logs()
        );
        last
    }
}

/// Run `body` on the file store and on Postgres.
fn both(body: impl Fn(Backend)) {
    body(Backend::Files);
    if let Some(why) = pg_cluster::unavailable() {
        awt_sys::skipped!("the Postgres half: {why}");
        return;
    }
    body(Backend::Postgres);
}

fn runs_log(e: &Env) -> Vec<(String, String, String)> {
    std::fs::read_to_string(e.animas().join("runs.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_owned(), w.next()?.to_owned(), w.next()?.to_owned()))
        })
        .collect()
}

/// The most runs of one anima that were ever between their start and end records at once. A run with no end
/// record was killed mid-way (its worker SIGKILLed or stopped): when it died is not in the log, so it is left out
/// rather than counted as running for ever after. Runs are paired per run, not per task: a task released or
/// rescued after a killed run runs again, and the killed run's start must not be paired with the next run's end
/// (which left it counted for ever after, and a later, legal third run looked like a fourth).
fn max_overlap(log: &[(String, String, String)]) -> HashMap<String, usize> {
    let mut paired = vec![false; log.len()];
    let mut open: HashMap<&str, usize> = HashMap::new();
    for (i, (ev, id, _)) in log.iter().enumerate() {
        if ev == "S" {
            open.insert(id.as_str(), i);
        } else if let Some(s) = open.remove(id.as_str()) {
            paired[s] = true;
            paired[i] = true;
        }
    }
    let mut now: HashMap<String, usize> = HashMap::new();
    let mut max: HashMap<String, usize> = HashMap::new();
    for ((ev, _, anima), _) in log.iter().zip(&paired).filter(|(_, p)| **p) {
        let n = now.entry(anima.clone()).or_default();
        if ev == "S" {
            *n += 1;
            let m = max.entry(anima.clone()).or_default();
            *m = (*m).max(*n);
        } else {
            *n = n.saturating_sub(1);
        }
    }
    max
}

#[test]
fn max_overlap_pairs_runs_not_tasks() {
    let ev = |e: &str, id: &str| (e.to_owned(), id.to_owned(), "a".to_owned());
    // t1's first run is killed (no end), t1 runs again later; t2..t4 run one after the other beside it.
    let log = [
        ev("S", "t1"),
        ev("S", "t2"),
        ev("E", "t2"),
        ev("S", "t3"),
        ev("S", "t1"),
        ev("E", "t1"),
        ev("E", "t3"),
        ev("S", "t4"),
        ev("E", "t4"),
    ];
    assert_eq!(max_overlap(&log)["a"], 2);
    // Three at once, properly paired, is three.
    let log = [
        ev("S", "x"),
        ev("S", "y"),
        ev("S", "z"),
        ev("E", "x"),
        ev("E", "y"),
        ev("E", "z"),
    ];
    assert_eq!(max_overlap(&log)["a"], 3);
}

fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|(st, _, _)| st != "Z")
}

// ---- the shared suite ---------------------------------------------------------------------------------------------

#[test]
fn suite_submit_wait_show_list() {
    both(|b| {
        let e = Env::ready(b, json!({}));
        let id = e.submit(&["bg", "quick", "--n", "7"]);
        let o = e.run(&["jobs", "wait", &id]);
        assert_eq!(o.status.code(), Some(0), "{b:?}: {}{}", stderr(&o), e.all_worker_logs());
        assert_eq!(json(&o), json!({"n": 7, "id": id}), "{b:?}");
        let t = e.show(&id);
        assert_eq!(t["status"], "completed", "{b:?}");
        assert_eq!(t["tool_name"], "bg:quick");
        assert_eq!(t["tool_tier"], "common");
        assert_eq!(t["progress"]["total"], 2.0);
        let l = json(&e.run(&["jobs", "list", "--json"]));
        assert_eq!(l.as_array().unwrap().len(), 1, "{b:?}: {l}");
        // Another anima sees none of it.
        let other = e.run_as("bob", &["jobs", "list", "--json"]);
        assert_eq!(json(&other), json!([]), "{b:?}");
    });
}

/// A task whose tool returns an image block reads back as the call would have answered: `jobs wait` describes it
/// (and saves it with --save-content), `jobs show`, `jobs list --json` and use-tool's `task show` describe it,
/// the official TypeScript SDK client gets it as an image block through tasks/result, `task_show` sends it as a
/// block; its base64 is printed by none of the command-line paths.
#[test]
fn suite_an_image_block_of_a_task_reads_back_as_a_call_gives_it() {
    both(|b| {
        let e = Env::ready(b, json!({}));
        let id = e.submit(&["bg", "pic"]);
        e.status_becomes(&id, "completed", 30);
        let o = e.run(&["jobs", "wait", &id]);
        assert_eq!(o.status.code(), Some(0), "{b:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), "a red dot\n[image/png, 70 B]\n", "{b:?}");
        let dir = e.w.tmp.path().join(format!("saved-{b:?}"));
        let o = e.run(&["jobs", "wait", &id, "--save-content", dir.to_str().unwrap()]);
        let out = stdout(&o);
        let path = out
            .lines()
            .find_map(|l| l.strip_prefix("[image/png, 70 B] saved to "))
            .unwrap_or_else(|| panic!("{b:?}: {out}"));
        assert!(std::fs::read(path).unwrap().starts_with(b"\x89PNG\r\n\x1a\n"), "{path}");

        let o = e.run(&["jobs", "show", &id, "--save-content", dir.to_str().unwrap()]);
        let saved = json(&o)["content"][1].as_str().unwrap_or_default().to_owned();
        let path = saved
            .strip_prefix("[image/png, 70 B] saved to ")
            .unwrap_or_else(|| panic!("{b:?}: {saved}"));
        assert!(std::fs::read(path).unwrap().starts_with(b"\x89PNG"), "{path}");
        let t = e.show(&id);
        assert_eq!(t["content"], json!(["a red dot", "[image/png, 70 B]"]), "{b:?}: {t}");
        assert_eq!(t["result"], "a red dot\n[image/png, 70 B]", "{b:?}");
        let listed = stdout(&e.run(&["jobs", "list", "--json"]));
        let asked = json!({"tool_name": "task", "action": "show", "args": {"task_id": id}});
        let used = stdout(&e.w.feed(&["use-tool"], &asked.to_string()));
        for (what, text) in [("show", t.to_string()), ("list", listed), ("use-tool", used.clone())] {
            assert!(!text.contains("iVBOR"), "{b:?}: {what} prints no base64: {text}");
        }
        assert!(used.contains("[image/png, 70 B]"), "{b:?}: {used}");

        let got = mcp_session(
            &e.w,
            &[
                json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task_show","arguments":{"task_id": id}}}),
            ],
        );
        let blocks = &got[&2]["result"]["content"];
        assert_eq!(
            blocks[1],
            json!({"type": "image", "data": PNG_B64, "mimeType": "image/png"}),
            "{b:?}: {blocks}"
        );
        if let Some(r) = ts_task_result(&e.w, &id) {
            assert_eq!(r["errors"], json!([]), "{b:?}: {r}");
            assert_eq!(
                r["result"]["content"],
                json!([{"type": "text", "text": "a red dot"}, {"type": "image", "data": PNG_B64, "mimeType": "image/png"}]),
                "{b:?}: {r}"
            );
        }
    });
}

/// tasks/result through the official MCP TypeScript SDK client (runner/tests/mcp_client_ts/task_result.mjs).
fn ts_task_result(w: &World, id: &str) -> Option<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client_ts");
    let has_node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_node
        || !dir
            .join("node_modules/@modelcontextprotocol/sdk/package.json")
            .is_file()
    {
        awt_sys::skipped!("node or the MCP TypeScript SDK is missing: (cd runner/tests/mcp_client_ts && npm ci)");
        return None;
    }
    let c = w.cmd();
    let mut node = std::process::Command::new("node");
    node.arg(dir.join("task_result.mjs"))
        .arg(c.get_program())
        .arg(id)
        .env_clear();
    for (k, v) in c.get_envs() {
        if let Some(v) = v {
            node.env(k, v);
        }
    }
    let o = node.output().unwrap();
    assert!(o.status.success(), "client failed:\n{}\n{}", stdout(&o), stderr(&o));
    Some(json(&o))
}

/// What a task keeps is bounded as a call's output is: an image past the 8 MiB a task keeps of content (the task
/// was given a larger output cap) is described in its place, and the record stays readable.
#[test]
fn files_an_image_past_what_a_task_keeps_is_described_in_its_place() {
    let e = Env::ready(Backend::Files, json!({}));
    let id = e.submit(&["bg", "pic", "--kb", "9216", "--max-output", "33554432"]);
    e.status_becomes(&id, "completed", 60);
    let o = e.run(&["jobs", "wait", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "a red dot\n[image/png, 9.0 MB] left out of the task: a task keeps at most 8.0 MB of content blocks; \
         the call run in the foreground gives it whole\n"
    );
    let file = e.w.anima.join(format!("state/background_tasks/{id}.json"));
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size < 64 * 1024, "the task file holds no image: {size} bytes");
}

#[test]
fn suite_limit_of_one_runs_in_submit_order_never_overlapping() {
    both(|b| {
        let e = Env::ready(b, json!({"max_running_tasks": 1}));
        let ids: Vec<String> = (0..5).map(|_| e.submit(&["bg", "once"])).collect();
        for id in &ids {
            e.status_becomes(id, "completed", 60);
        }
        let log = runs_log(&e);
        let starts: Vec<&String> = log.iter().filter(|l| l.0 == "S").map(|l| &l.1).collect();
        assert_eq!(starts, ids.iter().collect::<Vec<_>>(), "{b:?}");
        assert_eq!(max_overlap(&log)["alice"], 1, "{b:?}: {log:?}");
    });
}

#[test]
fn suite_cancel_running_and_pending() {
    both(|b| {
        let e = Env::ready(b, json!({"max_running_tasks": 1}));
        let running = e.submit(&["bg", "sleepy"]);
        e.status_becomes(&running, "running", 60);
        let pending = e.submit(&["bg", "quick", "--n", "1"]);
        let pidfile = e.animas().join(format!("{running}.pid"));
        // Why not the file's existence: the tool's shell makes the file before it writes the pid into it.
        let read_pid = || std::fs::read_to_string(&pidfile).ok()?.trim().parse::<i32>().ok();
        assert!(eventually(30, || read_pid().is_some()));
        let pid = read_pid().unwrap();
        let o = e.run(&["jobs", "cancel", &pending]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(e.show(&pending)["status"], "cancelled");
        let o = e.run(&["jobs", "cancel", &running]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let t = e.status_becomes(&running, "cancelled", 30);
        assert!(
            eventually(10, || !alive(pid)),
            "{b:?}: the tool {pid} outlived its cancel"
        );
        assert_eq!(t["error_code"], "cancelled");
        let o = e.run(&["jobs", "wait", &running]);
        assert_eq!(o.status.code(), Some(8), "{b:?}");
        // The pending one never ran.
        assert!(e.show(&pending)["started_at"].is_null(), "{b:?}");
    });
}

#[test]
fn suite_an_mcp_task_lives_in_the_store_across_sessions() {
    use crate::mcp::Mcp;
    both(|b| {
        let e = Env::ready(b, json!({}));
        let mut m = Mcp::start(e.w.cmd(), &[]);
        m.init("2025-11-25");
        m.ask("tools/list", json!({}));
        let c = m.ask(
            "tools/call",
            json!({"name": "bg_quick", "arguments": {"n": 5}, "task": {"ttl": 1}}),
        );
        let id = c["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{b:?}: {c}"))
            .to_owned();
        m.finish();
        let mut m = Mcp::start(e.w.cmd(), &[]);
        m.init("2025-11-25");
        let r = m.ask("tasks/result", json!({"taskId": id}));
        assert_eq!(
            r["result"]["structuredContent"],
            json!({"n": 5, "id": id}),
            "{b:?}: {r}\n{}",
            e.all_worker_logs()
        );
        let g = m.ask("tasks/get", json!({"taskId": id}));
        assert_eq!(g["result"]["status"], "completed", "{b:?}: {g}");
        assert_eq!(g["result"]["ttl"], 1, "{b:?}: {g}");
        let l = m.ask("tasks/list", json!({}));
        assert_eq!(l["result"]["tasks"][0]["taskId"], id.as_str(), "{b:?}: {l}");
        m.finish();
        let t = e.show(&id);
        assert_eq!(
            (t["source"].as_str(), t["ttl_ms"].as_u64()),
            (Some("mcp"), Some(1)),
            "{b:?}: {t}"
        );
        let o = e.run(&["jobs", "prune", "--older-than", "7d"]);
        assert_eq!(json(&o)["pruned"], json!([id]), "{b:?}");
    });
}

#[test]
fn suite_timeout_and_prune() {
    both(|b| {
        let e = Env::ready(b, json!({}));
        let id = e.submit(&["bg", "sleepy", "--timeout", "1"]);
        let t = e.status_becomes(&id, "timeout", 60);
        assert_eq!(t["error_code"], "timeout");
        let o = e.run(&["jobs", "prune", "--older-than", "0s"]);
        assert_eq!(json(&o)["pruned"], json!([id]), "{b:?}");
        assert_eq!(json(&e.run(&["jobs", "list", "--json"])), json!([]));
    });
}

#[test]
fn suite_refused_submit_stores_nothing() {
    both(|b| {
        let e = Env::ready(b, json!({}));
        let o = e.run(&["submit", "bg", "quick"]);
        assert_eq!(o.status.code(), Some(5), "{b:?}: {}", stdout(&o));
        let o = e.run(&["submit", "bg", "nope"]);
        assert_eq!(o.status.code(), Some(4), "{b:?}");
        assert_eq!(json(&e.run(&["jobs", "list", "--json"])), json!([]), "{b:?}");
    });
}

#[test]
fn suite_secrets_in_arguments_are_masked_in_the_store_and_resolved_by_the_worker() {
    both(|b| {
        let mut e = Env::new(b, json!({}));
        e.w.grant_credentials("bg", &["svc"]);
        if b == Backend::Postgres {
            let data = e.machine(1);
            // The worker's machine resolves the credential itself (its own environment here).
            e.start_worker_in(&data, 2, &[("SVC_TOKEN", "tok-worker-777")]);
        }
        let o =
            e.w.cmd()
                .env("SVC_TOKEN", "tok-submit-123")
                .args(["submit", "bg", "needs_key", "--auth", "Bearer tok-submit-123"])
                .output()
                .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let id = json(&o)["task_id"].as_str().unwrap().to_owned();
        let t = e.status_becomes(&id, "completed", 60);
        assert_eq!(t["tool_args"]["auth"], "Bearer ***", "{b:?}");
        let got = std::fs::read_to_string(e.animas().join(format!("{id}.auth"))).unwrap();
        match b {
            // The file store keeps the submitter's value (mode 0600, beside the task, deleted at the end).
            Backend::Files => assert_eq!(got.trim(), "Bearer tok-submit-123"),
            // Postgres never holds it: the worker put its own value back.
            Backend::Postgres => {
                assert_eq!(got.trim(), "Bearer tok-worker-777");
                let url = e.url.as_ref().unwrap();
                let n = scalar(url, "SELECT count(*) FROM awt_tasks WHERE record::text LIKE '%tok-%'");
                assert_eq!(n, "0", "a secret reached the database");
            }
        }
    });
}

/// The file store: a task whose worker died holds its slot until a task command marks it lost; the task waiting
/// behind it is then started by `jobs wait` once it has waited past the grace its submitter's worker is given.
#[test]
fn files_a_task_left_behind_by_a_killed_worker_is_started_by_jobs_wait() {
    let e = Env::ready(Backend::Files, json!({"max_running_tasks": 1}));
    let first = e.submit(&["bg", "sleepy"]);
    let t = e.status_becomes(&first, "running", 60);
    let worker = t["pid"].as_i64().unwrap() as i32;
    let behind = e.submit(&["bg", "quick", "--n", "5"]);
    let pidfile = e.animas().join(format!("{first}.pid"));
    // The file is made before the pid is written into it.
    let read_pid = || std::fs::read_to_string(&pidfile).ok()?.trim().parse::<i32>().ok();
    assert!(eventually(30, || read_pid().is_some()));
    let tool = read_pid().unwrap();
    // SAFETY: signals to processes this test started.
    unsafe {
        libc::kill(worker, libc::SIGKILL);
        libc::kill(tool, libc::SIGKILL);
    }
    assert!(eventually(10, || !alive(worker)));
    let o = e.run(&["jobs", "wait", &behind, "--timeout", "60"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(json(&o)["n"], 5);
    assert_eq!(e.show(&first)["status"], "lost");
}

// ---- Postgres only ------------------------------------------------------------------------------------------------

#[test]
fn pg_submit_without_the_schema_names_the_migrate_command_and_workers_migrate_once() {
    need_postgres!();
    let mut e = Env::unmigrated(Backend::Postgres, json!({}));
    let o = e.run(&["submit", "bg", "quick", "--n", "1"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("animaworks-tool jobs migrate"), "{}", stdout(&o));
    // Three workers starting at once on the empty database: the schema is applied exactly once.
    for n in 1..=3 {
        e.start_worker(n, 1);
    }
    let url = e.url.clone().unwrap();
    assert!(eventually(60, || pg_cluster::query(
        &url,
        "SELECT count(*) FROM awt_schema"
    )
    .is_ok_and(|r| r[0][0].as_deref() == Some(VERSION.to_string().as_str()))));
    let o = e.run(&["jobs", "migrate"]);
    assert_eq!(json(&o), json!({"applied": [], "version": VERSION}));
    let id = e.submit(&["bg", "quick", "--n", "2"]);
    e.status_becomes(&id, "completed", 60);
}

#[test]
fn pg_a_worker_with_another_version_of_the_tool_leaves_the_task_and_show_says_why() {
    need_postgres!();
    let mut e = Env::new(Backend::Postgres, json!({}));
    let other = e.machine(1);
    std::fs::write(
        other.join("common_tools/bg"),
        bash_tool(SCHEMAS, &format!("{BODY}\n# another version")),
    )
    .unwrap();
    e.start_worker_in(&other, 2, &[]);
    let id = e.submit(&["bg", "quick", "--n", "3"]);
    let mut t = Value::Null;
    assert!(
        eventually(60, || {
            t = e.show(&id);
            t["waiting"]
                .as_str()
                .is_some_and(|w| w.contains("another version of bg"))
        }),
        "{t:#}\n{}",
        e.all_worker_logs()
    );
    assert_eq!(t["status"], "pending");
    // A worker with the submitted version runs it.
    e.start_worker(2, 2);
    e.status_becomes(&id, "completed", 60);
}

#[test]
fn pg_the_per_anima_limit_holds_across_workers() {
    need_postgres!();
    let mut e = Env::new(Backend::Postgres, json!({"max_running_tasks": 2}));
    for n in 1..=3 {
        e.start_worker(n, 4);
    }
    let mut ids = Vec::new();
    for i in 0..24 {
        let anima = ["alice", "bob"][i % 2];
        let o = e.run_as(anima, &["submit", "bg", "once"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        ids.push((anima, json(&o)["task_id"].as_str().unwrap().to_owned()));
    }
    for (anima, id) in &ids {
        let ok = eventually(120, || {
            let o = e.run_as(anima, &["jobs", "show", id]);
            json(&o)["status"] == "completed"
        });
        assert!(ok, "{id}\n{}", e.all_worker_logs());
    }
    let m = max_overlap(&runs_log(&e));
    assert!(m["alice"] <= 2 && m["bob"] <= 2, "{m:?}");
}

#[test]
fn pg_a_claim_locks_no_row_of_an_anima_at_its_limit() {
    // A row lock gives the claim's transaction an id and its commit a WAL flush: a claim that can take nothing
    // (every pending row is of an anima at its limit) must be a read. A locked row keeps its locker in `xmax`.
    need_postgres!();
    let mut e = Env::new(
        Backend::Postgres,
        json!({"max_running_tasks": 1, "tasks": {"poll_s": 0.05, "lease_s": 60}}),
    );
    e.start_worker(1, 4);
    let first = e.submit(&["bg", "sleepy"]);
    e.status_becomes(&first, "running", 60);
    let url = e.url.clone().unwrap();
    let pending: Vec<String> = (0..3).map(|_| e.submit(&["bg", "sleepy"])).collect();
    // Each submit wakes the worker, and it polls every 50 ms: a claim after each, and some twenty more.
    std::thread::sleep(Duration::from_millis(1500));
    for id in &pending {
        assert_eq!(e.show(id)["status"], "pending", "{id}\n{}", e.all_worker_logs());
    }
    let locked = scalar(
        &url,
        "SELECT count(*) FROM awt_tasks WHERE status = 'pending' AND xmax::text <> '0'",
    );
    assert_eq!(
        locked, "0",
        "pending rows were locked by claims that could not take them"
    );
    // The limit still holds and the queue still moves: the running task ends, the next one is taken.
    let o = e.run(&["jobs", "cancel", &first]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    e.status_becomes(&pending[0], "running", 60);
    assert_eq!(e.show(&pending[1])["status"], "pending");
}

#[test]
fn pg_a_lease_renewal_or_a_cleared_notification_sends_no_task_notification() {
    // Schema 4: the trigger fires for the columns a listener acts on, not for `lease_until` or `notify_after`.
    // Notifications arrive in commit order, so the first to arrive after the three updates is the status change's.
    need_postgres!();
    let e = Env::new(Backend::Postgres, json!({}));
    let url = e.url.clone().unwrap();
    let quiet = e.submit(&["bg", "sleepy"]);
    let loud = e.submit(&["bg", "sleepy"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (client, rx) = rt.block_on(awt_tasks::pg::listen(&url, &["awt_task"])).unwrap();
    pg_cluster::query(
        &url,
        &format!(
            "UPDATE awt_tasks SET lease_until = now() + interval '1 minute' WHERE id = '{quiet}'; \
             UPDATE awt_tasks SET notify_after = now() WHERE id = '{quiet}'; \
             UPDATE awt_tasks SET notify_after = NULL WHERE id = '{quiet}'; \
             UPDATE awt_tasks SET cancel_requested = true WHERE id = '{loud}'"
        ),
    )
    .unwrap();
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("no notification at all");
    assert_eq!(first, loud, "a lease renewal or a notify_after change sent awt_task");
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "more than one notification"
    );
    drop(client);
}

#[test]
fn pg_jobs_list_of_unfinished_tasks_shows_them_in_submit_order() {
    // `--status pending,running` reads only the unfinished rows (the store's list_active).
    need_postgres!();
    let mut e = Env::new(Backend::Postgres, json!({"max_running_tasks": 1}));
    let done = e.submit(&["bg", "quick", "--n", "1"]);
    e.start_worker(1, 4);
    e.status_becomes(&done, "completed", 60);
    let running = e.submit(&["bg", "sleepy"]);
    e.status_becomes(&running, "running", 60);
    let waiting = e.submit(&["bg", "sleepy"]);
    let l = json(&e.run(&["jobs", "list", "--json", "--status", "pending,running"]));
    let ids: Vec<&str> = l
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [running.as_str(), waiting.as_str()], "{l}");
    let l = json(&e.run(&["jobs", "list", "--json", "--status", "pending"]));
    assert_eq!(l.as_array().unwrap().len(), 1, "{l}");
    assert_eq!(l[0]["task_id"], waiting.as_str());
    let other = json(&e.run_as("bob", &["jobs", "list", "--json", "--status", "pending,running"]));
    assert_eq!(other, json!([]));
    let o = e.run(&["jobs", "cancel", &running]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = e.run(&["jobs", "cancel", &waiting]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn pg_a_killed_worker_loses_its_task_or_runs_it_again_when_idempotent() {
    need_postgres!();
    let mut e = Env::new(Backend::Postgres, json!({}));
    let w = e.start_worker(1, 4);
    let once = e.submit(&["bg", "sleepy"]);
    let idem = e.submit(&["bg", "long_idem"]);
    e.status_becomes(&once, "running", 60);
    e.status_becomes(&idem, "running", 60);
    let pidfile = e.animas().join(format!("{once}.pid"));
    // The file is made before the pid is written into it.
    let read_pid = || std::fs::read_to_string(&pidfile).ok()?.trim().parse::<i32>().ok();
    assert!(eventually(30, || read_pid().is_some()));
    let tool = read_pid().unwrap();
    // SAFETY: kill of our own child.
    unsafe { libc::kill(e.worker_pid(w), libc::SIGKILL) };
    assert!(
        eventually(10, || !alive(tool)),
        "the killed worker's tool {tool} kept running"
    );
    e.start_worker(2, 4);
    let killed_at = Instant::now();
    let t = e.status_becomes(&once, "lost", 60);
    eprintln!("lost after {:?} (lease 6 s)", killed_at.elapsed());
    assert!(t["error"].as_str().unwrap().contains("not idempotent"), "{t:#}");
    let t = e.status_becomes(&idem, "completed", 60);
    assert_eq!(t["attempt"], 2, "{t:#}");
    let o = e.run(&["jobs", "wait", &once]);
    assert_eq!(o.status.code(), Some(11));
}

#[test]
fn pg_chaos_three_workers_one_killed_one_stopped() {
    need_postgres!();
    let mut e = Env::new(Backend::Postgres, json!({"max_running_tasks": 3}));
    for n in 1..=3 {
        e.start_worker(n, 4);
    }
    let animas = ["alice", "bob", "carol"];
    for a in animas {
        std::fs::create_dir_all(e.animas().join(a).join("tools")).unwrap();
    }
    // 500 tasks, half of them idempotent, submitted from four threads at once.
    let total = 500;
    let ids: Vec<(String, String, bool)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let e = &e;
                s.spawn(move || {
                    let mut out = Vec::new();
                    for i in (t..total).step_by(4) {
                        let anima = animas[i % 3];
                        let idem = i % 2 == 0;
                        let o = e.run_as(anima, &["submit", "bg", if idem { "idem" } else { "once" }]);
                        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
                        out.push((anima.to_owned(), json(&o)["task_id"].as_str().unwrap().to_owned(), idem));
                    }
                    out
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let url = e.url.clone().unwrap();
    let finals = || -> usize {
        scalar(
            &url,
            "SELECT count(*) FROM awt_tasks WHERE status NOT IN ('pending', 'running')",
        )
        .parse()
        .unwrap()
    };
    assert!(eventually(120, || finals() >= 100), "{}", e.all_worker_logs());
    let killed = e.worker_pid(0);
    // SAFETY: kill takes numbers; signals to our own children.
    unsafe { libc::kill(killed, libc::SIGKILL) };
    let killed_name = scalar(
        &url,
        &format!("SELECT coalesce(max(worker), '') FROM awt_tasks WHERE worker LIKE '%:{killed}:%'"),
    );
    assert!(eventually(120, || finals() >= 250), "{}", e.all_worker_logs());
    // SAFETY: as above.
    unsafe { libc::kill(e.worker_pid(1), libc::SIGTERM) };
    assert!(
        eventually(120, || finals() >= total),
        "{} of {total} ended\n{}",
        finals(),
        e.all_worker_logs()
    );
    let stopped = e.workers[1].0.wait().unwrap();
    assert_eq!(
        stopped.code(),
        Some(0),
        "the SIGTERMed worker exits cleanly\n{}",
        e.worker_log(1)
    );

    let rows = pg_cluster::query(&url, "SELECT id, status, attempt, coalesce(worker, '') FROM awt_tasks").unwrap();
    assert_eq!(rows.len(), total, "one row per task");
    let log = runs_log(&e);
    let mut starts: HashMap<&str, usize> = HashMap::new();
    let mut ends: HashMap<&str, usize> = HashMap::new();
    for (ev, id, _) in &log {
        *if ev == "S" { &mut starts } else { &mut ends }
            .entry(id.as_str())
            .or_default() += 1;
    }
    let idem: HashMap<&str, bool> = ids.iter().map(|(_, id, i)| (id.as_str(), *i)).collect();
    let mut by_status: HashMap<String, usize> = HashMap::new();
    for r in &rows {
        let (id, status, worker) = (
            r[0].as_deref().unwrap(),
            r[1].as_deref().unwrap(),
            r[3].as_deref().unwrap(),
        );
        *by_status.entry(status.to_owned()).or_default() += 1;
        let ran = starts.get(id).copied().unwrap_or(0);
        match status {
            "completed" => assert!(
                ends.get(id).copied().unwrap_or(0) >= 1,
                "{id} completed without an end record"
            ),
            "lost" => {
                assert!(
                    !idem[id] || r[2].as_deref() == Some("3"),
                    "{id}: an idempotent task lost before its attempts ran out"
                );
                assert_eq!(worker, killed_name, "{id} lost, but not on the killed worker");
            }
            "cancelled" => assert!(
                !idem[id],
                "{id}: an idempotent task is released on SIGTERM, not cancelled"
            ),
            other => panic!("{id} ended {other}"),
        }
        if !idem[id] {
            assert!(ran <= 1, "{id} is not idempotent and ran {ran} times");
        }
    }
    let m = max_overlap(&log);
    for a in animas {
        assert!(m.get(a).copied().unwrap_or(0) <= 3, "{a} ran {} at once: {m:?}", m[a]);
    }
    eprintln!("chaos: {by_status:?}, max per anima {m:?}");
    // The notifications were written, once per task, wherever it ended. A worker writes one just after the row's
    // final state is committed, so the last few may still be on their way when the count above was reached.
    // Counted as AnimaWorks reads them, `<task id>.md`: a worker killed while it wrote one leaves its temporary
    // file beside them, which no reader takes for a notification.
    let names = || -> Vec<String> {
        animas
            .iter()
            .flat_map(|a| {
                std::fs::read_dir(e.animas().join(a).join("state/background_notifications"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|d| d.file_name().to_string_lossy().into_owned())
            })
            .collect()
    };
    let notes = || names().iter().filter(|n| n.ends_with(".md")).count();
    eventually(30, || notes() >= total);
    let other: Vec<String> = names().into_iter().filter(|n| !n.ends_with(".md")).collect();
    if !other.is_empty() {
        eprintln!("chaos: besides the notifications: {other:?}");
    }
    // Only what write_atomic's temporary files are named (tempfile's `.tmp` prefix), nothing else.
    assert!(other.iter().all(|n| n.starts_with(".tmp")), "{other:?}");
    assert_eq!(notes(), total);
}

/// A worker killed between committing a task's final row and writing its notification file used to lose the file
/// for good: the row now owes it (`notify_after`) until it is written, and another worker writes it.
#[test]
fn pg_a_notification_owed_by_a_killed_worker_is_written_by_another() {
    need_postgres!();
    let mut e = Env::new(Backend::Postgres, json!({}));
    let first = e.start_worker(1, 4);
    let o = e.run_as("dora", &["submit", "bg", "quick", "--n", "3"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let note = e
        .animas()
        .join("dora/state/background_notifications")
        .join(format!("{id}.md"));
    assert!(eventually(60, || note.exists()), "{}", e.all_worker_logs());
    let url = e.url.clone().unwrap();
    let owed = |id: &str| {
        scalar(
            &url,
            &format!("SELECT count(*) FROM awt_tasks WHERE id = '{id}' AND notify_after IS NOT NULL"),
        )
    };
    assert!(
        eventually(30, || owed(&id) == "0"),
        "the written notification is still owed\n{}",
        e.all_worker_logs()
    );
    // The state a kill right after the commit leaves: the row final and owing its file, the file not written.
    // SAFETY: kill of our own child.
    unsafe { libc::kill(e.worker_pid(first), libc::SIGKILL) };
    std::fs::remove_file(&note).unwrap();
    pg_cluster::query(
        &url,
        &format!("UPDATE awt_tasks SET notify_after = now() - interval '1 second' WHERE id = '{id}'"),
    )
    .unwrap();
    e.start_worker(2, 4);
    assert!(
        eventually(60, || note.exists()),
        "no worker wrote the owed notification\n{}",
        e.all_worker_logs()
    );
    assert!(std::fs::read_to_string(&note).unwrap().contains(&id));
    assert!(eventually(30, || owed(&id) == "0"), "{}", e.all_worker_logs());
}

#[test]
fn pg_postgres_restarted_mid_run_loses_nothing_and_runs_nothing_twice() {
    need_postgres!();
    let cluster = pg_cluster::Cluster::start_new(false);
    let url = cluster.new_db();
    let mut e = Env::new(Backend::Files, json!({}));
    e.backend = Backend::Postgres;
    e.url = Some(url.clone());
    e.settings = json!({"tasks": {"lease_s": 20}});
    e.write_settings(&e.w.data.clone());
    assert_eq!(json(&e.run(&["jobs", "migrate"]))["version"], VERSION);
    e.start_worker(1, 4);
    e.start_worker(2, 4);
    let ids: Vec<String> = (0..8)
        .map(|i| e.submit(&["bg", if i % 2 == 0 { "long_once" } else { "once" }]))
        .collect();
    assert!(eventually(60, || runs_log(&e).iter().filter(|l| l.0 == "S").count() >= 4));
    cluster.stop();
    std::thread::sleep(Duration::from_millis(500));
    cluster.start(false);
    for id in &ids {
        e.status_becomes(id, "completed", 120);
    }
    let log = runs_log(&e);
    for id in &ids {
        assert_eq!(
            log.iter().filter(|l| l.0 == "S" && &l.1 == id).count(),
            1,
            "{id} ran twice\n{}",
            e.all_worker_logs()
        );
    }
}

#[test]
fn pg_a_paused_worker_never_reports_over_the_rescuer() {
    need_postgres!();
    let mut e = Env::new(Backend::Postgres, json!({"tasks": {"lease_s": 4}}));
    let w = e.start_worker(1, 2);
    let id = e.submit(&["bg", "long_idem"]);
    assert!(eventually(60, || runs_log(&e).iter().any(|l| l.1 == id)));
    let pid = e.worker_pid(w);
    // SAFETY: signals to our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let first = scalar(
        e.url.as_ref().unwrap(),
        &format!("SELECT worker FROM awt_tasks WHERE id = '{id}'"),
    );
    e.start_worker(2, 2);
    let t = e.status_becomes(&id, "completed", 90);
    assert_ne!(t["worker"].as_str().unwrap(), first, "{t:#}");
    // SAFETY: kill takes numbers; the pid is the worker this test started.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    // The paused worker is gone (its watchdog killed it and the guardian its tool) or, if it ever wakes, finds its
    // lease taken: either way the rescuer's outcome stands and the paused run never finished.
    std::thread::sleep(Duration::from_secs(2));
    let after = e.show(&id);
    assert_eq!(after["worker"], t["worker"]);
    assert_eq!(after["completed_at"], t["completed_at"]);
    let log = runs_log(&e);
    assert_eq!(
        log.iter().filter(|l| l.0 == "E" && l.1 == id).count(),
        1,
        "{log:?}\n{}",
        e.all_worker_logs()
    );
    assert_eq!(t["attempt"], 2);
    assert!(!alive(pid), "the paused worker should have been killed by its watchdog");
    assert!(e.worker_log(w).contains("watchdog"), "{}", e.worker_log(w));
}

#[test]
fn pg_a_task_cancelled_while_its_worker_is_lost_is_not_run_again() {
    need_postgres!();
    let mut e = Env::new(Backend::Postgres, json!({}));
    let w = e.start_worker(1, 2);
    let id = e.submit(&["bg", "long_idem"]);
    assert!(eventually(60, || runs_log(&e).iter().any(|l| l.1 == id)));
    // SAFETY: signal to our own child.
    unsafe { libc::kill(e.worker_pid(w), libc::SIGKILL) };
    e.start_worker(2, 2);
    let o = e.run(&["jobs", "cancel", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = e.status_becomes(&id, "cancelled", 60);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(e.show(&id)["status"], "cancelled", "{t:#}");
    let log = runs_log(&e);
    assert_eq!(log.iter().filter(|l| l.0 == "S" && l.1 == id).count(), 1, "{log:?}");
}

#[test]
fn pg_without_its_watchdog_a_resumed_worker_finds_its_lease_taken_and_drops_its_result() {
    need_postgres!();
    let mut e = Env::new(Backend::Postgres, json!({"tasks": {"lease_s": 3, "watchdog": false}}));
    let w = e.start_worker(1, 2);
    let id = e.submit(&["bg", "long_idem"]);
    assert!(eventually(60, || runs_log(&e).iter().any(|l| l.1 == id)));
    let pid = e.worker_pid(w);
    // SAFETY: signals to our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    e.start_worker(2, 2);
    let t = e.status_becomes(&id, "completed", 90);
    assert_eq!(t["attempt"], 2, "{t:#}");
    // SAFETY: kill takes numbers; the pid is the worker this test started.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(
        eventually(30, || e.worker_log(w).contains("no longer held by this worker")
            || e.worker_log(w).contains("lost its lease")),
        "{}",
        e.all_worker_logs()
    );
    let after = e.show(&id);
    assert_eq!(after["worker"], t["worker"]);
    assert_eq!(after["completed_at"], t["completed_at"]);
    assert_eq!(after["result"], t["result"]);
}

/// Issue 19 item 7: a row a tool inserted into the task database (here, a signed row copied with another anima,
/// and one with no MAC at all) is never run: it is moved to `awt_tasks_refused` with the reason, and the anima it
/// claims has the refusal in its audit log. Before, the worker ran it as that anima.
#[test]
fn pg_a_forged_task_row_is_moved_aside_and_never_run() {
    need_postgres!();
    let e = Env::ready(Backend::Postgres, json!({}));
    std::fs::create_dir_all(e.animas().join("bob/tools")).unwrap();
    let id = e.submit(&["bg", "once"]);
    e.status_becomes(&id, "completed", 60);
    let url = e.url.clone().unwrap();
    let forge = |new: &str, record: &str| {
        pg_cluster::query(
            &url,
            &format!(
                "INSERT INTO awt_tasks (id, anima, status, created_at, tool, tier, tool_sha256, idempotent, record) \
                 SELECT '{new}', 'bob', 'pending', created_at, tool, tier, tool_sha256, idempotent, {record} \
                 FROM awt_tasks WHERE id = '{id}'"
            ),
        )
        .unwrap();
    };
    let as_bob = |new: &str| {
        format!(
            "jsonb_set(jsonb_set(jsonb_set(record, '{{anima_name}}', '\"bob\"'), '{{task_id}}', '\"{new}\"'), \
             '{{status}}', '\"pending\"') - 'outcome' - 'result' - 'completed_at'"
        )
    };
    forge("ffff00000001", &as_bob("ffff00000001"));
    forge("ffff00000002", &format!("({}) - 'mac'", as_bob("ffff00000002")));
    assert!(
        eventually(60, || scalar(&url, "SELECT count(*) FROM awt_tasks_refused") == "2"),
        "{}",
        e.all_worker_logs()
    );
    // Submitted afterwards, a real task of bob's runs: the forged ones did not stop the queue.
    let real = String::from_utf8_lossy(&e.run_as("bob", &["submit", "bg", "once"]).stdout).into_owned();
    let real = serde_json::from_str::<Value>(&real).unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(eventually(60, || runs_log(&e)
        .iter()
        .any(|(ev, i, _)| ev == "E" && *i == real)));
    let ran: Vec<_> = runs_log(&e)
        .into_iter()
        .filter(|(_, i, _)| i.starts_with("ffff"))
        .collect();
    assert!(ran.is_empty(), "a forged task ran: {ran:?}");
    assert_eq!(
        scalar(&url, "SELECT count(*) FROM awt_tasks WHERE id LIKE 'ffff%'"),
        "0"
    );
    let reasons = scalar(
        &url,
        "SELECT string_agg(reason, ' | ' ORDER BY id) FROM awt_tasks_refused",
    );
    assert!(
        reasons.contains("does not match") && reasons.contains("no MAC"),
        "{reasons}"
    );
    let audit = std::fs::read_to_string(e.animas().join("bob/state/tool_audit.jsonl")).unwrap_or_default();
    assert!(
        audit.contains("task_refused") && audit.contains("ffff00000001"),
        "{audit}"
    );
}

/// The same on the file store: a task file not written by the runner's submit (here a signed one with its
/// arguments changed) is moved aside (`<id>.json.refused`) and never run.
#[test]
fn a_forged_task_file_is_moved_aside_and_never_run() {
    let e = Env::ready(Backend::Files, json!({}));
    let id = e.submit(&["bg", "quick", "--n", "1"]);
    e.status_becomes(&id, "completed", 60);
    let dir = e.w.anima.join("state/background_tasks");
    let mut t: Value = serde_json::from_slice(&std::fs::read(dir.join(format!("{id}.json"))).unwrap()).unwrap();
    let forged = "eeee00000001";
    t["task_id"] = json!(forged);
    t["tool_name"] = json!("bg:once");
    t["action"] = json!("once");
    t["status"] = json!("pending");
    t["created_at"] = json!(1.0);
    for k in [
        "outcome",
        "result",
        "result_value",
        "completed_at",
        "pid",
        "pid_start_time",
        "boot_id",
        "worker_token",
    ] {
        t.as_object_mut().unwrap().remove(k);
    }
    std::fs::write(dir.join(format!("{forged}.json")), t.to_string()).unwrap();
    let next = e.submit(&["bg", "quick", "--n", "2"]);
    e.status_becomes(&next, "completed", 60);
    assert!(dir.join(format!("{forged}.json.refused")).exists());
    assert!(!dir.join(format!("{forged}.json")).exists());
    assert!(runs_log(&e).iter().all(|(_, i, _)| i != forged), "the forged task ran");
    let audit = std::fs::read_to_string(e.w.anima.join("state/tool_audit.jsonl")).unwrap_or_default();
    assert!(audit.contains("task_refused") && audit.contains(forged), "{audit}");
}

// ---------------------------------------------------------------- the database URL

/// A malformed task database URL was not an error naming where it came from, and could show its password
/// (issue 19 item 9).
#[test]
fn a_malformed_task_database_url_is_an_error_naming_where_it_came_from() {
    let w = echo_world();
    w.settings(r#"{"tasks":{"backend":"postgres","url":"postgres://u:hunter22@h:notaport/db"}}"#);
    for args in [&["jobs", "list"][..], &["jobs", "migrate"], &["jobs", "show", "t-1"]] {
        let o = w.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("\"tasks\".\"url\"") && e.contains("notaport") && !e.contains("hunter22"),
            "{e}"
        );
    }
    w.settings(r#"{"tasks":{"backend":"postgres"}}"#);
    let o = w
        .cmd()
        .args(["jobs", "list"])
        .env("ANIMAWORKS_TOOL_TASKS_URL", "host=x port=abc password=zz")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("$ANIMAWORKS_TOOL_TASKS_URL") && !stderr(&o).contains("zz"),
        "{}",
        stderr(&o)
    );
}

/// A row whose anima is not its signed record's (bob's signed task, its row moved to alice): before, a worker ran
/// it all the same (as alice's row: under alice's limit, by a worker serving alice). A task runs only as its own
/// anima, whatever the row says (hostile tools, fourth round, item 1).
#[test]
fn pg_a_row_carrying_another_animas_signed_task_is_never_run() {
    need_postgres!();
    let e = Env::ready(Backend::Postgres, json!({}));
    let url = e.url.clone().unwrap();
    let o = e.run_as("bob", &["submit", "bg", "once"]);
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let ran = |e: &Env| runs_log(e).iter().filter(|(ev, i, _)| ev == "S" && *i == id).count();
    let status = || scalar(&url, &format!("SELECT status FROM awt_tasks WHERE id = '{id}'"));
    assert!(
        eventually(60, || ran(&e) == 1 && status() == "completed"),
        "{}",
        e.all_worker_logs()
    );
    pg_cluster::query(
        &url,
        &format!(
            "UPDATE awt_tasks SET anima = 'alice', status = 'pending', \
             record = jsonb_set(record - 'outcome' - 'result' - 'completed_at', '{{status}}', '\"pending\"') \
             WHERE id = '{id}'"
        ),
    )
    .unwrap();
    let note = || {
        scalar(
            &url,
            &format!("SELECT coalesce(record->>'waiting', '') FROM awt_tasks WHERE id = '{id}'"),
        )
    };
    assert!(
        eventually(60, || note().contains("never run")),
        "{}\n{}",
        note(),
        e.all_worker_logs()
    );
    assert_eq!(ran(&e), 1, "bob's task ran again from alice's row");
}
