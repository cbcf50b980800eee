//! One JSON line per call in `<anima dir>/state/tool_audit.jsonl`: who called what, what the gate said, how
//! it ended. Arguments are masked before they are written.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::Value;

use super::env::EnvPolicy;
use super::gate::Decision;
use super::mask::Masker;
use crate::tier::Tier;

/// The audit file, relative to the anima directory.
pub const AUDIT_FILE: &str = "state/tool_audit.jsonl";
/// Arguments longer than this (as JSON, after masking) are logged as their start, their length and a SHA-256
/// digest: one call must not grow the log by megabytes.
pub const MAX_LOGGED_ARGS: usize = 4096;

/// One line of the audit file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// When the call ended, RFC 3339 in UTC with milliseconds (`2026-01-02T03:04:05.678Z`).
    pub time: String,
    /// The calling anima, or `null`.
    pub anima: Option<String>,
    /// The tool name.
    pub tool: String,
    /// The action name, or the argv's first word for a `cli_main` call; `null` when there is none.
    pub action: Option<String>,
    /// The tool's tier; `null` when no tool of that name was found.
    pub tier: Option<Tier>,
    /// `"allow"` or `"deny"`.
    pub decision: &'static str,
    /// For a refusal, its kind (`grant_missing`, …) and message; `null` when allowed.
    pub reason: Option<String>,
    /// Wall time of the call, 0 when refused.
    pub duration_ms: u64,
    /// `"ok"`, an error code of protocol §6 (`timeout`, `tool_error`, `permission_denied`, …).
    pub outcome: String,
    /// The tool's exit code, when it ran and exited.
    pub exit_code: Option<i32>,
    /// The arguments (an object for structured calls, the argv list for `cli_main` calls), masked.
    pub args: Value,
    /// The sandbox the tool ran in (docs/sandbox.md): `{"mode": "off"}`, or what the kernel enforced; `null`
    /// when the attempt ended before one was planned.
    pub sandbox: Option<Value>,
    /// The environment policy the tool ran (or would have run) under: `clean` or `inherit` (protocol.md §8).
    pub env: &'static str,
    /// The credentials of the call, names only: `{"granted": [..], "refused": [..], "brokered": [{"name",
    /// "answer": "granted" | "refused" | "missing" | "error"}]}` (docs/credentials.md); `null` when the attempt
    /// ended before they were decided.
    pub credentials: Option<Value>,
}

impl AuditRecord {
    /// A record stamped now, with `decision` and `reason` taken from the gate's [`Decision`].
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        anima: Option<&str>,
        tool: &str,
        action: Option<&str>,
        tier: Option<Tier>,
        decision: &Decision,
        duration_ms: u64,
        outcome: &str,
        exit_code: Option<i32>,
        args: Value,
    ) -> Self {
        let (decision, reason) = match decision {
            Decision::Allow => ("allow", None),
            Decision::Deny(r) => ("deny", Some(format!("{}: {}", r.kind.as_str(), r.message))),
        };
        AuditRecord {
            time: rfc3339_utc(SystemTime::now()),
            anima: anima.map(str::to_string),
            tool: tool.to_string(),
            action: action.map(str::to_string),
            tier,
            decision,
            reason,
            duration_ms,
            outcome: outcome.to_string(),
            exit_code,
            args,
            sandbox: None,
            env: EnvPolicy::Clean.as_str(),
            credentials: None,
        }
    }

    /// The record with the environment policy of the tool.
    pub fn with_env(mut self, policy: EnvPolicy) -> Self {
        self.env = policy.as_str();
        self
    }
}

/// An append-only audit file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLog {
    path: PathBuf,
    /// The anima dir of an anima's log: below it, nothing is followed ([`crate::beneath`]).
    base: Option<PathBuf>,
}

impl AuditLog {
    /// The audit log of an anima: `<anima dir>/state/tool_audit.jsonl`.
    pub fn for_anima(anima_dir: &Path) -> Self {
        AuditLog {
            path: anima_dir.join(AUDIT_FILE),
            base: Some(anima_dir.to_path_buf()),
        }
    }

    /// An audit log at any path.
    pub fn at(path: impl Into<PathBuf>) -> Self {
        AuditLog {
            path: path.into(),
            base: None,
        }
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as one line, with every string in it (arguments, reason) masked by `masker`.
    ///
    /// The parent folder is created when missing; the file is created with mode 0600 (arguments may be
    /// private even when masked). Lines of concurrent calls, in threads or in other processes, never
    /// interleave: the file is opened with `O_APPEND` and the whole line goes out in a single `write(2)`,
    /// which the kernel applies at the end of the file as one piece.
    ///
    /// # Errors
    /// When the folder or file cannot be created or written, or the kernel wrote only part of the line (then
    /// the file holds a torn line; the error says so).
    pub fn append(&self, record: &AuditRecord, masker: &Masker) -> io::Result<()> {
        let mut f = self.open()?;
        Self::append_to(&mut f, &self.path, record, masker)
    }

    /// The file, opened for appending (created 0600 with its folder when missing; never through a FIFO or a
    /// device). Opening it before a call lets a gated call be refused when its line could not be written.
    pub fn open(&self) -> io::Result<std::fs::File> {
        if let Some(base) = &self.base {
            // A tool may have swapped `state/` for a link (to another anima's, to any folder): never followed.
            let rel = Path::new(AUDIT_FILE);
            crate::beneath::make_dirs(base, rel.parent().unwrap_or(Path::new("")))?;
            use rustix::fs::OFlags;
            let f = crate::beneath::open(
                base,
                rel,
                OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NONBLOCK | OFlags::NOCTTY,
                0o600,
            )?;
            if !f.metadata()?.file_type().is_file() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a regular file", self.path.display()),
                ));
            }
            return Ok(f);
        }
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let f = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NOFOLLOW)
            .open(&self.path)
            .map_err(|e| match e.raw_os_error() {
                // Why never through a link: a runner started as root would append to any file it points at.
                Some(libc::ELOOP) => io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is a symbolic link; the audit log must be a regular file",
                        self.path.display()
                    ),
                ),
                _ => e,
            })?;
        if !f.metadata()?.file_type().is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a regular file", self.path.display()),
            ));
        }
        Ok(f)
    }

    /// Append `record` to a file [`AuditLog::open`] opened.
    pub fn append_to(f: &mut std::fs::File, path: &Path, record: &AuditRecord, masker: &Masker) -> io::Result<()> {
        let mut v = serde_json::to_value(record).map_err(io::Error::other)?;
        masker.mask_value_in_place(&mut v);
        if let Some(args) = v.get_mut("args") {
            bound_args(args);
        }
        for k in ["tool", "action", "anima", "outcome", "reason"] {
            if let Some(Value::String(s)) = v.get_mut(k) {
                bound_name(
                    s,
                    if k == "reason" {
                        MAX_LOGGED_ARGS
                    } else {
                        MAX_LOGGED_NAME
                    },
                );
            }
        }
        let mut line = serde_json::to_vec(&v).map_err(io::Error::other)?;
        line.push(b'\n');
        // One write(2), never write_all: a retry after a short write could land after another process's line.
        let n = f.write(&line)?;
        if n != line.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("{}: short write ({n} of {} bytes)", path.display(), line.len()),
            ));
        }
        Ok(())
    }
}

/// Arguments past [`MAX_LOGGED_ARGS`] become `{"truncated": <start>, "bytes": <length>, "sha256": <hex>}`.
fn bound_args(args: &mut Value) {
    let text = args.to_string();
    if text.len() <= MAX_LOGGED_ARGS {
        return;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    let hex = crate::hex::encode(digest);
    let cut = (0..=1024).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
    *args = serde_json::json!({"truncated": format!("{}…", &text[..cut]), "bytes": text.len(), "sha256": hex});
}

/// A name (tool, action, anima, outcome) longer than this many bytes is logged as its start, its length and a
/// SHA-256 digest, as arguments are: a forged name must not grow the log by megabytes either.
pub const MAX_LOGGED_NAME: usize = 256;

/// `s` past `max` bytes becomes `<start>… (<n> bytes, sha256 <hex>)`.
fn bound_name(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    use sha2::Digest;
    let hex = crate::hex::encode(sha2::Sha256::digest(s.as_bytes()));
    let cut = (0..=max.min(128)).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
    *s = format!("{}… ({} bytes, sha256 {hex})", &s[..cut], s.len());
}

/// Formats `t` as RFC 3339 in UTC with milliseconds, e.g. `2026-01-02T03:04:05.678Z`. Times before 1970 are
/// written as the epoch.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm, proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn rfc3339() {
        let at = |s: u64, ms: u64| rfc3339_utc(SystemTime::UNIX_EPOCH + Duration::from_millis(s * 1000 + ms));
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_709_164_799, 999), "2024-02-28T23:59:59.999Z");
        assert_eq!(at(1_735_689_600, 0), "2025-01-01T00:00:00.000Z");
        assert_eq!(at(4_102_444_799, 0), "2099-12-31T23:59:59.000Z");
    }

    #[test]
    fn record_shape_and_masking() {
        let d = tempfile::tempdir().unwrap();
        let log = AuditLog::for_anima(d.path());
        let rec = AuditRecord::new(
            Some("alice"),
            "github",
            Some("create_issue"),
            Some(Tier::Common),
            &Decision::Allow,
            12,
            "ok",
            Some(0),
            json!({"token": "sekret-value", "title": "x"}),
        );
        log.append(&rec, &Masker::new(["sekret-value"])).unwrap();
        log.append(&rec, &Masker::default()).unwrap();
        let text = std::fs::read_to_string(d.path().join(AUDIT_FILE)).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        let l = &lines[0];
        assert_eq!(l["args"]["token"], "***");
        assert_eq!(l["tier"], "common");
        assert_eq!(l["decision"], "allow");
        assert_eq!(l["reason"], Value::Null);
        assert_eq!(l["anima"], "alice");
        assert_eq!(l["exit_code"], 0);
        assert!(l["time"].as_str().unwrap().ends_with('Z'));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(log.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn long_arguments_are_bounded_with_a_digest() {
        let d = tempfile::tempdir().unwrap();
        let log = AuditLog::for_anima(d.path());
        let big = "x".repeat(2 * 1024 * 1024);
        let rec = AuditRecord::new(
            None,
            "t",
            None,
            None,
            &Decision::Allow,
            0,
            "ok",
            None,
            json!({"body": big}),
        );
        log.append(&rec, &Masker::default()).unwrap();
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(text.len() < 2 * MAX_LOGGED_ARGS, "{} bytes", text.len());
        let l: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(l["args"]["bytes"], 2 * 1024 * 1024 + 11);
        assert_eq!(l["args"]["sha256"].as_str().unwrap().len(), 64);
        assert_eq!(l["tier"], Value::Null);
    }
}
