//! Everything a submit checks before anything is written: the tool exists, the arguments validate, permissions
//! and gates allow the call, required credentials resolve. Then one `pending` task is stored.

use super::files::FileStore;
use super::{now_s, Kind, Status, Task, TaskStore};
use crate::call::Runner;
use crate::cli::args;
use crate::error::{CallError, ErrorCode};
use crate::policy::Masker;
use serde_json::Value;

/// A checked task, not stored yet.
#[derive(Debug)]
pub struct Checked {
    pub task: Task,
    /// The unmasked arguments, when masking changed them.
    pub private_args: Option<Value>,
    /// Said on stderr, e.g. an action not marked background-eligible.
    pub warnings: Vec<String>,
}

/// The store of the runner's anima; a runner without an anima dir cannot keep tasks.
pub fn store_of(runner: &Runner) -> Result<FileStore, CallError> {
    match &runner.dirs.anima {
        Some(a) => Ok(FileStore::for_anima(a)),
        None => Err(CallError::new(
            ErrorCode::Usage,
            "background tasks need an anima: they are kept under <anima dir>/state/background_tasks",
        )
        .hint("pass --anima-dir DIR or set ANIMAWORKS_ANIMA_DIR")),
    }
}

/// Check `submit <tool> <words…>`: `<action> [flags]`, or the argv of a legacy `cli_main` module.
pub async fn check(
    runner: &Runner,
    tool: &str,
    words: &[String],
    strict: bool,
    id: Option<String>,
) -> Result<Checked, CallError> {
    store_of(runner)?;
    let resolved = runner.resolve(tool).await?;
    let mut warnings = Vec::new();
    let anima_name = runner.dirs.anima_name().unwrap_or_default();
    let task_id = id.unwrap_or_else(super::new_task_id);
    let first = words.first().map(String::as_str);
    // Why the parse: AnimaWorks' own submit (and its pending descriptors) pass a cli_main module's argv, whose
    // first word is usually an action's name (`add "title" --body x`); words that are not that action's flags
    // are that argv, as they are for a foreground `<tool> <argv…>`.
    let structured = match first.and_then(|a| resolved.manifest.action(a)) {
        Some(act) => !resolved.manifest.cli || args::parse(act, &words[1..]).is_ok(),
        None => !resolved.manifest.cli,
    };
    let (kind, action, raw_args, timeout, max_output, secrets, idempotent) = if structured {
        let Some(action_word) = first else {
            return Err(
                CallError::new(ErrorCode::Usage, format!("submit {tool}: name the action to run"))
                    .hint(format!("`animaworks-tool {tool} --help` lists its actions")),
            );
        };
        let act = runner.action(&resolved, action_word)?.clone();
        let (argmap, flags) = args::parse(&act, &words[1..])?;
        if flags.help || flags.events {
            return Err(
                CallError::new(ErrorCode::Usage, "submit takes neither --help nor --events").hint(format!(
                    "`animaworks-tool {tool} {} --help` shows the action's flags",
                    act.name
                )),
            );
        }
        crate::validate::check_args(tool, &act, &argmap)?;
        runner.permit(&resolved, &act)?;
        let secrets = runner.secrets(&resolved, Some(&act))?;
        if !act.profile.background_eligible {
            let msg = format!("{tool}.{} is not marked background-eligible in its profile", act.name);
            if strict {
                return Err(CallError::new(ErrorCode::PermissionDenied, msg)
                    .hint("drop --strict to submit it anyway, or call it in the foreground")
                    .with("tool", tool)
                    .with("action", act.name.clone()));
            }
            warnings.push(format!("{msg}; submitting anyway"));
        }
        (
            Kind::Action,
            act.name.clone(),
            Value::Object(argmap),
            flags.timeout,
            flags.max_output,
            secrets,
            act.profile.hints.idempotent,
        )
    } else {
        if words.is_empty() {
            return Err(CallError::new(
                ErrorCode::Usage,
                format!("submit {tool}: give the words for its cli_main"),
            )
            .hint(format!("`animaworks-tool {tool} --help`")));
        }
        let mut argv = words.to_vec();
        if !argv.iter().any(|w| w == "-j") {
            argv.push("-j".into());
        }
        runner.permit_cli(&resolved, &argv)?;
        let secrets = runner.secrets(&resolved, None)?;
        (
            Kind::Cli,
            "cli".to_owned(),
            Value::from(argv),
            None,
            None,
            secrets,
            false,
        )
    };
    let masker = Masker::new(secrets.iter().map(|s| s.value.as_str()));
    let masked = masker.mask_value(&raw_args);
    let arg_secrets = super::secret_args::template(&secrets, &raw_args);
    let private_args = (masked != raw_args).then_some(raw_args);
    let now = now_s();
    let mut task = Task {
        task_id,
        anima_name,
        tool_name: format!("{tool}:{action}"),
        tool_args: masked,
        status: Status::Pending,
        created_at: now,
        completed_at: None,
        result: None,
        error: None,
        tool: resolved.file.name.clone(),
        action,
        kind,
        timeout_s: timeout,
        max_output,
        started_at: None,
        updated_at: now,
        pid: None,
        pid_start_time: None,
        boot_id: None,
        progress: None,
        result_value: None,
        error_code: None,
        error_detail: None,
        output_path: None,
        source: Some("submit".into()),
        queue: super::QueueInfo {
            arg_secrets,
            ..Default::default()
        },
    };
    super::identity::stamp(&mut task, &resolved.file, idempotent);
    Ok(Checked {
        task,
        private_args,
        warnings,
    })
}

/// Check, store, and start a worker: the whole of `submit`, for every path (CLI, use-tool, MCP). Returns the
/// stored task (its `receipt()` is what a caller prints) and the warnings to show.
pub async fn submit(runner: &Runner, tool: &str, words: &[String], strict: bool) -> Result<Checked, CallError> {
    let store = super::open(runner)?;
    let checked = check(runner, tool, words, strict, None).await?;
    enqueue(store.as_ref(), &checked)?;
    // Marks tasks of dead workers lost, as every task command does (on a shared queue the workers' rescuers do).
    if store.is_local() {
        let _ = store.census();
    }
    if let Err(e) = store.start_worker(&runner.dirs) {
        let mut checked = checked;
        checked.warnings.push(format!(
            "cannot start a worker ({e}); the task stays pending until the next `animaworks-tool jobs` command starts one"
        ));
        return Ok(checked);
    }
    Ok(checked)
}

/// A task as stored, after marking lost the tasks whose worker is gone.
pub fn show(runner: &Runner, id: &str) -> Result<Task, CallError> {
    let store = super::open(runner)?;
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
pub fn enqueue(store: &dyn TaskStore, c: &Checked) -> Result<(), CallError> {
    store.create(&c.task, c.private_args.as_ref()).map_err(|e| {
        if let Some(pg) = super::pg::StoreError::of(&e) {
            return pg.to_call_error();
        }
        CallError::new(
            ErrorCode::Internal,
            format!("cannot write task {} in {}: {e}", c.task.task_id, store.location()),
        )
        .hint("check that the anima dir's state/background_tasks folder is writable")
    })
}
