//! `--help` for tools and actions, generated from their schemas.

use awt_core::call::Resolved;
use awt_core::flags::prop_type;
use awt_core::manifest::ActionSpec;
use serde_json::Value;
use std::fmt::Write as _;
use std::io::Write as _;

/// The runner's help, then every tool's name (no tool is started), as the original's `--help` lists them.
/// Returns `code`.
pub fn top_help(dirs: &awt_core::dirs::Dirs, code: i32, root: fn() -> clap::Command) -> i32 {
    let help = root().render_help();
    let names: Vec<String> = awt_core::discover::scan(dirs).tools.into_keys().collect();
    say!(
        "{help}\n\nAvailable tools: {}",
        if names.is_empty() {
            "(none)".to_owned()
        } else {
            names.join(", ")
        }
    );
    code
}

pub fn tool_help(runner: &awt_core::call::Runner, r: &Resolved) -> String {
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
        let _ = writeln!(s, "\n{}", cli_note(&r.file.name));
    }
    // A module with its own CLI gets the words after its name as its argv: the runner's call form is `call`.
    let call = call_form(r);
    if m.cli {
        let _ = writeln!(s, "\nUsage: animaworks-tool {} <the argv of its cli_main…>", r.file.name);
        let _ = writeln!(
            s,
            "       {call} <action> [--param value …] [--json JSON] [--timeout S] [--events]\n\nActions:"
        );
    } else {
        let _ = writeln!(
            s,
            "\nUsage: {call} <action> [--param value …] [--json JSON] [--timeout S] [--events]\n\nActions:"
        );
    }
    let width = m.actions.iter().map(|a| a.name.len()).max().unwrap_or(0);
    for a in &m.actions {
        let gate = if a.profile.gated { " [gated]" } else { "" };
        let _ = writeln!(s, "  {:width$}  {}{gate}", a.name, first_line(&a.description));
    }
    if m.actions.is_empty() {
        let _ = writeln!(s, "  (none: reachable only through its own CLI)");
    }
    let _ = writeln!(s, "\nSee `{call} <action> --help` for an action's arguments.");
    let _ = writeln!(
        s,
        "\nEnvironment (protocol.md §8): {}.",
        runner.env_summary(runner.env_policy(r))
    );
    s
}

/// What a module with `cli_main` does with its argv, and where JSON input goes instead.
pub fn cli_note(tool: &str) -> String {
    format!(
        "This is an AnimaWorks module with its own CLI: `animaworks-tool {tool} <argv…>` passes the argv to its\n\
         cli_main unchanged (`animaworks-tool {tool} -h` is the module's own help), so the runner's call options\n\
         (--json, --timeout, --max-output, --events) do not apply there: they go to the module as they are.\n\
         For JSON input and the runner's options use `animaworks-tool call {tool} <action> --json '{{…}}'`."
    )
}

const GLOBAL_OPTIONS: &str = "\nGlobal options (before the tool's name):\n  \
    --anima-dir DIR   the calling anima (personal tools, permissions)   --data-dir DIR   the data dir\n  \
    --core-dir DIR    a core tools folder (repeatable)                   --cache-dir DIR  the schema cache\n  \
    --python PATH     the Python for .py tools\n";

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// How the runner's own call form of `r` begins: `animaworks-tool <tool>`, or `animaworks-tool call <tool>` for a
/// module whose words after its name go to its `cli_main`.
fn call_form(r: &Resolved) -> String {
    if r.manifest.cli {
        format!("animaworks-tool call {}", r.file.name)
    } else {
        format!("animaworks-tool {}", r.file.name)
    }
}

pub fn action_help(r: &Resolved, a: &ActionSpec) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{} {} — {}", call_form(r), a.name, first_line(&a.description));
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
                let shown = if awt_core::flags::RUNNER_FLAGS.contains(&flag.trim_start_matches('-')) {
                    format!("{name} (a runner option's name: give it in --json)")
                } else {
                    shown
                };
                let mut notes = Vec::new();
                if required.contains(&name.as_str()) {
                    notes.push("required".to_owned());
                }
                notes.extend(constraints(schema));
                if let Some(items) = schema.get("items").filter(|_| ty == "array") {
                    notes.extend(constraints(items).into_iter().map(|c| format!("each: {c}")));
                }
                let _ = writeln!(s, "  {shown}");
                if let Some(d) = schema
                    .get("description")
                    .and_then(Value::as_str)
                    .filter(|d| !d.trim().is_empty())
                {
                    for l in d.trim().lines() {
                        let _ = writeln!(s, "      {l}");
                    }
                }
                if !notes.is_empty() {
                    let _ = writeln!(s, "      [{}]", notes.join("; "));
                }
            }
        }
        _ => {
            let _ = writeln!(s, "  (none)");
        }
    }
    let _ = writeln!(
        s,
        "\nCall options (after the action):\n  --json JSON|@FILE|-   all arguments as one JSON object (flags override its keys)\n  \
         --timeout SECONDS     deadline (this action: {} s)\n  --max-output BYTES    output cap\n  \
         --events              print the raw event stream as JSON lines",
        a.timeout_s()
    );
    s.push_str(GLOBAL_OPTIONS);
    if a.profile.gated {
        let _ = writeln!(
            s,
            "\nGated: runs only when permissions.json external_tools.allow holds \"{}_{}\".",
            r.file.name,
            a.gate_name()
        );
    }
    let _ = writeln!(s, "\n{}", sandbox_line(a.profile.sandbox.as_ref()));
    s
}

/// What the action declared it may touch (protocol.md §2.4), for a person.
fn sandbox_line(d: Option<&awt_protocol::Sandbox>) -> String {
    use awt_protocol::Net;
    let Some(d) = d else {
        return "Sandbox: none declared (where tools are confined: the default for AnimaWorks tools — the anima's \
                folder, the shared folders, the network if permitted)"
            .into();
    };
    let list = |v: &[String]| if v.is_empty() { "-".to_owned() } else { v.join(", ") };
    let net = match &d.net {
        Net::All(true) => "any".to_owned(),
        Net::All(false) => "none".to_owned(),
        Net::Only(v) => list(v),
    };
    format!(
        "Sandbox (declared): read {}; write {}; exec {}; network {}",
        list(&d.read),
        list(&d.write),
        list(&d.exec),
        net
    )
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(t) => format!("{t:?}"),
        other => other.to_string(),
    }
}

/// What a schema says a value must be, in words: enum, range, length, pattern, format, default, examples.
pub fn constraints(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let num = |k: &str| schema.get(k).filter(|v| v.is_number()).map(|v| v.to_string());
    if let Some(c) = schema.get("const") {
        out.push(format!("always {}", shown(c)));
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        out.push(format!(
            "one of: {}",
            e.iter().map(shown).collect::<Vec<_>>().join(", ")
        ));
    }
    let low = num("minimum")
        .map(|m| format!("{m} ≤ n"))
        .or(num("exclusiveMinimum").map(|m| format!("{m} < n")));
    let high = num("maximum")
        .map(|m| format!("n ≤ {m}"))
        .or(num("exclusiveMaximum").map(|m| format!("n < {m}")));
    match (low, high) {
        (Some(l), Some(h)) => out.push(format!("{l}{}", h.trim_start_matches('n'))),
        (Some(l), None) => out.push(l),
        (None, Some(h)) => out.push(h),
        _ => {}
    }
    if let Some(m) = num("multipleOf") {
        out.push(format!("a multiple of {m}"));
    }
    for (lo, hi, what) in [
        ("minLength", "maxLength", "characters"),
        ("minItems", "maxItems", "items"),
        ("minProperties", "maxProperties", "keys"),
    ] {
        match (num(lo), num(hi)) {
            (Some(l), Some(h)) if l == h => out.push(format!("exactly {l} {what}")),
            (Some(l), Some(h)) => out.push(format!("{l} to {h} {what}")),
            (Some(l), None) => out.push(format!("at least {l} {what}")),
            (None, Some(h)) => out.push(format!("at most {h} {what}")),
            _ => {}
        }
    }
    if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push("no duplicates".into());
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        out.push(format!("matches /{p}/"));
    }
    if let Some(f) = schema.get("format").and_then(Value::as_str) {
        out.push(format!("format: {f}"));
    }
    if let Some(d) = schema.get("default") {
        out.push(format!("default: {}", shown(d)));
    }
    if let Some(e) = schema
        .get("examples")
        .and_then(Value::as_array)
        .filter(|e| !e.is_empty())
    {
        out.push(format!(
            "e.g. {}",
            e.iter().take(3).map(shown).collect::<Vec<_>>().join(", ")
        ));
    }
    out
}

/// `help [<tool> [<action>] | <command>…]`: a tool's or action's help (the runner's own, also for a module with
/// cli_main), a runner command's help, or the overview.
pub async fn help(runner: &awt_core::call::Runner, words: &[String], root: fn() -> clap::Command) -> i32 {
    let mut out = std::io::stdout().lock();
    let mut cmd = root();
    let Some(first) = words.first() else {
        let _ = write!(out, "{}", cmd.render_long_help());
        return 0;
    };
    if let Some(mut sub) = cmd.find_subcommand(first).cloned() {
        for w in &words[1..] {
            match sub.find_subcommand(w).cloned() {
                Some(s) => sub = s,
                None => break,
            }
        }
        let _ = write!(
            out,
            "{}",
            sub.bin_name(format!("animaworks-tool {}", words.join(" ")))
                .render_long_help()
        );
        return 0;
    }
    let r = match runner.resolve(first).await {
        Ok(r) => r,
        Err(e) => {
            drop(out);
            super::render::print_error(&e, false);
            return e.code.exit_code();
        }
    };
    let text = match words.get(1) {
        None => tool_help(runner, &r),
        Some(a) => match r.manifest.action(a).ok_or_else(|| {
            let names: Vec<&str> = r.manifest.actions.iter().map(|x| x.name.as_str()).collect();
            awt_core::suggest::unknown_action(&r.file.name, a, &names)
        }) {
            Ok(act) => action_help(&r, act),
            Err(e) => {
                drop(out);
                super::render::print_error(&e, false);
                return e.code.exit_code();
            }
        },
    };
    let _ = write!(out, "{text}");
    0
}

/// Before a module's own CLI runs: `-h`/`--help` gets a note that the argv is the module's, and a runner call
/// option in the argv (which the module would take as its own) gets a warning pointing to `call`.
pub fn cli_argv_notes(r: &Resolved, argv: &[String]) {
    let tool = &r.file.name;
    if matches!(argv, [h] if h == "-h" || h == "--help") {
        tell!(
            "{}",
            super::render::paint(
                super::term::DIM,
                &format!("(animaworks-tool: the help below is {tool}'s own; `animaworks-tool help {tool}` is the runner's view)")
            )
        );
        return;
    }
    // AnimaWorks modules commonly have a `-j/--json` switch of their own; what gives the runner's option away is
    // a JSON object (or @file) after it. `--events` is the runner's alone.
    let jsonish = |v: &str| v.trim_start().starts_with('{') || v.starts_with('@');
    let used: Vec<&str> = argv
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match w.as_str() {
            "--events" => Some("events"),
            "--json" if argv.get(i + 1).is_some_and(|v| jsonish(v)) => Some("json"),
            w if w.strip_prefix("--json=").is_some_and(jsonish) => Some("json"),
            _ => None,
        })
        .collect();
    if let Some(f) = used.first() {
        super::render::warn(&format!(
            "{tool} has its own CLI, which gets --{f} as it is (the runner's call options do not apply to it); \
             for JSON arguments use `animaworks-tool call {tool} <action> --json '{{…}}'`"
        ));
    }
}
