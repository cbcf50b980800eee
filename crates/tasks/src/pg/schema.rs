//! The versioned schema. Each migration runs once, in order, in one transaction that first takes a transaction
//! advisory lock, so that several workers starting at once apply it exactly once; `animaworks-tool jobs migrate`
//! does the same for operators who prefer to migrate before starting workers.

use super::StoreError;
use tokio_postgres::error::SqlState;
use tokio_postgres::Client;

/// The schema version this build needs.
pub const VERSION: i32 = 4;

/// `pg_advisory_xact_lock` key of migrations (any constant that no other application is likely to use).
const MIGRATION_LOCK: i64 = 0x6177_745f_6d69_6701;

const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        r#"
CREATE TABLE awt_tasks (
    id               text PRIMARY KEY,
    anima            text NOT NULL,
    status           text NOT NULL,
    created_at       double precision NOT NULL,
    tool             text NOT NULL,
    tier             text NOT NULL,
    tool_sha256      text NOT NULL,
    idempotent       boolean NOT NULL,
    attempt          integer NOT NULL DEFAULT 0,
    worker           text,
    lease_until      timestamptz,
    cancel_requested boolean NOT NULL DEFAULT false,
    record           jsonb NOT NULL
);
CREATE INDEX awt_tasks_pending ON awt_tasks (created_at, id) WHERE status = 'pending';
CREATE INDEX awt_tasks_running ON awt_tasks (anima) WHERE status = 'running';
CREATE INDEX awt_tasks_lease ON awt_tasks (lease_until) WHERE status = 'running';
CREATE INDEX awt_tasks_anima ON awt_tasks (anima, created_at);

CREATE FUNCTION awt_tasks_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'pending' AND (TG_OP = 'INSERT' OR OLD.status <> 'pending') THEN
        PERFORM pg_notify('awt_pending', NEW.anima);
    END IF;
    IF TG_OP = 'UPDATE' THEN
        IF OLD.status = 'running' AND NEW.status <> 'running' THEN
            PERFORM pg_notify('awt_pending', NEW.anima);
        END IF;
        IF NEW.cancel_requested AND NOT OLD.cancel_requested THEN
            PERFORM pg_notify('awt_cancel', NEW.id);
        END IF;
    END IF;
    PERFORM pg_notify('awt_task', NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER awt_tasks_notify AFTER INSERT OR UPDATE ON awt_tasks
    FOR EACH ROW EXECUTE FUNCTION awt_tasks_notify();
"#,
    ),
    (
        2,
        // Rows a worker refused to run (no valid MAC, tasks/mac.rs): moved here whole, with the reason, never run.
        r#"
CREATE TABLE awt_tasks_refused (
    id         text NOT NULL,
    anima      text NOT NULL,
    refused_at timestamptz NOT NULL DEFAULT now(),
    reason     text NOT NULL,
    task       jsonb NOT NULL
);
"#,
    ),
    (
        3,
        // A final row owes its anima a notification file until the one who ended it has written it (pg/mod.rs,
        // `owed`): a worker killed between the commit and the file no longer loses it.
        r#"
ALTER TABLE awt_tasks ADD COLUMN notify_after timestamptz;
CREATE INDEX awt_tasks_notify_owed ON awt_tasks (notify_after) WHERE notify_after IS NOT NULL;
"#,
    ),
    (
        4,
        // The trigger fires only for the columns a listener acts on: a lease renewal (`lease_until`) or a cleared
        // notification debt (`notify_after`) no longer costs every listening backend a wake-up per row.
        r#"
DROP TRIGGER awt_tasks_notify ON awt_tasks;
CREATE TRIGGER awt_tasks_notify AFTER INSERT OR UPDATE OF status, record, attempt, worker, cancel_requested
    ON awt_tasks FOR EACH ROW EXECUTE FUNCTION awt_tasks_notify();
"#,
    ),
];

/// Apply every pending migration; returns the versions applied.
pub async fn migrate(client: &mut Client) -> Result<Vec<i32>, tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS awt_schema (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await?;
    let row = tx
        .query_one("SELECT coalesce(max(version), 0) FROM awt_schema", &[])
        .await?;
    let have: i32 = row.get(0);
    let mut applied = Vec::new();
    for (v, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > have) {
        tx.batch_execute(sql).await?;
        tx.execute("INSERT INTO awt_schema (version) VALUES ($1)", &[v]).await?;
        applied.push(*v);
    }
    tx.commit().await?;
    Ok(applied)
}

/// Is the schema there and the one this build needs?
pub async fn check(client: &Client) -> Result<(), StoreError> {
    match client
        .query_one("SELECT coalesce(max(version), 0) FROM awt_schema", &[])
        .await
    {
        Ok(row) => {
            let have: i32 = row.get(0);
            match have.cmp(&VERSION) {
                std::cmp::Ordering::Equal => Ok(()),
                std::cmp::Ordering::Less => Err(StoreError::NoSchema(format!(
                    "the task database is at schema version {have}; this animaworks-tool needs {VERSION}"
                ))),
                std::cmp::Ordering::Greater => Err(StoreError::Other(format!(
                    "the task database is at schema version {have}, newer than this animaworks-tool knows ({VERSION}): \
                     upgrade animaworks-tool"
                ))),
            }
        }
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Err(StoreError::NoSchema(
            "the task database has no animaworks-tool schema".into(),
        )),
        Err(e) => Err(StoreError::Db(super::describe(&e))),
    }
}
