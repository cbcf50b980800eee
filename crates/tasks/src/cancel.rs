//! Cancelling a task, for `jobs cancel` and MCP's `tasks/cancel`: a pending task is marked cancelled at once; a
//! running one's worker is asked to stop it (SIGTERM, grace, SIGKILL of the tool's group), and killed where the
//! store can reach it when it does not answer.

use super::{Status, Task, TaskStore};
use awt_core::error::{CallError, ErrorCode};
use serde_json::json;
use std::time::{Duration, Instant};

/// How a cancel ended: the task as it is now, and a remark when it had ended without this cancel.
#[derive(Debug)]
pub struct Cancelled {
    pub task: Task,
    pub remark: Option<String>,
}

fn io_err(what: &str, e: std::io::Error) -> CallError {
    if let Some(pg) = super::pg::StoreError::of(&e) {
        let mut c = pg.to_call_error();
        c.message = format!("{what}: {}", c.message);
        return c;
    }
    CallError::new(ErrorCode::Internal, format!("{what}: {e}"))
        .hint("check that the anima dir's state folder is readable and writable")
}

fn get(store: &dyn TaskStore, id: &str) -> Result<Task, CallError> {
    match store.get(id) {
        Ok(Some(t)) => Ok(t),
        Ok(None) => Err(CallError::new(
            ErrorCode::Usage,
            format!("no task {id:?} in {}", store.location()),
        )),
        Err(e) => Err(io_err(&format!("cannot read task {id}"), e)),
    }
}

/// Cancel task `id` and wait (bounded) until it has ended.
pub async fn cancel(store: &dyn TaskStore, id: &str) -> Result<Cancelled, CallError> {
    let t = get(store, id)?;
    let pending_cancelled = store
        .update(id, &mut |t| {
            if t.status != Status::Pending {
                return false;
            }
            t.finish(Status::Cancelled);
            t.error_code = Some("cancelled".into());
            t.error = Some("cancelled: cancelled before it started".into());
            t.error_detail = Some(json!({"code": "cancelled", "message": "cancelled before it started", "tool": t.tool, "action": t.action}));
            true
        })
        .map_err(|e| io_err("cannot update the task", e))?;
    if let Some(t) = pending_cancelled.filter(|t| t.status == Status::Cancelled && t.pid.is_none()) {
        store.release(id);
        return Ok(Cancelled { task: t, remark: None });
    }
    let t = get(store, id).unwrap_or(t);
    if t.status.is_final() {
        return Ok(Cancelled {
            remark: Some(format!("task {id} has already ended ({})", t.status.as_str())),
            task: t,
        });
    }
    if !store.worker_alive(&t) {
        let _ = store.census();
        let t = get(store, id)?;
        return Ok(Cancelled {
            remark: Some(format!("task {id}'s worker is gone; the task is {}", t.status.as_str())),
            task: t,
        });
    }
    // The worker polls for this request and ends the tool's group: SIGTERM, grace, SIGKILL, every member reaped.
    store
        .request_cancel(id)
        .map_err(|e| io_err("cannot write the cancel request", e))?;
    let patience = awt_sys::reap::GRACE + Duration::from_secs(3);
    let start = Instant::now();
    loop {
        let t = get(store, id)?;
        if t.status.is_final() {
            return Ok(Cancelled { task: t, remark: None });
        }
        if start.elapsed() >= patience {
            break;
        }
        if store.is_local() {
            tokio::time::sleep(Duration::from_millis(25)).await;
        } else {
            store.wait_change(id, Duration::from_millis(500));
        }
    }
    // The worker did not answer: kill it where the store can (its guardian then kills the tool's group); a worker on
    // another machine finds the task taken from it at its next heartbeat and ends the tool there.
    let how = store.kill_worker(&t);
    let t = store
        .update(id, &mut |t| {
            if t.status != Status::Running {
                return false;
            }
            t.finish(Status::Cancelled);
            t.error_code = Some("cancelled".into());
            t.error = Some(format!("cancelled: {how}"));
            t.error_detail = Some(json!({"code": "cancelled", "message": format!("cancelled; {how}"), "tool": t.tool, "action": t.action}));
            true
        })
        .map_err(|e| io_err("cannot update the task", e))?
        .unwrap_or(t);
    store.release(id);
    Ok(Cancelled { task: t, remark: None })
}
