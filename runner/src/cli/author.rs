//! `new` and `check`: commands for tool authors.

use crate::check::{self, CheckOptions, Verdict};
use crate::scaffold::{self, Lang};
use awt_core::call::Runner;
use awt_core::error::ErrorCode;
use awt_core::policy::Tier;
use clap::Args;
use std::path::PathBuf;

/// `new <name> --lang python|rust|bash|node [--dir DIR]`
#[derive(Args, Debug)]
pub struct NewArgs {
    /// The tool's name (its file name without the extension).
    pub name: String,
    /// The language of the tool.
    #[arg(long, value_enum)]
    pub lang: Lang,
    /// Write here instead of the personal tier (`<anima dir>/tools`).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// `check <path> [--json] [--timeout S]`
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The tool file to check.
    pub path: PathBuf,
    /// Machine-readable report.
    #[arg(long)]
    pub json: bool,
    /// Deadline of each sample call in seconds (default: the action's timeout_s, at most 30).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Also call actions marked gated or destructive (by default they are checked but not called).
    #[arg(long)]
    pub call_all: bool,
}

fn refuse(code: ErrorCode, message: String, hint: &str) -> i32 {
    tell!("animaworks-tool: {message}");
    if !hint.is_empty() {
        tell!("  hint: {hint}");
    }
    code.exit_code()
}

pub async fn new(runner: &Runner, a: NewArgs) -> i32 {
    if let Some(p) = awt_core::names::tool_name_problem(&a.name) {
        return refuse(
            ErrorCode::Usage,
            p,
            "pick a name of letters, digits, '_' and '-' that is not a runner command",
        );
    }
    let (dir, in_tier) = match a.dir {
        Some(d) => (d, false),
        None => {
            let Some(dir) = runner.dirs.personal_dir() else {
                return refuse(
                    ErrorCode::Usage,
                    "no anima dir, so no personal tier to write into".into(),
                    &format!(
                        "pass --anima-dir DIR (or set {}), or write elsewhere with --dir DIR",
                        awt_core::env_vars::ANIMA_DIR.name
                    ),
                );
            };
            match runner.permissions() {
                Ok(p) if p.permissions.tool_creation.personal => {}
                Ok(p) => {
                    return refuse(
                        ErrorCode::PermissionDenied,
                        format!(
                            "this anima may not create personal tools (tool_creation.personal is off in {})",
                            p.path().display()
                        ),
                        "turn tool_creation.personal on in that file, or write elsewhere with --dir DIR",
                    )
                }
                Err(e) => {
                    return refuse(
                        ErrorCode::PermissionDenied,
                        e.to_string(),
                        "fix that file; until then no tool is created",
                    )
                }
            }
            let scan = awt_core::discover::scan(&runner.dirs);
            if let Some(core) = scan.tools.get(&a.name).filter(|t| t.tier == Tier::Core) {
                return refuse(
                    ErrorCode::Usage,
                    format!(
                        "core tool {:?} ({}) already has that name; a personal tool of that name would be skipped",
                        a.name,
                        core.path.display()
                    ),
                    "pick another name",
                );
            }
            (dir, true)
        }
    };
    match scaffold::write(&a.name, a.lang, &dir, in_tier) {
        Ok(w) => {
            for f in &w.files {
                say!("wrote {}", f.display());
            }
            say!("next:");
            for n in &w.next {
                say!("  {n}");
            }
            0
        }
        Err(e) => refuse(ErrorCode::Usage, e.to_string(), ""),
    }
}

pub async fn check(runner: &Runner, a: CheckArgs) -> i32 {
    let timeout = match a
        .timeout
        .map(|t| awt_core::call::timeout_from_secs(t, "--timeout"))
        .transpose()
    {
        Ok(t) => t,
        Err(e) => return refuse(ErrorCode::Usage, e.message, ""),
    };
    let opts = CheckOptions {
        python: Some(runner.dirs.python.clone()),
        timeout,
        call_all: a.call_all,
    };
    let report = check::check(&a.path, &opts).await;
    if a.json {
        say!("{}", serde_json::to_string(&report).unwrap_or_default());
    } else {
        for f in &report.findings {
            let tag = match f.level {
                Verdict::Pass => "ok  ",
                Verdict::Warn => "warn",
                Verdict::Fail => "FAIL",
            };
            match &f.hint {
                Some(h) if f.level != Verdict::Pass => say!("{tag} {}: {} (hint: {h})", f.subject, f.message),
                _ => say!("{tag} {}: {}", f.subject, f.message),
            }
        }
        let fails = report.findings.iter().filter(|f| f.level == Verdict::Fail).count();
        if report.passed {
            say!("{}: passes the conformance check", report.path.display());
        } else {
            say!(
                "{}: {fails} problem{} found",
                report.path.display(),
                if fails == 1 { "" } else { "s" }
            );
        }
    }
    if report.passed {
        0
    } else {
        1
    }
}
