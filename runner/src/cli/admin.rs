//! `permissions show|migrate` and `share`: policy commands for operators.

use awt_core::call::Runner;
use awt_core::discover;
use awt_core::error::{CallError, ErrorCode};
use awt_core::names::tool_name_problem;
use awt_core::policy::permissions::{self, PermissionsFile};
use awt_core::policy::Tier;
use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct PermissionsArgs {
    #[command(subcommand)]
    pub cmd: PermissionsCmd,
}

#[derive(Subcommand, Debug)]
pub enum PermissionsCmd {
    /// Print the effective policy of the anima and where it comes from.
    Show,
    /// Write permissions.json from permissions.md (or the defaults), explicitly.
    Migrate {
        /// Overwrite an existing permissions.json.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Args, Debug)]
pub struct ShareArgs {
    /// The personal tool to copy into the common tier.
    pub tool: String,
}

fn anima_dir(runner: &Runner) -> Result<&std::path::Path, CallError> {
    runner.dirs.anima.as_deref().ok_or_else(|| {
        CallError::new(ErrorCode::Usage, "no anima: permissions belong to an anima's directory").hint(format!(
            "pass --anima-dir DIR or set {}",
            awt_core::env_vars::ANIMA_DIR.name
        ))
    })
}

fn fail(e: CallError) -> i32 {
    super::render::print_error(&e, false);
    e.code.exit_code()
}

pub fn permissions(runner: &Runner, args: PermissionsArgs) -> i32 {
    let dir = match anima_dir(runner) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    match args.cmd {
        PermissionsCmd::Show => match permissions::load(dir) {
            Ok(loaded) => {
                say_raw!("{}", permissions::render(&loaded));
                for w in permissions::unknown_keys(&loaded) {
                    tell!("warning: {w}");
                }
                0
            }
            Err(e) => fail(
                CallError::new(ErrorCode::PermissionDenied, format!("every call is refused: {e}"))
                    .hint(format!("fix or remove {}", e.path.display())),
            ),
        },
        PermissionsCmd::Migrate { force } => {
            let loaded = match permissions::load(dir) {
                Ok(l) => l,
                Err(e) => {
                    return fail(CallError::new(ErrorCode::PermissionDenied, e.to_string()).hint("fix the file first"))
                }
            };
            if let PermissionsFile::Json(p) = &loaded.source {
                if !force {
                    say!("nothing to migrate: {} is already the policy", p.display());
                    return 0;
                }
            }
            match permissions::write_json(dir, &loaded.permissions, force) {
                Ok(p) => {
                    say!("wrote {} (from {})", p.display(), loaded.source.path().display());
                    0
                }
                Err(e) => fail(CallError::new(ErrorCode::Usage, e.to_string()).hint("pass --force to overwrite")),
            }
        }
    }
}

/// Copy a personal tool into the common tier, when the anima's `tool_creation.shared` allows it.
pub fn share(runner: &Runner, args: ShareArgs) -> i32 {
    let dir = match anima_dir(runner) {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let name = args.tool.as_str();
    if let Some(p) = tool_name_problem(name) {
        return fail(CallError::new(ErrorCode::Usage, p).hint("share a tool by its name, e.g. `share my_tool`"));
    }
    let loaded = match permissions::load(dir) {
        Ok(l) => l,
        Err(e) => {
            return fail(CallError::new(
                ErrorCode::PermissionDenied,
                format!("every call is refused: {e}"),
            ))
        }
    };
    if !loaded.permissions.tool_creation.shared {
        return fail(
            CallError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "anima may not share tools: tool_creation.shared is false in {}",
                    loaded.path().display()
                ),
            )
            .hint(format!(
                "set \"tool_creation\": {{\"shared\": true}} in {}",
                loaded.path().display()
            )),
        );
    }
    let scan = discover::scan(&runner.dirs);
    let Some(file) = scan.tools.get(name).filter(|f| f.tier == Tier::Personal) else {
        let why = match scan.tools.get(name) {
            Some(f) if f.tier == Tier::Core => format!("{name:?} is a core tool; core names cannot be shared"),
            Some(f) => format!("{name:?} is a {} tool, not one of this anima's personal tools", f.tier),
            None => format!(
                "no personal tool named {name:?} in {}",
                runner.dirs.personal_dir().unwrap_or_default().display()
            ),
        };
        return fail(
            CallError::new(ErrorCode::UnknownTool, why).hint("`animaworks-tool tools` shows each tool's tier"),
        );
    };
    if runner.dirs.core.iter().any(|c| {
        std::fs::read_dir(c).into_iter().flatten().flatten().any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n == name || n.rsplit_once('.').is_some_and(|(s, _)| s == name)
        })
    }) {
        return fail(
            CallError::new(ErrorCode::Usage, format!("{name:?} is taken by a core tool")).hint("rename the tool"),
        );
    }
    let common = runner.dirs.common_dir();
    let file_name = file.path.file_name().expect("a tool is a file");
    let target = common.join(file_name);
    let taken = std::fs::read_dir(&common).into_iter().flatten().flatten().find(|e| {
        let n = e.file_name().to_string_lossy().into_owned();
        n == name || n.rsplit_once('.').is_some_and(|(s, _)| s == name)
    });
    if let Some(e) = taken {
        return fail(
            CallError::new(
                ErrorCode::Usage,
                format!("the common tier already has {}", e.path().display()),
            )
            .hint("remove or rename it first; share never overwrites"),
        );
    }
    let copy = || -> std::io::Result<()> {
        std::fs::create_dir_all(&common)?;
        let tmp = tempfile::NamedTempFile::new_in(&common)?;
        std::fs::copy(&file.path, tmp.path())?;
        tmp.persist_noclobber(&target).map_err(|e| e.error)?;
        Ok(())
    };
    match copy() {
        Ok(()) => {
            say!("shared {name}: {} -> {}", file.path.display(), target.display());
            0
        }
        Err(e) => fail(CallError::new(
            ErrorCode::Internal,
            format!("cannot copy to {}: {e}", target.display()),
        )),
    }
}
