//! The command line people touch first (issue 11): version, completions, suggestions, the live display, help,
//! output contracts.

use crate::support::*;
use serde_json::Value;

const HELLO: &str = r#"[{"name":"hello_greet","description":"Say hello.","input_schema":{"type":"object","properties":{"who":{"type":"string","description":"Who to greet"},"times":{"type":"integer","minimum":1,"maximum":5,"default":1},"tone":{"enum":["warm","cold"]}},"required":["who"]}}]"#;

fn hello(w: &World) {
    w.tool(&w.personal(), "hello", &bash_tool(HELLO, r#"echo '{"greeting":"hi"}'"#));
}

#[test]
fn version_prints_the_runner_and_protocol_versions() {
    let w = World::new();
    for args in [&["--version"][..], &["version"], &["-V"]] {
        let o = w.run(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(
            out.starts_with(&format!("animaworks-tool {} ", env!("CARGO_PKG_VERSION"))) && out.contains("protocol 1"),
            "{args:?}: {out}"
        );
    }
    let v: Value = json(&w.run(&["version", "--json"]));
    assert_eq!(v["protocols"], serde_json::json!([1]));
}

/// Candidates the shell would get for the word at `index` of `words` (clap_complete's bash protocol).
fn complete(w: &World, index: usize, words: &[&str]) -> Vec<String> {
    let o = w
        .cmd()
        .env("ANIMAWORKS_TOOL_COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", index.to_string())
        .env("_CLAP_IFS", "\n")
        .arg("--")
        .args(words)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o).lines().map(str::to_owned).collect()
}

#[test]
fn completion_offers_tools_actions_flags_and_enum_values_from_the_cache_without_starting_a_tool() {
    let w = World::new();
    let marker = w.tmp.path().join("started");
    let body = format!(
        "#!/usr/bin/env bash\ntouch {}\nif [ \"$1\" = --schemas ]; then echo '{HELLO}'; exit 0; fi\necho '{{}}'\n",
        marker.display()
    );
    w.tool(&w.personal(), "hello", &body);
    // Not cached yet: the name only, and no process.
    let c = complete(&w, 1, &["animaworks-tool", "hel"]);
    assert!(c.contains(&"hello".to_owned()), "{c:?}");
    assert!(!complete(&w, 2, &["animaworks-tool", "hello", ""]).contains(&"greet".to_owned()));
    assert!(!marker.exists(), "completion started the tool");
    // Once called (so cached): actions, flags, enum values, under `call` too.
    assert!(w.run(&["hello", "greet", "--who", "x"]).status.success());
    std::fs::remove_file(&marker).unwrap();
    assert!(complete(&w, 2, &["animaworks-tool", "hello", ""]).contains(&"greet".to_owned()));
    let flags = complete(&w, 3, &["animaworks-tool", "hello", "greet", "--"]);
    for f in ["--who", "--times", "--tone", "--json", "--timeout", "--events"] {
        assert!(flags.contains(&f.to_owned()), "{f} missing from {flags:?}");
    }
    assert_eq!(
        complete(&w, 4, &["animaworks-tool", "hello", "greet", "--tone", ""]),
        vec!["warm", "cold"]
    );
    assert_eq!(
        complete(&w, 3, &["animaworks-tool", "call", "hello", "g"]),
        vec!["greet"]
    );
    let cmds = complete(&w, 1, &["animaworks-tool", "jo"]);
    assert_eq!(cmds, vec!["jobs"]);
    assert!(!marker.exists(), "completion started the tool");
}

/// The global options are offered where clap takes them (first, and among a runner command's options), never
/// after a tool's action, where the parser refuses them (those words are the tool's).
#[test]
fn completion_offers_the_global_options_only_where_the_parser_takes_them() {
    let w = World::new();
    hello(&w);
    assert!(w.run(&["hello", "greet", "--who", "x"]).status.success());
    let anima = w.anima.display().to_string();
    let globals = [
        "--anima-dir",
        "--data-dir",
        "--core-dir",
        "--cache-dir",
        "--python",
        "--color",
    ];
    let given = ["--anima-dir", anima.as_str(), "--color", "never"];
    for (words, line) in [
        (&["animaworks-tool", "--"][..], [&given[..], &["tools"]].concat()),
        (&["animaworks-tool", "tools", "--"], [&["tools"][..], &given].concat()),
        (
            &["animaworks-tool", "jobs", "list", "--"],
            [&["jobs", "list"][..], &given].concat(),
        ),
    ] {
        let offered = complete(&w, words.len() - 1, words);
        for g in globals {
            assert!(
                offered.contains(&g.to_owned()),
                "{words:?}: {g} missing from {offered:?}"
            );
        }
        // And the parser takes what was offered there.
        let o = w.run(&line);
        assert!(o.status.success(), "{line:?}: {}", stderr(&o));
    }
    for words in [
        &["animaworks-tool", "hello", "greet", "--"][..],
        &["animaworks-tool", "call", "hello", "greet", "--"],
    ] {
        let offered = complete(&w, words.len() - 1, words);
        assert!(offered.contains(&"--who".to_owned()), "{offered:?}");
        for g in globals {
            assert!(!offered.contains(&g.to_owned()), "{words:?}: {g} offered: {offered:?}");
        }
    }
    // What is no longer offered there: the parser refuses it.
    let o = w.run(&["hello", "greet", "--who", "x", "--anima-dir", &anima]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("anima-dir"), "{}", stderr(&o));
}

/// One colour policy for clap's messages and the runner's own: `--color`, then NO_COLOR, then CLICOLOR_FORCE,
/// then a terminal (stderr is a pipe here, so `auto` alone means none).
#[test]
fn color_follows_the_flag_then_no_color_then_clicolor_force() {
    let w = World::new();
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = w.cmd();
        c.env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env("TERM", "xterm");
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.args(args).output().unwrap();
        stderr(&o)
    };
    // clap's message (an unknown option of a runner command) and ours (an unknown tool).
    let clap_msg = &["tools", "--bogus"][..];
    let ours = &["--data-dir", &w.data.display().to_string(), "nosuch", "go"].map(str::to_owned);
    let ours: Vec<&str> = ours.iter().map(String::as_str).collect();
    let coloured = |e: &str| e.contains("\x1b[");
    for (env, flag, want) in [
        (&[][..], None, false),
        (&[("CLICOLOR_FORCE", "1")][..], None, true),
        (&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")][..], None, false),
        (&[("CLICOLOR_FORCE", "1")][..], Some("never"), false),
        (&[("NO_COLOR", "1")][..], Some("always"), true),
        (&[][..], Some("always"), true),
    ] {
        for args in [clap_msg, &ours[..]] {
            let mut line: Vec<&str> = flag.map(|f| vec!["--color", f]).unwrap_or_default();
            line.extend(args);
            let e = run(env, &line);
            assert!(e.contains("bogus") || e.contains("nosuch"), "{env:?} {line:?}: {e}");
            assert_eq!(coloured(&e), want, "{env:?} {line:?}: {e:?}");
        }
    }
    let e = run(&[], &["--color", "red", "tools"]);
    assert!(e.contains("red") && e.contains("never"), "{e}");
}

#[test]
fn completions_prints_a_script_for_each_shell_and_refuses_others() {
    let w = World::new();
    for sh in ["bash", "zsh", "fish"] {
        let o = w.run(&["completions", sh]);
        assert!(o.status.success(), "{sh}: {}", stderr(&o));
        assert!(stdout(&o).contains("ANIMAWORKS_TOOL_COMPLETE"), "{sh}: {}", stdout(&o));
    }
    let o = w.run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("bash"), "{}", stderr(&o));
    let o = w.run(&["man"]);
    assert!(o.status.success());
    assert!(
        stdout(&o).starts_with(".ie") || stdout(&o).contains(".TH animaworks-tool"),
        "{}",
        stdout(&o)
    );
}

/// `man --dir` writes a page for every command, and no page names one that was not written (clap_mangen names
/// each subcommand's page as `<parent>-<sub>(1)`).
#[test]
fn every_man_page_named_exists() {
    let w = World::new();
    let dir = w.tmp.path().join("man1");
    let o = w.run(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pages: std::collections::BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for want in [
        "animaworks-tool.1",
        "animaworks-tool-mcp.1",
        "animaworks-tool-jobs-list.1",
        "animaworks-tool-man.1",
    ] {
        assert!(pages.contains(want), "{want} missing from {pages:?}");
    }
    let mut named = 0;
    for page in &pages {
        let text = std::fs::read_to_string(dir.join(page)).unwrap().replace("\\-", "-");
        for (at, _) in text.match_indices("(1)") {
            let start = text[..at]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .map_or(0, |i| i + 1);
            let name = &text[start..at];
            if name.starts_with("animaworks-tool") {
                named += 1;
                assert!(
                    pages.contains(&format!("{name}.1")),
                    "{page} names {name}(1), which was not written"
                );
            }
        }
    }
    assert!(
        named >= 20,
        "only {named} references found: the pattern no longer matches clap_mangen's output"
    );
    // One page on stdout, by command.
    let o = w.run(&["man", "jobs", "list"]);
    assert!(
        o.status.success() && stdout(&o).contains(".TH animaworks-tool-jobs-list"),
        "{}",
        stdout(&o)
    );
    assert_eq!(w.run(&["man", "nosuch"]).status.code(), Some(2));
}

/// `docs/<file>` is what `man <flag>` prints (rewritten with `ANIMAWORKS_TOOL_BLESS=1`) and holds each of `must`.
fn generated_page_is_current(w: &World, flag: &str, file: &str, must: &[&str]) {
    let o = w.run(&["man", flag]);
    assert!(o.status.success(), "{}", stderr(&o));
    let path = format!("{}/../docs/{file}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("ANIMAWORKS_TOOL_BLESS").is_some() {
        std::fs::write(&path, &o.stdout).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == stdout(&o),
        "docs/{file} is stale: `cargo run -q -p animaworks-tool -- man {flag} > docs/{file}` (or ANIMAWORKS_TOOL_BLESS=1)"
    );
    for m in must {
        assert!(committed.contains(m), "{m} missing from docs/{file}");
    }
}

/// docs/commands.md, docs/commands-tasks.md and docs/commands-setup.md are the command tree's own Markdown
/// (`man --markdown`, `--markdown-tasks`, `--markdown-setup`): a new command or option that is not in them fails here. `ANIMAWORKS_TOOL_BLESS=1`
/// rewrites the files.
#[test]
fn the_command_reference_in_the_docs_is_current() {
    let w = World::new();
    for (flag, file, must) in [
        (
            "--markdown",
            "commands.md",
            &["## `animaworks-tool mcp`", "`--color <WHEN>`", "(commands-tasks.md)"][..],
        ),
        (
            "--markdown-tasks",
            "commands-tasks.md",
            &[
                "## `animaworks-tool jobs list`",
                "## `animaworks-tool submit`",
                "(commands.md)",
            ][..],
        ),
        (
            "--markdown-setup",
            "commands-setup.md",
            &[
                "## `animaworks-tool mcp-servers install`",
                "## `animaworks-tool animaworks install`",
                "(commands.md)",
            ][..],
        ),
    ] {
        generated_page_is_current(&w, flag, file, &must[..]);
    }
}

/// The configuration page and the settings' JSON Schema are generated from the settings' types and the
/// environment registry; the committed files must be what the runner prints.
#[test]
fn the_configuration_page_and_the_settings_schema_in_the_docs_are_current() {
    let w = World::new();
    for (flag, file, must) in [
        (
            "--config-markdown",
            "configuration.md",
            ["## `limits.core`", "`max_running_tasks`", "`ANIMAWORKS_TOOL_TASKS_URL`"],
        ),
        (
            "--config-schema",
            "animaworks-tool.schema.json",
            [
                "\"additionalProperties\": false",
                "\"max_running_tasks\"",
                "\"pid_namespace\"",
            ],
        ),
    ] {
        generated_page_is_current(&w, flag, file, &must[..]);
    }
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/../docs/animaworks-tool.schema.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(schema["properties"]["max_running_tasks"]["default"], 4, "{schema}");
}

#[test]
fn a_misspelt_settings_key_stops_commands_and_doctor_names_it_with_the_closest_key() {
    let w = World::new();
    hello(&w);
    w.settings(r#"{"max_runing_tasks": 2}"#);
    let o = w.run(&["doctor", "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let v = json(&o);
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["settings_error"]["key"], "max_runing_tasks", "{v}");
    assert_eq!(v["settings_error"]["did_you_mean"], "max_running_tasks", "{v}");
    let o = w.run(&["doctor"]);
    assert!(
        stdout(&o).contains("unknown key \"max_runing_tasks\"; did you mean \"max_running_tasks\"?"),
        "{}",
        stdout(&o)
    );
    let o = w.run(&["call", "hello", "greet", "--who", "x"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "the operator's file is at fault: usage, not internal"
    );
    let e = json(&o)["error"].clone();
    assert!(
        e["message"].as_str().unwrap().contains("animaworks-tool.json") && e["did_you_mean"] == "max_running_tasks",
        "{e}"
    );
    assert_eq!(e["code"], "usage", "{e}");
    // Every command, not only a call: never a listing or a schema made on the defaults.
    for cmd in [&["tools"][..], &["schemas"], &["use-tool"], &["jobs", "list"]] {
        let o = w.run(cmd);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {}", stdout(&o));
        assert!(stderr(&o).contains("animaworks-tool.json"), "{cmd:?}: {}", stderr(&o));
        assert!(
            stdout(&o).is_empty(),
            "{cmd:?} answered on the defaults: {}",
            stdout(&o)
        );
    }
    w.settings(r#"{"$schema": "animaworks-tool.schema.json", "max_running_tasks": 2}"#);
    assert_eq!(
        w.run(&["doctor"]).status.code(),
        Some(0),
        "a valid file with $schema is fine"
    );
}

#[test]
fn mistyped_tools_actions_and_flags_get_the_closest_name() {
    let w = World::new();
    hello(&w);
    let o = w.run(&["helo", "greet"]);
    assert_eq!(o.status.code(), Some(3));
    let e = json(&o);
    assert_eq!(e["error"]["did_you_mean"], "hello", "{e}");
    assert!(
        e["error"]["hint"].as_str().unwrap().contains("did you mean \"hello\""),
        "{e}"
    );
    let o = w.run(&["hello", "gret"]);
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(json(&o)["error"]["did_you_mean"], "greet");
    let o = w.run(&["hello", "greet", "--wh", "x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(json(&o)["error"]["hint"]
        .as_str()
        .unwrap()
        .contains("did you mean \"--who\""));
    // A runner command is a candidate too.
    let o = w.run(&["doctr"]);
    assert!(
        json(&o)["error"]["hint"].as_str().unwrap().contains("\"doctor\""),
        "{}",
        stdout(&o)
    );
}

#[test]
fn an_unknown_tool_and_doctor_say_when_the_personal_tier_was_not_searched() {
    let w = World::new();
    hello(&w);
    let o = w
        .cmd()
        .env_remove("ANIMAWORKS_ANIMA_DIR")
        .args(["hello", "greet"])
        .output()
        .unwrap();
    let m = json(&o)["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        m.contains("personal tier was not searched") && m.contains("ANIMAWORKS_ANIMA_DIR"),
        "{m}"
    );
    let gone = w.tmp.path().join("animas").join("bob");
    let o = w
        .cmd()
        .env("ANIMAWORKS_ANIMA_DIR", &gone)
        .args(["hello", "greet"])
        .output()
        .unwrap();
    let m = json(&o)["error"]["message"].as_str().unwrap().to_owned();
    assert!(m.contains(&format!("{} does not exist", gone.display())), "{m}");
    let o = w
        .cmd()
        .env("ANIMAWORKS_ANIMA_DIR", &gone)
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "a named anima dir that is missing is a problem: {}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("does not exist"), "{}", stdout(&o));
    let o = w
        .cmd()
        .env_remove("ANIMAWORKS_ANIMA_DIR")
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("personal tier was not searched"), "{}", stdout(&o));
    // Plurals.
    assert!(stdout(&o).contains("ok: 0 tools, no problems"), "{}", stdout(&o));
    let o = w.run(&["doctor"]);
    assert!(stdout(&o).contains("ok: 1 tool, no problems"), "{}", stdout(&o));
}

#[test]
fn hints_for_an_llm_name_the_meta_tools_and_the_closest_name_never_a_shell_command() {
    let w = World::new();
    hello(&w);
    let ask = |req: &str| -> Value {
        let o = w.feed(&["use-tool"], req);
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| Value::String(stdout(&o)))
    };
    for (req, near) in [
        (r#"{"tool_name":"helo","action":"greet"}"#, "hello"),
        (r#"{"tool_name":"hello","action":"gret"}"#, "greet"),
        (r#"{"tool_name":"hello","action":"greet","args":{"who":3}}"#, ""),
    ] {
        let a = ask(req);
        // An unknown action is the original's plain text (`Error executing …`), with the hint on its last line.
        let s = match &a {
            Value::String(t) => t.lines().last().unwrap_or_default(),
            _ => a["suggestion"].as_str().unwrap_or_else(|| panic!("no suggestion: {a}")),
        };
        assert!(s.contains(r#""tool_name":"help""#), "{s}");
        assert!(!s.contains("animaworks-tool") && !s.contains('`'), "{s}");
        assert!(s.contains(near), "{s}");
    }
}

#[test]
fn a_task_is_found_by_a_unique_prefix_of_its_id() {
    let w = World::new();
    hello(&w);
    let o = w.run(&["submit", "hello", "greet", "--who", "x"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let o = w.run(&["jobs", "wait", &id[..6]]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = w.run(&["jobs", "show", &id[..5]]);
    assert_eq!(json(&o)["task_id"], id.as_str());
    // Two ids with that prefix: ambiguous, both named.
    let dir = w.anima.join("state/background_tasks");
    let twin = format!("{}ffffff", &id[..6]);
    let mut t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{id}.json"))).unwrap()).unwrap();
    t["task_id"] = twin.clone().into();
    std::fs::write(dir.join(format!("{twin}.json")), t.to_string()).unwrap();
    let o = w.run(&["jobs", "show", &id[..6]]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("ambiguous") && stderr(&o).contains(&twin),
        "{}",
        stderr(&o)
    );
    let o = w.run(&["jobs", "show", "zzzz"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A full-form tool with events whose action `go` runs `body` (bash) after reading the request.
fn events_tool(w: &World, name: &str, body: &str) {
    let schemas = r#"{"protocol":1,"events":true,"actions":[{"name":"go","input_schema":{"type":"object"},"profile":{"background_eligible":true}}]}"#;
    w.tool(&w.personal(), name, &bash_tool(schemas, body));
}

/// What a person sees: escape sequences removed, each redraw (`\r`) and line a separate entry.
fn screen_lines(term: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut chars = term.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
        .split(['\r', '\n'])
        .map(str::to_owned)
        .filter(|l| !l.trim().is_empty())
        .collect()
}

fn has_sgr(term: &str) -> bool {
    let b = term.as_bytes();
    (0..b.len()).any(|i| {
        b[i] == 0x1b && b.get(i + 1) == Some(&b'[') && {
            let rest = &b[i + 2..];
            let end = rest.iter().position(|c| c.is_ascii_alphabetic());
            end.is_some_and(|e| rest[e] == b'm')
        }
    })
}

const PROGRESS_THEN_LOG: &str = r#"echo '{"type":"progress","progress":1,"total":3,"message":"first step of a long job whose message is much wider than the terminal it is shown on, on and on and on"}'
echo '{"type":"log","level":"warning","message":"a log line"}'
echo 'raw stderr' >&2
echo '{"type":"progress","progress":3,"total":3}'
echo '{"type":"result","result":"done"}'"#;

#[test]
fn on_a_terminal_the_bar_comes_back_after_a_log_line_and_fits_the_width() {
    let w = World::new();
    events_tool(&w, "prog", PROGRESS_THEN_LOG);
    let mut c = w.cmd();
    c.env("TERM", "xterm").args(["prog", "go"]);
    let (code, out, term) = run_in_pty(&mut c, 40, |_| {});
    assert_eq!(code, Some(0), "{term}");
    assert_eq!(out, "done\n");
    let lines = screen_lines(&term);
    let log = lines
        .iter()
        .position(|l| l.contains("[warning] a log line"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(
        lines.get(log + 1).is_some_and(|l| l.contains("1/3")),
        "the bar is not drawn again right after the log line: {lines:?}"
    );
    assert!(lines.iter().any(|l| l.contains("raw stderr")), "{lines:?}");
    for l in lines.iter().filter(|l| l.contains("/3")) {
        assert!(l.chars().count() <= 40, "a bar line is wider than the terminal: {l:?}");
    }
    assert!(has_sgr(&term), "colour on a terminal: {term:?}");
}

#[test]
fn no_color_gets_no_colour_and_term_dumb_no_escape_codes() {
    let w = World::new();
    events_tool(&w, "prog", PROGRESS_THEN_LOG);
    let mut c = w.cmd();
    c.env("TERM", "xterm").env("NO_COLOR", "1").args(["prog", "go"]);
    let (code, _, term) = run_in_pty(&mut c, 80, |_| {});
    assert_eq!(code, Some(0));
    assert!(!has_sgr(&term), "NO_COLOR: {term:?}");
    assert!(term.contains("a log line"));
    let mut c = w.cmd();
    c.env("TERM", "dumb").args(["prog", "go"]);
    let (code, _, term) = run_in_pty(&mut c, 80, |_| {});
    assert_eq!(code, Some(0));
    assert!(!term.contains('\x1b'), "TERM=dumb: {term:?}");
    assert!(
        term.contains("progress 1/3") && term.contains("[warning] a log line"),
        "{term:?}"
    );
    // A pipe: plain lines only.
    let o = w.run(&["prog", "go"]);
    assert!(!stderr(&o).contains('\x1b'), "{}", stderr(&o));
    assert!(stderr(&o).contains("progress 3/3"), "{}", stderr(&o));
}

#[test]
fn a_call_that_sends_nothing_shows_a_spinner_with_the_elapsed_time() {
    let w = World::new();
    let go = w.tmp.path().join("go-on");
    events_tool(
        &w,
        "quiet",
        &format!(
            "for i in $(seq 1 1200); do [ -e {} ] && break; sleep 0.05; done\necho '{{\"type\":\"result\",\"result\":\"late\"}}'",
            go.display()
        ),
    );
    let mut c = w.cmd();
    c.env("TERM", "xterm").args(["quiet", "go"]);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let s = seen.clone();
    let go2 = go.clone();
    let (code, out, term) = run_in_pty(&mut c, 80, move |b| {
        let mut all = s.lock().unwrap();
        all.push_str(&String::from_utf8_lossy(b));
        if all.contains("waiting for the tool") {
            let _ = std::fs::write(&go2, "");
        }
    });
    assert_eq!(code, Some(0), "{term}");
    assert_eq!(out, "late\n");
    let lines = screen_lines(&term);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("waiting for the tool") && l.contains("s ")),
        "{lines:?}"
    );
    assert!(
        go.exists(),
        "the tool was released by the spinner, not by its own timeout"
    );
}

#[test]
fn jobs_wait_shows_the_display_of_a_foreground_call() {
    let w = World::new();
    let go = w.tmp.path().join("go-on");
    events_tool(
        &w,
        "slow",
        &format!(
            "echo '{{\"type\":\"progress\",\"progress\":1,\"total\":2,\"message\":\"half way\"}}'\nfor i in $(seq 1 1200); do [ -e {} ] && break; sleep 0.05; done\necho '{{\"type\":\"result\",\"result\":\"finished\"}}'",
            go.display()
        ),
    );
    let o = w.run(&["submit", "slow", "go"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let mut c = w.cmd();
    c.env("TERM", "xterm").args(["jobs", "wait", &id]);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let s = seen.clone();
    let go2 = go.clone();
    let (code, out, term) = run_in_pty(&mut c, 80, move |b| {
        let mut all = s.lock().unwrap();
        all.push_str(&String::from_utf8_lossy(b));
        if all.contains("half way") {
            let _ = std::fs::write(&go2, "");
        }
    });
    assert_eq!(code, Some(0), "{term}");
    assert_eq!(out, "finished\n");
    let lines = screen_lines(&term);
    assert!(
        lines.iter().any(|l| l.contains("[") && l.contains("1/2 half way")),
        "{lines:?}"
    );
}

#[test]
fn jobs_wait_that_runs_out_has_its_own_exit_code() {
    let w = World::new();
    let go = w.tmp.path().join("go-on");
    events_tool(
        &w,
        "slow",
        &format!(
            "for i in $(seq 1 1200); do [ -e {} ] && break; sleep 0.05; done\necho '{{\"type\":\"result\",\"result\":1}}'",
            go.display()
        ),
    );
    let o = w.run(&["submit", "slow", "go"]);
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    let o = w.run(&["jobs", "wait", &id, "--timeout", "0.01"]);
    assert_eq!(o.status.code(), Some(124), "{}", stderr(&o));
    assert_eq!(json(&o)["error"]["code"], "wait_timeout");
    std::fs::write(&go, "").unwrap();
    assert!(w.run(&["jobs", "wait", &id]).status.success());
}

#[test]
fn action_help_teaches_ranges_enums_formats_defaults_and_examples() {
    let w = World::new();
    let schemas = r#"[{"name":"rich_go","description":"Go.","input_schema":{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":5,"default":2},"when":{"type":"string","format":"date-time","examples":["2024-01-01T00:00:00Z"]},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3},"bare":{"type":"string"}},"required":["bare"]}}]"#;
    w.tool(&w.personal(), "rich", &bash_tool(schemas, "echo '\"x\"'"));
    let o = w.run(&["rich", "go", "--help"]);
    assert!(o.status.success());
    let h = stdout(&o);
    for want in [
        "1 ≤ n ≤ 5",
        "default: 2",
        "format: date-time",
        "e.g. \"2024-01-01T00:00:00Z\"",
        "at most 3 items",
        "each: one of: \"a\", \"b\"",
        "  --bare <string>\n      [required]",
        "Call options (after the action)",
        "Global options (before the tool's name)",
    ] {
        assert!(h.contains(want), "{want:?} missing from:\n{h}");
    }
    // `help <tool> [<action>]` is the same help.
    assert_eq!(stdout(&w.run(&["help", "rich", "go"])), h);
    assert_eq!(stdout(&w.run(&["help", "rich"])), stdout(&w.run(&["rich", "--help"])));
    assert!(stdout(&w.run(&["help", "jobs", "wait"])).contains("--timeout"));
    assert_eq!(w.run(&["help", "rihc"]).status.code(), Some(3));
    let u = stdout(&w.run(&["use-tool", "--help"]));
    assert!(
        u.contains(r#"{"tool_name": "help", "action": "describe""#) && u.contains("\"status\": \"error\""),
        "{u}"
    );
}

#[test]
fn a_cli_main_module_says_the_call_options_do_not_apply_and_points_to_call() {
    let w = World::new();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/legacy-notes/legacy_notes.py");
    std::fs::copy(&example, w.personal().join("legacy_notes.py")).unwrap();
    let h = stdout(&w.run(&["help", "legacy_notes"]));
    assert!(
        h.contains("do not apply") && h.contains("animaworks-tool call legacy_notes <action> --json"),
        "{h}"
    );
    let o = w.run(&["legacy_notes", "add", "--json", r#"{"title":"y"}"#]);
    assert!(
        stderr(&o).contains("animaworks-tool call legacy_notes"),
        "{}",
        stderr(&o)
    );
    // The module's own -j/--json switch is no mistake.
    let o = w.run(&["legacy_notes", "list", "--json"]);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

/// Run the runner with stdout and stderr on a pipe whose reading end is already closed (`… 2>&1 | head -c0`):
/// every write fails with EPIPE. Returns the exit status.
fn into_closed_pipe(w: &World, args: &[&str], stdin: Option<&str>) -> std::process::ExitStatus {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two ints with fresh fds, owned below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both fds were just created and are owned here.
    let (read, write) = unsafe { (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(fds[1])) };
    drop(read);
    let mut c = w.cmd();
    c.args(args).stdout(write.try_clone().unwrap()).stderr(write);
    if let Some(text) = stdin {
        let p = w.tmp.path().join(format!("stdin-{}", args.join("-").replace('/', "_")));
        std::fs::write(&p, text).unwrap();
        c.stdin(std::fs::File::open(&p).unwrap());
    }
    c.status().unwrap()
}

#[test]
fn no_command_panics_on_a_closed_pipe() {
    let w = World::new();
    hello(&w);
    events_tool(&w, "prog", PROGRESS_THEN_LOG);
    assert!(w.run(&["hello", "greet", "--who", "x"]).status.success());
    let id = json(&w.run(&["submit", "hello", "greet", "--who", "x"]))["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(w.run(&["jobs", "wait", &id]).status.success());
    let scratch = w.tmp.path().join("scratch");
    let scratch = scratch.to_str().unwrap();
    let hello_path = w.personal().join("hello");
    let hello_path = hello_path.to_str().unwrap();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let cases: Vec<(&str, Vec<&str>, Option<&str>)> = vec![
        ("tools", vec!["tools"], None),
        ("tools", vec!["tools", "--json"], None),
        ("doctor", vec!["doctor"], None),
        ("refresh", vec!["refresh"], None),
        ("call", vec!["call", "hello", "greet", "--who", "x"], None),
        ("call", vec!["call", "hello", "nope"], None),
        ("call", vec!["call", "prog", "go", "--events"], None),
        ("submit", vec!["submit", "hello", "greet", "--who", "y"], None),
        ("jobs", vec!["jobs", "list"], None),
        ("jobs", vec!["jobs", "show", &id], None),
        ("jobs", vec!["jobs", "wait", &id], None),
        ("jobs", vec!["jobs", "prune", "--older-than", "1w"], None),
        // The file store has no shared queue: `worker` says so and ends.
        ("worker", vec!["worker"], None),
        (
            "use-tool",
            vec!["use-tool"],
            Some(r#"{"tool_name":"hello","action":"greet","args":{"who":"z"}}"#),
        ),
        (
            "use-tool",
            vec!["use-tool", "--serve"],
            Some("{\"tool_name\":\"help\",\"action\":\"list\"}\n"),
        ),
        ("mcp", vec!["mcp"], Some(init)),
        ("schemas", vec!["schemas"], None),
        ("schemas", vec!["schemas", "--stats"], None),
        ("new", vec!["new", "fresh", "--lang", "bash", "--dir", scratch], None),
        ("check", vec!["check", hello_path], None),
        ("permissions", vec!["permissions", "show"], None),
        ("approvals", vec!["approvals", "list", "--all"], None),
        ("share", vec!["share", "hello"], None),
        ("animaworks", vec!["animaworks", "status", "--venv", scratch], None),
        ("mcp-servers", vec!["mcp-servers", "install"], None),
        ("completions", vec!["completions", "bash"], None),
        ("man", vec!["man"], None),
        ("help", vec!["help"], None),
        ("help", vec!["help", "hello", "greet"], None),
        ("version", vec!["version"], None),
        ("", vec!["--help"], None),
        ("", vec!["--version"], None),
        ("", vec!["hello", "greet", "--who", "x"], None),
        ("", vec!["hello", "--help"], None),
        ("", vec!["hello", "greet", "--help"], None),
        ("", vec!["prog", "go"], None),
        ("", vec!["helo"], None),
        ("", vec!["jobs", "lst"], None),
    ];
    for (_, args, stdin) in &cases {
        let st = into_closed_pipe(&w, args, *stdin);
        assert_ne!(st.code(), Some(101), "{args:?} panicked on a closed pipe");
        assert!(st.code().is_some(), "{args:?} died by a signal: {st:?}");
    }
    // Every runner command is covered.
    let help = stdout(&w.run(&["--help"]));
    let commands = help.split("Commands:").nth(1).unwrap().split("\n\n").next().unwrap();
    for line in commands.lines().filter(|l| l.starts_with("  ")) {
        let name = line.split_whitespace().next().unwrap();
        assert!(cases.iter().any(|c| c.0 == name), "no closed-pipe case for {name}");
    }
}

#[test]
fn call_answers_every_usage_error_with_json_on_stdout() {
    let w = World::new();
    hello(&w);
    for args in [
        &["call", "hello"][..],
        &["call"],
        &["--anima-dir", "x", "call"],
        &["call", "hello", "greet", "--bogus", "1"],
        &["call", "hello", "greet", "stray"],
    ] {
        let o = w.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(json(&o)["error"]["code"], "usage", "{args:?}");
    }
}

#[test]
fn a_failure_on_a_terminal_is_said_once() {
    let w = World::new();
    hello(&w);
    w.tool(
        &w.personal(),
        "boom",
        &bash_tool(
            HELLO.replace("hello_greet", "boom_greet").as_str(),
            "echo boom-marker >&2; exit 3",
        ),
    );
    // `call` on a terminal: the JSON object, not also the sentence.
    let mut c = w.cmd();
    c.env("TERM", "xterm").args(["call", "hello", "nope"]);
    let (code, _, term) = run_in_pty_with(&mut c, 200, true, |_| {});
    assert_eq!(code, Some(4));
    assert_eq!(term.matches("has no action").count(), 1, "{term}");
    assert!(term.contains("{\"error\""), "{term}");
    // The tool form on a terminal: the sentence, not the JSON.
    let mut c = w.cmd();
    c.env("TERM", "xterm").args(["hello", "nope"]);
    let (_, _, term) = run_in_pty_with(&mut c, 200, true, |_| {});
    assert_eq!(term.matches("has no action").count(), 1, "{term}");
    assert!(!term.contains("{\"error\""), "{term}");
    // A tool's stderr shown live is not repeated as a tail.
    let mut c = w.cmd();
    c.env("TERM", "xterm").args(["boom", "greet", "--who", "x"]);
    let (code, _, term) = run_in_pty_with(&mut c, 200, true, |_| {});
    assert_eq!(code, Some(11), "{term}");
    assert_eq!(term.matches("boom-marker").count(), 1, "{term}");
}

#[test]
fn jobs_list_has_a_header_and_says_when_there_are_no_tasks() {
    let w = World::new();
    hello(&w);
    assert_eq!(stdout(&w.run(&["jobs", "list"])), "no tasks\n");
    let o = w.run(&["submit", "hello", "greet", "--who", "x"]);
    let id = json(&o)["task_id"].as_str().unwrap().to_owned();
    assert!(w.run(&["jobs", "wait", &id]).status.success());
    let list = stdout(&w.run(&["jobs", "list"]));
    let lines: Vec<&str> = list.lines().collect();
    assert!(lines[0].starts_with("TASK") && lines[0].contains("STATUS"), "{list}");
    assert!(lines[1].starts_with(&id) && lines[1].contains("completed"), "{list}");
    assert_eq!(
        stdout(&w.run(&["jobs", "list", "--status", "running"])),
        "no tasks that are running\n"
    );
}

#[test]
fn the_mcp_server_logs_one_line_records_without_escape_codes() {
    let w = World::new();
    hello(&w);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hello_gret","arguments":{}}}
"#;
    let o = w.feed(&["mcp"], init);
    let err = stderr(&o);
    assert!(!err.contains('\x1b'), "{err}");
    assert!(
        !err.contains("ErrorData {") && !err.contains("Object {"),
        "a Debug dump: {err}"
    );
    let refused: Vec<&str> = err.lines().filter(|l| l.contains("hello_gret")).collect();
    assert_eq!(refused.len(), 1, "{err}");
    assert!(
        refused[0].contains("WARN") && refused[0].contains("did you mean \"hello_greet\""),
        "{err}"
    );
    assert!(stdout(&o).contains("hello_greet"), "{}", stdout(&o));
}

#[test]
fn new_python_tool_is_executable_with_a_shebang_and_a_neutral_description() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let o = w.run(&["new", "made", "--lang", "python"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let path = w.personal().join("made.py");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("#!/usr/bin/env python3\n"), "{text}");
    assert!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o111 != 0);
    let list = json(&w.run(&["tools", "--json"]));
    let d = list["tools"][0]["description"].as_str().unwrap().to_owned();
    assert!(
        !d.contains("animaworks-tool") && !d.contains("SDK") && !d.contains("sdk"),
        "{d}"
    );
    // As the SDK's help says: ./made.py --schemas (with the SDK importable).
    let sdk = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tool-sdk-py/src");
    let o = std::process::Command::new(&path)
        .arg("--schemas")
        .env("PYTHONPATH", sdk)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"echo\""), "{}", stdout(&o));
}

#[test]
fn check_reports_protocol_1_for_a_short_form_tool_and_warns_of_unchecked_formats() {
    let w = World::new();
    let schemas = r#"[{"name":"fmt_go","description":"Go.","input_schema":{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"site":{"type":"array","items":{"type":"string","format":"uri"}}}}}]"#;
    let p = w.tool(&w.personal(), "fmt", &bash_tool(schemas, "echo '\"ok\"'"));
    let o = w.run(&["check", p.to_str().unwrap()]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("protocol 1,"), "{out}");
    assert!(
        out.contains("warn action go: \"format\" is not checked")
            && out.contains("\"date-time\" at /properties/when")
            && out.contains("\"uri\" at /properties/site/items"),
        "{out}"
    );
}

#[test]
fn the_readme_five_minute_bash_tool_handles_quotes() {
    if std::process::Command::new("jq").arg("--version").output().is_err() {
        awt_sys::skipped!("jq is not installed (.ci/run installs it)");
        return;
    }
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let start = readme
        .find("tools/hello.sh\" <<'EOF'\n")
        .expect("the README's bash tool")
        + "tools/hello.sh\" <<'EOF'\n".len();
    let script = &readme[start..start + readme[start..].find("\nEOF\n").unwrap() + 1];
    let w = World::new();
    w.tool(&w.personal(), "hello.sh", script);
    let who = "Ada \"the\" O'Brien \\ {x}";
    let o = w.run(&["hello", "greet", "--who", who]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o)["greeting"], format!("hello, {who}"));
}

/// `docs/<page>.md` of every page, relative to the repository.
fn docs_pages(root: &std::path::Path) -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    pages.sort();
    pages
}

/// The README is short and the manual is in docs/: every relative link of either reaches a file that exists, and
/// a `#fragment` into a Markdown page names one of its headings (as a code host makes anchors of them).
#[test]
fn the_readme_and_docs_links_reach_what_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.len() <= 15 * 1024,
        "the README is {} bytes: the manual goes into docs/",
        readme.len()
    );
    let anchors = |text: &str| -> Vec<String> {
        let mut in_code = false;
        text.lines()
            .filter(|l| {
                if l.starts_with("```") {
                    in_code = !in_code;
                }
                !in_code && l.starts_with('#')
            })
            .map(|l| {
                l.trim_start_matches('#')
                    .trim()
                    .to_lowercase()
                    .chars()
                    .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
                    .map(|c| if c == ' ' { '-' } else { c })
                    .collect()
            })
            .collect()
    };
    let mut checked = 0;
    for doc in std::iter::once("README.md".to_owned()).chain(docs_pages(&root)) {
        let text = std::fs::read_to_string(root.join(&doc)).unwrap();
        let base = root.join(&doc).parent().unwrap().to_path_buf();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let link = &after[..end];
            rest = &after[end..];
            if link.contains("://") || link.contains(' ') {
                continue;
            }
            let (file, fragment) = link.split_once('#').unwrap_or((link, ""));
            let target = if file.is_empty() {
                root.join(&doc)
            } else {
                base.join(file)
            };
            assert!(target.exists(), "{doc} links to {link}, which does not exist");
            if !fragment.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let heads = anchors(&std::fs::read_to_string(&target).unwrap());
                assert!(
                    heads.iter().any(|h| h == fragment),
                    "{doc} links to {link}: no such heading in {heads:?}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 30, "only {checked} links found");
    for page in [
        "writing-tools",
        "migrating",
        "sandbox",
        "background-tasks",
        "llm",
        "mcp",
        "configuration",
        "commands",
        "performance",
    ] {
        assert!(
            readme.contains(&format!("(docs/{page}.md)")),
            "the README does not lead to docs/{page}.md"
        );
    }
}

#[test]
fn docs_name_no_path_of_one_machine_and_the_rust_sdk_readme_has_every_link_defined() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for doc in [
        "README.md",
        "protocol.md",
        "bench/README.md",
        "tool-sdk-rs/README.md",
        "tool-sdk-py/README.md",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(docs_pages(&root))
    {
        let doc = doc.as_str();
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for bad in ["/work/", "/root/", "/home/runner"] {
            assert!(!text.contains(bad), "{doc} names a path of one machine: {bad}");
        }
    }
    // [`Name`] is an intra-doc link only rustdoc resolves; on a code host each needs a definition.
    let sdk = std::fs::read_to_string(root.join("tool-sdk-rs/README.md")).unwrap();
    let mut rest = sdk.as_str();
    while let Some(i) = rest.find("[`") {
        let after = &rest[i..];
        let end = after.find("`]").unwrap() + 2;
        let label = &after[..end];
        if !after[end..].starts_with('(') && !after[end..].starts_with(':') {
            assert!(
                sdk.contains(&format!("\n{label}: ")),
                "{label} has no link definition in tool-sdk-rs/README.md"
            );
        }
        rest = &after[end..];
    }
}

#[test]
fn submit_on_a_terminal_says_how_to_follow_the_task() {
    let w = World::new();
    hello(&w);
    let mut c = w.cmd();
    c.env("TERM", "xterm").args(["submit", "hello", "greet", "--who", "x"]);
    let (code, out, term) = run_in_pty(&mut c, 200, |_| {});
    assert_eq!(code, Some(0), "{term}");
    let id = serde_json::from_str::<Value>(&out).unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(term.contains(&format!("animaworks-tool jobs wait {id}")), "{term}");
    // In a pipe, only the receipt.
    let o = w.run(&["submit", "hello", "greet", "--who", "y"]);
    assert!(!stderr(&o).contains("jobs wait"), "{}", stderr(&o));
}

/// A permissions file that cannot be used refuses every call: `doctor`, `tools`, `schemas` and `use-tool`'s
/// `help list` say so, with the file, line and column and the consequence, never an answer with fewer tools alone.
#[test]
fn a_malformed_permissions_file_is_named_by_every_listing() {
    let w = World::new();
    hello(&w);
    std::fs::write(
        w.anima.join("permissions.json"),
        "{\n  \"external_tools\": {\"allow\": [\"x\",]}\n}\n",
    )
    .unwrap();
    let said = |o: &std::process::Output| format!("{}{}", stdout(o), stderr(o));
    let doctor = w.run(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(1), "{}", said(&doctor));
    let tools = w.run(&["tools"]);
    let schemas = w.run(&["schemas"]);
    assert_eq!(schemas.status.code(), Some(1), "{}", said(&schemas));
    let list = w.feed(&["use-tool"], r#"{"tool_name":"help","action":"list"}"#);
    for (what, o) in [
        ("doctor", &doctor),
        ("tools", &tools),
        ("schemas", &schemas),
        ("help list", &list),
    ] {
        let text = said(o);
        assert!(text.contains("permissions.json:2:"), "{what}: {text}");
        assert!(text.contains("every call of this anima is refused"), "{what}: {text}");
    }
}

/// A misspelt key of `permissions.json` is ignored, as AnimaWorks ignores it, but `doctor` and `tools` name it,
/// where it is and the key it is closest to: the grant it meant to give does not apply.
#[test]
fn a_misspelt_permissions_key_is_named_with_the_closest_key() {
    let w = World::new();
    hello(&w);
    std::fs::write(
        w.anima.join("permissions.json"),
        "{\"credentails\": {\"hello\": [\"A\"]}}",
    )
    .unwrap();
    let o = w.run(&["call", "hello", "greet", "--who", "x"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "still accepted, as in AnimaWorks: {}",
        stderr(&o)
    );
    for cmd in ["doctor", "tools"] {
        let o = w.run(&[cmd]);
        let out = stdout(&o);
        assert!(
            out.contains("permissions.json:1:2: unknown key \"credentails\"") && out.contains("\"credentials\""),
            "{cmd}: {out}"
        );
    }
    assert_eq!(w.run(&["doctor"]).status.code(), Some(0), "a warning, not a problem");
    let show = w.run(&["permissions", "show"]);
    assert!(
        stderr(&show).contains("unknown key \"credentails\""),
        "{}",
        stderr(&show)
    );
}

/// A module with its own CLI takes the words after its name as its argv: completion offers its actions (in the
/// schemas' spelling, which its argparse may refuse) only under `call`, and its help's usage lines say which form
/// is which.
#[test]
fn a_cli_main_module_completes_and_helps_with_the_form_that_takes_its_words() {
    let w = World::new();
    let module = r#"import argparse

def get_tool_schemas():
    return [{"name": "notes_delete_all", "description": "Delete every note.", "input_schema": {"type": "object"}}]

def dispatch(name, args):
    return {"ok": True}

def cli_main(argv=None):
    p = argparse.ArgumentParser(prog="animaworks-tool notes")
    p.add_subparsers(dest="action", required=True).add_parser("delete-all")
    p.parse_args(argv)
    print("deleted")
"#;
    w.tool(&w.personal(), "notes.py", module);
    assert!(w.run(&["tools"]).status.success());
    let top = complete(&w, 2, &["animaworks-tool", "notes", ""]);
    assert!(
        !top.contains(&"delete_all".to_owned()),
        "argparse refuses delete_all: {top:?}"
    );
    assert_eq!(
        complete(&w, 3, &["animaworks-tool", "call", "notes", "del"]),
        vec!["delete_all"]
    );
    let help = stdout(&w.run(&["help", "notes"]));
    assert!(
        help.contains("Usage: animaworks-tool notes <the argv of its cli_main…>"),
        "{help}"
    );
    assert!(
        help.contains("animaworks-tool call notes <action> [--param value …]"),
        "{help}"
    );
    assert!(
        help.contains("See `animaworks-tool call notes <action> --help`"),
        "{help}"
    );
    let action = stdout(&w.run(&["help", "notes", "delete_all"]));
    assert!(
        action.starts_with("animaworks-tool call notes delete_all — "),
        "{action}"
    );
}
