//! `version` and `--version`: the runner's version and the protocol versions it speaks.

use serde_json::json;
use std::io::Write;

/// The protocol versions this runner speaks (protocol.md; a short-form tool speaks 1).
pub const PROTOCOLS: &[u32] = &[awt_protocol::PROTOCOL_VERSION];

/// What `--version` prints after the name (clap needs it as a constant).
pub const LINE: &str = concat!(env!("CARGO_PKG_VERSION"), " (tool protocol 1)");

pub fn version(as_json: bool) -> i32 {
    let mut out = std::io::stdout().lock();
    let _ = if as_json {
        writeln!(
            out,
            "{}",
            json!({"name": "animaworks-tool", "version": env!("CARGO_PKG_VERSION"), "protocols": PROTOCOLS})
        )
    } else {
        writeln!(out, "animaworks-tool {LINE}")
    };
    0
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_line_names_the_protocol_the_sdk_defines() {
        assert_eq!(super::PROTOCOLS, &[1]);
        assert!(super::LINE.ends_with(&format!("(tool protocol {})", super::PROTOCOLS[0])));
    }
}
