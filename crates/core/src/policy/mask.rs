//! Hides resolved secrets in anything the runner shows or records (audit args, error messages, stderr tails).

use serde_json::Value;

/// The text that replaces a secret.
pub const MASK: &str = "***";

/// Secrets shorter than this many characters (after trimming whitespace) are not masked.
///
/// Why: replacing every `1`, `on` or `abc` in a result would shred ordinary text and would itself tell which
/// short string the secret is; a secret that short protects nothing anyway.
pub const MIN_SECRET_CHARS: usize = 4;

/// Holds the secret values of one call and replaces every occurrence of them with [`MASK`].
///
/// The rule: for each secret of at least [`MIN_SECRET_CHARS`] characters, the value as given, the value with
/// surrounding whitespace trimmed (a token read from a file often ends in a newline), and the value as it
/// appears inside a JSON string (quotes, backslashes and control characters escaped) are all replaced.
/// Longer needles are replaced first, so a secret that contains another is masked whole. Object keys are
/// masked as well as string values. Masking is by exact substring; a secret re-encoded by the tool (base64,
/// URL-encoding) is not recognised.
#[derive(Debug, Clone, Default)]
pub struct Masker {
    needles: Vec<String>,
    /// Values handed out while the call runs (the credential broker), shared with it: each is added before the
    /// tool can have it, so before any output that could hold it is read.
    late: Option<LateSecrets>,
}

/// Secrets a masker learns after it was built (see [`Masker::with_late`]).
#[derive(Debug, Clone, Default)]
pub struct LateSecrets(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl LateSecrets {
    /// Adds a value; every masker sharing this list masks it from now on.
    pub fn add(&self, secret: &str) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !v.iter().any(|x| x == secret) {
            v.push(secret.to_owned());
        }
    }
}

impl Masker {
    /// A masker for these secret values (empty and too-short ones are skipped, as documented on [`Masker`]).
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut m = Masker::default();
        for s in secrets {
            m.add(s.as_ref());
        }
        m
    }

    /// This masker, also masking every value added to `late` at any time.
    pub fn with_late(mut self, late: LateSecrets) -> Self {
        self.late = Some(late);
        self
    }

    /// The masker with the late values folded in, when there are any.
    fn snapshot(&self) -> Option<Masker> {
        let late = self.late.as_ref()?.0.lock().unwrap_or_else(|e| e.into_inner());
        if late.is_empty() {
            return None;
        }
        let mut m = Masker {
            needles: self.needles.clone(),
            late: None,
        };
        for s in late.iter() {
            m.add(s);
        }
        Some(m)
    }

    /// Adds one more secret value.
    pub fn add(&mut self, secret: &str) {
        let trimmed = secret.trim();
        if trimmed.chars().count() < MIN_SECRET_CHARS {
            return;
        }
        let escaped = serde_json::to_string(trimmed).expect("a str always serialises");
        let escaped = &escaped[1..escaped.len() - 1];
        for n in [secret, trimmed, escaped] {
            if !self.needles.iter().any(|x| x == n) {
                self.needles.push(n.to_string());
            }
        }
        // Longest first, so that a secret containing another is replaced whole.
        self.needles
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    /// `true` when there is nothing to mask (a masker with late values to come is never empty).
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty() && self.late.is_none()
    }

    /// `s` with every secret replaced by [`MASK`].
    pub fn mask_str(&self, s: &str) -> String {
        if let Some(m) = self.snapshot() {
            return m.mask_str(s);
        }
        let mut out = s.to_string();
        for n in &self.needles {
            if out.contains(n.as_str()) {
                out = out.replace(n.as_str(), MASK);
            }
        }
        out
    }

    /// Does `bytes` hold a secret (raw bytes: a block's decoded base64, which [`Masker::mask_str`] cannot see)?
    pub fn found_in(&self, bytes: &[u8]) -> bool {
        if let Some(m) = self.snapshot() {
            return m.found_in(bytes);
        }
        self.needles
            .iter()
            .any(|n| memchr::memmem::find(bytes, n.as_bytes()).is_some())
    }

    /// A copy of `v` with every secret in every string (values and object keys) replaced by [`MASK`].
    pub fn mask_value(&self, v: &Value) -> Value {
        let mut v = v.clone();
        self.mask_value_in_place(&mut v);
        v
    }

    /// Replaces every secret in `v`'s strings (values and object keys) with [`MASK`], in place.
    pub fn mask_value_in_place(&self, v: &mut Value) {
        if self.is_empty() {
            return;
        }
        if let Some(m) = self.snapshot() {
            return m.mask_value_in_place(v);
        }
        match v {
            Value::String(s) => {
                let m = self.mask_str(s);
                if m != *s {
                    *s = m;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.mask_value_in_place(x)),
            Value::Object(o) => {
                let old = std::mem::take(o);
                for (k, mut x) in old {
                    self.mask_value_in_place(&mut x);
                    o.insert(self.mask_str(&k), x);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// An excerpt of `s` from its start: masked whole first, then cut to at most `max` bytes (on a character
    /// boundary), and when it was cut, without a trailing start of any secret: no fragment of a secret survives
    /// the cut. Returns the excerpt and whether it was cut.
    pub fn head(&self, s: &str, max: usize) -> (String, bool) {
        let masked = self.mask_str(s);
        if masked.len() <= max {
            return (masked, false);
        }
        let cut = (0..=max).rev().find(|i| masked.is_char_boundary(*i)).unwrap_or(0);
        (self.without_partial_end(&masked[..cut]).to_owned(), true)
    }

    /// `s` (already masked, and cut at its end) without a trailing part that starts a secret.
    pub fn without_partial_end<'a>(&self, s: &'a str) -> &'a str {
        let b = s.as_bytes();
        let mut end = b.len();
        for n in &self.needles {
            let n = n.as_bytes();
            if let Some(k) = (1..n.len().min(b.len() + 1)).rev().find(|k| b.ends_with(&n[..*k])) {
                end = end.min(b.len() - k);
            }
        }
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        &s[..end]
    }

    /// `s` (already masked, and cut at its start) without a leading part that ends a secret.
    pub fn without_partial_start<'a>(&self, s: &'a str) -> &'a str {
        let b = s.as_bytes();
        let mut start = 0;
        for n in &self.needles {
            let n = n.as_bytes();
            if let Some(k) = (1..n.len().min(b.len() + 1))
                .rev()
                .find(|k| b.starts_with(&n[n.len() - *k..]))
            {
                start = start.max(k);
            }
        }
        while !s.is_char_boundary(start) {
            start += 1;
        }
        &s[start..]
    }

    /// The longest byte length of a needle (0 when there is nothing to mask).
    pub fn longest(&self) -> usize {
        if let Some(m) = self.snapshot() {
            return m.longest();
        }
        self.needles.first().map_or(0, String::len)
    }

    /// The needle that starts `hay`, longest first.
    fn needle_at(&self, hay: &[u8]) -> Option<usize> {
        self.needles
            .iter()
            .find(|n| hay.starts_with(n.as_bytes()))
            .map(String::len)
    }
}

/// Masks a byte stream that arrives in pieces (a tool's stderr, a spilled output): a secret split anywhere
/// across pieces is masked all the same. It holds back at most [`Masker::longest`] − 1 bytes, the only bytes
/// that might still turn out to start a secret, until the next piece or [`StreamMasker::finish`].
#[derive(Debug, Clone)]
pub struct StreamMasker {
    masker: Masker,
    carry: Vec<u8>,
}

impl StreamMasker {
    pub fn new(masker: &Masker) -> StreamMasker {
        StreamMasker {
            masker: masker.clone(),
            carry: Vec::new(),
        }
    }

    /// `true` when nothing is ever masked (every piece passes unchanged and nothing is held back).
    pub fn is_empty(&self) -> bool {
        self.masker.is_empty()
    }

    /// The next piece; appends to `out` what can be shown now, masked.
    pub fn push(&mut self, piece: &[u8], out: &mut Vec<u8>) {
        if self.masker.is_empty() {
            out.extend_from_slice(piece);
            return;
        }
        // Values the broker handed out so far are needles too.
        let snap = self.masker.snapshot();
        let m = snap.as_ref().unwrap_or(&self.masker);
        if m.needles.is_empty() {
            out.append(&mut self.carry);
            out.extend_from_slice(piece);
            return;
        }
        self.carry.extend_from_slice(piece);
        let keep = m.longest();
        let buf = std::mem::take(&mut self.carry);
        // Why hold back from the first place where the rest is the start of a secret: the next piece may complete
        // it (or a longer secret that wins over a shorter one). Ordinary text waits for nothing.
        let settled = (buf.len().saturating_sub(keep - 1)..buf.len())
            .find(|&j| m.needles.iter().any(|n| n.as_bytes().starts_with(&buf[j..])))
            .unwrap_or(buf.len());
        let i = Self::mask_until(m, &buf, settled, out);
        self.carry = buf[i..].to_vec();
    }

    /// Masks `buf` from its start up to `end` (or past it, when a secret starts before `end`) into `out`; returns
    /// where it stopped.
    fn mask_until(m: &Masker, buf: &[u8], end: usize, out: &mut Vec<u8>) -> usize {
        let (mut i, mut plain) = (0, 0);
        while i < end {
            if let Some(n) = m.needle_at(&buf[i..]) {
                out.extend_from_slice(&buf[plain..i]);
                out.extend_from_slice(MASK.as_bytes());
                i += n;
                plain = i;
            } else {
                i += 1;
            }
        }
        out.extend_from_slice(&buf[plain..i]);
        i
    }

    /// The end of the stream: appends what was held back, masked.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        let buf = std::mem::take(&mut self.carry);
        let snap = self.masker.snapshot();
        Self::mask_until(snap.as_ref().unwrap_or(&self.masker), &buf, buf.len(), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_every_occurrence_in_strings_and_values() {
        let m = Masker::new(["tok-123", "s3cr3t\n"]);
        assert_eq!(m.mask_str("a tok-123 b tok-123"), "a *** b ***");
        assert_eq!(m.mask_str("x=s3cr3t;"), "x=***;");
        let v = json!({"token": "tok-123", "list": ["pre-tok-123-post", 5, null], "tok-123": {"n": "s3cr3t"}});
        assert_eq!(
            m.mask_value(&v),
            json!({"token": "***", "list": ["pre-***-post", 5, null], "***": {"n": "***"}})
        );
    }

    #[test]
    fn skips_empty_and_short_values() {
        let m = Masker::new(["", "  ", "abc", "1"]);
        assert!(m.is_empty());
        assert_eq!(m.mask_str("abc 1"), "abc 1");
        let m = Masker::new(["abcd"]);
        assert_eq!(m.mask_str("abcde"), "***e");
    }

    #[test]
    fn longer_secret_containing_another_is_masked_whole() {
        let m = Masker::new(["abcd", "xxabcdxx"]);
        assert_eq!(m.mask_str("1xxabcdxx2 abcd"), "1***2 ***");
    }

    #[test]
    fn json_escaped_form_is_masked_in_raw_text() {
        let secret = "pa\"ss\\wörd";
        let m = Masker::new([secret]);
        let text = serde_json::to_string(&json!({"p": secret})).unwrap();
        assert_eq!(m.mask_str(&text), r#"{"p":"***"}"#);
    }

    #[test]
    fn an_excerpt_is_masked_whole_and_keeps_no_fragment_of_a_secret() {
        let m = Masker::new(["SUPERSECRETVALUE"]);
        let text = "x".repeat(100) + "SUPERSECRETVALUE tail";
        for max in 0..text.len() + 5 {
            let (h, cut) = m.head(&text, max);
            assert_eq!(cut, max < m.mask_str(&text).len(), "{max}");
            assert!(h.len() <= max || !cut, "{max}: {h}");
            for k in 8..=16 {
                assert!(!h.contains(&"SUPERSECRETVALUE"[..k]), "cut at {max}: {h}");
            }
        }
        // Cut text given as it is (cut upstream): the start or end of a secret goes.
        assert_eq!(m.without_partial_end("abc SUPERSECRE"), "abc ");
        assert_eq!(m.without_partial_start("RETVALUE and more"), " and more");
        assert_eq!(m.without_partial_end("plain text"), "plain text");
        assert_eq!(Masker::default().head("abcdef", 3), ("abc".to_owned(), true));
    }

    fn streamed(m: &Masker, pieces: &[&[u8]]) -> Vec<u8> {
        let mut s = StreamMasker::new(m);
        let mut out = Vec::new();
        for p in pieces {
            s.push(p, &mut out);
        }
        s.finish(&mut out);
        out
    }

    #[test]
    fn a_secret_split_across_pieces_is_masked() {
        let m = Masker::new(["tok-123456"]);
        let text = b"aaa tok-123456 bbb tok-123456";
        for cut in 0..=text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(streamed(&m, &[a, b]), b"aaa *** bbb ***", "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(streamed(&m, &bytes), b"aaa *** bbb ***");
        assert_eq!(streamed(&Masker::default(), &[b"x", b"y"]), b"xy");
        assert_eq!(
            streamed(&Masker::new(["abcd", "xxabcdxx"]), &[b"1xxab", b"cdxx2 ab", b"cd"]),
            b"1***2 ***"
        );
    }
}
