//! A failed call that ran confined explains itself (docs/sandbox.md "When a confined call fails"): it says that
//! it ran in the sandbox and what that gave it, and names the keys that would give more, as precisely as what
//! the kernel and the tool report allows: the proxy's refused targets, the paths in the tool's own error text
//! ("Permission denied", "Operation not permitted", "Read-only file system"), a name that did not resolve, a
//! system call seccomp refuses.

use crate::discover::ToolFile;
use crate::error::{CallError, Detail, ErrorCode};
use crate::sandbox::{NetPlan, Plan};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Why the sandbox, not the tool, probably made the call fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// A path outside what the call may write (or read).
    Path(PathBuf),
    /// The network, which the call does not have (or not to that name).
    Network,
    /// Targets the proxy refused (`host:port`).
    Refused(Vec<String>),
    /// A system call seccomp refuses in every sandbox.
    Syscall,
}

const DENIED: &[&str] = &[
    "Permission denied",
    "Operation not permitted",
    "Read-only file system",
    "EACCES",
    "EPERM",
    "EROFS",
];
const NO_NET: &[&str] = &[
    "Could not resolve host",
    "Name or service not known",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "getaddrinfo",
    "EAI_AGAIN",
    "NameResolutionError",
    "Failed to establish a new connection",
    "No address associated with hostname",
];
const SECCOMP: &[&str] = &["Address family not supported", "Function not implemented"];

/// The first absolute path on a line, unquoted (`'…'`, `"…"`, `‘…’`, `` `…' ``).
fn path_on(line: &str) -> Option<PathBuf> {
    let starts = line
        .char_indices()
        .filter(|(i, c)| *c == '/' && (*i == 0 || line[..*i].ends_with([' ', '\'', '"', '‘', '`', '(', '=', '\t'])));
    for (i, _) in starts {
        let rest = &line[i..];
        let end = rest
            .find(['\'', '"', '’', ':', ' ', ')', ',', '\t'])
            .unwrap_or(rest.len());
        let p = &rest[..end];
        if p.len() > 1 {
            return Some(PathBuf::from(p));
        }
    }
    None
}

fn under(p: &Path, places: &[PathBuf]) -> bool {
    places.iter().any(|x| p.starts_with(x))
}

/// What in `stderr` (and the message) points at the sandbox, given what the call had.
pub fn cause(plan: &Plan, text: &str) -> Option<Cause> {
    let g = plan.given()?;
    if let Some(log) = plan.proxy_log() {
        let refused: Vec<String> = log["refused_targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        if !refused.is_empty() {
            return Some(Cause::Refused(refused));
        }
    }
    for line in text.lines() {
        if DENIED.iter().any(|d| line.contains(d)) {
            if let Some(p) = path_on(line) {
                let writable = under(&p, g.write) || p.starts_with(g.tmp);
                if !writable {
                    return Some(Cause::Path(p));
                }
            }
        }
    }
    // Through the proxy (`hosts`), a name the client resolves itself does not resolve either.
    if (*g.net != NetPlan::All || g.hosts.is_some()) && NO_NET.iter().any(|n| text.contains(n)) {
        return Some(Cause::Network);
    }
    if SECCOMP.iter().any(|n| text.contains(n))
        || (text.contains("Operation not permitted") && *g.net == NetPlan::None && text.contains("socket"))
    {
        return Some(Cause::Syscall);
    }
    None
}

/// A sentence of what the call was given.
fn given_words(plan: &Plan, file: &ToolFile) -> String {
    let Some(g) = plan.given() else { return String::new() };
    let places: Vec<&PathBuf> = g.write.iter().filter(|p| !p.starts_with(g.tmp)).collect();
    let mut w: Vec<String> = places.iter().take(4).map(|p| p.display().to_string()).collect();
    if places.len() > 4 {
        w.push(format!("{} more", places.len() - 4));
    }
    w.push("its $TMP".into());
    let net = match (g.hosts, g.net) {
        (Some(h), _) => format!("only {} through the runner's proxy", h.join(", ")),
        (None, NetPlan::None) => "none".into(),
        (None, NetPlan::All) => "open".into(),
        (None, NetPlan::Ports(p)) => format!("TCP ports {p:?}"),
    };
    format!(
        "it ran confined, by the {} tier's sandbox with {}: writes to {}; network {net}",
        file.tier,
        if g.declared {
            "what its action declares, within the anima's grants"
        } else {
            "the default of tools that declare nothing"
        },
        w.join(", ")
    )
}

/// `e` with the sandbox's part in it: the message says the call ran confined and what it had; where a cause is
/// found, the hint names the key that allows more and the error's `reason` is `sandbox_denied`. Errors of calls
/// that did not run confined, and errors that are not failures of the tool, pass unchanged.
pub fn explain(e: CallError, plan: &Plan, file: &ToolFile, perms_path: Option<&Path>) -> CallError {
    if !plan.is_confined()
        || !matches!(e.code, ErrorCode::Crashed | ErrorCode::ToolError | ErrorCode::BadOutput)
        || e.detail(Detail::Reason).and_then(Value::as_str) == Some("limit_reached")
    {
        return e;
    }
    let tail = e.detail(Detail::StderrTail).and_then(Value::as_str).unwrap_or("");
    let text = format!("{}\n{}\n{tail}", e.message, e.hint.as_deref().unwrap_or(""));
    let perms = perms_path.map_or("permissions.json".to_owned(), |p| p.display().to_string());
    let legacy = !plan.given().is_some_and(|g| g.declared);
    // A server's declaration is its entry in the settings, not a profile of its own.
    let declared_in = match &file.mcp {
        Some(d) => format!("\"mcp_servers\".\"{}\".\"sandbox\" in {}", d.name, d.file.display()),
        None => "the action's profile \"sandbox\" (protocol.md §2.4)".to_owned(),
    };
    let declare = |what: &str| {
        if legacy {
            String::new()
        } else {
            format!(", and declare {what} in {declared_in}")
        }
    };
    let off = format!(
        "or, to run the {} tier unconfined, \"sandbox\": {{\"{}\": \"off\"}} there",
        file.tier, file.tier
    );
    let found = cause(plan, &text);
    // A tool's own error keeps its own words (use-tool renders them as AnimaWorks does) unless the sandbox is
    // found to be its cause.
    if e.code == ErrorCode::ToolError && found.is_none() {
        return e;
    }
    let mut out = e.clone();
    out.message = format!("{}; {}", e.message, given_words(plan, file));
    let Some(c) = found else {
        out.hint = Some(format!(
            "{}; it ran confined, by hand it is not: a difference may be the sandbox's (docs/sandbox.md \"When a confined call fails\")",
            e.hint.as_deref().unwrap_or("read stderr_tail")
        ));
        return out;
    };
    let (why, hint, key) = match &c {
        Cause::Path(p) => {
            let dir = if p.extension().is_some() { p.parent().unwrap_or(p) } else { p.as_path() };
            (
                format!("{} is outside what the sandbox lets it write", p.display()),
                format!(
                    "grant it in {perms}: \"sandbox\": {{\"write\": [\"{}\"]}} (\"read\" for reading only){} {off}",
                    dir.display(),
                    declare(&format!("\"write\": [\"{}\"]", dir.display()))
                ),
                "sandbox.write",
            )
        }
        Cause::Network if plan.given().is_some_and(|g| g.hosts.is_some()) => (
            "the call reaches the network only through the runner's proxy (HTTPS_PROXY), and this client resolved a name itself".to_owned(),
            format!(
                "use a client that honours HTTPS_PROXY, or let this tool connect directly: \"sandbox\": {{\"direct_net\": [\"{}\"]}} in {perms} (loopback and private targets are then reachable too)",
                file.name
            ),
            "sandbox.direct_net",
        ),
        Cause::Network => (
            "the call has no network for that".to_owned(),
            format!(
                "grant it in {perms}: \"sandbox\": {{\"net\": [\"{}\"]}} (or true for every tool){} {off}",
                file.name,
                declare("\"net\": [\"host:443\"] (or true)")
            ),
            "sandbox.net",
        ),
        Cause::Refused(t) => (
            format!("the runner's proxy refused {}", t.join(", ")),
            if file.mcp.is_some() {
                // The proxy lets a private target through only when the anima's permissions name it.
                format!(
                    "grant it in {perms}: \"sandbox\": {{\"net\": [{}]}} (a private, loopback or link-local target is reachable only when named there), and list it in {declared_in} \"net\" {off}",
                    t.iter().map(|x| format!("\"{x}\"")).collect::<Vec<_>>().join(", "),
                )
            } else {
                format!(
                    "add {} to the action's \"sandbox\" \"net\" list (a private, loopback or link-local target needs it named exactly){}",
                    t.iter().map(|x| format!("\"{x}\"")).collect::<Vec<_>>().join(", "),
                    if legacy { format!(" {off}") } else { String::new() }
                )
            },
            "sandbox.net",
        ),
        Cause::Syscall => (
            "seccomp refuses that system call in every sandbox (UDP and raw sockets without a port list, io_uring, user namespaces, keyrings)".to_owned(),
            format!("no grant allows it confined: {off}"),
            "sandbox",
        ),
    };
    out.message = format!("{}; {why}; {}", e.message, given_words(plan, file));
    out.hint = Some(hint);
    out.with(Detail::Reason, "sandbox_denied").with(Detail::Key, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_found_in_the_usual_error_texts() {
        for (line, p) in [
            ("touch: cannot touch '/a/b.txt': Permission denied", "/a/b.txt"),
            ("PermissionError: [Errno 13] Permission denied: '/x/y'", "/x/y"),
            ("mkdir: cannot create directory ‘/m/n’: Read-only file system", "/m/n"),
            ("bash: /out/report.md: Operation not permitted", "/out/report.md"),
        ] {
            assert_eq!(path_on(line), Some(PathBuf::from(p)), "{line}");
        }
        assert_eq!(path_on("no path here: Permission denied"), None);
    }
}
