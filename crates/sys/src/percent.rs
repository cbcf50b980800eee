//! Percent-escapes (`%2F`) decoded, as URLs and URI fragments carry them: no kernel call, kept here so that
//! the proxy and the pipeline above share one.

/// `s` with each `%XX` escape decoded; a bad or cut escape is kept as written.
pub fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_are_decoded_and_bad_ones_kept() {
        assert_eq!(super::decode("%2Frun%2Fpostgresql"), "/run/postgresql");
        assert_eq!(super::decode("a%zzb%4"), "a%zzb%4");
        assert_eq!(super::decode("user%40corp"), "user@corp");
    }
}
