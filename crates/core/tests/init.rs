//! The PID namespace's init, started with `clone(CLONE_VM)` beside the runner (`process::Start::Init`): its memory,
//! its report, and what a tool can reach of it. They drive `process::spawn` and
//! `sandbox::child::enter_and_exec` directly, as spawn.rs does; from an attack review of that change.

mod support;

use awt_core::sandbox::child::{enter_and_exec, Confined, Exec, PidNs};
use awt_sys::process::{self, Init, Io, Start};
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
    awt_core::sandbox::kernel::support().pid_namespace
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
    assert!(support::eventually(10, || {
        awt_sys::reap::reap_orphans();
        awt_sys::process::abandoned() == 0
    }));
    let before = mappings();
    const N: usize = 100;
    for _ in 0..N {
        drop(start(&c, &p).unwrap());
    }
    let released = support::eventually(10, || {
        awt_sys::reap::reap_orphans();
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
            "the_report_pipe_survives_a_runner_without_stdio",
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
