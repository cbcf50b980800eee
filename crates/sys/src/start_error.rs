//! Why a tool's start failed: the step that failed and its errno. The child reports both as one word (a step code
//! and an errno, no allocation: it runs in the runner's memory), and the runner returns them typed, so the caller
//! names the step instead of guessing from an errno.

use std::io;

/// A step of a start, in the order they run (`crate::start`, `crate::process`, `crate::confine::child`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Step {
    /// The runner's side before the clone: pipes, stacks, `/dev/null`.
    Prepare = 1,
    /// The clone of the child (or, in a PID namespace, of the tool's process).
    Clone,
    /// The child ended before it reported how its start went (killed, or crashed).
    Report,
    /// Joining the call's cgroup.
    Cgroup,
    /// The call's resource limits.
    Rlimits,
    /// The new session (`setsid`).
    Session,
    /// The tool's stdin, stdout and stderr.
    Stdio,
    /// Entering the working folder.
    Cwd,
    /// Joining a kept user and network namespace.
    JoinNamespaces,
    /// The user namespace's uid and gid maps.
    UserMaps,
    /// The mounts of the call's mount namespace.
    Mounts,
    /// The network proxy's listener in the call's network namespace.
    ProxyListener,
    /// `no_new_privs`.
    NoNewPrivs,
    /// Landlock's ruleset.
    Landlock,
    /// The seccomp filter.
    Seccomp,
    /// The descriptors handed over to the tool.
    Handover,
    /// The exec of the tool's program.
    Exec,
}

impl Step {
    const ALL: [Step; 17] = [
        Step::Prepare,
        Step::Clone,
        Step::Report,
        Step::Cgroup,
        Step::Rlimits,
        Step::Session,
        Step::Stdio,
        Step::Cwd,
        Step::JoinNamespaces,
        Step::UserMaps,
        Step::Mounts,
        Step::ProxyListener,
        Step::NoNewPrivs,
        Step::Landlock,
        Step::Seccomp,
        Step::Handover,
        Step::Exec,
    ];

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Step::Prepare => "prepare",
            Step::Clone => "clone",
            Step::Report => "report",
            Step::Cgroup => "cgroup",
            Step::Rlimits => "rlimits",
            Step::Session => "session",
            Step::Stdio => "stdio",
            Step::Cwd => "cwd",
            Step::JoinNamespaces => "namespaces",
            Step::UserMaps => "user-maps",
            Step::Mounts => "mounts",
            Step::ProxyListener => "proxy-listener",
            Step::NoNewPrivs => "no-new-privs",
            Step::Landlock => "landlock",
            Step::Seccomp => "seccomp",
            Step::Handover => "handover",
            Step::Exec => "exec",
        }
    }

    /// What it does, for a sentence.
    fn what(self) -> &'static str {
        match self {
            Step::Prepare => "preparing the start",
            Step::Clone => "starting the process",
            Step::Report => "the child's report (it ended before it reported)",
            Step::Cgroup => "joining the call's cgroup",
            Step::Rlimits => "setting the call's resource limits",
            Step::Session => "a new session",
            Step::Stdio => "the standard descriptors",
            Step::Cwd => "entering the working folder",
            Step::JoinNamespaces => "joining the sandbox's kept namespaces",
            Step::UserMaps => "the sandbox's user namespace maps",
            Step::Mounts => "the sandbox's mounts",
            Step::ProxyListener => "the sandbox's network proxy listener",
            Step::NoNewPrivs => "no_new_privs",
            Step::Landlock => "the sandbox's Landlock ruleset",
            Step::Seccomp => "the sandbox's seccomp filter",
            Step::Handover => "placing the descriptors handed to the tool",
            Step::Exec => "the exec of the tool",
        }
    }

    /// A step of the sandbox's namespaces, which depends on what the plan named staying as it was (a mount's
    /// path, a kept namespace's proxy port): planned again, or in fresh namespaces, the start may succeed.
    pub fn is_namespace_setup(self) -> bool {
        matches!(
            self,
            Step::JoinNamespaces | Step::UserMaps | Step::Mounts | Step::ProxyListener
        )
    }

    fn from_code(c: u32) -> Option<Step> {
        Step::ALL.into_iter().find(|s| *s as u32 == c)
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A start that failed: at which step, with which errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartError {
    pub step: Step,
    pub errno: i32,
}

impl StartError {
    /// `errno` 0 (none given) is reported as `EIO`.
    pub const fn new(step: Step, errno: i32) -> StartError {
        StartError {
            step,
            errno: if errno == 0 { libc::EIO } else { errno },
        }
    }

    /// `e` at `step`; an error with no errno is reported as `EIO`. Allocates nothing for an OS error.
    pub fn at(step: Step, e: &io::Error) -> StartError {
        StartError::new(step, e.raw_os_error().unwrap_or(libc::EIO))
    }

    /// The errno as an error of its own.
    pub fn os_error(&self) -> io::Error {
        io::Error::from_raw_os_error(self.errno)
    }

    /// One word for the child's report: the step code above the errno. Never 0 (which says "no error").
    pub(crate) const fn encode(self) -> u64 {
        (self.step as u64) << 32 | self.errno as u32 as u64
    }

    /// The report's word back; 0 is no error, a word of no step (a report cut short) is [`Step::Report`].
    pub(crate) fn decode(w: u64) -> Option<StartError> {
        if w == 0 {
            return None;
        }
        let errno = w as u32 as i32;
        Some(match Step::from_code((w >> 32) as u32) {
            Some(step) => StartError::new(step, errno),
            None => StartError::new(Step::Report, libc::EIO),
        })
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the start failed at step `{}` ({}): {}",
            self.step,
            self.step.what(),
            self.os_error()
        )
    }
}

impl std::error::Error for StartError {}

/// An `io::Error` of the errno's kind that carries the [`StartError`] (`get_ref` and downcast to read it back).
impl From<StartError> for io::Error {
    fn from(e: StartError) -> io::Error {
        io::Error::new(e.os_error().kind(), e)
    }
}

impl StartError {
    /// The [`StartError`] an `io::Error` carries, if it carries one.
    pub fn of(e: &io::Error) -> Option<&StartError> {
        e.get_ref().and_then(|r| r.downcast_ref::<StartError>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_and_errno_survive_the_report_word() {
        for step in Step::ALL {
            for errno in [1, libc::ENOENT, libc::EPERM, 4095] {
                let e = StartError::new(step, errno);
                assert_ne!(e.encode(), 0);
                assert_eq!(StartError::decode(e.encode()), Some(e));
            }
        }
        assert_eq!(StartError::decode(0), None);
        assert_eq!(StartError::decode(99 << 32 | 2).map(|e| e.step), Some(Step::Report));
    }

    #[test]
    fn the_message_names_the_step_and_the_cause() {
        let m = StartError::new(Step::Landlock, libc::ENOENT).to_string();
        assert!(m.contains("`landlock`") && m.contains("Landlock ruleset") && m.contains("os error 2"), "{m}");
        let io: io::Error = StartError::new(Step::Exec, libc::ENOENT).into();
        assert_eq!(io.kind(), io::ErrorKind::NotFound);
        assert_eq!(StartError::of(&io).map(|e| e.step), Some(Step::Exec));
    }
}
