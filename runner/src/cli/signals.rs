//! Ctrl-C and SIGTERM as a call's cancellation.

use awt_core::stream::Cancel;

/// Cancel on Ctrl-C or SIGTERM: the tool's group is ended the same way as at a deadline.
pub fn cancel_on_signals() -> Cancel {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, cancel) = Cancel::new();
    // Why the listeners are made here and not in the task: a Ctrl-C between spawning the tool and the task's
    // first poll must already be ours, not the default (which would kill the runner with no answer).
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return cancel;
    };
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        let _ = tx.send(true);
        std::future::pending::<()>().await
    });
    cancel
}
