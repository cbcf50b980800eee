//! `"tasks"`: where background tasks are kept, and the Postgres backend's timing, as the file says them.
//! `awt_tasks::config` resolves them (with `$ANIMAWORKS_TOOL_TASKS_URL`) into the store to open.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which store keeps the background tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BackendWord {
    /// Files in each anima's dir (`<anima dir>/state/background_tasks/`).
    #[default]
    Files,
    /// A Postgres database shared by every machine's workers.
    Postgres,
}

/// The task store: `{"backend": "postgres", "url": "postgres://…"}` (docs/tasks-postgres.md); absent: files.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TasksSettings {
    /// `files` (each anima's dir) or `postgres`.
    #[schemars(extend("default" = "files"))]
    pub backend: Option<BackendWord>,
    /// The database's URL (`postgres://user:pass@host/db`); `$ANIMAWORKS_TOOL_TASKS_URL` wins over it.
    pub url: Option<String>,
    /// Seconds a worker holds a task without renewing; a task whose lease ended is rescued by any worker.
    #[schemars(range(min = 2, max = 86400), extend("default" = 30))]
    pub lease_s: Option<f64>,
    /// How many times an idempotent task is claimed at most (its first run included).
    #[schemars(range(min = 1, max = 100), extend("default" = 3))]
    pub max_attempts: Option<u64>,
    /// Seconds a worker stopped by SIGTERM lets its running tasks finish before it cancels and releases them.
    #[schemars(range(min = 0, max = 86400), extend("default" = 30))]
    pub drain_s: Option<f64>,
    /// Seconds between an idle worker's looks for tasks when no notification came.
    #[schemars(range(min = 0.05, max = 86400), extend("default" = 2))]
    pub poll_s: Option<f64>,
    /// Kill a worker that stops renewing its lease while its tools run; off only where something else ends a
    /// paused worker's tools.
    #[schemars(extend("default" = true))]
    pub watchdog: Option<bool>,
}
