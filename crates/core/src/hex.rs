//! Lower-case hexadecimal, the one spelling of digests, keys, MACs and ids the runner writes.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lower-case hex, two digits a byte.
pub fn encode(bytes: impl AsRef<[u8]>) -> String {
    let bytes = bytes.as_ref();
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// The bytes of `s`, an even number of hex digits (either case); `None` for anything else.
pub fn decode(s: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let s = s.as_bytes();
    if s.len() % 2 != 0 {
        return None;
    }
    s.chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_the_format_macro_did_and_decodes_back() {
        let all: Vec<u8> = (0..=255).collect();
        let by_format: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(encode(&all), by_format);
        assert_eq!(decode(&by_format).unwrap(), all);
        assert_eq!(decode(&by_format.to_uppercase()).unwrap(), all);
        assert_eq!(encode([]), "");
        for bad in ["a", "0g", "+1", "é0", " 0"] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
    }
}
