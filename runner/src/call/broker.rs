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
    fn push(&self, name: &str, answer: &'static str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push((name.to_owned(), answer));
    }

    /// The audit line's `brokered` list.
    pub fn to_value(&self) -> Value {
        let v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Value::Array(v.iter().map(|(n, a)| json!({"name": n, "answer": a})).collect())
    }
}

/// What the broker of one call knows.
pub(crate) struct Context {
    pub data_dir: PathBuf,
    pub anima_name: Option<String>,
    pub grants: CredentialGrants,
    pub tool: String,
}

/// A started broker: its thread answers until the tool's end is closed.
pub(crate) struct Broker {
    child: Option<OwnedFd>,
}

impl Broker {
    /// A socket pair and the thread that serves the runner's end. `late` learns every value handed out, `ledger`
    /// every answer.
    pub fn start(ctx: Context, late: LateSecrets, ledger: Ledger) -> std::io::Result<Broker> {
        let (ours, theirs) = UnixStream::pair()?;
        std::thread::Builder::new()
            .name("credential-broker".into())
            .spawn(move || serve(ours, ctx, ledger, late))?;
        Ok(Broker {
            child: Some(OwnedFd::from(theirs)),
        })
    }

    /// The descriptor to hand over to the tool (under the same number), while it has not started.
    pub fn child_fd(&self) -> Option<RawFd> {
        self.child.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The tool has started (or will not): the runner's copy of its end is closed, so that the thread sees the
    /// end of the stream when the tool's copies are gone.
    pub fn started(&mut self) {
        self.child = None;
    }
}

fn serve(stream: UnixStream, ctx: Context, ledger: Ledger, late: LateSecrets) {
    let Ok(mut out) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    let mut resolver: Option<Resolver> = None;
    let mut served = 0;
    loop {
        let mut line = Vec::new();
        match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        served += 1;
        let req: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
        let name = req.get("name").and_then(Value::as_str).unwrap_or("");
        let answer = if served > MAX_REQUESTS || name.is_empty() || !line.ends_with(b"\n") {
            ledger.push(&name.chars().take(64).collect::<String>(), "error");
            json!({"ok": false, "answer": "error", "message": format!(
                "the credential broker takes up to {MAX_REQUESTS} requests per call, each one JSON line naming a credential")})
        } else if !ctx.grants.allows(name) {
            ledger.push(name, "refused");
            json!({"ok": false, "answer": "refused", "message": ctx.grants.refusal(name),
                   "grant": ctx.grants.grant_line(name)})
        } else {
            let decl = tool_sdk::protocol::CredentialDecl {
                name: name.to_owned(),
                env: req.get("env").and_then(Value::as_str).unwrap_or("").to_owned(),
                key: req.get("key").and_then(Value::as_str).unwrap_or("api_key").to_owned(),
                per_anima: req.get("per_anima").and_then(Value::as_bool).unwrap_or(false),
                required: true,
            };
            let r = resolver.get_or_insert_with(|| {
                let caller: HashMap<String, String> = std::env::vars().collect();
                Resolver::new(&ctx.data_dir, ctx.anima_name.as_deref(), caller)
            });
            match r.resolve(&decl) {
                Ok(Some(found)) => {
                    // Masked from now on: before the tool can have it.
                    late.add(&found.value);
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
        };
        let mut bytes = serde_json::to_vec(&answer).unwrap_or_default();
        bytes.push(b'\n');
        if out.write_all(&bytes).is_err() {
            return;
        }
    }
}
