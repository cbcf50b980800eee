//! Approval requests: a gated action that asks a human ([`awt_core::call::approve`]) and was not answered at once
//! becomes a request waiting here, signed with the runner's task key ([`super::mac`]), in
//! `<data dir>/state/animaworks-tool/approvals/` (a folder no confined tool can read or write).
//!
//! A request moves `pending → approved → used`, or `pending → denied | expired`. Approved, it becomes a background
//! task of the same id (`source: "approval"`) that the worker runs once, as the anima, with the arguments approved:
//! the worker [`redeem`](Approvals::redeem)s the approval where it prepares the call, and the gate compares the whole binding (anima,
//! tool file, action, arguments). Denied or expired, the anima finds a notification in its inbox
//! (`state/background_notifications/<id>.md`). Each step is decided once (a marker file made with `O_EXCL`), each
//! decision is an audit line in the anima's log, and a record whose MAC does not verify is never acted on.

use super::{now_s, Kind, Task};
use awt_core::beneath::Folder;
use awt_core::call::approve::{Desk, Grant, Request, Ticket};
use awt_core::call::Runner;
use awt_core::error::{CallError, ErrorCode};
use awt_core::policy::approval::{self, Binding, CallKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

mod prune;
pub use prune::{is_final, PruneOptions, PruneReport, MAX_PENDING};

/// The folder, relative to the data dir.
pub const DIR: &str = "state/animaworks-tool/approvals";
/// How many entries the folder may hold before a look refuses it (a request is up to four files: the record,
/// its arguments and its step markers): a forged folder must not make every gated call read without end. The
/// store prunes decided requests before it gets near (`prune`).
pub const MAX_ENTRIES: usize = 8192;
/// Bound for a request's unmasked arguments file.
const ARGS_MAX: u64 = 16 * 1024 * 1024;
/// What the MAC of a record says first.
const DOMAIN: &str = "awt-approval-1";

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Pending,
    Approved,
    Denied,
    Expired,
    /// Approved, and its one run has started.
    Used,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Approved => "approved",
            State::Denied => "denied",
            State::Expired => "expired",
            State::Used => "used",
        }
    }
}

/// One request, as stored (the unmasked arguments, when masking changed them, sit beside it in `<id>.args.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub binding: Binding,
    /// The arguments with every resolved secret masked.
    pub args: Value,
    /// The grants asked for.
    pub keys: Vec<String>,
    pub anima_dir: Option<PathBuf>,
    pub timeout_s: Option<f64>,
    pub max_output: Option<u64>,
    /// Seconds since the epoch.
    pub created_at: f64,
    pub expires_at: f64,
    pub status: State,
    #[serde(default)]
    pub decided_by: Option<String>,
    #[serde(default)]
    pub decided_at: Option<f64>,
    #[serde(default)]
    pub reason: Option<String>,
    /// `<key id>:<HMAC>` over every other field.
    #[serde(default)]
    pub mac: Option<String>,
}

impl Record {
    fn unsigned(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.remove("mac");
        }
        v
    }

    fn sign(&mut self, key: &super::mac::Key) {
        self.mac = Some(super::mac::sign_value(key, DOMAIN, &self.unsigned()));
    }

    fn verified(&self, key: &super::mac::Key) -> bool {
        self.mac
            .as_deref()
            .is_some_and(|m| super::mac::verify_value(key, DOMAIN, &self.unsigned(), m))
    }

    /// The form `approvals list --json`, `show --json` and the notify command get (no MAC).
    pub fn public(&self) -> Value {
        let mut v = self.unsigned();
        if let Value::Object(m) = &mut v {
            m.insert("expires".into(), rfc3339(self.expires_at).into());
            m.insert("created".into(), rfc3339(self.created_at).into());
            m.insert("approve".into(), approve_command(&self.id).into());
        }
        v
    }
}

fn rfc3339(secs: f64) -> String {
    awt_core::policy::audit::rfc3339_utc(UNIX_EPOCH + Duration::from_secs_f64(secs.max(0.0)))
}

fn approve_command(id: &str) -> String {
    format!("animaworks-tool approvals approve {id}")
}

/// The store of one data dir.
pub struct Approvals {
    dir: PathBuf,
    key: super::mac::Key,
    locale: awt_core::locale::Locale,
    /// With the Postgres backend: requests and decisions are rows of its database (approve from any machine).
    pg: Option<String>,
}

fn internal(what: &str, e: impl std::fmt::Display) -> CallError {
    CallError::new(ErrorCode::Internal, format!("{what}: {e}"))
        .hint("the runner keeps approvals in <data dir>/state/animaworks-tool/approvals (docs/policy.md#approvals)")
}

fn usage(msg: String) -> CallError {
    CallError::new(ErrorCode::Usage, msg).hint("`animaworks-tool approvals list` shows the requests")
}

impl Approvals {
    pub fn open(data: &Path) -> Result<Approvals, CallError> {
        let key = super::mac::key(data).map_err(|e| internal("cannot use the runner's key", e))?;
        let dir = data.join(DIR);
        awt_core::owned::dir(&dir, "approvals folder").map_err(|e| internal("cannot use the approvals folder", e))?;
        Ok(Approvals {
            dir,
            key,
            locale: awt_core::locale::Locale::of_data_dir(data),
            pg: None,
        })
    }

    /// The store of `runner`'s task backend: the data dir's folder, or the Postgres database's rows.
    pub fn open_for(runner: &Runner) -> Result<Approvals, CallError> {
        let mut a = Approvals::open(&runner.dirs.data)?;
        if let Ok(cfg) = super::config::load(runner) {
            if let super::config::Backend::Postgres { url } = cfg.backend {
                a.pg = Some(url);
            }
        }
        Ok(a)
    }

    /// The store when requests were ever filed here (a look that must not create the folder or the key: `doctor`).
    pub fn existing(data: &Path) -> Option<Approvals> {
        data.join(DIR).is_dir().then(|| Approvals::open(data).ok()).flatten()
    }

    /// The folder, opened once for a look: its files are reached from it, never followed through a link.
    fn folder(&self) -> io::Result<Folder> {
        awt_core::beneath::folder(&self.dir, Path::new(""), false)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{} is missing", self.dir.display())))
    }

    /// The bytes of the folder's file `name` (a regular file of this user's, at most `max` bytes).
    fn read(&self, name: &str, max: u64) -> io::Result<Vec<u8>> {
        self.folder()?
            .read(Path::new(name), max)?
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    /// The record `id`, verified. A record that does not verify is an error, never acted on.
    pub fn get(&self, id: &str) -> Result<Record, CallError> {
        if !super::valid_task_id(id) {
            return Err(usage(format!("{id:?} is not an approval id")));
        }
        let read = match &self.pg {
            Some(url) => pg_exec(
                url,
                "SELECT record::text FROM awt_approvals WHERE id = $1",
                vec![id.to_owned()],
            )
            .and_then(|(_, rows)| {
                rows.into_iter()
                    .next()
                    .and_then(|r| r.into_iter().next().flatten())
                    .map(String::into_bytes)
                    .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
            }),
            None => self.read(&format!("{id}.json"), awt_core::fsread::SMALL),
        };
        let bytes = match read {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(usage(format!("no approval request {id:?} in {}", self.dir.display())))
            }
            Err(e) => return Err(internal(&format!("cannot read approval request {id}"), e)),
        };
        let r: Record =
            serde_json::from_slice(&bytes).map_err(|e| refused(id, &format!("its file is not a request ({e})")))?;
        if r.id != id || !r.verified(&self.key) {
            return Err(refused(
                id,
                "its signature does not match its content (forged or changed; only the runner writes requests)",
            ));
        }
        Ok(r)
    }

    /// Every request that verifies (others are skipped), oldest first; expired ones are marked so on the way. A
    /// folder of more than [`MAX_ENTRIES`] entries is an error, never a partial list.
    pub fn list(&self) -> Result<Vec<Record>, CallError> {
        let mut out = Vec::new();
        if let Some(url) = &self.pg {
            let ids = pg_exec(url, "SELECT id FROM awt_approvals", vec![])
                .map(|(_, rows)| rows)
                .unwrap_or_default();
            for id in ids.into_iter().filter_map(|r| r.into_iter().next().flatten()) {
                if let Ok(r) = self.get(&id) {
                    out.push(self.expire_if_due(r));
                }
            }
            out.sort_by(|a, b| a.created_at.total_cmp(&b.created_at).then(a.id.cmp(&b.id)));
            return Ok(out);
        }
        let names = self.folder().and_then(|f| f.names(Some(MAX_ENTRIES))).map_err(|e| {
            CallError::new(ErrorCode::Internal, format!("cannot list the approval requests: {e}")).hint(format!(
                "a request is at most four files (<id>.json, <id>.args.json, <id>.decided, <id>.used): \
                 `animaworks-tool approvals prune` removes those of decided requests; in {}, remove files not \
                 named so (`animaworks-tool approvals list --all` shows the requests)",
                self.dir.display()
            ))
        })?;
        for name in names {
            let name = name.to_string_lossy().into_owned();
            let Some(id) = name.strip_suffix(".json").filter(|i| !i.contains('.')) else {
                continue;
            };
            if let Ok(r) = self.get(id) {
                out.push(self.expire_if_due(r));
            }
        }
        out.sort_by(|a, b| a.created_at.total_cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    fn write(&self, r: &mut Record) -> Result<(), CallError> {
        r.sign(&self.key);
        let bytes = serde_json::to_vec_pretty(r).map_err(|e| internal("cannot encode a request", e))?;
        if let Some(url) = &self.pg {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            return pg_exec(
                url,
                "INSERT INTO awt_approvals (id, anima, status, record) VALUES ($1, $2, $3, $4::text::jsonb) \
                 ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, record = EXCLUDED.record",
                vec![
                    r.id.clone(),
                    r.binding.anima.clone().unwrap_or_default(),
                    r.status.as_str().to_owned(),
                    text,
                ],
            )
            .map(|_| ())
            .map_err(|e| internal(&format!("cannot write approval request {}", r.id), e));
        }
        self.folder()
            .and_then(|f| f.write_atomic(&format!("{}.json", r.id), &bytes))
            .map_err(|e| internal(&format!("cannot write approval request {}", r.id), e))
    }

    /// Take step `what` of `id` once: the marker file is made with `O_EXCL`, so of two deciders one wins.
    fn once(&self, id: &str, what: &str) -> io::Result<bool> {
        if let Some(url) = &self.pg {
            return pg_exec(
                url,
                "INSERT INTO awt_approval_steps (id, step) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                vec![id.to_owned(), what.to_owned()],
            )
            .map(|(n, _)| n == 1);
        }
        let flags = rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CREATE | rustix::fs::OFlags::EXCL;
        match self.folder()?.open(Path::new(&format!("{id}.{what}")), flags, 0o600) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn private_args(&self, r: &Record) -> Result<Value, CallError> {
        let read = if self.pg.is_some() {
            Err(io::Error::from(io::ErrorKind::NotFound))
        } else {
            self.read(&format!("{}.args.json", r.id), ARGS_MAX)
        };
        let args = match read {
            Ok(b) => {
                serde_json::from_slice(&b).map_err(|e| refused(&r.id, &format!("its arguments file is bad ({e})")))?
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => r.args.clone(),
            Err(e) => return Err(internal(&format!("cannot read the arguments of {}", r.id), e)),
        };
        if approval::args_sha256(r.binding.kind, &args) != r.binding.args_sha256 {
            return Err(refused(&r.id, "its arguments are not the ones it was requested with"));
        }
        Ok(args)
    }

    /// File a request (or find the same call's pending one) and tell the operator's notify command.
    pub fn file(&self, runner: &Runner, req: &Request) -> Result<Ticket, CallError> {
        let settings = runner.settings()?.approvals.clone();
        let list = self.keep_room()?;
        if let Some(same) = list
            .iter()
            .find(|r| r.status == State::Pending && r.binding == req.binding)
        {
            return Ok(ticket(same));
        }
        prune::room_to_wait(&list, &req.keys, &req.allow_line())?;
        let now = now_s();
        let mut r = Record {
            id: super::new_task_id(),
            binding: req.binding.clone(),
            args: req.masked_args.clone(),
            keys: req.keys.clone(),
            anima_dir: req.anima_dir.clone(),
            timeout_s: req.timeout_s,
            max_output: req.max_output,
            created_at: now,
            expires_at: now + settings.ttl_s(),
            status: State::Pending,
            decided_by: None,
            decided_at: None,
            reason: None,
            mac: None,
        };
        if req.masked_args != req.args && self.pg.is_some() {
            // A shared database never holds unmasked arguments (as tasks: secret_args).
            let b = &req.binding;
            return Err(CallError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "{} of tool '{}' cannot wait for approval: its arguments hold a credential, and the shared task \
                     database (Postgres backend) never keeps unmasked arguments",
                    b.action, b.tool
                ),
            )
            .with(awt_core::error::Detail::Reason, "approval_unavailable")
            .with(awt_core::error::Detail::Key, req.keys.join(","))
            .hint(format!(
                "to run it without asking, {}; or pass the credential another way than in the arguments \
                 (declare it: docs/credentials.md)",
                req.allow_line()
            )));
        }
        if req.masked_args != req.args {
            let bytes = serde_json::to_vec(&req.args).map_err(|e| internal("cannot encode arguments", e))?;
            self.folder()
                .and_then(|f| f.write_atomic(&format!("{}.args.json", r.id), &bytes))
                .map_err(|e| internal("cannot keep the request's arguments", e))?;
        }
        self.write(&mut r)?;
        if let Some(cmd) = settings.notify.as_ref().filter(|c| !c.is_empty()) {
            notify_command(cmd, &r.public());
        }
        Ok(ticket(&r))
    }

    /// A pending request past its time becomes `expired`, and its anima is notified.
    fn expire_if_due(&self, mut r: Record) -> Record {
        if r.status != State::Pending || r.expires_at > now_s() {
            return r;
        }
        if !self.once(&r.id, "decided").unwrap_or(false) {
            return self.get(&r.id).unwrap_or(r);
        }
        r.status = State::Expired;
        r.decided_at = Some(now_s());
        r.decided_by = Some("runner".into());
        if self.write(&mut r).is_ok() {
            self.notify_anima(&r, false);
            audit(&r, "expired");
        }
        r
    }

    /// `approvals approve`: the request becomes a background task of the same id, run once as its anima.
    pub fn approve(
        &self,
        runner: &Runner,
        id: &str,
        by: &str,
        reason: Option<&str>,
    ) -> Result<(Record, Vec<String>), CallError> {
        let r = self.expire_if_due(self.get(id)?);
        if r.status != State::Pending {
            return Err(usage(format!(
                "approval request {id} is {}, not pending",
                r.status.as_str()
            )));
        }
        let args = self.private_args(&r)?;
        let anima_dir = r
            .anima_dir
            .clone()
            .ok_or_else(|| refused(id, "it names no anima dir to run in"))?;
        if !self.once(id, "decided").map_err(|e| internal("cannot decide", e))? {
            return Err(usage(format!(
                "approval request {id} was decided by someone else just now"
            )));
        }
        let mut r = r;
        r.status = State::Approved;
        r.decided_by = Some(by.to_owned());
        r.decided_at = Some(now_s());
        r.reason = reason.map(str::to_owned);
        self.write(&mut r)?;
        audit(&r, "approved");
        let dirs = awt_core::dirs::Dirs {
            anima: Some(anima_dir.clone()),
            ..runner.dirs.clone()
        };
        let as_anima = Runner::new(dirs.clone());
        let store = super::backend::open(&as_anima)?;
        let mut task = task_of(&r, &anima_dir);
        let private = (r.args != args).then_some(args);
        let private = private.map(|a| match r.binding.kind {
            CallKind::Action => a,
            CallKind::Cli => super::cli_tool_args(&string_list(&a), &anima_dir),
        });
        if !store.is_local() {
            task.queue.tool_sha256 = Some(r.binding.tool_sha256.clone());
        }
        super::mac::sign(&self.key, &mut task, private.as_ref());
        let mut warnings = Vec::new();
        match store.create_and_start(&task, private.as_ref(), &dirs) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warnings.push(format!(
                "cannot start a worker ({e}); the task stays pending until the next `animaworks-tool jobs` command starts one"
            )),
            Err(e) => return Err(internal(&format!("cannot queue the approved task {id}"), e)),
        }
        Ok((r, warnings))
    }

    /// `approvals deny`: the request will not run; its anima is notified.
    pub fn deny(&self, id: &str, by: &str, reason: Option<&str>) -> Result<Record, CallError> {
        let mut r = self.expire_if_due(self.get(id)?);
        if r.status != State::Pending {
            return Err(usage(format!(
                "approval request {id} is {}, not pending",
                r.status.as_str()
            )));
        }
        if !self.once(id, "decided").map_err(|e| internal("cannot decide", e))? {
            return Err(usage(format!(
                "approval request {id} was decided by someone else just now"
            )));
        }
        r.status = State::Denied;
        r.decided_by = Some(by.to_owned());
        r.decided_at = Some(now_s());
        r.reason = reason.map(str::to_owned);
        self.write(&mut r)?;
        self.notify_anima(&r, true);
        audit(&r, "denied");
        Ok(r)
    }

    /// The worker's side: the approval of task `id`, used now, once. Anything but an approved, verified, unused
    /// request of this id is refused.
    pub fn redeem(&self, id: &str) -> Result<Grant, CallError> {
        let mut r = self.get(id)?;
        if r.status != State::Approved {
            return Err(refused(id, &format!("it is {}, not approved", r.status.as_str())));
        }
        if !self
            .once(id, "used")
            .map_err(|e| internal("cannot use the approval", e))?
        {
            return Err(refused(id, "it was used already (an approval runs one call once)"));
        }
        r.status = State::Used;
        self.write(&mut r)?;
        Ok(Grant::of(r.binding))
    }

    fn notify_anima(&self, r: &Record, denied: bool) {
        let Some(dir) = r.anima_dir.as_deref().filter(|d| d.is_dir()) else {
            return;
        };
        let rel = Path::new("state/background_notifications");
        let text = self.locale.approval_closed(
            &format!("{}:{}", r.binding.tool, r.binding.action),
            &r.id,
            denied,
            r.decided_by.as_deref().unwrap_or(""),
            r.reason.as_deref().unwrap_or(""),
        );
        // Never through a link a tool may have left in place of `state/` or the inbox (another anima's inbox).
        // The file is written from the folder the walk opened, never by its path again: a link swapped in after the
        // walk changes nothing.
        let wrote = awt_core::beneath::folder(dir, rel, true).and_then(|f| match f {
            Some(f) => f.write_atomic(&format!("{}.md", r.id), text.as_bytes()),
            None => Err(io::Error::from(io::ErrorKind::NotFound)),
        });
        if let Err(e) = wrote {
            tracing::warn!("cannot write the notification of approval request {}: {e}", r.id);
        }
    }
}

fn string_list(v: &Value) -> Vec<String> {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

fn ticket(r: &Record) -> Ticket {
    Ticket {
        id: r.id.clone(),
        expires_at: rfc3339(r.expires_at),
        approve: approve_command(&r.id),
    }
}

fn refused(id: &str, why: &str) -> CallError {
    CallError::new(
        ErrorCode::PermissionDenied,
        format!("approval request {id} cannot be used: {why}"),
    )
    .with(awt_core::error::Detail::Reason, "approval_refused")
    .hint("a gated call that asks is run only on an approval the runner wrote and a human gave for that exact call")
}

/// The background task an approved request becomes.
fn task_of(r: &Record, anima_dir: &Path) -> Task {
    let b = &r.binding;
    let (kind, action, tool_args) = match b.kind {
        CallKind::Action => (Kind::Action, b.action.clone(), r.args.clone()),
        CallKind::Cli => {
            let argv = string_list(&r.args);
            let sub = super::subcommand_of(&argv).to_owned();
            (Kind::Cli, sub, super::cli_tool_args(&argv, anima_dir))
        }
    };
    Task {
        timeout_s: r.timeout_s,
        max_output: r.max_output,
        queue: super::QueueInfo {
            tool_tier: Some(b.tier.as_str().to_owned()),
            ..Default::default()
        },
        ..Task::pending(
            r.id.clone(),
            b.anima.clone().unwrap_or_default(),
            b.tool.clone(),
            action,
            kind,
            tool_args,
            "approval",
        )
    }
}

/// One audit line in the anima's log for a decision: who, when, why.
fn audit(r: &Record, what: &str) {
    let Some(dir) = r.anima_dir.as_deref().filter(|d| d.is_dir()) else {
        return;
    };
    let b = &r.binding;
    let mut rec = awt_core::policy::audit::AuditRecord::new(
        b.anima.as_deref(),
        &b.tool,
        Some(&b.action),
        Some(b.tier),
        &awt_core::policy::gate::Decision::Allow,
        0,
        &format!("approval_{what}"),
        None,
        r.args.clone(),
    );
    rec.decision = if what == "approved" { "allow" } else { "deny" };
    rec.reason = Some(format!(
        "approval_{what}: request {} {what} by {} at {}{}",
        r.id,
        r.decided_by.as_deref().unwrap_or("?"),
        rfc3339(r.decided_at.unwrap_or_else(now_s)),
        r.reason.as_deref().map(|x| format!(": {x}")).unwrap_or_default()
    ));
    let log = match awt_core::env_vars::AUDIT_LOG.get_os() {
        Some(p) => awt_core::policy::audit::AuditLog::at(PathBuf::from(p)),
        None => awt_core::policy::audit::AuditLog::for_anima(dir),
    };
    if let Err(e) = log.append(&rec, &awt_core::policy::Masker::default()) {
        tracing::warn!("cannot write the audit line of approval request {}: {e}", r.id);
    }
}

/// Run the operator's notify command with the request on stdin (unconfined: the operator's own program). It is
/// not waited for here; a thread reaps it.
fn notify_command(cmd: &[String], request: &Value) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn();
    match child {
        Ok(mut c) => {
            if let Some(mut stdin) = c.stdin.take() {
                let _ = stdin.write_all(request.to_string().as_bytes());
            }
            std::thread::spawn(move || {
                let _ = c.wait();
            });
        }
        Err(e) => tracing::warn!("cannot run approvals.notify {:?}: {e}", cmd[0]),
    }
}

/// The desk the binary installs: requests filed in the data dir's approvals folder.
pub struct FileDesk;

impl Desk for FileDesk {
    fn file(&self, runner: &Runner, req: &Request) -> Result<Ticket, CallError> {
        Approvals::open_for(runner)?.file(runner, req)
    }
}

/// Install [`FileDesk`] for this process.
pub fn install() {
    awt_core::call::approve::install(Box::new(FileDesk));
}

/// Who decides: `--by`, else the OS user.
pub fn operator(by: Option<&str>) -> String {
    if let Some(b) = by.filter(|b| !b.is_empty()) {
        return b.to_owned();
    }
    // The account of the process's uid, not $USER: the variable is the caller's to set.
    let uid = rustix::process::geteuid().as_raw();
    let name = awt_core::fsread::read(Path::new("/etc/passwd"), awt_core::fsread::SMALL)
        .ok()
        .and_then(|b| {
            String::from_utf8_lossy(&b).lines().find_map(|l| {
                let f: Vec<&str> = l.split(':').collect();
                (f.len() > 2 && f[2].parse() == Ok(uid) && !f[0].is_empty()).then(|| f[0].to_owned())
            })
        });
    name.unwrap_or_else(|| format!("uid {uid}"))
}

/// The tables of approvals in the task database (made when first needed, beside the versioned task schema).
const PG_SCHEMA: &str = "CREATE TABLE IF NOT EXISTS awt_approvals (id text PRIMARY KEY, anima text NOT NULL, \
     status text NOT NULL, record jsonb NOT NULL); \
     CREATE TABLE IF NOT EXISTS awt_approval_steps (id text NOT NULL, step text NOT NULL, \
     at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (id, step));";

/// One statement on the task database, on a thread of its own (callers may be inside a runtime): the rows as text
/// for a `SELECT`, else the count of rows changed. Approvals are rare: a connection each is fine.
fn pg_exec(url: &str, sql: &'static str, params: Vec<String>) -> io::Result<(u64, Vec<Vec<Option<String>>>)> {
    let url = url.to_owned();
    let run = move || -> io::Result<(u64, Vec<Vec<Option<String>>>)> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(async move {
            let mut cfg: tokio_postgres::Config = url.parse().map_err(io::Error::other)?;
            cfg.connect_timeout(Duration::from_secs(5));
            let (client, conn) = cfg.connect(tokio_postgres::NoTls).await.map_err(io::Error::other)?;
            tokio::spawn(conn);
            client.batch_execute(PG_SCHEMA).await.map_err(io::Error::other)?;
            let p: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                .iter()
                .map(|s| s as &(dyn tokio_postgres::types::ToSql + Sync))
                .collect();
            if sql.starts_with("SELECT") {
                let rows = client.query(sql, &p).await.map_err(io::Error::other)?;
                let out = rows
                    .iter()
                    .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect())
                    .collect();
                Ok((0, out))
            } else {
                Ok((client.execute(sql, &p).await.map_err(io::Error::other)?, Vec::new()))
            }
        })
    };
    std::thread::spawn(run)
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the approvals database thread panicked")))
}
