//! The masker of a line written before the call's own credentials are resolved (an early refusal, an unknown
//! action): every credential the tool and action declare that can be found.

use super::{Resolved, Runner};
use crate::manifest::ActionSpec;
use crate::policy::credentials;
use crate::policy::Masker;
use std::collections::HashMap;

/// A masker of every credential the tool and action declare that can be found, for a line written before the
/// call's own credentials were resolved (or when one of them is missing).
pub(crate) fn lenient_masker(runner: &Runner, r: &Resolved, act: Option<&ActionSpec>) -> Masker {
    let decls: Vec<_> = r
        .manifest
        .credentials
        .iter()
        .chain(act.into_iter().flat_map(|a| a.profile.credentials.iter()))
        .map(|d| awt_protocol::CredentialDecl {
            required: false,
            ..d.clone()
        })
        .collect();
    if decls.is_empty() {
        return Masker::default();
    }
    let caller: HashMap<String, String> = std::env::vars().collect();
    match credentials::resolve_all(
        &runner.dirs.data,
        runner.dirs.anima_name().as_deref(),
        caller,
        decls.iter(),
    ) {
        Ok(found) => Masker::new(found.iter().map(|s| s.value.as_str())),
        Err(_) => Masker::default(),
    }
}
