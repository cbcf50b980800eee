//! issue 6 §5: a trivial legacy Python tool called through `Runner::call` with a warm persistent worker, against
//! the same call spawned per call, side by side. Run with `bench/mcp_latency.sh` (release build).
//!
//! Measured through the library: the MCP server's `tools/call` runs the same `Runner::call`, plus JSON-RPC framing.

use awt_core::pool::{PoolConfig, WorkerPool};
use awt_core::stream::{Cancel, Quiet};
use awt_core::{CallOptions, DirOptions, Dirs, Runner};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOOL: &str = r#""""A trivial AnimaWorks-style tool."""


def get_tool_schemas():
    return [{"name": "trivial_ping", "description": "Answers pong.", "input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}]


def dispatch(name, args):
    return "pong"
"#;

fn calls() -> usize {
    std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

async fn measure(r: &Runner, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let args: Map<String, Value> = json!({"n": i}).as_object().cloned().unwrap();
        let t = Instant::now();
        let v = r
            .call(
                "trivial",
                "ping",
                args,
                &CallOptions::default(),
                &mut Quiet,
                Cancel::never(),
            )
            .await;
        out.push(t.elapsed());
        assert_eq!(v.expect("the call succeeds"), json!("pong"));
    }
    out.sort();
    out
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn row(name: &str, v: &[Duration]) {
    let pct = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    let mean = v.iter().sum::<Duration>() / v.len() as u32;
    println!(
        "{name:<24} {:>6} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3}",
        v.len(),
        ms(pct(0.5)),
        ms(mean),
        ms(pct(0.9)),
        ms(pct(0.99)),
        ms(v[0])
    );
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(data.join("common_tools")).unwrap();
    std::fs::write(data.join("common_tools").join("trivial.py"), TOOL).unwrap();
    let dirs = Dirs::resolve(&DirOptions {
        core_dirs: vec![tmp.path().join("core")],
        data_dir: Some(data.clone()),
        anima_dir: None,
        cache_dir: Some(tmp.path().join("cache")),
        python: None,
    });
    let one_shot = Runner::new(dirs.clone());
    let mut pooled = Runner::new(dirs);
    pooled.pool = Some(Arc::new(WorkerPool::new(PoolConfig {
        idle: Duration::from_secs(600),
        per_tool: 1,
    })));
    let n = calls();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Warm the schema cache and the worker, so both sides measure calls only.
        measure(&one_shot, 3).await;
        measure(&pooled, 3).await;
        let spawn = measure(&one_shot, n).await;
        let warm = measure(&pooled, n).await;
        println!(
            "trivial legacy Python tool (dispatch -> \"pong\"), Runner::call end to end, python: {:?}",
            std::env::var("ANIMAWORKS_PYTHON").unwrap_or_else(|_| "python3".into())
        );
        println!(
            "{:<24} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "mode", "calls", "median ms", "mean ms", "p90 ms", "p99 ms", "min ms"
        );
        row("spawn per call", &spawn);
        row("warm worker", &warm);
        println!(
            "speed-up (median): {:.1}x",
            ms(spawn[spawn.len() / 2]) / ms(warm[warm.len() / 2])
        );
    });
}
