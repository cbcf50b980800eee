//! Property tests of every parser that reads what a tool or a file in the data dir says: permissions.json and
//! permissions.md, task files, AnimaWorks' pending descriptors, `--schemas` manifests, the schema-driven flag
//! parser, and the streaming masker. Inputs are random bytes and random documents built from each format's own
//! vocabulary (so the generator reaches deep into the parser, not only its first `not JSON` check).
//!
//! CI runs a short budget (64 cases per property); a longer local run:
//! `PROPTEST_CASES=20000 cargo test -p animaworks-tool --lib proptests --release`.

use awt_core::policy::mask::{Masker, StreamMasker};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Strings from a vocabulary (keys and values the parsers look for), with some arbitrary ones.
fn word(vocab: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(vocab).prop_map(str::to_owned),
        1 => any::<String>(),
        1 => "[a-z_-]{0,12}",
    ]
}

/// Numbers a hostile file would try.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        proptest::sample::select(
            &[
                0.0,
                -1.0,
                0.5,
                1e30,
                1e308,
                f64::MAX,
                f64::MIN_POSITIVE,
                604800.0,
                604800.5
            ][..]
        )
        .prop_map(|f| json!(f)),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
    ]
}

/// JSON values whose keys and strings come from `vocab`, nested a few levels.
fn value(vocab: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        word(vocab).prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((word(vocab), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

const PERMISSION_WORDS: &[&str] = &[
    "version",
    "external_tools",
    "allow",
    "deny",
    "allow_all",
    "commands",
    "tool_creation",
    "personal",
    "shared",
    "file_roots",
    "file_roots_readonly",
    "file_roots_denied",
    "gt",
    "gt_delete_all",
    "gt_delete-all",
    "*",
    "",
];

const MD_LINES: &[&str] = &[
    "## 外部ツール",
    "## External Tools",
    "## 使えるツール",
    "## コマンド",
    "- all: yes",
    "- all: no",
    "- gt: OK",
    "- gt_delete-all: OK",
    "- deny: gt",
    "- allow: gt",
    "",
    "# heading",
    "```",
    "  - nested: x",
    "| a | b |",
    "- 全て: 許可",
    "- web_search: NG",
];

const MANIFEST_WORDS: &[&str] = &[
    "protocol",
    "name",
    "actions",
    "input_schema",
    "parameters",
    "output_schema",
    "profile",
    "timeout_s",
    "expected_seconds",
    "gated",
    "gated_as",
    "events",
    "persistent",
    "cli",
    "schema_name",
    "credentials",
    "env",
    "type",
    "object",
    "string",
    "properties",
    "required",
    "t",
    "t_a",
    "t_b",
    "gt_x",
    "a",
    "a-b",
    "a_b",
    "b",
    "legacy_profile",
    "legacy_profile_error",
    "background_eligible",
    "hints",
];

const PENDING_WORDS: &[&str] = &[
    "task_id",
    "tool_name",
    "raw_args",
    "subcommand",
    "submitted_at",
    "anima_name",
    "0123456789ab",
    "../x",
    "t",
    "add",
    "-j",
    "",
];

const TASK_WORDS: &[&str] = &[
    "task_id",
    "anima_name",
    "tool_name",
    "tool_args",
    "status",
    "created_at",
    "completed_at",
    "result",
    "error",
    "tool",
    "action",
    "kind",
    "timeout_s",
    "max_output",
    "updated_at",
    "pid",
    "pid_start_time",
    "boot_id",
    "worker_token",
    "progress",
    "running",
    "pending",
    "completed",
    "failed",
    "lost",
    "action",
    "cli",
    "0123456789ab",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn permissions_json_never_panics_and_round_trips(v in value(PERMISSION_WORDS), raw in any::<String>()) {
        let path = std::path::Path::new("/a/permissions.json");
        let _ = awt_core::policy::permissions::parse_json(path, &raw);
        if let Ok(p) = awt_core::policy::permissions::parse_json(path, &v.to_string()) {
            let again = awt_core::policy::permissions::parse_json(path, &serde_json::to_string(&p).unwrap()).unwrap();
            prop_assert_eq!(&again, &p);
            let loaded = Ok(awt_core::policy::LoadedPermissions {
                permissions: p,
                source: awt_core::policy::permissions::PermissionsFile::Json(path.to_path_buf()),
            });
            for tier in [awt_core::policy::Tier::Core, awt_core::policy::Tier::Personal] {
                let _ = awt_core::policy::decide(&loaded, "gt", tier, "delete_all", &awt_core::policy::Gate::Unknown);
            }
        }
    }

    #[test]
    fn permissions_md_never_panics(lines in proptest::collection::vec(word(MD_LINES), 0..30)) {
        let _ = awt_core::policy::permissions::parse_markdown(&lines.join("\n"));
    }

    #[test]
    fn pending_descriptors_never_panic(v in value(PENDING_WORDS), raw in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = awt_tasks::pending::parse(&raw);
        if let Ok(d) = awt_tasks::pending::parse(v.to_string().as_bytes()) {
            prop_assert!(awt_tasks::valid_task_id(&d.task_id));
            prop_assert!(!d.tool.is_empty());
        }
    }

    #[test]
    fn task_files_never_panic_a_listing(v in value(TASK_WORDS), raw in proptest::collection::vec(any::<u8>(), 0..200)) {
        use awt_tasks::TaskStore;
        let d = tempfile::tempdir().unwrap();
        let store = awt_tasks::files::FileStore::for_anima(d.path());
        std::fs::create_dir_all(&store.dir).unwrap();
        std::fs::write(store.dir.join("aaaaaaaaaaaa.json"), v.to_string()).unwrap();
        std::fs::write(store.dir.join("bbbbbbbbbbbb.json"), &raw).unwrap();
        for t in store.list().unwrap() {
            let _ = t.exit_code();
            let _ = t.receipt();
        }
        let _ = store.census();
    }

    #[test]
    fn manifests_never_panic_and_keep_their_promises(v in value(MANIFEST_WORDS), raw in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = awt_core::manifest::parse("t", &raw);
        let doc = match v {
            // Lean on the real shapes: a list of entries, or an object with actions.
            Value::Array(_) => v,
            Value::Object(mut o) => {
                if !o.contains_key("actions") {
                    o.insert("actions".into(), json!([{"name": "a"}]));
                }
                Value::Object(o)
            }
            other => json!([other]),
        };
        if let Ok(m) = awt_core::manifest::parse("t", doc.to_string().as_bytes()) {
            for a in &m.actions {
                prop_assert!(awt_core::manifest::owns_schema_name("t", &a.schema_name), "{}", a.schema_name);
                let t = a.timeout_s();
                prop_assert!(t.is_finite() && t > 0.0 && t <= awt_core::limits::MAX_SECONDS);
                let _ = std::time::Duration::from_secs_f64(t);
            }
        }
    }

    #[test]
    fn the_flag_parser_never_panics(words in proptest::collection::vec(word(&[
        "--s", "--n", "--i", "--b", "--no-b", "--b=false", "--arr", "--obj", "--e", "--timeout", "--max-output",
        "--events", "--help", "--json", "{\"s\":\"x\"}", "[1,2]", "1e999", "inf", "-1", "NaN", "x", "--s=", "=",
        "--", "--i=9007199254740993", "{", "true",
    ]), 0..8)) {
        let act = awt_core::manifest::parse("t", br#"{"actions":[{"name":"a","input_schema":{"type":"object","properties":{
            "s":{"type":"string"},"n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},
            "arr":{"type":"array","items":{"type":"string"}},"obj":{"type":"object"},"e":{"enum":["x","y"]}}}}]}"#)
            .unwrap()
            .actions
            .remove(0);
        // `--json -` and `@FILE` read stdin and files: not this property's business.
        let words: Vec<String> = words.into_iter().filter(|w| w != "-" && !w.starts_with('@')).collect();
        if let Ok((_, flags)) = awt_core::flags::parse(&act, &words) {
            if let Some(t) = flags.timeout {
                prop_assert!(awt_core::limits::seconds(t, "t").is_ok());
            }
        }
    }

    #[test]
    fn the_streaming_masker_masks_whatever_the_splits(
        secrets in proptest::collection::vec("[a-zA-Z0-9]{4,12}", 1..4),
        parts in proptest::collection::vec((0usize..4, "[a-z \n]{0,6}"), 0..24),
        cuts in proptest::collection::vec(0usize..400, 0..8),
    ) {
        let m = Masker::new(&secrets);
        let mut text = String::new();
        for (i, filler) in &parts {
            text.push_str(filler);
            if let Some(s) = secrets.get(*i) {
                text.push_str(s);
            }
        }
        let whole = {
            let mut s = StreamMasker::new(&m);
            let mut out = Vec::new();
            s.push(text.as_bytes(), &mut out);
            s.finish(&mut out);
            out
        };
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(text.len())).collect();
        cuts.sort_unstable();
        let mut s = StreamMasker::new(&m);
        let mut out = Vec::new();
        let mut at = 0;
        for c in cuts {
            s.push(&text.as_bytes()[at..c], &mut out);
            at = c;
        }
        s.push(&text.as_bytes()[at..], &mut out);
        s.finish(&mut out);
        prop_assert_eq!(&out, &whole, "the output depends on where the stream was split");
        let shown = String::from_utf8(out).unwrap();
        for sec in &secrets {
            prop_assert!(!shown.contains(sec.as_str()), "{sec} survived in {shown:?}");
        }
        if secrets.len() == 1 {
            prop_assert_eq!(shown, m.mask_str(&text));
        }
    }
}
