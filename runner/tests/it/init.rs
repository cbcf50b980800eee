//! The PID namespace's init, started with `clone(CLONE_VM)` beside the runner (`process::Start::Init`): its memory,
//! its report, and what a tool can reach of it. The first two drive `process::spawn` and
//! `sandbox::child::enter_and_exec` directly, as spawn.rs does; from an attack review of that change.

use animaworks_tool::process::{self, Init, Io, Start};
use animaworks_tool::sandbox::child::{enter_and_exec, Confined, Exec, PidNs};
use awt_sys::start_error::{StartError, Step};
use std::ffi::CString;

/// argv/envp prepared before the clone (as spawn.rs's DirectExec).
struct Prog {
    _owned: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}
// SAFETY: pointers into `_owned`, never changed.
unsafe impl Sync for Prog {}

impl Prog {
    fn new(args: &[&str]) -> Prog {
        let owned: Vec<CString> = args.iter().map(|a| CString::new(*a).unwrap()).collect();
        let mut argv: Vec<*const libc::c_char> = owned.iter().map(|s| s.as_ptr()).collect();
        argv.push(std::ptr::null());
        Prog {
            _owned: owned,
            argv,
            envp: vec![std::ptr::null()],
        }
    }
}

fn confined() -> Confined {
    // SAFETY: plain getters.
    let (u, g) = unsafe { (libc::getuid(), libc::getgid()) };
    Confined {
        ruleset: None,
        filter: None,
        pid_ns: Some(PidNs {
            user: u != 0,
            uid_map: format!("{u} {u} 1").into_bytes(),
            gid_map: format!("{g} {g} 1").into_bytes(),
            mounts: Vec::new(),
            net: None,
            kept: None,
        }),
        last_cap: std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(40),
    }
}

/// Start `args` as the tool of a PID namespace the way spawn.rs does (Start::Init), all stdio /dev/null.
fn start(c: &Confined, p: &Prog) -> Result<process::Child, StartError> {
    let flags = c.pid_ns.as_ref().unwrap().clone_flags(false);
    let pre = |init: Option<&Init>| -> StartError {
        let e = Exec {
            path: p.argv[0],
            argv: p.argv.as_ptr(),
            envp: p.envp.as_ptr(),
            handover: &[],
        };
        // SAFETY: in the child before its exec; `c` and `p` prepared before the clone.
        unsafe { enter_and_exec(c, &e, init) }
    };
    // SAFETY: `pre` makes raw system calls only on memory prepared before the call.
    unsafe { process::spawn([Io::Null, Io::Null, Io::Null], None, Start::Init(flags, None), &pre) }
}

fn pid_ns_available() -> bool {
    animaworks_tool::sandbox::kernel::support().pid_namespace
}

fn mappings() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
}

/// A `Child` of `Start::Init` dropped before it was reaped (a cancelled call, a dropped worker) kills its init,
/// which may still run on the stacks the `Child` owns; they must be freed once it has exited, not kept forever
/// (a long-lived runner would reach vm.max_map_count after ~16k such drops).
#[test]
fn a_dropped_init_child_gives_its_memory_back_once_it_has_exited() {
    if !pid_ns_available() {
        awt_sys::skipped!("no PID namespace here");
        return;
    }
    let c = confined();
    let p = Prog::new(&["/bin/sleep", "30"]);
    drop(start(&c, &p).unwrap());
    assert!(crate::support::eventually(10, || {
        animaworks_tool::reap::reap_orphans();
        animaworks_tool::process::abandoned() == 0
    }));
    let before = mappings();
    const N: usize = 100;
    for _ in 0..N {
        drop(start(&c, &p).unwrap());
    }
    let released = crate::support::eventually(10, || {
        animaworks_tool::reap::reap_orphans();
        mappings() < before + 20
    });
    assert!(
        released,
        "{} new mappings after {N} dropped init children: their stacks were never unmapped",
        mappings() - before
    );
}

/// An init child that dies before it reports (killed, or crashed) must make the start fail, not hang: the
/// runner's own copy of the report's write end must be closed while it waits.
#[test]
fn an_init_that_dies_before_its_report_fails_the_start() {
    if !pid_ns_available() {
        awt_sys::skipped!("no PID namespace here");
        return;
    }
    let flags = confined().pid_ns.as_ref().unwrap().clone_flags(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let pre = |_: Option<&Init>| -> StartError {
            // SAFETY: ends the child at once, before any report.
            unsafe { libc::syscall(libc::SYS_exit_group, 3) };
            StartError::new(Step::Exec, libc::EIO)
        };
        // SAFETY: `pre` makes one raw system call and ends the child.
        let r = unsafe { process::spawn([Io::Null, Io::Null, Io::Null], None, Start::Init(flags, None), &pre) };
        let _ = tx.send(r.map(|_| ()));
    });
    let r = rx.recv_timeout(std::time::Duration::from_secs(30));
    assert_eq!(
        r,
        Ok(Err(StartError::new(Step::Report, libc::EIO))),
        "the start hung or did not fail at its report"
    );
}

/// A sandboxed tool attacks its namespace's init G, which shares the runner's whole address space: ptrace, /proc
/// mem, process_vm_readv, pidfd_getfd. Every attempt must fail.
const PY_INIT_ATTACKER: &str = r#"
import ctypes, errno, json, os, signal
from animaworks_tool_sdk import action, run

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))

def check(r):
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r

@action(sandbox={"net": False})
def attack(x: str) -> dict:
    """Attack pid 1."""
    r = {"ppid": os.getppid()}
    outer = None
    try:
        for line in open("/proc/self/status"):
            if line.startswith("PPid:"):
                outer = int(line.split()[1])
    except OSError as e:
        r["proc_status"] = errno.errorcode.get(e.errno)
    r["outer"] = outer
    r["ptrace_attach_1"] = attempt(lambda: check(libc.ptrace(16, 1, 0, 0)))
    r["ptrace_seize_1"] = attempt(lambda: check(libc.ptrace(0x4206, 1, 0, 0)))
    r["kill_1"] = attempt(lambda: os.kill(1, signal.SIGKILL))
    r["stop_1"] = attempt(lambda: os.kill(1, signal.SIGSTOP))
    r["pidfd_getfd"] = attempt(lambda: check(libc.syscall(438, check(libc.syscall(434, 1, 0)), 0, 0)))
    buf = ctypes.create_string_buffer(8)
    class Iov(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    local = Iov(ctypes.cast(buf, ctypes.c_void_p), 8)
    remote = Iov(0x400000, 8)
    r["vm_readv_1"] = attempt(lambda: check(libc.syscall(310, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)))
    if outer:
        r["mem_outer"] = attempt(lambda: open("/proc/%d/mem" % outer, "r+b").close())
        r["maps_outer"] = attempt(lambda: open("/proc/%d/maps" % outer).read())
        r["environ_outer"] = attempt(lambda: open("/proc/%d/environ" % outer, "rb").read())
        r["vm_readv_outer"] = attempt(lambda: check(libc.syscall(310, outer, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)))
    return r

if __name__ == "__main__":
    run()
"#;

#[test]
fn a_sandboxed_tool_cannot_reach_the_init_that_shares_the_runners_memory() {
    use crate::support::*;
    if !pid_ns_available() || animaworks_tool::sandbox::kernel::support().landlock_abi < 6 {
        awt_sys::skipped!("no PID namespace or Landlock ABI < 6 here");
        return;
    }
    let w = World::sandboxed();
    w.tool(&w.personal(), "initattack.py", PY_INIT_ATTACKER);
    let o = w.run(&["call", "initattack", "attack", "--json", r#"{"x":"1"}"#]);
    let r = json(&o);
    assert!(r.get("error").is_none(), "{r} {}", stderr(&o));
    assert_eq!(r["ppid"], 1, "{r}");
    for k in [
        "ptrace_attach_1",
        "ptrace_seize_1",
        "pidfd_getfd",
        "vm_readv_1",
        "mem_outer",
        "maps_outer",
        "environ_outer",
        "vm_readv_outer",
    ] {
        assert_ne!(r[k], "ok", "{k} must fail: {r}");
    }
    // Signals to init from inside its namespace are dropped (no handler): kill() itself succeeds.
}

/// With the runner's 0–2 not all open (a program embedding the library that closed them), the report pipe must not
/// land on 0–2, where the child's dup3 would replace it: the runner would read end of file, say EIO, and block
/// while the tool runs to its end. Run in a child process of this test binary, which closes 0–2 first.
#[test]
fn the_report_pipe_survives_a_runner_without_stdio() {
    if !pid_ns_available() {
        awt_sys::skipped!("no PID namespace here");
        return;
    }
    if std::env::var_os("INIT_TEST_INNER").is_some() {
        // SAFETY: closing our own standard descriptors (libtest captures output in memory).
        unsafe {
            libc::close(0);
            libc::close(1);
            libc::close(2);
        }
        let c = confined();
        let p = Prog::new(&["/bin/sleep", "1"]);
        let r = start(&c, &p).map(|_| ());
        let msg = format!("spawn -> {r:?}\n");
        std::fs::write(std::env::var("INIT_TEST_INNER").unwrap(), msg).unwrap();
        return;
    }
    let out = std::env::temp_dir().join(format!("init-inner-{}", std::process::id()));
    let st = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "init::the_report_pipe_survives_a_runner_without_stdio",
            "--exact",
            "--test-threads=1",
        ])
        .env("INIT_TEST_INNER", &out)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    let got = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    assert!(got.contains("Ok(())"), "{st:?}: {got}");
}
