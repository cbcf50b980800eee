//! A command line clap cannot parse. `call` promises its errors as JSON on stdout, so a bad `call` line gets the
//! `{"error": {"code": "usage", …}}` object too; every other command gets clap's own message.

use awt_core::error::{CallError, ErrorCode};
use clap::error::ErrorKind;

/// The global options that take a value (to find the command word behind them).
const VALUED: &[&str] = super::words::GLOBALS_WITH_VALUE;

/// The first word that is not a global option or its value.
fn command_word(args: &[String]) -> Option<&str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if VALUED.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            return Some(a);
        }
    }
    None
}

pub fn clap_error(e: clap::Error) -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) || command_word(&args) != Some("call") {
        e.exit()
    }
    let text = e.render().to_string();
    let first = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .trim_start_matches("error: ")
        .to_owned();
    let err = CallError::new(ErrorCode::Usage, first)
        .hint("animaworks-tool call <tool> <action> [--json '{…}' | --param value…] [--timeout S] [--events]");
    super::render::print_error(&err, true);
    std::process::exit(ErrorCode::Usage.exit_code())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_word_is_found_behind_global_options() {
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            super::command_word(&w(&["--anima-dir", "x", "call", "t"])),
            Some("call")
        );
        assert_eq!(super::command_word(&w(&["--bogus", "call"])), Some("call"));
        assert_eq!(super::command_word(&w(&["tools"])), Some("tools"));
    }
}
