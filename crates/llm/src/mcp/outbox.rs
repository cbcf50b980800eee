//! A call's notifications on their way to the client, in the order the tool sent them, bounded: the tool writes
//! at its pace, the client reads at its own, and what waits between them is at most [`MAX_PROGRESS`] progress
//! notifications and [`MAX_LOGS`] log messages of at most [`MAX_LOG_BYTES`] in all. A client that keeps up gets
//! every one. Past the progress bound the oldest waiting progress gives way to the newest (progress is a state:
//! the latest says all); a log message past either bound is dropped and counted, and the client is told how many
//! before the next one it gets.

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam};
use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::sync::Notify;

/// The most progress notifications waiting for the client; below it none is merged.
pub(crate) const MAX_PROGRESS: usize = 64;
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
    /// Each note with its log bytes (0 for progress).
    notes: VecDeque<(Note, usize)>,
    progress: usize,
    logs: usize,
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
            Note::Progress(p) => {
                if w.progress >= MAX_PROGRESS {
                    let oldest = w.notes.iter().position(|(n, _)| matches!(n, Note::Progress(_)));
                    if let Some(i) = oldest {
                        w.notes.remove(i);
                        w.progress -= 1;
                    }
                }
                w.progress += 1;
                w.notes.push_back((Note::Progress(p), 0));
            }
            Note::Log(l) => {
                let size = match &l.data {
                    serde_json::Value::String(s) => s.len(),
                    v => v.to_string().len(),
                };
                if w.logs >= MAX_LOGS || w.bytes + size > MAX_LOG_BYTES {
                    w.dropped += 1;
                    return;
                }
                w.logs += 1;
                w.bytes += size;
                w.notes.push_back((Note::Log(l), size));
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

    /// The next note to send, waiting for one; `None` once closed and empty. Notes keep their order; the count of
    /// dropped log messages comes first, as a warning from `logger`.
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
                if let Some((n, size)) = w.notes.pop_front() {
                    match n {
                        Note::Progress(_) => w.progress -= 1,
                        Note::Log(_) => {
                            w.logs -= 1;
                            w.bytes -= size;
                        }
                    }
                    return Some(n);
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
    fn waiting(&self) -> (usize, usize, usize) {
        let w = self.waiting.lock().unwrap();
        (w.logs, w.bytes, w.progress)
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

    fn progress(i: usize) -> Note {
        let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
        Note::Progress(ProgressNotificationParam::new(token, i as f64))
    }

    /// A client that reads nothing: what waits stays bounded, only the newest progress is kept past its bound,
    /// and the count of dropped logs reaches the client first once it reads.
    #[tokio::test]
    async fn what_waits_for_a_slow_client_is_bounded() {
        let o = Outbox::default();
        for i in 0..10_000 {
            o.put(log(i, 2048));
            o.put(progress(i));
        }
        let (logs, bytes, waiting) = o.waiting();
        assert!(logs <= MAX_LOGS && bytes <= MAX_LOG_BYTES, "{logs} logs, {bytes} bytes");
        assert_eq!(waiting, MAX_PROGRESS);
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
        let newest: Vec<f64> = (10_000 - MAX_PROGRESS..10_000).map(|i| i as f64).collect();
        assert_eq!(progress, newest);
    }

    /// Below the bounds nothing is merged or dropped, even when the client has read none yet: every note comes
    /// out, in the order it was put.
    #[tokio::test]
    async fn below_the_bound_nothing_is_merged() {
        let o = Outbox::default();
        for i in 0..MAX_PROGRESS {
            o.put(progress(i));
            if i % 3 == 0 {
                o.put(log(i, 8));
            }
        }
        o.close();
        let mut seen = Vec::new();
        while let Some(n) = o.next("t").await {
            seen.push(match n {
                Note::Progress(p) => format!("p{}", p.progress),
                Note::Log(l) => format!("l{}", l.data.as_str().unwrap().parse::<usize>().unwrap()),
            });
        }
        let mut want = Vec::new();
        for i in 0..MAX_PROGRESS {
            want.push(format!("p{i}"));
            if i % 3 == 0 {
                want.push(format!("l{i}"));
            }
        }
        assert_eq!(seen, want);
    }
}
