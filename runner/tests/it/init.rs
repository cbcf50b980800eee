//! The PID namespace's init as a sandboxed tool sees it, through the binary (crates/core/tests/init.rs drives
//! `process::spawn` and `sandbox::child::enter_and_exec` directly).

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
    let k = awt_core::sandbox::kernel::support();
    if !k.pid_namespace || k.landlock_abi < 6 {
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
