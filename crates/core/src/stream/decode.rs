//! Helpers of the §5 stdout decoder: the shortcut for progress events and the nesting bound of JSON output.

use super::Observer;
use crate::spill::{Spill, SpillTo};
use awt_protocol::{parse_line, Event, Line};
use std::path::PathBuf;

/// [`parse_line`], with a shortcut for the event a tool may send millions of times.
pub(super) fn classify(line: &[u8]) -> Line {
    match super::progress::parse(line) {
        Some(ev) => Line::Event(ev),
        None => parse_line(line),
    }
}

/// How deep JSON on stdout may nest (protocol.md §5): serde_json's own limit, which the runner keeps so that no
/// output can exhaust its stack.
pub const MAX_DEPTH: usize = 127;

pub(super) fn too_deep_message() -> String {
    format!("the output is JSON nested deeper than {MAX_DEPTH} levels of arrays and objects (protocol.md §5.4)")
}

/// The parse failed only because the JSON nests deeper than [`MAX_DEPTH`]: such output is `bad_output`, never
/// text (a valid result must not silently become a string).
pub(super) fn too_deep(e: &serde_json::Error) -> bool {
    e.is_syntax() && e.to_string().starts_with("recursion limit exceeded")
}

/// What stdout held.
#[derive(Debug)]
pub enum Stdout {
    Value(Vec<u8>),
    Events {
        last: Option<Event>,
    },
    /// Past the cap. `path`: the file holding the output (none when it was never to be written); `full`: the
    /// output also passed the disk bound, so the call was ended and the file holds only its first part.
    Capped {
        path: Option<PathBuf>,
        bytes: u64,
        full: bool,
    },
    Bad(String),
    /// The stream ended inside a line, which is not protocol: why (as for `Bad`). A tool killed while writing
    /// leaves such a line; [`super::interpret`] tells the two apart by how the tool ended.
    Cut(String),
}

/// Reads stdout as the protocol says, keeping at most `max` bytes in memory.
pub(super) struct StdoutState<'a> {
    events: bool,
    max: u64,
    spill_to: &'a SpillTo,
    call_id: &'a str,
    value: Vec<u8>,
    line: Vec<u8>,
    spill: Option<Spill>,
    line_spilled: bool,
    capped: Option<(PathBuf, u64)>,
    /// Past the cap with nowhere to write (or the spill failed, or passed its bound): the call must end.
    overflow: Option<u64>,
    last: Option<Event>,
    bad: Option<String>,
}

/// The start of a bad line, for a message: masked whole first, then cut (never cut, then masked: a secret
/// cut in two would no longer be recognised, and its start would be shown).
pub(super) fn quote_start(b: &[u8], m: &crate::policy::Masker) -> String {
    format!("{:?}", m.head(&String::from_utf8_lossy(b), 120).0)
}

impl<'a> StdoutState<'a> {
    pub(super) fn new(events: bool, max: u64, spill_to: &'a SpillTo, call_id: &'a str) -> Self {
        StdoutState {
            events,
            max,
            spill_to,
            call_id,
            value: Vec::new(),
            line: Vec::new(),
            spill: None,
            line_spilled: false,
            capped: None,
            overflow: None,
            last: None,
            bad: None,
        }
    }

    /// The output can no longer be kept (never to be spilled, or the spill is full): stop reading, end the call.
    pub(super) fn must_stop(&self) -> bool {
        self.overflow.is_some() || self.spill.as_ref().is_some_and(|s| s.full)
    }

    /// The call timed out or was cancelled: its partial spill is removed.
    pub(super) fn discard_spill(&mut self) {
        if let Some(sp) = &mut self.spill {
            sp.discard();
        }
        self.spill = None;
        self.capped = None;
    }

    pub(super) fn feed(&mut self, chunk: &[u8], obs: &mut dyn Observer) {
        if let Some(n) = &mut self.overflow {
            *n += chunk.len() as u64;
            return;
        }
        if !self.events {
            if let Some(sp) = &mut self.spill {
                sp.write(chunk);
            } else if (self.value.len() + chunk.len()) as u64 > self.max {
                self.start_spill();
                let held = std::mem::take(&mut self.value);
                if let Some(sp) = &mut self.spill {
                    sp.write(&held);
                    sp.write(chunk);
                }
            } else {
                self.value.extend_from_slice(chunk);
            }
            return;
        }
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', chunk) {
            let piece = &chunk[start..end];
            start = end + 1;
            if self.line_spilled {
                self.finish_spilled_line(piece);
            } else if (self.line.len() + piece.len()) as u64 > self.max {
                self.spill_line(piece);
                self.finish_spilled_line(&[]);
            } else if self.line.is_empty() {
                self.handle_line(piece, obs);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(piece);
                self.handle_line(&line, obs);
                line.clear();
                self.line = line;
            }
        }
        let rest = &chunk[start..];
        if !rest.is_empty() {
            if self.line_spilled {
                if let Some(sp) = &mut self.spill {
                    sp.write(rest);
                }
            } else if (self.line.len() + rest.len()) as u64 > self.max {
                self.spill_line(rest);
            } else {
                self.line.extend_from_slice(rest);
            }
        }
    }

    fn start_spill(&mut self) {
        if self.spill_to.dir.is_none() {
            self.overflow = Some(self.value.len() as u64 + self.line.len() as u64);
            self.value = Vec::new();
            self.line = Vec::new();
            return;
        }
        match self.spill_to.open(self.call_id, self.max) {
            Ok(s) => self.spill = Some(s),
            Err(e) => {
                self.bad = Some(format!(
                    "the output passed the cap of {} bytes and could not be written to {}: {e}",
                    self.max,
                    self.spill_to
                        .dir
                        .as_deref()
                        .unwrap_or(std::path::Path::new(""))
                        .display()
                ));
                self.overflow = Some(0);
            }
        }
    }

    fn spill_line(&mut self, piece: &[u8]) {
        if self.spill.is_none() {
            self.start_spill();
        }
        let held = std::mem::take(&mut self.line);
        if let Some(sp) = &mut self.spill {
            sp.write(&held);
            sp.write(piece);
        }
        self.line_spilled = true;
    }

    fn finish_spilled_line(&mut self, piece: &[u8]) {
        if let Some(sp) = &mut self.spill {
            sp.write(piece);
            sp.write(b"\n");
            self.capped = Some((sp.path.clone(), sp.bytes));
        }
        self.line_spilled = false;
    }

    fn handle_line(&mut self, line: &[u8], obs: &mut dyn Observer) {
        if self.bad.is_some() {
            return;
        }
        match classify(line) {
            Line::Blank => {}
            Line::Event(ev) => {
                if self.last.is_some() {
                    self.bad = Some(format!(
                        "output after the final event: {}",
                        quote_start(line, &self.spill_to.masker)
                    ));
                    return;
                }
                obs.event(&ev, line);
                if ev.is_final() {
                    self.last = Some(ev);
                }
            }
            Line::Unknown(_) => obs.unknown(line),
            Line::NotProtocol(why) => {
                self.bad = Some(if why.contains("recursion limit exceeded") {
                    format!("{}: {}", too_deep_message(), quote_start(line, &self.spill_to.masker))
                } else if std::str::from_utf8(line).is_err() {
                    format!("invalid UTF-8 on stdout: {}", quote_start(line, &self.spill_to.masker))
                } else {
                    format!(
                        "non-protocol output on stdout ({why}): {}",
                        quote_start(line, &self.spill_to.masker)
                    )
                });
            }
        }
    }

    pub(super) fn finish(mut self, obs: &mut dyn Observer) -> Stdout {
        if let Some(sp) = &mut self.spill {
            sp.finish();
        }
        if let Some(bytes) = self.overflow.filter(|_| self.bad.is_none()) {
            return Stdout::Capped {
                path: None,
                bytes,
                full: true,
            };
        }
        if let Some(sp) = self.spill.as_ref().filter(|s| s.full) {
            return Stdout::Capped {
                path: Some(sp.path.clone()),
                bytes: sp.bytes,
                full: true,
            };
        }
        if self.events {
            if self.line_spilled {
                self.finish_spilled_line(&[]);
            } else if !self.line.is_empty() {
                let line = std::mem::take(&mut self.line);
                let earlier = self.bad.is_some();
                self.handle_line(&line, obs);
                if let Some(b) = self.bad.take().filter(|_| !earlier) {
                    return Stdout::Cut(b);
                }
            }
            if let Some(b) = self.bad {
                return Stdout::Bad(b);
            }
            if let Some((path, bytes)) = self.capped {
                return Stdout::Capped {
                    path: Some(path),
                    bytes,
                    full: false,
                };
            }
            return Stdout::Events { last: self.last };
        }
        if let Some(b) = self.bad {
            return Stdout::Bad(b);
        }
        match self.spill {
            Some(sp) => Stdout::Capped {
                path: Some(sp.path),
                bytes: sp.bytes,
                full: false,
            },
            None => Stdout::Value(self.value),
        }
    }
}

/// One call's event lines from a persistent worker (protocol.md §9), read with the same rules and output cap as a
/// one-shot call's stdout. The worker's stdout outlives the call, so the caller feeds chunks and stops at
/// [`EventLines::ended`].
pub struct EventLines<'a>(StdoutState<'a>);

impl<'a> EventLines<'a> {
    pub fn new(max_output: u64, spill: &'a SpillTo, call_id: &'a str) -> Self {
        EventLines(StdoutState::new(true, max_output, spill, call_id))
    }
    /// The call timed out or was cancelled: its partial spill is removed.
    pub fn discard_spill(&mut self) {
        self.0.discard_spill();
    }
    pub fn feed(&mut self, chunk: &[u8], obs: &mut dyn Observer) {
        self.0.feed(chunk, obs);
        obs.flush();
    }
    /// A final event, a protocol error or a capped line was seen: the call is over.
    pub fn ended(&self) -> bool {
        self.0.last.is_some() || self.0.bad.is_some() || self.0.capped.is_some() || self.0.must_stop()
    }
    pub fn finish(self, obs: &mut dyn Observer) -> Stdout {
        self.0.finish(obs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound protocol.md states is the one serde_json enforces, and its error is still recognised.
    #[test]
    fn depth_bound_is_serde_jsons() {
        let nest = |d: usize| format!("{}{}", "[".repeat(d), "]".repeat(d));
        assert!(serde_json::from_str::<serde_json::Value>(&nest(MAX_DEPTH)).is_ok());
        let e = serde_json::from_str::<serde_json::Value>(&nest(MAX_DEPTH + 1)).unwrap_err();
        assert!(too_deep(&e), "{e}");
        let other = serde_json::from_str::<serde_json::Value>("[1,").unwrap_err();
        assert!(!too_deep(&other));
        match parse_line(format!("{{\"type\":\"result\",\"result\":{}}}", nest(MAX_DEPTH)).as_bytes()) {
            Line::NotProtocol(why) => assert!(why.contains("recursion limit exceeded"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
