//! Which children this process started itself and reaps itself: [`crate::reap::reap_orphans`] leaves them alone.

/// Children this process started itself and reaps itself (through tokio or a waiting thread), by pid.
static OWN: std::sync::Mutex<std::collections::BTreeSet<i32>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Held (shared) by every start of a child we reap ourselves, from before its fork or clone until its pid is
/// [`own`]ed; [`crate::reap::reap_orphans`] runs only when it can take it alone. Without it, a child that exited in the
/// moment between its start and `own` could be reaped as an orphan, and its owner would see no status.
pub(crate) static STARTING: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Start a child with `start` and register its pid (`pid`) as ours before [`crate::reap::reap_orphans`] can see it exit.
pub fn start_owned<T, E>(start: impl FnOnce() -> Result<T, E>, pid: impl FnOnce(&T) -> Option<u32>) -> Result<T, E> {
    let _starting = STARTING.read().unwrap_or_else(|e| e.into_inner());
    let child = start()?;
    if let Some(p) = pid(&child) {
        own(p);
    }
    Ok(child)
}

/// `pid` is a child we started and will reap ourselves: [`crate::reap::reap_orphans`] must leave it alone. Call it through
/// [`start_owned`].
fn own(pid: u32) {
    OWN.lock().unwrap_or_else(|e| e.into_inner()).insert(pid as i32);
}

/// `pid` has been reaped by its owner.
pub fn disown(pid: u32) {
    OWN.lock().unwrap_or_else(|e| e.into_inner()).remove(&(pid as i32));
}


/// Whether `pid` is a child that its owner reaps.
pub(crate) fn is_own(pid: i32) -> bool {
    OWN.lock().unwrap_or_else(|e| e.into_inner()).contains(&pid)
}
