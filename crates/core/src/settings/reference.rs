//! The settings' reference, generated from the one shape ([`super::File`]) and the variable registry
//! ([`crate::env_vars`]): the JSON Schema (`docs/animaworks-tool.schema.json`) and the configuration page
//! (`docs/configuration.md`), both printed by `animaworks-tool man` and held current by tests.

use serde_json::Value;
use std::fmt::Write as _;

/// The JSON Schema of `animaworks-tool.json`, as written to docs/animaworks-tool.schema.json.
pub fn schema() -> Value {
    serde_json::to_value(schemars::schema_for!(super::File)).expect("a schema is JSON")
}

/// [`schema`] as the committed file holds it: pretty, with a final newline.
pub fn schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&schema()).expect("a schema is JSON");
    s.push('\n');
    s
}

const INTRO: &str = "\
The operator's settings of the runner, one JSON object. The file is read once per runner (at most 1 MiB, a
regular file). An absent file means every default, and so does an absent key (or `null` at the top level). A
file that exists but cannot be used — not JSON, not an object, an unknown key, a value of the wrong type or out
of range — stops every command that needs it with an error naming the file and the key, with the closest real
key or word for a misspelt one (`unknown key \"max_runing_tasks\"; did you mean \"max_running_tasks\"?`); it is
never silently ignored, and `doctor` reports it.

Its JSON Schema is [animaworks-tool.schema.json](animaworks-tool.schema.json): with `\"$schema\"` naming it, an
editor checks the file as you type.
";

/// docs/configuration.md.
pub fn markdown() -> String {
    let root = schema();
    let sections = sections(&root);
    let mut out = String::from(
        "# Configuration: `<data dir>/animaworks-tool.json`\n\n<!-- Generated from the settings' types (crates/core/src/settings.rs) and the \
         variable registry (crates/core/src/env_vars.rs): `animaworks-tool man --config-markdown > docs/configuration.md`. \
         A test (tests/it/cli.rs) fails when this file is stale. -->\n\n",
    );
    out.push_str(INTRO);
    out.push_str("\n## Keys\n\n");
    table(&mut out, &root, &root, &sections);
    for (path, def) in &sections {
        let s = &root["$defs"][def];
        let _ = writeln!(out, "\n## `{path}`\n");
        if let Some(d) = s.get("description").and_then(Value::as_str) {
            let _ = writeln!(out, "{}\n", one_line(d));
        }
        table(&mut out, s, &root, &sections);
    }
    out.push_str(
        "\n## Environment\n\nThe variables the runner reads, and those it sets for a tool (protocol.md §8). A flag wins \
         over its variable.\n\n",
    );
    out.push_str(&env_table());
    out
}

/// The definitions with keys of their own, each with the key path it is first met under (breadth first).
fn sections(root: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut todo: Vec<(String, &Value)> = vec![(String::new(), root)];
    while !todo.is_empty() {
        let (path, s) = todo.remove(0);
        let Some(props) = s.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (name, sub) in props {
            let Some((def, map)) = def_of(sub) else { continue };
            let d = &root["$defs"][&def];
            if d.get("properties").is_none() || out.iter().any(|(_, x)| *x == def) {
                continue;
            }
            let mut key = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            if map {
                key.push_str(".<name>");
            }
            out.push((key.clone(), def));
            todo.push((key, d));
        }
    }
    out
}

/// The definition a property refers to (directly, through an `Option`, or as a map's values: `true`).
fn def_of(s: &Value) -> Option<(String, bool)> {
    let name = |x: &Value| {
        x.get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .map(str::to_owned)
    };
    let direct = name(s).or_else(|| {
        ["anyOf", "oneOf"].iter().find_map(|k| {
            s.get(*k)
                .and_then(Value::as_array)
                .and_then(|b| b.iter().find_map(name))
        })
    });
    match direct {
        Some(n) => Some((n, false)),
        None => s.get("additionalProperties").and_then(name).map(|n| (n, true)),
    }
}

/// A heading's anchor, as GitHub makes it.
fn anchor(def: &str, sections: &[(String, String)]) -> String {
    sections
        .iter()
        .find(|(_, d)| d == def)
        .map(|(p, _)| {
            p.to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
                .collect()
        })
        .unwrap_or_default()
}

fn table(out: &mut String, s: &Value, root: &Value, sections: &[(String, String)]) {
    let Some(props) = s.get("properties").and_then(Value::as_object) else {
        return;
    };
    out.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
    for (name, sub) in props {
        let def = def_of(sub).map(|d| d.0);
        let d = def.as_ref().map(|d| &root["$defs"][d]);
        let ty = type_of(sub, root, sections);
        let default = sub
            .get("default")
            .or_else(|| d.and_then(|d| d.get("default")))
            .filter(|d| !d.is_null())
            .map_or("—".to_owned(), |d| format!("`{d}`"));
        let meaning = sub
            .get("description")
            .or_else(|| d.and_then(|d| d.get("description")))
            .and_then(Value::as_str)
            .map(one_line)
            .unwrap_or_default();
        let _ = writeln!(out, "| `{name}` | {ty} | {default} | {} |", meaning.replace('|', "\\|"));
    }
}

/// A type in words.
fn type_of(s: &Value, root: &Value, sections: &[(String, String)]) -> String {
    if let Some(name) = s
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        let d = &root["$defs"][name];
        if d.get("properties").is_some() {
            return format!("object ([below](#{}))", anchor(name, sections));
        }
        return type_of(d, root, sections);
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(b) = s.get(k).and_then(Value::as_array) {
            let consts: Vec<String> = b
                .iter()
                .filter_map(|x| x.get("const").or_else(|| x.get("enum").and_then(|e| e.get(0))))
                .map(|c| format!("`{c}`"))
                .collect();
            if consts.len() == b.len() {
                return consts.join(", ");
            }
            let non_null: Vec<&Value> = b
                .iter()
                .filter(|x| x.get("type") != Some(&Value::from("null")))
                .collect();
            if non_null.len() == 1 {
                return type_of(non_null[0], root, sections);
            }
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        return e.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut words: Vec<String> = Vec::new();
    for t in types.iter().filter(|t| **t != "null") {
        words.push(match *t {
            "array" => format!(
                "list of {}",
                s.get("items")
                    .map_or("values".to_owned(), |i| type_of(i, root, sections))
            ),
            "object" => match s.get("additionalProperties") {
                Some(a @ Value::Object(_)) => format!("object of name → {}", type_of(a, root, sections)),
                _ => "object".to_owned(),
            },
            "integer" | "number" => {
                let word = if *t == "integer" { "whole number" } else { "number" };
                match (s.get("minimum"), s.get("maximum")) {
                    (Some(a), Some(b)) => format!("{word} {a}–{b}"),
                    (Some(a), None) => format!("{word} ≥ {a}"),
                    _ => word.to_owned(),
                }
            }
            "string" => "string".to_owned(),
            "boolean" => "`true` or `false`".to_owned(),
            other => other.to_owned(),
        });
    }
    // An absent or null key is the default everywhere; null is named only where it means more ("no limit").
    let null_means = s
        .get("description")
        .and_then(Value::as_str)
        .is_some_and(|d| d.contains("null"));
    if types.contains(&"null") && null_means && !words.is_empty() {
        words.push("`null`".into());
    }
    if words.is_empty() {
        "any".to_owned()
    } else {
        words.join(" or ")
    }
}

/// One line, and each `docs/x.md` (with its `#anchor`) as a link from the docs folder.
fn one_line(s: &str) -> String {
    let line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::new();
    let mut rest = line.as_str();
    while let Some(i) = rest.find("docs/") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 5..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '#')))
            .unwrap_or(after.len());
        let target = after[..end].trim_end_matches('.');
        if target.split('#').next().is_some_and(|f| f.ends_with(".md")) {
            out.push_str(&format!("[{target}]({target})"));
            rest = &after[target.len()..];
        } else {
            out.push_str("docs/");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The Markdown table of every variable, for docs/configuration.md.
fn env_table() -> String {
    use crate::env_vars::Reader;
    let mut out = String::from("| variable | meaning | default | read by |\n|---|---|---|---|\n");
    for v in crate::env_vars::ALL {
        let who = match v.reader {
            Reader::Runner => "the runner",
            Reader::Tool => "the tool (the runner sets it)",
            Reader::Both => "the runner; set for the tool",
            Reader::Build => "the build",
        };
        let default = if v.default.is_empty() {
            "—".to_owned()
        } else {
            format!("`{}`", v.default)
        };
        out.push_str(&format!(
            "| `{}` | {} | {default} | {who} (`{}`) |\n",
            v.name,
            one_line(v.meaning).replace('|', "\\|"),
            v.read_by
        ));
    }
    out
}
