//! An anima's permissions: `<anima dir>/permissions.json` in the AnimaWorks shape, or the older
//! `permissions.md`.
//!
//! Reading never writes (the original converts `permissions.md` to JSON on first read; we only do that when
//! asked, through [`write_json`]). Reading fails closed: a file that exists but cannot be read, parsed or
//! validated is a [`PermissionsError`], and the gate refuses every call while it stands.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file name of the JSON form, inside the anima directory.
pub const JSON_FILE: &str = "permissions.json";
/// The file name of the older Markdown form, read only when the JSON form is absent.
pub const MD_FILE: &str = "permissions.md";

/// The contents of `permissions.json`. Every field has the AnimaWorks default, so `{}` is valid; unknown keys
/// are ignored; booleans and the version are coerced as AnimaWorks' loader (pydantic's lax mode) coerces them
/// ([`super::lax`]); any other value of the wrong type is an error, and so is a `file_roots_denied` entry that
/// AnimaWorks refuses (relative, or with a glob character).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Permissions {
    /// Schema version of the file (AnimaWorks writes 1; any integer is accepted, as there).
    #[serde(deserialize_with = "super::lax::integer")]
    pub version: i128,
    /// Folders the anima may read and write (default `["/"]`). Carried for `show` and `migrate`; the runner
    /// does not enforce file roots.
    pub file_roots: Vec<String>,
    /// Folders the anima may only read (default none).
    pub file_roots_readonly: Vec<String>,
    /// Folders the anima may not touch (default none). Each must be absolute and hold no `*`, `?` or `[`.
    #[serde(deserialize_with = "denied_roots")]
    pub file_roots_denied: Vec<String>,
    /// Shell command rules (default: all allowed). Carried, not enforced here.
    #[serde(deserialize_with = "map_only")]
    pub commands: RuleSet,
    /// Tool rules and gate grants (default: all tools allowed, no gated action granted).
    #[serde(deserialize_with = "map_only")]
    pub external_tools: RuleSet,
    /// Whether the anima may create tools (default: personal yes, shared no).
    #[serde(deserialize_with = "map_only")]
    pub tool_creation: ToolCreation,
    /// Runner extension: the anima's sandbox grants and per-tier modes (docs/sandbox.md).
    #[serde(skip_serializing_if = "crate::policy::sandbox_grants::Grants::is_default")]
    pub sandbox: crate::policy::sandbox_grants::Grants,
    /// Runner extension: which credentials each tool may receive, `{"<tool>": ["<credential>", …]}`; a key may
    /// name the tier (`"personal:<tool>"`), and `"*"` grants every shared credential (docs/credentials.md).
    #[serde(
        skip_serializing_if = "std::collections::BTreeMap::is_empty",
        deserialize_with = "map_only"
    )]
    pub credentials: std::collections::BTreeMap<String, Vec<String>>,
    /// Runner extension: the anima's resource limits, which only lower the tier's (docs/limits.md).
    #[serde(skip_serializing_if = "crate::policy::limit_grants::Lower::is_default")]
    pub limits: crate::policy::limit_grants::Lower,
}

impl Default for Permissions {
    fn default() -> Self {
        Permissions {
            version: 1,
            file_roots: vec!["/".to_string()],
            file_roots_readonly: Vec::new(),
            file_roots_denied: Vec::new(),
            commands: RuleSet::default(),
            external_tools: RuleSet::default(),
            tool_creation: ToolCreation::default(),
            sandbox: Default::default(),
            credentials: Default::default(),
            limits: Default::default(),
        }
    }
}

/// AnimaWorks' validator of `file_roots_denied`: an entry that is relative or holds a glob character makes
/// the whole file invalid (so every call is refused, as there).
fn denied_roots<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let roots = Vec::<String>::deserialize(d)?;
    for r in &roots {
        if r.contains(['*', '?', '[']) {
            return Err(serde::de::Error::custom(format!(
                "file_roots_denied does not support glob patterns: {r:?}"
            )));
        }
        if !r.starts_with('/') {
            return Err(serde::de::Error::custom(format!(
                "file_roots_denied entries must be absolute paths: {r:?}"
            )));
        }
    }
    Ok(roots)
}

/// `{"allow_all": true, "allow": [], "deny": []}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuleSet {
    /// Default `true`.
    #[serde(deserialize_with = "super::lax::boolean")]
    pub allow_all: bool,
    /// Names allowed (a whitelist when `allow_all` is false), and the grants of gated actions.
    pub allow: Vec<String>,
    /// Names refused whatever else says.
    pub deny: Vec<String>,
    /// Grants of gated actions that ask a human instead of being refused (`*` matches any run of characters);
    /// `allow` and `deny` win over it (docs/policy.md#approvals).
    pub ask: Vec<String>,
}

impl Default for RuleSet {
    fn default() -> Self {
        RuleSet {
            allow_all: true,
            allow: Vec::new(),
            deny: Vec::new(),
            ask: Vec::new(),
        }
    }
}

/// `{"personal": true, "shared": false}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCreation {
    /// May create personal tools (default `true`).
    #[serde(deserialize_with = "super::lax::boolean")]
    pub personal: bool,
    /// May create common (shared) tools (default `false`).
    #[serde(deserialize_with = "super::lax::boolean")]
    pub shared: bool,
}

impl Default for ToolCreation {
    fn default() -> Self {
        ToolCreation {
            personal: true,
            shared: false,
        }
    }
}

/// Where the effective permissions came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionsFile {
    /// `permissions.json`, at this path.
    Json(PathBuf),
    /// `permissions.md` at this path (no `permissions.json` exists).
    Markdown(PathBuf),
    /// Neither file exists: the defaults. The path is the `permissions.json` that would be read.
    Defaults(PathBuf),
}

impl PermissionsFile {
    /// The file a person should edit: the file read, or the `permissions.json` to create.
    pub fn path(&self) -> &Path {
        match self {
            PermissionsFile::Json(p) | PermissionsFile::Markdown(p) | PermissionsFile::Defaults(p) => p,
        }
    }
}

/// Permissions as loaded, with where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedPermissions {
    /// The effective rules.
    pub permissions: Permissions,
    /// The file they came from (or the defaults).
    pub source: PermissionsFile,
}

impl LoadedPermissions {
    /// The file named in refusals: the file read, or the `permissions.json` to create.
    pub fn path(&self) -> &Path {
        self.source.path()
    }
}

/// What went wrong with a permissions file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file exists (or is a dangling symlink, a directory, …) but could not be read as UTF-8 text.
    Unreadable,
    /// The text is not JSON, or not JSON of the right shape (a wrong type, a duplicate key).
    Invalid,
    /// [`write_json`] found a file there already and was not forced.
    Exists,
    /// [`write_json`] could not write the file.
    Write,
}

/// A permissions file that exists but cannot be used. The caller refuses every call while it stands; the
/// message says which file, where in it (when serde knows), and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PermissionsError {
    /// The file at fault.
    pub path: PathBuf,
    /// 1-based line and column, when the parser gives them.
    pub location: Option<(usize, usize)>,
    /// The class of fault.
    pub kind: ErrorKind,
    /// What is wrong, in words (never the file's contents beyond what serde quotes of a bad token).
    pub reason: String,
}

impl fmt::Display for PermissionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ErrorKind::Unreadable => "cannot read permissions file",
            ErrorKind::Invalid => "invalid permissions file",
            ErrorKind::Exists => "permissions file already exists",
            ErrorKind::Write => "cannot write permissions file",
        };
        write!(f, "{what} {}", self.path.display())?;
        if let Some((line, col)) = self.location {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl PermissionsError {
    fn unreadable(path: &Path, err: &io::Error) -> Self {
        let reason = match err.kind() {
            io::ErrorKind::NotFound => "it is a dangling symbolic link (or vanished while being read)".to_string(),
            io::ErrorKind::IsADirectory => "it is a directory, not a file".to_string(),
            io::ErrorKind::InvalidData => "it is not valid UTF-8 text".to_string(),
            _ => err.to_string(),
        };
        PermissionsError {
            path: path.to_path_buf(),
            location: None,
            kind: ErrorKind::Unreadable,
            reason,
        }
    }
}

/// Loads the permissions of the anima whose directory is `anima_dir`. Never writes anything.
///
/// Which file counts:
/// 1. `<anima dir>/permissions.json` when anything exists at that path (a file, a directory, a symlink —
///    even a dangling one). It must read as UTF-8 JSON of the AnimaWorks shape; unknown keys are ignored,
///    missing keys take their defaults, a wrong type is an error.
/// 2. else `<anima dir>/permissions.md` when anything exists at that path, parsed with [`parse_markdown`].
/// 3. else the defaults ([`Permissions::default`]).
///
/// # Errors
/// A [`PermissionsError`] when the file that counts cannot be read or parsed. Callers must refuse every call
/// with it (fail closed), never fall back to the defaults.
pub fn load(anima_dir: &Path) -> Result<LoadedPermissions, PermissionsError> {
    let json_path = anima_dir.join(JSON_FILE);
    if let Some(text) = read_if_present(&json_path)? {
        let permissions = parse_json(&json_path, &text)?;
        if permissions.version != 1 {
            unknown_version(permissions.version);
        }
        return Ok(LoadedPermissions {
            permissions,
            source: PermissionsFile::Json(json_path),
        });
    }
    let md_path = anima_dir.join(MD_FILE);
    if let Some(text) = read_if_present(&md_path)? {
        let permissions = parse_markdown(&text);
        return Ok(LoadedPermissions {
            permissions,
            source: PermissionsFile::Markdown(md_path),
        });
    }
    Ok(LoadedPermissions {
        permissions: Permissions::default(),
        source: PermissionsFile::Defaults(json_path),
    })
}

/// AnimaWorks' warning for a version it does not know, word for word, once per process (it reads the fields it
/// knows, as here).
fn unknown_version(version: i128) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("permissions.json version {version} is unknown; using known fields only"));
}

/// `Ok(None)` only when nothing at all is at `path` (not even a dangling symlink); any other failure to read
/// is an error.
fn read_if_present(path: &Path) -> Result<Option<String>, PermissionsError> {
    crate::fsread::read_to_string_if_present(path, crate::fsread::SMALL)
        .map_err(|e| PermissionsError::unreadable(path, &e))
}

/// Parses the text of a `permissions.json`. `path` is only used in the error.
///
/// # Errors
/// [`ErrorKind::Invalid`] with serde's line and column and reason.
pub fn parse_json(path: &Path, text: &str) -> Result<Permissions, PermissionsError> {
    let text = python_constants(text);
    let mut de = serde_json::Deserializer::from_str(&text);
    map_only::<_, Permissions>(&mut de)
        .and_then(|p| de.end().map(|()| p))
        .map_err(|e| {
            // serde_json's Display appends " at line L column C"; we carry those as fields instead.
            let full = e.to_string();
            let reason = match full.rfind(" at line ") {
                Some(i) if e.line() > 0 => full[..i].to_string(),
                _ => full,
            };
            PermissionsError {
                path: path.to_path_buf(),
                location: (e.line() > 0).then(|| (e.line(), e.column())),
                kind: ErrorKind::Invalid,
                reason,
            }
        })
}

/// Python's `json` reads the constants `NaN`, `Infinity` and `-Infinity` (its `json.dumps` writes them); serde
/// does not. Outside strings each becomes `[0]` (padded to its width, so that errors keep their columns): ignored
/// under a key no one reads, as AnimaWorks ignores it there, and refused wherever a boolean, an integer, a string,
/// a list of strings or an object is read, as pydantic refuses a float there.
fn python_constants(text: &str) -> std::borrow::Cow<'_, str> {
    const CONSTANTS: [&str; 3] = ["-Infinity", "Infinity", "NaN"];
    if !CONSTANTS[1..].iter().any(|c| text.contains(c)) {
        return std::borrow::Cow::Borrowed(text);
    }
    let b = text.as_bytes();
    let (mut out, mut last, mut i) = (String::with_capacity(text.len()), 0, 0);
    let (mut in_string, mut escaped) = (false, false);
    while i < b.len() {
        let c = b[i];
        if in_string {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else if c == b'"' {
            in_string = true;
        } else if let Some(k) = CONSTANTS.iter().find(|k| b[i..].starts_with(k.as_bytes())) {
            // Why the slices are on char boundaries: `last` and `i` are at ASCII bytes outside strings.
            out.push_str(&text[last..i]);
            out.push_str("[0]");
            out.extend(std::iter::repeat(' ').take(k.len() - 3));
            i += k.len();
            last = i;
            continue;
        }
        i += 1;
    }
    out.push_str(&text[last..]);
    std::borrow::Cow::Owned(out)
}

/// Deserialises `T` only from a JSON object. Why: serde's derive also accepts a JSON array (fields by
/// position), so `"external_tools": []` would silently mean the defaults; AnimaWorks rejects it, and so do we.
fn map_only<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct ObjectOnly<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for ObjectOnly<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_map(ObjectOnly(std::marker::PhantomData))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MdSection {
    Other,
    ExternalTools,
    ToolCreation,
}

fn yes_word(v: &str) -> Option<bool> {
    match v.trim().to_lowercase().as_str() {
        "yes" | "ok" | "enabled" | "true" => Some(true),
        "no" | "deny" | "disabled" | "false" => Some(false),
        _ => None,
    }
}

/// A value in the tool section, as the original's patterns read it: the yes/no words, and also `全権限` ("full
/// rights") and anything starting with `読み取り` ("read…", e.g. `読み取りのみ`, read only), which allow the tool.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ToolValue {
    Yes,
    No,
    /// `全権限`, `読み取り…`: allows a tool; for `all`, the original makes it a tool named `all`, not allow_all.
    Granted,
}

fn tool_value(v: &str) -> Option<ToolValue> {
    let t = v.trim();
    match yes_word(t) {
        Some(true) => Some(ToolValue::Yes),
        Some(false) => Some(ToolValue::No),
        None if t == "全権限" || t.starts_with("読み取り") => Some(ToolValue::Granted),
        None => None,
    }
}

/// Parses the older `permissions.md` with the AnimaWorks grammar, applying each line rule **only inside its
/// own section** (the original applies the tool rules to every line of the file, so `- personal: yes` under
/// "Tool Creation" became a tool named `personal`; we do not copy that).
///
/// - A heading (a line starting with `#`) containing `External Tools` or `外部ツール` opens the tool section;
///   one containing `Tool Creation` or `ツール作成` opens the tool-creation section; any other heading closes
///   the section. Headings match case-insensitively.
/// - In the tool section: `- all: yes` sets `allow_all`; `- <name>: yes|OK|enabled|true|全権限|読み取り…` adds
///   `<name>` to `allow`; `- <name>: no|deny|disabled|false` adds it to `deny` (the values the original reads;
///   Korean installs use the same words, as AnimaWorks' `ko` templates do). When the file has a tool section,
///   `allow_all` starts false (the section is a list of what is allowed) and only `- all: yes` turns it on;
///   without one, the default (`true`) stands.
/// - In the tool-creation section: `- personal: …` / `- 個人ツール: …` and `- shared: …` / `- 共有ツール: …`.
/// - The bullet is `-`, `*` or none, as in the original; values match case-insensitively; `:` or the full-width
///   `：` separates name and value; lines that match no rule are ignored.
pub fn parse_markdown(text: &str) -> Permissions {
    let mut p = Permissions::default();
    let mut section = MdSection::Other;
    let mut seen_tools = false;
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with('#') {
            let lower = line.to_lowercase();
            section = if lower.contains("external tools") || line.contains("外部ツール") {
                if !seen_tools {
                    seen_tools = true;
                    p.external_tools.allow_all = false;
                }
                MdSection::ExternalTools
            } else if lower.contains("tool creation") || line.contains("ツール作成") {
                MdSection::ToolCreation
            } else {
                MdSection::Other
            };
            continue;
        }
        let rest = line.strip_prefix(['-', '*']).unwrap_or(line);
        let Some((name, value)) = rest.split_once(':').or_else(|| rest.split_once('：')) else {
            continue;
        };
        let name = name.trim();
        let Some(value) = tool_value(value) else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let yes = value != ToolValue::No;
        match section {
            MdSection::ExternalTools => {
                if name.eq_ignore_ascii_case("all") && value != ToolValue::Granted {
                    p.external_tools.allow_all = yes;
                } else {
                    let list = if yes {
                        &mut p.external_tools.allow
                    } else {
                        &mut p.external_tools.deny
                    };
                    if !list.iter().any(|n| n == name) {
                        list.push(name.to_string());
                    }
                }
            }
            MdSection::ToolCreation if value == ToolValue::Granted => {}
            MdSection::ToolCreation => match name.to_lowercase().as_str() {
                "personal" | "個人ツール" => p.tool_creation.personal = yes,
                "shared" | "共有ツール" => p.tool_creation.shared = yes,
                _ => {}
            },
            MdSection::Other => {}
        }
    }
    p
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".to_string()
    } else {
        items.join(", ")
    }
}

/// Renders the effective policy for a person (`animaworks-tool permissions show`): where it came from, what
/// the tool rules mean in words, and the JSON that `permissions migrate` would write.
pub fn render(loaded: &LoadedPermissions) -> String {
    let p = &loaded.permissions;
    let t = &p.external_tools;
    let mut out = String::new();
    let source = match &loaded.source {
        PermissionsFile::Json(path) => format!("{}", path.display()),
        PermissionsFile::Markdown(path) => {
            format!(
                "{} (older Markdown form; `permissions migrate` writes permissions.json)",
                path.display()
            )
        }
        PermissionsFile::Defaults(path) => format!("defaults ({} does not exist)", path.display()),
    };
    out.push_str(&format!("source: {source}\n"));
    out.push_str("external tools:\n");
    let tools = if t.allow_all {
        "every tool, except those denied".to_string()
    } else if t.allow.is_empty() {
        "every tool, except those denied (allow_all is false but allow is empty)".to_string()
    } else {
        "only the tools listed in allow".to_string()
    };
    out.push_str(&format!("  allowed: {tools}\n"));
    out.push_str(&format!("  allow_all: {}\n", t.allow_all));
    out.push_str(&format!("  allow: {}\n", list(&t.allow)));
    out.push_str(&format!("  deny (wins in every tier): {}\n", list(&t.deny)));
    if !t.ask.is_empty() {
        out.push_str(&format!("  ask (a human approves each call; allow and deny win): {}\n", list(&t.ask)));
    }
    out.push_str("  gated actions run only when allow holds <tool>_<gated_as or action>, even with allow_all\n");
    if p.credentials.is_empty() {
        out.push_str("credentials: none granted (core tools get what they declare; docs/credentials.md)\n");
    } else {
        out.push_str("credentials (runner extension; docs/credentials.md):\n");
        for (tool, names) in &p.credentials {
            out.push_str(&format!("  {tool}: {}\n", list(names)));
        }
    }
    out.push_str(&format!(
        "tool creation: personal {}, shared {}\n",
        if p.tool_creation.personal { "yes" } else { "no" },
        if p.tool_creation.shared { "yes" } else { "no" }
    ));
    out.push_str(&format!(
        "commands: allow_all {}, allow {}, deny {} (not enforced by animaworks-tool)\n",
        p.commands.allow_all,
        list(&p.commands.allow),
        list(&p.commands.deny)
    ));
    out.push_str(&format!(
        "file roots: {}; read-only {}; denied {} (not enforced by animaworks-tool)\n",
        list(&p.file_roots),
        list(&p.file_roots_readonly),
        list(&p.file_roots_denied)
    ));
    out
}

/// The JSON text [`write_json`] writes: pretty-printed, every field spelled out, a trailing newline.
pub fn to_json_text(permissions: &Permissions) -> String {
    let mut s = serde_json::to_string_pretty(permissions).expect("Permissions always serialises");
    s.push('\n');
    s
}

/// Writes `<anima dir>/permissions.json` from `permissions` (`animaworks-tool permissions migrate`).
///
/// The file appears whole or not at all (written to a temporary file in the same folder, then renamed), with
/// mode 0644. Without `force`, an existing path — a file, a directory, a dangling symlink — is left as it is
/// and the call fails with [`ErrorKind::Exists`]; with `force`, a file or symlink there is replaced.
///
/// # Errors
/// [`ErrorKind::Exists`] as above; [`ErrorKind::Write`] when the folder is missing or not writable.
pub fn write_json(anima_dir: &Path, permissions: &Permissions, force: bool) -> Result<PathBuf, PermissionsError> {
    let path = anima_dir.join(JSON_FILE);
    let err = |kind, reason: String| PermissionsError {
        path: path.clone(),
        location: None,
        kind,
        reason,
    };
    if !force && std::fs::symlink_metadata(&path).is_ok() {
        return Err(err(
            ErrorKind::Exists,
            "not overwritten; pass --force to replace it".into(),
        ));
    }
    let write = || -> io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".permissions.json.")
            .tempfile_in(anima_dir)?;
        tmp.write_all(to_json_text(permissions).as_bytes())?;
        tmp.as_file().sync_all()?;
        {
            use std::os::unix::fs::PermissionsExt;
            tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644))?;
        }
        if force {
            tmp.persist(&path).map_err(|e| e.error)?;
        } else {
            // Why noclobber: another process may have created the file since the check above.
            tmp.persist_noclobber(&path).map_err(|e| e.error)?;
        }
        Ok(())
    };
    match write() {
        Ok(()) => Ok(path),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(err(
            ErrorKind::Exists,
            "not overwritten; pass --force to replace it".into(),
        )),
        Err(e) => Err(err(ErrorKind::Write, e.to_string())),
    }
}

/// The keys of `permissions.json` the runner reads, at the top and in its objects of AnimaWorks' shape.
const KEYS: &[&str] = &[
    "version",
    "file_roots",
    "file_roots_readonly",
    "file_roots_denied",
    "commands",
    "external_tools",
    "tool_creation",
    "sandbox",
    "credentials",
    "limits",
];
const RULE_KEYS: &[&str] = &["allow_all", "allow", "deny"];
const CREATION_KEYS: &[&str] = &["personal", "shared"];
/// The fields of [`crate::policy::sandbox_grants::Grants`] (a test pins them).
const SANDBOX_KEYS: &[&str] = &[
    "core",
    "common",
    "personal",
    "net",
    "direct_net",
    "deny",
    "read",
    "write",
    "exec",
];

/// Keys of `permissions.json` that nothing reads, each as `<file>:<line>:<col>: …` with its consequence and the
/// closest key. They are ignored, as AnimaWorks' loader ignores them (a file it accepts stays accepted), but a
/// misspelt `"credentails"` grants nothing, silently: `doctor` and `tools` say so. Empty when the file is
/// absent or cannot be used (that is its own error).
pub fn unknown_keys(loaded: &LoadedPermissions) -> Vec<String> {
    let PermissionsFile::Json(path) = &loaded.source else {
        return Vec::new();
    };
    let Ok(Some(text)) = read_if_present(path) else {
        return Vec::new();
    };
    let Ok(serde_json::Value::Object(top)) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut check = |at: &str, map: &serde_json::Map<String, serde_json::Value>, known: &[&str]| {
        for k in map.keys().filter(|k| !known.contains(&k.as_str()) && !k.starts_with('$')) {
            let (line, col) = key_position(&text, k);
            let near = crate::suggest::closest(k, known.iter().copied())
                .map(|n| format!("; did you mean \"{n}\"?"))
                .unwrap_or_default();
            found.push(format!(
                "{}:{line}:{col}: unknown key \"{at}{k}\" is ignored, so nothing it says applies{near}",
                path.display()
            ));
        }
    };
    check("", &top, KEYS);
    for (key, known) in [
        ("commands", RULE_KEYS),
        ("external_tools", RULE_KEYS),
        ("tool_creation", CREATION_KEYS),
        ("sandbox", SANDBOX_KEYS),
    ] {
        if let Some(serde_json::Value::Object(m)) = top.get(key) {
            check(&format!("{key}."), m, known);
        }
    }
    found
}

/// 1-based line and column of the first `"key"` followed by a colon in `text` (1:1 when not found).
fn key_position(text: &str, key: &str) -> (usize, usize) {
    let quoted = serde_json::to_string(key).unwrap_or_default();
    let at = text
        .match_indices(&quoted)
        .find(|(i, _)| text[i + quoted.len()..].trim_start().starts_with(':'))
        .map_or(0, |(i, _)| i);
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python's constants, as its `json` reads them: a column stays where it was; a string keeps its text.
    #[test]
    fn python_constants_outside_strings_only() {
        assert_eq!(
            python_constants(r#"{"a": NaN, "b": [-Infinity, Infinity], "c": "NaN \" Infinity"}"#),
            r#"{"a": [0], "b": [[0]      , [0]     ], "c": "NaN \" Infinity"}"#
        );
        assert!(matches!(python_constants("{\"a\": 1}"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(
            python_constants("{\"é\": Na"),
            "{\"é\": Na",
            "a cut constant stays as it is"
        );
        let p = Path::new("permissions.json");
        assert!(parse_json(p, r#"{"note": NaN, "x": {"y": -Infinity}}"#).is_ok());
        for bad in [
            r#"{"version": NaN}"#,
            r#"{"external_tools": {"allow": [Infinity]}}"#,
            r#"{"commands": NaN}"#,
        ] {
            assert!(parse_json(p, bad).is_err(), "{bad}");
        }
    }

    /// A misspelt key is ignored as AnimaWorks ignores it, and named: where, what it costs, the closest key.
    #[test]
    fn a_misspelt_key_is_named_with_its_place_and_the_closest_key() {
        let d = tempfile::tempdir().unwrap();
        let text = "{\n  \"version\": 1,\n  \"credentails\": {\"x\": [\"A\"]},\n  \"external_tools\": {\"alow\": [\"t\"]}\n}\n";
        std::fs::write(d.path().join(JSON_FILE), text).unwrap();
        let loaded = load(d.path()).unwrap();
        assert!(loaded.permissions.credentials.is_empty(), "still ignored, as in AnimaWorks");
        let w = unknown_keys(&loaded);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].ends_with("permissions.json:3:3: unknown key \"credentails\" is ignored, so nothing it says applies; did you mean \"credentials\"?"), "{w:?}");
        assert!(w[1].contains(":4:22: unknown key \"external_tools.alow\"") && w[1].contains("\"allow\""), "{w:?}");
        std::fs::write(d.path().join(JSON_FILE), "{\"$schema\": \"x\", \"version\": 1}").unwrap();
        assert!(unknown_keys(&load(d.path()).unwrap()).is_empty());
        std::fs::write(d.path().join(JSON_FILE), "{\"sandbox\": {\"wirte\": [\"/x\"]}}").unwrap();
        let w = unknown_keys(&load(d.path()).unwrap());
        assert!(w.len() == 1 && w[0].contains("\"sandbox.wirte\"") && w[0].contains("\"write\""), "{w:?}");
    }

    /// The sandbox keys the warning knows are the grants' fields: every field set (a new field fails to compile
    /// here until it is listed), serialized, gives exactly [`SANDBOX_KEYS`].
    #[test]
    fn the_sandbox_keys_are_the_fields_of_the_grants() {
        use crate::policy::sandbox_grants::{Grants, NetGrant};
        use crate::settings::sandbox::Mode;
        let one = || vec!["x".to_owned()];
        let all = Grants {
            core: Some(Mode::Off),
            common: Some(Mode::Off),
            personal: Some(Mode::Off),
            net: Some(NetGrant::All(true)),
            direct_net: one(),
            deny: one(),
            read: one(),
            write: one(),
            exec: one(),
        };
        let v = serde_json::to_value(&all).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut known = SANDBOX_KEYS.to_vec();
        keys.sort_unstable();
        known.sort_unstable();
        assert_eq!(keys, known);
    }

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn absent_means_defaults_and_nothing_written() {
        let d = dir();
        let l = load(d.path()).unwrap();
        assert_eq!(l.permissions, Permissions::default());
        assert_eq!(l.source, PermissionsFile::Defaults(d.path().join(JSON_FILE)));
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn empty_object_is_defaults_and_unknown_keys_ignored() {
        let d = dir();
        std::fs::write(d.path().join(JSON_FILE), "{}").unwrap();
        assert_eq!(load(d.path()).unwrap().permissions, Permissions::default());
        std::fs::write(
            d.path().join(JSON_FILE),
            r#"{"future": {"x": 1}, "external_tools": {"allow_all": false, "allow": ["web"], "extra": 3}}"#,
        )
        .unwrap();
        let p = load(d.path()).unwrap().permissions;
        assert!(!p.external_tools.allow_all);
        assert_eq!(p.external_tools.allow, vec!["web"]);
        assert!(p.external_tools.deny.is_empty());
        assert!(p.tool_creation.personal);
    }

    #[test]
    fn malformed_json_carries_path_line_column() {
        let d = dir();
        let path = d.path().join(JSON_FILE);
        std::fs::write(&path, "{\n  \"external_tools\": {\"allow\": [\"a\",]}\n}").unwrap();
        let e = load(d.path()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Invalid);
        assert_eq!(e.path, path);
        let (line, _col) = e.location.unwrap();
        assert_eq!(line, 2);
        let msg = e.to_string();
        assert!(msg.contains(&format!("{}:2:", path.display())), "{msg}");
        assert!(!msg.contains(" at line "), "{msg}");
    }

    #[test]
    fn wrong_types_fail_closed() {
        let d = dir();
        for bad in [
            r#"{"external_tools": {"allow_all": "maybe"}}"#,
            r#"{"external_tools": {"allow_all": 2}}"#,
            r#"{"external_tools": {"allow_all": null}}"#,
            r#"{"tool_creation": {"shared": " yes"}}"#,
            r#"{"version": "1.5"}"#,
            r#"{"version": null}"#,
            r#"{"file_roots_denied": ["relative/path"]}"#,
            r#"{"file_roots_denied": ["/a/*"]}"#,
            r#"{"file_roots_denied": [""]}"#,
            r#"{"external_tools": {"allow": "github"}}"#,
            r#"{"external_tools": {"deny": [1]}}"#,
            r#"{"external_tools": {"allow": null}}"#,
            r#"{"external_tools": null}"#,
            r#"{"tool_creation": [true, false]}"#,
            r#"{"version": 1.5}"#,
            r#"{} {}"#,
            r#"{"external_tools": []}"#,
            r#"[]"#,
            r#"null"#,
            r#""#,
            r#"{"external_tools": {"allow": [], "allow": ["x"]}}"#,
        ] {
            std::fs::write(d.path().join(JSON_FILE), bad).unwrap();
            let e = load(d.path()).expect_err(bad);
            assert_eq!(e.kind, ErrorKind::Invalid, "{bad}");
        }
    }

    #[test]
    fn directory_and_dangling_symlink_are_unreadable_not_absent() {
        let d = dir();
        std::fs::create_dir(d.path().join(JSON_FILE)).unwrap();
        let e = load(d.path()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unreadable);
        assert!(e.reason.contains("directory"), "{}", e.reason);

        let d = dir();
        std::os::unix::fs::symlink(d.path().join("nowhere.json"), d.path().join(JSON_FILE)).unwrap();
        // A permissions.md beside it must not be used instead.
        std::fs::write(d.path().join(MD_FILE), "# External Tools\n- all: yes\n").unwrap();
        let e = load(d.path()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unreadable);
        assert!(e.reason.contains("dangling"), "{}", e.reason);

        let d = dir();
        std::os::unix::fs::symlink(d.path().join("nowhere.md"), d.path().join(MD_FILE)).unwrap();
        assert_eq!(load(d.path()).unwrap_err().kind, ErrorKind::Unreadable);
    }

    #[test]
    fn invalid_utf8_is_unreadable() {
        let d = dir();
        std::fs::write(d.path().join(JSON_FILE), b"{\"version\": 1, \xff}").unwrap();
        assert_eq!(load(d.path()).unwrap_err().kind, ErrorKind::Unreadable);
    }

    #[test]
    fn markdown_sections_do_not_leak() {
        let md = "# Permissions\n- web: yes\n\n## External Tools\n- github: yes\n- slack: OK\n- shell: no\n\
                  - chat: Disabled\n- weird: maybe\n\n## Tool Creation\n- personal: no\n- shared: yes\n\n\
                  ## Notes\n- notes: yes\n";
        let p = parse_markdown(md);
        assert!(!p.external_tools.allow_all);
        assert_eq!(p.external_tools.allow, vec!["github", "slack"]);
        assert_eq!(p.external_tools.deny, vec!["shell", "chat"]);
        assert!(!p.tool_creation.personal);
        assert!(p.tool_creation.shared);
    }

    #[test]
    fn markdown_japanese_and_all() {
        let md = "## 外部ツール\n- all: yes\n- gmail：no\n### ツール作成\n- 個人ツール: no\n- 共有ツール: yes\n";
        let p = parse_markdown(md);
        assert!(p.external_tools.allow_all);
        assert!(p.external_tools.allow.is_empty());
        assert_eq!(p.external_tools.deny, vec!["gmail"]);
        assert!(!p.tool_creation.personal && p.tool_creation.shared);
        // A second tool section does not undo the first one's `all: yes`.
        let p = parse_markdown("# External Tools\n- all: yes\n# Notes\n# External Tools\n- web: no\n");
        assert!(p.external_tools.allow_all);
        assert_eq!(p.external_tools.deny, vec!["web"]);
        // No tool section at all: defaults stand.
        let p = parse_markdown("# Tool Creation\n- personal: yes\n");
        assert!(p.external_tools.allow_all && p.external_tools.allow.is_empty());
    }

    #[test]
    fn markdown_values_the_original_reads() {
        let md = "## 外部ツール\n- chatwork: 全権限\n- gmail: 読み取りのみ\n* slack: yes\nweb_search: no\n\
                  - all: 全権限\n### ツール作成\n- shared: 全権限\n";
        let p = parse_markdown(md);
        assert!(!p.external_tools.allow_all);
        assert_eq!(p.external_tools.allow, vec!["chatwork", "gmail", "slack", "all"]);
        assert_eq!(p.external_tools.deny, vec!["web_search"]);
        assert!(
            !p.tool_creation.shared,
            "the tool-creation rules read yes/no words only"
        );
    }

    #[test]
    fn coerced_values_take_effect() {
        let d = dir();
        std::fs::write(
            d.path().join(JSON_FILE),
            r#"{"version": "1", "external_tools": {"allow_all": "no", "allow": ["x"]}, "tool_creation": {"shared": 1}}"#,
        )
        .unwrap();
        let p = load(d.path()).unwrap().permissions;
        assert_eq!(p.version, 1);
        assert!(!p.external_tools.allow_all);
        assert!(p.tool_creation.shared);
    }

    #[test]
    fn markdown_is_read_when_json_absent_and_never_written() {
        let d = dir();
        std::fs::write(d.path().join(MD_FILE), "# External Tools\n- github: yes\n").unwrap();
        let l = load(d.path()).unwrap();
        assert_eq!(l.source, PermissionsFile::Markdown(d.path().join(MD_FILE)));
        assert_eq!(l.permissions.external_tools.allow, vec!["github"]);
        assert!(!d.path().join(JSON_FILE).exists());
        assert!(render(&l).contains("permissions.md"));
    }

    #[test]
    fn migrate_writes_once_and_roundtrips() {
        let d = dir();
        std::fs::write(d.path().join(MD_FILE), "# External Tools\n- github: yes\n").unwrap();
        let l = load(d.path()).unwrap();
        let path = write_json(d.path(), &l.permissions, false).unwrap();
        assert_eq!(path, d.path().join(JSON_FILE));
        let again = load(d.path()).unwrap();
        assert_eq!(again.source, PermissionsFile::Json(path.clone()));
        assert_eq!(again.permissions, l.permissions);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);

        let e = write_json(d.path(), &Permissions::default(), false).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Exists);
        assert_eq!(load(d.path()).unwrap().permissions, l.permissions, "untouched");
        write_json(d.path(), &Permissions::default(), true).unwrap();
        assert_eq!(load(d.path()).unwrap().permissions, Permissions::default());
        // No temporary files left behind.
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn migrate_refuses_dangling_symlink_without_force() {
        let d = dir();
        std::os::unix::fs::symlink(d.path().join("x"), d.path().join(JSON_FILE)).unwrap();
        assert_eq!(
            write_json(d.path(), &Permissions::default(), false).unwrap_err().kind,
            ErrorKind::Exists
        );
    }

    #[test]
    fn render_names_source_and_rules() {
        let d = dir();
        let l = load(d.path()).unwrap();
        let s = render(&l);
        assert!(s.contains("defaults"), "{s}");
        assert!(s.contains("every tool, except those denied"), "{s}");
    }
}
