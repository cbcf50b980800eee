//! Confinement in the kernel's terms: the child's namespace and mount setup ([`child`]), Landlock ([`landlock`],
//! [`rules`]), the seccomp filter ([`seccomp`]), the network proxy's socket work ([`netproxy`]) and what this
//! kernel supports ([`kernel`]). The plan of what a call may touch is made above, in `awt_core::sandbox`.

pub mod child;
pub mod keptnet;
pub mod kernel;
pub mod landlock;
pub mod netproxy;
pub mod rules;
pub mod seccomp;
pub mod upstream;

use serde_json::{json, Value};

/// The network a plan gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetPlan {
    None,
    All,
    /// TCP connections to these ports, any host.
    Ports(Vec<u16>),
}

impl NetPlan {
    pub fn union(self, other: NetPlan) -> NetPlan {
        match (self, other) {
            (NetPlan::All, _) | (_, NetPlan::All) => NetPlan::All,
            (NetPlan::None, x) | (x, NetPlan::None) => x,
            (NetPlan::Ports(mut a), NetPlan::Ports(b)) => {
                a.extend(b);
                a.sort_unstable();
                a.dedup();
                NetPlan::Ports(a)
            }
        }
    }

    pub fn to_json(&self) -> Value {
        match self {
            NetPlan::None => json!(false),
            NetPlan::All => json!(true),
            NetPlan::Ports(p) => json!(p),
        }
    }
}
