//! The seccomp filter: what Landlock cannot express. Built before the fork, the refusals as a rule map ([`rules`])
//! compiled by seccompiler, beside a small guard assembled here ([`Filter`] says why); the child only installs
//! both, raw. Everything not named here is allowed (Landlock and the missing capabilities do the rest).
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

/// The filter for one sandboxed call: two programs, installed in this order (the kernel runs both on every call
/// and the stricter answer wins). `guard`, assembled here, is what seccompiler cannot say: an `ENOSYS` answer
/// beside the `EPERM` of the rules (a seccompiler filter has one match action), and x32 numbers refused (its
/// architecture check cannot tell them from x86-64's). `rules` is [`rules`] compiled by seccompiler.
#[derive(Debug, Clone)]
pub struct Filter {
    guard: Vec<SockFilter>,
    rules: Vec<SockFilter>,
}

/// The filter for one sandboxed call.
pub fn program(net: &NetPlan) -> Filter {
    let rules = seccompiler::SeccompFilter::new(
        rules(net),
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )
    .and_then(seccompiler::BpfProgram::try_from)
    .expect("the rule map compiles (a fixed set of calls and conditions)");
    Filter {
        guard: guard(),
        rules: rules
            .into_iter()
            .map(|i| SockFilter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect(),
    }
}

#[cfg(target_arch = "x86_64")]
const ARCH: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: seccompiler::TargetArch = seccompiler::TargetArch::aarch64;

/// Another architecture's numbers mean other calls: a process that switches is killed; x32 calls are refused;
/// `clone3` answers ENOSYS, so that libc falls back to `clone`, whose flags the rules can read.
fn guard() -> Vec<SockFilter> {
    let mut a = Asm::default();
    let (arch_ok, enosys) = (a.label(), a.label());
    a.load(OFF_ARCH);
    a.jump(JEQ_K, AUDIT_ARCH, arch_ok);
    a.ret(RET_KILL_PROCESS);
    a.here(arch_ok);
    a.load(OFF_NR);
    #[cfg(target_arch = "x86_64")]
    {
        let x32 = a.label();
        a.jump(JGE_K, 0x4000_0000, x32);
        a.jump(JEQ_K, libc::SYS_clone3 as u32, enosys);
        a.ret(RET_ALLOW);
        a.here(x32);
        a.ret(RET_ERRNO | libc::EPERM as u32);
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        a.jump(JEQ_K, libc::SYS_clone3 as u32, enosys);
        a.ret(RET_ALLOW);
    }
    a.here(enosys);
    a.ret(RET_ERRNO | libc::ENOSYS as u32);
    a.finish()
}

/// One condition on the low 32 bits of argument `arg`.
fn arg(arg: u8, op: seccompiler::SeccompCmpOp, v: u64) -> seccompiler::SeccompCondition {
    seccompiler::SeccompCondition::new(arg, seccompiler::SeccompCmpArgLen::Dword, op, v).expect("argument 0 to 5")
}

/// A rule: all of `conds` hold.
fn all(conds: Vec<seccompiler::SeccompCondition>) -> seccompiler::SeccompRule {
    seccompiler::SeccompRule::new(conds).expect("a rule with conditions")
}

/// What is refused (EPERM), by call number: a call with no rule is refused whatever its arguments, one with
/// rules when any of them holds. Everything not named is allowed.
pub fn rules(net: &NetPlan) -> std::collections::BTreeMap<i64, Vec<seccompiler::SeccompRule>> {
    use seccompiler::SeccompCmpOp::{Eq, MaskedEq, Ne};
    let mut m = std::collections::BTreeMap::new();
    for nr in [
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
    ] {
        m.insert(nr, Vec::new());
    }
    // clone(flags, …) and unshare(flags): no new user namespace.
    let new_user = libc::CLONE_NEWUSER as u64;
    for nr in [libc::SYS_clone, libc::SYS_unshare] {
        m.insert(nr, vec![all(vec![arg(0, MaskedEq(new_user), new_user)])]);
    }
    // Write xor execute for memory files: only a memfd sealed against exec (MFD_NOEXEC_SEAL, Linux 6.3+) may be
    // made, so no program written into one can be run (fexecve, /proc/self/fd/N).
    m.insert(
        libc::SYS_memfd_create,
        vec![
            all(vec![arg(1, MaskedEq(MFD_EXEC.into()), MFD_EXEC.into())]),
            all(vec![arg(1, MaskedEq(MFD_NOEXEC_SEAL.into()), 0)]),
        ],
    );
    // socket(domain, type, protocol)
    let (unix, inet, inet6) = (libc::AF_UNIX as u64, libc::AF_INET as u64, libc::AF_INET6 as u64);
    match net {
        NetPlan::All => {}
        NetPlan::None => {
            m.insert(libc::SYS_socket, vec![all(vec![arg(0, Ne, unix)])]);
            m.insert(libc::SYS_connect, Vec::new());
        }
        NetPlan::Ports(_) => {
            let mut socket = vec![all(vec![arg(0, Ne, unix), arg(0, Ne, inet), arg(0, Ne, inet6)])];
            let stream = libc::SOCK_STREAM as u64;
            for domain in [inet, inet6] {
                // SOCK_TYPE_MASK: the type without SOCK_NONBLOCK / SOCK_CLOEXEC; TCP only (no UDP).
                for t in (0..16).filter(|t| *t != stream) {
                    socket.push(all(vec![arg(0, Eq, domain), arg(1, MaskedEq(0xf), t)]));
                }
                socket.push(all(vec![
                    arg(0, Eq, domain),
                    arg(2, Ne, 0),
                    arg(2, Ne, libc::IPPROTO_TCP as u64),
                ]));
            }
            m.insert(libc::SYS_socket, socket);
        }
    }
    m
}

/// Install `f` on the calling thread; `-errno` on failure. Async-signal-safe: raw system calls (no `errno`) on
/// memory prepared before the fork.
///
/// # Safety
/// `no_new_privs` must be set (or the caller hold CAP_SYS_ADMIN).
pub unsafe fn install(f: &Filter) -> isize {
    for prog in [&f.guard, &f.rules] {
        // SAFETY: the caller's contract.
        let r = unsafe { install_one(prog) };
        if r < 0 {
            return r;
        }
    }
    0
}

/// # Safety
/// As [`install`].
unsafe fn install_one(prog: &[SockFilter]) -> isize {
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

    /// The kernel's answer to one call: a classic BPF program run on its `seccomp_data` (the instructions
    /// seccompiler and [`Asm`] emit).
    fn run(prog: &[SockFilter], arch: u32, nr: i64, args: [u64; 3]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as u32).to_ne_bytes());
        data[4..8].copy_from_slice(&arch.to_ne_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let i = prog[pc];
            pc += 1;
            let jump = |c: bool| if c { i.jt as usize } else { i.jf as usize };
            match i.code {
                0x20 => {
                    let k = i.k as usize;
                    acc = u32::from_ne_bytes(data[k..k + 4].try_into().unwrap());
                }
                0x54 => acc &= i.k,
                0x05 => pc += i.k as usize,
                0x15 => pc += jump(acc == i.k),
                0x25 => pc += jump(acc > i.k),
                0x35 => pc += jump(acc >= i.k),
                0x45 => pc += jump(acc & i.k != 0),
                0x06 => return i.k,
                c => panic!("an instruction this test does not know: {c:#x}"),
            }
        }
    }

    /// Both programs, the stricter answer winning as in the kernel.
    fn verdict(f: &Filter, nr: i64, args: [u64; 3]) -> u32 {
        let a = run(&f.guard, AUDIT_ARCH, nr, args);
        let b = run(&f.rules, AUDIT_ARCH, nr, args);
        if (a as i32) < (b as i32) {
            a
        } else {
            b
        }
    }

    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;

    #[test]
    fn every_jump_lands_inside_the_program() {
        for net in [NetPlan::None, NetPlan::All, NetPlan::Ports(vec![443])] {
            let f = program(&net);
            for p in [&f.guard, &f.rules] {
                for (i, ins) in p.iter().enumerate() {
                    let ja = ins.code == 0x05 && i + 1 + (ins.k as usize) < p.len();
                    assert!(
                        ja || i + 1 + (ins.jt as usize) < p.len() && i + 1 + (ins.jf as usize) < p.len()
                            || ins.code == RET_K
                    );
                }
                assert_eq!(p.last().unwrap().code, RET_K);
            }
        }
    }

    /// The rule map says what each plan refuses: no network, no socket but AF_UNIX and no connect; all of it,
    /// neither rule; a port list, sockets but connect allowed.
    #[test]
    fn the_rule_map_refuses_what_the_plan_says() {
        let none = rules(&NetPlan::None);
        assert_eq!(none.get(&libc::SYS_connect).map(Vec::len), Some(0), "connect refused outright");
        assert!(none.contains_key(&libc::SYS_socket));
        let all = rules(&NetPlan::All);
        assert!(!all.contains_key(&libc::SYS_connect) && !all.contains_key(&libc::SYS_socket));
        let ports = rules(&NetPlan::Ports(vec![443]));
        assert!(!ports.contains_key(&libc::SYS_connect) && ports.contains_key(&libc::SYS_socket));
        for m in [&none, &all, &ports] {
            for nr in [libc::SYS_keyctl, libc::SYS_bpf, libc::SYS_ptrace, libc::SYS_io_uring_setup] {
                assert_eq!(m.get(&nr).map(Vec::len), Some(0), "{nr} refused outright");
            }
        }
    }

    /// The compiled filter answers each call as the plan says.
    #[test]
    fn the_filter_answers_as_the_plan_says() {
        let (unix, inet, inet6) = (libc::AF_UNIX as u64, libc::AF_INET as u64, libc::AF_INET6 as u64);
        let (stream, dgram) = (libc::SOCK_STREAM as u64, libc::SOCK_DGRAM as u64);
        let nb = libc::SOCK_NONBLOCK as u64 | libc::SOCK_CLOEXEC as u64;
        for net in [NetPlan::None, NetPlan::All, NetPlan::Ports(vec![443])] {
            let f = program(&net);
            let v = |nr, args| verdict(&f, nr, args);
            assert_eq!(run(&f.guard, 0x4000_0003, libc::SYS_getpid, [0; 3]), RET_KILL_PROCESS);
            assert_eq!(v(libc::SYS_getpid, [0; 3]), RET_ALLOW);
            assert_eq!(v(libc::SYS_keyctl, [0; 3]), EPERM);
            assert_eq!(v(libc::SYS_clone3, [0; 3]), ENOSYS);
            #[cfg(target_arch = "x86_64")]
            assert_eq!(v(0x4000_0000 | libc::SYS_getpid, [0; 3]), EPERM, "x32");
            assert_eq!(v(libc::SYS_clone, [libc::CLONE_NEWUSER as u64 | libc::SIGCHLD as u64, 0, 0]), EPERM);
            assert_eq!(v(libc::SYS_clone, [libc::SIGCHLD as u64, 0, 0]), RET_ALLOW);
            assert_eq!(v(libc::SYS_unshare, [libc::CLONE_NEWUSER as u64, 0, 0]), EPERM);
            assert_eq!(v(libc::SYS_unshare, [libc::CLONE_NEWNS as u64, 0, 0]), RET_ALLOW);
            assert_eq!(v(libc::SYS_memfd_create, [0, 0, 0]), EPERM);
            assert_eq!(v(libc::SYS_memfd_create, [0, MFD_NOEXEC_SEAL.into(), 0]), RET_ALLOW);
            assert_eq!(v(libc::SYS_memfd_create, [0, (MFD_NOEXEC_SEAL | MFD_EXEC).into(), 0]), EPERM);
            assert_eq!(v(libc::SYS_socket, [unix, dgram, 0]), RET_ALLOW);
            let (tcp, udp, tcp6, netlink) = (
                v(libc::SYS_socket, [inet, stream | nb, 0]),
                v(libc::SYS_socket, [inet, dgram, 0]),
                v(libc::SYS_socket, [inet6, stream, libc::IPPROTO_TCP as u64]),
                v(libc::SYS_socket, [libc::AF_NETLINK as u64, dgram, 0]),
            );
            let stream_udp = v(libc::SYS_socket, [inet, stream, libc::IPPROTO_UDP as u64]);
            let connect = v(libc::SYS_connect, [3, 0, 0]);
            match net {
                NetPlan::None => assert_eq!([tcp, udp, tcp6, netlink, stream_udp, connect], [EPERM; 6]),
                NetPlan::All => assert_eq!([tcp, udp, tcp6, netlink, stream_udp, connect], [RET_ALLOW; 6]),
                NetPlan::Ports(_) => {
                    assert_eq!([tcp, tcp6, connect], [RET_ALLOW; 3]);
                    assert_eq!([udp, netlink, stream_udp], [EPERM; 3]);
                }
            }
        }
    }
}
