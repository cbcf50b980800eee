//! Persistent workers (protocol.md §9) under `Runner::run` with a pool: reuse, isolation of concurrent calls,
//! crashes, deadlines, idle stop, changed files, and the SDKs' `--serve`.

mod support;

use awt_core::pool::{PoolConfig, WorkerPool};
use awt_core::stream::{Cancel, Observer, Quiet};
use awt_core::{CallError, CallOptions, Detail, ErrorCode, Runner};
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use support::*;

/// A persistent bash tool: `echo` reports its pid and args; `crash` exits mid-call; `hang` sleeps in a child;
/// `stray` answers with another call's id; `big` answers with 500 bytes.
const PTOOL: &str = r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol":1,"events":true,"persistent":true,"actions":[{"name":"echo"},{"name":"crash"},{"name":"hang"},{"name":"stray"},{"name":"big"}]}
JSON
exit 0; fi
re_id='"call_id":"([^"]*)"'; re_name='^\{"name":"([^"]*)"'; re_args='"args":(\{[^}]*\}),"context"'
handle() {
  [[ $1 =~ $re_id ]] && id=${BASH_REMATCH[1]}
  [[ $1 =~ $re_name ]] && name=${BASH_REMATCH[1]}
  [[ $1 =~ $re_args ]] && args=${BASH_REMATCH[1]}
  case "$name" in
    *_echo) echo "{\"type\":\"progress\",\"progress\":1,\"call_id\":\"$id\"}"
            echo "{\"type\":\"result\",\"result\":{\"pid\":$$,\"args\":$args},\"call_id\":\"$id\"}";;
    *_crash) echo "dying on purpose" >&2; exit 3;;
    *_hang) sleep 300;;
    *_big) printf '{"type":"result","result":"%s","call_id":"%s"}\n' "$(printf 'x%.0s' {1..500})" "$id";;
    *_stray) echo "{\"type\":\"result\",\"result\":1,\"call_id\":\"someone-else\"}";;
  esac
}
if [ "$1" = --serve ]; then while IFS= read -r req; do handle "$req"; done; else IFS= read -r req; handle "$req"; fi
"#;

fn pooled(w: &World, config: PoolConfig) -> Runner {
    let mut r = w.runner();
    r.pool = Some(Arc::new(WorkerPool::new(config)));
    r
}

fn cfg(per_tool: usize, idle_s: u64) -> PoolConfig {
    PoolConfig {
        per_tool,
        idle: Duration::from_secs(idle_s),
    }
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

async fn call(r: &Runner, tool: &str, action: &str, a: Value) -> Result<Value, CallError> {
    r.call(
        tool,
        action,
        args(a),
        &CallOptions::default(),
        &mut Quiet,
        Cancel::never(),
    )
    .await
}

async fn echo_pid(r: &Runner, n: i64) -> i32 {
    let v = call(r, "ptool", "echo", json!({"n": n}))
        .await
        .unwrap_or_else(|e| panic!("{e}: {:?}", e.details));
    assert_eq!(v["args"]["n"], n, "{v}");
    v["pid"].as_i64().unwrap() as i32
}

fn gone(pid: i32) -> bool {
    group_members(pid).is_empty()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_calls_reuse_one_worker_in_its_own_group() {
    let w = World::new();
    w.tool(&w.common(), "ptool", PTOOL);
    let r = pooled(&w, cfg(4, 60));
    let a = echo_pid(&r, 1).await;
    let b = echo_pid(&r, 2).await;
    assert_eq!(a, b, "the second call must reuse the first call's worker");
    assert_eq!(
        group_members(a),
        vec![a],
        "the worker leads its own process group and waits for the next call"
    );
    let path = w.common().join("ptool");
    assert_eq!(r.pool.as_ref().unwrap().idle_pids(&path), vec![a as u32]);
    // One-shot runners (no pool) still spawn per call.
    let one_shot = w.runner();
    let c = echo_pid(&one_shot, 3).await;
    assert_ne!(c, a);
    assert!(eventually(10, || gone(c)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_never_mix_and_stay_under_the_limit() {
    let w = World::new();
    w.tool(&w.common(), "ptool", PTOOL);
    let r = pooled(&w, cfg(3, 60));
    let mut tasks = Vec::new();
    for i in 0..20i64 {
        let r = r.clone();
        tasks.push(tokio::spawn(async move {
            (i, call(&r, "ptool", "echo", json!({"n": i})).await)
        }));
    }
    let mut pids = std::collections::BTreeSet::new();
    for t in tasks {
        let (i, out) = t.await.unwrap();
        let v = out.unwrap_or_else(|e| panic!("call {i}: {e}"));
        assert_eq!(v["args"]["n"], i, "call {i} got another call's answer: {v}");
        pids.insert(v["pid"].as_i64().unwrap());
    }
    assert!(!pids.is_empty() && pids.len() <= 3, "workers used: {pids:?} (limit 3)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_fails_its_call_and_the_next_call_gets_a_new_worker() {
    let w = World::new();
    w.tool(&w.common(), "ptool", PTOOL);
    let r = pooled(&w, cfg(1, 60));
    let first = echo_pid(&r, 1).await;
    let e = call(&r, "ptool", "crash", json!({})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Crashed, "{e}");
    assert_eq!(e.detail(Detail::ExitCode), Some(&json!(3)), "{e}: {:?}", e.details);
    let tail = e.detail(Detail::StderrTail).and_then(Value::as_str).unwrap_or_default();
    assert!(tail.contains("dying on purpose"), "stderr tail: {tail:?}");
    assert!(gone(first));
    let next = echo_pid(&r, 2).await;
    assert_ne!(next, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_ends_the_workers_group_and_the_next_call_is_fresh() {
    let w = World::new();
    w.tool(&w.common(), "ptool", PTOOL);
    let r = pooled(&w, cfg(1, 60));
    let first = echo_pid(&r, 1).await;
    let opts = CallOptions {
        timeout: Some(Duration::from_millis(500)),
        ..Default::default()
    };
    let e = r
        .call("ptool", "hang", Map::new(), &opts, &mut Quiet, Cancel::never())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::Timeout, "{e}");
    assert!(
        gone(first),
        "the worker's group is still there: {:?}",
        group_members(first)
    );
    let next = echo_pid(&r, 2).await;
    assert_ne!(next, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_ends_its_worker() {
    let w = World::new();
    w.tool(&w.common(), "ptool", PTOOL);
    let r = pooled(&w, cfg(1, 60));
    let first = echo_pid(&r, 1).await;
    let (tx, cancel) = Cancel::new();
    let r2 = r.clone();
    let task = tokio::spawn(async move {
        r2.call("ptool", "hang", Map::new(), &CallOptions::default(), &mut Quiet, cancel)
            .await
    });
    // The call is in flight once the worker is out of the pool.
    let path = w.common().join("ptool");
    let pool = r.pool.clone().unwrap();
    assert!(eventually(10, || pool.idle_pids(&path).is_empty()));
    tx.send(true).unwrap();
    let e = task.await.unwrap().unwrap_err();
    assert_eq!(e.code, ErrorCode::Cancelled, "{e}");
    assert!(gone(first));
    assert_ne!(echo_pid(&r, 2).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_of_another_call_is_a_protocol_error_and_retires_the_worker() {
    let w = World::new();
    w.tool(&w.common(), "ptool", PTOOL);
    let r = pooled(&w, cfg(1, 60));
    let first = echo_pid(&r, 1).await;
    let e = call(&r, "ptool", "stray", json!({})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::BadOutput, "{e}");
    assert!(e.message.contains("someone-else"), "{e}");
    assert!(gone(first));
    assert_ne!(echo_pid(&r, 2).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_cap_holds_for_a_worker() {
    let w = World::new();
    w.tool(&w.common(), "ptool", PTOOL);
    let r = pooled(&w, cfg(1, 60));
    let first = echo_pid(&r, 1).await;
    let opts = CallOptions {
        max_output: Some(100),
        ..Default::default()
    };
    let e = r
        .call("ptool", "big", Map::new(), &opts, &mut Quiet, Cancel::never())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::OutputCapped, "{e}");
    let path = e.detail(Detail::Path).and_then(Value::as_str).unwrap().to_owned();
    let kept = std::fs::read_to_string(&path).unwrap();
    assert!(kept.contains(&"x".repeat(500)), "{kept}");
    // The worker may be out of step after a capped line: it is not reused.
    assert!(gone(first));
    assert_ne!(echo_pid(&r, 2).await, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_stops() {
    let w = World::new();
    w.tool(&w.common(), "ptool", PTOOL);
    let r = pooled(&w, cfg(1, 1));
    let pid = echo_pid(&r, 1).await;
    assert!(eventually(15, || gone(pid)), "idle worker {pid} is still running");
    assert!(r.pool.as_ref().unwrap().idle_pids(&w.common().join("ptool")).is_empty());
    assert_ne!(echo_pid(&r, 2).await, pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_file_replaces_its_worker() {
    let w = World::new();
    let path = w.tool(&w.common(), "ptool", PTOOL);
    let r = pooled(&w, cfg(2, 60));
    let old = echo_pid(&r, 1).await;
    w.tool(&w.common(), "ptool", &format!("{PTOOL}# changed\n"));
    let new = echo_pid(&r, 2).await;
    assert_ne!(new, old);
    assert!(
        eventually(15, || gone(old)),
        "the old version's worker {old} is still running"
    );
    assert_eq!(r.pool.as_ref().unwrap().idle_pids(&path), vec![new as u32]);
}

#[test]
fn pool_settings_come_from_the_runner_config() {
    let w = World::new();
    let load = |d: &std::path::Path| {
        awt_core::settings::Settings::load(d)
            .map(|s| PoolConfig::from_settings(&s))
            .map_err(|e| e.to_string())
    };
    assert_eq!(load(&w.data).unwrap(), PoolConfig::default());
    assert_eq!(
        PoolConfig::default(),
        PoolConfig {
            idle: Duration::from_secs(10),
            per_tool: 4
        }
    );
    let file = w.data.join("animaworks-tool.json");
    std::fs::write(
        &file,
        r#"{"worker_idle_s": 1.5, "workers_per_tool": 2, "env_passthrough": []}"#,
    )
    .unwrap();
    assert_eq!(
        load(&w.data).unwrap(),
        PoolConfig {
            idle: Duration::from_millis(1500),
            per_tool: 2
        }
    );
    std::fs::write(&file, r#"{"workers_per_tool": 0}"#).unwrap();
    let e = load(&w.data).unwrap_err();
    assert!(
        e.contains("workers_per_tool") && e.contains("animaworks-tool.json"),
        "{e}"
    );
    std::fs::write(&file, r#"{"worker_idle_s": "ten"}"#).unwrap();
    assert!(load(&w.data).unwrap_err().contains("worker_idle_s"));
}

const LEGACY_PID: &str = r#""""Reports the pid of the process that runs it."""
import os


def get_tool_schemas():
    return [{"name": "legacy_pid_pid", "description": "The pid.", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}]


def dispatch(name, args):
    return {"pid": os.getpid(), "n": args.get("n")}
"#;

fn python_available() -> bool {
    std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_modules_run_in_a_shim_worker() {
    if !python_available() {
        awt_sys::skipped!("python3 is not installed");
        return;
    }
    let w = World::new();
    w.tool(&w.common(), "legacy_pid.py", LEGACY_PID);
    let r = pooled(&w, cfg(2, 60));
    let mut pids = Vec::new();
    for n in 0..3 {
        let v = call(&r, "legacy_pid", "pid", json!({"n": n}))
            .await
            .unwrap_or_else(|e| panic!("{e}: {:?}", e.details));
        let v: Value = serde_json::from_str(v.as_str().unwrap()).unwrap();
        assert_eq!(v["n"], n);
        pids.push(v["pid"].as_i64().unwrap());
    }
    assert!(pids.iter().all(|p| *p == pids[0]), "pids: {pids:?}");

    // The example module of the repository, unchanged.
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/legacy-notes/legacy_notes.py");
    std::fs::copy(src, w.common().join("legacy_notes.py")).unwrap();
    call(&r, "legacy_notes", "add", json!({"title": "first"}))
        .await
        .unwrap();
    call(&r, "legacy_notes", "add", json!({"title": "second"}))
        .await
        .unwrap();
    let listed = call(&r, "legacy_notes", "list", json!({})).await.unwrap();
    let text = listed.as_str().unwrap();
    assert!(text.contains("first") && text.contains("second"), "{text}");
    assert_eq!(
        r.pool
            .as_ref()
            .unwrap()
            .idle_pids(&w.common().join("legacy_notes.py"))
            .len(),
        1
    );
}

#[derive(Default)]
struct Progress(Vec<f64>);
impl Observer for Progress {
    fn event(&mut self, e: &awt_protocol::Event, _raw: &[u8]) {
        if let awt_protocol::Event::Progress { progress, .. } = e {
            self.0.push(*progress);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_sdk_serves_as_a_worker() {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let bin = target.join("debug").join("rust-hello");
    if !bin.is_file() {
        awt_sys::skipped!("{} is missing (cargo build -p rust-hello)", bin.display());
        return;
    }
    let w = World::new();
    let dest = w.personal().join("rust-hello");
    std::fs::copy(&bin, &dest).unwrap();
    let r = pooled(&w, cfg(2, 60));
    for who in ["Ada", "Bo"] {
        let mut obs = Progress::default();
        let v = r
            .call(
                "rust-hello",
                "greet",
                args(json!({"who": who, "times": 2})),
                &CallOptions::default(),
                &mut obs,
                Cancel::never(),
            )
            .await
            .unwrap_or_else(|e| panic!("{e}: {:?}", e.details));
        assert_eq!(v["greeting"], format!("Hello, {who}!\nHello, {who}!"));
        assert_eq!(obs.0, vec![0.0, 1.0, 2.0], "progress events reach the caller");
    }
    let idle = r.pool.as_ref().unwrap().idle_pids(&dest);
    assert_eq!(idle.len(), 1, "both calls used one worker: {idle:?}");
}

/// A persistent bash tool whose `who` action declares a credential; both actions report the pid and the token.
const STOOL: &str = r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol":1,"events":true,"persistent":true,"actions":[{"name":"who","profile":{"credentials":[{"name":"svc","env":"SVC_TOKEN"}]}},{"name":"plain"}]}
JSON
exit 0; fi
re_id='"call_id":"([^"]*)"'
while IFS= read -r req; do
  [[ $req =~ $re_id ]] && id=${BASH_REMATCH[1]}
  echo "{\"type\":\"result\",\"result\":{\"pid\":$$,\"token\":\"${SVC_TOKEN:-}\"},\"call_id\":\"$id\"}"
done
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_gets_the_tools_secrets_masked_and_a_changed_secret_gets_a_new_worker() {
    let w = World::new();
    w.tool(&w.common(), "stool", STOOL);
    w.grant_credentials("stool", &["svc"]);
    let config = w.data.join("config.json");
    std::fs::write(
        &config,
        r#"{"credentials": {"svc": {"api_key": "first-secret-value"}}}"#,
    )
    .unwrap();
    let r = pooled(&w, cfg(1, 60));
    // `plain` declares nothing, but its worker also serves `who`: it starts with the tool's secrets, masked.
    let a = call(&r, "stool", "plain", json!({})).await.unwrap();
    let b = call(&r, "stool", "who", json!({})).await.unwrap();
    assert_eq!(a["pid"], b["pid"]);
    for v in [&a, &b] {
        let token = v["token"].as_str().unwrap();
        assert!(
            !token.is_empty() && !token.contains("first-secret-value"),
            "the secret reached the caller: {v}"
        );
    }
    std::fs::write(
        &config,
        r#"{"credentials": {"svc": {"api_key": "second-secret-value"}}}"#,
    )
    .unwrap();
    let c = call(&r, "stool", "who", json!({})).await.unwrap();
    assert_ne!(
        c["pid"], a["pid"],
        "a changed secret must not reach a worker started with the old one"
    );
    assert!(!c["token"].as_str().unwrap().contains("second-secret-value"));
}
