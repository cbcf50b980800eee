//! Which network addresses a confined tool reaches without a grant naming them: the proxy's policy
//! (`awt_sys::confine::netproxy` asks [`reachable`] about every address a target resolves to). An address is
//! judged by what it is, not by how it is spelled.

/// An address a tool may reach without a grant naming it: a global unicast address. Not loopback, private (RFC
/// 1918, IPv6 ULA), link-local (the cloud metadata address 169.254.169.254 among them), shared (CGNAT),
/// unspecified, multicast, broadcast, nor any range IANA reserves (documentation, benchmarking, protocol
/// assignments, 240/4, IPv6 outside 2000::/3). An IPv4 address inside an IPv6 one (v4-mapped, NAT64 64:ff9b::/96,
/// 6to4 2002::/16) is judged as the IPv4 address it reaches.
pub fn is_public(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            let within = |net: [u8; 4], bits: u32| {
                let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
                u32::from(a) & mask == u32::from_be_bytes(net) & mask
            };
            !(a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_unspecified()
                || a.is_multicast()
                || o[0] == 0
                || within([100, 64, 0, 0], 10)
                || within([192, 0, 0, 0], 24)
                || within([192, 0, 2, 0], 24)
                || within([192, 88, 99, 0], 24)
                || within([198, 18, 0, 0], 15)
                || within([198, 51, 100, 0], 24)
                || within([203, 0, 113, 0], 24)
                || within([240, 0, 0, 0], 4))
        }
        IpAddr::V6(a) => {
            if let Some(v4) = embedded_v4(a) {
                return is_public(IpAddr::V4(v4));
            }
            let s = a.segments();
            let global = (s[0] & 0xe000) == 0x2000;
            let ietf = s[0] == 0x2001 && s[1] < 0x0200;
            let documentation = (s[0] == 0x2001 && s[1] == 0x0db8) || (s[0] == 0x3fff && s[1] < 0x1000);
            global && !ietf && !documentation
        }
    }
}

/// The IPv4 address an IPv6 address carries to (v4-mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4
/// `2002:AABB:CCDD::`), if it is one of those.
fn embedded_v4(a: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let s = a.segments();
    let tail = |hi: u16, lo: u16| std::net::Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = a.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail(s[6], s[7]));
    }
    (s[0] == 0x2002).then(|| tail(s[1], s[2]))
}

/// An address as the host it reaches: the IPv4 address inside an IPv6 form of it, else itself.
fn reached(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(a) => embedded_v4(a).map_or(ip, std::net::IpAddr::V4),
        v4 => v4,
    }
}

/// May a tool reach `ip` without a grant: a public address that is none of `own` (the host's own addresses,
/// read at the request), in whichever spelling.
pub fn reachable(ip: std::net::IpAddr, own: &[std::net::IpAddr]) -> bool {
    let at = reached(ip);
    is_public(ip) && !own.iter().any(|o| reached(*o) == at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_addresses() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "::",
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
        for a in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "100.128.0.1"] {
            assert!(is_public(a.parse().unwrap()), "{a}");
        }
    }

    /// Documentation, benchmarking and reserved ranges, and IPv6 forms that carry a non-public IPv4 address.
    #[test]
    fn reserved_ranges_and_embedded_addresses_are_not_public() {
        for a in [
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "198.18.0.1",
            "198.19.255.254",
            "198.51.100.7",
            "203.0.113.9",
            "240.0.0.1",
            "255.255.255.255",
            "64:ff9b::10.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::192.0.2.1",
            "64:ff9b:1::1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "2001:db8::1",
            "2001::1",
            "2001:2::1",
            "3fff::1",
            "100::1",
            "fec0::1",
            "::a00:1",
            "::ffff:192.0.2.1",
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
        for a in [
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
            "2a00:1450::1",
            "198.20.0.1",
            "203.0.114.1",
        ] {
            assert!(is_public(a.parse().unwrap()), "{a}");
        }
    }

    /// An address of the host's own is refused however it is spelled (v4-mapped, NAT64, 6to4).
    #[test]
    fn own_addresses_are_not_reachable_in_any_spelling() {
        let own: Vec<std::net::IpAddr> = ["8.8.4.4", "2a00:1450::5"]
            .iter()
            .map(|a| reached(a.parse().unwrap()))
            .collect();
        for a in [
            "8.8.4.4",
            "::ffff:8.8.4.4",
            "64:ff9b::8.8.4.4",
            "2002:808:404::1",
            "2a00:1450::5",
        ] {
            assert!(!reachable(a.parse().unwrap(), &own), "{a}");
        }
        for a in ["8.8.8.8", "2a00:1450::6"] {
            assert!(reachable(a.parse().unwrap(), &own), "{a}");
        }
    }
}
