//! Everything a submit checks before anything is written: the tool exists, the arguments validate, permissions
//! and gates allow the call, required credentials resolve. Then one `pending` task is stored.

use super::{Kind, Task, TaskStore};
use awt_core::call::{CallOptions, Runner};
use awt_core::error::{CallError, Detail, ErrorCode};
use serde_json::Value;

/// A checked task, not stored yet.
#[derive(Debug)]
pub struct Checked {
    pub task: Task,
    /// The unmasked arguments, when masking changed them.
    pub private_args: Option<Value>,
    /// Said on stderr, e.g. an action not marked background-eligible.
    pub warnings: Vec<String>,
    /// Said on stderr as they are: AnimaWorks' own lines ([`super::legacy_warning`]).
    pub said: Vec<String>,
    /// The tool file checked against: a shared queue records its digest ([`enqueue`]).
    pub tool_file: awt_core::discover::ToolFile,
}

pub use super::files::store_of;

/// Check `submit <tool> <words…>`: `<action> [flags]`, or the argv of a legacy `cli_main` module.
pub async fn check(
    runner: &Runner,
    tool: &str,
    words: &[String],
    strict: bool,
    id: Option<String>,
) -> Result<Checked, CallError> {
    store_of(runner)?;
    let opened = runner.open(tool).await?;
    let mut warnings = Vec::new();
    let anima_name = runner.dirs.anima_name().unwrap_or_default();
    let task_id = id.unwrap_or_else(super::new_task_id);
    let first = words.first().map(String::as_str);
    let manifest = &opened.resolved().manifest;
    let legacy = manifest.legacy;
    let animaworks_warning = super::legacy_warning::of(&opened.resolved().file, manifest, words);
    // Why the parse: AnimaWorks' own submit (and its pending descriptors) pass a cli_main module's argv, whose
    // first word is usually an action's name (`add "title" --body x`); words that are not that action's flags
    // are that argv, as they are for a foreground `<tool> <argv…>`.
    let structured = match first.and_then(|a| manifest.action(a)) {
        Some(act) => !manifest.cli || awt_core::flags::parse(act, &words[1..]).is_ok(),
        None => !manifest.cli,
    };
    let tool_name = opened.name().to_owned();
    let tool_file = opened.resolved().file.clone();
    let (kind, action, raw_args, masked, timeout, max_output, arg_secrets, idempotent) = if structured {
        let Some(action_word) = first else {
            return Err(
                CallError::new(ErrorCode::Usage, format!("submit {tool}: name the action to run"))
                    .hint(format!("`animaworks-tool {tool} --help` lists its actions")),
            );
        };
        let target = opened.action(action_word)?;
        let (argmap, flags) = target.parse_flags(&words[1..])?;
        if flags.help || flags.events {
            return Err(
                CallError::new(ErrorCode::Usage, "submit takes neither --help nor --events").hint(format!(
                    "`animaworks-tool {tool} {} --help` shows the action's flags",
                    target.action().name
                )),
            );
        }
        // An AnimaWorks module's task gets AnimaWorks' 30 minutes unless --timeout says otherwise: its own
        // background runner bounds a task so, never by the 60 s default of an action.
        let legacy_default = (legacy && flags.timeout.is_none()).then(|| {
            target
                .action()
                .timeout_s()
                .max(awt_core::call::CLI_TIMEOUT.as_secs_f64())
        });
        let timeout_s = flags.timeout.or(legacy_default);
        let timeout = timeout_s
            .map(|s| awt_core::call::timeout_from_secs(s, "--timeout"))
            .transpose()?;
        let opts = CallOptions {
            timeout,
            max_output: flags.max_output,
            call_id: Some(task_id.clone()),
            check_only: true,
            ..Default::default()
        };
        let eligible = target.action().profile.background_eligible;
        let idempotent = target.action().profile.hints.idempotent;
        let call = target.prepare(argmap, &opts)?;
        let name = call.action().name.clone();
        if !eligible {
            let msg = format!("{tool}.{name} is not marked background-eligible in its profile");
            if strict {
                return Err(call.refuse(
                    CallError::new(ErrorCode::PermissionDenied, msg)
                        .hint("drop --strict to submit it anyway, or call it in the foreground")
                        .with(Detail::Tool, tool)
                        .with(Detail::Action, name)
                        .with(Detail::Reason, "not_background_eligible"),
                ));
            }
            if animaworks_warning.is_none() {
                warnings.push(format!("{msg}; submitting anyway"));
            }
        }
        (
            Kind::Action,
            name,
            Value::Object(call.args().clone()),
            call.masked_args(),
            timeout_s,
            flags.max_output,
            super::secret_args::template(call.secrets(), &Value::Object(call.args().clone())),
            idempotent,
        )
    } else {
        if words.is_empty() {
            return Err(CallError::new(
                ErrorCode::Usage,
                format!("submit {tool}: give the words for its cli_main"),
            )
            .hint(format!("`animaworks-tool {tool} --help`")));
        }
        // The gate sees the argv the module runs (AnimaWorks' runner appends -j); the task keeps AnimaWorks'
        // shape of it.
        let argv = super::cli_argv(&Value::from(words.to_vec())).unwrap_or_else(|| words.to_vec());
        let call = opened.prepare_cli(&argv, &CallOptions::default())?;
        let anima = runner.dirs.anima.clone().unwrap_or_default();
        let raw = super::cli_tool_args(words, &anima);
        let masked = call.mask(&raw);
        let arg_secrets = super::secret_args::template(call.secrets(), &raw);
        let sub = super::subcommand_of(words).to_owned();
        (Kind::Cli, sub, raw, masked, None, None, arg_secrets, false)
    };
    let private_args = (masked != raw_args).then_some(raw_args);
    let mut task = Task {
        timeout_s: timeout,
        max_output,
        queue: super::QueueInfo {
            arg_secrets,
            ..Default::default()
        },
        ..Task::pending(task_id, anima_name, tool_name, action, kind, masked, "submit")
    };
    super::tool_version::stamp(&mut task, &tool_file, idempotent, false);
    let key = super::mac::key(&runner.dirs.data).map_err(|e| {
        CallError::new(ErrorCode::Internal, format!("cannot sign the task: {e}")).hint(
            "the runner keeps its task key in <data dir>/state/animaworks-tool/tasks.key (docs/background-tasks.md)",
        )
    })?;
    super::mac::sign(&key, &mut task, private_args.as_ref());
    Ok(Checked {
        task,
        private_args,
        warnings,
        said: animaworks_warning.into_iter().collect(),
        tool_file,
    })
}

/// Check, store, and start a worker: the whole of `submit`, for every path (CLI, use-tool, MCP). Returns the
/// stored task (its `receipt()` is what a caller prints) and the warnings to show.
pub async fn submit(runner: &Runner, tool: &str, words: &[String], strict: bool) -> Result<Checked, CallError> {
    submit_with(runner, tool, words, strict, |_| {}).await
}

/// [`submit`], with `mark` changing the checked task before it is stored (MCP sets its `source` and `ttl_ms`).
pub async fn submit_with(
    runner: &Runner,
    tool: &str,
    words: &[String],
    strict: bool,
    mark: impl FnOnce(&mut Task),
) -> Result<Checked, CallError> {
    let store = crate::backend::open(runner)?;
    let mut checked = check(runner, tool, words, strict, None).await?;
    mark(&mut checked.task);
    digest_for(store.as_ref(), &mut checked);
    // The file store also marks tasks of dead workers lost here, as every task command does (on a shared queue
    // the workers' rescuers do).
    let started = store
        .create_and_start(&checked.task, checked.private_args.as_ref(), &runner.dirs)
        .map_err(|e| store_error(store.as_ref(), &checked, e))?;
    if let Err(e) = started {
        checked.warnings.push(format!(
            "cannot start a worker ({e}); the task stays pending until the next `animaworks-tool jobs` command starts one"
        ));
    }
    Ok(checked)
}

/// Why a shared queue needs the tool file's digest and the file store does not: a worker on another machine
/// runs a task only with the same file; the file store's worker finds the same file the submit did. Reading a
/// large native tool whole costs a submit milliseconds, so only a shared queue pays it.
fn digest_for(store: &dyn TaskStore, c: &mut Checked) {
    if !store.is_local() && c.task.queue.tool_sha256.is_none() {
        c.task.queue.tool_sha256 = super::tool_version::file_sha256(&c.tool_file).ok();
    }
}

/// A task as stored, after marking lost the tasks whose worker is gone.
pub fn show(runner: &Runner, id: &str) -> Result<Task, CallError> {
    let store = crate::backend::open(runner)?;
    let _ = store.kick(&runner.dirs);
    match store.get(id) {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Err(
            CallError::new(ErrorCode::Usage, format!("no task {id:?} in {}", store.location()))
                .hint("the task id is the one submit printed (12 hex digits)"),
        ),
        Err(e) => Err(CallError::new(
            ErrorCode::Internal,
            format!("cannot read task {id}: {e}"),
        )),
    }
}

/// Store a checked task.
pub fn enqueue(store: &dyn TaskStore, c: &mut Checked) -> Result<(), CallError> {
    digest_for(store, c);
    store
        .create(&c.task, c.private_args.as_ref())
        .map_err(|e| store_error(store, c, e))
}

fn store_error(store: &dyn TaskStore, c: &Checked, e: std::io::Error) -> CallError {
    if let Some(pg) = super::pg::StoreError::of(&e) {
        return pg.to_call_error();
    }
    CallError::new(
        ErrorCode::Internal,
        format!("cannot write task {} in {}: {e}", c.task.task_id, store.location()),
    )
    .hint("check that the anima dir's state/background_tasks folder is writable")
}
