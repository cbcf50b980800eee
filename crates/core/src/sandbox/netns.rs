//! Kept network namespaces: which calls may have one after another, and when one is free again.
//!
//! A networked call's namespace (only `lo`, and the runner's proxy listening on it) is made once and joined by
//! later calls of the same key ([`awt_sys::confine::keptnet`]), instead of made and torn down for each. A kept
//! namespace holds nothing of its own a tool could change (the tool has no capability in it: no address, route,
//! firewall or `sysctl`); what a call can leave in it is a socket, and only through a process outside the call
//! (every process of the call is in its PID namespace, gone when its init is), reached over a UNIX socket: its
//! holder can then reach a later call of the same key's loopback listeners and proxy while that call runs
//! (docs/sandbox-network.md, "Kept network namespaces", says why this is accepted and how to turn keeping off).
//! So a namespace goes:
//! - only to calls of the same key: one anima (and data dir), one tool file, one host list and one set of private
//!   targets (the proxy's rules; the same key as the call's temp dir, [`super::tmp::ReuseKey`], and the grants);
//! - to one call at a time: it is free again once no start holds it, every init started in it has exited (every
//!   process of those calls is gone; recorded by the start itself, so a call dropped mid-start counts too) and
//!   the call's proxy holds no listener on its port;
//! - never again after a start that joined it failed in its setup (the proxy's port held: bound `SO_REUSEADDR`,
//!   so only a listener holds it), which is retried in a fresh namespace;
//! - never again when, at hand-over, a socket that a process holds lives in it (its `tcp`, `tcp6`, `udp`, `udp6`
//!   and `unix` tables, [`KeptNet::lists_sockets`]): only a process outside the calls can hold one then, passed
//!   to it by a call, and it could catch a later call's connection to its own loopback listener; and not while
//!   its count of sockets ([`KeptNet::counts_sockets`]: one neither bound nor connected too) is above 0;
//! - never to a call whose grants reach loopback or private targets: such a call always gets a fresh one.

use awt_sys::confine::keptnet::KeptNet;
use std::sync::{Arc, Mutex, Weak};

/// At most this many kept namespaces wait in one process (the oldest go first): each is kernel memory.
const CAP: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key(u64);

impl Key {
    pub(crate) fn of(
        call: super::tmp::ReuseKey,
        hosts: &[String],
        private: &[String],
        maps: Option<(&[u8], &[u8])>,
    ) -> Option<Key> {
        if !private.is_empty() {
            return None;
        }
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        ("netns", call, hosts, private, maps).hash(&mut h);
        Some(Key(h.finish()))
    }
}

/// A namespace waiting for its next call, with what must be over first.
struct Idle {
    key: Key,
    ns: Arc<KeptNet>,
    /// The call's proxy's listener ([`awt_sys::confine::netproxy::Proxy::listening`]).
    listening: Weak<()>,
}

impl Idle {
    fn free(&self) -> bool {
        // Held elsewhere: a start in flight (its plan may be gone, its thread still runs). Its inits are recorded
        // by the start itself ([`KeptNet::joined_by`]), whoever's call it was.
        Arc::strong_count(&self.ns) == 1 && self.listening.strong_count() == 0 && self.ns.vacant()
    }
}

static KEPT: Mutex<Vec<Idle>> = Mutex::new(Vec::new());

/// The keys of the calls this process has started in a fresh namespace: a namespace is kept only from a key's
/// second call on, so that a one-shot call (the whole process one call) pays nothing for a namespace it cannot
/// hand on. Bounded: full, it starts over (a key then waits one more call).
static SEEN: Mutex<Vec<Key>> = Mutex::new(Vec::new());
const SEEN_CAP: usize = 1024;

/// One call's use of a kept namespace: back to the pool when dropped (with the plan), spoiled ones excepted.
#[derive(Debug)]
pub(crate) struct Lease {
    key: Key,
    ns: Arc<KeptNet>,
    listening: Weak<()>,
}

impl Lease {
    /// A free namespace of `key`, or a new one (`maps`: those of a user namespace to own it, for a runner
    /// without `CAP_SYS_ADMIN`); `None` for a key's first call in this process, or when none can be made: the call
    /// makes its own, as when namespaces are not kept.
    pub(crate) fn take(key: Key, maps: Option<(&[u8], &[u8])>) -> Option<Lease> {
        if fresh_only() {
            return None;
        }
        let found = {
            let mut v = KEPT.lock().unwrap_or_else(|e| e.into_inner());
            // A socket listed in it at hand-over: let go, never joined again. One only counted (unbound, or just
            // closed): not handed on while it is.
            v.retain(|i| !(i.key == key && i.free() && i.ns.lists_sockets()));
            v.iter()
                .rposition(|i| i.key == key && i.free() && !i.ns.counts_sockets())
                .map(|at| v.remove(at).ns)
        };
        let ns = match found {
            Some(ns) => ns,
            None if first_call(key) => return None,
            None => Arc::new(KeptNet::make(maps).ok()?),
        };
        Some(Lease {
            key,
            ns,
            listening: Weak::new(),
        })
    }

    pub(crate) fn ns(&self) -> Arc<KeptNet> {
        self.ns.clone()
    }

    /// The proxy serving the call that joins it.
    pub(crate) fn proxied_by(&mut self, listening: Weak<()>) {
        self.listening = listening;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.ns.spoiled() {
            return;
        }
        let idle = Idle {
            key: self.key,
            ns: self.ns.clone(),
            listening: std::mem::take(&mut self.listening),
        };
        let oldest = {
            let mut v = KEPT.lock().unwrap_or_else(|e| e.into_inner());
            v.push(idle);
            (v.len() > CAP).then(|| v.remove(0))
        };
        drop(oldest);
    }
}

/// Is this `key`'s first call in this process (now recorded)?
fn first_call(key: Key) -> bool {
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.contains(&key) {
        return false;
    }
    if seen.len() >= SEEN_CAP {
        seen.clear();
    }
    seen.push(key);
    true
}

/// `ANIMAWORKS_TOOL_FRESH_NETNS=1`: none is kept (each call makes its own, as before they were kept).
fn fresh_only() -> bool {
    static FRESH: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FRESH.get_or_init(|| std::env::var_os(crate::env_vars::FRESH_NETNS.name).is_some_and(|v| v == "1"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// A call dropped while its start still ran records no init: its namespace must wait for that start, and for
    /// every init started in it, before another call of the key gets it.
    #[test]
    fn a_call_whose_grants_reach_private_targets_never_shares_a_namespace() {
        let call = || super::super::tmp::ReuseKey::of(Path::new("/d"), None, Path::new("/d/common_tools/t"));
        assert!(Key::of(call(), &["*".into()], &[], None).is_some());
        assert!(Key::of(call(), &["*".into()], &["127.0.0.1:5432".into()], None).is_none());
    }

    #[test]
    fn a_namespace_is_not_handed_on_while_a_start_holds_it_or_an_init_started_in_it_lives() {
        let key = Key(0x6b65_7074_6e65_7431);
        assert!(Lease::take(key, None).is_none(), "a key's first call makes its own");
        let Some(lease) = Lease::take(key, None) else {
            awt_sys::skipped!("this process cannot make a network namespace without a user namespace's maps");
            return;
        };
        let held = lease.ns();
        let at = Arc::as_ptr(&held);
        drop(lease); // the call is gone; its start (`held`) still runs
        let next = Lease::take(key, None).expect("a namespace");
        assert_ne!(Arc::as_ptr(&next.ns), at, "handed on while a start held it");
        drop(next);
        let mut init = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        held.joined_by(Some(init.id()));
        drop(held); // the start is over; what it started lives
        let next = Lease::take(key, None).expect("a namespace");
        assert_ne!(Arc::as_ptr(&next.ns), at, "handed on while an init started in it lived");
        drop(next);
        init.kill().unwrap();
        init.wait().unwrap();
        // Each lease taken is kept out of the pool until the end, so that the next take looks further.
        let mut taken = Vec::new();
        while taken.len() < CAP {
            let Some(l) = Lease::take(key, None) else { break };
            let found = Arc::as_ptr(&l.ns) == at;
            taken.push(l);
            if found {
                return;
            }
        }
        panic!("not free again once its init is gone");
    }
}
