//! `credfix`: a tool on the Rust SDK that asks the runner's credential broker for credentials at run time
//! (`runner/tests/it/credentials.rs` grants one and not the other).

use serde::Deserialize;
use serde_json::{json, Value};
use tool_sdk::{get_credential, Action, Context, CredentialQuery, JsonSchema, Tool, ToolError};

#[derive(Deserialize, JsonSchema)]
struct Ask {
    /// The credentials to ask for, in order.
    names: Vec<String>,
    /// Their variable, for the runner's lookup.
    #[serde(default)]
    env: Option<String>,
}

/// Each answer: the value reversed (the runner masks the value itself), or the error's code, message and hint.
fn ask(a: Ask, ctx: &mut Context) -> Result<Value, ToolError> {
    let answers: Vec<Value> = a
        .names
        .iter()
        .map(|name| {
            let q = match &a.env {
                Some(env) => CredentialQuery::new(name).env(env),
                None => name.as_str().into(),
            };
            match ctx.get_credential(q) {
                Ok(v) => json!({"name": name, "reversed": v.chars().rev().collect::<String>()}),
                Err(e) => json!({"name": name, "code": e.code, "message": e.message, "hint": e.hint}),
            }
        })
        .collect();
    Ok(json!({"answers": answers}))
}

/// The free function, without a Context: the first credential, or the error ended with `?`.
fn first(a: Ask, _: &mut Context) -> Result<Value, ToolError> {
    let v = get_credential(a.names.first().map(String::as_str).unwrap_or(""))?;
    Ok(json!({"reversed": v.chars().rev().collect::<String>()}))
}

fn main() {
    Tool::new("credfix")
        .version(env!("CARGO_PKG_VERSION"))
        .description("Asks the credential broker for credentials.")
        .broker()
        .action(Action::new("ask", ask).description("Ask for each named credential and report each answer."))
        .action(Action::new("first", first).description("Ask for the first named credential; fail if refused."))
        .run()
}
