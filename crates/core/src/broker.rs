//! The credential broker: code that asks for a secret at run time (AnimaWorks' `get_credential`, the SDK's)
//! asks the runner, over a socket pair only its call has, instead of reading the stores the sandbox hides.
//! Each answer is checked against the anima's grants, recorded by name in the call's audit line, and every value
//! handed out is added to the call's masker before the tool has it (docs/credentials.md).
//!
//! Wire: one JSON object per line each way. Request `{"name", "key", "env", "per_anima"}` (`key` defaults to
//! `api_key`, `env` may be `null`); answer `{"ok": true, "value"}` or `{"ok": false, "answer": "refused" |
//! "missing" | "error", "message", "grant"?}`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::policy::credentials::{CredentialError, Resolver};
use crate::policy::grants::CredentialGrants;
use crate::policy::mask::LateSecrets;

/// The variable that tells the tool which descriptor is its broker.
pub const FD_VAR: &str = crate::policy::env::BROKER_FD_VAR;
/// The longest request line read.
const MAX_LINE: u64 = 16 * 1024;
/// Requests answered per call; later ones are answered `error` (a loop must not grow the audit line forever).
const MAX_REQUESTS: usize = 64;

/// The answers of one call: (credential name, `granted` | `refused` | `missing` | `error`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Ledger(Arc<Mutex<Vec<(String, &'static str)>>>);

impl Ledger {
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn push(&self, name: &str, answer: &'static str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((name.to_owned(), answer));
    }

    /// The audit line's `brokered` list.
    pub fn to_value(&self) -> Value {
        let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Value::Array(v.iter().map(|(n, a)| json!({"name": n, "answer": a})).collect())
    }
}

/// What the broker of one call knows.
#[derive(Debug, Clone)]
pub(crate) struct CallScope {
    pub data_dir: PathBuf,
    pub anima_name: Option<String>,
    /// The folders of the deployment's anima dirs ([`crate::animas::folders`]).
    pub animas: Vec<PathBuf>,
    pub grants: CredentialGrants,
    pub tool: String,
}

/// Where a broker's answers go: the call in flight (a pooled worker's broker serves one call after another).
#[derive(Debug, Default)]
pub(crate) struct Sink {
    /// The call in flight; `None` between a worker's calls (a request then is answered `error`).
    call: Option<(CallScope, Ledger, LateSecrets)>,
    /// Every value this broker handed out: a worker may still hold them in a later call.
    history: Vec<String>,
}

/// A broker's sink, shared with its thread.
pub(crate) type Shared = Arc<Mutex<Sink>>;

/// Make `call` the call in flight of the broker behind `shared` (`None`: no call). A new call's masker learns every
/// value the broker handed out before.
pub(crate) fn switch(shared: &Shared, call: Option<(CallScope, Ledger, LateSecrets)>) {
    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, late)) = &call {
        for v in &s.history {
            late.add(v);
        }
    }
    s.call = call;
}

/// A started broker: its thread answers until the tool's end is closed.
pub(crate) struct Broker {
    child: Option<OwnedFd>,
    shared: Shared,
}

/// Held for as long as one call runs; dropped, its broker answers no more for that call (a process the tool left
/// behind that still holds the descriptor gets `error`, and no answer goes unaudited or unmasked).
pub(crate) struct CallEnd(Shared);

impl Drop for CallEnd {
    fn drop(&mut self) {
        switch(&self.0, None);
    }
}

impl Broker {
    /// A socket pair and the thread that serves the runner's end, answering for the call in `shared`.
    pub fn start(shared: Shared) -> std::io::Result<Broker> {
        let (ours, theirs) = UnixStream::pair()?;
        std::thread::Builder::new().name("credential-broker".into()).spawn({
            let shared = shared.clone();
            move || serve(ours, shared)
        })?;
        Ok(Broker {
            child: Some(OwnedFd::from(theirs)),
            shared,
        })
    }

    /// The descriptor to hand over to the tool (under the same number), while it has not started.
    pub fn child_fd(&self) -> Option<RawFd> {
        self.child.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The tool's end, handed over under its own number (the one `ANIMAWORKS_TOOL_BROKER_FD` names).
    pub fn handover(&self) -> Option<awt_sys::process::Handover<'_>> {
        self.child.as_ref().map(|c| awt_sys::process::Handover {
            fd: std::os::fd::AsFd::as_fd(c),
            at: c.as_raw_fd(),
        })
    }

    /// The tool has started (or will not): the runner's copy of its end is closed, so that the thread sees the
    /// end of the stream when the tool's copies are gone.
    pub fn started(&mut self) {
        self.child = None;
    }

    /// For a broker of one call alone ([`for_call`]): the guard that ends its call.
    pub fn call_end(&self) -> CallEnd {
        CallEnd(self.shared.clone())
    }
}

/// Start a broker answering for `shared`; `env` gets the variable naming its descriptor. A broker that cannot
/// start leaves the tool without one (its `get_credential` then works as without the runner).
pub(crate) fn start_into(shared: Shared, env: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>) -> Option<Broker> {
    match Broker::start(shared) {
        Ok(b) => {
            if let Some(fd) = b.child_fd() {
                env.push((FD_VAR.into(), fd.to_string().into()));
            }
            Some(b)
        }
        Err(e) => {
            tracing::warn!("the credential broker could not start: {e}");
            None
        }
    }
}

/// A broker for one call alone.
pub(crate) fn for_call(ctx: CallScope, ledger: Ledger, late: LateSecrets) -> Shared {
    Arc::new(Mutex::new(Sink {
        call: Some((ctx, ledger, late)),
        history: Vec::new(),
    }))
}

fn serve(stream: UnixStream, shared: Shared) {
    let Ok(mut out) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = Vec::new();
        match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answer = answer(&shared, &line);
        let mut bytes = serde_json::to_vec(&answer).unwrap_or_default();
        bytes.push(b'\n');
        if out.write_all(&bytes).is_err() {
            return;
        }
    }
}

fn answer(shared: &Shared, line: &[u8]) -> Value {
    let mut sink = shared.lock().unwrap_or_else(|e| e.into_inner());
    let Some((ctx, ledger, late)) = sink.call.clone() else {
        return json!({"ok": false, "answer": "error", "message": "no call is in flight"});
    };
    let req: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
    let name = req.get("name").and_then(Value::as_str).unwrap_or("");
    let over = ledger.len() >= MAX_REQUESTS;
    if over || name.is_empty() || !line.ends_with(b"\n") {
        // Past the bound nothing more is recorded: a loop must not grow the audit line.
        if !over {
            ledger.push(&name.chars().take(64).collect::<String>(), "error");
        }
        return json!({"ok": false, "answer": "error", "message": format!(
            "the credential broker takes up to {MAX_REQUESTS} requests per call, each one JSON line naming a credential")});
    }
    if !ctx.grants.allows(name) {
        ledger.push(name, "refused");
        return json!({"ok": false, "answer": "refused", "message": ctx.grants.refusal(name),
                      "grant": ctx.grants.grant_line(name)});
    }
    let env = req.get("env").and_then(Value::as_str).unwrap_or("");
    let decl = awt_protocol::CredentialDecl {
        name: name.to_owned(),
        env: env.to_owned(),
        key: req.get("key").and_then(Value::as_str).unwrap_or("api_key").to_owned(),
        per_anima: req.get("per_anima").and_then(Value::as_bool).unwrap_or(false),
        required: true,
    };
    // `vars()` would panic on a variable that is not UTF-8; such a one is no credential anyway.
    let caller: HashMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    let resolver = Resolver::new(&ctx.data_dir, ctx.anima_name.as_deref(), caller).in_animas(ctx.animas.clone());
    let covered = ctx.grants.allows_env(name, env);
    let resolved = if covered {
        resolver.resolve(&decl)
    } else {
        resolver.resolve_config_only(&decl)
    };
    if !covered && matches!(resolved, Ok(None)) {
        ledger.push(name, "refused");
        return json!({"ok": false, "answer": "refused", "message": ctx.grants.env_refusal(name, env),
                      "grant": ctx.grants.grant_line(env)});
    }
    match resolved {
        Ok(Some(found)) => {
            // Masked from now on: before the tool can have it.
            late.add(&found.value);
            if !sink.history.contains(&found.value) {
                sink.history.push(found.value.clone());
            }
            ledger.push(name, "granted");
            json!({"ok": true, "value": found.value})
        }
        Ok(None) => {
            ledger.push(name, "missing");
            json!({"ok": false, "answer": "missing", "message": format!("credential '{name}' is not set")})
        }
        Err(e @ CredentialError::Missing(_)) => {
            ledger.push(name, "missing");
            json!({"ok": false, "answer": "missing", "message": format!("{}: {e}", ctx.tool)})
        }
        Err(e @ CredentialError::Foreign { .. }) => {
            ledger.push(name, "refused");
            json!({"ok": false, "answer": "refused", "message": e.to_string()})
        }
        Err(e) => {
            ledger.push(name, "error");
            json!({"ok": false, "answer": "error", "message": e.to_string()})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::grants::CredentialDefaults;
    use crate::policy::permissions::{LoadedPermissions, PermissionsFile};
    use crate::policy::Masker;
    use crate::tier::Tier;

    fn ask(s: &mut BufReader<UnixStream>, req: Value) -> Value {
        let mut line = serde_json::to_vec(&req).unwrap();
        line.push(b'\n');
        s.get_mut().write_all(&line).unwrap();
        let mut answer = String::new();
        s.read_line(&mut answer).unwrap();
        serde_json::from_str(&answer).unwrap()
    }

    #[test]
    fn a_calls_broker_answers_no_more_once_its_call_has_ended() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("config.json"),
            r#"{"credentials": {"myapi": {"api_key": "key-of-myapi-1"}}}"#,
        )
        .unwrap();
        let perms = Ok(LoadedPermissions {
            permissions: serde_json::from_str(r#"{"credentials": {"t": ["myapi"]}}"#).unwrap(),
            source: PermissionsFile::Json(d.path().join("permissions.json")),
        });
        let grants = CredentialGrants::of(&perms, "t", Tier::Personal, &CredentialDefaults::default());
        let ctx = CallScope {
            data_dir: d.path().to_path_buf(),
            anima_name: Some("alice".into()),
            animas: vec![d.path().join("animas")],
            grants,
            tool: "t".into(),
        };
        let ledger = Ledger::default();
        let mut b = Broker::start(for_call(ctx, ledger.clone(), LateSecrets::default())).unwrap();
        // The tool's end, duplicated: ours to own (a process the tool left behind holds such a copy).
        let fd = b.child.as_ref().unwrap().try_clone().unwrap();
        b.started();
        let mut s = BufReader::new(UnixStream::from(fd));
        let end = b.call_end();
        assert_eq!(
            ask(&mut s, json!({"name": "myapi"})),
            json!({"ok": true, "value": "key-of-myapi-1"})
        );
        drop(end);
        let after = ask(&mut s, json!({"name": "myapi"}));
        assert_ne!(after["ok"], json!(true), "answered after its call ended: {after}");
        assert!(after.get("value").is_none(), "{after}");
    }

    #[test]
    fn answers_by_the_grants_records_names_and_masks_what_it_hands_out() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("animas/bob")).unwrap();
        std::fs::write(
            d.path().join("config.json"),
            r#"{"credentials": {"myapi": {"api_key": "key-of-myapi-1"}, "other": {"api_key": "other-key-2"}}}"#,
        )
        .unwrap();
        std::fs::create_dir_all(d.path().join("shared")).unwrap();
        std::fs::write(
            d.path().join("shared/credentials.json"),
            r#"{"SVC__bob": "bobs-key-3", "OTHER_SECRET": "other-secret-4", "SVC_TOKEN": "svc-token-5"}"#,
        )
        .unwrap();
        let perms = Ok(LoadedPermissions {
            permissions: serde_json::from_str(r#"{"credentials": {"t": ["myapi", "svc"]}}"#).unwrap(),
            source: PermissionsFile::Json(d.path().join("permissions.json")),
        });
        let grants = CredentialGrants::of(&perms, "t", Tier::Personal, &CredentialDefaults::default());
        let ctx = CallScope {
            data_dir: d.path().to_path_buf(),
            anima_name: Some("alice".into()),
            animas: vec![d.path().join("animas")],
            grants,
            tool: "t".into(),
        };
        let (ledger, late) = (Ledger::default(), LateSecrets::default());
        let masker = Masker::default().with_late(late.clone());
        let mut b = Broker::start(for_call(ctx, ledger.clone(), late)).unwrap();
        // The tool's end, duplicated: ours to own.
        let fd = b.child.as_ref().unwrap().try_clone().unwrap();
        b.started();
        let mut s = BufReader::new(UnixStream::from(fd));

        assert_eq!(
            masker.mask_str("key-of-myapi-1"),
            "key-of-myapi-1",
            "nothing handed out yet"
        );
        let a = ask(&mut s, json!({"name": "myapi", "env": "MYAPI_KEY"}));
        assert_eq!(a, json!({"ok": true, "value": "key-of-myapi-1"}));
        assert_eq!(
            masker.mask_str("x key-of-myapi-1 y"),
            "x *** y",
            "masked once handed out"
        );
        let a = ask(&mut s, json!({"name": "other"}));
        assert_eq!(a["answer"], "refused", "{a}");
        assert_eq!(a["grant"], r#""credentials": {"t": ["other"]}"#, "{a}");
        assert!(!a.to_string().contains("other-key-2"), "{a}");
        let a = ask(&mut s, json!({"name": "svc", "env": "SVC__bob"}));
        assert_eq!(a["answer"], "refused", "another anima's key: {a}");
        let a = ask(&mut s, json!({"name": "svc", "env": "SVC"}));
        assert_eq!(a["answer"], "missing", "{a}");
        assert_eq!(
            ledger.to_value(),
            json!([{"name": "myapi", "answer": "granted"}, {"name": "other", "answer": "refused"},
                   {"name": "svc", "answer": "refused"}, {"name": "svc", "answer": "missing"}])
        );
        // A granted name does not open every key of the stores under a key the tool picks.
        let a = ask(&mut s, json!({"name": "svc", "env": "OTHER_SECRET"}));
        assert_eq!(a["answer"], "refused", "{a}");
        assert!(!a.to_string().contains("other-secret-4"), "{a}");
        assert_eq!(a["grant"], r#""credentials": {"t": ["OTHER_SECRET"]}"#, "{a}");
        let a = ask(&mut s, json!({"name": "myapi", "env": "GH"}));
        assert_eq!(
            a,
            json!({"ok": true, "value": "key-of-myapi-1"}),
            "config.json's entry, whatever the env"
        );
        let a = ask(&mut s, json!({"name": "svc", "env": "SVC_TOKEN"}));
        assert_eq!(a, json!({"ok": true, "value": "svc-token-5"}), "a key the grant covers");
        for _ in 0..MAX_REQUESTS + 10 {
            ask(&mut s, json!({"name": "myapi"}));
        }
        assert_eq!(ledger.len(), MAX_REQUESTS, "the record is bounded");
        assert_eq!(ask(&mut s, json!({"name": "myapi"}))["answer"], "error");
    }
}
