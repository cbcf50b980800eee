//! {{name}}: a tool for animaworks-tool, on the Rust SDK.

use serde::{Deserialize, Serialize};
use tool_sdk::{Action, Context, JsonSchema, Tool, ToolError};

/// Arguments of `echo`.
#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to echo back.
    #[schemars(example = &"hello")]
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Echo {
    echo: String,
}

fn echo(args: EchoArgs, ctx: &mut Context) -> Result<Echo, ToolError> {
    if args.text.trim().is_empty() {
        return Err(ToolError::new("empty_text", "the text is empty").with_hint("pass a text with at least one character"));
    }
    ctx.progress_msg(1.0, Some(1.0), "echoing");
    Ok(Echo { echo: args.text })
}

fn main() {
    Tool::new("{{name}}")
        .version(env!("CARGO_PKG_VERSION"))
        .description("Echoes a text back.")
        .action(Action::new("echo", echo).description("Echo a text back.").output::<Echo>().expected_seconds(1.0).read_only().sandbox(Default::default()))
        .run()
}
