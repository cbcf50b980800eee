//! The name rules of protocol.md §3, defined once: the runner's discovery and gate and this SDK use them.

/// A tool or action name: starts with an ASCII letter or digit, then letters, digits, `_` and `-`.
pub fn is_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `^[a-zA-Z0-9_-]{1,64}$`: the schema-name pattern every LLM provider accepts.
pub fn is_provider_name(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The spelling-insensitive form of a name: `create-issue` and `create_issue` are one action.
pub fn canon(name: &str) -> String {
    name.replace('-', "_")
}

/// Do `a` and `b` differ at most by `-` against `_`?
pub fn same_spelling(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || (x == b'-' || x == b'_') && (y == b'-' || y == b'_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(is_name("my-tool2") && is_name("a_b") && !is_name("_x") && !is_name("a.b") && !is_name(""));
        assert!(is_provider_name(&"x".repeat(64)) && !is_provider_name(&"x".repeat(65)));
        assert_eq!(canon("create-issue"), "create_issue");
        assert!(same_spelling("create-issue", "create_issue") && !same_spelling("ab", "abc"));
    }
}
