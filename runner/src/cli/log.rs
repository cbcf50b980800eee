//! The runner's own warnings on stderr, for the commands that run a call and end (`call`, a tool's command line,
//! `submit`, ...): every event at WARN or above as one line, `LEVEL message key=value`, as tracing-subscriber's
//! formatter writes it without time and target, control characters escaped.
//!
//! Why not that formatter here: its registry of spans allocates and zeroes tens of KiB and registers every call site
//! at start, on every call (bench/README.md); a call needs neither spans nor filters. The servers
//! (`mcp`, `use-tool --serve`) and `ANIMAWORKS_TOOL_LOG` still get the full formatter.

use std::fmt::Write as _;
use std::io::Write as _;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

pub(crate) struct Warnings {
    pub(crate) ansi: bool,
}

impl Subscriber for Warnings {
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        *meta.level() <= Level::WARN
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::WARN)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        // Spans are not shown; every one gets the same id.
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = Line::default();
        event.record(&mut line);
        let level = match *event.metadata().level() {
            Level::ERROR if self.ansi => "\x1b[31mERROR\x1b[0m",
            Level::ERROR => "ERROR",
            _ if self.ansi => "\x1b[33m WARN\x1b[0m",
            _ => " WARN",
        };
        // Messages may carry what a tool wrote (its file name, paths from its manifest): its control characters
        // are shown, not obeyed, wherever stderr goes (a log read later on a terminal), as tracing-subscriber's
        // formatter escaped them; only the level's own colour is a sequence.
        let body = format!("{}{}", line.message, line.fields);
        let text = format!("{level} {}\n", super::term::clean(&body));
        let _ = std::io::stderr().write_all(text.as_bytes());
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

#[derive(Default)]
struct Line {
    message: String,
    fields: String,
}

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_one_line_with_its_fields() {
        let mut line = Line::default();
        let sub = Warnings { ansi: false };
        tracing::subscriber::with_default(sub, || {
            // Visible through enabled(): INFO is dropped, WARN is formatted.
            assert!(!tracing::enabled!(tracing::Level::INFO));
            assert!(tracing::enabled!(tracing::Level::WARN));
        });
        line.record_debug(
            &field_named("message"),
            &format_args!("the group of {} is still there", 7),
        );
        line.record_debug(&field_named("pgid"), &42);
        assert_eq!(
            format!("{}{}", line.message, line.fields),
            "the group of 7 is still there pgid=42"
        );
    }

    fn field_named(name: &'static str) -> Field {
        struct Cs;
        impl tracing::callsite::Callsite for Cs {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                &META
            }
        }
        static CS: Cs = Cs;
        static META: Metadata<'static> = tracing::metadata!(
            name: "test",
            target: "test",
            level: Level::WARN,
            fields: &["message", "pgid"],
            callsite: &CS,
            kind: tracing::metadata::Kind::EVENT
        );
        META.fields().field(name).expect("declared")
    }
}
