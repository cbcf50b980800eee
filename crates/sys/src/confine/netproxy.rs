//! A host list, enforced: the tool runs in a network namespace of its own, which has only a loopback device, so it
//! reaches nothing but an HTTP proxy the runner serves for it. Which targets it relays, and what a refusal says,
//! is the caller's [`Policy`]; this module is the mechanism.
//!
//! 1. Before the fork, [`start`] makes a `socketpair` and a task that waits on the runner's end.
//! 2. In the child, after the namespaces are made ([`listen_in_child`]): `lo` up, a TCP listener on
//!    `127.0.0.1:`[`PORT`] inside the new namespace, its descriptor sent to the runner (`SCM_RIGHTS`) and closed.
//!    A socket keeps the namespace it was made in, so the runner accepts on it from its own namespace.
//! 3. The task accepts and serves `CONNECT host:port` and absolute-form `http://` requests (the head parsed by
//!    httparse, bounded); each target, its host normalized ([`split_authority`]), is held to the [`Policy`],
//!    resolved and connected by the runner, then bytes flow both ways. A refused target gets `403` with the
//!    policy's text, a note on the runner's stderr and in the [`Log`].
//! 4. The tool's environment names the proxy ([`env()`]). Whatever ignores it finds no route (no DNS either).
//!
//! The task, its listener and every relayed connection end when the [`Proxy`] is dropped, with the plan.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

/// The proxy's port inside the tool's namespace (which is empty, so any port is free; this is squid's).
pub const PORT: u16 = 3128;
/// The longest request head read (request line and headers).
const MAX_HEAD: usize = 8 * 1024;
/// The most header lines a request head may have.
const MAX_HEADERS: usize = 64;
/// Connections relayed at once per process; more wait in the listener's backlog.
const MAX_CONNECTIONS: usize = 32;
/// Refused targets kept for the audit line.
const MAX_NOTED: usize = 16;
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The proxy's address, as the tool's environment names it.
pub fn url() -> String {
    format!("http://127.0.0.1:{PORT}")
}

/// Variables the tool gets (both spellings: curl reads lowercase `http_proxy` only, Go and Python either).
pub fn env() -> Vec<(String, String)> {
    let u = url();
    ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"]
        .iter()
        .flat_map(|k| [(k.to_string(), u.clone()), (k.to_lowercase(), u.clone())])
        .collect()
}

/// Variables the tool must not get: an exemption would name hosts that have no route anyway.
pub const UNSET: &[&str] = &["NO_PROXY", "no_proxy"];

/// This kernel has network namespaces (asked once; a kernel built without them would fail every such call).
pub fn available() -> bool {
    static A: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *A.get_or_init(|| std::fs::symlink_metadata("/proc/self/ns/net").is_ok())
}

/// What the proxy asks its caller: which targets it relays, and what a refusal says. Hosts are given normalized
/// ([`normal_host`]: lowercase, no brackets, no trailing dot).
pub trait Policy: Send + Sync + 'static {
    /// Who answers: the first words of every refusal's body.
    fn name(&self) -> &str;
    /// May the tool ask for `host:port` at all? `Err`: the refusal's text.
    fn target(&self, host: &str, port: u16) -> Result<(), String>;
    /// `host:port` is named by a grant of its own: any address it resolves to may be connected.
    fn named(&self, host: &str, port: u16) -> bool;
    /// May `ip` be connected on `port` without such a grant, given this host's own addresses (`own`, read at the
    /// request)?
    fn reachable(&self, ip: std::net::IpAddr, port: u16, own: &[std::net::IpAddr]) -> bool;
    /// The refusal's text for `host:port` when none of its addresses is reachable.
    fn unreachable(&self, host: &str, port: u16) -> String;
}

/// `host:port` to a normalized host and the port; `None` for anything else (no port, port 0, bad characters).
pub fn split_authority(a: &str) -> Option<(String, u16)> {
    let (host, port) = a.rsplit_once(':')?;
    let port = port.parse::<u16>().ok().filter(|p| *p > 0)?;
    Some((normal_host(host)?, port))
}

/// A host as written in an authority: a name or IPv4 address, or an IPv6 address in brackets (a `:` is only
/// accepted there, so `::1:443` is refused rather than read one way or another; and brackets hold an IPv6 address
/// only, so `[h.test]` is not a second spelling of `h.test`).
pub fn normal_host(h: &str) -> Option<String> {
    if let Some(inner) = h.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
        return inner
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(|_| inner.to_ascii_lowercase());
    }
    let h = h.strip_suffix('.').unwrap_or(h);
    let ok = !h.is_empty()
        && h.len() <= 253
        && (h == "*" || h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)));
    ok.then(|| h.to_ascii_lowercase())
}

/// What the proxy did, for the audit line.
#[derive(Debug, Default)]
pub struct Log {
    pub relayed: u64,
    /// Of those, relayed through the caller's proxy ([`super::upstream`]).
    pub upstream: u64,
    pub refused: u64,
    /// The first refused targets, as asked.
    pub refused_targets: Vec<String>,
}

/// The runner's side: a task serving the proxy, stopped when this is dropped.
pub struct Proxy {
    task: tokio::task::AbortHandle,
    log: Arc<Mutex<Log>>,
    /// Alive while the task may hold a listener on the child's port (until its future is dropped, which an abort
    /// does only at the runtime's next turn): a kept network namespace is not joined again before.
    listening: std::sync::Weak<()>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("log", &self.log).finish()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Synchronous: the task, its listener and its connections are dropped by the runtime, nothing new starts.
        self.task.abort();
    }
}

impl Proxy {
    /// Gone once the task holds no listener and can get none (see the field).
    pub fn listening(&self) -> std::sync::Weak<()> {
        self.listening.clone()
    }

    /// What it did so far: (relayed, refused, the first refused targets).
    pub fn log(&self) -> serde_json::Value {
        let l = self.log.lock().expect("proxy log lock");
        serde_json::json!({"relayed": l.relayed, "upstream": l.upstream, "refused": l.refused, "refused_targets": l.refused_targets})
    }
}

/// The child's side: its end of the socketpair.
pub struct ChildNet {
    sock: OwnedFd,
}

/// Make the socketpair and start the task serving `policy` on the listener the child will send. Needs a tokio
/// runtime (every spawn of a call or worker happens on one).
pub fn start(policy: Arc<dyn Policy>) -> io::Result<(Proxy, ChildNet)> {
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    let rt = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    let (ours, theirs) = socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    let log = Arc::new(Mutex::new(Log::default()));
    let _in_rt = rt.enter();
    let ctl = UnixStream::from_std(std::os::unix::net::UnixStream::from(ours))?;
    let alive = Arc::new(());
    let listening = Arc::downgrade(&alive);
    let task = rt.spawn(serve(ctl, policy, log.clone(), alive)).abort_handle();
    Ok((Proxy { task, log, listening }, ChildNet { sock: theirs }))
}

/// The next listener the child sends: `Ok(None)` once every child-side copy of the socketpair is closed.
async fn next_listener(ctl: &UnixStream) -> io::Result<Option<TcpListener>> {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    loop {
        ctl.readable().await?;
        let got = ctl.try_io(tokio::io::Interest::READABLE, || {
            let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut cmsg = RecvAncillaryBuffer::new(&mut space);
            let mut byte = [0u8; 1];
            let r = recvmsg(
                ctl,
                &mut [io::IoSliceMut::new(&mut byte)],
                &mut cmsg,
                RecvFlags::CMSG_CLOEXEC,
            )?;
            let mut got: Option<OwnedFd> = None;
            for m in cmsg.drain() {
                if let RecvAncillaryMessage::ScmRights(fds) = m {
                    for f in fds {
                        got = Some(f);
                    }
                }
            }
            Ok((r.bytes, got))
        });
        match got {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
            Ok((0, None)) => return Ok(None),
            Ok((_, None)) => continue,
            Ok((_, Some(fd))) => {
                let l = std::net::TcpListener::from(fd);
                l.set_nonblocking(true)?;
                return TcpListener::from_std(l).map(Some);
            }
        }
    }
}

/// Every address of this host's interfaces (in the runner's network namespace), read now: an address added after
/// the runner started counts.
pub fn local_addresses() -> io::Result<Vec<std::net::IpAddr>> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list it allocated, freed below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: a non-null ifa_addr points to a sockaddr whose family names its real type.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
            } else if family == libc::AF_INET6 {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: the list getifaddrs returned, not used after.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The listener with [`Proxy::listening`]'s token: fields drop in order, the listener first.
struct Listening {
    l: TcpListener,
    _alive: Arc<()>,
}

async fn serve(ctl: UnixStream, policy: Arc<dyn Policy>, log: Arc<Mutex<Log>>, alive: Arc<()>) {
    let Ok(Some(first)) = next_listener(&ctl).await else {
        return; // the child never got as far (the spawn failed)
    };
    let mut listener = Listening {
        l: first,
        _alive: alive,
    };
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut conns = tokio::task::JoinSet::new();
    let mut ctl_open = true;
    loop {
        // Why watch the socketpair on: a start retried after ETXTBSY sends a listener of its own; the last wins.
        let replaced = tokio::select! {
            got = async {
                let p = permits.clone().acquire_owned().await.expect("never closed");
                (p, listener.l.accept().await)
            } => {
                let (permit, r) = got;
                if let Ok((conn, _)) = r {
                    let (policy, log) = (policy.clone(), log.clone());
                    conns.spawn(async move {
                        handle(conn, &*policy, &log).await;
                        drop(permit);
                    });
                }
                None
            }
            next = next_listener(&ctl), if ctl_open => match next {
                Ok(Some(l)) => Some(l),
                _ => { ctl_open = false; None }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => None,
        };
        if let Some(l) = replaced {
            listener.l = l;
        }
    }
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    /// `CONNECT host:port`: a tunnel.
    Tunnel { host: String, port: u16 },
    /// An absolute-form `http://` request: forwarded with this head (origin-form, `Connection: close`).
    Forward { host: String, port: u16, head: Vec<u8> },
}

const BAD: &str = "400 Bad Request";
const TOO_MANY: &str = "431 Request Header Fields Too Large";

/// Parse a request head (with its final blank line, as [`read_head`] returns it); `Err` is the status line to
/// answer.
fn parse(head: &[u8]) -> Result<Ask, &'static str> {
    let lines = head.strip_suffix(b"\r\n\r\n").ok_or(BAD)?;
    std::str::from_utf8(lines).map_err(|_| BAD)?;
    // Why, although httparse reads a bare line feed as a line's end: what the tool sent is refused unless it reads
    // one way only, to the server behind as to the rewrite below.
    let count = lines.split(|b| *b == b'\n').count();
    let bare = lines.split(|b| *b == b'\n').enumerate().any(|(i, l)| {
        let body = match l.strip_suffix(b"\r") {
            Some(b) if i + 1 < count => b,
            None if i + 1 < count => return true,
            _ => l,
        };
        body.iter().any(|&b| b < 0x20 && b != b'\t' || b == 0x7f)
    });
    if bare {
        return Err(BAD);
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        Err(httparse::Error::TooManyHeaders) => return Err(TOO_MANY),
        _ => return Err(BAD),
    }
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(BAD);
    };
    let version = format!("HTTP/1.{minor}");
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target).filter(|(h, _)| h != "*").ok_or(BAD)?;
        return Ok(Ask::Tunnel { host, port });
    }
    let rest = target
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &target[7..])
        .ok_or("501 Not Implemented")?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    if authority.contains('@') {
        return Err(BAD);
    }
    // The default port only when the authority names none (a `:` outside brackets); a bad one is refused.
    let names_port = authority
        .rsplit_once(']')
        .map_or(authority, |(_, after)| after)
        .contains(':');
    let (host, port) = if names_port {
        split_authority(authority).ok_or(BAD)?
    } else {
        (normal_host(authority).ok_or(BAD)?, 80)
    };
    if host == "*" {
        return Err(BAD);
    }
    // Why Host from the target: the allow-list judged the target, so the server must be asked for that host,
    // not for whatever other site on the same address the tool's own Host line names.
    let mut out = format!("{method} {path} {version}\r\nHost: {authority}\r\n");
    for h in req.headers.iter() {
        let name = h.name;
        if [
            "host",
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
        ]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
        {
            continue;
        }
        // Checked above: the head is UTF-8 without control bytes.
        let value = std::str::from_utf8(h.value).map_err(|_| BAD)?;
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    // Why close: a second request on the same connection could name another host.
    out.push_str("Connection: close\r\n\r\n");
    Ok(Ask::Forward {
        host,
        port,
        head: out.into_bytes(),
    })
}

async fn answer(c: &mut TcpStream, p: &dyn Policy, status: &str, why: &str) {
    let body = format!("{}: {why}\n", p.name());
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = c.write_all(msg.as_bytes()).await;
    let _ = c.shutdown().await;
}

/// Why no request head was read.
#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    /// Longer than [`MAX_HEAD`].
    TooLarge,
    /// More than [`MAX_HEADERS`] header lines.
    TooManyHeaders,
    /// Not an HTTP/1 request head.
    Malformed,
    /// The connection ended (or failed) before the head did.
    Ended,
}

/// Where the head in `buf` ends (after its blank line), once `buf` holds all of it.
fn head_end(buf: &[u8]) -> Result<Option<usize>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match httparse::Request::new(&mut headers).parse(buf) {
        Ok(httparse::Status::Complete(n)) => Ok(Some(n)),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(HeadError::TooManyHeaders),
        Err(_) => Err(HeadError::Malformed),
    }
}

/// Read the request head: (head with its blank line, bytes read past it), parsed by httparse as it arrives,
/// bounded by [`MAX_HEAD`] bytes and [`MAX_HEADERS`] lines.
async fn read_head(c: &mut TcpStream) -> Result<(Vec<u8>, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let room = (MAX_HEAD + 4 - buf.len()).min(chunk.len());
        if room == 0 {
            return Err(HeadError::TooLarge);
        }
        let n = match c.read(&mut chunk[..room]).await {
            Ok(n) if n > 0 => n,
            _ => return Err(HeadError::Ended),
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head_end(&buf)? {
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
    }
}

fn note_refused(log: &Mutex<Log>, target: &str) {
    let mut l = log.lock().expect("proxy log lock");
    l.refused += 1;
    if l.refused_targets.len() < MAX_NOTED && !l.refused_targets.iter().any(|t| t == target) {
        l.refused_targets.push(target.to_owned());
    }
}

/// The first address of `host:port` the tool may reach, resolved by the runner (so that the name checked is the
/// address connected: no second lookup can answer otherwise); `Err` with the status and text to answer.
async fn resolve(host: &str, port: u16, p: &dyn Policy) -> Result<std::net::SocketAddr, (&'static str, String)> {
    let addrs: Vec<std::net::SocketAddr> = match tokio::net::lookup_host((host, port)).await {
        Ok(a) => a.collect(),
        Err(e) => return Err(("502 Bad Gateway", format!("cannot resolve {host}: {e}"))),
    };
    let granted = p.named(host, port);
    // Read at each request, and refused when unreadable: the host's own addresses are never "public" to a tool.
    let own: Vec<std::net::IpAddr> = if granted {
        Vec::new()
    } else {
        match local_addresses() {
            Ok(l) => l,
            Err(e) => return Err(("403 Forbidden", format!("cannot read this host's own addresses: {e}"))),
        }
    };
    addrs
        .iter()
        .find(|a| granted || p.reachable(a.ip(), port, &own))
        .copied()
        .ok_or_else(|| ("403 Forbidden", p.unreachable(host, port)))
}

async fn handle(mut c: TcpStream, p: &dyn Policy, log: &Mutex<Log>) {
    let (head, rest) = match read_head(&mut c).await {
        Ok(h) => h,
        Err(HeadError::TooLarge) => return answer(&mut c, p, BAD, "no request head within 8 KiB").await,
        Err(HeadError::TooManyHeaders) => {
            return answer(&mut c, p, TOO_MANY, &format!("more than {MAX_HEADERS} header lines")).await
        }
        Err(HeadError::Malformed) => return answer(&mut c, p, BAD, "the request head is not HTTP/1").await,
        Err(HeadError::Ended) => return answer(&mut c, p, BAD, "the connection ended before the request head").await,
    };
    let ask = match parse(&head) {
        Ok(a) => a,
        Err(status) => {
            return answer(
                &mut c,
                p,
                status,
                "only CONNECT host:port and absolute-form http:// requests are served",
            )
            .await
        }
    };
    let (host, port) = match &ask {
        Ask::Tunnel { host, port } | Ask::Forward { host, port, .. } => (host.clone(), *port),
    };
    if let Err(why) = p.target(&host, port) {
        let target = format!("{host}:{port}");
        tracing::warn!("{}: refused {target}: {why}", p.name());
        note_refused(log, &target);
        return answer(&mut c, p, "403 Forbidden", &why).await;
    }
    let via = super::upstream::configured().and_then(|u| u.route(&host, port, matches!(ask, Ask::Tunnel { .. })));
    let addr = match tokio::time::timeout(CONNECT_TIMEOUT, resolve(&host, port, p)).await {
        Ok(Ok(a)) => Some(a),
        Ok(Err((status, text))) => {
            if status.starts_with("403") {
                tracing::warn!("{}: refused {host}:{port}: not a public address", p.name());
                note_refused(log, &format!("{host}:{port}"));
            }
            // Behind the caller's proxy a name may resolve there only.
            if via.is_none() || status.starts_with("403") {
                return answer(&mut c, p, status, &text).await;
            }
            None
        }
        Err(_) if via.is_some() => None,
        Err(_) => return answer(&mut c, p, "504 Gateway Timeout", &format!("{host} did not resolve")).await,
    };
    // A non-public address (granted by name) is reached directly: the caller's proxy would not reach it.
    let via = via.filter(|_| addr.is_none_or(|a| p.reachable(a.ip(), port, &local_addresses().unwrap_or_default())));
    let up = match (via, addr) {
        (Some(v), _) => {
            let forward_head = match &ask {
                Ask::Forward { head, .. } => Some(head.as_slice()),
                Ask::Tunnel { .. } => None,
            };
            tokio::time::timeout(CONNECT_TIMEOUT, super::upstream::open(v, &host, port, forward_head)).await
        }
        (None, Some(a)) => tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(a))
            .await
            .map(|r| r.map_err(|e| ("502 Bad Gateway", format!("cannot connect to {host}:{port}: {e}")))),
        (None, None) => return answer(&mut c, p, "502 Bad Gateway", &format!("cannot resolve {host}")).await,
    };
    let mut up = match up {
        Ok(Ok(s)) => s,
        Ok(Err((status, text))) => return answer(&mut c, p, status, &text).await,
        Err(_) => return answer(&mut c, p, "504 Gateway Timeout", &format!("{host}:{port} did not answer")).await,
    };
    {
        let mut l = log.lock().expect("proxy log lock");
        l.relayed += 1;
        l.upstream += u64::from(via.is_some());
    }
    let sent = match &ask {
        Ask::Tunnel { .. } => c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await,
        // Already sent, in absolute form.
        Ask::Forward { .. } if via.is_some() => Ok(()),
        Ask::Forward { head, .. } => up.write_all(head).await,
    };
    if sent.is_err() || up.write_all(&rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut c, &mut up).await;
}

/// In the namespace's init `G`, inside its new network namespace and with the capabilities of that namespace's
/// owner: bring `lo` up, listen on `127.0.0.1:`[`PORT`], send the listener to the runner, close it here.
///
/// # Safety
/// Only in `G` before it clones the tool: it shares the runner's memory (and the thread-local errno of the thread
/// that started it), so raw system calls only (`crate::syscall`, or rustix's, which are raw on Linux: no errno,
/// no allocation), on stack memory, no allocation.
pub unsafe fn listen_in_child(n: &ChildNet) -> io::Result<()> {
    use crate::syscall::{call as sys, check};
    use rustix::net::{socket_with, AddressFamily, SocketFlags, SocketType};
    // Closed when dropped, on every way out.
    let dgram = socket_with(AddressFamily::INET, SocketType::DGRAM, SocketFlags::CLOEXEC, None)?;
    let s = dgram.as_raw_fd() as usize;
    // SAFETY: an all-zero ifreq is a valid value of the plain C struct.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    ifr.ifr_name[0] = b'l' as libc::c_char;
    ifr.ifr_name[1] = b'o' as libc::c_char;
    let flags_out = &mut ifr as *mut libc::ifreq as usize;
    // SAFETY: the ioctl writes `lo`'s flags into the ifreq on this frame.
    check(unsafe { sys(libc::SYS_ioctl, s, libc::SIOCGIFFLAGS as usize, flags_out, 0) })?;
    // SAFETY: the kernel filled the ifreq's flags (a union member of the struct on this frame).
    unsafe { ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    let flags_in = &ifr as *const libc::ifreq as usize;
    // SAFETY: the ioctl reads the ifreq on this frame.
    check(unsafe { sys(libc::SYS_ioctl, s, libc::SIOCSIFFLAGS as usize, flags_in, 0) })?;
    // The listener is closed here when dropped: the runner holds its own copy once sent.
    let l = socket_with(AddressFamily::INET, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    bind_listen_send(&l, n.sock.as_fd())
}

/// As [`listen_in_child`]: `l` a fresh TCP socket, `to` the child's end of the socketpair; stack memory only.
fn bind_listen_send(l: &OwnedFd, to: BorrowedFd<'_>) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    // Why: in a kept namespace, an earlier call's connections to the port may linger in TIME_WAIT, which holds
    // the port against a bind without it; a listener still there (or one bound with it) is refused all the same.
    rustix::net::sockopt::set_socket_reuseaddr(l, true)?;
    rustix::net::bind(l, &std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, PORT))?;
    rustix::net::listen(l, 64)?;
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [l.as_fd()];
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    let sent = rustix::net::sendmsg(to, &[io::IoSlice::new(&[0])], &mut control, SendFlags::NOSIGNAL)?;
    if sent != 1 {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends the proxy a loopback listener, as the child does, and closes the child's side: the proxy serves it.
    fn hand_over_a_listener(child: ChildNet) -> std::net::SocketAddr {
        use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
        use std::os::fd::AsFd;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut cmsg = SendAncillaryBuffer::new(&mut space);
        let fds = [l.as_fd()];
        assert!(cmsg.push(SendAncillaryMessage::ScmRights(&fds)));
        sendmsg(&child.sock, &[io::IoSlice::new(b"x")], &mut cmsg, SendFlags::empty()).unwrap();
        addr
    }

    /// The tests' policy: `allowed` entries (`*` any host), `named` grants (`host:port`, a host or an address),
    /// and loopback (also v4-mapped) and the host's own addresses not reachable otherwise.
    struct List {
        allowed: Vec<(Option<String>, u16)>,
        named: Vec<(String, u16)>,
    }

    impl List {
        fn new(allowed: &[&str], named: &[&str]) -> Arc<List> {
            let entry = |e: &&str| split_authority(e).unwrap();
            Arc::new(List {
                allowed: allowed
                    .iter()
                    .map(entry)
                    .map(|(h, p)| ((h != "*").then_some(h), p))
                    .collect(),
                named: named.iter().map(entry).collect(),
            })
        }
    }

    impl Policy for List {
        fn name(&self) -> &str {
            "test proxy"
        }
        fn target(&self, host: &str, port: u16) -> Result<(), String> {
            match self.allowed.iter().any(|(h, p)| *p == port && h.as_deref().is_none_or(|h| h == host)) {
                true => Ok(()),
                false => Err(format!("{host}:{port} is not listed")),
            }
        }
        fn named(&self, host: &str, port: u16) -> bool {
            self.named.iter().any(|(h, p)| h == host && *p == port)
        }
        fn reachable(&self, ip: std::net::IpAddr, port: u16, own: &[std::net::IpAddr]) -> bool {
            not_loopback_nor_own(ip, own) || self.named(&ip.to_string(), port)
        }
        fn unreachable(&self, host: &str, port: u16) -> String {
            format!("{host}:{port} is this host's own or loopback; name it")
        }
    }

    #[test]
    fn hosts_are_normalized_and_ports_required() {
        assert_eq!(split_authority("API.Example.com.:443"), Some(("api.example.com".into(), 443)));
        assert!(split_authority("nohost").is_none());
        assert!(normal_host("a b").is_none());
        // Brackets hold an IPv6 address, nothing else.
        assert!(normal_host("[h.test]").is_none());
        assert!(normal_host("[*]").is_none());
        assert_eq!(normal_host("[::1]").as_deref(), Some("::1"));
        assert_eq!(normal_host("[FE80::1]").as_deref(), Some("fe80::1"));
    }

    /// [`parse`] of `head` and its blank line.
    fn p(head: &[u8]) -> Result<Ask, &'static str> {
        parse(&[head, b"\r\n\r\n"].concat())
    }

    #[test]
    fn requests_are_parsed_and_rewritten() {
        assert_eq!(
            p(b"CONNECT Example.com:443 HTTP/1.1\r\nHost: example.com:443"),
            Ok(Ask::Tunnel {
                host: "example.com".into(),
                port: 443
            })
        );
        let Ok(Ask::Forward { host, port, head }) =
            p(b"GET http://h.test:8080/x?y HTTP/1.1\r\nHost: h.test\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive")
        else {
            panic!()
        };
        assert_eq!((host.as_str(), port), ("h.test", 8080));
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET /x?y HTTP/1.1\r\nHost: h.test:8080\r\nConnection: close\r\n\r\n"
        );
        let Ok(Ask::Forward { port, .. }) = p(b"GET http://h.test HTTP/1.0") else {
            panic!()
        };
        assert_eq!(port, 80);
        assert!(p(b"GET https://h.test/ HTTP/1.1").is_err());
        assert!(p(b"GET /relative HTTP/1.1").is_err());
        assert!(p(b"GET http://u@h.test/ HTTP/1.1").is_err());
        assert!(p(b"CONNECT h.test HTTP/1.1").is_err());
        assert!(p(b"CONNECT *:443 HTTP/1.1").is_err());
        assert!(p(b"CONNECT a*b:443 HTTP/1.1").is_err());
        // The tool's Host is replaced by the target's; bare line feeds and other control bytes are refused.
        let Ok(Ask::Forward { head, .. }) = p(b"GET http://h.test/ HTTP/1.1\r\nHost: evil.test\r\nX-A: b") else {
            panic!()
        };
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET / HTTP/1.1\r\nHost: h.test\r\nX-A: b\r\nConnection: close\r\n\r\n"
        );
        assert!(p(b"GET http://h.test/x\nConnection:keep-alive HTTP/1.1\r\nHost: h.test").is_err());
        assert!(p(b"GET http://h.test/ HTTP/1.1\r\nX: a\nConnection: keep-alive").is_err());
        assert!(p(b"GET http://h.test/ HTTP/1.1\r\nX: a\rb").is_err());
        // A port that is named must be one; a colon in a host only in brackets.
        for bad in [
            "http://h.test:0/",
            "http://h.test:99999/",
            "http://h.test:abc/",
            "http://h.test:/",
        ] {
            assert!(p(format!("GET {bad} HTTP/1.1").as_bytes()).is_err(), "{bad}");
        }
        assert!(p(b"CONNECT ::1:443 HTTP/1.1").is_err());
        assert_eq!(
            p(b"CONNECT [::1]:443 HTTP/1.1"),
            Ok(Ask::Tunnel {
                host: "::1".into(),
                port: 443
            })
        );
        let Ok(Ask::Forward { host, port, .. }) = p(b"GET http://[::1]/ HTTP/1.1") else {
            panic!()
        };
        assert_eq!((host.as_str(), port), ("::1", 80));
    }

    /// Any host, but a loopback address only where a grant names it (the task database on 127.0.0.1, say).
    #[tokio::test]
    async fn loopback_is_refused_unless_a_grant_names_it() {
        use std::io::{Read, Write};
        let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let up_port = upstream.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for c in upstream.incoming() {
                let _ = c.and_then(|mut c| c.write_all(b"hello\n"));
            }
        });
        let granted = format!("localhost:{up_port}");
        let (proxy, child) = start(List::new(&[&format!("*:{up_port}")], &[&granted])).unwrap();
        let addr = hand_over_a_listener(child);
        let ask = move |req: String| {
            tokio::task::spawn_blocking(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.write_all(req.as_bytes()).unwrap();
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                out
            })
        };
        let no = ask(format!("CONNECT 127.0.0.1:{up_port} HTTP/1.1\r\n\r\n"))
            .await
            .unwrap();
        assert!(
            no.starts_with("HTTP/1.1 403") && no.contains("test proxy: 127.0.0.1:") && no.contains("name it"),
            "{no}"
        );
        let no = ask(format!("GET http://[::ffff:127.0.0.1]:{up_port}/ HTTP/1.1\r\n\r\n"))
            .await
            .unwrap();
        assert!(no.starts_with("HTTP/1.1 403"), "{no}");
        let ok = ask(format!("CONNECT localhost:{up_port} HTTP/1.1\r\n\r\n"))
            .await
            .unwrap();
        assert!(ok.starts_with("HTTP/1.1 200") && ok.ends_with("hello\n"), "{ok}");
        assert_eq!(proxy.log()["refused"], 2);
    }

    /// The tests' policy: loopback (also v4-mapped) and the host's own addresses are not reachable.
    fn not_loopback_nor_own(ip: std::net::IpAddr, own: &[std::net::IpAddr]) -> bool {
        let v4 = match ip {
            std::net::IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
            v => v,
        };
        !v4.is_loopback() && !own.contains(&ip) && !own.contains(&v4)
    }

    /// Every address of this host's interfaces, as it is now (a server bound to 0.0.0.0 listens on each), is
    /// offered to the policy, which refuses it here, in its v4-mapped spelling too.
    #[tokio::test]
    async fn the_hosts_own_addresses_are_refused() {
        use std::io::{Read, Write};
        let own: Vec<std::net::IpAddr> = local_addresses().unwrap();
        assert!(!own.is_empty(), "getifaddrs named no address");
        let upstream = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let up_port = upstream.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for c in upstream.incoming() {
                let _ = c.and_then(|mut c| c.write_all(b"hello\n"));
            }
        });
        let (proxy, child) = start(List::new(&[&format!("*:{up_port}")], &[])).unwrap();
        let addr = hand_over_a_listener(child);
        let mut asked = 0;
        for ip in own {
            let spellings = match ip {
                std::net::IpAddr::V4(v4) => vec![v4.to_string(), format!("[::ffff:{v4}]")],
                std::net::IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => continue,
                std::net::IpAddr::V6(v6) => vec![format!("[{v6}]")],
            };
            for target in spellings {
                let req = format!("CONNECT {target}:{up_port} HTTP/1.1\r\n\r\n");
                let out = tokio::task::spawn_blocking(move || {
                    let mut s = std::net::TcpStream::connect(addr).unwrap();
                    s.write_all(req.as_bytes()).unwrap();
                    let mut out = String::new();
                    let _ = s.read_to_string(&mut out);
                    out
                })
                .await
                .unwrap();
                assert!(
                    out.starts_with("HTTP/1.1 403") && out.contains("this host's own"),
                    "{target}: {out}"
                );
                asked += 1;
            }
        }
        assert!(asked >= 2, "no address of this host to try");
        assert_eq!(proxy.log()["relayed"], 0);
    }

    /// The listener a child would send, made here in the runner's own namespace: targets are held to the list,
    /// and dropping the proxy closes the listener.
    #[tokio::test]
    async fn serves_the_list_and_closes_when_dropped() {
        use std::io::{Read, Write};
        let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let up_port = upstream.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for c in upstream.incoming() {
                let _ = c.and_then(|mut c| c.write_all(b"hello\n"));
            }
        });
        let target = format!("LocalHost:{up_port}");
        let (proxy, child) = start(List::new(&[&target], &[&target])).unwrap();
        let addr = hand_over_a_listener(child);
        let ask = move |req: String| {
            tokio::task::spawn_blocking(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.write_all(req.as_bytes()).unwrap();
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                out
            })
        };
        let ok = ask(format!("CONNECT localhost:{up_port} HTTP/1.1\r\n\r\n"))
            .await
            .unwrap();
        assert!(ok.starts_with("HTTP/1.1 200") && ok.ends_with("hello\n"), "{ok}");
        let no = ask(format!("CONNECT 127.0.0.1:{up_port} HTTP/1.1\r\n\r\n"))
            .await
            .unwrap();
        assert!(no.starts_with("HTTP/1.1 403"), "{no}");
        assert_eq!(
            proxy.log()["refused_targets"],
            serde_json::json!([format!("127.0.0.1:{up_port}")])
        );
        drop(proxy);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_ok() {
            assert!(std::time::Instant::now() < deadline, "the listener outlived its proxy");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// A proxy serving `localhost:<port>` of a loopback server that says hello; (the proxy, its address).
    fn hello_proxy() -> (Proxy, std::net::SocketAddr, u16) {
        use std::io::Write;
        let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let up_port = upstream.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for c in upstream.incoming() {
                let _ = c.and_then(|mut c| c.write_all(b"hello\n"));
            }
        });
        let target = format!("localhost:{up_port}");
        let (proxy, child) = start(List::new(&[&target], &[&target])).unwrap();
        (proxy, hand_over_a_listener(child), up_port)
    }

    /// Send `parts` one write each, then read the answer to its end.
    async fn send(addr: std::net::SocketAddr, parts: Vec<Vec<u8>>) -> String {
        use std::io::{Read, Write};
        tokio::task::spawn_blocking(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            for part in parts {
                // The proxy may answer (and close) before the whole of an oversized head is sent.
                if s.write_all(&part).is_err() {
                    break;
                }
            }
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
            String::from_utf8_lossy(&out).into_owned()
        })
        .await
        .unwrap()
    }

    /// A head that arrives in pieces, split inside its request line and inside its final blank line, is read whole.
    #[tokio::test]
    async fn a_head_split_across_writes_is_read_whole() {
        let (proxy, addr, port) = hello_proxy();
        let head = format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n");
        let cuts = [3, 12, head.len() - 3, head.len() - 1];
        let mut parts = Vec::new();
        let mut from = 0;
        for to in cuts.into_iter().chain([head.len()]) {
            parts.push(head.as_bytes()[from..to].to_vec());
            from = to;
        }
        let out = send(addr, parts).await;
        assert!(out.starts_with("HTTP/1.1 200") && out.ends_with("hello\n"), "{out}");
        assert_eq!(proxy.log()["relayed"], 1);
    }

    /// A head longer than MAX_HEAD, or with more header lines than MAX_HEADERS, is refused, never relayed.
    #[tokio::test]
    async fn an_oversized_head_is_refused() {
        let (proxy, addr, port) = hello_proxy();
        let long = format!(
            "CONNECT localhost:{port} HTTP/1.1\r\nX-Long: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        let out = send(addr, vec![long.into_bytes()]).await;
        assert!(out.starts_with("HTTP/1.1 400") && out.contains("8 KiB"), "{out}");
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        let out = send(addr, vec![format!("CONNECT localhost:{port} HTTP/1.1\r\n{many}\r\n").into_bytes()]).await;
        assert!(out.starts_with("HTTP/1.1 431"), "{out}");
        assert_eq!(proxy.log()["relayed"], 0);
    }

    /// A head that is not HTTP/1 (a header line without a colon, a bare line feed, a version that is none) is refused.
    #[tokio::test]
    async fn a_malformed_head_is_refused() {
        let (proxy, addr, port) = hello_proxy();
        for head in [
            format!("CONNECT localhost:{port} HTTP/1.1\r\nNo colon here\r\n\r\n"),
            format!("CONNECT localhost:{port} HTTP/1.1\r\nX: a\nY: b\r\n\r\n"),
            format!("CONNECT localhost:{port} HTTP/9.9\r\n\r\n"),
            format!("CONNECT  localhost:{port} HTTP/1.1\r\n\r\n"),
        ] {
            let out = send(addr, vec![head.clone().into_bytes()]).await;
            assert!(out.starts_with("HTTP/1.1 400"), "{head:?}: {out}");
        }
        assert_eq!(proxy.log()["relayed"], 0);
    }
}
