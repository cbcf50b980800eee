//! Six real MCP servers (npm: the filesystem, memory and everything reference servers; PyPI: mcp-server-time,
//! -fetch, -git), declared as a user copies them (`npx -y …`, `uvx …`), installed by `mcp-servers install`, run
//! confined in the common tier. test.sh installs them, pinned by runner/tests/mcp_real_servers/animaworks-tool.json,
//! into target/mcp-real-servers (kept while the pins are unchanged); each world links its data dir's
//! `mcp_servers` there.

use crate::mcp_servers::Gateway;
use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The fixture's declarations, as test.sh installed them.
fn fixture() -> Value {
    let text = include_str!("../mcp_real_servers/animaworks-tool.json");
    serde_json::from_str::<Value>(text).unwrap()["mcp_servers"].clone()
}

/// The folder test.sh installed the six servers in, when every one is there.
fn installed() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/mcp-real-servers/mcp_servers");
    let all = fixture()
        .as_object()
        .unwrap()
        .keys()
        .all(|n| root.join(n).join("lock.json").is_file());
    if all {
        return Some(std::fs::canonicalize(root).unwrap());
    }
    awt_sys::skipped!(
        "run ./test.sh once: it installs the six real MCP servers (npm, PyPI) into target/mcp-real-servers"
    );
    None
}

/// A world with the sandbox as shipped (the common tier confined), the anima given a status.json, and the
/// servers named declared as the fixture does, each with `extra` merged in.
fn world(root: &Path, servers: &[(&str, Value)], settings: Value) -> World {
    let w = World::sandboxed();
    std::fs::write(w.anima.join("status.json"), "{}").unwrap();
    std::os::unix::fs::symlink(root, w.data.join("mcp_servers")).unwrap();
    let f = fixture();
    let mut decl = json!({});
    for (name, extra) in servers {
        let mut d = f[*name].clone();
        if let Value::Object(m) = extra {
            for (k, v) in m {
                if k == "args" {
                    d["args"]
                        .as_array_mut()
                        .unwrap()
                        .extend(v.as_array().unwrap().iter().cloned());
                } else {
                    d[k] = v.clone();
                }
            }
        }
        decl[*name] = d;
    }
    let mut s = settings;
    s["mcp_servers"] = decl;
    std::fs::write(w.data.join("animaworks-tool.json"), s.to_string()).unwrap();
    w
}

fn permissions(w: &World, v: Value) {
    std::fs::write(w.anima.join("permissions.json"), v.to_string()).unwrap();
}

fn call(w: &World, tool: &str, action: &str, args: Value) -> std::process::Output {
    w.run(&["call", tool, action, "--json", &args.to_string()])
}

/// The docs' own example, `npx -y @modelcontextprotocol/server-filesystem <dir>`, as written: refused confined
/// with the command to run, then installed by that command (from the registry) and called confined.
#[test]
fn the_docs_npx_example_runs_confined_after_mcp_servers_install() {
    let w = World::sandboxed();
    std::fs::write(w.anima.join("status.json"), "{}").unwrap();
    let docs = w.tmp.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("a.txt"), "from the docs").unwrap();
    let settings = json!({"mcp_servers": {"files": {"command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-filesystem", &docs], "handshake_s": 120}}});
    std::fs::write(w.data.join("animaworks-tool.json"), settings.to_string()).unwrap();
    let a = docs.join("a.txt");
    let o = w.run(&["files", "read_text_file", "--path", a.to_str().unwrap()]);
    assert_eq!(code(&o), 9, "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("`animaworks-tool mcp-servers install files`"),
        "names the command: {}",
        stderr(&o)
    );
    // As a person runs it: their environment (npm's and pip's settings, certificates), the world's folders.
    let o = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(&w.data)
        .arg("--anima-dir")
        .arg(&w.anima)
        .args(["mcp-servers", "install", "files"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !o.status.success() && stderr(&o).contains("could not be reached") {
        awt_sys::skipped!("the npm registry is not reachable: {}", stderr(&o));
        return;
    }
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("files: @modelcontextprotocol/server-filesystem "),
        "{}",
        stdout(&o)
    );
    let lock: Value =
        serde_json::from_slice(&std::fs::read(w.data.join("mcp_servers/files/lock.json")).unwrap()).unwrap();
    assert!(!lock["version"].as_str().unwrap().is_empty(), "{lock}");
    let o = w.run(&["files", "read_text_file", "--path", a.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("from the docs"), "{}", stdout(&o));
    // Installed again: kept, the lock matches.
    let o = w.run(&["mcp-servers", "install"]);
    assert!(
        o.status.success() && stdout(&o).contains("kept"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
}

/// What `mcp-servers install` refuses: an unknown name, a server that is no starter.
#[test]
fn mcp_servers_install_says_what_it_cannot_install() {
    let w = World::new();
    w.settings(&json!({"mcp_servers": {"py": {"command": "python3", "args": ["x.py"]}}}).to_string());
    let o = w.run(&["mcp-servers", "install", "nope"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("no MCP server named \"nope\""), "{}", stderr(&o));
    let o = w.run(&["mcp-servers", "install", "py"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("nothing to install"), "{}", stderr(&o));
    let o = w.run(&["mcp-servers", "install", "--help"]);
    assert!(o.status.success() && stdout(&o).contains("lock.json"), "{}", stdout(&o));
}

/// A registry that cannot be reached is said to be one.
#[test]
fn an_unreachable_registry_is_named() {
    let w = World::new();
    w.settings(&json!({"mcp_servers": {"x": {"command": "npx", "args": ["-y", "left-pad@1.3.0"]}}}).to_string());
    // A registry on a closed loopback port: npm's own flag, as a user's .npmrc would set it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let npmrc = w.tmp.path().join("npmrc");
    std::fs::write(
        &npmrc,
        format!(
            "registry=http://{closed}/\nfetch-retries=0\ncache={}\n",
            w.tmp.path().join("npm-cache").display()
        ),
    )
    .unwrap();
    if which("npm").is_none() {
        awt_sys::skipped!("npm is not installed");
        return;
    }
    let o = w
        .cmd()
        .args(["mcp-servers", "install"])
        .env("NPM_CONFIG_USERCONFIG", &npmrc)
        .output()
        .unwrap();
    assert_ne!(code(&o), 0);
    assert!(
        stderr(&o).contains("the npm registry could not be reached"),
        "{}",
        stderr(&o)
    );
    assert!(!w.data.join("mcp_servers/x/lock.json").exists());
}

fn which(p: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(p))
        .find(|f| f.is_file())
}

/// A tool cannot plant code where servers are installed, even where the anima's permissions grant writing
/// there: neither a new lock (which says what a server runs) nor a new installation.
#[test]
fn no_call_writes_where_servers_are_installed() {
    let w = World::sandboxed();
    std::fs::write(w.anima.join("status.json"), "{}").unwrap();
    let folder = w.data.join("mcp_servers/time");
    std::fs::create_dir_all(&folder).unwrap();
    let lock = folder.join("lock.json");
    std::fs::write(&lock, "{}").unwrap();
    let other = w.data.join("other");
    std::fs::create_dir_all(&other).unwrap();
    permissions(
        &w,
        json!({"version": 1, "sandbox": {"write": [w.data.join("mcp_servers"), &other]}}),
    );
    let evil = folder.join("evil");
    let script = format!(
        "l=no; (echo planted > {l}) 2>/dev/null && l=yes; p=no; mkdir {e} 2>/dev/null && p=yes; \
         g=no; touch {o}/ok 2>/dev/null && g=yes; echo \"{{\\\"lock\\\": \\\"$l\\\", \\\"planted\\\": \\\"$p\\\", \\\"grant\\\": \\\"$g\\\"}}\"",
        l = lock.display(),
        e = evil.display(),
        o = other.display(),
    );
    w.tool(
        &w.common(),
        "plant",
        &bash_tool(
            r#"{"protocol":1,"name":"plant","actions":[{"name":"go","input_schema":{"type":"object"}}]}"#,
            &script,
        ),
    );
    let o = w.run(&["plant", "go"]);
    let out = stdout(&o);
    assert!(
        out.contains("\"grant\":\"yes\""),
        "the grant is in force elsewhere: {out}{}",
        stderr(&o)
    );
    assert!(
        out.contains("\"lock\":\"no\"") && out.contains("\"planted\":\"no\""),
        "{out}"
    );
    assert!(!evil.exists());
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), "{}");
}

/// Each of the six answers a call, confined in the common tier (memory: its own test below).
#[test]
fn the_real_servers_answer_confined_in_the_common_tier() {
    let Some(root) = installed() else { return };
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("a.txt"), "hello from a file").unwrap();
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .current_dir(repo.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    git(&["init", "-q"]);
    std::fs::write(repo.path().join("f.txt"), "x").unwrap();
    git(&["add", "f.txt"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-qm",
        "first commit",
    ]);
    let slow = json!({"handshake_s": 120, "timeout_s": 120});
    let with = |extra: Value| {
        let mut v = slow.clone();
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    let w = world(
        &root,
        &[
            ("files", with(json!({"args": [docs.path()]}))),
            ("everything", slow.clone()),
            ("time", slow.clone()),
            ("git", with(json!({"args": ["--repository", repo.path()]}))),
        ],
        json!({}),
    );
    permissions(
        &w,
        json!({"version": 1, "external_tools": {"allow_all": true,
            "allow": ["everything_echo", "time_get_current_time", "git_git_log", "git_git_status", "files_read_text_file"]}}),
    );
    let cases: &[(&str, &str, Value, &str)] = &[
        (
            "files",
            "read_text_file",
            json!({"path": docs.path().join("a.txt")}),
            "hello from a file",
        ),
        ("everything", "echo", json!({"message": "ping-42"}), "ping-42"),
        (
            "time",
            "get_current_time",
            json!({"timezone": "UTC"}),
            "\"timezone\":\"UTC\"",
        ),
        ("git", "git_log", json!({"repo_path": repo.path()}), "first commit"),
    ];
    for (tool, action, args, want) in cases {
        let o = call(&w, tool, action, args.clone());
        assert_eq!(code(&o), 0, "{tool} {action}: {}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains(want), "{tool} {action}: {}", stdout(&o));
    }
    // Every call ran confined: the audit lines say so.
    let audit = audit_text(&w);
    assert_eq!(audit.matches("\"mode\":\"enforce\"").count(), cases.len(), "{audit}");
}

/// The memory server as one session: an entity created, the tools' idle time passed, four calls at once, all on
/// one process, and the entity read back.
#[test]
fn the_memory_servers_session_keeps_state_across_idle_and_concurrent_calls() {
    let Some(root) = installed() else { return };
    let lock: Value = serde_json::from_slice(&std::fs::read(root.join("memory/lock.json")).unwrap()).unwrap();
    let install_dir = root.join("memory").join(lock["dir"].as_str().unwrap());
    let w = world(
        &root,
        &[("memory", json!({"handshake_s": 120}))],
        json!({"worker_idle_s": 1}),
    );
    // Its graph file in the anima's folder, which the server's own sandbox grants.
    std::fs::create_dir_all(w.anima.join("memory")).unwrap();
    let file = w.anima.join("memory/graph.jsonl");
    let mut settings: Value =
        serde_json::from_slice(&std::fs::read(w.data.join("animaworks-tool.json")).unwrap()).unwrap();
    settings["mcp_servers"]["memory"]["env"] = json!({"MEMORY_FILE_PATH": file});
    settings["mcp_servers"]["memory"]["sandbox"] = json!({"write": ["$ANIMA_DIR/memory"]});
    std::fs::write(w.data.join("animaworks-tool.json"), settings.to_string()).unwrap();
    permissions(
        &w,
        json!({"version": 1, "external_tools": {"allow_all": true, "allow": ["memory_create_entities", "memory_open_nodes"]}}),
    );
    let needle = install_dir.to_str().unwrap().to_owned();
    let mut g = Gateway::start(&w);
    g.call(
        1,
        "memory_create_entities",
        json!({"entities": [{"name": "Alice", "entityType": "person", "observations": ["likes tea"]}]}),
    );
    let created = g.text(1);
    assert!(created.contains("Alice"), "{created}");
    let first = pids_with_cmdline(&needle);
    assert_eq!(first.len(), 1, "one server process: {first:?}");
    // Past the tools' worker_idle_s: a tool's worker would have been ended, the server's session is not.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    for id in 2..6 {
        g.call(id, "memory_open_nodes", json!({"names": ["Alice"]}));
    }
    for id in 2..6 {
        let t = g.text(id);
        assert!(t.contains("likes tea"), "{t}");
    }
    assert_eq!(pids_with_cmdline(&needle), first, "four concurrent calls, one process");
    g.finish();
}

/// A tiny HTTP server on loopback answering every request with `body`; returns its port.
fn http_server(body: &'static str) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for s in l.incoming() {
            let Ok(mut s) = s else { break };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let head = String::from_utf8_lossy(&buf);
            let (status, text) = if head.starts_with("GET /robots.txt") {
                ("404 Not Found", "")
            } else {
                ("200 OK", body)
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    port
}

/// The fetch server's network is the sandbox's: a loopback server granted by the anima's `sandbox.net` is
/// fetched, another loopback port is refused by the runner's proxy.
#[test]
fn the_fetch_servers_network_is_confined_to_what_is_granted() {
    let Some(root) = installed() else { return };
    let granted = http_server("granted page body");
    let other = http_server("other page body");
    // The server refuses private addresses itself unless told otherwise; the runner's proxy still decides.
    let w = world(
        &root,
        &[(
            "fetch",
            json!({"args": ["--allow-private-ips"], "handshake_s": 120, "timeout_s": 120}),
        )],
        json!({}),
    );
    permissions(
        &w,
        json!({"version": 1, "external_tools": {"allow_all": true, "allow": ["fetch_fetch"]},
               "sandbox": {"net": [format!("127.0.0.1:{granted}")]}}),
    );
    let o = call(
        &w,
        "fetch",
        "fetch",
        json!({"url": format!("http://127.0.0.1:{granted}/page"), "raw": true}),
    );
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("granted page body"), "{}", stdout(&o));
    let o = call(
        &w,
        "fetch",
        "fetch",
        json!({"url": format!("http://127.0.0.1:{other}/page"), "raw": true}),
    );
    assert!(!stdout(&o).contains("other page body"), "{}", stdout(&o));
    assert_ne!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
}

/// What an anima declares for itself is not installed (npm's and pip's scripts run unconfined) unless a person
/// names it.
#[test]
fn an_animas_own_npx_server_is_installed_only_by_name() {
    let w = World::new();
    std::fs::write(
        w.anima.join("status.json"),
        json!({"extra_mcp_servers": {"mine": {"command": "npx", "args": ["-y", "left-pad@1.3.0"]}}}).to_string(),
    )
    .unwrap();
    let o = w.run(&["mcp-servers", "install"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("mine: skipped: a personal server") && stderr(&o).contains("mcp-servers install mine"),
        "{}",
        stderr(&o)
    );
    assert!(!w.data.join("mcp_servers/mine").exists());
}

/// A server an anima declares is installed, when named (the anima's shell can name it as well as a person), only
/// from the registry by name: a package of the anima's own folder (an npm `install` script, a `setup.py`) never
/// runs outside the sandbox. (Failed while `install` ran them: the markers were written.)
#[test]
fn an_animas_own_server_is_never_installed_from_its_own_files() {
    let w = World::new();
    let marker = |n: &str| w.tmp.path().join(format!("ran-{n}"));
    let npm = w.anima.join("pkgnpm");
    std::fs::create_dir_all(&npm).unwrap();
    std::fs::write(
        npm.join("package.json"),
        json!({"name": "pkgnpm", "version": "1.0.0", "bin": {"pkgnpm": "index.js"},
               "scripts": {"install": format!("echo ran > {}", marker("npm").display())}})
        .to_string(),
    )
    .unwrap();
    std::fs::write(npm.join("index.js"), "").unwrap();
    let py = w.anima.join("pkgpy");
    std::fs::create_dir_all(&py).unwrap();
    std::fs::write(
        py.join("setup.py"),
        format!(
            "open({:?}, 'w').write('ran')\nfrom setuptools import setup\nsetup(name='pkgpy', version='1')\n",
            marker("py").display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(
        w.anima.join("status.json"),
        json!({"extra_mcp_servers": {
            "a": {"command": "npx", "args": ["-y", npm]},
            "b": {"command": "npx", "args": ["-y", "./pkgnpm"]},
            "c": {"command": "npx", "args": ["-y", "pkgnpm@file:./pkgnpm"]},
            "d": {"command": "uvx", "args": ["--from", py, "pkgpy"]},
            "e": {"command": "uvx", "args": ["--from", "pkgpy @ file:./pkgpy", "pkgpy"]},
            "f": {"command": "uvx", "args": ["pkgpy.tar.gz"]}}})
        .to_string(),
    )
    .unwrap();
    for name in ["a", "b", "c", "d", "e", "f"] {
        let o = w
            .cmd()
            .current_dir(&w.anima)
            .args(["mcp-servers", "install", name])
            .output()
            .unwrap();
        assert_ne!(code(&o), 0, "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("not a registry package by name"),
            "{name}: {}",
            stderr(&o)
        );
    }
    assert!(
        !marker("npm").exists() && !marker("py").exists(),
        "a package's own code ran"
    );
    assert!(!w.data.join("mcp_servers/a").exists());
}

/// A working folder that holds the installed servers (a project with its own data dir, the bench run from the
/// checkout): the folder is writable by an undeclared tool, but the servers' packages in it stay read-only, so a
/// server still runs them (write xor execute is about what a call can write) and no call can change them.
#[test]
fn servers_installed_inside_the_working_folder_run_and_stay_read_only() {
    let Some(root) = installed() else { return };
    let cwd = root.parent().unwrap().to_path_buf();
    let w = world(&root, &[("everything", json!({}))], json!({}));
    let o = w
        .cmd()
        .current_dir(&cwd)
        .args(["call", "everything", "echo", "--json", r#"{"message":"hi"}"#])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("Echo: hi"), "{}", stdout(&o));
    let planted = root.join("everything/planted");
    let mine = cwd.join(format!("written-by-a-call-{}", std::process::id()));
    let script = format!(
        "p=no; touch {p} 2>/dev/null && p=yes; c=no; touch {c} 2>/dev/null && c=yes; \
         echo \"{{\\\"planted\\\": \\\"$p\\\", \\\"cwd\\\": \\\"$c\\\"}}\"",
        p = planted.display(),
        c = mine.display(),
    );
    w.tool(
        &w.common(),
        "plant",
        &bash_tool(
            r#"{"protocol":1,"name":"plant","actions":[{"name":"go","input_schema":{"type":"object"}}]}"#,
            &script,
        ),
    );
    let o = w.cmd().current_dir(&cwd).args(["plant", "go"]).output().unwrap();
    let _ = std::fs::remove_file(&mine);
    let out = stdout(&o);
    assert!(
        out.contains("\"cwd\":\"yes\""),
        "the working folder is writable: {out}{}",
        stderr(&o)
    );
    assert!(out.contains("\"planted\":\"no\""), "{out}");
    assert!(!planted.exists());
}
