//! A tool's own declaration (`"sandbox"` in its `--schemas` profile): checked before any plan is made.

use super::places::Places;
use awt_protocol::{Net, Sandbox as Declared};
use awt_sys::confine::NetPlan;

/// Problems with a declaration's form (for `check` and discovery); empty when it is fine.
pub fn validate(d: &Declared) -> Vec<String> {
    let places = Places {
        anima: Some("/a".into()),
        data: "/d".into(),
        tmp: "/t".into(),
        tool_dir: "/w".into(),
        home: Some("/h".into()),
        cwd: Some("/c".into()),
    };
    let mut out = Vec::new();
    for (field, list) in [("read", &d.read), ("write", &d.write), ("exec", &d.exec)] {
        for raw in list {
            if let Err(e) = places.expand(raw) {
                out.push(format!("sandbox.{field}: {e}"));
            }
        }
    }
    if let Net::Only(list) = &d.net {
        for e in list {
            if let Err(m) = parse_host_port(e) {
                out.push(format!("sandbox.net: {m}"));
            } else if crate::netpolicy::Allowed::parse(e).is_none() {
                out.push(format!(
                    "sandbox.net: {e:?}: the host is not a DNS name, an IP address ([...] for IPv6) or \"*\""
                ));
            }
        }
    }
    out
}

/// A `net` entry that is not `host:port`.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not \"host:port\" (a port from 1 to 65535; \"*:443\" for any host)")]
pub(super) struct BadHostPort(String);

pub(super) fn parse_host_port(e: &str) -> Result<u16, BadHostPort> {
    let bad = || BadHostPort(e.to_owned());
    let (host, port) = e.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || host.len() > 253 {
        return Err(bad());
    }
    port.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad)
}

pub(super) fn declared_net(d: &Declared) -> NetPlan {
    match &d.net {
        Net::All(true) => NetPlan::All,
        Net::All(false) => NetPlan::None,
        Net::Only(list) => {
            let mut ports: Vec<u16> = list.iter().filter_map(|e| parse_host_port(e).ok()).collect();
            if ports.is_empty() {
                return NetPlan::None;
            }
            // DNS over TCP (RES_OPTIONS=use-vc): UDP stays refused.
            ports.push(53);
            ports.sort_unstable();
            ports.dedup();
            NetPlan::Ports(ports)
        }
    }
}
