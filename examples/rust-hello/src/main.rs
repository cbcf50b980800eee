//! `rust-hello`: an example tool on the Rust SDK. `greet` reports progress; `excerpt` cuts text to a number of
//! characters (never inside a UTF-8 sequence) and fails with a tool error on bad input.

use serde::{Deserialize, Serialize};
use tool_sdk::{Action, Context, JsonSchema, Tool, ToolError};

/// Arguments of `greet`.
#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet; any script.
    who: String,
    /// The language of the greeting.
    #[serde(default)]
    language: Language,
    /// How many times to greet (1 to 10).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 10))]
    times: u32,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Default, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Language {
    #[default]
    En,
    Ja,
    Fr,
}

#[derive(Serialize, JsonSchema)]
struct Greeting {
    greeting: String,
}

fn greet(args: GreetArgs, ctx: &mut Context) -> Result<Greeting, ToolError> {
    if args.who.trim().is_empty() {
        return Err(ToolError::invalid_arguments("`who` is empty").with_hint("give a name, e.g. \"Ada\""));
    }
    if !(1..=10).contains(&args.times) {
        return Err(ToolError::invalid_arguments(format!(
            "`times` is {}, not 1 to 10",
            args.times
        )));
    }
    let who = args.who.trim();
    let mut lines = Vec::new();
    for i in 0..args.times {
        ctx.progress_msg(f64::from(i), Some(f64::from(args.times)), format!("greeting {who}"));
        lines.push(match args.language {
            Language::En => format!("Hello, {who}!"),
            Language::Ja => format!("こんにちは、{who}さん！"),
            Language::Fr => format!("Bonjour, {who} !"),
        });
    }
    ctx.progress(f64::from(args.times), Some(f64::from(args.times)));
    Ok(Greeting {
        greeting: lines.join("\n"),
    })
}

/// Arguments of `excerpt`.
#[derive(Deserialize, JsonSchema)]
struct ExcerptArgs {
    /// The text to cut.
    text: String,
    /// The most characters (Unicode scalar values) to keep, at least 1; an ellipsis marks a cut.
    // No `minimum: 1` in the schema on purpose: 0 reaches the handler and shows a tool error.
    max_chars: usize,
}

#[derive(Serialize, JsonSchema)]
struct Excerpt {
    excerpt: String,
    /// Characters in the whole text.
    chars: usize,
    truncated: bool,
}

fn excerpt(args: ExcerptArgs, ctx: &mut Context) -> Result<Excerpt, ToolError> {
    if args.max_chars == 0 {
        return Err(ToolError::new("bad_limit", "max_chars must be at least 1")
            .with_hint("pass max_chars >= 1")
            .with_data(serde_json::json!({"max_chars": args.max_chars})));
    }
    if args.text.is_empty() {
        return Err(ToolError::new("empty_text", "there is no text to cut").with_hint("pass a non-empty text"));
    }
    let chars = args.text.chars().count();
    let truncated = chars > args.max_chars;
    let excerpt = if truncated {
        // Cut at a char boundary: byte slicing could split a multi-byte character and panic.
        let keep: String = args.text.chars().take(args.max_chars.saturating_sub(1)).collect();
        format!("{keep}…")
    } else {
        args.text.clone()
    };
    ctx.debug(format!("{chars} characters, {} bytes", args.text.len()));
    ctx.partial(&excerpt);
    Ok(Excerpt {
        excerpt,
        chars,
        truncated,
    })
}

fn tool() -> Tool {
    Tool::new("rust-hello")
        .version(env!("CARGO_PKG_VERSION"))
        .description("Greets people in several languages and cuts text safely; an example of the Rust SDK.")
        .action(
            Action::new("greet", greet)
                .description("Say hello to someone, in English, Japanese or French.")
                .output::<Greeting>()
                .expected_seconds(1.0)
                .read_only()
                .idempotent(),
        )
        .action(
            Action::new("excerpt", excerpt)
                .description("Cut a text to at most max_chars characters, never inside a character.")
                .output::<Excerpt>()
                .expected_seconds(1.0)
                .read_only()
                .idempotent(),
        )
}

fn main() {
    tool().run()
}
