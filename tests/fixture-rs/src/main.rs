//! `xfix`: the cross-language transcript fixture on the Rust SDK (tests/xlang/README.md).

use serde::Deserialize;
use serde_json::{json, Value};
use tool_sdk::{Action, Context, JsonSchema, NoArgs, Tool, ToolError};

#[derive(Deserialize, JsonSchema)]
struct Steps {
    /// How many steps.
    #[schemars(range(min = 1))]
    n: u32,
}

#[derive(Deserialize, JsonSchema)]
struct Big {
    /// Size of the result.
    bytes: usize,
}

#[derive(Deserialize, JsonSchema)]
struct Echo {
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct Nested {
    outer: serde_json::Map<String, Value>,
}

fn nested(a: Nested, _: &mut Context) -> Result<Value, ToolError> {
    let items = a
        .outer
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let sum: i64 = items.iter().filter_map(|i| i["v"].as_i64()).sum();
    let keys: Vec<Value> = items.iter().map(|i| i["k"].clone()).collect();
    Ok(json!({"outer": a.outer, "sum": sum, "keys": keys}))
}

fn main() {
    Tool::new("xfix")
        .description("The cross-language transcript fixture.")
        .action(Action::new("steps", |a: Steps, ctx: &mut Context| {
            for i in 1..=a.n {
                ctx.progress_msg(f64::from(i), Some(f64::from(a.n)), format!("step {i} of {}", a.n));
            }
            Ok::<_, ToolError>(json!({"steps": a.n}))
        }))
        .action(Action::new("fail", |_: NoArgs, _: &mut Context| {
            Err::<Value, _>(
                ToolError::new("fixture_failed", "the fixture failed on purpose").with_hint("this is expected"),
            )
        }))
        .action(Action::new("big", |a: Big, _: &mut Context| {
            Ok::<_, ToolError>("x".repeat(a.bytes))
        }))
        .action(Action::new("echo", |a: Echo, ctx: &mut Context| {
            ctx.partial(&a.text);
            Ok::<_, ToolError>(json!({"text": a.text, "chars": a.text.chars().count()}))
        }))
        .action(Action::new("nested", nested))
        .run()
}
