//! The placeholders of protocol.md §2.4 (`$ANIMA_DIR`, `$DATA_DIR`, `$TMP`, `$TOOL_DIR`, `$HOME`, `$CWD`) expanded
//! to the places of one call.

use awt_sys::confine::rules;
use std::path::PathBuf;

/// The placeholders of protocol.md §2.4.
pub(super) struct Places {
    pub(super) anima: Option<PathBuf>,
    pub(super) data: PathBuf,
    pub(super) tmp: PathBuf,
    pub(super) tool_dir: PathBuf,
    pub(super) home: Option<PathBuf>,
    /// The caller's working directory, unless it is a protected place (`usable_cwd`).
    pub(super) cwd: Option<PathBuf>,
}

/// A declared or granted place that is not one.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadPlace {
    #[error("unknown placeholder {placeholder} in {raw:?}")]
    UnknownPlaceholder { placeholder: String, raw: String },
    #[error("{raw:?} is not an absolute path or a placeholder path without `..`")]
    NotClean { raw: String },
}

impl Places {
    /// `$X/rest` or an absolute path, expanded; `None` when it names nothing usable (no anima, `..`).
    pub(super) fn expand(&self, raw: &str) -> Result<Option<PathBuf>, BadPlace> {
        let (base, rest) = match raw.split_once('/') {
            Some((b, r)) if b.starts_with('$') || b == "~" => (Some(b), r),
            None if raw.starts_with('$') || raw == "~" => (Some(raw), ""),
            _ => (None, raw),
        };
        let p = match base {
            None => PathBuf::from(rest),
            Some(b) => {
                let root = match b {
                    "$ANIMA_DIR" => self.anima.clone(),
                    "$DATA_DIR" => Some(self.data.clone()),
                    "$TMP" => Some(self.tmp.clone()),
                    "$TOOL_DIR" => Some(self.tool_dir.clone()),
                    "$HOME" | "~" => self.home.clone(),
                    "$CWD" => self.cwd.clone(),
                    other => {
                        return Err(BadPlace::UnknownPlaceholder {
                            placeholder: other.to_owned(),
                            raw: raw.to_owned(),
                        })
                    }
                };
                match root {
                    None => return Ok(None),
                    Some(r) if rest.is_empty() => r,
                    Some(r) => r.join(rest),
                }
            }
        };
        if !rules::is_clean_absolute(&p) {
            return Err(BadPlace::NotClean { raw: raw.to_owned() });
        }
        Ok(Some(p))
    }
}

