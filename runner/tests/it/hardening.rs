//! Issue 12: defects found by attacking the runner as a hostile tool, a careless caller and a forged file would.
//! Each test failed before its fix.

use crate::support::*;
#[allow(unused_imports)]
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Run `cmd` to its end, or kill it after `secs` (a guard against a hang, never a speed assertion) and return
/// `None`. Its address space is bounded, so a runner that reads without end fails instead of eating the machine.
pub fn run_guarded(cmd: &mut Command, secs: u64) -> Option<Output> {
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
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn echo_tool(w: &World) {
    w.tool(
        &w.personal(),
        "echo.sh",
        &bash_tool(
            r#"[{"name":"echo_say","input_schema":{"type":"object","properties":{"x":{"type":"string"}}},"description":"d"}]"#,
            r#"echo "{\"ok\":true}""#,
        ),
    );
}

// ---- 8. Special files hang the runner ---------------------------------------------------------------------------

#[test]
fn a_fifo_or_a_device_as_permissions_fails_closed_without_hanging() {
    let w = World::new();
    echo_tool(&w);
    let pj = w.anima.join("permissions.json");
    mkfifo(&pj);
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).expect("a FIFO as permissions.json hung the call");
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let msg = json(&o)["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("permissions.json") && msg.contains("FIFO"), "{msg}");

    std::fs::remove_file(&pj).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &pj).unwrap();
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).expect("/dev/zero as permissions.json hung");
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    assert!(stdout(&o).contains("character device"), "{}", stdout(&o));

    std::fs::remove_file(&pj).unwrap();
    std::fs::write(&pj, format!("{{\"x\": \"{}\"}}", "a".repeat(2 << 20))).unwrap();
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).unwrap();
    assert_eq!(code(&o), 6, "an oversized permissions.json is refused: {}", stderr(&o));
}

#[test]
fn fifos_among_tasks_and_settings_hang_nothing() {
    let w = World::new();
    echo_tool(&w);
    let tasks = w.anima.join("state/background_tasks");
    std::fs::create_dir_all(tasks.join("pending")).unwrap();
    mkfifo(&tasks.join("aaaaaaaaaaaa.json"));
    mkfifo(&tasks.join("pending/bbbbbbbbbbbb.json"));
    mkfifo(&tasks.join("worker.log"));
    let o = run_guarded(w.cmd().args(["jobs", "list", "--json"]), 60).expect("jobs list hung on a FIFO task");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run_guarded(w.cmd().args(["submit", "echo", "say"]), 60).expect("submit hung on a FIFO");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let o = run_guarded(w.cmd().args(["jobs", "run-pending"]), 60).expect("run-pending hung on a FIFO");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run_guarded(w.cmd().args(["jobs", "wait", &id, "--timeout", "60"]), 90).expect("wait hung");
    assert_eq!(code(&o), 0, "{} {}", stdout(&o), stderr(&o));

    // The runner settings file as a FIFO: a clear error, no hang.
    mkfifo(&w.data.join("animaworks-tool.json"));
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).expect("a FIFO as settings hung the call");
    assert_ne!(code(&o), 0);
    assert!(stdout(&o).contains("FIFO"), "{}", stdout(&o));
}

// ---- 1, 2, 3. Spill files and streaming masks -------------------------------------------------------------------

const SECRET: &str = "s3cr3t-value-4242";

/// A value tool whose action `go` runs `$BODY_<action>`-style bash taken from the request; it declares the
/// credential `demo` (env DEMO_TOKEN).
fn leaky_tool(w: &World) {
    w.tool(
        &w.personal(),
        "leak.sh",
        r#"#!/usr/bin/env bash
if [ "$1" = --schemas ]; then cat <<'JSON'
{"protocol":1,"credentials":[{"name":"demo","env":"DEMO_TOKEN"}],"actions":[
 {"name":"split","description":"the secret on stderr after 70000 bytes, then split over two writes"},
 {"name":"flood","description":"2 MB on stdout, then sleeps"},
 {"name":"big","description":"300 KB on stdout with the secret in the middle"}
]}
JSON
exit 0; fi
req=$(cat)
case "$req" in
*_split*)
  head -c 70000 /dev/zero | tr '\0' a >&2
  printf ' %s\n' "$DEMO_TOKEN" >&2
  printf 'half %s' "${DEMO_TOKEN:0:7}" >&2; sleep 0.3; printf '%s end\n' "${DEMO_TOKEN:7}" >&2
  echo '"done"';;
*_flood*)
  head -c 2000000 /dev/zero | tr '\0' x
  exec sleep 1000;;
*_big*)
  head -c 150000 /dev/zero | tr '\0' y; printf ' %s ' "$DEMO_TOKEN"; head -c 150000 /dev/zero | tr '\0' y;;
esac
"#,
    );
    std::fs::write(
        w.data.join("config.json"),
        json!({"credentials": {"demo": {"api_key": SECRET}}}).to_string(),
    )
    .unwrap();
}

fn outputs(w: &World) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(w.data.join("outputs")) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn live_stderr_masks_a_secret_split_across_reads() {
    let w = World::new();
    leaky_tool(&w);
    for extra in [&[][..], &["--events"][..]] {
        let mut c = w.cmd();
        c.args(["leak", "split"]).args(extra);
        let o = run_guarded(&mut c, 60).unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("half *** end"), "{}", &err[err.len().saturating_sub(300)..]);
        assert!(!err.contains(SECRET) && !err.contains(&SECRET[7..]), "the secret reached stderr");
    }
}

#[test]
fn a_call_is_bounded_on_disk_and_its_spill_is_private_masked_and_removed_on_timeout() {
    let w = World::new();
    leaky_tool(&w);
    // Past the disk bound the call ends at once (not at its deadline) and names the file it kept.
    let mut c = w.cmd();
    c.env("ANIMAWORKS_TOOL_MAX_SPILL", "1000000")
        .args(["call", "leak", "flood", "--max-output", "1000", "--timeout", "300"]);
    let o = run_guarded(&mut c, 120).expect("the call ran on past its disk bound");
    assert_eq!(code(&o), 12, "{}", stderr(&o));
    let e = json(&o)["error"].clone();
    let path = e["path"].as_str().expect("the kept file is named").to_owned();
    assert!(e["message"].as_str().unwrap().contains(&path), "{e}");
    assert!(std::fs::metadata(&path).unwrap().len() <= 1_000_000);

    // A spill holds no secret and is the user's alone.
    let o = run_guarded(w.cmd().args(["call", "leak", "big", "--max-output", "1000"]), 60).unwrap();
    assert_eq!(code(&o), 12, "{}", stderr(&o));
    let path = json(&o)["error"]["path"].as_str().unwrap().to_owned();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(" *** ") && !text.contains(SECRET), "the spill holds the secret");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);

    // A call that timed out leaves no spill behind.
    for p in outputs(&w) {
        std::fs::remove_file(p).unwrap();
    }
    let o = run_guarded(
        w.cmd().args(["call", "leak", "flood", "--max-output", "1000", "--timeout", "1"]),
        60,
    )
    .unwrap();
    assert_eq!(code(&o), 7, "{}", stderr(&o));
    assert_eq!(outputs(&w), Vec::<std::path::PathBuf>::new(), "a timed-out call's spill was kept");
}

#[test]
fn old_spills_are_pruned_and_schemas_never_spill() {
    let w = World::new();
    leaky_tool(&w);
    let out = w.data.join("outputs");
    std::fs::create_dir_all(&out).unwrap();
    let old = out.join("c-old.out");
    std::fs::write(&old, "old").unwrap();
    let f = std::fs::File::options().write(true).open(&old).unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(8 * 86400)).unwrap();
    drop(f);
    let o = run_guarded(w.cmd().args(["call", "leak", "big", "--max-output", "1000"]), 60).unwrap();
    assert_eq!(code(&o), 12, "{}", stderr(&o));
    assert!(!old.exists(), "a spill older than the retention was kept");

    w.tool(
        &w.personal(),
        "flood.sh",
        "#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then head -c 40000000 /dev/zero | tr '\\0' x; exit 0; fi\n",
    );
    let before = outputs(&w).len();
    let o = run_guarded(w.cmd().args(["tools", "--json"]), 120).unwrap();
    assert!(stdout(&o).contains("more than"), "{}", stdout(&o));
    assert_eq!(outputs(&w).len(), before, "--schemas was spilled: {:?}", outputs(&w));
}
