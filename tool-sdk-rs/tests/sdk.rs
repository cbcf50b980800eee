//! The SDK end to end over in-memory pipes (`tool_sdk::testing`), one topic per module.
#![cfg(feature = "sdk")]

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tool_sdk::protocol::{Event, Level, SchemasOutput};
use tool_sdk::{testing, Action, Context, Credential, JsonSchema, NoArgs, Tool, ToolError};

/// Arguments of greet.
#[derive(Deserialize, JsonSchema)]
struct Greet {
    /// Who to greet.
    who: String,
    #[serde(default)]
    loud: bool,
}

#[derive(Serialize, Deserialize, JsonSchema, PartialEq, Debug)]
struct Greeting {
    greeting: String,
}

fn greet(args: Greet, ctx: &mut Context) -> Result<Greeting, ToolError> {
    ctx.progress_msg(0.0, Some(2.0), "starting");
    ctx.info(format!("greeting {}", args.who));
    ctx.partial(json!({"so_far": "hello"}));
    ctx.progress(2.0, Some(2.0));
    let mut greeting = format!("hello, {}", args.who);
    if args.loud {
        greeting = greeting.to_uppercase();
    }
    Ok(Greeting { greeting })
}

#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    path: String,
}

fn tool() -> Tool {
    Tool::new("demo")
        .version("1.2.3")
        .description("A tool for the SDK's tests.")
        .credential(Credential::new("demo_api", "DEMO_TOKEN"))
        .action(
            Action::new("greet", greet)
                .description("Say hello.")
                .output::<Greeting>()
                .expected_seconds(2.0)
                .timeout_s(30.0)
                .read_only()
                .idempotent(),
        )
        .action(
            Action::new("read_file", |args: ReadArgs, _ctx: &mut Context| {
                // `?` turns io::Error into an `internal` tool error.
                Ok(std::fs::read_to_string(&args.path)?)
            })
            .gated_as("files")
            .background_eligible(true)
            .credential(Credential::new("gh", "GH_TOKEN").key("token").per_anima().optional())
            .open_world(),
        )
        .action(Action::new("create_issue", |_: NoArgs, ctx: &mut Context| {
            Ok::<_, ToolError>(json!({
                "call_id": ctx.call_id(),
                "tool": ctx.tool(),
                "action": ctx.action(),
                "anima": ctx.anima_name(),
                "anima_dir": ctx.anima_dir(),
                "data_dir": ctx.data_dir(),
                "timeout_s": ctx.timeout_s(),
                "has_deadline": ctx.deadline().is_some(),
            }))
        }))
        .action(Action::new(
            "fail",
            |_: NoArgs, _ctx: &mut Context| -> Result<(), ToolError> {
                Err(ToolError::new("not_found", "no such city: Zürich?")
                    .with_hint("try tokyo")
                    .with_data(json!({"city": "Zürich"})))
            },
        ))
        .action(Action::new(
            "boom",
            |_: NoArgs, ctx: &mut Context| -> Result<(), ToolError> {
                ctx.info("about to panic");
                panic!("kaboom {}", 42)
            },
        ))
        .action(Action::with_input_schema(
            "raw",
            json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}),
            |args: Map<String, Value>, ctx: &mut Context| {
                ctx.progress(f64::NAN, None);
                ctx.progress(1.0, Some(f64::INFINITY));
                Ok::<_, ToolError>(Value::Object(args))
            },
        ))
}

mod schemas {
    use super::*;

    #[test]
    fn full_form_with_events_and_persistent() {
        let text = serde_json::to_string(&tool().schemas()).unwrap();
        let SchemasOutput::Full(doc) = serde_json::from_str(&text).unwrap() else {
            panic!("not the full form")
        };
        assert_eq!(doc.protocol, 1);
        assert!(doc.events && doc.persistent);
        assert_eq!(doc.version.as_deref(), Some("1.2.3"));
        assert_eq!(doc.credentials[0].env, "DEMO_TOKEN");
        assert_eq!(doc.credentials[0].key, "api_key");
        assert!(doc.credentials[0].required);
        assert_eq!(doc.actions.len(), 6);
    }

    #[test]
    fn input_schema_is_derived_from_the_argument_type() {
        let doc = tool().schemas();
        let schema = doc.actions[0].input_schema.clone().unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["who"]["type"], "string");
        assert_eq!(schema["properties"]["who"]["description"], "Who to greet.");
        assert_eq!(schema["required"], json!(["who"]));
        assert!(
            schema.get("$schema").is_none() && schema.get("title").is_none(),
            "{schema}"
        );
        let output = doc.actions[0].output_schema.clone().unwrap();
        assert_eq!(output["properties"]["greeting"]["type"], "string");
        let no_args = doc.actions[2].input_schema.clone().unwrap();
        assert_eq!(no_args["type"], "object");
    }

    #[test]
    fn profile_fields_reach_the_wire() {
        let v = serde_json::to_value(tool().schemas()).unwrap();
        let greet = &v["actions"][0]["profile"];
        assert_eq!(greet["expected_seconds"], 2.0);
        assert_eq!(greet["timeout_s"], 30.0);
        assert_eq!(
            greet["hints"],
            json!({"read_only": true, "destructive": false, "idempotent": true, "open_world": false})
        );
        let read = &v["actions"][1]["profile"];
        assert_eq!(read["gated"], true);
        assert_eq!(read["gated_as"], "files");
        assert_eq!(read["background_eligible"], true);
        assert_eq!(
            read["credentials"],
            json!([{"name": "gh", "env": "GH_TOKEN", "key": "token", "per_anima": true, "required": false}])
        );
        assert_eq!(read["hints"]["open_world"], true);
        assert_eq!(v["actions"][5]["input_schema"]["properties"]["n"]["minimum"], 1);
    }

    #[test]
    fn check_reports_what_the_runner_would_refuse() {
        let bad = Tool::new("bad tool")
            .action(Action::new("a-b", |_: NoArgs, _: &mut Context| Ok::<_, ToolError>(())))
            .action(Action::new("a_b", |_: NoArgs, _: &mut Context| Ok::<_, ToolError>(())))
            .action(Action::new("str", |_: String, _: &mut Context| Ok::<_, ToolError>(())).timeout_s(-1.0))
            .action(Action::new("x".repeat(70), |_: NoArgs, _: &mut Context| {
                Ok::<_, ToolError>(())
            }));
        let problems = bad.check().unwrap_err().join("\n");
        for needle in [
            "tool name",
            "differ only in",
            "input_schema has type",
            "timeout_s",
            "longer than 64",
        ] {
            assert!(problems.contains(needle), "{needle:?} missing from:\n{problems}");
        }
        assert!(Tool::new("empty").check().unwrap_err()[0].contains("no actions"));
        assert_eq!(tool().check(), Ok(()));
    }

    #[test]
    fn help_names_every_action_and_argument() {
        let help = tool().help();
        for needle in [
            "demo 1.2.3",
            "greet  Say hello.",
            "who: string (required)  Who to greet.",
            "--serve",
        ] {
            assert!(help.contains(needle), "{needle:?} missing from:\n{help}");
        }
    }
}

mod calls {
    use super::*;

    #[test]
    fn result_with_progress_log_and_partial() {
        let t = testing::call(&tool(), "greet", json!({"who": "Ada", "unknown_field": 1}));
        assert_eq!(
            t.result_as::<Greeting>(),
            Greeting {
                greeting: "hello, Ada".into()
            }
        );
        assert_eq!(
            t.progress(),
            vec![(0.0, Some(2.0), Some("starting")), (2.0, Some(2.0), None)]
        );
        assert_eq!(t.logs(), vec![(Level::Info, "greeting Ada")]);
        assert_eq!(t.partials(), vec![&json!({"so_far": "hello"})]);
        assert_eq!(t.exit_code, Some(0));
        assert!(
            t.events.iter().all(|e| e.call_id().is_none()),
            "one-call events carry no call id:\n{t}"
        );
    }

    #[test]
    fn unicode_passes_through_unescaped() {
        let t = testing::call(&tool(), "greet", json!({"who": "straße 世界 🎉", "loud": true}));
        assert_eq!(t.unwrap_result()["greeting"], "HELLO, STRASSE 世界 🎉");
        assert!(t.lines.last().unwrap().contains("世界 🎉"), "{t}");
    }

    #[test]
    fn bad_arguments_are_invalid_arguments_with_serdes_message() {
        let t = testing::call(&tool(), "greet", json!({"loud": true}));
        assert_eq!(t.error_code(), Some("invalid_arguments"));
        assert!(t.unwrap_error().message.contains("missing field `who`"), "{t}");
        let t = testing::call(&tool(), "greet", json!({"who": 7}));
        assert!(t.unwrap_error().message.contains("expected a string"), "{t}");
        assert_eq!(t.exit_code, Some(1));
    }

    #[test]
    fn tool_errors_keep_code_message_hint_and_data() {
        let t = testing::call(&tool(), "fail", json!({}));
        let e = t.unwrap_error();
        assert_eq!(e.code.as_deref(), Some("not_found"));
        assert_eq!(e.message, "no such city: Zürich?");
        assert_eq!(e.hint.as_deref(), Some("try tokyo"));
        assert_eq!(e.data, Some(json!({"city": "Zürich"})));
    }

    #[test]
    fn question_mark_turns_std_errors_into_internal() {
        let t = testing::call(&tool(), "read_file", json!({"path": "/definitely/not/here"}));
        assert_eq!(t.error_code(), Some("internal"));
        assert!(!t.unwrap_error().message.is_empty());
    }

    #[test]
    fn a_panic_is_an_error_event_not_a_broken_stream() {
        let t = testing::call(&tool(), "boom", json!({}));
        assert_eq!(t.logs(), vec![(Level::Info, "about to panic")]);
        assert_eq!(t.error_code(), Some("panic"));
        assert!(t.unwrap_error().message.contains("kaboom 42"), "{t}");
    }

    #[test]
    fn context_carries_the_request() {
        let tool = tool();
        let mut req = testing::request(&tool, "create_issue", json!({}));
        req.context.anima_name = Some("alice".into());
        req.context.anima_dir = Some("/tmp/animas/alice".into());
        req.context.data_dir = Some("/tmp/data".into());
        req.context.timeout_s = Some(30.0);
        req.context.deadline_ms = Some(1_795_000_000_000);
        let t = testing::call_request(&tool, &req);
        assert_eq!(
            t.unwrap_result(),
            &json!({"call_id": testing::CALL_ID, "tool": "demo", "action": "create_issue", "anima": "alice",
                    "anima_dir": "/tmp/animas/alice", "data_dir": "/tmp/data", "timeout_s": 30.0, "has_deadline": true})
        );
    }

    #[test]
    fn raw_schema_action_and_non_finite_progress() {
        let t = testing::call(&tool(), "raw", json!({"n": 3, "extra": "kept"}));
        assert_eq!(t.unwrap_result(), &json!({"n": 3, "extra": "kept"}));
        assert_eq!(
            t.progress(),
            vec![(1.0, None, None)],
            "NaN progress is dropped, infinite total left out"
        );
    }

    #[test]
    fn actions_are_found_by_schema_name_spelling_and_suffix() {
        let tool = tool();
        for (name, action) in [
            ("demo_create-issue", ""),
            ("create_issue", ""),
            ("renamed-file_create_issue", ""),
            ("anything", "create-issue"),
        ] {
            let mut req = testing::request(&tool, "create_issue", json!({}));
            req.name = name.into();
            req.context.action = action.into();
            let t = testing::call_request(&tool, &req);
            assert_eq!(t.unwrap_result()["action"], "create_issue", "{name} / {action}");
        }
        let t = testing::call(&tool, "nope", json!({}));
        assert_eq!(t.error_code(), Some("unknown_action"));
        assert!(t.unwrap_error().hint.as_deref().unwrap().contains("greet"));
    }

    #[test]
    fn a_request_that_is_not_one_is_a_bad_request() {
        for stdin in ["", "\n\n", "not json\n", "[1,2]\n"] {
            let mut out = Vec::new();
            let code = tool().call_once(stdin.as_bytes(), &mut out);
            assert_eq!(code, 1);
            let text = String::from_utf8(out).unwrap();
            let ev: Event = serde_json::from_str(text.trim()).unwrap();
            assert!(
                matches!(&ev, Event::Error { error, .. } if error.code.as_deref() == Some("bad_request")),
                "{text}"
            );
        }
    }
}

mod serve {
    use super::*;

    fn req(tool: &Tool, action: &str, args: Value, id: &str) -> tool_sdk::protocol::Request {
        let mut r = testing::request(tool, action, args);
        r.context.call_id = id.into();
        r
    }

    #[test]
    fn one_request_per_line_events_tagged_with_call_id() {
        let tool = tool();
        let ts = testing::serve(
            &tool,
            &[
                req(&tool, "greet", json!({"who": "Ada"}), "c-1"),
                req(&tool, "boom", json!({}), "c-2"),
                req(&tool, "greet", json!({}), "c-3"),
                req(&tool, "greet", json!({"who": "Grace"}), "c-4"),
            ],
        );
        assert_eq!(ts.len(), 4);
        assert_eq!(ts[0].unwrap_result()["greeting"], "hello, Ada");
        assert_eq!(ts[0].progress().len(), 2);
        assert_eq!(ts[1].error_code(), Some("panic"));
        assert_eq!(ts[2].error_code(), Some("invalid_arguments"));
        assert_eq!(
            ts[3].unwrap_result()["greeting"],
            "hello, Grace",
            "the worker goes on after a panic"
        );
        assert!(ts.iter().all(|t| t.exit_code.is_none()));
    }

    #[test]
    fn a_broken_line_gets_a_tagged_error_and_the_worker_goes_on() {
        let tool = tool();
        let input = "\n{\"name\":1,\"context\":{\"call_id\":\"x-1\"}}\n{\"name\":\"demo_greet\",\"args\":{\"who\":\"Bo\"},\"context\":{\"call_id\":\"x-2\"}}\n";
        let mut out = Vec::new();
        tool.serve(input.as_bytes(), &mut out).unwrap();
        let events: Vec<Event> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            matches!(&events[0], Event::Error { error, call_id } if error.code.as_deref() == Some("bad_request") && call_id.as_deref() == Some("x-1"))
        );
        let last = events.last().unwrap();
        assert!(
            matches!(last, Event::Result { call_id, .. } if call_id.as_deref() == Some("x-2")),
            "{events:?}"
        );
        assert!(events.iter().all(|e| e.call_id().is_some()));
    }
}
