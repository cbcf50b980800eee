//! `--help` for tools and actions, generated from their schemas.

use super::args::prop_type;
use crate::call::Resolved;
use crate::manifest::Action;
use serde_json::Value;
use std::fmt::Write;

/// The runner's help, then every tool's name (no tool is started), as the original's `--help` lists them.
/// Returns `code`.
pub fn top_help(dirs: &crate::dirs::Dirs, code: i32) -> i32 {
    let _ = <super::Cli as clap::CommandFactory>::command().print_help();
    let names: Vec<String> = crate::discover::scan(dirs).tools.into_keys().collect();
    println!(
        "\n\nAvailable tools: {}",
        if names.is_empty() {
            "(none)".to_owned()
        } else {
            names.join(", ")
        }
    );
    code
}

pub fn tool_help(runner: &crate::call::Runner, r: &Resolved) -> String {
    let m = &r.manifest;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}{} — {} tool at {}",
        r.file.name,
        m.version.as_deref().map(|v| format!(" {v}")).unwrap_or_default(),
        r.file.tier,
        r.file.path.display()
    );
    if let Some(d) = m.description.as_deref().filter(|d| !d.is_empty()) {
        let _ = writeln!(s, "\n{d}");
    }
    if m.cli {
        let _ = writeln!(
            s,
            "\nThis is an AnimaWorks module with its own CLI: `animaworks-tool {} <argv…>` passes the argv to its\n\
             cli_main unchanged (try `animaworks-tool {} -h`). The structured form is\n\
             `animaworks-tool call {} <action> --json '{{…}}'`.",
            r.file.name, r.file.name, r.file.name
        );
    }
    let _ = writeln!(
        s,
        "\nUsage: animaworks-tool {} <action> [--param value …] [--json JSON] [--timeout S] [--events]\n\nActions:",
        r.file.name
    );
    let width = m.actions.iter().map(|a| a.name.len()).max().unwrap_or(0);
    for a in &m.actions {
        let gate = if a.profile.gated { " [gated]" } else { "" };
        let _ = writeln!(s, "  {:width$}  {}{gate}", a.name, first_line(&a.description));
    }
    if m.actions.is_empty() {
        let _ = writeln!(s, "  (none: reachable only through its own CLI)");
    }
    let _ = writeln!(
        s,
        "\nSee `animaworks-tool {} <action> --help` for an action's arguments.",
        r.file.name
    );
    let _ = writeln!(
        s,
        "\nEnvironment (protocol.md §8): {}.",
        runner.env_summary(runner.env_policy(r))
    );
    s
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

pub fn action_help(r: &Resolved, a: &Action) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "animaworks-tool {} {} — {}",
        r.file.name,
        a.name,
        first_line(&a.description)
    );
    let rest: Vec<&str> = a.description.lines().skip(1).collect();
    if !rest.is_empty() {
        let _ = writeln!(s, "{}", rest.join("\n"));
    }
    let props = a.input_schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = a
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let _ = writeln!(s, "\nArguments:");
    match props {
        Some(p) if !p.is_empty() => {
            for (name, schema) in p {
                let flag = format!("--{}", name.replace('_', "-"));
                let ty = prop_type(schema).unwrap_or("json");
                let shown = match ty {
                    "boolean" => format!("{flag} | --no-{}", name.replace('_', "-")),
                    "array" => format!(
                        "{flag} <{}> (repeat, or a JSON array)",
                        schema.get("items").and_then(prop_type).unwrap_or("value")
                    ),
                    "object" => format!("{flag} <json object>"),
                    t => format!("{flag} <{t}>"),
                };
                let mut notes = Vec::new();
                if required.contains(&name.as_str()) {
                    notes.push("required".to_owned());
                }
                if let Some(d) = schema.get("default") {
                    notes.push(format!("default: {d}"));
                }
                if let Some(e) = schema.get("enum").and_then(Value::as_array) {
                    notes.push(format!(
                        "one of: {}",
                        e.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
                    ));
                }
                let desc = schema.get("description").and_then(Value::as_str).unwrap_or("");
                let notes = if notes.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", notes.join("; "))
                };
                let _ = writeln!(s, "  {shown}\n      {desc}{notes}");
            }
        }
        _ => {
            let _ = writeln!(s, "  (none)");
        }
    }
    let _ = writeln!(
        s,
        "\nRunner options:\n  --json JSON|@FILE|-   all arguments as one JSON object (flags override its keys)\n  \
         --timeout SECONDS     deadline (this action: {} s)\n  --max-output BYTES    output cap\n  \
         --events              print the raw event stream as JSON lines",
        a.timeout_s()
    );
    if a.profile.gated {
        let _ = writeln!(
            s,
            "\nGated: runs only when permissions.json external_tools.allow holds \"{}_{}\".",
            r.file.name,
            a.gate_name()
        );
    }
    s
}
