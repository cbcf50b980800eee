//! What a tool says reaches a person's terminal only as text: its control sequences (OSC 52 clipboard writes,
//! window titles, screen clears, cursor moves that forge output, bidi overrides that reorder a line) are shown
//! as visible escapes instead of being obeyed. Only when the runner writes to a terminal: pipes, files, JSON and
//! `--events` stay exact.
//!
//! The colour policy, once for clap's messages and the runner's own: `--color auto|always|never`, and under
//! `auto` anstream's reading of the environment (`NO_COLOR` set: never; else `CLICOLOR_FORCE` set: always; else
//! a terminal whose `TERM` is not `dumb`).

use std::borrow::Cow;
use std::ffi::OsString;
use std::io::IsTerminal;

/// `--color`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    Auto,
    Always,
    Never,
}

/// Sets the policy for the rest of the process (before anything is painted; the first answer is kept).
pub fn set_color(when: ColorWhen) {
    let choice = match when {
        ColorWhen::Auto => anstream::ColorChoice::Auto,
        ColorWhen::Always => anstream::ColorChoice::Always,
        ColorWhen::Never => anstream::ColorChoice::Never,
    };
    choice.write_global();
}

/// The policy in clap's terms, for its help and error messages.
pub fn clap_color() -> clap::ColorChoice {
    match anstream::ColorChoice::global() {
        anstream::ColorChoice::Always | anstream::ColorChoice::AlwaysAnsi => clap::ColorChoice::Always,
        anstream::ColorChoice::Never => clap::ColorChoice::Never,
        anstream::ColorChoice::Auto => clap::ColorChoice::Auto,
    }
}

/// `--color` read from the words before clap parses them (so that clap's own error about them follows it): only
/// among the runner's options, not after a tool's name (a tool's own `--color` is its business). `valued`: the
/// global options that take a value.
pub fn color_from_args(args: &[OsString], valued: &[&str], commands: &[&str]) -> Option<ColorWhen> {
    use clap::ValueEnum as _;
    let mut found = None;
    let mut in_command = false;
    let mut it = args.iter().skip(1).map(|a| a.to_string_lossy().into_owned());
    while let Some(a) = it.next() {
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
            _ => (a.clone(), None),
        };
        if a == "--" {
            break;
        } else if name == "--color" {
            let value = inline.or_else(|| it.next());
            found = value.and_then(|v| ColorWhen::from_str(&v, false).ok()).or(found);
        } else if valued.contains(&name.as_str()) {
            if inline.is_none() {
                it.next();
            }
        } else if !a.starts_with('-') && !in_command {
            // A tool's name, or a command whose words after it are a tool's.
            if !commands.contains(&a.as_str()) || matches!(a.as_str(), "submit" | "help") {
                break;
            }
            in_command = true;
        }
    }
    found
}

/// The styles the runner's messages use.
pub const RED: anstyle::Style = anstyle::AnsiColor::Red.on_default();
pub const YELLOW: anstyle::Style = anstyle::AnsiColor::Yellow.on_default();
pub const CYAN: anstyle::Style = anstyle::AnsiColor::Cyan.on_default();
pub const DIM: anstyle::Style = anstyle::Style::new().dimmed();

/// Whether what the runner writes on stderr gets colour.
pub fn stderr_color() -> bool {
    static COLOR: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *COLOR.get_or_init(|| anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never)
}

/// `text` in `style` when stderr takes colour.
pub fn paint(style: anstyle::Style, text: &str) -> String {
    if stderr_color() {
        format!("{}{text}{}", style.render(), style.render_reset())
    } else {
        text.to_owned()
    }
}

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
    fn color_is_read_among_the_runner_options_only() {
        let w = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        let read = |v: &[&str]| color_from_args(&w(v), &["--anima-dir"], &["tools", "jobs", "submit"]);
        assert_eq!(read(&["me", "--color", "never", "tools"]), Some(ColorWhen::Never));
        assert_eq!(
            read(&["me", "--anima-dir", "tools", "--color=always"]),
            Some(ColorWhen::Always)
        );
        assert_eq!(
            read(&["me", "jobs", "list", "--color", "never"]),
            Some(ColorWhen::Never)
        );
        assert_eq!(read(&["me", "weather", "paint", "--color", "never"]), None);
        assert_eq!(read(&["me", "submit", "weather", "paint", "--color", "never"]), None);
        assert_eq!(read(&["me", "--color", "red", "tools"]), None);
        assert_eq!(read(&["me", "--color"]), None);
    }

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
