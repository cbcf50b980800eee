//! Task rows and files are authenticated: each carries `mac`, an HMAC-SHA256 over what decides what it runs
//! (its id, anima, tool, action, kind, arguments, where the credentials go in them, the tier), made with a key
//! only the runner holds. A worker runs a task only when its MAC is valid ([`verify`], called where a task is
//! claimed); any other task is moved aside, audited with the reason, and never run. So a tool that can write
//! to the task database (or a task file) cannot make a worker act for another anima, or for its own.
//!
//! The key: 32 random bytes in `<data dir>/state/animaworks-tool/tasks.key` (mode 0600 in a 0700 folder), made
//! by the first runner that needs it. Sandboxed tools never read `<data dir>/state` (docs/sandbox-files.md). Workers
//! on other machines sharing one task database need a copy of the same file; a row signed with a key this
//! worker does not hold ([`Verdict::OtherKey`]) is left for the workers that hold it, never moved aside.

use super::Task;
use awt_core::policy::approval::canonical;
use hmac::{KeyInit, Mac};
use serde_json::Value;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The key file, relative to the data dir.
pub const KEY_FILE: &str = "state/animaworks-tool/tasks.key";

/// What the MAC says first: the format, so that a later change of what is covered is a new tag.
const TAG: &str = "awt-task-mac-1";

/// The runner's task key.
#[derive(Clone)]
pub struct Key {
    bytes: Vec<u8>,
    /// Names the key without giving it away (the start of a hash of it), stored beside each MAC.
    id: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key({})", self.id)
    }
}

pub fn key_path(data: &Path) -> PathBuf {
    data.join(KEY_FILE)
}

/// The key of `data`, made when missing.
pub fn key(data: &Path) -> io::Result<Key> {
    let path = key_path(data);
    match read_key(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    if let Some(dir) = path.parent() {
        awt_core::owned::dir(dir, "runner state folder")?;
    }
    let mut b = [0u8; 32];
    if rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty()).ok() != Some(b.len()) {
        return Err(io::Error::other("no random bytes for the task key"));
    }
    let hex = awt_core::hex::encode(b);
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(hex.as_bytes())?;
        f.sync_all()?;
    }
    // A hard link never replaces: of two runners making the key at once, the first one's stays.
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    read_key(&path)
}

fn read_key(path: &Path) -> io::Result<Key> {
    let m = std::fs::symlink_metadata(path)?;
    let me = rustix::process::geteuid().as_raw();
    if !m.file_type().is_file() || m.uid() != me || m.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refusing the task key {}: it must be a regular file of this user's (uid {me}) that nobody else \
                 can read or write (mode 0600); it is uid {}, mode {:o}",
                path.display(),
                m.uid(),
                m.mode() & 0o7777
            ),
        ));
    }
    let text = awt_core::fsread::read(path, awt_core::fsread::SMALL)?;
    let bytes = text.trim_ascii().to_vec();
    if bytes.len() < 32 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the task key {} is too short (at least 32 characters)", path.display()),
        ));
    }
    let id = {
        use sha2::Digest;
        let h = sha2::Sha256::digest([b"awt-key-id:".as_slice(), &bytes].concat());
        awt_core::hex::encode(&h[..8])
    };
    Ok(Key { bytes, id })
}

/// The HMAC of `t` before its final step: the caller finalizes or verifies.
fn hmac_of(key: &Key, t: &Task) -> hmac::Hmac<sha2::Sha256> {
    let covered = serde_json::json!([
        TAG,
        t.task_id,
        t.anima_name,
        t.tool,
        t.action,
        t.kind,
        t.tool_args,
        t.queue.arg_secrets,
        t.queue.tool_tier,
        t.queue.args_mac,
    ]);
    let mut bytes = Vec::new();
    canonical(&covered, &mut bytes);
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key.bytes).expect("HMAC takes any key length");
    m.update(&bytes);
    m
}

/// The keyed digest of the unmasked arguments a file store keeps beside a task (never in the task itself, nor in a
/// database): the MAC covers it, so those arguments cannot be swapped either.
fn args_digest(key: &Key, args: &Value) -> String {
    let mut bytes = b"awt-private-args:".to_vec();
    canonical(args, &mut bytes);
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key.bytes).expect("HMAC takes any key length");
    m.update(&bytes);
    awt_core::hex::encode(m.finalize().into_bytes())
}

fn compute(key: &Key, t: &Task) -> String {
    let tag = awt_core::hex::encode(hmac_of(key, t).finalize().into_bytes());
    format!("{}:{tag}", key.id)
}

/// Sign `t` (before it is stored), with `private_args`, the unmasked arguments a file store keeps beside it.
pub fn sign(key: &Key, t: &mut Task, private_args: Option<&Value>) {
    t.queue.args_mac = private_args.map(|a| args_digest(key, a));
    t.queue.mac = Some(compute(key, t));
}

/// What a claimed task's MAC says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    /// Signed with a key this runner does not hold (its id): left for a worker that holds it.
    OtherKey(String),
    /// Not to be run, ever: why.
    Refused(String),
}

/// Check a claimed task's MAC (the one function every claim path calls before it runs a task), with the unmasked
/// arguments kept beside it when there are any (the file store; a database never has them).
pub fn verify(key: &Key, t: &Task, private_args: Option<&Value>) -> Verdict {
    let Some(mac) = t.queue.mac.as_deref() else {
        return Verdict::Refused("the task carries no MAC (it was not written by this runner's submit)".into());
    };
    let Some((id, _)) = mac.split_once(':') else {
        return Verdict::Refused("the task's MAC is malformed".into());
    };
    if id != key.id {
        return Verdict::OtherKey(id.chars().take(32).collect());
    }
    let Some(tag) = mac.split_once(':').and_then(|(_, h)| awt_core::hex::decode(h)) else {
        return Verdict::Refused("the task's MAC is malformed".into());
    };
    // Constant time (hmac's verify): a forger learns nothing from how long the comparison took.
    if hmac_of(key, t).verify_slice(&tag).is_err() {
        return Verdict::Refused(
            "the task's MAC does not match its anima, tool, action and arguments (forged or changed)".into(),
        );
    }
    match private_args {
        Some(a) if t.queue.args_mac.as_deref() != Some(args_digest(key, a).as_str()) => {
            Verdict::Refused("the task's private arguments are not the ones it was signed with".into())
        }
        _ => Verdict::Valid,
    }
}

/// A MAC over any record (`domain` names what it is, so that one kind of record is never taken for another):
/// `<key id>:<hex>`. Approval requests are signed so ([`crate::approvals`]).
pub fn sign_value(key: &Key, domain: &str, v: &Value) -> String {
    let tag = awt_core::hex::encode(value_hmac(key, domain, v).finalize().into_bytes());
    format!("{}:{tag}", key.id)
}

/// Does `mac` sign `v` under `domain` with `key`? (Constant time.)
pub fn verify_value(key: &Key, domain: &str, v: &Value, mac: &str) -> bool {
    let Some((id, hex)) = mac.split_once(':') else {
        return false;
    };
    if id != key.id {
        return false;
    }
    awt_core::hex::decode(hex).is_some_and(|tag| value_hmac(key, domain, v).verify_slice(&tag).is_ok())
}

fn value_hmac(key: &Key, domain: &str, v: &Value) -> hmac::Hmac<sha2::Sha256> {
    let mut bytes = format!("{domain}:").into_bytes();
    canonical(v, &mut bytes);
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key.bytes).expect("HMAC takes any key length");
    m.update(&bytes);
    m
}

/// Write the audit line of a refused task into its anima's audit log (`anima_dir`, when it has one).
pub fn audit_refused(anima_dir: Option<&Path>, t: &Task, why: &str) {
    let Some(dir) = anima_dir.filter(|d| d.is_dir()) else {
        return;
    };
    let mut rec = awt_core::policy::audit::AuditRecord::new(
        Some(&t.anima_name),
        &t.tool,
        Some(&t.action),
        None,
        &awt_core::policy::gate::Decision::Allow,
        0,
        "task_refused",
        None,
        t.tool_args.clone(),
    );
    rec.decision = "deny";
    rec.reason = Some(format!("task_refused: task {}: {why}", t.task_id));
    let log = awt_core::policy::audit::AuditLog::for_anima(dir);
    if let Err(e) = log.append(&rec, &awt_core::policy::Masker::default()) {
        tracing::warn!("cannot write the audit line of refused task {}: {e}", t.task_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_field_or_another_key_never_verifies() {
        let t = tempfile::tempdir().unwrap();
        let k = key(t.path()).unwrap();
        assert_eq!(key(t.path()).unwrap().bytes, k.bytes, "made once");
        let mut task: Task = serde_json::from_value(serde_json::json!({
            "task_id": "abc", "anima_name": "alice", "tool_name": "t:a", "tool_args": {"b": 1, "a": [1, {"y": 2, "x": 1}]},
            "status": "pending", "created_at": 1.0, "completed_at": null, "result": null, "error": null,
            "tool": "t", "action": "a", "kind": "action", "updated_at": 1.0
        }))
        .unwrap();
        sign(&k, &mut task, None);
        assert_eq!(verify(&k, &task, None), Verdict::Valid);
        // Keys reordered (as jsonb does) still verify.
        let mut re = task.clone();
        re.tool_args = serde_json::from_str(r#"{"a":[1,{"x":1,"y":2}],"b":1}"#).unwrap();
        assert_eq!(verify(&k, &re, None), Verdict::Valid);
        let mut bob = task.clone();
        bob.anima_name = "bob".into();
        assert!(matches!(verify(&k, &bob, None), Verdict::Refused(_)));
        assert!(matches!(
            verify(&k, &task, Some(&serde_json::json!({"b": 2}))),
            Verdict::Refused(_)
        ));
        let mut none = task.clone();
        none.queue.mac = None;
        assert!(matches!(verify(&k, &none, None), Verdict::Refused(_)));
        let other = tempfile::tempdir().unwrap();
        assert!(matches!(
            verify(&key(other.path()).unwrap(), &task, None),
            Verdict::OtherKey(_)
        ));
    }
}
