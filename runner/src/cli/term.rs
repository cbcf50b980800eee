//! What a tool says reaches a person's terminal only as text: its control sequences (OSC 52 clipboard writes,
//! window titles, screen clears, cursor moves that forge output, bidi overrides that reorder a line) are shown
//! as visible escapes instead of being obeyed. Only when the runner writes to a terminal: pipes, files, JSON and
//! `--events` stay exact.

use std::borrow::Cow;
use std::io::IsTerminal;

/// A character a terminal would act on rather than show: C0 controls but newline and tab, DEL, C1 controls, and
/// the Unicode bidi embeddings, overrides and isolates.
fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn shown(c: char, out: &mut String) {
    match c as u32 {
        n @ 0..=0x1f => {
            out.push('^');
            out.push((b'@' + n as u8) as char);
        }
        0x7f => out.push_str("^?"),
        n => out.push_str(&format!("<U+{n:04X}>")),
    }
}

/// `s` with every control character made visible (`ESC` → `^[`, `U+009B` → `<U+009B>`).
pub fn clean(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_control(c) {
            shown(c, &mut out);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`clean`] when stdout is a terminal, else `s` unchanged.
pub fn for_stdout(s: &str) -> Cow<'_, str> {
    if std::io::stdout().is_terminal() {
        clean(s)
    } else {
        Cow::Borrowed(s)
    }
}

/// [`clean`] when stderr is a terminal, else `s` unchanged.
pub fn for_stderr(s: &str) -> Cow<'_, str> {
    if std::io::stderr().is_terminal() {
        clean(s)
    } else {
        Cow::Borrowed(s)
    }
}

/// Cleans a byte stream that arrives in pieces (a tool's stderr): a character split across pieces is held until
/// it is whole; bytes that are not UTF-8 are shown as U+FFFD.
#[derive(Debug, Default)]
pub struct CleanStream {
    carry: Vec<u8>,
}

impl CleanStream {
    pub fn push(&mut self, piece: &[u8]) -> String {
        self.carry.extend_from_slice(piece);
        let buf = std::mem::take(&mut self.carry);
        // Hold back an incomplete last character (at most 3 bytes) for the next piece.
        let keep = match std::str::from_utf8(&buf) {
            Ok(_) => 0,
            Err(e) if e.error_len().is_none() => buf.len() - e.valid_up_to(),
            Err(_) => 0,
        };
        let (now, later) = buf.split_at(buf.len() - keep);
        self.carry = later.to_vec();
        clean(&String::from_utf8_lossy(now)).into_owned()
    }

    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.carry);
        clean(&String::from_utf8_lossy(&rest)).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_become_visible() {
        assert_eq!(clean("a\x1b]52;c;aGk=\x07b"), "a^[]52;c;aGk=^Gb");
        assert_eq!(clean("x\u{9b}2J\u{202e}y\r"), "x<U+009B>2J<U+202E>y^M");
        assert_eq!(clean("plain\ttext\nünï"), "plain\ttext\nünï");
        let mut s = CleanStream::default();
        let bytes = "é\u{9b}".as_bytes();
        let mut out = String::new();
        for b in bytes {
            out.push_str(&s.push(&[*b]));
        }
        out.push_str(&s.finish());
        assert_eq!(out, "é<U+009B>");
    }
}
