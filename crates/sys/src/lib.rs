//! # awt_sys: every `unsafe` block of the workspace
//!
//! The code that talks to the kernel below std: starting processes ([`process`]), the guardian that takes the
//! tools' process groups down with the runner ([`guardian`]), reaping ([`reap`]), the confined child's namespaces,
//! mounts, Landlock and seccomp ([`confine`]), the call's cgroup ([`cgroup`]) and rlimits ([`rlimit`]), and raw
//! system calls for code that shares its memory with another process ([`syscall`]).
//!
//! ## What this crate promises, and what it does not
//! - Each `unsafe` block holds a `// SAFETY:` line; every other crate of the workspace has
//!   `#![forbid(unsafe_code)]`, so this crate is where the memory-safety argument is made and checked.
//! - It takes plain specs (a program, its argv and environment, descriptors, mounts, a ruleset, limits) and names
//!   nothing of the layers above or of the framework they serve: no tiers, permissions, settings files, tools, or
//!   the framework's folders (the runner's `layers` test pins that no such name is spelt here).
//! - It does **not** promise that only a prepared call starts a tool: [`process::spawn`] starts whatever it is
//!   given. That promise is `awt_core`'s: its API starts a process only from a `PreparedCall`, which only its
//!   pipeline can build (validated, permitted, confined, audited).
//!
//! ## The path of one confined start, in this crate
//! 1. `awt_core::spawn` builds the spec and calls [`process::spawn`] with a [`process::Start`].
//! 2. The child (a `clone` sharing no memory, or with [`process::Start::Init`] a PID-namespace init) runs
//!    [`confine::child::enter_and_exec`]: user and mount namespaces, the mounts, [`confine::landlock`]'s ruleset,
//!    [`confine::seccomp::install`], the handed-over descriptors ([`process::place_handovers`]), then `execve`.
//! 3. [`guardian::register`] records the group, so a dying runner still kills it; [`reap`] ends and waits for it.
//! 4. [`cgroup`] and [`rlimit`] bound what the process may use.
//! 5. A start that fails returns [`start_error::StartError`]: the step that failed (reported by the child as a
//!    code) and its errno.

pub mod cgroup;
mod children;
pub mod confine;
pub mod entry;
pub mod guardian;
pub mod inherited;
pub mod percent;
pub mod process;
pub mod reap;
pub mod rlimit;
pub mod start;
pub mod start_error;
pub mod syscall;
#[doc(hidden)]
pub mod test_skip;
