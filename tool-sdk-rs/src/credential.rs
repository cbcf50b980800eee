//! Asking for a credential at run time: [`get_credential`] and [`Context::get_credential`].
//!
//! Run by the runner, a tool has a credential broker: a socket named by `$ANIMAWORKS_TOOL_BROKER_FD`, one JSON
//! line each way (`runner/src/broker.rs`, docs/credentials.md). The runner checks each name against the anima's
//! grants, records the answer in the call's audit line and masks the value before the tool has it. The wire is the
//! Python SDK's (`_broker.py`): request `{"name","key","env","per_anima"}`, answer `{"ok":true,"value"}` or
//! `{"ok":false,"answer","message","grant"?}`.

use std::io::{Read, Write};
use std::sync::{Mutex, OnceLock};

use crate::{Context, ToolError};

/// The variable naming the broker's descriptor (the runner's `policy::env::BROKER_FD_VAR`).
pub const BROKER_FD_VAR: &str = "ANIMAWORKS_TOOL_BROKER_FD";
/// The code of the [`ToolError`] of a credential not handed out (the Python SDK's `CredentialError`).
pub const MISSING_CREDENTIAL: &str = "missing_credential";
/// The longest answer read: a credential is a line, not a file.
const MAX_ANSWER: usize = 1 << 20;

/// What to ask for, with AnimaWorks' `get_credential` arguments: the entry `name` of `config.json`
/// `credentials`, its key (`api_key` unless [`CredentialQuery::key`]), and the variable [`CredentialQuery::env`]
/// under which the vault, `shared/credentials.json` and the environment hold it. `"name".into()` asks for the
/// `api_key` of `name` with no variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialQuery {
    name: String,
    key: String,
    env: Option<String>,
    per_anima: bool,
}

impl CredentialQuery {
    /// The `api_key` of the credential `name`.
    pub fn new(name: impl Into<String>) -> Self {
        CredentialQuery {
            name: name.into(),
            key: "api_key".to_owned(),
            env: None,
            per_anima: false,
        }
    }

    /// Another key of the entry (`credentials.<name>.keys.<key>`).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }

    /// The variable that also holds it (the vault's `shared.<env>`, `shared/credentials.json`, the environment).
    pub fn env(mut self, env: impl Into<String>) -> Self {
        self.env = Some(env.into());
        self
    }

    /// Look for the calling anima's own value (`<env>__<anima>`) first.
    pub fn per_anima(mut self) -> Self {
        self.per_anima = true;
        self
    }

    fn request_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(&serde_json::json!({
            "name": self.name, "key": self.key, "env": self.env, "per_anima": self.per_anima,
        }))
        .unwrap_or_default();
        line.push(b'\n');
        line
    }
}

impl From<&str> for CredentialQuery {
    fn from(name: &str) -> Self {
        CredentialQuery::new(name)
    }
}

impl From<String> for CredentialQuery {
    fn from(name: String) -> Self {
        CredentialQuery::new(name)
    }
}

/// The value of a credential. Run by the runner, a tool that declares [`crate::Tool::broker`] has the broker answer (by the anima's grants); without one (the
/// tool started by hand) the environment variable of [`CredentialQuery::env`] does, `<env>__<anima>` first with
/// [`CredentialQuery::per_anima`]. This SDK does not read AnimaWorks' stores itself: the runner does, for the
/// credentials it grants.
///
/// A credential not handed out is a [`ToolError`] of code [`MISSING_CREDENTIAL`] whose message says why
/// (refused, not set) and, when refused, whose hint names the line of `permissions.json` that grants it: returned
/// from a handler with `?`, the call ends with that error.
pub fn get_credential(query: impl Into<CredentialQuery>) -> Result<String, ToolError> {
    lookup(&query.into(), None)
}

impl Context<'_> {
    /// [`get_credential`], with this call's tool named in the error and its anima used for
    /// [`CredentialQuery::per_anima`] without a broker.
    pub fn get_credential(&self, query: impl Into<CredentialQuery>) -> Result<String, ToolError> {
        lookup(&query.into(), Some(self))
    }
}

fn lookup(q: &CredentialQuery, ctx: Option<&Context<'_>>) -> Result<String, ToolError> {
    let who = ctx.map(|c| format!("{}: ", c.tool())).unwrap_or_default();
    if let Some(broker) = broker() {
        return ask(broker, q).map_err(|(message, grant)| {
            let e = ToolError::new(MISSING_CREDENTIAL, format!("{who}{message}"));
            match grant {
                Some(g) => e.with_hint(format!("add {g} to the anima's permissions.json")),
                None => e,
            }
        });
    }
    if let Some(env) = &q.env {
        let anima = ctx
            .and_then(|c| c.anima_name().map(str::to_owned))
            .or_else(|| std::env::var("ANIMAWORKS_ANIMA_NAME").ok())
            .filter(|_| q.per_anima);
        let names = anima.map(|a| format!("{env}__{a}")).into_iter().chain([env.clone()]);
        for name in names {
            if let Some(v) = std::env::var(&name).ok().filter(|v| !v.is_empty()) {
                return Ok(v);
            }
        }
    }
    let set = match &q.env {
        Some(env) => format!(
            "set the environment variable {env}, or run the tool through animaworks-tool, declaring `Tool::broker()`"
        ),
        None => "run the tool through animaworks-tool, declaring `Tool::broker()`".to_owned(),
    };
    Err(ToolError::new(
        MISSING_CREDENTIAL,
        format!("{who}credential '{}' ({}) is not set", q.name, q.key),
    )
    .with_hint(set))
}

/// One request and its answer; `Err((message, grant))` when the value was not handed out.
fn ask(
    broker: &Mutex<std::os::unix::net::UnixStream>,
    q: &CredentialQuery,
) -> Result<String, (String, Option<String>)> {
    let gone = || ("the runner's credential broker went away".to_owned(), None);
    let mut s = broker.lock().unwrap_or_else(|e| e.into_inner());
    s.write_all(&q.request_line()).map_err(|_| gone())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    while !buf.ends_with(b"\n") {
        let n = s.read(&mut chunk).map_err(|_| gone())?;
        if n == 0 || buf.len() + n > MAX_ANSWER {
            return Err(gone());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    drop(s);
    let answer: serde_json::Value =
        serde_json::from_slice(&buf).map_err(|e| (format!("the credential broker's answer is not JSON: {e}"), None))?;
    if answer["ok"] == true {
        if let Some(v) = answer["value"].as_str() {
            return Ok(v.to_owned());
        }
    }
    let message = answer["message"].as_str().unwrap_or("refused").to_owned();
    Err((message, answer["grant"].as_str().map(str::to_owned)))
}

/// The broker of this process, taken from `$ANIMAWORKS_TOOL_BROKER_FD` once (the variable is then removed and the
/// socket made close-on-exec, so the processes the tool starts have no broker, as with the Python SDK).
fn broker() -> Option<&'static Mutex<std::os::unix::net::UnixStream>> {
    static BROKER: OnceLock<Option<Mutex<std::os::unix::net::UnixStream>>> = OnceLock::new();
    BROKER.get_or_init(take_from_environment).as_ref()
}

/// Called by [`crate::Tool::run`] before any handler runs, so the variable is gone before a handler can start a
/// process (and while the process has one thread, as removing a variable wants).
pub(crate) fn install_from_environment() {
    let _ = broker();
}

#[allow(unsafe_code)]
fn take_from_environment() -> Option<Mutex<std::os::unix::net::UnixStream>> {
    use std::os::fd::{FromRawFd, OwnedFd};

    let value = std::env::var(BROKER_FD_VAR).ok()?;
    std::env::remove_var(BROKER_FD_VAR);
    let fd: i32 = value.parse().ok().filter(|fd| *fd > 2)?;
    // Adopt the number only when it is an open socket: a stale or forged number must not take over another file.
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    if !target.to_string_lossy().starts_with("socket:") {
        return None;
    }
    // SAFETY: `fd` is open (just checked) and was handed over by the runner for this process alone; it is taken
    // once (the OnceLock above), so no other owner closes it.
    let handed = unsafe { OwnedFd::from_raw_fd(fd) };
    // The copy is made with F_DUPFD_CLOEXEC; the inherited number is closed when `handed` drops.
    let own = std::os::unix::net::UnixStream::from(handed.try_clone().ok()?);
    Some(Mutex::new(own))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixStream;

    /// A broker on the other end of a real socket pair: it records each request line and answers with `answers`.
    fn broker_answering(answers: Vec<&'static str>) -> (Mutex<UnixStream>, std::thread::JoinHandle<Vec<String>>) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            let mut out = theirs.try_clone().unwrap();
            let mut lines = BufReader::new(theirs).lines();
            let mut seen = Vec::new();
            for a in answers {
                seen.push(lines.next().unwrap().unwrap());
                out.write_all(format!("{a}\n").as_bytes()).unwrap();
            }
            seen
        });
        (Mutex::new(ours), t)
    }

    #[test]
    fn speaks_the_brokers_wire() {
        let (b, t) = broker_answering(vec![
            r#"{"ok": true, "value": "v-1"}"#,
            r#"{"ok": false, "answer": "refused", "message": "not granted", "grant": "\"credentials\": {\"t\": [\"x\"]}"}"#,
            r#"{"ok": false, "answer": "missing", "message": "credential 'y' is not set"}"#,
        ]);
        assert_eq!(ask(&b, &"svc".into()), Ok("v-1".to_owned()));
        let q = CredentialQuery::new("x").key("token").env("X_TOKEN").per_anima();
        assert_eq!(
            ask(&b, &q),
            Err((
                "not granted".to_owned(),
                Some(r#""credentials": {"t": ["x"]}"#.to_owned())
            ))
        );
        assert_eq!(
            ask(&b, &"y".into()),
            Err(("credential 'y' is not set".to_owned(), None))
        );
        let seen = t.join().unwrap();
        assert_eq!(
            seen,
            [
                r#"{"name":"svc","key":"api_key","env":null,"per_anima":false}"#,
                r#"{"name":"x","key":"token","env":"X_TOKEN","per_anima":true}"#,
                r#"{"name":"y","key":"api_key","env":null,"per_anima":false}"#,
            ]
        );
        // The broker gone: an answer, not a hang or a panic.
        assert_eq!(
            ask(&b, &"z".into()).unwrap_err().0,
            "the runner's credential broker went away"
        );
    }
}
