//! The task store the data dir's settings choose: above both stores, so that the types they share (`lib.rs`) need
//! neither.

use crate::{config, files, pg, TaskStore};
use awt_core::error::ErrorCode;

/// The store the data dir's settings choose (`"tasks": {"backend": …}`) for the runner's anima.
pub fn open(runner: &awt_core::Runner) -> Result<Box<dyn TaskStore>, awt_core::CallError> {
    let cfg = config::load(runner).map_err(|e| {
        awt_core::CallError::new(ErrorCode::Usage, e.to_string())
            .hint("fix \"tasks\" in <data dir>/animaworks-tool.json")
    })?;
    match cfg.backend {
        config::Backend::Files => Ok(Box::new(files::store_of(runner)?)),
        config::Backend::Postgres { .. } => Ok(Box::new(pg::PgStore::open(&cfg, &runner.dirs)?)),
    }
}
