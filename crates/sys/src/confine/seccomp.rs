//! The seccomp filter: what Landlock cannot express. Built before the fork as a plain BPF program; the child
//! only installs it. Everything not named here is allowed (Landlock and the missing capabilities do the rest).
//!
//! Refused (EPERM unless said):
//! - `io_uring_*`: its socket and connect operations never pass through this filter;
//! - `clone3` (ENOSYS, so libc falls back to `clone`, whose flags can be read), and `clone`/`unshare` with
//!   `CLONE_NEWUSER`: a user namespace hands out capabilities and a large kernel surface;
//! - `keyctl`, `add_key`, `request_key`: the session keyring may hold the caller's secrets;
//! - `bpf`, `perf_event_open`, `userfaultfd`, `ptrace` of anything: kernel surface a tool never needs;
//! - `memfd_create` without `MFD_NOEXEC_SEAL` (or with `MFD_EXEC`): an executable memory file would run a
//!   program written by the tool, which the `noexec` mounts of writable places refuse for files;
//! - x32 system calls (a second syscall table that would bypass every number above);
//! - without network: every socket but `AF_UNIX`, and `connect` (a pathname UNIX socket such as a container
//!   runtime's is reachable by connect, which Landlock does not check before ABI 9);
//! - with a port list: every socket but `AF_UNIX` and TCP (`SOCK_STREAM` with protocol 0 or 6): no UDP, so
//!   names resolve over TCP (`RES_OPTIONS=use-vc`).

use super::NetPlan;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const AND_K: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

const MFD_NOEXEC_SEAL: u32 = 0x8;
const MFD_EXEC: u32 = 0x10;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
fn off_arg(i: u32) -> u32 {
    16 + 8 * i // the low 32 bits (little-endian)
}

/// A tiny assembler: forward jumps to labels, resolved at the end.
#[derive(Default)]
struct Asm {
    code: Vec<SockFilter>,
    /// (instruction index, label for jt, label for jf)
    fix: Vec<(usize, Option<usize>, Option<usize>)>,
    labels: Vec<Option<usize>>,
}

impl Asm {
    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }
    fn here(&mut self, l: usize) {
        self.labels[l] = Some(self.code.len());
    }
    fn load(&mut self, off: u32) {
        self.code.push(SockFilter {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: off,
        });
    }
    fn and(&mut self, k: u32) {
        self.code.push(SockFilter {
            code: AND_K,
            jt: 0,
            jf: 0,
            k,
        });
    }
    fn ret(&mut self, k: u32) {
        self.code.push(SockFilter {
            code: RET_K,
            jt: 0,
            jf: 0,
            k,
        });
    }
    /// if A op k goto t (else fall through)
    fn jump(&mut self, op: u16, k: u32, t: usize) {
        self.fix.push((self.code.len(), Some(t), None));
        self.code.push(SockFilter {
            code: op,
            jt: 0,
            jf: 0,
            k,
        });
    }
    fn finish(mut self) -> Vec<SockFilter> {
        for (i, t, f) in self.fix {
            let off = |l: Option<usize>| -> u8 {
                l.map(|l| {
                    let target = self.labels[l].expect("label placed");
                    u8::try_from(target - i - 1).expect("jump within 255")
                })
                .unwrap_or(0)
            };
            self.code[i].jt = off(t);
            self.code[i].jf = off(f);
        }
        self.code
    }
}

/// The filter for one sandboxed call.
pub fn program(net: &NetPlan) -> Vec<SockFilter> {
    let mut a = Asm::default();
    let (eperm, enosys, allow) = (a.label(), a.label(), a.label());
    let (socket, new_user, arch_ok, memfd) = (a.label(), a.label(), a.label(), a.label());
    // Another architecture's numbers mean other calls: a process that switches is killed.
    a.load(OFF_ARCH);
    a.jump(JEQ_K, AUDIT_ARCH, arch_ok);
    a.ret(RET_KILL_PROCESS);
    a.here(arch_ok);
    a.load(OFF_NR);
    #[cfg(target_arch = "x86_64")]
    a.jump(JGE_K, 0x4000_0000, eperm);
    let refused: &[libc::c_long] = &[
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_ptrace,
    ];
    for nr in refused {
        a.jump(JEQ_K, *nr as u32, eperm);
    }
    a.jump(JEQ_K, libc::SYS_clone3 as u32, enosys);
    a.jump(JEQ_K, libc::SYS_socket as u32, socket);
    a.jump(JEQ_K, libc::SYS_unshare as u32, new_user);
    a.jump(JEQ_K, libc::SYS_clone as u32, new_user);
    a.jump(JEQ_K, libc::SYS_memfd_create as u32, memfd);
    if matches!(net, NetPlan::None) {
        a.jump(JEQ_K, libc::SYS_connect as u32, eperm);
    }
    a.ret(RET_ALLOW);

    // clone(flags, …) and unshare(flags): no new user namespace.
    a.here(new_user);
    a.load(off_arg(0));
    a.jump(JSET_K, libc::CLONE_NEWUSER as u32, eperm);
    a.ret(RET_ALLOW);

    // socket(domain, type, protocol)
    // Write xor execute for memory files: only a memfd sealed against exec (MFD_NOEXEC_SEAL, Linux 6.3+) may be
    // made, so no program written into one can be run (fexecve, /proc/self/fd/N).
    a.here(memfd);
    a.load(off_arg(1));
    a.jump(JSET_K, MFD_EXEC, eperm);
    a.jump(JSET_K, MFD_NOEXEC_SEAL, allow);
    a.ret(RET_ERRNO | libc::EPERM as u32);

    a.here(socket);
    a.load(off_arg(0));
    a.jump(JEQ_K, libc::AF_UNIX as u32, allow);
    match net {
        NetPlan::All => a.ret(RET_ALLOW),
        NetPlan::None => a.ret(RET_ERRNO | libc::EPERM as u32),
        NetPlan::Ports(_) => {
            let inet = a.label();
            a.jump(JEQ_K, libc::AF_INET as u32, inet);
            a.jump(JEQ_K, libc::AF_INET6 as u32, inet);
            a.ret(RET_ERRNO | libc::EPERM as u32);
            a.here(inet);
            a.load(off_arg(1));
            a.and(0xf); // SOCK_TYPE_MASK: without SOCK_NONBLOCK / SOCK_CLOEXEC
            let stream = a.label();
            a.jump(JEQ_K, libc::SOCK_STREAM as u32, stream);
            a.ret(RET_ERRNO | libc::EPERM as u32);
            a.here(stream);
            a.load(off_arg(2));
            a.jump(JEQ_K, 0, allow);
            a.jump(JEQ_K, libc::IPPROTO_TCP as u32, allow);
            a.ret(RET_ERRNO | libc::EPERM as u32);
        }
    }

    a.here(allow);
    a.ret(RET_ALLOW);
    a.here(eperm);
    a.ret(RET_ERRNO | libc::EPERM as u32);
    a.here(enosys);
    a.ret(RET_ERRNO | libc::ENOSYS as u32);
    a.finish()
}

/// Install `prog` on the calling thread; `-errno` on failure. Async-signal-safe: one raw system call (no
/// `errno`) on memory prepared before the fork.
///
/// # Safety
/// `no_new_privs` must be set (or the caller hold CAP_SYS_ADMIN).
pub unsafe fn install(prog: &[SockFilter]) -> isize {
    #[repr(C)]
    struct SockFprog {
        len: u16,
        filter: *const SockFilter,
    }
    let fprog = SockFprog {
        len: prog.len() as u16,
        filter: prog.as_ptr(),
    };
    // SAFETY: `fprog` and the program it points to live on this frame until the kernel has copied them.
    unsafe {
        crate::syscall::call(
            libc::SYS_seccomp,
            1, /* SET_MODE_FILTER */
            0,
            &fprog as *const SockFprog as usize,
            0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_inside_the_program() {
        for net in [NetPlan::None, NetPlan::All, NetPlan::Ports(vec![443])] {
            let p = program(&net);
            for (i, ins) in p.iter().enumerate() {
                assert!(
                    i + 1 + (ins.jt as usize) < p.len() && i + 1 + (ins.jf as usize) < p.len() || ins.code == RET_K
                );
            }
            assert_eq!(p.last().unwrap().code, RET_K);
        }
    }
}
