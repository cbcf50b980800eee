//! A shortcut for `progress` events, the one event a tool may send millions of times. serde's internally tagged
//! `Event` first buffers every line as a generic tree, which cost most of the event path's time (2§8c).
//!
//! [`parse`] answers only progress events written in plain JSON (members `type`, `progress`, `total`, `message`,
//! `call_id`; strings without escapes), as the SDKs write them, and returns `None` whenever it is not sure;
//! [`awt_protocol::parse_line`] then decides. An event it does return is exactly
//! the one `parse_line` returns: the tests below hold it to that, on a table of edge cases and on generated lines.

use awt_protocol::Event;

/// The `progress` event on this line, or `None` to let the full parser decide.
pub(super) fn parse(line: &[u8]) -> Option<Event> {
    let mut p = Cursor(line.trim_ascii());
    p.eat(b'{')?;
    let (mut kind, mut progress, mut total, mut message, mut call_id) = (false, None, None, None, None);
    loop {
        p.skip_ws();
        // Keys are matched whole, quotes included: an escaped or unknown key is not for the shortcut.
        let fresh = if p.literal(br#""progress""#) {
            p.eat(b':')?;
            progress.replace(p.number_or_null()?).is_none()
        } else if p.literal(br#""type""#) {
            p.eat(b':')?;
            p.skip_ws();
            p.literal(br#""progress""#) && !std::mem::replace(&mut kind, true)
        } else if p.literal(br#""total""#) {
            p.eat(b':')?;
            total.replace(p.number_or_null()?).is_none()
        } else if p.literal(br#""message""#) {
            p.eat(b':')?;
            message.replace(p.text_or_null()?).is_none()
        } else if p.literal(br#""call_id""#) {
            p.eat(b':')?;
            call_id.replace(p.text_or_null()?).is_none()
        } else {
            return None;
        };
        if !fresh {
            return None;
        }
        if p.eat(b',').is_none() {
            p.eat(b'}')?;
            break;
        }
    }
    if !p.0.is_empty() || !kind {
        return None;
    }
    Some(Event::Progress {
        // `"progress": null` is an error for the full parser: let it say so.
        progress: progress??,
        total: total.flatten(),
        message: message.flatten(),
        call_id: call_id.flatten(),
    })
}

/// The plain subset of JSON a progress event is written in: strings without escapes, numbers, `null`.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn skip_ws(&mut self) {
        while let [b' ' | b'\t' | b'\r' | b'\n', rest @ ..] = self.0 {
            self.0 = rest;
        }
    }

    /// The next token is `c` (after whitespace).
    fn eat(&mut self, c: u8) -> Option<()> {
        self.skip_ws();
        self.0 = self.0.strip_prefix(&[c])?;
        Some(())
    }

    /// The input continues with `lit` (no whitespace skipped), which is consumed.
    fn literal(&mut self, lit: &[u8]) -> bool {
        match self.0.strip_prefix(lit) {
            Some(rest) => {
                self.0 = rest;
                true
            }
            None => false,
        }
    }

    fn null(&mut self) -> bool {
        self.skip_ws();
        self.literal(b"null")
    }

    /// A string without escapes or control characters, as its bytes (not yet checked to be UTF-8).
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        // Why not memchr: these strings are a few bytes long, shorter than its set-up.
        for (i, &c) in self.0.iter().enumerate() {
            match c {
                b'"' => {
                    let s = &self.0[..i];
                    self.0 = &self.0[i + 1..];
                    return Some(s);
                }
                b'\\' | 0..0x20 => return None,
                _ => {}
            }
        }
        None
    }

    fn text_or_null(&mut self) -> Option<Option<String>> {
        if self.null() {
            return Some(None);
        }
        let s = self.string()?;
        Some(Some(std::str::from_utf8(s).ok()?.to_owned()))
    }

    /// A number. Short integers are exact in an f64; any other number is read by serde_json itself, so the value
    /// is the one the full parser gets.
    fn number_or_null(&mut self) -> Option<Option<f64>> {
        if self.null() {
            return Some(None);
        }
        let end = self
            .0
            .iter()
            .position(|c| !matches!(c, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .unwrap_or(self.0.len());
        let tok = &self.0[..end];
        let short_int = (1..=15).contains(&tok.len()) && tok.iter().all(u8::is_ascii_digit);
        let v = if short_int && (tok[0] != b'0' || tok.len() == 1) {
            tok.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')) as f64
        } else {
            serde_json::from_slice::<f64>(tok).ok()?
        };
        self.0 = &self.0[end..];
        Some(Some(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use awt_protocol::{parse_line, Line};

    fn agrees(line: &[u8]) -> Option<Event> {
        let fast = parse(line);
        if let Some(ev) = &fast {
            assert_eq!(
                parse_line(line),
                Line::Event(ev.clone()),
                "{}",
                String::from_utf8_lossy(line)
            );
            if let (Event::Progress { progress: a, .. }, Line::Event(Event::Progress { progress: b, .. })) =
                (ev, parse_line(line))
            {
                assert_eq!(a.to_bits(), b.to_bits(), "{}", String::from_utf8_lossy(line));
            }
        }
        fast
    }

    #[test]
    fn table() {
        let answered: &[&[u8]] = &[
            br#"{"type":"progress","progress":1}"#,
            br#"  {"type":"progress","progress":0.5,"total":2,"message":"half"}  "#,
            br#"{"type":"progress","progress":1,"total":null,"message":null,"call_id":"c-1"}"#,
            br#"{"type":"progress","progress":-0,"total":18446744073709551616}"#,
            br#"{"type":"progress","progress":123456789.123456789e-5}"#,
            br#"{"type":"progress","progress":999999999999999,"total":1E2}"#,
            br#"{ "type" : "progress" , "progress" : 1 ,	"total":3 }"#,
            b"{\"progress\":1,\"message\":\"caf\xc3\xa9 \xe6\x97\xa5 \x7f\",\"type\":\"progress\"}",
        ];
        let refused: &[&[u8]] = &[
            br#"{"type":"progress","progress":1e3,"extra":1}"#,
            br#"{"type":"progress","pro\u0067ress":3}"#,
            br#"{"type":"progress","progress":1,"message":"q \"q\""}"#,
            br#"{"type":"progress","progress":1,"type":"log"}"#,
            br#"{"type":"progress","progress":1,"type":"progress"}"#,
            br#"{"type":"progress","progress":1,"progress":2}"#,
            br#"{"type":"progress","total":2}"#,
            br#"{"type":"progress","progress":null}"#,
            br#"{"type":"progress","progress":"1"}"#,
            br#"{"type":"progress","progress":01}"#,
            br#"{"type":"progress","progress":1.}"#,
            br#"{"type":"progress","progress":--1}"#,
            br#"{"type":"progress","progress":1,"message":5}"#,
            br#"{"type":"progress","progress":1e999}"#,
            br#"{"type":"progress","progress":1} x"#,
            br#"{"type":"progress","progress":1}}"#,
            br#"{"type":"progress","progress":1,}"#,
            br#"{"type":"prog\u0072ess","progress":1}"#,
            b"{\"type\":\"progress\",\"progress\":1,\"message\":\"\xff\"}",
            b"{\"type\":\"progress\",\"progress\":1,\"message\":\"a\tb\"}",
            br#"{"type":"log","message":"m"}"#,
            br#"{"type":"result","result":1}"#,
            b"",
        ];
        for l in answered {
            assert!(agrees(l).is_some(), "{}", String::from_utf8_lossy(l));
        }
        for l in refused {
            assert!(agrees(l).is_none(), "{}", String::from_utf8_lossy(l));
        }
    }

    /// Lines built from fragments near the shortcut's edges: wherever it answers, it answers as parse_line.
    #[test]
    fn generated() {
        const KEYS: &[&str] = &[
            "progress",
            "total",
            "message",
            "call_id",
            "level",
            "type",
            "pro\\u0067ress",
        ];
        const NUMBERS: &[&str] = &[
            "1",
            "0",
            "-0",
            "007",
            "1.5",
            "-2.25e-3",
            "1e400",
            "1E+2",
            "12345678901234567",
            "0.1",
            "1.",
            "-",
            "null",
            "999999999999999",
            "1000000000000000",
            "4.9e-324",
            "1.7976931348623157e308",
            "2.5E-0",
        ];
        const TEXTS: &[&str] = &[
            "\"x\"",
            "\"a b-c_1\"",
            "\"\\u00e9\"",
            "\"\\\"\"",
            "\"\"",
            "\"\u{e9}\u{65e5}\"",
            "null",
            "\"a\u{7f}\"",
            "\"progress\"",
            "true",
            "[]",
            "{}",
            "{\"a\":[1]}",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut answered = 0;
        for _ in 0..20_000 {
            let mut members = vec![r#""type":"progress""#.to_owned()];
            members.push(format!(r#""progress":{}"#, NUMBERS[next(NUMBERS.len())]));
            for _ in 0..next(4) {
                let key = KEYS[[0, 1, 1, 2, 2, 3, 3, 4, 5, 6][next(10)]];
                let numeric = matches!(key, "progress" | "total") ^ (next(8) == 0);
                let v = if numeric {
                    NUMBERS[next(NUMBERS.len())]
                } else {
                    TEXTS[next(TEXTS.len())]
                };
                members.push(format!("\"{key}\":{v}"));
            }
            let (i, j) = (next(members.len()), next(members.len()));
            members.swap(i, j);
            let sep = [",", ",", ", ", " ,\t"][next(4)];
            let mut line = format!("{}{}", ["{", "{", " { "][next(3)], members.join(sep));
            line.push_str(["}", "}", "} ", "}x", ",}", "\t}"][next(6)]);
            if agrees(line.as_bytes()).is_some() {
                answered += 1;
            }
        }
        assert!(answered > 2000, "the generator must reach the shortcut: {answered}");
    }
}
