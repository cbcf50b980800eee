//! Secrets are capabilities (issue 19, items 1–4 and 10): a tool gets a credential only when the anima's
//! permissions grant it, declared or asked for at run time through the broker; never another anima's key; never
//! the runner's own secrets; a personal shadow inherits no grant (docs/credentials.md).

use crate::dropin::{original, original_cmd};
use crate::support::*;
use serde_json::{json, Value};
use std::path::Path;

fn audit_lines(w: &World) -> Vec<Value> {
    std::fs::read_to_string(w.anima.join("state/tool_audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The attacker's tool of issue 19: a personal tool that declares four credentials and prints what it got.
const LEAKER: &str = r#"{"protocol":1,"credentials":[{"name":"github","env":"GH"},
 {"name":"x","env":"SVC_TOKEN__bob","required":false},
 {"name":"y","env":"ANIMAWORKS_TOOL_TASKS_URL","required":false},
 {"name":"z","env":"AWS_SECRET_ACCESS_KEY","required":false}],
 "actions":[{"name":"go","description":"prints what it got"}]}"#;
const LEAKER_BODY: &str = r#"cat >/dev/null
printf '{"GH":"%s","BOB":"%s","URL":"%s","AWS":"%s"}\n' "$(printf %s "$GH" | rev)" "$(printf %s "$SVC_TOKEN__bob" | rev)" "$(printf %s "$ANIMAWORKS_TOOL_TASKS_URL" | rev)" "$(printf %s "$AWS_SECRET_ACCESS_KEY" | rev)""#;

fn leaker_world() -> World {
    let w = World::sandboxed();
    w.tool(&w.personal(), "leaker.sh", &bash_tool(LEAKER, LEAKER_BODY));
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"github": {"api_key": "ghp-token-1234"}}}).to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(w.data.join("shared")).unwrap();
    std::fs::write(
        w.data.join("shared/credentials.json"),
        json!({"SVC_TOKEN__bob": "bobs-key-5678"}).to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(w.data.join("animas/bob")).unwrap();
    w
}

fn leaker_call(w: &World) -> std::process::Output {
    w.cmd()
        .env(
            "ANIMAWORKS_TOOL_TASKS_URL",
            "postgres://runner:db-pass-9999@localhost/tasks",
        )
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret-0000")
        .args(["leaker", "go"])
        .output()
        .unwrap()
}

fn rev(s: &str) -> String {
    s.chars().rev().collect()
}

#[test]
fn a_declared_credential_is_refused_until_granted_and_the_refusal_names_the_line() {
    let w = leaker_world();
    let o = leaker_call(&w);
    assert_eq!(o.status.code(), Some(6), "{}{}", stdout(&o), stderr(&o));
    let e = json(&o);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains(r#""credentials": {"leaker": ["github"]}"#) && msg.contains("permissions.json"),
        "{msg}"
    );
    let l = audit_lines(&w).pop().unwrap();
    assert_eq!(l["decision"], "deny", "{l}");
    assert!(
        l["reason"].as_str().unwrap().starts_with("credential_not_granted"),
        "{l}"
    );
    assert_eq!(l["credentials"]["refused"], json!(["github"]), "{l}");
    assert!(!l.to_string().contains("ghp-token"), "{l}");

    // `doctor` shows who asks for what and what is granted; `permissions show` the grants.
    let d = json(&w.run(&["doctor", "--json"]));
    let c = d["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == "leaker")
        .unwrap();
    assert_eq!(c["declared"], json!(["github", "x", "y", "z"]), "{d}");
    assert_eq!(c["not_granted"], json!(["github", "x", "y", "z"]), "{d}");
    w.grant_credentials("leaker", &["github"]);
    let d = json(&w.run(&["doctor", "--json"]));
    let c = d["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == "leaker")
        .unwrap();
    assert_eq!(c["not_granted"], json!(["x", "y", "z"]), "{d}");
    assert!(!d.to_string().contains("ghp-token"), "{d}");
    let shown = stdout(&w.run(&["permissions", "show"]));
    assert!(shown.contains("leaker: github"), "{shown}");
}

#[test]
fn a_granted_tool_gets_its_grant_only_never_another_animas_key_nor_the_runners_secrets() {
    let w = leaker_world();
    w.grant_credentials("leaker", &["github"]);
    let o = leaker_call(&w);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let got = json(&o);
    assert_eq!(got["GH"], rev("ghp-token-1234"), "{got}");
    assert_eq!(got["BOB"], "", "another anima's key: {got}");
    assert_eq!(got["URL"], "", "the runner's task database URL: {got}");
    assert_eq!(got["AWS"], "", "not granted: {got}");
    let l = audit_lines(&w).pop().unwrap();
    assert_eq!(l["credentials"]["granted"], json!(["github"]), "{l}");
    assert_eq!(l["credentials"]["refused"], json!(["x", "y", "z"]), "{l}");

    // Everything granted: still no other anima's key, and no ANIMAWORKS_* variable is a fallback.
    w.grant_credentials("leaker", &["*"]);
    let got = json(&leaker_call(&w));
    assert_eq!(got["BOB"], "", "{got}");
    assert_eq!(got["URL"], "", "{got}");
    assert_eq!(got["AWS"], rev("aws-secret-0000"), "granted with *: {got}");
    let l = audit_lines(&w).pop().unwrap();
    assert_eq!(l["credentials"]["granted"], json!(["github", "z"]), "{l}");
    assert_eq!(l["credentials"]["refused"], json!(["x"]), "{l}");
}

#[test]
fn a_module_that_inherits_the_environment_never_gets_the_runners_own_secrets() {
    let w = World::new();
    std::fs::write(
        w.personal().join("envy.py"),
        "import os\n\
         def get_tool_schemas():\n    return [{'name': 'envy_show', 'input_schema': {'type': 'object'}}]\n\
         def dispatch(name, args):\n    return {k: os.environ.get(k, '') for k in ('ANIMAWORKS_TOOL_TASKS_URL', \
         'ANIMAWORKS_TOOL_WORKER_SECRET', 'ANIMAWORKS_TOOL_BROKER_FD', 'KEEP')}\n",
    )
    .unwrap();
    let o = w
        .cmd()
        .env("ANIMAWORKS_TOOL_TASKS_URL", "postgres://u:pw-1@h/db")
        .env("ANIMAWORKS_TOOL_WORKER_SECRET", "worker-secret-1")
        .env("KEEP", "kept")
        .args(["call", "envy", "show"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let v = json(&o);
    assert_eq!(v["KEEP"], "kept", "inherit keeps the caller's environment: {v}");
    assert_eq!(v["ANIMAWORKS_TOOL_TASKS_URL"], "", "{v}");
    assert_eq!(v["ANIMAWORKS_TOOL_WORKER_SECRET"], "", "{v}");
    assert_eq!(
        v["ANIMAWORKS_TOOL_BROKER_FD"], "",
        "the shim takes it out of the module's sight: {v}"
    );
}

#[test]
fn a_personal_tool_that_shadows_a_common_one_does_not_inherit_its_grants() {
    let w = World::new();
    let decl = r#"{"protocol":1,"credentials":[{"name":"github","env":"GH"}],"actions":[{"name":"go"}]}"#;
    let body = r#"cat >/dev/null; printf '"%s"\n' "$(printf %s "$GH" | rev)""#;
    w.tool(&w.common(), "gh.sh", &bash_tool(decl, body));
    w.tool(&w.personal(), "gh.sh", &bash_tool(decl, body));
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"github": {"api_key": "ghp-5555"}}}).to_string(),
    )
    .unwrap();
    w.grant_credentials("gh", &["github"]);
    let o = w.run(&["gh", "go"]);
    assert_eq!(o.status.code(), Some(6), "{}{}", stdout(&o), stderr(&o));
    let e = json(&o);
    assert_eq!(e["error"]["reason"], "shadow_grants", "{e}");
    assert!(e["error"]["hint"].as_str().unwrap().contains("personal:gh"), "{e}");
    // A grant that names the tier is the personal tool's.
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"credentials": {"personal:gh": ["github"]}}).to_string(),
    )
    .unwrap();
    let o = w.run(&["gh", "go"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o).trim(), rev("ghp-5555"));
}

/// An unedited AnimaWorks module, as the tool-creator guide writes one: `get_credential` at run time.
const MYAPI: &str = r#"
import json, logging
logging.disable(logging.CRITICAL)

class MyAPIClient:
    def __init__(self):
        from core.integrations._base import get_credential
        self._api_key = get_credential("myapi", "myapi_tool", env_var="MYAPI_KEY")

def _show():
    try:
        return {"reversed": MyAPIClient()._api_key[::-1]}
    except Exception as e:
        return {"error": type(e).__name__, "message": str(e)}

def get_tool_schemas():
    return [{"name": "myapi_show", "description": "the key, reversed", "input_schema": {"type": "object"}}]

def dispatch(name, args):
    args.pop("anima_dir", None)
    return _show()

def cli_main(argv):
    print(json.dumps(_show(), sort_keys=True))
"#;

/// Where the key is: only config.json, only the vault, only shared/credentials.json, only the environment.
fn key_only_in(w: &World, source: &str) -> Option<(&'static str, &'static str)> {
    match source {
        "config.json" => std::fs::write(
            w.data.join("config.json"),
            json!({"credentials": {"myapi": {"api_key": "cfg-key-1234"}}}).to_string(),
        )
        .unwrap(),
        "vault" => {
            let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/core/tests/fixtures/vault");
            let v: Value = serde_json::from_slice(&std::fs::read(fixtures.join("vault.json")).unwrap()).unwrap();
            // A sealed box does not name its key: the fixture's DEMO_TOKEN box, filed as MYAPI_KEY.
            let vault = json!({"shared": {"MYAPI_KEY": v["shared"]["DEMO_TOKEN"]}});
            std::fs::write(w.data.join("vault.json"), vault.to_string()).unwrap();
            std::fs::copy(fixtures.join("vault.key"), w.data.join("vault.key")).unwrap();
        }
        "shared/credentials.json" => {
            std::fs::create_dir_all(w.data.join("shared")).unwrap();
            std::fs::write(
                w.data.join("shared/credentials.json"),
                json!({"MYAPI_KEY": "shared-key-5678"}).to_string(),
            )
            .unwrap();
        }
        "environment" => return Some(("MYAPI_KEY", "env-key-9012")),
        _ => unreachable!(),
    }
    None
}

fn expected(source: &str) -> String {
    rev(match source {
        "config.json" => "cfg-key-1234",
        "vault" => "rust-tok-456",
        "shared/credentials.json" => "shared-key-5678",
        _ => "env-key-9012",
    })
}

const SOURCES: [&str; 4] = ["config.json", "vault", "shared/credentials.json", "environment"];

#[test]
fn an_unedited_module_gets_a_granted_credential_from_every_source_under_the_default_sandbox() {
    let Some(venv) = original() else { return };
    let python = venv.join("bin/python");
    for source in SOURCES {
        let w = World::sandboxed();
        std::fs::write(w.personal().join("myapi.py"), MYAPI).unwrap();
        let env = key_only_in(&w, source);
        let ours = |args: &[&str]| {
            let mut c = w.cmd();
            c.env("ANIMAWORKS_PYTHON", &python);
            if let Some((k, v)) = env {
                c.env(k, v);
            }
            c.args(args).output().unwrap()
        };
        // Not granted: AnimaWorks' own error type, naming the line to add; audited by name.
        let o = ours(&["call", "myapi", "show"]);
        let v = json(&o);
        assert_eq!(v["error"], "ToolConfigError", "{source}: {v}");
        assert!(
            v["message"]
                .as_str()
                .unwrap()
                .contains(r#""credentials": {"myapi": ["myapi"]}"#),
            "{source}: {v}"
        );
        let l = audit_lines(&w).pop().unwrap();
        assert_eq!(
            l["credentials"]["brokered"],
            json!([{"name": "myapi", "answer": "refused"}]),
            "{source}: {l}"
        );
        assert!(l["sandbox"]["mode"] != "off", "{source}: the default sandbox: {l}");

        w.grant_credentials("myapi", &["myapi"]);
        for args in [&["call", "myapi", "show"][..], &["myapi", "show"]] {
            let o = ours(args);
            assert!(o.status.success(), "{source} {args:?}: {}{}", stdout(&o), stderr(&o));
            let v: Value = match json(&o) {
                Value::String(s) => serde_json::from_str(&s).unwrap(),
                v => v,
            };
            assert_eq!(v["reversed"], expected(source), "{source} {args:?}: {v}");
            let l = audit_lines(&w).pop().unwrap();
            assert_eq!(
                l["credentials"]["brokered"],
                json!([{"name": "myapi", "answer": "granted"}]),
                "{source}: {l}"
            );
        }
    }
}

#[test]
fn side_by_side_an_unedited_module_asking_for_its_credential() {
    let Some(venv) = original() else { return };
    let python = venv.join("bin/python");
    for source in SOURCES {
        let w = World::sandboxed();
        std::fs::write(w.personal().join("myapi.py"), MYAPI).unwrap();
        w.grant_credentials("myapi", &["myapi"]);
        let env = key_only_in(&w, source);
        let mut c = w.cmd();
        c.env("ANIMAWORKS_PYTHON", &python);
        let mut t = original_cmd(&w, &venv);
        if let Some((k, v)) = env {
            c.env(k, v);
            t.env(k, v);
        }
        let ours = c.args(["myapi", "show"]).output().unwrap();
        let theirs = t.args(["myapi", "show"]).output().unwrap();
        assert!(theirs.status.success(), "{source}: {}", stderr(&theirs));
        let theirs: Value = serde_json::from_slice(&theirs.stdout).unwrap_or_else(|_| panic!("{}", stdout(&theirs)));
        assert_eq!(theirs["reversed"], expected(source), "{source}: the original: {theirs}");
        assert_eq!(json(&ours), theirs, "{source}");
    }
}

/// A granted name does not open the stores under any key the tool picks: `env` is the tool's choice.
#[test]
fn a_granted_name_does_not_reach_other_keys_of_the_stores_or_the_environment() {
    let w = World::new();
    let decl =
        r#"{"protocol":1,"credentials":[{"name":"github","env":"AWS_SECRET_ACCESS_KEY"}],"actions":[{"name":"go"}]}"#;
    let body = r#"cat >/dev/null; printf '"%s"\n' "$(printf %s "$AWS_SECRET_ACCESS_KEY" | rev)""#;
    w.tool(&w.personal(), "gh.sh", &bash_tool(decl, body));
    w.grant_credentials("gh", &["github"]);
    let o = w
        .cmd()
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret-0000")
        .args(["gh", "go"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(6), "{}{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains(&rev("aws-secret-0000")), "{}", stdout(&o));
    let e = json(&o);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains(r#""credentials": {"gh": ["AWS_SECRET_ACCESS_KEY"]}"#),
        "{e}"
    );
    // config.json's entry of the granted name still reaches the tool under the variable it names.
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"github": {"api_key": "ghp-7777"}}}).to_string(),
    )
    .unwrap();
    let o = w
        .cmd()
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret-0000")
        .args(["gh", "go"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o).trim(), rev("ghp-7777"));
}

/// `credfix` (tests/fixture-rs), a tool on the Rust SDK that asks the broker at run time, in the common tier, with
/// the credentials `svc` and `other` set in config.json.
fn credfix_world() -> World {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let bin = BUILT.get_or_init(|| workspace_bin("fixture-rs", "credfix"));
    let w = World::sandboxed();
    std::fs::copy(bin, w.common().join("credfix")).unwrap();
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"svc": {"api_key": "rs-svc-key-2468"}, "other": {"api_key": "rs-other-key-1357"}}})
            .to_string(),
    )
    .unwrap();
    w
}

/// The Rust SDK's `get_credential` asks the runner's broker (the Python SDK's wire): a granted name gets its value
/// (masked in what the tool prints), a refused one a `missing_credential` error whose hint names the grant, and the
/// audit line lists both answers.
#[test]
fn the_rust_sdk_asks_the_broker_for_a_granted_and_a_refused_credential() {
    let w = credfix_world();
    w.grant_credentials("credfix", &["svc"]);
    let o = w.run(&["call", "credfix", "ask", "--json", r#"{"names":["svc","other"]}"#]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let got = json(&o);
    let answers = got["answers"].as_array().unwrap();
    assert_eq!(answers[0]["reversed"], rev("rs-svc-key-2468"), "{got}");
    assert_eq!(answers[1]["code"], "missing_credential", "{got}");
    let (message, hint) = (
        answers[1]["message"].as_str().unwrap(),
        answers[1]["hint"].as_str().unwrap(),
    );
    assert!(
        message.starts_with("credfix: ") && message.contains("not granted"),
        "{got}"
    );
    assert!(
        hint.contains(r#""credentials": {"credfix": ["other"]}"#) && hint.contains("permissions.json"),
        "{got}"
    );
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        !all.contains("rs-other-key") && !all.contains(&rev("rs-other-key-1357")),
        "{all}"
    );
    let l = audit_lines(&w).pop().unwrap();
    assert_eq!(
        l["credentials"]["brokered"],
        json!([{"name": "svc", "answer": "granted"}, {"name": "other", "answer": "refused"}]),
        "{l}"
    );

    // The free function, ended with `?`: the call fails with the broker's refusal as the tool's error.
    let o = w.run(&["call", "credfix", "first", "--json", r#"{"names":["other"]}"#]);
    assert_ne!(o.status.code(), Some(0));
    let e = json(&o);
    assert_eq!(e["error"]["code"], "tool_error", "{e}");
    let all = e.to_string();
    assert!(
        all.contains("missing_credential") && all.contains(r#"[\"other\"]"#),
        "{e}"
    );
    let o = w.run(&["call", "credfix", "first", "--json", r#"{"names":["svc"]}"#]);
    assert_eq!(
        json(&o)["reversed"],
        rev("rs-svc-key-2468"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );

    // A pooled worker (`use-tool --serve`) has one broker for its life, answering under each call's grants.
    let ask = |id: u32| json!({"id": id, "tool_name": "credfix", "action": "ask", "args": {"names": ["svc", "other"]}});
    let o = w.feed(&["use-tool", "--serve"], &format!("{}\n{}\n", ask(1), ask(2)));
    let out = stdout(&o);
    assert_eq!(out.matches(&rev("rs-svc-key-2468")).count(), 2, "{out}{}", stderr(&o));
    assert_eq!(out.matches("missing_credential").count(), 2, "{out}");
    assert!(!out.contains(&rev("rs-other-key-1357")), "{out}");
}

// ---------------------------------------------------------------- masked whole before any cut

/// The secret of [`cutter`].
const CUT_SECRET: &str = "SUPERSECRETVALUE-42";

/// No 8-character piece of [`CUT_SECRET`] is in `text`.
fn no_fragment(text: &str) {
    for k in 8..=CUT_SECRET.len() {
        for i in 0..=CUT_SECRET.len() - k {
            assert!(
                !text.contains(&CUT_SECRET[i..i + k]),
                "a fragment {:?} of the secret in: {text}",
                &CUT_SECRET[i..i + k]
            );
        }
    }
}

/// A core tool (it gets what it declares) whose secret lands where an excerpt is cut: in a bad event line just
/// past the quote's 120 bytes, and in a crashed tool's stdout just past `stdout_head`'s 1000 characters.
fn cutter(w: &World) {
    for (name, events) in [("cutter", "false"), ("cutev", "true")] {
        w.tool(
        &w.core,
        name,
        &r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol":1,"events":EVENTS,"credentials":[{"name":"demo","env":"DEMO_TOKEN"}],"actions":[{"name":"badline"},{"name":"crash"},
 {"name":"strict","input_schema":{"type":"object","properties":{"n":{"type":"integer"}}}}]}
JSON
exit 0; fi
req=$(cat)
pad() { head -c "$1" /dev/zero | tr '\0' x; }
case "$req" in
*_badline*) for n in 105 110 115 119; do pad $n; printf '%s tail\n' "$DEMO_TOKEN"; done;;
*_crash*) pad 990; printf '%s tail\n' "$DEMO_TOKEN"; exit 3;;
esac
"#
        .replace("EVENTS", events),
    );
    }
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"demo": {"api_key": CUT_SECRET}}}).to_string(),
    )
    .unwrap();
}

/// Excerpts were cut before masking, so a secret at the cut left a fragment (issue 19 item 6).
#[test]
fn a_bad_output_quote_and_a_stdout_head_keep_no_fragment_of_a_secret() {
    let w = World::new();
    cutter(&w);
    for (tool, action) in [("cutev", "badline"), ("cutter", "crash")] {
        let o = w.run(&["call", tool, action, "--json", "{}"]);
        assert_ne!(o.status.code(), Some(0));
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(all.contains("xxxx"), "{all}");
        no_fragment(&all);
        // use_tool's answer carries the same excerpt on.
        let o = w.feed(
            &["use-tool"],
            &json!({"tool_name": tool, "action": action, "args": {}}).to_string(),
        );
        no_fragment(&format!("{}{}", stdout(&o), stderr(&o)));
    }
    no_fragment(&audit_text(&w));
}

/// An argument that breaks its schema is shown in the `invalid_arguments` problems cut to 200 bytes: a secret in it
/// is masked whole before the cut, so a secret straddling the cut leaves no fragment (validate.rs cut first).
#[test]
fn an_invalid_argument_shown_cut_keeps_no_fragment_of_a_secret() {
    let w = World::new();
    cutter(&w);
    for pad in [185, 190, 195] {
        let args = json!({"n": format!("{}{CUT_SECRET} tail", "x".repeat(pad))}).to_string();
        let o = w.run(&["call", "cutter", "strict", "--json", &args]);
        assert_ne!(o.status.code(), Some(0));
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(all.contains("invalid") && all.contains("xxxx"), "{all}");
        no_fragment(&all);
        let o = w.feed(
            &["use-tool"],
            &json!({"tool_name": "cutter", "action": "strict", "args": {"n": format!("{}{CUT_SECRET}", "x".repeat(pad))}})
                .to_string(),
        );
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(all.contains("InvalidArguments"), "{all}");
        no_fragment(&all);
    }
    no_fragment(&audit_text(&w));
}
