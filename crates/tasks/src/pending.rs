//! AnimaWorks' own queue: `<anima dir>/state/background_tasks/pending/<id>.json`, written by the original
//! `submit` (`{"task_id", "tool_name", "subcommand", "raw_args", "anima_name", "anima_dir", "submitted_at",
//! "status"}`). `jobs run-pending` takes each over as one of our tasks with the same id (so the id the original
//! printed is the id of the result file), in submit order. A taken descriptor moves to `pending/done/`; one that
//! cannot run moves to `pending/invalid/` beside a `<name>.reason.txt` — never deleted.

use super::submit;
use super::TaskStore;
use awt_core::beneath::Folder;
use awt_core::call::Runner;
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};

/// At most this many entries in `pending/` are looked at in one take-over (a forged folder is refused, not read
/// without end).
const MAX_DESCRIPTORS: usize = 65536;

/// What `run-pending` did.
#[derive(Debug, Default)]
pub struct Takeover {
    /// Receipts of the tasks queued.
    pub queued: Vec<Value>,
    /// Each descriptor set aside: its file, why, and the runner's error object when a check refused it.
    pub invalid: Vec<(PathBuf, String, Option<serde_json::Value>)>,
}

pub struct Descriptor {
    pub task_id: String,
    pub tool: String,
    pub words: Vec<String>,
    pub submitted_at: f64,
}

/// Why a descriptor cannot be taken over; written beside it as `<name>.reason.txt`.
#[derive(Debug, thiserror::Error)]
pub enum BadDescriptor {
    #[error("cannot read it: {0}")]
    Unreadable(io::Error),
    #[error("not valid JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("not a JSON object")]
    NotObject,
    #[error("no \"task_id\" string")]
    NoTaskId,
    #[error("\"task_id\" {0:?} is not a task id (letters, digits, - and _)")]
    BadTaskId(String),
    #[error("no \"tool_name\" string")]
    NoToolName,
    #[error("\"raw_args\" holds something that is not a string")]
    ArgNotString,
    #[error("\"raw_args\" is not a list of strings")]
    ArgsNotList,
}

pub fn parse(text: &[u8]) -> Result<Descriptor, BadDescriptor> {
    let v: Value = serde_json::from_slice(text).map_err(BadDescriptor::NotJson)?;
    let obj = v.as_object().ok_or(BadDescriptor::NotObject)?;
    let task_id = obj
        .get("task_id")
        .and_then(Value::as_str)
        .ok_or(BadDescriptor::NoTaskId)?
        .to_owned();
    if !super::valid_task_id(&task_id) {
        return Err(BadDescriptor::BadTaskId(task_id));
    }
    let tool = obj
        .get("tool_name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(BadDescriptor::NoToolName)?;
    let mut words: Vec<String> = match obj.get("raw_args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|w| w.as_str().map(str::to_owned).ok_or(BadDescriptor::ArgNotString))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(BadDescriptor::ArgsNotList),
    };
    if let Some(sub) = obj.get("subcommand").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        if words.first().map(String::as_str) != Some(sub) {
            words.insert(0, sub.to_owned());
        }
    }
    let submitted_at = obj.get("submitted_at").and_then(Value::as_f64).unwrap_or(0.0);
    Ok(Descriptor {
        task_id,
        tool: tool.to_owned(),
        words,
        submitted_at,
    })
}

/// Set the descriptor `name` of `.taking/` aside in `invalid/`, beside its reason: both folders reached from their
/// descriptors, so a link swapped in for either after it was opened changes nothing.
fn move_aside(taking: &Folder, invalid: &Folder, name: &str, reason: &str) -> io::Result<()> {
    invalid.write_atomic(&format!("{name}.reason.txt"), format!("{reason}\n").as_bytes())?;
    taking.rename_to(name, invalid, name)
}

/// The sub-folder `name` of `pending`, made where missing, never through a link.
fn sub(pending: &Folder, name: &str) -> io::Result<Folder> {
    pending
        .sub(name, true, 0o700)?
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{name} is missing")))
}

/// Take every descriptor in `pending/` over as a task of `store`.
pub async fn take_over(runner: &Runner, pending: &Path, store: &dyn TaskStore) -> io::Result<Takeover> {
    let mut report = Takeover::default();
    // Never through a link a tool may have left for one of the folders the descriptors move to (another anima's
    // pending folder would take them as its own): refused before anything is taken.
    for d in [".taking", "done", "invalid"] {
        awt_core::beneath::check(pending, Path::new(d))?;
    }
    // Every step below is from the folders' descriptors: a descriptor or folder swapped for a link after its check
    // is never followed.
    let Some(folder) = awt_core::beneath::folder(pending, Path::new(""), false)? else {
        return Ok(report);
    };
    let mut files: Vec<(f64, String)> = Vec::new();
    for n in folder.names(Some(MAX_DESCRIPTORS))? {
        let Some(name) = n.to_str().filter(|n| n.ends_with(".json") && !n.starts_with('.')) else {
            continue;
        };
        let Ok(st) = folder.stat_of(name) else { continue };
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
            continue;
        }
        let at = folder
            .read(Path::new(name), awt_core::fsread::SMALL)
            .ok()
            .flatten()
            .and_then(|b| parse(&b).ok())
            .map(|d| d.submitted_at)
            .unwrap_or(0.0);
        files.push((at, name.to_owned()));
    }
    files.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let taking = sub(&folder, ".taking")?;
    // Each opened once, when first needed: what moves there later lands in the folder opened.
    let (mut done, mut invalid): (Option<Folder>, Option<Folder>) = (None, None);
    for (_, name) in files {
        // The rename is the claim: two run-pending at once never take one descriptor twice.
        if folder.rename_to(&name, &taking, &name).is_err() {
            continue;
        }
        // Opened with `O_NOFOLLOW` from the folder's descriptor and checked on that descriptor (`fstat`): a
        // descriptor that is a link (another anima's would run as this one's), a FIFO or a device is refused.
        let read = taking
            .read(Path::new(&name), awt_core::fsread::SMALL)
            .and_then(|b| b.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound)));
        let outcome = match read.map_err(BadDescriptor::Unreadable).and_then(|b| parse(&b)) {
            Err(reason) => Err((reason.to_string(), None)),
            Ok(d) => {
                if store.get(&d.task_id).ok().flatten().is_some() {
                    Err((format!("a task {} exists already", d.task_id), None))
                } else {
                    match submit::check(runner, &d.tool, &d.words, false, Some(d.task_id.clone())).await {
                        Err(e) => Err((
                            format!(
                                "{}: {}{}",
                                e.code,
                                e.message,
                                e.hint.as_ref().map(|h| format!(" (hint: {h})")).unwrap_or_default()
                            ),
                            e.to_json().get("error").cloned(),
                        )),
                        Ok(mut c) => {
                            c.task.source = Some("animaworks-pending".into());
                            if d.submitted_at > 0.0 {
                                c.task.created_at = d.submitted_at;
                            }
                            submit::enqueue(store, &mut c)
                                .map(|_| c.task.receipt())
                                .map_err(|e| (e.message.clone(), e.to_json().get("error").cloned()))
                        }
                    }
                }
            }
        };
        match outcome {
            Ok(receipt) => {
                let done = match &mut done {
                    Some(d) => d,
                    None => done.insert(sub(&folder, "done")?),
                };
                taking.rename_to(&name, done, &name)?;
                report.queued.push(receipt);
            }
            Err((reason, error)) => {
                let invalid = match &mut invalid {
                    Some(d) => d,
                    None => invalid.insert(sub(&folder, "invalid")?),
                };
                move_aside(&taking, invalid, &name, &reason)?;
                report.invalid.push((pending.join(&name), reason, error));
            }
        }
    }
    Ok(report)
}
