//! Drop-in, the table (docs/migrating.md): each difference run side by side with AnimaWorks 0.15 (`bench/.venv`,
//! see [`crate::dropin::original`]), and each row's restore line applied to show the original's behaviour back.

use crate::dropin::{original, original_cmd, site_packages};
use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn plain_path() -> &'static str {
    "/usr/local/bin:/usr/bin:/bin"
}

/// AnimaWorks' own core modules (`core/integrations` of the original's venv), as docs/animaworks.md installs them.
fn core_tools(venv: &Path) -> PathBuf {
    site_packages(venv).join("core/integrations")
}

/// Ours in `w`, with the original's Python and its core modules as the core tier.
fn ours_cmd(w: &World, venv: &Path) -> Command {
    let mut c = w.cmd();
    c.env("PATH", plain_path())
        .env("ANIMAWORKS_PYTHON", venv.join("bin/python"))
        .env("ANIMAWORKS_CORE_TOOLS", core_tools(venv));
    c
}

fn ours(w: &World, venv: &Path, args: &[&str]) -> Output {
    ours_cmd(w, venv).args(args).output().unwrap()
}

/// A module with a gated subcommand.
const WIPER: &str = r#"
import argparse
EXECUTION_PROFILE = {"wipe": {"gated": True}}

def get_tool_schemas():
    return []

def cli_main(argv=None):
    p = argparse.ArgumentParser(prog="wiper")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("wipe")
    print("ran", p.parse_args(argv).cmd)
"#;

fn pending(w: &World) -> usize {
    std::fs::read_dir(w.anima.join("state/background_tasks/pending"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn side_by_side_a_gated_submit_is_refused_as_the_original_refuses_it() {
    let Some(venv) = original() else { return };
    for locale in [None, Some("en")] {
        let w = World::sandboxed();
        if let Some(l) = locale {
            std::fs::write(w.data.join("config.json"), format!(r#"{{"locale": "{l}"}}"#)).unwrap();
        }
        w.tool(&w.personal(), "wiper.py", WIPER);
        for (perms, argv) in [
            (None, &["submit", "slack", "send", "general", "hi"][..]),
            (None, &["submit", "wiper", "wipe"]),
            (
                Some(r#"{"external_tools": {"allow_all": true, "deny": ["wiper"]}}"#),
                &["submit", "wiper", "wipe"],
            ),
        ] {
            if let Some(p) = perms {
                std::fs::write(w.anima.join("permissions.json"), p).unwrap();
            }
            let t = original_cmd(&w, &venv).args(argv).output().unwrap();
            let o = ours(&w, &venv, argv);
            assert_eq!(t.status.code(), Some(1), "{argv:?}: {}", stderr(&t));
            assert_eq!(
                o.status.code(),
                t.status.code(),
                "{argv:?} {locale:?}: {}{}",
                stdout(&o),
                stderr(&o)
            );
            assert_eq!(stdout(&o), stdout(&t), "{argv:?}: nothing on stdout");
            let (mine, theirs) = (stderr(&o), stderr(&t));
            assert_eq!(mine.lines().next(), theirs.lines().next(), "{argv:?} {locale:?}");
            assert!(mine.contains("permissions.json"), "ours adds where to grant it: {mine}");
            assert_eq!(pending(&w), 0, "nothing queued");
        }
    }
}

/// What the original's `use_tool` answers for `slack` and `chatwork` before it loads them: a core tool missing
/// from the registry (`get_permitted_tools`, which leaves out switched-off services) is "not permitted".
const SERVICE_GATE: &str = r#"
import json, sys, logging
from pathlib import Path
logging.disable(logging.CRITICAL)
from core.config.models import load_permissions
from core.tooling.permissions import get_permitted_tools
from core.tooling.handler_base import _error_result
from core.i18n import t
anima_dir, = json.load(sys.stdin)
registry = get_permitted_tools(load_permissions(Path(anima_dir)))
print(json.dumps({n: None if n in registry else _error_result("PermissionDenied", t("tooling.tool_not_permitted", tool=n))
                  for n in ("slack", "chatwork", "github")}, ensure_ascii=False))
"#;

fn original_python(venv: &Path, w: &World, script: &str, input: &Value) -> Value {
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

#[test]
fn side_by_side_use_tool_keeps_switched_off_services_out() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    let use_tool = |tool: &str, action: &str| {
        let req = json!({"tool_name": tool, "action": action, "args": {}});
        let o = feed(ours_cmd(&w, &venv).arg("use-tool"), req.to_string().as_bytes());
        serde_json::from_str::<Value>(&stdout(&o)).unwrap_or(Value::String(stdout(&o)))
    };
    for config in [
        None,
        Some(r#"{"locale": "en"}"#),
        Some(r#"{"external_messaging": {"slack": {"enabled": true}}}"#),
    ] {
        if let Some(c) = config {
            std::fs::write(w.data.join("config.json"), c).unwrap();
        }
        let theirs = original_python(&venv, &w, SERVICE_GATE, &json!([w.anima]));
        for (tool, action) in [("slack", "channels"), ("chatwork", "rooms")] {
            let mine = use_tool(tool, action);
            match &theirs[tool] {
                Value::Null => assert_ne!(mine["error_type"], "PermissionDenied", "{config:?} {tool}: {mine}"),
                refusal => {
                    let refusal: Value = serde_json::from_str(refusal.as_str().unwrap()).unwrap();
                    assert_eq!(mine["error_type"], refusal["error_type"], "{config:?} {tool}: {mine}");
                    assert_eq!(mine["message"], refusal["message"], "{config:?} {tool}");
                    assert!(
                        mine["suggestion"].as_str().unwrap().contains("external_messaging"),
                        "{mine}"
                    );
                }
            }
        }
        // The catalogue leaves them out too.
        let list = use_tool("help", "list");
        let text = list.as_str().unwrap_or_default().to_owned();
        assert!(text.contains("discord"), "{text}");
        for tool in ["slack", "chatwork"] {
            assert!(theirs[tool].is_null() || !text.contains(tool), "{config:?}: {text}");
        }
    }
}

/// Fetches each URL of its argv through the proxy its environment names (a `tunnel:` one with CONNECT, as an
/// HTTPS client does, then a plain request inside the tunnel) and prints what it got.
const FETCHER: &str = r#"
import json, os, sys, http.client, urllib.parse, urllib.request

def _one(url):
    try:
        if url.startswith("tunnel:"):
            host, port = url[len("tunnel:"):].rsplit(":", 1)
            proxy = urllib.parse.urlsplit(os.environ.get("HTTPS_PROXY") or os.environ["https_proxy"])
            c = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
            c.set_tunnel(host, int(port))
            c.request("GET", "/through")
            return c.getresponse().read().decode()
        return urllib.request.urlopen(url, timeout=30).read().decode()
    except Exception as e:
        return "failed: " + type(e).__name__ + ": " + str(e)[:200]

def get_tool_schemas():
    return []

def cli_main(argv):
    print(json.dumps({u: _one(u) for u in argv}, sort_keys=True))
"#;

/// The operator's proxy, on this machine's loopback: records each request line it relays and answers it itself
/// (a plain request with what it was asked; a tunnel with a server of its own behind it).
fn upstream_proxy() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut c = c;
                let head = |r: &mut BufReader<std::net::TcpStream>| -> Vec<String> {
                    let mut lines = Vec::new();
                    loop {
                        let mut l = String::new();
                        if r.read_line(&mut l).unwrap_or(0) == 0 || l == "\r\n" {
                            return lines;
                        }
                        lines.push(l.trim_end().to_owned());
                    }
                };
                let first = head(&mut r);
                let Some(line) = first.first().cloned() else { return };
                log.lock().unwrap().push(line.clone());
                let body = if line.starts_with("CONNECT ") {
                    let _ = write!(c, "HTTP/1.1 200 Connection established\r\n\r\n");
                    let inner = head(&mut r);
                    let target = line.split(' ').nth(1).unwrap_or_default();
                    format!("tunnel to {target} then {}", inner.first().cloned().unwrap_or_default())
                } else {
                    format!("relayed {line}")
                };
                let _ = write!(c, "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            });
        }
    });
    (port, seen)
}

#[test]
fn side_by_side_behind_a_proxy_only_network_modules_reach_out_through_the_callers_proxy() {
    let Some(venv) = original() else { return };
    if !awt_core::sandbox::kernel::support().pid_namespace {
        awt_sys::skipped!("no PID (and network) namespace here: the runner's proxy is not used");
        return;
    }
    let w = World::sandboxed();
    w.tool(&w.personal(), "fetcher.py", FETCHER);
    let (port, seen) = upstream_proxy();
    let proxy = format!("http://127.0.0.1:{port}");
    // Names that resolve nowhere here: only the operator's proxy reaches them.
    let through = ["http://only-upstream.invalid/x?y=1", "tunnel:tunnel.invalid:8443"];
    let with_proxy = |c: &mut Command| {
        c.env("HTTPS_PROXY", &proxy)
            .env("http_proxy", &proxy)
            .env("NO_PROXY", "direct.invalid");
    };
    let mut t = original_cmd(&w, &venv);
    with_proxy(&mut t);
    let t = t.arg("fetcher").args(through).output().unwrap();
    let theirs: Value = serde_json::from_str(stdout(&t).trim()).unwrap_or_else(|e| panic!("{e}: {}", stderr(&t)));
    let relayed_for_them = std::mem::take(&mut *seen.lock().unwrap());

    let mut c = ours_cmd(&w, &venv);
    with_proxy(&mut c);
    let o = c
        .arg("fetcher")
        .args(through)
        .args(["http://direct.invalid/", "http://10.255.255.1/"])
        .output()
        .unwrap();
    let mine: Value = serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    for u in through {
        assert_eq!(mine[u], theirs[u], "{u}: ours {mine} / theirs {theirs}");
        assert!(!mine[u].as_str().unwrap().starts_with("failed"), "{mine}");
    }
    // NO_PROXY is honoured (direct, where the name does not resolve), and the sandbox's checks come first: a
    // private address is refused, never handed to the caller's proxy.
    assert!(
        mine["http://direct.invalid/"].as_str().unwrap().contains("502"),
        "{mine}"
    );
    assert!(mine["http://10.255.255.1/"].as_str().unwrap().contains("403"), "{mine}");
    // The request lines but for their HTTP version (Python asks CONNECT in 1.0, the runner in 1.1).
    let asked = |lines: Vec<String>| -> Vec<String> {
        lines
            .iter()
            .map(|l| l.rsplit_once(' ').map_or(l.clone(), |(a, _)| a.to_owned()))
            .collect()
    };
    let relayed = asked(seen.lock().unwrap().clone());
    assert_eq!(
        relayed,
        asked(relayed_for_them),
        "the operator's proxy was asked what the original asks it"
    );
    assert_eq!(
        relayed,
        ["GET http://only-upstream.invalid/x?y=1", "CONNECT tunnel.invalid:8443"]
    );
    let audit = audit_text(&w);
    let line: Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    let p = &line["sandbox"]["proxy"];
    assert_eq!((&p["relayed"], &p["upstream"]), (&json!(2), &json!(2)), "{line}");
    assert_eq!(p["refused_targets"], json!(["10.255.255.1:80"]), "{line}");
}

/// A sandboxed world outside `/tmp` (as an operator's data dir and home are): the runner's own files that do
/// not exist yet in the data dir would otherwise lie inside a grant of `/tmp`.
fn world_outside_tmp() -> World {
    // The checkout itself may lie in /tmp (a clone made there): then /var/tmp, which never does.
    let target_tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if target_tmp.starts_with("/tmp") { Path::new("/var/tmp") } else { target_tmp };
    let tmp = tempfile::tempdir_in(base).unwrap();
    let core = tmp.path().join("core");
    let data = tmp.path().join("data");
    let anima = tmp.path().join("animas").join("alice");
    for d in [&core, &data.join("common_tools"), &anima.join("tools")] {
        std::fs::create_dir_all(d).unwrap();
    }
    World { tmp, core, data, anima }
}

/// Writes each path of its argv (making its folder), and says what happened to each.
const WRITER: &str = r#"
import json, os

def get_tool_schemas():
    return []

def _write(p):
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write("x")
        return "ok"
    except Exception as e:
        return type(e).__name__

def cli_main(argv):
    print(json.dumps({p: _write(p) for p in argv}, sort_keys=True))
"#;

#[test]
fn the_write_rows_restore_line_restores_the_originals_writes() {
    let Some(venv) = original() else { return };
    if !awt_core::sandbox::kernel::support().pid_namespace {
        awt_sys::skipped!("no mount namespace here: writes are an allow list without the row's mounts");
        return;
    }
    let w = world_outside_tmp();
    w.tool(&w.personal(), "writer.py", WRITER);
    // A home folder apart from the data dir (see the row: the runner's files not made yet in a data dir inside a
    // granted folder keep its top level closed).
    let home_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = home_dir.path();
    let scratch = tempfile::tempdir().unwrap();
    let targets = |tag: &str| -> Vec<String> {
        vec![
            scratch.path().join(format!("x-{tag}")).display().to_string(),
            format!("/tmp/awt-dropin-{}-{tag}", std::process::id()),
            home.join(".cache/app/x").display().to_string(),
            home.join(format!("top-{tag}")).display().to_string(),
        ]
    };
    let run = |c: &mut Command, tag: &str| -> (Value, String) {
        let o = c.env("HOME", home).arg("writer").args(targets(tag)).output().unwrap();
        assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
        (serde_json::from_str(stdout(&o).trim()).unwrap(), stderr(&o))
    };
    let (theirs, _) = run(&mut original_cmd(&w, &venv), "theirs");
    assert!(theirs.as_object().unwrap().values().all(|v| v == "ok"), "{theirs}");
    let _ = std::fs::remove_dir_all(home.join(".cache"));
    let (mine, _) = run(&mut ours_cmd(&w, &venv), "default");
    assert!(
        mine.as_object().unwrap().values().all(|v| v == "PermissionError"),
        "the row's difference: {mine}"
    );

    // The row's line, with a folder that is not there yet: said, on stderr and in the audit line.
    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"sandbox": {"write": ["/tmp", "$HOME/.cache", "$HOME"]}}"#,
    )
    .unwrap();
    let (_, err) = run(&mut ours_cmd(&w, &venv), "missing");
    assert!(err.contains("does not exist") && err.contains(".cache"), "{err}");
    let line: Value = serde_json::from_str(audit_text(&w).lines().last().unwrap()).unwrap();
    assert!(line["sandbox"]["warnings"].to_string().contains(".cache"), "{line}");
    // Made, it is granted: every write of the original works, at the top level of /tmp and of $HOME too.
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    let (mine, err) = run(&mut ours_cmd(&w, &venv), "ours");
    let want: Value = targets("ours")
        .iter()
        .map(|p| (p.clone(), json!("ok")))
        .collect::<serde_json::Map<_, _>>()
        .into();
    assert_eq!(mine, want, "{err}");
    for tag in ["theirs", "ours", "missing", "default"] {
        let _ = std::fs::remove_file(format!("/tmp/awt-dropin-{}-{tag}", std::process::id()));
    }
    // The home folder's secrets stay hidden and unwritable where they exist.
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let o = ours_cmd(&w, &venv)
        .env("HOME", home)
        .args(["writer", &home.join(".ssh/authorized_keys").display().to_string()])
        .output()
        .unwrap();
    assert!(stdout(&o).contains("Error"), "{}", stdout(&o));
    assert!(!home.join(".ssh/authorized_keys").exists());
}

/// Starts a daemon (a new session, as `nohup … &` or `setsid` does) and returns.
fn daemon_module(marker: &str) -> String {
    format!(
        r#"
import subprocess

def get_tool_schemas():
    return []

def cli_main(argv):
    subprocess.Popen(["bash", "-c", "exec -a {marker} sleep 120"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print("started")
"#
    )
}

fn daemons(marker: &str) -> Vec<i32> {
    pids_with_cmdline(marker)
        .into_iter()
        .filter(|p| proc_stat(*p).is_some_and(|s| s.0 != "Z"))
        .collect()
}

fn end_all(marker: &str) {
    for p in daemons(marker) {
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
}

#[test]
fn the_daemon_rows_restore_line_lets_the_daemon_outlive_the_call() {
    let Some(venv) = original() else { return };
    if !awt_core::sandbox::kernel::support().pid_namespace {
        awt_sys::skipped!("no PID namespace here: a daemon outlives its call anyway");
        return;
    }
    let w = World::sandboxed();
    let marker = format!("awt-dropin-daemon-{}", std::process::id());
    w.tool(&w.personal(), "daemon.py", &daemon_module(&marker));
    let t = original_cmd(&w, &venv).arg("daemon").output().unwrap();
    assert_eq!(stdout(&t), "started\n", "{}", stderr(&t));
    let outlived = !daemons(&marker).is_empty();
    end_all(&marker);
    assert!(outlived, "the original's daemon outlives the call");

    let o = ours(&w, &venv, &["daemon"]);
    assert_eq!(stdout(&o), "started\n", "{}", stderr(&o));
    assert!(
        eventually(10, || daemons(&marker).is_empty()),
        "the row: it ends with the call"
    );

    // The row's line.
    std::fs::write(w.anima.join("permissions.json"), r#"{"sandbox": {"personal": "off"}}"#).unwrap();
    std::fs::write(w.data.join("animaworks-tool.json"), r#"{"limits": {"cgroups": false}}"#).unwrap();
    let o = ours(&w, &venv, &["daemon"]);
    assert_eq!(stdout(&o), "started\n", "{}", stderr(&o));
    let outlived = !daemons(&marker).is_empty();
    end_all(&marker);
    assert!(outlived, "restored: the daemon outlives the call");
}

/// What a module's `cli_main` sees of itself: argparse's program name, its module and logger names, its argv.
const SELF_AWARE: &str = r#"
import argparse, json, logging, os, sys

def get_tool_schemas():
    return []

def cli_main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("words", nargs="*")
    ns = p.parse_args(argv)
    print(json.dumps({"prog": p.prog, "name": __name__, "logger": logging.getLogger(__name__).name,
                      "argv0": os.path.basename(sys.argv[0]), "argv": sys.argv[1:], "words": ns.words}))
"#;

#[test]
fn side_by_side_what_a_cli_main_sees_of_itself() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    w.tool(&w.personal(), "selfaware.py", SELF_AWARE);
    w.tool(&w.common(), "commonself.py", SELF_AWARE);
    for argv in [&["selfaware", "a", "b"][..], &["selfaware"], &["commonself", "x"]] {
        let t = original_cmd(&w, &venv).args(argv).output().unwrap();
        let o = ours(&w, &venv, argv);
        assert_eq!(
            (o.status.code(), stdout(&o)),
            (t.status.code(), stdout(&t)),
            "{argv:?}: {}",
            stderr(&o)
        );
        assert!(t.status.success(), "{}", stderr(&t));
    }
    // argparse's own usage line, too.
    let t = original_cmd(&w, &venv).args(["selfaware", "--bad"]).output().unwrap();
    let o = ours(&w, &venv, &["selfaware", "--bad"]);
    assert_eq!((o.status.code(), stderr(&o)), (t.status.code(), stderr(&t)));
}

/// The original's `_handle_use_tool` (taken from its source: handler.py imports the whole server) on requests
/// it answers before it looks at any tool.
const USE_TOOL_EARLY: &str = r#"
import ast, json, logging, pathlib, sys
from typing import Any
logging.disable(logging.CRITICAL)
import core.tooling
from core.tooling.handler_base import _error_result
from core.i18n import t
src = pathlib.Path(core.tooling.__file__).with_name("handler.py").read_text(encoding="utf-8")
ns = {"_error_result": _error_result, "t": t, "Any": Any, "Path": pathlib.Path, "logger": logging.getLogger("x")}
for node in ast.walk(ast.parse(src)):
    if isinstance(node, ast.FunctionDef) and node.name == "_handle_use_tool":
        exec(compile(ast.Module(body=[node], type_ignores=[]), "handler.py", "exec"), ns)
reqs = json.load(sys.stdin)
print(json.dumps([ns["_handle_use_tool"](None, r) for r in reqs], ensure_ascii=False))
"#;

#[test]
fn side_by_side_a_use_tool_request_without_its_names() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    let reqs = json!([{"tool_name": "x"}, {"action": "y"}, {"tool_name": "", "action": "y"}, {}]);
    let theirs = original_python(&venv, &w, USE_TOOL_EARLY, &json!(reqs));
    for (i, req) in reqs.as_array().unwrap().iter().enumerate() {
        let o = feed(ours_cmd(&w, &venv).arg("use-tool"), req.to_string().as_bytes());
        let mine: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let their: Value = serde_json::from_str(theirs[i].as_str().unwrap()).unwrap();
        assert_eq!(
            (&mine["error_type"], &mine["message"]),
            (&their["error_type"], &their["message"]),
            "{req}"
        );
    }
}

/// What the sandbox's rows are about: a secret of the home folder read, a program the module wrote run, a new
/// file at the top of its anima dir.
const EFFECTS: &str = r##"
import json, os, pathlib, subprocess

ANIMA = pathlib.Path(os.environ["ANIMAWORKS_ANIMA_DIR"])

def _try(fn):
    try:
        return fn()
    except Exception as e:
        return type(e).__name__

def _exec_own():
    b = ANIMA / "bin"
    b.mkdir(exist_ok=True)
    s = b / "hello.sh"
    s.write_text("#!/bin/sh\necho hi\n")
    s.chmod(0o755)
    return subprocess.run([str(s)], capture_output=True, text=True, check=True).stdout.strip()

def _top_new():
    (ANIMA / "new.txt").write_text("n")
    return "ok"

def _beside_me():
    (pathlib.Path(__file__).parent / "effects.cache").write_text("c")
    return "ok"

def _signal(pid):
    os.kill(int(pid), 0)
    return "ok"

def get_tool_schemas():
    return []

def cli_main(argv):
    ops = {
        "read_secret": lambda: (pathlib.Path.home() / ".aws/credentials").read_text(),
        "exec_own": _exec_own,
        "top_new": _top_new,
        "beside_me": _beside_me,
    }
    out = {}
    for k in argv:
        name, _, arg = k.partition(":")
        out[name] = _try(lambda: _signal(arg)) if name == "signal" else _try(ops[k])
    print(json.dumps(out, sort_keys=True))
"##;

#[test]
fn the_sandbox_rows_restore_lines_restore_the_originals_behaviour() {
    let Some(venv) = original() else { return };
    if !awt_core::sandbox::kernel::support().pid_namespace {
        awt_sys::skipped!("no mount namespace here: the deny list is not mounted");
        return;
    }
    let w = World::sandboxed();
    w.tool(&w.personal(), "effects.py", EFFECTS);
    std::fs::create_dir_all(w.tmp.path().join(".aws")).unwrap();
    std::fs::write(w.tmp.path().join(".aws/credentials"), "[default]\nkey = k\n").unwrap();
    std::fs::create_dir_all(w.data.join("shared")).unwrap();
    // A process outside the call, as the original's module may signal it.
    let mut outside = Command::new("sleep").arg("60").spawn().unwrap();
    let signal = format!("signal:{}", outside.id());
    let ops = ["read_secret", "exec_own", "top_new", "beside_me", signal.as_str()];
    let reset = || {
        let _ = std::fs::remove_dir_all(w.anima.join("bin"));
        let _ = std::fs::remove_file(w.anima.join("new.txt"));
        let _ = std::fs::remove_file(w.personal().join("effects.cache"));
    };
    let run = |c: &mut Command, ops: &[&str]| -> Value {
        reset();
        let o = c.arg("effects").args(ops).output().unwrap();
        assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
        serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
    };
    let theirs = run(&mut original_cmd(&w, &venv), &ops);
    assert_eq!(theirs["exec_own"], "hi", "{theirs}");
    // Nothing made in the operator's tree before the first sandboxed call; then the row's files.
    let made = [
        w.anima.join("state/background_notifications"),
        w.data.join("shared/credentials.json"),
    ];
    assert!(made.iter().all(|p| !p.exists()));
    // An anima dir without permissions.json and status.json: no new file at its top level (their rows), and the
    // others' rows.
    let mine = run(&mut ours_cmd(&w, &venv), &ops);
    assert!(made.iter().all(|p| p.exists()), "the row says so");
    for op in ["read_secret", "exec_own", "top_new", "beside_me", "signal"] {
        assert_ne!(mine[op], theirs[op], "{op}: the row's difference: {mine}");
    }
    // Each row's restore line: the top level takes new files once neither name is missing.
    std::fs::write(w.anima.join("permissions.json"), "{}").unwrap();
    assert_ne!(
        run(&mut ours_cmd(&w, &venv), &["top_new"])["top_new"],
        theirs["top_new"]
    );
    std::fs::write(w.anima.join("status.json"), "{}").unwrap();
    assert_eq!(
        run(&mut ours_cmd(&w, &venv), &["top_new"])["top_new"],
        theirs["top_new"]
    );
    std::fs::write(
        w.anima.join("permissions.json"),
        r#"{"sandbox": {"exec": ["$ANIMA_DIR/bin"]}}"#,
    )
    .unwrap();
    std::fs::create_dir_all(w.anima.join("bin")).unwrap();
    let o = ours_cmd(&w, &venv).args(["effects", "exec_own"]).output().unwrap();
    assert_eq!(json(&o)["exec_own"], theirs["exec_own"], "{}", stderr(&o));
    std::fs::write(w.anima.join("permissions.json"), r#"{"sandbox": {"personal": "off"}}"#).unwrap();
    assert_eq!(
        run(&mut ours_cmd(&w, &venv), &ops),
        theirs,
        "the tier off: every one of them"
    );
    let _ = outside.kill();
    let _ = outside.wait();

    // The tiers off: the first call makes nothing in the operator's tree.
    let w = World::sandboxed();
    w.tool(&w.personal(), "effects.py", EFFECTS);
    std::fs::create_dir_all(w.data.join("shared")).unwrap();
    std::fs::write(w.anima.join("permissions.json"), r#"{"sandbox": {"personal": "off"}}"#).unwrap();
    let o = ours_cmd(&w, &venv).args(["effects", "top_new"]).output().unwrap();
    assert_eq!(json(&o)["top_new"], "ok", "{}", stderr(&o));
    assert!(
        [
            w.anima.join("state/background_notifications"),
            w.data.join("shared/credentials.json")
        ]
        .iter()
        .all(|p| !p.exists()),
        "restored: nothing made"
    );
}

/// Opens 1,100 files at once and writes one byte past 1 GiB of a sparse file: within what the original allows,
/// past the runner's default limits of a personal tool.
const HEAVY: &str = r#"
import json, os, tempfile

def _try(fn):
    try:
        return fn()
    except Exception as e:
        return type(e).__name__

def _files():
    d = tempfile.mkdtemp()
    fs = [open(os.path.join(d, str(i)), "w") for i in range(1100)]
    for f in fs:
        f.close()
    return "ok"

def _big():
    with tempfile.TemporaryFile() as f:
        f.seek((1 << 30) + 1)
        f.write(b"x")
        f.flush()
    return "ok"

def get_tool_schemas():
    return []

def cli_main(argv):
    print(json.dumps({"files": _try(_files), "big": _try(_big)}, sort_keys=True))
"#;

#[test]
fn the_limits_rows_restore_line_lifts_the_limits() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    w.tool(&w.personal(), "heavy.py", HEAVY);
    let t = original_cmd(&w, &venv).arg("heavy").output().unwrap();
    let theirs: Value = serde_json::from_str(stdout(&t).trim()).unwrap_or_else(|e| panic!("{e}: {}", stderr(&t)));
    assert_eq!(theirs, json!({"files": "ok", "big": "ok"}));
    let o = ours(&w, &venv, &["heavy"]);
    let mine: Value = serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)));
    assert_eq!(mine, json!({"files": "OSError", "big": "OSError"}), "the row: limited");
    std::fs::write(
        w.data.join("animaworks-tool.json"),
        r#"{"limits": {"common": {"memory_mib": null, "processes": null, "open_files": null, "file_size_mib": null},
                       "personal": {"memory_mib": null, "processes": null, "open_files": null, "file_size_mib": null}}}"#,
    )
    .unwrap();
    let o = ours(&w, &venv, &["heavy"]);
    assert_eq!(stdout(&o).trim(), stdout(&t).trim(), "{}", stderr(&o));
}

/// Asks for a credential whose key does not start with its name, as AnimaWorks' `x_search` does.
const TWITTERISH: &str = r#"
import hashlib
from core.integrations._base import get_credential

def get_tool_schemas():
    return []

def cli_main(argv):
    try:
        token = get_credential("x_twitter", "x_search", env_var="TWITTER_BEARER_TOKEN")
        # The token, and its digest for a caller that sees it masked.
        print(token, hashlib.sha256(token.encode()).hexdigest())
    except Exception as e:
        print(type(e).__name__)
"#;

#[test]
fn the_credential_key_rows_restore_line_names_the_key() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    w.tool(&w.personal(), "twitterish.py", TWITTERISH);
    let with_token = |mut c: Command| {
        let o = c
            .env("TWITTER_BEARER_TOKEN", "tw-token-5678")
            .arg("twitterish")
            .output()
            .unwrap();
        (stdout(&o).trim().to_owned(), stderr(&o))
    };
    let (theirs, err) = with_token(original_cmd(&w, &venv));
    let digest = sha256_hex(b"tw-token-5678");
    assert_eq!(theirs, format!("tw-token-5678 {digest}"), "{err}");
    // A legacy argv's output is masked (docs/migrating.md): the token shows as `***`, its digest says it was seen.
    let masked = format!("*** {digest}");
    w.grant_credentials("twitterish", &["x_twitter"]);
    let (mine, _) = with_token(ours_cmd(&w, &venv));
    assert_ne!(mine, masked, "the row: the name alone does not cover the key");
    assert!(!mine.contains(&digest), "{mine}");
    w.grant_credentials("twitterish", &["x_twitter", "TWITTER_BEARER_TOKEN"]);
    let (mine, err) = with_token(ours_cmd(&w, &venv));
    assert_eq!(mine, masked, "{err}");
    w.grant_credentials("twitterish", &["*"]);
    let (mine, err) = with_token(ours_cmd(&w, &venv));
    assert_eq!(mine, masked, "{err}");
}

/// The SHA-256 of `data` in lowercase hex, as Python's `hashlib.sha256(…).hexdigest()`.
fn sha256_hex(data: &[u8]) -> String {
    let o = feed(Command::new("sha256sum").arg("-"), data);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).split_whitespace().next().unwrap_or_default().to_owned()
}

#[test]
fn side_by_side_an_invalid_or_newer_permissions_file() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    w.tool(&w.personal(), "selfaware.py", SELF_AWARE);
    for body in [
        r#"{"external_tools": "#,
        "",
        "[]",
        r#"{"external_tools": {"allow_all": "maybe"}}"#,
    ] {
        std::fs::write(w.anima.join("permissions.json"), body).unwrap();
        let t = original_cmd(&w, &venv).arg("selfaware").output().unwrap();
        let o = ours(&w, &venv, &["selfaware"]);
        assert_eq!(o.status.code(), t.status.code(), "{body:?}");
        // The original logs the exception's traceback first; its refusal is its last line.
        let theirs = stderr(&t).lines().last().unwrap_or_default().to_owned();
        assert!(theirs.starts_with("Error: "), "{theirs}");
        assert_eq!(stderr(&o).lines().next().unwrap_or_default(), theirs, "{body:?}");
    }
    // A version it does not know: the fields it knows, and AnimaWorks' warning.
    std::fs::write(w.anima.join("permissions.json"), r#"{"version": 2}"#).unwrap();
    let t = original_cmd(&w, &venv).arg("selfaware").output().unwrap();
    let o = ours(&w, &venv, &["selfaware"]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (t.status.code(), stdout(&t)),
        "{}",
        stderr(&o)
    );
    let warning = "permissions.json version 2 is unknown; using known fields only";
    assert!(stderr(&t).contains(warning), "{}", stderr(&t));
    assert_eq!(
        stderr(&o).lines().filter(|l| *l == warning).count(),
        1,
        "{}",
        stderr(&o)
    );
}

/// Where a module's temporary files go, and whether it can write a file by name in the caller's `TMPDIR`.
const TEMPS: &str = r#"
import json, os, tempfile

def get_tool_schemas():
    return []

def cli_main(argv):
    try:
        with open(os.path.join(argv[0], "named.tmp"), "w") as f:
            f.write("x")
        named = "ok"
    except Exception as e:
        named = type(e).__name__
    print(json.dumps({"gettempdir": tempfile.gettempdir(), "named": named}))
"#;

#[test]
fn the_tmpdir_rows_restore_lines() {
    let Some(venv) = original() else { return };
    if !awt_core::sandbox::kernel::support().pid_namespace {
        awt_sys::skipped!("no mount namespace here");
        return;
    }
    let w = world_outside_tmp();
    w.tool(&w.personal(), "temps.py", TEMPS);
    let big = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let big_s = big.path().to_str().unwrap();
    let run = |mut c: Command| -> Value {
        let o = c.env("TMPDIR", big.path()).args(["temps", big_s]).output().unwrap();
        let _ = std::fs::remove_file(big.path().join("named.tmp"));
        serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("{e}: {}", stderr(&o)))
    };
    let theirs = run(original_cmd(&w, &venv));
    assert_eq!(theirs, json!({"gettempdir": big_s, "named": "ok"}));
    let mine = run(ours_cmd(&w, &venv));
    assert_ne!(mine["gettempdir"], theirs["gettempdir"], "the row: {mine}");
    assert_eq!(mine["named"], "PermissionError", "{mine}");
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"sandbox": {"write": [big_s]}}).to_string(),
    )
    .unwrap();
    assert_eq!(run(ours_cmd(&w, &venv))["named"], "ok", "granted, by name");
    std::fs::write(w.anima.join("permissions.json"), r#"{"sandbox": {"personal": "off"}}"#).unwrap();
    assert_eq!(run(ours_cmd(&w, &venv)), theirs, "the tier off");
}

#[test]
fn side_by_side_a_module_that_fails_to_import() {
    let Some(venv) = original() else { return };
    let w = World::sandboxed();
    w.tool(
        &w.personal(),
        "broken.py",
        "import nosuchmodule_awt\n\ndef cli_main(argv):\n    print(argv)\n",
    );
    let t = original_cmd(&w, &venv).args(["broken", "go"]).output().unwrap();
    let o = ours(&w, &venv, &["broken", "go"]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (t.status.code(), stdout(&t)),
        "{}",
        stderr(&o)
    );
    let line = "ModuleNotFoundError: No module named 'nosuchmodule_awt'";
    for err in [stderr(&t), stderr(&o)] {
        assert!(err.contains("Traceback (most recent call last):"), "{err}");
        assert!(err.lines().any(|l| l == line), "{err}");
    }
}

/// The `extra_mcp_servers` row: the original hands an anima's MCP servers to its agent's MCP client only; ours
/// also offers them as tools. The row's restore line (the servers in `external_tools.deny`) keeps them out: not
/// offered to an LLM, and a call is refused.
#[test]
fn the_extra_mcp_servers_rows_restore_line_keeps_them_out() {
    let o = Command::new("python3")
        .args(["-c", "import sys, mcp.server.mcpserver; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "the MCP Python SDK is needed: pip install -r runner/tests/mcp_client/requirements.txt ({})",
        String::from_utf8_lossy(&o.stderr)
    );
    let python = String::from_utf8(o.stdout).unwrap().trim().to_owned();
    let server_py = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_servers/py_server.py");
    let w = World::new();
    let server = json!({"command": python, "args": [server_py], "env": {"LOG_LEVEL": "warn"}});
    std::fs::write(
        w.data.join("config.json"),
        json!({"anima_defaults": {"extra_mcp_servers": {"shared_py": server}}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        w.anima.join("status.json"),
        json!({"extra_mcp_servers": {"own_py": server}}).to_string(),
    )
    .unwrap();
    let offered = |w: &World| {
        let o = w.run(&["schemas", "--format", "anthropic"]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    // The row's difference: ours offers them.
    let before = offered(&w);
    assert!(before.contains("own_py_echo") && before.contains("shared_py_echo"), "{before}");
    // The restore line.
    std::fs::write(
        w.anima.join("permissions.json"),
        json!({"external_tools": {"deny": ["own_py", "shared_py"]}}).to_string(),
    )
    .unwrap();
    let after = offered(&w);
    assert!(!after.contains("own_py") && !after.contains("shared_py"), "{after}");
    for server in ["own_py", "shared_py"] {
        let o = w.run(&["call", server, "echo", "--json", r#"{"text": "x"}"#]);
        assert_eq!(code(&o), 6, "{server}: {} {}", stdout(&o), stderr(&o));
        assert!(stderr(&o).contains("external_tools.deny") || stdout(&o).contains("external_tools.deny"));
    }
}

/// The exec row's memfd part: a tool may not make an executable memfd (one without `MFD_NOEXEC_SEAL`) where
/// the original lets it; the row's restore line for memfds (the tier `"off"`) lets it again.
#[test]
fn the_exec_rows_memfd_restore_line_lets_a_tool_make_an_executable_memfd() {
    let k = awt_core::sandbox::kernel::support();
    if k.landlock_abi < 6 || !k.seccomp {
        awt_sys::skipped!("no Landlock ABI 6 and seccomp here: the sandbox's memfd rule cannot be tested");
        return;
    }
    let w = World::sandboxed();
    std::fs::write(w.anima.join("permissions.json"), "{}").unwrap();
    std::fs::write(w.anima.join("status.json"), "{}").unwrap();
    let body = r#"python3 -c 'import os, json
try:
    os.close(os.memfd_create("x", 0)); print(json.dumps("ok"))
except OSError as e:
    print(json.dumps(e.__class__.__name__ + ":" + str(e.errno)))'"#;
    w.tool(
        &w.personal(),
        "mf.sh",
        &bash_tool(r#"[{"name":"mf_make","input_schema":{"type":"object"}}]"#, body),
    );
    let made = |w: &World| {
        let o = w.run(&["call", "mf", "make"]);
        assert!(o.status.success(), "{} {}", stdout(&o), stderr(&o));
        stdout(&o).trim().to_owned()
    };
    // The row's difference: refused confined.
    assert_ne!(made(&w), "ok", "an executable memfd is refused in the sandbox");
    // The restore line.
    w.settings(&json!({"sandbox": {"personal": "off"}}).to_string());
    assert_eq!(made(&w), "ok", "the tier off makes memfds as the original does");
}
