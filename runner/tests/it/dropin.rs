//! Drop-in for AnimaWorks 0.15 (issue 10): the same inputs through the original (`bench/.venv`, made by
//! `bench/setup-legacy-venv`; these comparisons are skipped with a note when it is absent) and through ours.

use crate::support::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The original's venv, when `bench/setup-legacy-venv` made it.
pub fn original() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/.venv");
    let ok = venv.join("bin/animaworks-tool").is_file() && venv.join("bin/python").exists();
    if !ok {
        awt_sys::skipped!(
            "the original AnimaWorks is not installed in bench/.venv (run bench/setup-legacy-venv, which \
             needs PyPI); the side-by-side comparison is skipped"
        );
    }
    ok.then(|| venv.canonicalize().unwrap())
}

/// The original's `site-packages`.
pub fn site_packages(venv: &Path) -> PathBuf {
    let lib = venv.join("lib");
    let py = std::fs::read_dir(&lib)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("python"))
        .unwrap();
    lib.join(py.file_name()).join("site-packages")
}

/// A PATH without any `animaworks`: the system's folders only.
fn plain_path() -> String {
    "/usr/local/bin:/usr/bin:/bin".to_owned()
}

/// The original's `animaworks-tool` in this world, with the same clean environment as [`World::cmd`].
pub fn original_cmd(w: &World, venv: &Path) -> Command {
    let mut c = Command::new(venv.join("bin/animaworks-tool"));
    c.env_clear()
        .env("PATH", plain_path())
        .env("HOME", w.tmp.path())
        .env("ANIMAWORKS_DATA_DIR", &w.data)
        .env("ANIMAWORKS_ANIMA_DIR", &w.anima)
        .stdin(Stdio::null());
    c
}

fn fake_animaworks(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("animaworks");
    std::fs::write(
        &p,
        "#!/usr/bin/env bash\nprintf 'animaworks|'; printf '%s|' \"$@\"; echo\necho \"cwd=$PWD data=$ANIMAWORKS_DATA_DIR \
         keep=$KEEP_ME\"\necho 'to stderr' >&2\nexit 7\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn animaworks_words_run_its_cli_with_argv_streams_and_exit_code_unchanged() {
    let w = World::new();
    let bin = w.tmp.path().join("bin");
    fake_animaworks(&bin);
    let cwd = w.tmp.path().join("somewhere");
    std::fs::create_dir_all(&cwd).unwrap();
    let path = format!("{}:{}", bin.display(), plain_path());
    let run = |args: &[&str]| {
        w.cmd()
            .env("PATH", &path)
            .env("KEEP_ME", "kept")
            .current_dir(&cwd)
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["task", "list", "--status", "a b"]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("animaworks|task|list|--status|a b|\n"), "{out}");
    assert!(
        out.contains(&format!("cwd={} data={} keep=kept", cwd.display(), w.data.display())),
        "{out}"
    );
    assert_eq!(stderr(&o), "to stderr\n");
    // An `_ANIMA_SUBCOMMANDS` word goes under `anima`; `status` is a main command, as in the original.
    assert!(stdout(&run(&["list"])).starts_with("animaworks|anima|list|\n"));
    assert!(stdout(&run(&["set-model", "bob", "m"])).starts_with("animaworks|anima|set-model|bob|m|\n"));
    assert!(stdout(&run(&["status"])).starts_with("animaworks|status|\n"));
    // A global option reaches the CLI as the variable AnimaWorks reads.
    let other = w.tmp.path().join("other-data");
    let o = run(&["--data-dir", other.to_str().unwrap(), "vault", "get", "K"]);
    assert!(
        stdout(&o).contains(&format!("data={}", other.display())),
        "{}",
        stdout(&o)
    );

    // The CLI next to ANIMAWORKS_PYTHON comes before the one on PATH.
    let venv = w.tmp.path().join("venv/bin");
    std::fs::create_dir_all(&venv).unwrap();
    std::fs::write(venv.join("animaworks"), "#!/bin/sh\necho from-venv \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(venv.join("animaworks"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = w
        .cmd()
        .env("PATH", &path)
        .env("ANIMAWORKS_PYTHON", venv.join("python"))
        .args(["vault", "list"])
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "from-venv vault list\n");
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn a_tool_of_that_name_comes_first_and_a_missing_cli_is_named() {
    let w = World::new();
    w.tool(
        &w.common(),
        "status",
        &bash_tool(
            r#"[{"name": "status_now", "description": "d", "input_schema": {"type": "object"}}]"#,
            "echo '\"tool\"'",
        ),
    );
    let bin = w.tmp.path().join("bin");
    fake_animaworks(&bin);
    let o = w
        .cmd()
        .env("PATH", format!("{}:{}", bin.display(), plain_path()))
        .args(["status", "now"])
        .output()
        .unwrap();
    assert_eq!(stdout(&o).trim(), "tool", "{}", stderr(&o));

    let o = w
        .cmd()
        .env("PATH", plain_path())
        .args(["task", "list"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(9), "{}", stderr(&o));
    let e = json(&o);
    assert!(
        e["error"]["hint"].as_str().unwrap().contains("pip install animaworks"),
        "{e}"
    );
    assert!(
        e["error"]["message"].as_str().unwrap().contains("AnimaWorks command"),
        "{e}"
    );
    // A word that is neither a tool nor AnimaWorks' stays unknown.
    assert_eq!(w.run(&["no-such-word"]).status.code(), Some(3));
}

#[test]
fn help_and_no_arguments_list_the_tools() {
    let w = World::new();
    let tool = bash_tool(
        r#"[{"name": "x_y", "description": "d", "input_schema": {"type": "object"}}]"#,
        "echo 1",
    );
    w.tool(&w.common(), "beta", &tool);
    w.tool(&w.personal(), "alpha", &tool);
    for (args, code) in [(&["--help"][..], 0), (&["-h"][..], 0), (&["help"][..], 0), (&[][..], 2)] {
        let o = w.run(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}");
        let out = stdout(&o);
        assert!(out.contains("Usage: animaworks-tool"), "{args:?}: {out}");
        assert!(out.contains("\nAvailable tools: alpha, beta\n"), "{args:?}: {out}");
    }
    let other = w.tmp.path().join("empty");
    let o = w.run(&[
        "--data-dir",
        other.to_str().unwrap(),
        "--anima-dir",
        other.to_str().unwrap(),
        "--help",
    ]);
    assert!(stdout(&o).contains("\nAvailable tools: (none)\n"), "{}", stdout(&o));
    // A command's own help is clap's, without the list.
    assert!(!stdout(&w.run(&["jobs", "--help"])).contains("Available tools"));
}

fn available_tools(out: &str) -> Vec<String> {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("Available tools: "))
        .unwrap_or_else(|| panic!("no tool list in {out}"));
    line.split(", ").map(str::to_owned).collect()
}

#[test]
fn side_by_side_forwarded_commands_and_the_tool_list() {
    let Some(venv) = original() else { return };
    let w = World::new();
    w.tool(&w.personal(), "mine.py", "def get_tool_schemas():\n    return []\n");
    w.tool(&w.common(), "shared.py", "def get_tool_schemas():\n    return []\n");
    let core = site_packages(&venv).join("core/integrations");
    let ours = |args: &[&str]| -> Output {
        w.cmd()
            .env("PATH", plain_path())
            .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
            .env("ANIMAWORKS_CORE_TOOLS", &core)
            .args(args)
            .output()
            .unwrap()
    };
    let theirs = |args: &[&str]| original_cmd(&w, &venv).args(args).output().unwrap();

    let (o, t) = (ours(&["--help"]), theirs(&["--help"]));
    assert_eq!(o.status.code(), t.status.code());
    assert_eq!(available_tools(&stdout(&o)), available_tools(&stdout(&t)));

    for args in [
        &["task", "list"][..],
        &["task", "board"],
        &["internal", "list-background-tasks"],
        &["internal", "check-background-task", "abc"],
        &["vault", "get", "NO_SUCH_KEY"],
        &["vault", "list"],
        &["list"],
        &["supervisor"],
    ] {
        let (o, t) = (ours(args), theirs(args));
        assert_eq!(
            o.status.code(),
            t.status.code(),
            "{args:?}: ours {}\ntheirs {}",
            stderr(&o),
            stderr(&t)
        );
        assert_eq!(stdout(&o), stdout(&t), "{args:?}");
    }
}

/// An AnimaWorks module that reports what it sees: selected variables, a helper found through PYTHONPATH, the
/// AnimaWorks credential chain's answer (when AnimaWorks is importable) and its working directory.
const ENV_MODULE: &str = r#"
import hashlib, json, os

def _seen():
    out = {k: os.environ.get(k) for k in ("SLACK_BOT_TOKEN", "HTTPS_PROXY", "SSL_CERT_FILE", "ANIMAWORKS_EMBED_URL")}
    try:
        import helper_on_pythonpath
        out["helper"] = helper_on_pythonpath.VALUE
    except ImportError as e:
        out["helper"] = "missing"
    try:
        from core.integrations._base import get_credential
        out["credential"] = get_credential("slack", "envmod", env_var="SLACK_BOT_TOKEN")
    except ImportError:
        out["credential"] = "no animaworks"
    out["cwd"] = os.getcwd()
    # What the secrets were, for a caller that sees them masked.
    for k in ("SLACK_BOT_TOKEN", "credential"):
        out[k + "_sha256"] = hashlib.sha256(str(out[k]).encode()).hexdigest()
    return out

def get_tool_schemas():
    return [{"name": "envmod_show", "description": "what the module sees", "input_schema": {"type": "object"}}]

def dispatch(name, args):
    return _seen()

def cli_main(argv):
    print(json.dumps(_seen(), sort_keys=True))
"#;

const ENV_SH: &str = "#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then echo '[{\"name\":\"envsh_show\",\"input_schema\":{\"type\":\"object\"}}]'; exit 0; fi\ncat >/dev/null\necho \"{\\\"SLACK_BOT_TOKEN\\\": \\\"${SLACK_BOT_TOKEN:-}\\\", \\\"HTTPS_PROXY\\\": \\\"${HTTPS_PROXY:-}\\\", \\\"SSL_CERT_FILE\\\": \\\"${SSL_CERT_FILE:-}\\\", \\\"cwd\\\": \\\"$PWD\\\"}\"\n";

struct EnvWorld {
    w: World,
    pythonpath: PathBuf,
    cwd: PathBuf,
}

fn env_world() -> EnvWorld {
    let w = World::new();
    w.tool(&w.personal(), "envmod.py", ENV_MODULE);
    w.tool(&w.personal(), "envsh.sh", ENV_SH);
    w.grant_credentials("envmod", &["slack"]);
    let pythonpath = w.tmp.path().join("pylib");
    std::fs::create_dir_all(&pythonpath).unwrap();
    std::fs::write(pythonpath.join("helper_on_pythonpath.py"), "VALUE = 'found'\n").unwrap();
    let cwd = w.tmp.path().join("caller cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    EnvWorld { w, pythonpath, cwd }
}

impl EnvWorld {
    fn with_caller_env(&self, c: &mut Command) {
        c.env("SLACK_BOT_TOKEN", "xoxb-from-the-environment")
            .env("HTTPS_PROXY", "http://proxy.example:3128")
            .env("SSL_CERT_FILE", "/etc/ssl/corp.pem")
            .env("ANIMAWORKS_EMBED_URL", "http://embed.example")
            .env("PYTHONPATH", &self.pythonpath)
            .current_dir(&self.cwd);
    }

    fn ours(&self, args: &[&str], python: Option<&Path>) -> Output {
        let mut c = self.w.cmd();
        self.with_caller_env(&mut c);
        if let Some(p) = python {
            c.env("ANIMAWORKS_PYTHON", p);
        }
        c.args(args).output().unwrap()
    }
}

fn seen(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}\n{}", stdout(o), stderr(o));
    let v = json(o);
    match v.as_str() {
        Some(text) => serde_json::from_str(text).unwrap(),
        None => v,
    }
}

#[test]
fn an_animaworks_module_sees_the_callers_environment_and_a_new_protocol_tool_a_clean_one() {
    let e = env_world();
    for args in [&["envmod", "show"][..], &["call", "envmod", "show"]] {
        let v = seen(&e.ours(args, None));
        assert_eq!(v["SLACK_BOT_TOKEN"], "xoxb-from-the-environment", "{args:?}: {v}");
        assert_eq!(v["HTTPS_PROXY"], "http://proxy.example:3128");
        assert_eq!(v["ANIMAWORKS_EMBED_URL"], "http://embed.example");
        assert_eq!(v["helper"], "found", "PYTHONPATH reaches the module");
        // §3: a foreground call runs in the caller's working directory.
        assert_eq!(v["cwd"], e.cwd.to_str().unwrap(), "{args:?}");
    }
    let v = seen(&e.ours(&["envsh", "show"], None));
    assert_eq!(
        v["SLACK_BOT_TOKEN"], "",
        "a new-protocol tool gets no undeclared caller variable"
    );
    assert_eq!(
        v["HTTPS_PROXY"], "http://proxy.example:3128",
        "proxy settings reach every tool"
    );
    assert_eq!(v["SSL_CERT_FILE"], "/etc/ssl/corp.pem", "CA settings reach every tool");
    assert_eq!(v["cwd"], e.cwd.to_str().unwrap());

    // The audit line says which policy applied; the secret's value is in no line.
    let audit = std::fs::read_to_string(e.w.anima.join("state/tool_audit.jsonl")).unwrap();
    let policies: Vec<String> = audit
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .map(|r| format!("{}:{}", r["tool"].as_str().unwrap(), r["env"].as_str().unwrap()))
        .collect();
    assert_eq!(policies, ["envmod:inherit", "envmod:inherit", "envsh:clean"], "{audit}");
    assert!(!audit.contains("xoxb"), "{audit}");

    // --help and doctor show what reaches a tool: names, never values.
    let o = e.ours(&["envsh", "--help"], None);
    let help = stdout(&o);
    assert!(help.contains("Environment (protocol.md §8): clean: "), "{help}");
    assert!(
        help.contains("HTTPS_PROXY") && !help.contains("proxy.example"),
        "{help}"
    );
    assert!(stdout(&e.ours(&["doctor"], None)).contains("AnimaWorks modules: inherit: the caller's whole environment"));
    let d = json(&e.ours(&["doctor", "--json"], None));
    let names = |p: &str| {
        d["environment"][p]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert!(names("inherit").contains(&"SLACK_BOT_TOKEN".to_owned()), "{d}");
    assert!(!names("clean").contains(&"SLACK_BOT_TOKEN".to_owned()), "{d}");
    assert!(names("clean").contains(&"SSL_CERT_FILE".to_owned()), "{d}");
    assert!(!d.to_string().contains("xoxb"), "{d}");

    // The operator may give AnimaWorks modules the clean environment too.
    e.w.settings(r#"{"legacy_env": "clean"}"#);
    let v = seen(&e.ours(&["envmod", "show"], None));
    assert_eq!(v["SLACK_BOT_TOKEN"], serde_json::Value::Null, "{v}");
    assert_eq!(v["HTTPS_PROXY"], "http://proxy.example:3128");
}

#[test]
fn side_by_side_the_environment_and_working_directory_a_module_sees() {
    let Some(venv) = original() else { return };
    let e = env_world();
    let python = venv.join("bin/python");
    let ours = seen(&e.ours(&["envmod", "show"], Some(&python)));
    let mut c = original_cmd(&e.w, &venv);
    e.with_caller_env(&mut c);
    let mut theirs = seen(&c.args(["envmod", "show"]).output().unwrap());
    // A legacy argv's output is masked (docs/migrating.md): the original prints the secrets in clear, ours `***`;
    // that the module saw the same ones, its digests of them say.
    let secret = "xoxb-from-the-environment";
    assert_eq!(theirs["credential"], secret, "the last step of AnimaWorks' chain");
    let digest = theirs["credential_sha256"].clone();
    for k in ["SLACK_BOT_TOKEN", "credential"] {
        assert_eq!(theirs[k], secret, "{k}: {theirs}");
        assert_eq!(theirs[format!("{k}_sha256")], digest, "{k}: {theirs}");
        assert_eq!(
            ours[k], "***",
            "{k}: a secret is masked in a legacy argv's output: {ours}"
        );
        theirs[k] = ours[k].clone();
    }
    assert_eq!(ours, theirs);
    assert!(!ours.to_string().contains(secret), "{ours}");
}

/// Runs `script` under the original's Python with `input` as its stdin; its stdout as JSON.
fn original_python(venv: &Path, w: &World, script: &str, input: &serde_json::Value) -> serde_json::Value {
    let mut c = Command::new(venv.join("bin/python"));
    c.env_clear()
        .env("PATH", plain_path())
        .env("HOME", w.tmp.path())
        .env("ANIMAWORKS_DATA_DIR", &w.data)
        .args(["-c", script]);
    let o = feed(&mut c, input.to_string().as_bytes());
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

const PERMISSION_QUERIES: &str = r#"
import json, sys, tempfile, pathlib, logging
logging.disable(logging.CRITICAL)
from core.config.schemas import load_permissions
from core.tooling.permissions import evaluate_tool_access
cases, queries = json.load(sys.stdin)
out = []
for name, text in cases:
    d = pathlib.Path(tempfile.mkdtemp())
    (d / name).write_text(text, encoding="utf-8")
    try:
        cfg = load_permissions(d)
    except Exception:
        out.append({"error": True})
        continue
    decisions = []
    for tool, origin, action, gated_key in queries:
        profile = {gated_key: {"gated": True}} if gated_key else None
        decisions.append(evaluate_tool_access(tool, action, config=cfg, origin=origin, profile=profile).allowed)
    out.append({"error": False, "personal": cfg.tool_creation.personal, "shared": cfg.tool_creation.shared,
                "decisions": decisions})
print(json.dumps(out))
"#;

#[test]
fn side_by_side_permission_decisions() {
    use awt_core::policy::{gate, permissions, Gate, Tier};
    let Some(venv) = original() else { return };
    let w = World::new();
    let json_case = |t: &str| ("permissions.json", t.to_owned());
    let md_case = |t: &str| ("permissions.md", t.to_owned());
    let cases = vec![
        json_case("{}"),
        json_case(r#"{"external_tools": {"allow_all": "yes"}}"#),
        json_case(r#"{"external_tools": {"allow_all": "false", "allow": ["mine", "gmail"]}}"#),
        json_case(r#"{"version": "1", "external_tools": {"allow_all": 0, "allow": ["chatwork"]}}"#),
        json_case(r#"{"version": " +1 ", "external_tools": {"allow_all": 1, "allow": ["gmail_send"]}}"#),
        json_case(r#"{"external_tools": {"allow_all": 1.0, "allow": ["github_create-issue"], "deny": ["chatwork"]}}"#),
        json_case(
            r#"{"version": 2, "file_roots_denied": ["/abs"], "tool_creation": {"personal": "off", "shared": "Y"}}"#,
        ),
        json_case(r#"{"external_tools": {"allow_all": "maybe"}}"#),
        json_case(r#"{"external_tools": {"allow_all": null}}"#),
        json_case(r#"{"file_roots_denied": ["relative/path"]}"#),
        json_case(r#"{"file_roots_denied": ["/tmp/*"]}"#),
        json_case(r#"{"version": "1.5"}"#),
        json_case(r#"{"version": true}"#),
        md_case("## 外部ツール\n- chatwork: 全権限\n- gmail: 読み取りのみ\n- slack: no\n"),
        md_case("# External Tools\n- all: yes\n- gmail_send: yes\n"),
        md_case("## 外部ツール\n- mine: yes\n"),
        // What AnimaWorks' Korean templates write (Japanese headings, yes/no values).
        md_case("## 外部ツール\n- image_gen: yes\n- web_search: yes\n- slack: no\n"),
        md_case("## 外部ツール\n* chatwork: ENABLED\ngmail: no\n"),
    ];
    // (tool, tier, action, the gated profile key)
    let queries: Vec<(&str, &str, Option<&str>, Option<&str>)> = vec![
        ("gmail", "core", None, None),
        ("chatwork", "core", None, None),
        ("slack", "core", None, None),
        ("mine", "personal", None, None),
        ("shared", "common", None, None),
        ("gmail", "core", Some("send"), Some("send")),
        ("github", "core", Some("create_issue"), Some("create-issue")),
    ];
    let theirs = original_python(&venv, &w, PERMISSION_QUERIES, &serde_json::json!([cases, queries]));
    assert_eq!(theirs.as_array().unwrap().len(), cases.len());
    assert_eq!(
        theirs[2]["decisions"][1], false,
        "a whitelist without chatwork: {theirs}"
    );
    assert_eq!(theirs[9]["error"], true, "a relative denied root: {theirs}");
    for (i, (name, text)) in cases.iter().enumerate() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(name), text).unwrap();
        let loaded = permissions::load(d.path());
        let t = &theirs[i];
        assert_eq!(
            loaded.is_err(),
            t["error"] == true,
            "{name}: {text}: ours {loaded:?}, theirs {t}"
        );
        let Ok(l) = &loaded else { continue };
        assert_eq!(l.permissions.tool_creation.personal, t["personal"] == true, "{text}");
        assert_eq!(l.permissions.tool_creation.shared, t["shared"] == true, "{text}");
        for (q, (tool, tier, action, gated_key)) in queries.iter().enumerate() {
            let tier = match *tier {
                "core" => Tier::Core,
                "common" => Tier::Common,
                _ => Tier::Personal,
            };
            let g = match gated_key {
                Some(k) if Some(*k) != *action => Gate::new(true, Some((*k).to_owned())),
                Some(_) => Gate::new(true, None),
                None => Gate::Open,
            };
            let ours = gate::decide(&loaded, tool, tier, action.unwrap_or(""), &g).is_allow();
            assert_eq!(ours, t["decisions"][q] == true, "{name}: {text}: {tool} {action:?}");
        }
    }
}

#[test]
fn side_by_side_the_documented_difference_of_grant_spellings() {
    use awt_core::policy::{gate, permissions, Gate, Tier};
    let Some(venv) = original() else { return };
    let w = World::new();
    let text = r#"{"external_tools": {"allow": ["github_create_issue"]}}"#;
    let cases = vec![("permissions.json", text)];
    let queries = vec![("github", "core", Some("create_issue"), Some("create-issue"))];
    let theirs = original_python(&venv, &w, PERMISSION_QUERIES, &serde_json::json!([cases, queries]));
    assert_eq!(
        theirs[0]["decisions"][0], false,
        "the original ignores the `_` spelling: {theirs}"
    );
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("permissions.json"), text).unwrap();
    let g = Gate::new(true, Some("create-issue".into()));
    let ours = gate::decide(&permissions::load(d.path()), "github", Tier::Core, "create_issue", &g);
    assert!(
        ours.is_allow(),
        "ours honours what the user wrote (docs/migrating.md, the drop-in table)"
    );
}

const GREETER: &str = r#"
import argparse, json, time

def get_tool_schemas():
    return [{"name": "greeter_nap", "description": "sleeps", "input_schema": {"type": "object"}}]

def dispatch(name, args):
    time.sleep(30)

def cli_main(argv=None):
    p = argparse.ArgumentParser(prog="greeter")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("greet")
    g.add_argument("--name", required=True)
    g.add_argument("-j", action="store_true")
    sub.add_parser("fail").add_argument("-j", action="store_true")
    ns = p.parse_args(argv)
    if ns.cmd == "fail":
        raise SystemExit("greeter cannot")
    print(json.dumps({"greeting": "こんにちは, " + ns.name}, ensure_ascii=False, indent=2))
"#;

/// Loads our task files with the original's own loader and renders the notification it would write for each.
const TASK_LOADER: &str = r##"
import json, sys, pathlib, logging
logging.disable(logging.CRITICAL)
from core.tasks.background import BackgroundTaskManager
from core.i18n import t
anima_dir, ids = json.load(sys.stdin)
mgr = BackgroundTaskManager(pathlib.Path(anima_dir))
out = {}
for i in ids:
    task = mgr._load_task(i)
    if task is None:
        out[i] = None
        continue
    subject = t("anima.bg_task_failed" if task.status.value == "failed" else "anima.bg_task_done", tool=task.tool_name)
    note = (f"# {subject}\n\n"
            f"{t('anima.bg_notif_task_id', task_id=task.task_id)}\n"
            f"{t('anima.bg_notif_tool', tool=task.tool_name)}\n"
            f"{t('anima.bg_notif_status', status=task.status.value)}\n"
            f"{t('anima.bg_notif_result', summary=task.summary())}\n")
    out[i] = {"task": task.to_dict(), "notification": note}
print(json.dumps(out, ensure_ascii=False))
"##;

#[test]
fn side_by_side_submit_output_task_files_and_notifications() {
    let Some(venv) = original() else { return };
    for locale in [None, Some("en")] {
        let w = World::new();
        if let Some(l) = locale {
            std::fs::write(w.data.join("config.json"), format!(r#"{{"locale": "{l}"}}"#)).unwrap();
        }
        w.tool(&w.personal(), "greeter.py", GREETER);
        let python = venv.join("bin/python");
        let ours = |args: &[&str]| {
            w.cmd()
                .env("PATH", plain_path())
                .env("ANIMAWORKS_PYTHON", &python)
                .args(args)
                .output()
                .unwrap()
        };
        let submit = ["submit", "greeter", "greet", "--name", "Ada"];
        let (o, t) = (ours(&submit), original_cmd(&w, &venv).args(submit).output().unwrap());
        assert!(
            o.status.success() && t.status.success(),
            "{}\n{}",
            stderr(&o),
            stderr(&t)
        );
        // Pretty-printed as the original prints it; equal but for the id.
        let (mine, theirs) = (stdout(&o), stdout(&t));
        let id = json(&o)["task_id"].as_str().unwrap().to_owned();
        let their_id = json(&t)["task_id"].as_str().unwrap().to_owned();
        if locale.is_none() {
            assert_eq!(
                mine.replace(&id, "ID"),
                theirs.replace(&their_id, "ID"),
                "locale {locale:?}"
            );
        } else {
            // The original says it in Japanese whatever the locale; ours in the configured one.
            let m = json(&o);
            assert_eq!(
                m["message"],
                format!(
                    "Background task submitted. You will be notified in your inbox when it completes. (task_id: {id})"
                )
            );
            let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(&m), keys(&json(&t)));
        }
        let fail = json(&ours(&["submit", "greeter", "fail"]))["task_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let nap = json(&ours(&["submit", "greeter", "nap", "--timeout", "1"]))["task_id"]
            .as_str()
            .unwrap()
            .to_owned();
        for i in [&id, &fail, &nap] {
            let _ = ours(&["jobs", "wait", i]);
        }
        let ids = [id.clone(), fail.clone(), nap.clone()];
        let loaded = original_python(&venv, &w, TASK_LOADER, &serde_json::json!([w.anima, ids]));
        for i in &ids {
            let l = &loaded[i.as_str()];
            assert!(l.is_object(), "the original's loader skipped task {i}: {loaded}");
            let note = std::fs::read_to_string(w.anima.join(format!("state/background_notifications/{i}.md"))).unwrap();
            assert_eq!(note, l["notification"].as_str().unwrap(), "notification of {i}");
        }
        let done = &loaded[id.as_str()]["task"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["tool_name"], "greeter:greet");
        assert_eq!(done["tool_args"]["subcommand"], "greet");
        assert_eq!(
            done["tool_args"]["raw_args"],
            serde_json::json!(["greet", "--name", "Ada"])
        );
        assert_eq!(
            done["result"], "{\n  \"greeting\": \"こんにちは, Ada\"\n}",
            "stdout as printed"
        );
        assert_eq!(loaded[fail.as_str()]["task"]["status"], "failed");
        assert_eq!(loaded[nap.as_str()]["task"]["status"], "failed");
        let ours_nap: serde_json::Value =
            serde_json::from_slice(&std::fs::read(w.anima.join(format!("state/background_tasks/{nap}.json"))).unwrap())
                .unwrap();
        assert_eq!(ours_nap["outcome"], "timeout");
    }
}

const ECHOER: &str = r#"
def get_tool_schemas():
    return [{"name": n, "description": n, "input_schema": {"type": "object"}}
            for n in ("echoer_big", "echoer_boom", "echoer_jp")]

def dispatch(name, args):
    if name == "echoer_big":
        return "x" * 60000
    if name == "echoer_jp":
        return "日本" * 20000
    raise ValueError("bad thing")
"#;

/// What the original's use_tool gives for these module calls: `_call_module`'s text through `_truncate_output`,
/// and its answer for an unknown tool.
const USE_TOOL_ANSWERS: &str = r#"
import json, sys, types, logging, importlib.util
logging.disable(logging.CRITICAL)
import ast, pathlib, core.tooling
from core.tooling.dispatch import ExternalToolDispatcher
from core.tooling.handler_base import _error_result
from core.i18n import t
# handler.py imports the whole server; take its _truncate_output and limit from its source instead.
tree = ast.parse(pathlib.Path(core.tooling.__file__).with_name("handler.py").read_text(encoding="utf-8"))
ns = {"t": t, "logger": logging.getLogger("x")}
for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef) and node.name == "_truncate_output":
        exec(compile(ast.Module(body=[node], type_ignores=[]), "handler.py", "exec"), ns)
    if isinstance(node, ast.Assign) and any(getattr(x, "id", "") == "_MAX_TOOL_OUTPUT_BYTES" for x in node.targets):
        ns["MAX"] = ast.literal_eval(node.value)
class ToolHandler:
    _MAX_TOOL_OUTPUT_BYTES = ns["MAX"]
    _truncate_output = ns["_truncate_output"]
path, anima_dir, names = json.load(sys.stdin)
spec = importlib.util.spec_from_file_location("echoer", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
h = ToolHandler()
out = {n: h._truncate_output(ExternalToolDispatcher._call_module(mod, n, {"anima_dir": anima_dir})) for n in names}
out["unknown"] = _error_result("PermissionDenied", t("tooling.tool_not_permitted", tool="nope"))
print(json.dumps(out, ensure_ascii=False))
"#;

#[test]
fn side_by_side_use_tool_answers() {
    let Some(venv) = original() else { return };
    let w = World::new();
    let path = w.tool(&w.personal(), "echoer.py", ECHOER);
    let names = ["echoer_big", "echoer_boom", "echoer_jp"];
    let theirs = original_python(&venv, &w, USE_TOOL_ANSWERS, &serde_json::json!([path, w.anima, names]));
    let ours = |tool: &str, action: &str| {
        let req = serde_json::json!({"tool_name": tool, "action": action, "args": {}});
        stdout(&w.feed(&["use-tool"], &req.to_string()))
    };
    assert_eq!(
        ours("echoer", "boom"),
        theirs["echoer_boom"],
        "a tool's own exception: the plain text"
    );
    assert_eq!(
        ours("echoer", "big"),
        theirs["echoer_big"],
        "the cut and the (ja) marker"
    );
    // 3-byte text: the original drops 1,000 characters at a time until the bytes fit; ours keeps every
    // character that fits (docs/migrating.md, the drop-in table). The marker is the same.
    let (mine, their) = (ours("echoer", "jp"), theirs["echoer_jp"].as_str().unwrap().to_owned());
    let (mine_body, mine_marker) = mine.split_once("\n\n").unwrap();
    let (their_body, their_marker) = their.split_once("\n\n").unwrap();
    assert_eq!(mine_marker, their_marker);
    assert!(
        mine_body.starts_with(their_body) && mine_body.len() <= 50_000,
        "{} {}",
        mine_body.len(),
        their_body.len()
    );
    // An unknown tool: the original's type and words, in one compact line; ours adds its suggestion and code.
    let mine: serde_json::Value = serde_json::from_str(&ours("nope", "x")).unwrap();
    let their: serde_json::Value = serde_json::from_str(theirs["unknown"].as_str().unwrap()).unwrap();
    assert_eq!(mine["error_type"], their["error_type"]);
    assert_eq!(mine["message"], their["message"]);
}

/// The original's `get_credential("demo", "t", env_var="DEMO_TOKEN")` in this data dir: the value, or the type of
/// the exception.
const GET_CREDENTIAL: &str = r#"
import json, sys, logging
logging.disable(logging.CRITICAL)
from core.integrations._base import get_credential
try:
    print(json.dumps({"value": get_credential("demo", "t", env_var="DEMO_TOKEN")}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__}))
"#;

#[test]
fn side_by_side_the_vault_chain() {
    use awt_core::policy::credentials::Resolver;
    let Some(venv) = original() else { return };
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/core/tests/fixtures/vault");
    let sealed_demo = {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(fixtures.join("vault.json")).unwrap()).unwrap();
        v["shared"]["DEMO_TOKEN"].as_str().unwrap().to_owned()
    };
    // (config.json credentials.demo, shared/credentials.json, the environment, keep vault.key) → what both say
    struct Case {
        config: Option<serde_json::Value>,
        shared: Option<serde_json::Value>,
        env: Option<&'static str>,
        key: bool,
    }
    let case = |config, shared, env, key| Case {
        config,
        shared,
        env,
        key,
    };
    use serde_json::json;
    let cases = [
        case(Some(json!({"api_key": "from-config"})), None, Some("env"), true),
        case(
            Some(json!({"api_key": {"$vault": "DEMO_TOKEN"}})),
            None,
            Some("env"),
            true,
        ),
        case(Some(json!({"api_key": {"$vault": "UNICODE"}})), None, None, true),
        // A reference to a key the vault does not hold: both refuse (the original's config load fails).
        case(Some(json!({"api_key": {"$vault": "MISSING"}})), None, Some("env"), true),
        case(Some(json!({"api_key": {"$vault": ""}})), None, Some("env"), true),
        case(None, None, Some("env"), true), // vault.json shared.DEMO_TOKEN
        case(None, Some(json!({"OTHER": "x"})), Some("env"), true),
        case(Some(json!({"api_key": ""})), None, Some("env"), true),
    ];
    for (i, c) in cases.iter().enumerate() {
        let w = World::new();
        for f in ["vault.json", "vault.key"] {
            if f == "vault.json" || c.key {
                std::fs::copy(fixtures.join(f), w.data.join(f)).unwrap();
            }
        }
        if let Some(cfg) = &c.config {
            std::fs::write(
                w.data.join("config.json"),
                json!({"credentials": {"demo": cfg}}).to_string(),
            )
            .unwrap();
        }
        if let Some(sh) = &c.shared {
            std::fs::create_dir_all(w.data.join("shared")).unwrap();
            std::fs::write(w.data.join("shared/credentials.json"), sh.to_string()).unwrap();
        }
        let mut cmd = Command::new(venv.join("bin/python"));
        cmd.env_clear()
            .env("PATH", plain_path())
            .env("HOME", w.tmp.path())
            .env("ANIMAWORKS_DATA_DIR", &w.data);
        if let Some(e) = c.env {
            cmd.env("DEMO_TOKEN", e);
        }
        let o = cmd.args(["-c", GET_CREDENTIAL]).output().unwrap();
        let theirs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", stderr(&o)));
        let env: std::collections::HashMap<String, String> = c
            .env
            .map(|e| ("DEMO_TOKEN".to_owned(), e.to_owned()))
            .into_iter()
            .collect();
        let decl: tool_sdk::protocol::CredentialDecl =
            serde_json::from_value(json!({"name": "demo", "env": "DEMO_TOKEN"})).unwrap();
        let ours = Resolver::new(&w.data, None, env).resolve(&decl);
        match (&ours, theirs.get("value")) {
            (Ok(Some(r)), Some(v)) => assert_eq!(r.value, v.as_str().unwrap(), "case {i}"),
            (Err(_), None) => {}
            _ => panic!("case {i}: ours {ours:?}, theirs {theirs}"),
        }
    }
    // The documented difference: a sealed entry with no vault.key. The original hands the ciphertext to the tool
    // as the secret; ours refuses the call.
    let w = World::new();
    std::fs::copy(fixtures.join("vault.json"), w.data.join("vault.json")).unwrap();
    let o = Command::new(venv.join("bin/python"))
        .env_clear()
        .env("PATH", plain_path())
        .env("HOME", w.tmp.path())
        .env("ANIMAWORKS_DATA_DIR", &w.data)
        .args(["-c", GET_CREDENTIAL])
        .output()
        .unwrap();
    let theirs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(theirs["value"], sealed_demo.as_str());
    let decl: tool_sdk::protocol::CredentialDecl =
        serde_json::from_value(serde_json::json!({"name": "demo", "env": "DEMO_TOKEN"})).unwrap();
    assert!(Resolver::new(&w.data, None, Default::default()).resolve(&decl).is_err());
}

/// An AnimaWorks module doing what such modules do (issue 20's first list): a side effect when imported, programs
/// from PATH (a version manager's shim, `~/.local/bin`), writes where AnimaWorks tools write, reads of the
/// caller's directory, `~/.config`, `/proc` and `/`, and a Web API through urllib.
const EFFECTS_MODULE: &str = r#"
import json, os, pathlib, sqlite3, subprocess, tempfile, urllib.request

ANIMA = pathlib.Path(os.environ["ANIMAWORKS_ANIMA_DIR"])
(ANIMA / "logs").mkdir(exist_ok=True)  # when imported, for its schemas too

def _try(fn):
    try:
        r = fn()
        return "ok" if r is None else r
    except Exception as e:
        return type(e).__name__ + ": " + str(e)[:120]

def _run(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout.strip()

def _go(url):
    data = pathlib.Path(os.environ["ANIMAWORKS_DATA_DIR"])
    out = {
        "python3_on_path": _try(lambda: _run("python3", "-c", "print('py')")),
        "shim_on_path": _try(lambda: _run("fakeenv-python", "-c", "print('shim')")),
        "local_bin": _try(lambda: _run("mytool")),
        "anima_new_file": _try(lambda: (ANIMA / "report.md").write_text("r") and None),
        "anima_new_dir": _try(lambda: (ANIMA / "work").mkdir(exist_ok=True)),
        "anima_sqlite": _try(lambda: sqlite3.connect(str(ANIMA / "notes.sqlite")).execute("create table if not exists t(x)") and None),
        "shared_new_file": _try(lambda: (data / "shared" / "note.txt").write_text("s") and None),
        "cwd_out": _try(lambda: pathlib.Path("out.txt").write_text("o") and None),
        "tempfile": _try(lambda: tempfile.NamedTemporaryFile().close()),
        "read_input": _try(lambda: pathlib.Path("input.txt").read_text()),
        "read_config": _try(lambda: (pathlib.Path.home() / ".config/app.toml").read_text()),
        "read_proc": _try(lambda: "Name:" in pathlib.Path("/proc/self/status").read_text()),
        "ls_root": _try(lambda: "usr" in os.listdir("/")),
        "web_api": _try(lambda: urllib.request.urlopen(url, timeout=30).read().decode()),
        "logs_made": (ANIMA / "logs").is_dir(),
    }
    if os.environ.get("WITH_GIT"):
        out["git_status"] = _try(lambda: _run("git", "status", "--porcelain") and "ok")
    return out

def get_tool_schemas():
    return [{"name": "effects_go", "description": "what AnimaWorks modules do",
             "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}}}]

def dispatch(name, args):
    return _go(args["url"])

def cli_main(argv):
    print(json.dumps(_go(argv[-1]), sort_keys=True))
"#;

/// A server on the runner's loopback that answers every request with `hello from the API`.
fn web_api() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut c = c;
                let mut b = [0u8; 4096];
                let _ = c.read(&mut b);
                let body = "hello from the API";
                let _ = write!(c, "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            });
        }
    });
    port
}

#[test]
fn side_by_side_what_animaworks_modules_do_works_under_the_default_sandbox() {
    let Some(venv) = original() else { return };
    if !awt_core::sandbox::kernel::support().pid_namespace {
        awt_sys::skipped!("no PID (and mount) namespace here: reads fall back to the allow list; comparison skipped");
        return;
    }
    let w = World::sandboxed();
    w.tool(&w.personal(), "effects.py", EFFECTS_MODULE);
    let home = w.tmp.path();
    let local_bin = home.join(".local/bin");
    let shims = home.join(".fakeenv/shims");
    for d in [&local_bin, &shims, &home.join(".config"), &w.data.join("shared")] {
        std::fs::create_dir_all(d).unwrap();
    }
    w.tool(&local_bin, "mytool", "#!/bin/sh\necho mine\n");
    // A version manager's shim: a script in its root that runs an interpreter found from there.
    w.tool(&shims, "fakeenv-python", "#!/bin/sh\nexec python3 \"$@\"\n");
    std::fs::write(home.join(".config/app.toml"), "k = 1").unwrap();
    let cwd = home.join("project");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(cwd.join("input.txt"), "input").unwrap();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&cwd)
        .status()
        .is_ok_and(|s| s.success());
    let port = web_api();
    let url = format!("http://127.0.0.1:{port}/v1/items");
    // A Web API on this machine's loopback needs a grant naming it (a public one does not); AnimaWorks ignores
    // the key.
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"sandbox": {"net": [format!("127.0.0.1:{port}")]}}).to_string(),
    )
    .unwrap();
    // As every AnimaWorks anima has (without it, nothing new can be made at the anima dir's top level).
    std::fs::write(w.anima.join("status.json"), "{}").unwrap();
    let path = format!(
        "{}:{}:{}",
        local_bin.display(),
        shims.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let made = |w: &World| {
        [
            w.anima.join("logs"),
            w.anima.join("report.md"),
            w.anima.join("work"),
            w.anima.join("notes.sqlite"),
            w.data.join("shared/note.txt"),
            cwd.join("out.txt"),
        ]
    };
    let run = |c: &mut Command| -> serde_json::Value {
        for p in made(&w) {
            let _ = std::fs::remove_dir(&p).or_else(|_| std::fs::remove_file(&p));
        }
        c.env("PATH", &path).current_dir(&cwd);
        if git {
            c.env("WITH_GIT", "1");
        }
        let o = c.args(["effects", "go", &url]).output().unwrap();
        assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
        for p in made(&w) {
            assert!(p.exists(), "{} was not made: {}", p.display(), stdout(&o));
        }
        serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
    };
    let theirs = run(&mut original_cmd(&w, &venv));
    let mut c = w.cmd();
    c.env("ANIMAWORKS_PYTHON", venv.join("bin/python"));
    let ours = run(&mut c);
    assert_eq!(ours, theirs, "ours (sandboxed) differs from the original");
    assert_eq!(ours["web_api"], "hello from the API", "{ours}");
    assert_eq!(ours["local_bin"], "mine", "{ours}");
    // The call ran confined, with everything but the deny list readable, and its one host in the audit line.
    let audit = std::fs::read_to_string(w.anima.join("state/tool_audit.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    let s = &line["sandbox"];
    assert_eq!(
        (&s["mode"], &s["reads"], &s["hosts"]),
        (&json!("enforce"), &json!("deny_list"), &json!("proxy")),
        "{line}"
    );

    // `call` (the structured path) and `--schemas` (which imports the module) work too.
    std::fs::remove_dir(w.anima.join("logs")).unwrap();
    let o = w
        .cmd()
        .env("PATH", &path)
        .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
        .current_dir(&cwd)
        .args(["call", "effects", "go", "--json", &json!({"url": url}).to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(json(&o)["web_api"], "hello from the API", "{}", stdout(&o));

    // Without the grant naming it, the runner's loopback is out of reach (the proxy answers 403), and so is the
    // cloud metadata address.
    std::fs::write(w.anima.join("permissions.json"), "{}").unwrap();
    for target in [url.clone(), "http://169.254.169.254/latest/meta-data/".to_owned()] {
        let o = w
            .cmd()
            .env("PATH", &path)
            .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
            .current_dir(&cwd)
            .args(["call", "effects", "go", "--json", &json!({"url": target}).to_string()])
            .output()
            .unwrap();
        let v = json(&o);
        assert!(v["web_api"].as_str().unwrap().contains("403"), "{target}: {v}");
    }
    let audit = std::fs::read_to_string(w.anima.join("state/tool_audit.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(
        line["sandbox"]["proxy"]["refused_targets"],
        json!(["169.254.169.254:80"]),
        "{line}"
    );
}

/// `submit`'s receipt without its id, and what it said on stderr.
fn submitted(o: &Output) -> (serde_json::Value, String) {
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(o), stderr(o));
    let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)));
    let id = v["task_id"].as_str().unwrap().to_owned();
    v["task_id"] = json!("ID");
    v["message"] = json!(v["message"].as_str().unwrap().replace(&id, "ID"));
    (v, stderr(o))
}

#[test]
fn side_by_side_submit_warns_of_a_core_subcommand_that_is_not_long_running() {
    let Some(venv) = original() else { return };
    let w = World::new();
    w.tool(&w.personal(), "cli_only_tool.py", "import json\ndef get_tool_schemas():\n    return []\nEXECUTION_PROFILE = {\"greet\": {\"expected_seconds\": 1}}\ndef cli_main(argv):\n    print(json.dumps(argv))\n");
    let core = site_packages(&venv).join("core/integrations");
    let ours = |args: &[&str]| -> Output {
        w.cmd()
            .env("PATH", plain_path())
            .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
            .env("ANIMAWORKS_CORE_TOOLS", &core)
            .args(args)
            .output()
            .unwrap()
    };
    let theirs = |args: &[&str]| original_cmd(&w, &venv).args(args).output().unwrap();
    // A core module's subcommand (a legacy argv, and an action it lists), one that is long-running, one whose
    // profile is keyed otherwise, and a personal module's (the original warns of core modules only).
    for args in [
        &["submit", "chatwork", "rooms"][..],
        &["submit", "aws_collector", "--json", "metrics", "--cluster", "c"],
        &["submit", "google_sheets", "read", "--spreadsheet-id", "s"],
        &["submit", "chatwork", "sync"],
        &["submit", "chatwork", "-n", "5"],
        &["submit", "cli_only_tool", "greet"],
    ] {
        let (o, t) = (submitted(&ours(args)), submitted(&theirs(args)));
        assert_eq!(o, t, "{args:?}");
    }
    let (_, said) = submitted(&theirs(&["submit", "chatwork", "rooms"]));
    assert_eq!(
        said,
        "Warning: chatwork rooms is not marked as long-running (expected ~10s). Consider running directly instead.\n"
    );
}

/// A `sitecustomize` for the original's venv (it keeps that venv's own line) in which AnimaWorks' vector store
/// (its server's, in real use) holds one [ACTION-RULE] close enough to any side-effect call, and one too far. All
/// the rest is AnimaWorks' own code: which subcommands have rules, the `knowledge/` folder, the threshold, the
/// rendering.
const ACTION_RULE_SEARCH: &str = r#"
import importlib.abc, importlib.util, sys, typing

import typing_extensions

typing.TypedDict = typing_extensions.TypedDict


class _Found:
    def __init__(self, doc_id, content, score):
        self.doc_id, self.content, self.score = doc_id, content, score


def _search(self, tool_name, query, anima_name, top_k=3, min_score=0.80):
    return [_Found("knowledge/far.md", "not close enough", 0.5),
            _Found("knowledge/mail.md", "[ACTION-RULE] CC the boss (" + tool_name + " | " + query + ")", 0.91)]


def _nothing(self, *args, **kwargs):
    return None


def _vector_registry(m):
    m.get_vector_store = lambda anima_name=None: object()


def _indexer(m):
    m.MemoryIndexer.__init__ = _nothing


def _retriever(m):
    m.MemoryRetriever.__init__ = _nothing
    m.MemoryRetriever.search_action_rules = _search


_PATCHES = {"core.memory.rag.vector_registry": _vector_registry, "core.memory.rag.indexer": _indexer,
            "core.memory.rag.retriever": _retriever}


class _Patch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Patch())
"#;

#[test]
fn side_by_side_a_side_effect_subcommand_shows_the_animas_action_rules() {
    let Some(venv) = original() else { return };
    let w = World::new();
    let site = w.tmp.path().join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("sitecustomize.py"), ACTION_RULE_SEARCH).unwrap();
    std::fs::create_dir_all(w.anima.join("knowledge")).unwrap();
    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"external_tools": {"allow": ["chatwork_send"]}}"#,
    )
    .unwrap();
    let core = site_packages(&venv).join("core/integrations");
    let ours = |args: &[&str]| -> Output {
        w.cmd()
            .env("PATH", plain_path())
            .env("PYTHONPATH", &site)
            .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
            .env("ANIMAWORKS_CORE_TOOLS", &core)
            .args(args)
            .output()
            .unwrap()
    };
    let theirs = |args: &[&str]| {
        original_cmd(&w, &venv)
            .env("PYTHONPATH", &site)
            .args(args)
            .output()
            .unwrap()
    };
    let seen = |o: &Output| (o.status.code(), stdout(o), stderr(o));
    for (args, rules) in [
        (&["chatwork", "send", "12", "hi"][..], true),
        (&["call_human", "subject", "body"], true),
        (&["chatwork", "rooms"], false),
    ] {
        let (o, t) = (seen(&ours(args)), seen(&theirs(args)));
        assert_eq!(o, t, "{args:?}");
        assert_eq!(
            t.2.contains("<action-rule path=\"knowledge/mail.md\" score=\"0.91\">"),
            rules,
            "{args:?}: {}",
            t.2
        );
    }
    // A refusal (docs/migrating.md): the original shows the rules before it, ours refuses before the module runs.
    let args = ["gmail", "send"];
    let (o, t) = (seen(&ours(&args)), seen(&theirs(&args)));
    assert_eq!((o.0, t.0), (Some(1), Some(1)));
    assert!(
        t.2.contains("<action-rule") && !o.2.contains("action-rule"),
        "{}\n{}",
        t.2,
        o.2
    );
    let refusal = |e: &str| e.lines().find(|l| l.starts_with("Error: ")).map(str::to_owned);
    assert_eq!(refusal(&o.2), refusal(&t.2));
    // Without a knowledge folder an anima keeps no rule.
    std::fs::remove_dir(w.anima.join("knowledge")).unwrap();
    let args = ["chatwork", "send", "12", "hi"];
    let (o, t) = (seen(&ours(&args)), seen(&theirs(&args)));
    assert_eq!(o, t);
    assert!(!t.2.contains("action-rule"), "{}", t.2);
}

/// What a `cli_main` says of the program it was run as.
const ARGV0: &str = "import sys\ndef get_tool_schemas():\n    return []\ndef cli_main(argv):\n    print(sys.argv[0])\n";

/// The table's naming rows (docs/migrating.md), side by side: a module named with a `.`, one named like a core
/// module, and a `cli_main`'s `sys.argv[0]`.
#[test]
fn side_by_side_the_documented_naming_differences() {
    let Some(venv) = original() else { return };
    let w = World::new();
    w.tool(&w.personal(), "a.b.py", ARGV0);
    w.tool(&w.personal(), "argv0.py", ARGV0);
    w.tool(&w.common(), "slack.py", ARGV0);
    let core = site_packages(&venv).join("core/integrations");
    let ours = |args: &[&str]| -> Output {
        w.cmd()
            .env("PATH", plain_path())
            .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
            .env("ANIMAWORKS_CORE_TOOLS", &core)
            .args(args)
            .output()
            .unwrap()
    };
    let theirs = |args: &[&str]| original_cmd(&w, &venv).args(args).output().unwrap();

    // `a.b`: the original lists and runs it; ours is no tool, and says why.
    let t = theirs(&["--help"]);
    assert!(
        available_tools(&stdout(&t)).contains(&"a.b".to_owned()),
        "{}",
        stdout(&t)
    );
    assert!(!available_tools(&stdout(&ours(&["--help"]))).contains(&"a.b".to_owned()));
    assert_eq!(theirs(&["a.b"]).status.code(), Some(0));
    let o = ours(&["a.b"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        stderr(&o).contains("must start with a letter or digit"),
        "{}",
        stderr(&o)
    );

    // A common `slack`: both skip it for the core module; the original says so on stderr at every command,
    // ours in `doctor`.
    let shadow = "Common tool 'slack' shadows core tool — skipped";
    assert!(stderr(&theirs(&["argv0"])).contains(shadow));
    assert!(!stderr(&ours(&["argv0"])).contains(shadow));
    assert!(stdout(&ours(&["doctor"])).contains(shadow));

    // `sys.argv[0]`: the original's console script; ours the program's name (argparse's `prog` is the same).
    let (o, t) = (stdout(&ours(&["argv0"])), stdout(&theirs(&["argv0"])));
    assert_eq!(t.trim(), venv.join("bin/animaworks-tool").to_str().unwrap());
    assert_eq!(o.trim(), "animaworks-tool");

    // `~/…` in ANIMAWORKS_ANIMA_DIR: a folder named `~` for the original (its personal tools are not found),
    // the home folder for ours.
    let tilde = format!("~/{}", w.anima.strip_prefix(w.tmp.path()).unwrap().display());
    let t = original_cmd(&w, &venv)
        .env("ANIMAWORKS_ANIMA_DIR", &tilde)
        .arg("argv0")
        .output()
        .unwrap();
    assert_eq!(t.status.code(), Some(1));
    assert!(stdout(&t).starts_with("Unknown command: argv0"), "{}", stdout(&t));
    let o = w
        .cmd()
        .env("PATH", plain_path())
        .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
        .env("ANIMAWORKS_ANIMA_DIR", &tilde)
        .arg("argv0")
        .output()
        .unwrap();
    assert_eq!(stdout(&o).trim(), "animaworks-tool", "{}", stderr(&o));
}

/// `permissions.json` with what Python's `json` reads and serde alone does not: `NaN`, `Infinity`, numbers past
/// a float's range. Under a key no one reads they change nothing; where AnimaWorks reads a value they refuse every
/// call, with the same message.
#[test]
fn side_by_side_a_permissions_file_with_pythons_json_constants() {
    let Some(venv) = original() else { return };
    let w = World::new();
    w.tool(
        &w.personal(),
        "ran.py",
        "def get_tool_schemas():\n    return []\ndef cli_main(argv):\n    print('ran', argv)\n",
    );
    for body in [
        r#"{"note": NaN, "external_tools": {"allow_all": false, "allow": ["ran"]}, "x": [-Infinity, 1e400]}"#,
        r#"{"note": "NaN", "external_tools": {"allow_all": false, "allow": ["gmail"]}, "x": Infinity}"#,
        r#"{"version": NaN}"#,
        r#"{"version": 1e400}"#,
        r#"{"external_tools": {"allow": [Infinity]}}"#,
        r#"{"external_tools": {"allow_all": -Infinity}}"#,
    ] {
        std::fs::write(w.anima.join("permissions.json"), body).unwrap();
        let t = original_cmd(&w, &venv).args(["ran", "a"]).output().unwrap();
        let o = w
            .cmd()
            .env("PATH", plain_path())
            .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
            .args(["ran", "a"])
            .output()
            .unwrap();
        assert_eq!(
            (o.status.code(), stdout(&o)),
            (t.status.code(), stdout(&t)),
            "{body}: {}",
            stderr(&o)
        );
        let refusal = |e: &str| e.lines().find(|l| l.starts_with("Error: ")).map(str::to_owned);
        assert_eq!(refusal(&stderr(&o)), refusal(&stderr(&t)), "{body}");
    }
}

/// A `permissions.json` that cannot be read as text: both refuse every call, naming the same exception.
#[test]
fn side_by_side_an_unreadable_permissions_file_is_named_as_python_names_it() {
    let Some(venv) = original() else { return };
    let w = World::new();
    w.tool(
        &w.personal(),
        "ran.py",
        "def get_tool_schemas():\n    return []\ndef cli_main(argv):\n    print('ran', argv)\n",
    );
    let file = w.anima.join("permissions.json");
    let run = |expected: &str| {
        let t = original_cmd(&w, &venv).arg("ran").output().unwrap();
        let o = w
            .cmd()
            .env("PATH", plain_path())
            .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
            .arg("ran")
            .output()
            .unwrap();
        assert_eq!((o.status.code(), t.status.code()), (Some(1), Some(1)), "{}", stderr(&o));
        let refusal = |e: &str| e.lines().find(|l| l.starts_with("Error: ")).map(str::to_owned);
        let theirs = refusal(&stderr(&t)).unwrap();
        assert!(theirs.contains(expected), "{theirs}");
        assert_eq!(refusal(&stderr(&o)), Some(theirs));
    };
    std::fs::write(&file, b"{\"a\": \"\xff\"}").unwrap();
    run("UnicodeDecodeError");
    std::fs::remove_file(&file).unwrap();
    std::fs::create_dir(&file).unwrap();
    run("IsADirectoryError");
}

/// A `permissions.json` that is a dangling symbolic link: both refuse the call with exit 1, naming Python's
/// `FileNotFoundError`, before the tool runs (ours refused with the sandbox's failure to start the tool's first
/// `--schemas`: the link cannot be mounted over).
#[test]
fn side_by_side_a_dangling_permissions_link_is_refused_as_the_original_refuses() {
    let Some(venv) = original() else { return };
    // The default settings: the tool's first `--schemas` is started in the sandbox.
    let w = World::sandboxed();
    w.tool(
        &w.personal(),
        "ran.py",
        "def get_tool_schemas():\n    return []\ndef cli_main(argv):\n    print('ran', argv)\n",
    );
    let file = w.anima.join("permissions.json");
    std::os::unix::fs::symlink(w.tmp.path().join("gone.json"), &file).unwrap();
    let t = original_cmd(&w, &venv).args(["ran", "a"]).output().unwrap();
    let o = w
        .cmd()
        .env("PATH", plain_path())
        .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
        .args(["ran", "a"])
        .output()
        .unwrap();
    assert_eq!((o.status.code(), t.status.code()), (Some(1), Some(1)), "{}", stderr(&o));
    assert_eq!(
        (stdout(&o), stdout(&t)),
        (String::new(), String::new()),
        "the tool never runs"
    );
    let refusal = |e: &str| e.lines().find(|l| l.starts_with("Error: ")).map(str::to_owned);
    let theirs = refusal(&stderr(&t)).unwrap();
    assert!(theirs.contains("FileNotFoundError"), "{theirs}");
    assert_eq!(refusal(&stderr(&o)), Some(theirs));
    assert!(
        stderr(&o).contains(file.to_str().unwrap()),
        "the file is named: {}",
        stderr(&o)
    );
}
