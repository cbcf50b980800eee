//! The runner binary's side of the test world: `cmd`, `run`, `serve` and the helpers that read its output. The world
//! itself (`World`, `bash_tool`, `eventually`, /proc readers) is crates/core/tests/support, shared with core's tests.

#![allow(dead_code)]

use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

// The world itself and the helpers the library's tests share: one file, used by both test binaries.
#[path = "../../../crates/core/tests/support/mod.rs"]
mod world;
pub use world::*;

pub const BIN: &str = env!("CARGO_BIN_EXE_animaworks-tool");

impl World {
    /// A command for the runner binary in this world, with a clean environment.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.tmp.path())
            .env("ANIMAWORKS_DATA_DIR", &self.data)
            .env("ANIMAWORKS_ANIMA_DIR", &self.anima)
            .env("ANIMAWORKS_CORE_TOOLS", &self.core)
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// The runner with `args`, `input` on its stdin.
    pub fn feed(&self, args: &[&str], input: &str) -> Output {
        feed(self.cmd().args(args), input.as_bytes())
    }

    /// A long-lived `use-tool --serve` in this world, asked one request at a time.
    pub fn serve(&self) -> Serve {
        let mut child = self
            .cmd()
            .args(["use-tool", "--serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let answers = std::io::BufReader::new(child.stdout.take().unwrap());
        Serve { child, stdin, answers }
    }
}

/// A `use-tool --serve` process: one JSON line in, one answer line out.
pub struct Serve {
    pub child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    answers: std::io::BufReader<std::process::ChildStdout>,
}

impl Serve {
    pub fn ask(&mut self, req: &serde_json::Value) -> serde_json::Value {
        use std::io::{BufRead, Write};
        writeln!(self.stdin.as_ref().unwrap(), "{req}").unwrap();
        let mut line = String::new();
        self.answers.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON answer ({e}): {line:?}"))
    }

    /// Close its stdin and wait for it to end.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        self.child.wait().unwrap()
    }
}

/// Runs `c` with `input` on its stdin (closed after it) and collects its output. A program may exit before it reads
/// its stdin, so a broken pipe is not an error here.
pub fn feed(c: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}\nstderr: {}", stdout(o), stderr(o)))
}

/// Run `cmd` with its stderr (and stdin) on a fresh pseudo-terminal of `cols` columns, stdout piped; returns
/// the exit code, stdout, and everything the terminal received. `on_output` sees the terminal's bytes as they
/// arrive (to react to what is shown: a test waits for a sign, never for a time).
pub fn run_in_pty(
    cmd: &mut Command,
    cols: u16,
    on_output: impl FnMut(&[u8]) + Send + 'static,
) -> (Option<i32>, String, String) {
    run_in_pty_with(cmd, cols, false, on_output)
}

/// [`run_in_pty`], with stdout on the terminal too when `stdout_too` (then the returned stdout is empty).
pub fn run_in_pty_with(
    cmd: &mut Command,
    cols: u16,
    stdout_too: bool,
    mut on_output: impl FnMut(&[u8]) + Send + 'static,
) -> (Option<i32>, String, String) {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: 24,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two fds into the given ints; the winsize is read only.
    let rc = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &ws) };
    assert_eq!(rc, 0, "openpty failed");
    // SAFETY: both fds were just opened by openpty and are owned here.
    let (master, slave) = unsafe { (std::fs::File::from_raw_fd(master), std::fs::File::from_raw_fd(slave)) };
    let out = if stdout_too {
        Stdio::from(slave.try_clone().unwrap())
    } else {
        Stdio::piped()
    };
    cmd.stderr(slave.try_clone().unwrap()).stdin(slave).stdout(out);
    let child = cmd.spawn().unwrap();
    // Our copies of the slave end are in `cmd`; replacing them leaves the child's only, so the reader ends.
    cmd.stdin(Stdio::null()).stderr(Stdio::null()).stdout(Stdio::null());
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once the child's side is closed.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            on_output(&buf[..n]);
            all.extend_from_slice(&buf[..n]);
        }
        all
    });
    let out = child.wait_with_output().unwrap();
    let term = reader.join().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&term).into_owned(),
    )
}

/// Is this test process root? (A runner started by root needs no user namespace for its PID namespace.)
pub fn is_root() -> bool {
    // SAFETY: geteuid never fails and touches no memory.
    (unsafe { libc::geteuid() }) == 0
}

/// A binary of another package of the workspace, built on demand (the `it` binary cannot depend on another
/// package's binary); its path under the target directory.
pub fn workspace_bin(package: &str, bin: &str) -> std::path::PathBuf {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo.join("target"));
    let st = std::process::Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", package, "--bin", bin])
        .current_dir(&repo)
        .status()
        .expect("cargo runs");
    assert!(st.success(), "cargo build -p {package} --bin {bin} failed");
    target.join("debug").join(bin)
}

/// Run `cmd` to its end, or kill it after `secs` (a guard against a hang, never a speed assertion) and return
/// `None`. Its address space is bounded, so a runner that reads without end fails instead of eating the machine.
pub fn run_guarded(cmd: &mut Command, secs: u64) -> Option<Output> {
    // SAFETY: between fork and exec only setrlimit, async-signal-safe, on a struct on the stack.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as _));
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(Output {
                status,
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            });
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a C string that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// A personal value-mode tool `echo` with one action `say` (an optional string `x`).
pub fn echo_tool(w: &World) {
    w.tool(
        &w.personal(),
        "echo.sh",
        &bash_tool(
            r#"[{"name":"echo_say","input_schema":{"type":"object","properties":{"x":{"type":"string"}}},"description":"d"}]"#,
            r#"echo "{\"ok\":true}""#,
        ),
    );
}

/// Talk JSON-RPC to `animaworks-tool mcp`: initialize, then `requests` (each with an `id` above 1); the answers by
/// id (a request that got none is missing).
pub fn mcp_session(w: &World, requests: &[Value]) -> std::collections::BTreeMap<i64, Value> {
    use std::io::Write;
    let mut c = w.cmd();
    c.arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&l) {
                let _ = tx.send(v);
            }
        }
    });
    let mut send = |v: &Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    send(
        &json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
    );
    send(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    for r in requests {
        send(r);
    }
    let mut got = std::collections::BTreeMap::new();
    while got.len() < requests.len() + 1 {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(v) => {
                if let Some(id) = v["id"].as_i64() {
                    got.insert(id, v);
                }
            }
            Err(_) => break,
        }
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    got
}

/// A world with a value-mode tool `echo1` (action `run`) in the common tier.
pub fn echo_world() -> World {
    let w = World::new();
    w.tool(
        &w.common(),
        "echo1",
        &bash_tool(r#"[{"name":"echo1_run","input_schema":{"type":"object"}}]"#, "echo 1"),
    );
    w
}

/// The audit log of the world's anima, as text.
pub fn audit_text(w: &World) -> String {
    std::fs::read_to_string(w.anima.join("state/tool_audit.jsonl")).unwrap_or_default()
}
