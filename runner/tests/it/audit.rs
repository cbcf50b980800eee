//! Findings of an audit against the issues, each pinned by a test.

use crate::support::*;

/// A module with schemas *and* a `cli_main` whose subcommands are named like its actions, as AnimaWorks tools are.
const NOTES: &str = "import argparse, json\n\
def get_tool_schemas():\n\
\x20   return [{'name': 'notes_add', 'description': 'Add.', 'input_schema': {'type': 'object',\n\
\x20            'properties': {'title': {'type': 'string'}, 'body': {'type': 'string'}}, 'required': ['title']}}]\n\
def dispatch(name, args):\n\
\x20   return {'via': 'dispatch', 'title': args['title']}\n\
def cli_main(argv=None):\n\
\x20   p = argparse.ArgumentParser(prog='notes')\n\
\x20   sub = p.add_subparsers(dest='action', required=True)\n\
\x20   a = sub.add_parser('add')\n\
\x20   a.add_argument('title')\n\
\x20   a.add_argument('--body', default='')\n\
\x20   a.add_argument('-j', '--json', action='store_true')\n\
\x20   ns = p.parse_args(argv)\n\
\x20   print(json.dumps({'via': 'cli_main', 'title': ns.title, 'body': ns.body}))\n";

fn wait_done(w: &World, id: &str) -> serde_json::Value {
    let o = w.run(&["jobs", "wait", id]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    json(&o)
}

/// How the submitted task calls its tool (`cli` or `action`), from `jobs show`.
fn kind(w: &World, receipt: &serde_json::Value) -> String {
    let o = w.run(&["jobs", "show", receipt["task_id"].as_str().unwrap()]);
    json(&o)["kind"].as_str().unwrap().to_owned()
}

#[test]
fn submit_passes_an_animaworks_argv_to_cli_main_even_when_its_first_word_is_an_action() {
    let w = World::new();
    std::fs::write(w.common().join("notes.py"), NOTES).unwrap();
    // The form AnimaWorks' skill documents teach: a positional argument, not the action's --flags.
    let o = w.run(&["submit", "notes", "add", "my title", "--body", "x"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let receipt = json(&o);
    assert_eq!(receipt["subcommand"], "add", "{receipt}");
    assert_eq!(kind(&w, &receipt), "cli");
    let r = wait_done(&w, receipt["task_id"].as_str().unwrap());
    assert_eq!(r["via"], "cli_main");
    assert_eq!(r["title"], "my title");
    // Words that are the action's own flags still make a structured task.
    let o = w.run(&["submit", "notes", "add", "--title", "t2"]);
    let receipt = json(&o);
    assert_eq!(receipt["subcommand"], "add", "{receipt}");
    assert_eq!(kind(&w, &receipt), "action");
    let r = wait_done(&w, receipt["task_id"].as_str().unwrap());
    assert_eq!(r["via"], "dispatch", "{r}");
}

#[test]
fn run_pending_runs_an_animaworks_descriptor_whose_subcommand_is_an_action() {
    let w = World::new();
    std::fs::write(w.common().join("notes.py"), NOTES).unwrap();
    let pending = w.anima.join("state/background_tasks/pending");
    std::fs::create_dir_all(&pending).unwrap();
    let d = r#"{"task_id":"0123456789ab","tool_name":"notes","subcommand":"add","raw_args":["add","a title","--body","b"],"anima_name":"alice","submitted_at":1.5,"status":"pending"}"#;
    std::fs::write(pending.join("0123456789ab.json"), d).unwrap();
    let o = w.run(&["jobs", "run-pending"]);
    let rep = json(&o);
    assert_eq!(rep["queued"][0]["task_id"], "0123456789ab", "{rep}");
    let r = wait_done(&w, "0123456789ab");
    assert_eq!(r["via"], "cli_main");
    assert_eq!(r["body"], "b");
}
