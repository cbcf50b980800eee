//! Discover and describe: from a name to an [`OpenTool`] (its file and manifest), and from an action name to a
//! [`Target`] that can be prepared.

use super::audit::Attempt;
use super::{Resolved, Runner};
use crate::cache::Probed;
use crate::discover;
use crate::error::{CallError, Detail, ErrorCode};
use crate::flags::RunnerFlags;
use crate::manifest::ActionSpec;
use crate::policy::Masker;
use crate::probe;
use serde_json::{Map, Value};

/// A tool found and described, on its way to a call.
#[derive(Debug, Clone)]
pub struct OpenTool<'r> {
    pub(crate) runner: &'r Runner,
    pub(crate) resolved: Resolved,
}

/// One action of a tool: what [`Target::prepare`] turns into a call.
#[derive(Debug, Clone)]
pub struct Target<'r> {
    pub(crate) tool: OpenTool<'r>,
    pub(crate) action: ActionSpec,
}

impl Runner {
    /// Find `tool` in the tiers and read its manifest (from the cache when it is unchanged). For describing a
    /// tool; a call starts with [`Runner::open`].
    pub async fn resolve(&self, tool: &str) -> Result<Resolved, CallError> {
        let file = self.find(tool)?;
        self.describe(tool, file, false).await
    }

    fn find(&self, tool: &str) -> Result<discover::ToolFile, CallError> {
        let found = discover::scan_for(&self.dirs, tool);
        found.tools.get(tool).cloned().ok_or_else(|| self.unknown_tool(tool))
    }

    /// `for_call`: refuse before a probe is started while the permissions file is unusable (the gate refuses every
    /// call then, and a probe that cannot start, e.g. with the file a dangling link, would hide the refusal; the
    /// original refuses before importing the module). A cached description starts nothing, so the gate says it.
    async fn describe(&self, tool: &str, file: discover::ToolFile, for_call: bool) -> Result<Resolved, CallError> {
        // Why the cache first: the probe's environment costs file reads that a cached tool does not need.
        let probed = match probe::cached(&file, &self.dirs) {
            Some(p) => p,
            None => {
                if for_call {
                    let perms = self.permissions();
                    super::prepare::refusal_to_error(crate::policy::gate::decide_usable(&perms), tool, None)?;
                }
                probe::manifest_after_miss(&file, &self.dirs, &self.probe_env()?).await.0
            }
        };
        match probed {
            Probed::Ok(manifest) => Ok(Resolved { file, manifest }),
            Probed::Failed {
                reason,
                stderr_tail,
                spawn,
                ..
            } => {
                let mut e = CallError::new(
                    if spawn {
                        ErrorCode::SpawnFailed
                    } else {
                        ErrorCode::UnknownAction
                    },
                    format!("{tool} ({}) cannot be called: {reason}", file.path.display()),
                )
                .hint("fix the tool; after installing a missing dependency run `animaworks-tool refresh`")
                .with(Detail::Tool, tool);
                if !stderr_tail.is_empty() {
                    e = e.with(Detail::StderrTail, stderr_tail);
                }
                Err(e)
            }
        }
    }

    fn unknown_tool(&self, tool: &str) -> CallError {
        // Not there: the full scan, for the reason and the names that come close.
        let scan = discover::scan(&self.dirs);
        let why = scan
            .problems
            .iter()
            .find(|p| p.tool == tool)
            .map(|p| format!(": {}", p.message))
            .unwrap_or_default();
        let names: Vec<&str> = scan.tools.keys().map(String::as_str).collect();
        crate::suggest::unknown_tool(tool, &why, &names, &self.dirs)
    }

    /// The first step of a call: find and describe `tool`. A tool that cannot be found or described is audited
    /// as an attempt.
    pub async fn open(&self, tool: &str) -> Result<OpenTool<'_>, CallError> {
        match self.open_unaudited(tool).await {
            Ok(t) => Ok(t),
            Err(e) => Err(self.refuse_open(tool, e)),
        }
    }

    /// [`Runner::open`], leaving a failure to the caller: it either audits it ([`Runner::refuse_open`]) or hands
    /// the words to someone else (the CLI's AnimaWorks commands, when no tool has the name).
    pub async fn open_unaudited(&self, tool: &str) -> Result<OpenTool<'_>, CallError> {
        let file = self.find(tool)?;
        Ok(self.open_resolved(self.describe(tool, file, true).await?))
    }

    /// Is `tool` an AnimaWorks module (a `.py` file that does not use tool-sdk-py)? Known without its `--schemas`.
    pub fn is_animaworks_module(&self, tool: &str) -> bool {
        discover::scan_for(&self.dirs, tool)
            .tools
            .get(tool)
            .is_some_and(|f| f.launch == discover::Launch::Python && !crate::policy::env::imports_sdk(&f.path))
    }

    /// Record an attempt at `tool` that could not be opened, and hand its error back.
    pub fn refuse_open(&self, tool: &str, e: CallError) -> CallError {
        let tier = discover::scan_for(&self.dirs, tool).tools.get(tool).map(|f| f.tier);
        Attempt::new(tool, tier, None, Value::Null).failed(self, e, &Masker::default())
    }

    /// Open the tool file at `path`, outside the tiers, as a personal tool named `name` (`check`): its manifest
    /// is what the file answers to `--schemas` now, never one the caller gives. A file that does not answer is
    /// the probe's failure, handed back as it is.
    pub async fn open_file(&self, name: &str, path: &std::path::Path) -> Result<OpenTool<'_>, Probed> {
        let file = discover::ToolFile {
            name: name.to_owned(),
            tier: crate::tier::Tier::Personal,
            path: path.to_path_buf(),
            launch: discover::Launch::for_path(path),
            mcp: None,
            stat: None,
        };
        let env = self.probe_env().map_err(|e| Probed::Failed {
            reason: match e.hint {
                Some(h) => format!("{} ({h})", e.message),
                None => e.message,
            },
            stderr_tail: String::new(),
            spawn: true,
            timed_out: false,
        })?;
        match probe::probe(&file, &self.dirs, &env).await {
            Probed::Ok(manifest) => Ok(self.open_resolved(Resolved { file, manifest })),
            failed => Err(failed),
        }
    }

    /// Record an attempt whose name matches no tool at all (an MCP tool name that is not `<tool>_<action>` of
    /// any tool), and hand its error back.
    pub fn refuse_unknown(&self, name: &str, e: CallError) -> CallError {
        Attempt::new(name, None, None, Value::Null).failed(self, e, &Masker::default())
    }

    /// A tool found and described by one of the doors above. Not public: a forged manifest would choose its own
    /// gates.
    fn open_resolved(&self, resolved: Resolved) -> OpenTool<'_> {
        OpenTool { runner: self, resolved }
    }
}

impl<'r> OpenTool<'r> {
    pub fn resolved(&self) -> &Resolved {
        &self.resolved
    }

    pub fn name(&self) -> &str {
        &self.resolved.file.name
    }

    pub fn runner(&self) -> &'r Runner {
        self.runner
    }

    pub(crate) fn attempt(&self, action: Option<&str>, args: Value) -> Attempt {
        Attempt::new(self.name(), Some(self.resolved.file.tier), action, args)
    }

    /// Record an attempt that its front door refused before it could be prepared (a task file whose arguments
    /// or timeout cannot be used), and hand its error back.
    pub fn refuse(&self, action: Option<&str>, args: Value, e: CallError) -> CallError {
        let act = action.and_then(|a| self.resolved.manifest.action(a));
        let masker = super::masking::lenient_masker(self.runner, &self.resolved, act);
        self.attempt(action, args).failed(self.runner, e, &masker)
    }

    /// Pick `action` (either spelling). An unknown action is audited as an attempt.
    pub fn action(self, action: &str) -> Result<Target<'r>, CallError> {
        match self.resolved.manifest.action(action) {
            Some(a) => {
                let action = a.clone();
                Ok(Target { tool: self, action })
            }
            None => {
                let e = self.unknown_action(action);
                Err(self
                    .attempt(Some(action), Value::Null)
                    .failed(self.runner, e, &Masker::default()))
            }
        }
    }

    /// Pick `action` as [`OpenTool::action`] does; an action that an AnimaWorks module (a `.py` file on the legacy
    /// convention) does not list is still its action, as in AnimaWorks' `use_tool`, which hands any name to the
    /// module's `dispatch` (11 of its 16 core modules list none). Such an action takes any arguments (nothing
    /// declares them) and its gate and deadline come from the module's `EXECUTION_PROFILE` entry of that name.
    pub fn action_or_dispatch(self, action: &str) -> Result<Target<'r>, CallError> {
        let m = &self.resolved.manifest;
        let unlisted = m.action(action).is_none()
            && m.legacy
            && self.resolved.file.launch == discover::Launch::Python
            && crate::names::is_name(action);
        if !unlisted {
            return self.action(action);
        }
        let profile = m
            .legacy_profile
            .as_ref()
            .map(|p| legacy_profile_entry(p, action))
            .unwrap_or_default();
        let action = ActionSpec {
            name: action.to_owned(),
            schema_name: format!("{}_{action}", self.resolved.file.name),
            title: None,
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            annotations: None,
            profile,
        };
        Ok(Target { tool: self, action })
    }

    fn unknown_action(&self, action: &str) -> CallError {
        let r = &self.resolved;
        let names: Vec<&str> = r.manifest.actions.iter().map(|a| a.name.as_str()).collect();
        crate::suggest::unknown_action(&r.file.name, action, &names)
    }
}

impl<'r> Target<'r> {
    pub fn action(&self) -> &ActionSpec {
        &self.action
    }

    pub fn resolved(&self) -> &Resolved {
        &self.tool.resolved
    }

    /// The arguments and runner flags of the generated CLI (`--param value…`, `--json`, `--timeout`, …). A
    /// word that does not parse, or a `--timeout` out of range, is audited as an attempt.
    pub fn parse_flags(&self, words: &[String]) -> Result<(Map<String, Value>, RunnerFlags), CallError> {
        let parsed = crate::flags::parse(&self.action, words).and_then(|(args, flags)| {
            match flags
                .timeout
                .map(|s| super::timeout_from_secs(s, "--timeout"))
                .transpose()
            {
                Ok(_) => Ok((args, flags)),
                Err(e) => Err(e),
            }
        });
        parsed.map_err(|e| {
            let shown = Value::from(words.to_vec());
            let masker = super::masking::lenient_masker(self.tool.runner, &self.tool.resolved, Some(&self.action));
            self.tool
                .attempt(Some(&self.action.name), shown)
                .failed(self.tool.runner, e, &masker)
        })
    }
}

/// An `EXECUTION_PROFILE` entry as the shim reads it for a listed action (`_profile_for`): the key as written,
/// then with `_` as `-`, then `-` as `_`; a gated entry found under another spelling is granted by that key.
fn legacy_profile_entry(profile: &Map<String, Value>, action: &str) -> awt_protocol::Profile {
    let mut out = awt_protocol::Profile::default();
    let spellings = [action.to_owned(), action.replace('_', "-"), action.replace('-', "_")];
    let Some((key, entry)) = spellings
        .iter()
        .find_map(|k| profile.get(k).and_then(Value::as_object).map(|e| (k, e)))
    else {
        return out;
    };
    out.expected_seconds = entry
        .get("expected_seconds")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0);
    out.background_eligible = entry.get("background_eligible").is_some_and(crate::policy::truthy);
    // Any truthy spelling gates: a gate fails closed.
    out.gated = entry.get("gated").is_some_and(crate::policy::truthy);
    out.gated_as = match entry.get("gated_as").and_then(Value::as_str) {
        Some(g) if !g.is_empty() => Some(g.to_owned()),
        _ if out.gated && key != action => Some(key.clone()),
        _ => None,
    };
    out
}

