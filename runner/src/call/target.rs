//! Discover and describe: from a name to a [`Tool`] (its file and manifest), and from an action name to a
//! [`Target`] that can be prepared.

use super::audit::Attempt;
use super::{Resolved, Runner};
use crate::cache::Probed;
use crate::discover;
use crate::error::{CallError, Detail, ErrorCode};
use crate::flags::RunnerFlags;
use crate::manifest::Action;
use crate::policy::Masker;
use crate::probe;
use serde_json::{Map, Value};

/// A tool found and described, on its way to a call.
#[derive(Debug, Clone)]
pub struct Tool<'r> {
    pub(crate) runner: &'r Runner,
    pub(crate) resolved: Resolved,
}

/// One action of a tool: what [`Target::prepare`] turns into a call.
#[derive(Debug, Clone)]
pub struct Target<'r> {
    pub(crate) tool: Tool<'r>,
    pub(crate) action: Action,
}

impl Runner {
    /// Find `tool` in the tiers and read its manifest (from the cache when it is unchanged). For describing a
    /// tool; a call starts with [`Runner::open`].
    pub async fn resolve(&self, tool: &str) -> Result<Resolved, CallError> {
        let found = discover::scan_for(&self.dirs, tool);
        let Some(file) = found.tools.get(tool).cloned() else {
            return Err(self.unknown_tool(tool));
        };
        // Why the cache first: the probe's environment costs file reads that a cached tool does not need.
        let probed = match probe::cached(&file, &self.dirs) {
            Some(p) => p,
            None => probe::manifest(&file, &self.dirs, &self.probe_env()?).await.0,
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
    pub async fn open(&self, tool: &str) -> Result<Tool<'_>, CallError> {
        match self.resolve(tool).await {
            Ok(resolved) => Ok(Tool { runner: self, resolved }),
            Err(e) => {
                let tier = discover::scan_for(&self.dirs, tool).tools.get(tool).map(|f| f.tier);
                Err(Attempt::new(tool, tier, None, Value::Null).failed(self, e, &Masker::default()))
            }
        }
    }

    /// Record an attempt whose name matches no tool at all (an MCP tool name that is not `<tool>_<action>` of
    /// any tool), and hand its error back.
    pub(crate) fn refuse_unknown(&self, name: &str, e: CallError) -> CallError {
        Attempt::new(name, None, None, Value::Null).failed(self, e, &Masker::default())
    }

    /// A tool described elsewhere (`check` probes a file outside the tiers). Not public: a forged manifest would
    /// choose its own gates.
    pub(crate) fn open_resolved(&self, resolved: Resolved) -> Tool<'_> {
        Tool { runner: self, resolved }
    }
}

impl<'r> Tool<'r> {
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
    pub(crate) fn refuse(&self, action: Option<&str>, args: Value, e: CallError) -> CallError {
        let act = action.and_then(|a| self.resolved.manifest.action(a));
        let masker = super::prepare::lenient_masker(self.runner, &self.resolved, act);
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

    fn unknown_action(&self, action: &str) -> CallError {
        let r = &self.resolved;
        let names: Vec<&str> = r.manifest.actions.iter().map(|a| a.name.as_str()).collect();
        crate::suggest::unknown_action(&r.file.name, action, &names)
    }
}

impl<'r> Target<'r> {
    pub fn action(&self) -> &Action {
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
            let masker = super::prepare::lenient_masker(self.tool.runner, &self.tool.resolved, Some(&self.action));
            self.tool
                .attempt(Some(&self.action.name), shown)
                .failed(self.tool.runner, e, &masker)
        })
    }
}
