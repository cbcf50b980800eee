//! Helpers of the §5 stdout decoder: the shortcut for progress events and the nesting bound of JSON output.

use tool_sdk::protocol::{parse_line, Line};

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
