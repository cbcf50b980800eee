//! What this kernel can enforce, found once per process with cheap probes (no fork).

use std::sync::OnceLock;

/// The kernel's sandboxing features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Support {
    /// Landlock ABI version (0: no Landlock). 1: files; 2: cross-dir rename; 3: truncate; 4: TCP ports;
    /// 5: device ioctls; 6: signal and abstract-socket scoping; 7: audit.
    pub landlock_abi: i32,
    /// seccomp filters (`SECCOMP_SET_MODE_FILTER`).
    pub seccomp: bool,
    /// A PID namespace can be made for a call: as root (CAP_SYS_ADMIN), or through an unprivileged user
    /// namespace.
    pub pid_namespace: bool,
    /// The PID namespace needs a user namespace first (the runner is not privileged).
    pub needs_user_namespace: bool,
    /// `open_tree` and `move_mount` (Linux 5.2; a container's seccomp profile may refuse them): a call's own temp
    /// dir is kept when the calls folder is hidden over it.
    pub mount_api: bool,
}

impl Support {
    /// Landlock restricts files at all.
    pub fn landlock_fs(&self) -> bool {
        self.landlock_abi >= 1
    }
    /// Landlock restricts TCP bind and connect.
    pub fn landlock_tcp(&self) -> bool {
        self.landlock_abi >= 4
    }
    /// Landlock refuses signals to processes outside the sandbox.
    pub fn landlock_signal_scope(&self) -> bool {
        self.landlock_abi >= 6
    }
}

/// The features of this kernel (probed on first use).
pub fn support() -> Support {
    static S: OnceLock<Support> = OnceLock::new();
    *S.get_or_init(probe)
}

fn probe() -> Support {
    // SAFETY: plain syscalls with null or stack arguments.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    // SAFETY: seccomp(GET_ACTION_AVAIL) only reads whether an action is supported; `action` outlives the call.
    let seccomp = unsafe {
        let action: u32 = 0x7fff_0000; // SECCOMP_RET_ALLOW
        libc::syscall(libc::SYS_seccomp, 2u32 /* GET_ACTION_AVAIL */, 0u32, &action) == 0
    };
    let (pid_namespace, needs_user_namespace) = pid_namespace_support();
    // SAFETY: open_tree of "/" without OPEN_TREE_CLONE opens a path descriptor (no privilege, no mount); it is
    // closed at once.
    let mount_api = unsafe {
        let fd = libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, c"/".as_ptr(), libc::O_CLOEXEC as libc::c_uint);
        if fd >= 0 {
            libc::close(fd as i32);
        }
        fd >= 0
    };
    Support {
        landlock_abi: if abi < 0 { 0 } else { abi as i32 },
        seccomp,
        pid_namespace,
        needs_user_namespace,
        mount_api,
    }
}

fn read_num(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// (a PID namespace can be made, it needs a user namespace first).
fn pid_namespace_support() -> (bool, bool) {
    if std::fs::symlink_metadata("/proc/self/ns/pid").is_err() {
        return (false, false);
    }
    if has_cap_sys_admin() {
        return (true, false);
    }
    let userns = std::fs::symlink_metadata("/proc/self/ns/user").is_ok()
        && read_num("/proc/sys/user/max_user_namespaces").is_some_and(|n| n > 0)
        && read_num("/proc/sys/kernel/unprivileged_userns_clone").is_none_or(|n| n != 0)
        // Ubuntu 24.04's AppArmor gives unprivileged user namespaces no capabilities.
        && read_num("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").is_none_or(|n| n == 0);
    (userns, true)
}

fn has_cap_sys_admin() -> bool {
    rustix::thread::capabilities(None).is_ok_and(|c| c.effective.contains(rustix::thread::CapabilitySet::SYS_ADMIN))
}

pub(crate) const CAP_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
pub(crate) struct CapHeader {
    pub version: u32,
    pub pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CapData {
    pub effective: u32,
    pub permitted: u32,
    pub inheritable: u32,
}

/// The sentences `doctor` prints about this kernel.
pub fn report(s: &Support) -> Vec<String> {
    let mut out = Vec::new();
    out.push(match s.landlock_abi {
        0 => "Landlock: not available (kernel without CONFIG_SECURITY_LANDLOCK, or not in the lsm= boot list): files and TCP cannot be confined".to_owned(),
        n => format!(
            "Landlock ABI {n}: files confined{}{}",
            if n >= 4 { "; TCP bind/connect confined to declared ports" } else { "; TCP NOT confined by Landlock (ABI 4 needed; seccomp still refuses sockets of tools without network)" },
            if n >= 6 { "; signals out of the sandbox refused" } else { "; signal scoping missing (ABI 6 needed): the PID namespace has to keep signals in" },
        ),
    });
    out.push(if s.seccomp {
        "seccomp: available: UDP, raw sockets, io_uring, user namespaces and keyrings refused inside the sandbox"
            .to_owned()
    } else {
        "seccomp: NOT available: a tool without network can still use UDP and raw sockets".to_owned()
    });
    out.push(match (s.pid_namespace, s.needs_user_namespace) {
        (true, false) => "PID namespace: yes (privileged): nothing a sandboxed tool starts outlives its call".to_owned(),
        (true, true) => "PID namespace: yes, through an unprivileged user namespace: nothing a sandboxed tool starts outlives its call".to_owned(),
        (false, _) => "PID namespace: NOT available (no unprivileged user namespaces): a process that leaves the tool's group (setsid) can outlive the call".to_owned(),
    });
    out
}
