//! AnimaWorks' layout, as far as the sandbox cares: which places of the data dir, the anima dir, the home folder
//! and the system are whose (the tools', the runner's, other animas' and companies', the person's secrets), by
//! name. Nothing here writes.

use super::*;

/// The folders of the data dir an undeclared AnimaWorks tool reads (`shared/` and `tmp/` it also writes).
pub(super) const DATA_READ: &[&str] = &[
    "common_knowledge",
    "common_skills",
    "common_tools",
    "reference",
    "company",
    "prompts",
];
pub(super) const DATA_WRITE: &[&str] = &["shared", "tmp"];

/// Places of the data dir that AnimaWorks' own framework keeps and that no AnimaWorks tool reads or writes (its
/// tool modules, `core/integrations/`, use none of them; its commands that do, `animaworks board`, `task`, `logs`,
/// run unconfined through the command forwarding): with the access a tool keeps by default, `None` for none. The
/// anima's grant of the path, or of a folder above it inside the data dir, restores the rest
/// ([`narrowed_grant`] names it).
pub(super) const NARROWED: &[(&str, Option<&str>)] = &[
    // The server's and every anima's logs.
    ("logs", None),
    // People's profiles and their conversations with animas.
    ("shared/users", None),
    // The task board every anima's tasks are on (the framework writes it through `animaworks task`), and
    // SQLite's files beside it where they exist.
    ("shared/taskboard.sqlite3", None),
    ("shared/taskboard.sqlite3-wal", None),
    ("shared/taskboard.sqlite3-shm", None),
    ("shared/taskboard.sqlite3-journal", None),
    // The boards: read by tools, posted to by the framework's `post_channel` under the anima's own name.
    ("shared/channels", Some("read")),
];

/// Whether a grant of `granted` (canonical) restores `narrowed` (canonical): the path itself, or a folder above
/// it that lies inside the data dir.
fn restores(granted: &Path, narrowed: &Path, data: &Path) -> bool {
    narrowed.starts_with(granted) && granted.starts_with(data) && granted != data
}

/// Add the [`NARROWED`] places that exist to the protected sets (hidden; the boards only read-only), but those the
/// anima's grants restore: `read` and `write` are its grants, canonical.
pub(super) fn narrow(
    data: &Path,
    read: &[PathBuf],
    write: &[PathBuf],
    protected_read: &mut Protected,
    protected_write: &mut Protected,
    mut raw: Option<&mut Vec<PathBuf>>,
) {
    let data = rules::canonical(data).unwrap_or_else(|| data.to_path_buf());
    for (rel, keeps) in NARROWED {
        let named = data.join(rel);
        if std::fs::symlink_metadata(&named).is_err() {
            continue;
        }
        let p = rules::canonical(&named).unwrap_or_else(|| named.clone());
        let by = |g: &[PathBuf]| g.iter().any(|g| restores(g, &p, &data));
        if by(write) {
            continue;
        }
        if let Some(r) = raw.as_deref_mut() {
            r.push(named);
        }
        protected_write.paths.insert(p.clone());
        if keeps.is_none() && !by(read) {
            protected_read.paths.insert(p);
        }
    }
}

/// For a path the defaults narrow: the grant that restores it, as the line to add to the permissions file.
pub(super) fn narrowed_grant(real: &Path, data: &Path, field: &str) -> Option<String> {
    let data = rules::canonical(data).unwrap_or_else(|| data.to_path_buf());
    NARROWED.iter().find_map(|(rel, keeps)| {
        let p = data.join(rel);
        let p = rules::canonical(&p).unwrap_or(p);
        let kept = keeps.is_some_and(|k| k == field);
        (real.starts_with(&p) && !kept).then(|| {
            let field = if field == "write" { "write" } else { "read" };
            format!("\"sandbox\": {{\"{field}\": [\"$DATA_DIR/{rel}\"]}}")
        })
    })
}

/// The credentials of the home folder on the deny list.
pub(super) fn home_secrets(home: Option<&Path>) -> Vec<PathBuf> {
    let Some(h) = home else { return Vec::new() };
    [
        ".ssh",
        ".gnupg",
        ".aws",
        ".netrc",
        ".docker",
        ".kube",
        ".git-credentials",
        ".config/gh",
        ".config/gcloud",
        // The agent engines' logins (Claude Code, Codex, Gemini CLI, Grok, Cursor), which AnimaWorks' engines run on.
        ".claude",
        ".claude.json",
        ".codex",
        ".gemini",
        ".grok",
        ".cursor-agent",
    ]
    .iter()
    .map(|f| h.join(f))
    .collect()
}

/// The agent engines' homes AnimaWorks makes in an anima dir (Codex, Gemini CLI, Cursor, Grok).
pub(super) const ENGINE_HOMES: &[&str] = &[
    ".codex_home",
    ".gemini-workspace",
    ".cursor-workspace",
    ".grok-workspace",
];

/// At most this many other companies are hidden from an anima of a company, each by a mount of its own (or a cut
/// in the Landlock grant): past it, the plan is refused rather than leave one visible.
pub const MAX_COMPANIES: usize = 512;

/// Why the layout of a data dir cannot be confined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error(
        "{} holds more than {MAX_COMPANIES} companies besides the anima's own; the sandbox hides each of them \
         and does not run a tool with one left visible",
        folder.display()
    )]
    TooManyCompanies { folder: PathBuf },
}

impl LayoutError {
    pub(super) fn to_call_error(&self, tool: &str) -> CallError {
        match self {
            LayoutError::TooManyCompanies { .. } => CallError::new(ErrorCode::PermissionDenied, self.to_string())
                .hint("remove the folders of companies no anima works for from that folder")
                .with(Detail::Tool, tool)
                // As for other animas that cannot be hidden (`hide_animas.rs`): a sandbox that cannot be set up.
                .with(Detail::Reason, "sandbox_unsupported"),
        }
    }
}

/// Every folder of `<data>/companies/` but the anima's own company (`status.json` `"company"`), as AnimaWorks
/// denies them to an anima assigned to a company; nothing for an unassigned anima (AnimaWorks leaves it free).
/// More than [`MAX_COMPANIES`] of them is an error: never some hidden and the rest left readable.
fn other_companies(data: &Path, anima: &Path) -> Result<Vec<PathBuf>, LayoutError> {
    let status = crate::beneath::read_if_present(anima, Path::new("status.json"), 1024 * 1024)
        .ok()
        .flatten();
    let company = status
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("company")?.as_str().map(|c| c.trim().to_owned()))
        .filter(|c| !c.is_empty());
    let folder = data.join("companies");
    let (Some(company), Ok(rd)) = (company, std::fs::read_dir(&folder)) else {
        return Ok(Vec::new());
    };
    let others: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_name() != company.as_str())
        .take(MAX_COMPANIES + 1)
        .map(|e| e.path())
        .collect();
    if others.len() > MAX_COMPANIES {
        return Err(LayoutError::TooManyCompanies { folder });
    }
    Ok(others.into_iter().map(|p| rules::canonical(&p).unwrap_or(p)).collect())
}

/// The runner's state, as canonical paths: (never read, never written).
/// `raw`, when given, gets the same paths as named, before their links are followed.
pub(super) fn protected(
    dirs: &Dirs,
    home: Option<&Path>,
    mut raw: Option<&mut Vec<PathBuf>>,
) -> Result<(Protected, Protected), LayoutError> {
    let data = rules::canonical(&dirs.data).unwrap_or_else(|| dirs.data.clone());
    let anima = dirs
        .anima
        .as_deref()
        .map(|a| rules::canonical(a).unwrap_or_else(|| a.to_path_buf()));
    let mut secret: Vec<PathBuf> = [
        "config.json",
        "vault.json",
        "vault.key",
        "shared/credentials.json",
        "outputs",
        "state",
    ]
    .iter()
    .map(|f| data.join(f))
    .collect();
    // AnimaWorks' runtime folder (the operator's internal-API token; the animas' IPC sockets, which a pathname
    // `connect` reaches without any file right), its `.env` of API keys, `auth.json` (the web UI's signing key and
    // sessions), and the animas' private messages in the
    // otherwise writable `shared/` (read, or forged from any sender into another anima's inbox), where they exist.
    secret.extend(
        ["run", ".env", "auth.json", "shared/inbox", "shared/dm_logs"]
            .iter()
            .map(|f| data.join(f))
            .filter(|p| std::fs::symlink_metadata(p).is_ok()),
    );
    secret.push(dirs.cache.clone());
    secret.extend(crate::env_vars::AUDIT_LOG.get_os().map(PathBuf::from));
    for f in [
        "shadow",
        "gshadow",
        "shadow-",
        "gshadow-",
        "sudoers",
        "sudoers.d",
        "ssh",
        "ssl/private",
        "security/opasswd",
    ] {
        secret.push(Path::new("/etc").join(f));
    }
    secret.extend(home_secrets(home));
    let mut kept: Vec<PathBuf> = Vec::new();
    if let Some(r) = raw.as_deref_mut() {
        r.extend(secret.iter().cloned());
    }
    for p in secret {
        kept.push(rules::canonical(&p).unwrap_or(p));
    }
    // The task folder's unmasked arguments: hidden from every confined tool, the anima's own included.
    if let Some(a) = &anima {
        let private = a.join("state/background_tasks").join(crate::dirs::TASKS_PRIVATE_DIR);
        kept.push(rules::canonical(&private).unwrap_or(private));
        // The engine homes AnimaWorks keeps in the anima dir hold copies of the engines' logins, and settings the
        // framework merges and then runs outside any sandbox (a command planted there would run unconfined).
        for d in ENGINE_HOMES {
            let p = a.join(d);
            if std::fs::symlink_metadata(&p).is_ok() {
                kept.push(rules::canonical(&p).unwrap_or(p));
            }
        }
        kept.extend(other_companies(&data, a)?);
    }
    // Other animas' dirs are the peers: each hidden but the anima's own, and the folders holding them never listed.
    let peers = Some((crate::animas::folders(dirs), anima.clone()));
    let read = Protected {
        paths: kept.iter().cloned().collect(),
        peers,
    };
    let mut write = read.clone();
    let mut runner_files: Vec<PathBuf> = vec![
        data.join(crate::settings::SETTINGS_FILE),
        data.join("permissions.global.json"),
        data.join("common_tools"),
        // The installed MCP servers' packages: run by their servers, so never written by any call.
        crate::mcp_servers::install::root(&data),
    ];
    runner_files.extend(dirs.core.iter().cloned());
    if let Some(a) = &anima {
        for f in [
            crate::policy::permissions::JSON_FILE,
            crate::policy::permissions::MD_FILE,
            crate::policy::audit::AUDIT_FILE,
            "state/background_tasks",
            "state/background_notifications",
            "tools",
        ] {
            runner_files.push(a.join(f));
        }
        runner_files.extend(pinned::CODE_FILES.iter().map(|f| a.join(f)));
    }
    if let Some(r) = raw {
        r.extend(runner_files.iter().cloned());
    }
    for p in runner_files {
        write.paths.insert(rules::canonical(&p).unwrap_or(p));
    }
    Ok((read, write))
}

/// System places every sandboxed tool reads (and runs programs from, for the first group): enough for the
/// dynamic loader, Python, Node.js, bash and TLS, and nothing of a person's or the runner's.
pub(super) const SYSTEM_EXEC: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];
pub(super) const ETC_READ: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/debian_version",
    "/etc/alternatives",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/inputrc",
    "/etc/bash.bashrc",
    "/etc/profile",
];
pub(super) const DEV_RW: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];
pub(super) const DEV_READ: &[&str] = &[
    "/dev/random",
    "/dev/urandom",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/sys/devices/system/cpu",
];

/// May a declaration read (and run) `real` without the anima's grant: a system place, or an MCP server's package
/// installed by `mcp-servers install` (the runner's, never writable by a call).
pub(super) fn runner_readable(real: &Path, data: &Path) -> bool {
    system_read().iter().any(|s| real.starts_with(s))
        || rules::canonical(&crate::mcp_servers::install::root(data)).is_some_and(|r| real.starts_with(r))
}

/// The canonical forms of the system folders a declared read or exec path may lie in without a grant, found once
/// per process.
pub(super) fn system_read() -> &'static [PathBuf] {
    static S: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        SYSTEM_EXEC
            .iter()
            .chain(ETC_READ)
            .filter_map(|p| rules::canonical(Path::new(p)))
            .collect()
    })
}

/// The folder an interpreter belongs to: `<prefix>` of `<prefix>/bin/x` or of a version manager's
/// `<root>/shims/x` (pyenv, nodenv, asdf), else the folder of `x`. Never `/`, the home folder or the data dir,
/// or a folder above them.
pub(super) fn prefix_of(program: &Path, home: Option<&Path>, data: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    let p = if dir.file_name().is_some_and(|n| n == "bin" || n == "shims") {
        dir.parent()?
    } else {
        dir
    };
    let too_wide = |q: &Path| q == Path::new("/") || home.is_some_and(|h| h.starts_with(q)) || data.starts_with(q);
    if too_wide(p) {
        (!too_wide(dir)).then(|| dir.to_path_buf())
    } else {
        Some(p.to_path_buf())
    }
}
