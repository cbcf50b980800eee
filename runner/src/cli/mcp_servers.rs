//! `mcp-servers install [NAME…]`: the packages of the MCP servers declared with `npx` or `uvx`, installed once
//! into `<data dir>/mcp_servers/<name>/`, where a confined call runs them (awt_core::mcp_servers::install).

use awt_core::call::Runner;
use awt_core::error::ErrorCode;
use awt_core::mcp_servers::install::{self, Outcome};
use awt_core::tier::Tier;
use clap::{Args, Subcommand};
use serde_json::json;

const AFTER: &str = "\
A server declared as `npx -y <package>` or `uvx <package>` (as Claude Desktop blocks are) downloads its package
at every start and runs it from a cache it writes: a confined call has neither. `install` resolves each such
server's package once, with the network of this command, into <data dir>/mcp_servers/<name>/ (an npm prefix or a
Python virtualenv), makes its files read-only and pins what it installed in lock.json there. Calls then run the
installed program, which the server may read and run but no call may write. Installing runs npm or pip as you,
unconfined, as `npx` itself would (their install scripts included); a server an anima declared is installed only
by name from the registry, running none of its code. See docs/mcp-servers-install.md.";

#[derive(Args, Debug)]
#[command(after_help = AFTER)]
pub struct McpServersArgs {
    #[command(subcommand)]
    cmd: McpCmd,
}

#[derive(Subcommand, Debug)]
enum McpCmd {
    /// Install the packages of the declared npx/uvx servers (all, or those named); kept when the lock matches.
    #[command(after_help = AFTER)]
    Install {
        /// Servers to install, by their name in "mcp_servers" (default: every npx/uvx server declared).
        names: Vec<String>,
        /// Resolve and install again even when the lock matches (takes the registry's newest for unpinned
        /// packages).
        #[arg(long)]
        update: bool,
        /// Machine-readable output: one JSON object per server.
        #[arg(long)]
        json: bool,
    },
}

pub fn mcp_servers(runner: &Runner, a: McpServersArgs) -> i32 {
    let McpCmd::Install { names, update, json } = a.cmd;
    let dirs = &runner.dirs;
    let mut servers = Vec::new();
    for tier in [Tier::Core, Tier::Common, Tier::Personal] {
        let (found, _) = awt_core::mcp_servers::declared(&dirs.data, dirs.anima.as_deref(), tier);
        servers.extend(found);
    }
    let starters: Vec<_> = servers.iter().filter(|d| install::starter(&d.spec).is_some()).collect();
    for n in &names {
        match servers.iter().find(|d| &d.name == n) {
            None => {
                let known: Vec<&str> = starters.iter().map(|d| d.name.as_str()).collect();
                tell!(
                    "animaworks-tool mcp-servers install: no MCP server named {n:?} is declared (npx/uvx servers: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                );
                return ErrorCode::Usage.exit_code();
            }
            Some(d) if install::starter(&d.spec).is_none() => {
                tell!(
                    "animaworks-tool mcp-servers install: {n} is started by `{}`, not by npx or uvx: it runs as declared, there is nothing to install",
                    d.spec.command
                );
                return ErrorCode::Usage.exit_code();
            }
            Some(_) => {}
        }
    }
    // An anima writes its own status.json: what it declares is installed only when named (its shell can name it
    // too), and then only from the registry, running none of the packages' code (install::Trust::Anima).
    let (chosen, personal): (Vec<_>, Vec<_>) = starters
        .into_iter()
        .filter(|d| names.is_empty() || names.contains(&d.name))
        .partition(|d| !names.is_empty() || d.tier != Tier::Personal);
    for d in personal {
        tell!(
            "{}: skipped: a personal server, declared by the anima in {} (install it by its name: `{}`)",
            d.name,
            d.file.display(),
            install::install_command(&d.name)
        );
    }
    if chosen.is_empty() {
        if !json {
            say!("no MCP server declared with npx or uvx: nothing to install");
        }
        return 0;
    }
    let mut failed = false;
    let mut done: Vec<String> = Vec::new();
    for d in chosen {
        // The same name in two tiers (a personal server over a common one) is one folder: installed once.
        if done.contains(&d.name) {
            continue;
        }
        done.push(d.name.clone());
        let trust = match d.tier {
            Tier::Personal => install::Trust::Anima,
            _ => install::Trust::Person,
        };
        let r = install::install(&dirs.data, &d.name, &d.spec, update, &dirs.python, trust);
        let dir = install::root(&dirs.data).join(&d.name);
        match r {
            Ok(o) => {
                let (lock, how) = match o {
                    Outcome::Installed(l) => (l, "installed"),
                    Outcome::Kept(l) => (l, "kept"),
                };
                if json {
                    say!(
                        "{}",
                        json!({"server": d.name, "status": how, "package": lock.package, "version": lock.version,
                               "dir": dir.join(&lock.dir), "lock": dir.join(install::LOCK)})
                    );
                } else {
                    say!(
                        "{}: {} {} {how} in {}{}",
                        d.name,
                        lock.package,
                        lock.version,
                        dir.join(&lock.dir).display(),
                        if how == "kept" {
                            " (the lock matches; --update installs anew)"
                        } else {
                            ""
                        }
                    );
                }
            }
            Err(e) => {
                failed = true;
                if json {
                    say!("{}", json!({"server": d.name, "status": "failed", "error": e.to_string()}));
                } else {
                    tell!("{}: not installed: {e}", d.name);
                }
            }
        }
    }
    if failed {
        ErrorCode::SpawnFailed.exit_code()
    } else {
        0
    }
}
