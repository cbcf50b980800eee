//! A call's notifications on their way to the client, bounded: the tool writes at its pace, the client reads at
//! its own, and what waits between them is at most one progress notification (the latest: a newer one replaces
//! it) and [`MAX_LOGS`] log messages of at most [`MAX_LOG_BYTES`] in all. A log message past either bound is
//! dropped and counted, and the client is told how many before the next one it gets.

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam};
use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::sync::Notify;

/// The most log messages waiting for the client.
pub(crate) const MAX_LOGS: usize = 256;
/// The most bytes of log data waiting for the client.
pub(crate) const MAX_LOG_BYTES: usize = 4 << 20;

/// What a call sends the client besides its result.
pub(crate) enum Note {
    Progress(ProgressNotificationParam),
    Log(LoggingMessageNotificationParam),
}

#[derive(Default)]
struct Waiting {
    progress: Option<ProgressNotificationParam>,
    logs: VecDeque<(LoggingMessageNotificationParam, usize)>,
    bytes: usize,
    dropped: u64,
    closed: bool,
}

/// Shared by the call's observer (which puts) and the task that sends (which takes).
#[derive(Default)]
pub(crate) struct Outbox {
    waiting: Mutex<Waiting>,
    ready: Notify,
}

impl Outbox {
    /// Queue `note`; never waits.
    pub(crate) fn put(&self, note: Note) {
        let mut w = self.waiting.lock().expect("outbox lock");
        match note {
            Note::Progress(p) => w.progress = Some(p),
            Note::Log(l) => {
                let size = match &l.data {
                    serde_json::Value::String(s) => s.len(),
                    v => v.to_string().len(),
                };
                if w.logs.len() >= MAX_LOGS || w.bytes + size > MAX_LOG_BYTES {
                    w.dropped += 1;
                    return;
                }
                w.bytes += size;
                w.logs.push_back((l, size));
            }
        }
        drop(w);
        self.ready.notify_one();
    }

    /// No more notes will come: [`Outbox::next`] ends once the queue is empty.
    pub(crate) fn close(&self) {
        self.waiting.lock().expect("outbox lock").closed = true;
        self.ready.notify_one();
    }

    /// The next note to send, waiting for one; `None` once closed and empty. Logs keep their order; the count of
    /// dropped ones comes first, as a warning from `logger`.
    pub(crate) async fn next(&self, logger: &str) -> Option<Note> {
        loop {
            {
                let mut w = self.waiting.lock().expect("outbox lock");
                if w.dropped > 0 {
                    let n = std::mem::take(&mut w.dropped);
                    let text = format!(
                        "{n} log message(s) of this call dropped: the client read them slower than the tool wrote them"
                    );
                    return Some(Note::Log(
                        LoggingMessageNotificationParam::new(LoggingLevel::Warning, text.into()).with_logger(logger),
                    ));
                }
                if let Some((l, size)) = w.logs.pop_front() {
                    w.bytes -= size;
                    return Some(Note::Log(l));
                }
                if let Some(p) = w.progress.take() {
                    return Some(Note::Progress(p));
                }
                if w.closed {
                    return None;
                }
            }
            // A permit stored by a `put` between the check and here wakes this at once.
            self.ready.notified().await;
        }
    }

    #[cfg(test)]
    fn waiting(&self) -> (usize, usize, bool) {
        let w = self.waiting.lock().unwrap();
        (w.logs.len(), w.bytes, w.progress.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ProgressToken;

    fn log(i: usize, size: usize) -> Note {
        Note::Log(LoggingMessageNotificationParam::new(
            LoggingLevel::Info,
            format!("{i:0size$}").into(),
        ))
    }

    /// A client that reads nothing: what waits stays bounded, progress is merged to the latest, and the count of
    /// dropped logs reaches the client first once it reads.
    #[tokio::test]
    async fn what_waits_for_a_slow_client_is_bounded() {
        let o = Outbox::default();
        for i in 0..10_000 {
            o.put(log(i, 2048));
            let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
            o.put(Note::Progress(ProgressNotificationParam::new(token, i as f64)));
        }
        let (logs, bytes, progress) = o.waiting();
        assert!(logs <= MAX_LOGS && bytes <= MAX_LOG_BYTES, "{logs} logs, {bytes} bytes");
        assert!(progress);
        o.close();
        let Some(Note::Log(first)) = o.next("t").await else {
            panic!("no first note")
        };
        let text = first.data.as_str().unwrap().to_owned();
        assert!(text.starts_with(&format!("{} log message(s)", 10_000 - logs)), "{text}");
        let (mut kept, mut progress) = (0, Vec::new());
        while let Some(n) = o.next("t").await {
            match n {
                Note::Log(_) => kept += 1,
                Note::Progress(p) => progress.push(p.progress),
            }
        }
        assert_eq!(kept, logs);
        assert_eq!(progress, vec![9_999.0]);
    }
}
