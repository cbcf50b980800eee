//! The policy of the sandbox's HTTP proxy (docs/sandbox.md): which targets of an action's `"net"` host list it
//! relays, which addresses a tool reaches only when an anima's grant names them, and what a refusal says (the grant
//! that allows it). The proxy itself is `awt_sys::confine::netproxy`, which asks this policy.

use awt_sys::confine::netproxy::{self, split_authority, PORT};
use std::net::IpAddr;

/// One entry of a `"net"` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// Lowercase, without brackets or a trailing dot; `None` for `*`.
    host: Option<String>,
    /// `None`: any port (the whole network of an undeclared AnimaWorks module, [`Allowed::any`]).
    port: Option<u16>,
}

impl Allowed {
    /// `"host:port"` (already validated by the plan); `None` when it is not one.
    pub fn parse(e: &str) -> Option<Allowed> {
        let (host, port) = split_authority(e)?;
        Some(Allowed {
            host: (host != "*").then_some(host),
            port: Some(port),
        })
    }

    /// Any host, any port (public addresses only, as every entry: [`NetPolicy`]).
    pub fn any() -> Allowed {
        Allowed { host: None, port: None }
    }

    /// Matches `host` (normalized, as the proxy gives it) and `port`.
    pub fn permits(&self, host: &str, port: u16) -> bool {
        self.port.is_none_or(|p| p == port) && self.host.as_deref().is_none_or(|h| h == host)
    }
}

/// What the proxy of one call relays: the action's host list, and the anima's grants that name non-public
/// targets (`permissions.json` `"sandbox": {"net": ["127.0.0.1:5432"]}`).
#[derive(Debug, Clone)]
pub struct NetPolicy {
    pub allowed: Vec<Allowed>,
    pub private: Vec<Allowed>,
}

impl NetPolicy {
    /// The policy of a host list (`*` any host) and of the anima's grants (`host:port` entries).
    pub fn new(hosts: &[String], grants: &[String]) -> NetPolicy {
        let allowed = hosts
            .iter()
            .filter_map(|e| if e == "*" { Some(Allowed::any()) } else { Allowed::parse(e) })
            .collect();
        let private = grants.iter().filter_map(|e| Allowed::parse(e)).collect();
        NetPolicy { allowed, private }
    }
}

impl netproxy::Policy for NetPolicy {
    fn name(&self) -> &str {
        "animaworks-tool sandbox proxy"
    }

    fn target(&self, host: &str, port: u16) -> Result<(), String> {
        match self.allowed.iter().any(|a| a.permits(host, port)) {
            true => Ok(()),
            false => Err(format!("{host}:{port} is not in this action's sandbox \"net\" list")),
        }
    }

    fn named(&self, host: &str, port: u16) -> bool {
        self.private.iter().any(|a| a.permits(host, port))
    }

    fn reachable(&self, ip: IpAddr, port: u16, own: &[IpAddr]) -> bool {
        crate::policy::addresses::reachable(ip, own) || self.private.iter().any(|g| g.permits(&ip.to_string(), port))
    }

    fn unreachable(&self, host: &str, port: u16) -> String {
        format!(
            "{host}:{port} is a loopback, private, link-local or reserved address, or one of this host's own; a \
             sandboxed tool reaches one only when the anima's permissions.json names it: \
             \"sandbox\": {{\"net\": [\"{host}:{port}\"]}}"
        )
    }
}

/// What `doctor` says of host lists, given whether calls get a PID namespace (and so a network namespace).
pub fn doctor_line(proxy: bool) -> String {
    if proxy {
        format!("host names in \"net\": enforced: a call with a host list has no network but the runner's proxy (127.0.0.1:{PORT}, HTTPS_PROXY)")
    } else {
        "host names in \"net\": NOT enforced (no PID namespace): a host list allows its ports on any host".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use awt_sys::confine::netproxy::{normal_host, Policy};

    #[test]
    fn entries_match_host_and_port_exactly() {
        let list: Vec<Allowed> = ["api.Example.com:443", "*:8443", "[::1]:80"]
            .iter()
            .map(|e| Allowed::parse(e).unwrap())
            .collect();
        let ok = |h: &str, p| list.iter().any(|a| a.permits(&normal_host(h).unwrap(), p));
        assert!(ok("API.example.COM", 443));
        assert!(ok("api.example.com.", 443));
        assert!(!ok("api.example.com", 80));
        assert!(!ok("evil.api.example.com", 443));
        assert!(ok("anything.at.all", 8443));
        assert!(ok("[::1]", 80));
        assert!(Allowed::parse("nohost").is_none());
        assert_eq!(Allowed::parse("[::1]:443").map(|a| a.permits("::1", 443)), Some(true));
    }

    /// A refusal names what was refused and the grant that allows it.
    #[test]
    fn refusals_name_the_list_and_the_grant() {
        let p = NetPolicy::new(&["h.test:443".into()], &["db.test:5432".into(), "127.0.0.1:6379".into()]);
        assert_eq!(p.target("h.test", 443), Ok(()));
        let no = p.target("other.test", 443).unwrap_err();
        assert!(no.contains("other.test:443") && no.contains("sandbox \"net\" list"), "{no}");
        assert!(p.named("db.test", 5432) && !p.named("db.test", 5433));
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(!p.reachable(lo, 5432, &[]));
        assert!(p.reachable(lo, 6379, &[]), "a grant naming the address itself");
        let why = p.unreachable("db.test", 5433);
        assert!(
            why.contains("permissions.json") && why.contains("\"sandbox\": {\"net\": [\"db.test:5433\"]}"),
            "{why}"
        );
        let any = NetPolicy::new(&["*".into()], &[]);
        assert_eq!(any.target("x.test", 1), Ok(()));
    }
}
