//! Cross-language transcripts: the same fixture calls through a tool on tool-sdk-py, one on tool-sdk-rs and a
//! legacy AnimaWorks module give the same event stream from `animaworks-tool call … --events`
//! (tests/xlang/README.md). Normalised: only progress, partial, result and error events, in order; call ids,
//! timings, paths and sizes dropped; progress numbers compared as numbers (1 and 1.0 are one value).

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The Rust fixture binary, built on demand.
fn rust_fixture() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| workspace_bin("fixture-rs", "xfix")).clone()
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    SdkPy,
    SdkRs,
    Legacy,
}

fn world_with(kind: Kind) -> World {
    let w = World::new();
    let x = repo().join("tests/xlang");
    match kind {
        Kind::SdkPy => {
            std::fs::copy(x.join("sdk_py/xfix.py"), w.personal().join("xfix.py")).unwrap();
        }
        Kind::Legacy => {
            std::fs::copy(x.join("legacy/xfix.py"), w.personal().join("xfix.py")).unwrap();
        }
        Kind::SdkRs => std::os::unix::fs::symlink(rust_fixture(), w.personal().join("xfix")).unwrap(),
    }
    w
}

/// The fixture calls: (label, action, arguments, extra flags).
fn calls() -> Vec<(&'static str, &'static str, Value, Vec<&'static str>)> {
    vec![
        ("progress", "steps", json!({"n": 3}), vec![]),
        ("tool error", "fail", json!({}), vec![]),
        (
            "past the cap",
            "big",
            json!({"bytes": 5000}),
            vec!["--max-output", "1000"],
        ),
        (
            "under the cap",
            "big",
            json!({"bytes": 500}),
            vec!["--max-output", "1000"],
        ),
        (
            "unicode",
            "echo",
            json!({"text": "こんにちは, wörld 🦀 \u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467} \"q\" \\ \n tab\t"}),
            vec![],
        ),
        (
            "nested",
            "nested",
            json!({"outer": {"items": [{"k": "a", "v": 1}, {"k": "ü", "v": 2}, {"k": "深", "v": -7}], "flag": true, "deep": {"x": [[1], [2, {"y": null}]]}}}),
            vec![],
        ),
    ]
}

/// One call through the binary with `--events`: exit code and the raw event lines.
fn run(w: &World, action: &str, args: &Value, extra: &[&str]) -> (i32, Vec<Value>) {
    let args = args.to_string();
    let mut a = vec!["call", "xfix", action, "--json", args.as_str(), "--events"];
    a.extend_from_slice(extra);
    let o = w.run(&a);
    let lines = stdout(&o)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\nstderr: {}", stderr(&o))))
        .collect();
    (o.status.code().unwrap(), lines)
}

fn as_f64(v: &Value) -> Value {
    v.as_f64().map(Value::from).unwrap_or(Value::Null)
}

/// Keep what every language must agree on.
fn normalise(events: &[Value], kind: Kind) -> Vec<Value> {
    let mut out = Vec::new();
    for e in events {
        match e["type"].as_str() {
            Some("progress") => out.push(json!({"type": "progress", "progress": as_f64(&e["progress"]), "total": as_f64(&e["total"]), "message": e["message"]})),
            Some("partial") => out.push(json!({"type": "partial", "data": e["data"]})),
            Some("result") => {
                let mut r = e["result"].clone();
                // A legacy module's dict/list result is AnimaWorks' text (json.dumps(indent=2)); read it back.
                if kind == Kind::Legacy {
                    if let Some(v) = r.as_str().and_then(|s| serde_json::from_str::<Value>(s).ok()).filter(|v| v.is_object() || v.is_array()) {
                        r = v;
                    }
                }
                out.push(json!({"type": "result", "result": r}));
            }
            Some("error") if e.get("source").is_some() => out.push(json!({"type": "error", "source": e["source"], "code": e["code"]})),
            Some("error") => out.push(json!({"type": "error", "code": e["code"], "message": e["message"], "hint": e.get("hint").cloned().unwrap_or(Value::Null)})),
            _ => {}
        }
    }
    out
}

/// What the legacy convention can express: no progress or partial events; its own errors carry the exception
/// type as code, and the message prefixed with `Error executing <schema>: `, with no hint.
fn legacy_view(sdk: &[Value], schema_name: &str) -> Vec<Value> {
    sdk.iter()
        .filter(|e| e["type"] != "progress" && e["type"] != "partial")
        .map(|e| {
            if e["type"] == "error" && e.get("source").is_none() {
                json!({"type": "error", "code": "RuntimeError", "message": format!("Error executing {schema_name}: {}", e["message"].as_str().unwrap()), "hint": null})
            } else {
                e.clone()
            }
        })
        .collect()
}

#[test]
fn sdk_py_sdk_rs_and_legacy_give_the_same_transcripts() {
    let worlds = [
        (Kind::SdkPy, world_with(Kind::SdkPy)),
        (Kind::SdkRs, world_with(Kind::SdkRs)),
        (Kind::Legacy, world_with(Kind::Legacy)),
    ];
    for (label, action, args, extra) in calls() {
        let mut got = Vec::new();
        for (kind, w) in &worlds {
            let (code, lines) = run(w, action, &args, &extra);
            got.push((*kind, code, normalise(&lines, *kind), lines));
        }
        let (_, py_code, py, py_raw) = &got[0];
        let (_, rs_code, rs, rs_raw) = &got[1];
        let (_, lg_code, lg, lg_raw) = &got[2];
        assert_eq!(
            py, rs,
            "{label}: tool-sdk-py and tool-sdk-rs differ\npy raw: {py_raw:#?}\nrs raw: {rs_raw:#?}"
        );
        assert_eq!(py_code, rs_code, "{label}: exit codes differ");
        assert_eq!(
            lg,
            &legacy_view(py, &format!("xfix_{action}")),
            "{label}: legacy differs\nraw: {lg_raw:#?}"
        );
        assert_eq!(lg_code, py_code, "{label}: legacy exit code differs");

        // Pin what the transcripts say, so that three equally wrong tools cannot pass.
        let last = py.last().unwrap_or_else(|| panic!("{label}: no events"));
        match label {
            "progress" => {
                assert_eq!(py.len(), 4, "{py:?}");
                assert_eq!(
                    py[2],
                    json!({"type": "progress", "progress": 3.0, "total": 3.0, "message": "step 3 of 3"})
                );
                assert_eq!(last["result"], json!({"steps": 3}));
            }
            "tool error" => {
                assert_eq!(*py_code, 1);
                assert_eq!(
                    last,
                    &json!({"type": "error", "code": "fixture_failed", "message": "the fixture failed on purpose", "hint": "this is expected"})
                );
            }
            // Pinned by its own test below, so this comparison still runs while that one fails.
            "past the cap" => {}
            "under the cap" => assert_eq!(last["result"], json!("x".repeat(500))),
            "unicode" => {
                let text = args["text"].as_str().unwrap();
                assert_eq!(py[0], json!({"type": "partial", "data": text}));
                assert_eq!(last["result"], json!({"text": text, "chars": text.chars().count()}));
            }
            "nested" => {
                assert_eq!(last["result"]["sum"], -4);
                assert_eq!(last["result"]["keys"], json!(["a", "ü", "深"]));
                assert_eq!(last["result"]["outer"], args["outer"]);
            }
            _ => unreachable!(),
        }
    }
}

/// protocol.md §5.3: an event line longer than the cap is written whole to a file and the call ends with
/// `output_capped`, whatever language wrote it.
#[test]
fn an_event_line_past_the_cap_is_output_capped_in_every_language() {
    for kind in [Kind::SdkPy, Kind::SdkRs, Kind::Legacy] {
        let w = world_with(kind);
        let (code, lines) = run(&w, "big", &json!({"bytes": 5000}), &["--max-output", "1000"]);
        let last = lines.last().unwrap_or_else(|| panic!("{kind:?}: no events"));
        assert_eq!(
            (code, &last["code"]),
            (12, &json!("output_capped")),
            "{kind:?}: a 5000-byte result line under --max-output 1000 must end output_capped (exit 12); got exit {code}, \
             last event {}",
            last.to_string().chars().take(120).collect::<String>()
        );
        let path = last["path"].as_str().unwrap().to_owned();
        let whole = std::fs::read_to_string(&path).unwrap();
        assert!(
            whole.contains(&"x".repeat(5000)),
            "{kind:?}: {path} holds the whole line"
        );
    }
}
