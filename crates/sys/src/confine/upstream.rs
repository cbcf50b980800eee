//! The caller's own proxy behind the sandbox's ([`super::netproxy`]): where the only way out is the operator's
//! proxy (`HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` in the runner's environment), the
//! runner's proxy checks the target as always, then reaches it through that proxy (`CONNECT host:port` for a
//! tunnel, the absolute-form request for `http://`) unless `NO_PROXY` names the host. Only `http://` proxies are
//! followed (a `socks5://` or `https://` one is left out, and the target is connected directly).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest answer head read from the upstream proxy.
const MAX_HEAD: usize = 8 * 1024;

/// One proxy: where it listens, and its `Proxy-Authorization` when its URL has a user.
#[derive(Clone, PartialEq, Eq)]
pub struct Via {
    host: String,
    port: u16,
    auth: Option<String>,
}

impl std::fmt::Debug for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the credentials.
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl Via {
    /// `http://[user[:password]@]host[:port][/]`, or `host:port` (read as `http://`); `None` for another scheme.
    fn parse(url: &str) -> Option<Via> {
        let url = url.trim();
        let rest = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some(_) => return None,
            None => url,
        };
        let authority = rest.split(['/', '?', '#']).next()?;
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') && !p.contains(']') => (h, p.parse::<u16>().ok().filter(|p| *p > 0)?),
            _ => (hostport, 80),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        let auth = user.map(|u| format!("Basic {}", base64(crate::percent::decode(u).as_bytes())));
        Some(Via {
            host: host.to_owned(),
            port,
            auth,
        })
    }
}

/// The caller's proxies and exemptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Upstream {
    https: Option<Via>,
    http: Option<Via>,
    all: Option<Via>,
    /// `NO_PROXY` entries, lowercase, without a leading `*` or `.`; `*` exempts every host.
    no_proxy: Vec<String>,
}

impl Upstream {
    /// From variables as `get` gives them (the lowercase spelling first, as curl and Python read them);
    /// `None` when no proxy is set.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Option<Upstream> {
        let value = |name: &str| {
            get(&name.to_ascii_lowercase())
                .or_else(|| get(name))
                .filter(|v| !v.trim().is_empty())
        };
        let via = |name: &str| value(name).and_then(|v| Via::parse(&v));
        let u = Upstream {
            https: via("HTTPS_PROXY"),
            http: via("HTTP_PROXY"),
            all: via("ALL_PROXY"),
            no_proxy: value("NO_PROXY")
                .unwrap_or_default()
                .split(',')
                .map(|e| match e.trim() {
                    "*" => "*".to_owned(),
                    e => e.trim_start_matches('*').trim_start_matches('.').to_ascii_lowercase(),
                })
                .filter(|e| !e.is_empty())
                .collect(),
        };
        (u.https.is_some() || u.http.is_some() || u.all.is_some()).then_some(u)
    }

    /// The proxy for `host:port` (a tunnel, or a plain `http://` request), `None` to connect directly: no proxy
    /// of that kind, `NO_PROXY` names the host (itself or a domain above it, with or without the port), or the
    /// host is loopback.
    pub fn route(&self, host: &str, port: u16, tunnel: bool) -> Option<&Via> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified());
        let exempt = self.no_proxy.iter().any(|e| {
            let (name, eport) = match e.rsplit_once(':') {
                Some((n, p)) if p.parse::<u16>().is_ok() && !n.is_empty() => (n, p.parse::<u16>().ok()),
                _ => (e.as_str(), None),
            };
            let name = name.trim_start_matches('[').trim_end_matches(']');
            eport.is_none_or(|p| p == port)
                && (name == "*" || host == name || host.strip_suffix(name).is_some_and(|r| r.ends_with('.')))
        });
        if loopback || exempt {
            return None;
        }
        if tunnel {
            self.https.as_ref().or(self.all.as_ref())
        } else {
            self.http.as_ref().or(self.all.as_ref())
        }
    }
}

/// The runner's own environment, read once.
pub fn configured() -> Option<&'static Upstream> {
    static U: std::sync::OnceLock<Option<Upstream>> = std::sync::OnceLock::new();
    U.get_or_init(|| Upstream::from_vars(|k| std::env::var(k).ok()))
        .as_ref()
}

fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Connect to `host:port` through `via`: for a tunnel, `CONNECT` and its `2xx`; for a plain request, its head
/// (origin-form, as the sandbox's proxy rewrote it) sent in absolute form. `Err` is the status and text to answer
/// the tool.
pub async fn open(
    via: &Via,
    host: &str,
    port: u16,
    forward_head: Option<&[u8]>,
) -> Result<TcpStream, (&'static str, String)> {
    let bad = |e: String| ("502 Bad Gateway", format!("the upstream proxy {via:?}: {e}"));
    let mut s = TcpStream::connect((via.host.as_str(), via.port))
        .await
        .map_err(|e| bad(format!("cannot connect: {e}")))?;
    let auth = via
        .auth
        .as_ref()
        .map(|a| format!("Proxy-Authorization: {a}\r\n"))
        .unwrap_or_default();
    let target = authority(host, port);
    if let Some(head) = forward_head {
        let head = absolute_form(head, &target, &auth).ok_or_else(|| bad("the request head is not HTTP".into()))?;
        s.write_all(&head).await.map_err(|e| bad(e.to_string()))?;
        return Ok(s);
    }
    let ask = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n");
    s.write_all(ask.as_bytes()).await.map_err(|e| bad(e.to_string()))?;
    // Read byte by byte up to the blank line: nothing of the tunnel's own bytes may be taken here.
    let mut head = Vec::with_capacity(256);
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HEAD {
            return Err(bad("an answer head longer than 8 KiB".into()));
        }
        match s.read(&mut b).await {
            Ok(1) => head.push(b[0]),
            Ok(_) => return Err(bad("closed before answering CONNECT".into())),
            Err(e) => return Err(bad(e.to_string())),
        }
    }
    let line = String::from_utf8_lossy(head.split(|c| *c == b'\r').next().unwrap_or_default()).into_owned();
    let ok = line
        .split(' ')
        .nth(1)
        .is_some_and(|code| code.len() == 3 && code.starts_with('2'));
    if !ok {
        return Err(bad(format!("CONNECT {target} answered {line:?}")));
    }
    Ok(s)
}

/// `METHOD /path HTTP/1.x\r\nHost: authority\r\n…` as `METHOD http://authority/path HTTP/1.x\r\n[auth]…`: the
/// authority as the tool wrote it (the `Host` line the sandbox's proxy set from its target), else `target`.
fn absolute_form(head: &[u8], target: &str, auth: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let (line, rest) = text.split_once("\r\n")?;
    let mut parts = line.splitn(3, ' ');
    let (method, path, version) = (parts.next()?, parts.next()?, parts.next()?);
    let authority = rest
        .split("\r\n")
        .find_map(|h| {
            h.get(..5)
                .filter(|n| n.eq_ignore_ascii_case("host:"))
                .map(|_| h[5..].trim())
        })
        .filter(|a| !a.is_empty())
        .unwrap_or(target);
    Some(format!("{method} http://{authority}{path} {version}\r\n{auth}{rest}").into_bytes())
}

fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(vars: &[(&str, &str)]) -> Option<Upstream> {
        Upstream::from_vars(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn proxies_and_exemptions_are_read_as_curl_reads_them() {
        assert_eq!(up(&[("NO_PROXY", "x")]), None);
        assert_eq!(up(&[("HTTPS_PROXY", "socks5://h:1")]), None);
        let u = up(&[
            ("HTTPS_PROXY", "http://user:p%40ss@proxy.corp:8080/"),
            ("http_proxy", "proxy.corp"),
            ("NO_PROXY", " .internal.test, exact.test:8443,*.star.test "),
        ])
        .unwrap();
        let v = u.route("example.com", 443, true).unwrap();
        assert_eq!((v.host.as_str(), v.port), ("proxy.corp", 8080));
        assert_eq!(v.auth.as_deref(), Some("Basic dXNlcjpwQHNz"));
        assert_eq!(format!("{v:?}"), "proxy.corp:8080", "no credentials shown");
        assert_eq!(u.route("example.com", 80, false).unwrap().port, 80);
        for (host, port) in [
            ("a.internal.test", 443),
            ("internal.test", 443),
            ("exact.test", 8443),
            ("b.star.test", 443),
            ("localhost", 443),
            ("127.0.0.1", 443),
            ("::1", 443),
        ] {
            assert_eq!(u.route(host, port, true), None, "{host}:{port}");
        }
        assert!(u.route("exact.test", 443, true).is_some());
        assert!(u.route("notinternal.test", 443, true).is_some());
        let all = up(&[("ALL_PROXY", "http://p:3"), ("no_proxy", "*")]).unwrap();
        assert_eq!(all.route("example.com", 443, true), None);
        let all = up(&[("ALL_PROXY", "http://p:3")]).unwrap();
        assert_eq!(all.route("example.com", 80, false).unwrap().port, 3);
    }

    #[test]
    fn a_plain_request_goes_upstream_in_absolute_form() {
        let head = b"GET /a?b HTTP/1.1\r\nHost: h.test\r\nConnection: close";
        let out = absolute_form(head, "h.test:80", "Proxy-Authorization: Basic eA==\r\n").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET http://h.test/a?b HTTP/1.1\r\nProxy-Authorization: Basic eA==\r\nHost: h.test\r\nConnection: close"
        );
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        assert_eq!(base64(b"a"), "YQ==");
    }
}
