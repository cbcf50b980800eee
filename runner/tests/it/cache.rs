//! The schema cache: `--schemas` runs once per file version; changes, new and removed files are noticed; a corrupt
//! cache is only a miss; `refresh` probes everything again.

use crate::core::{call, list_json, tool_entry};
use crate::support::*;
use std::path::{Path, PathBuf};

/// A tool that appends a line to `counter` on every `--schemas` and answers `label` to every call.
fn counting_tool(tool: &str, counter: &Path, label: &str) -> String {
    format!(
        "#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then echo probed >> '{}'; cat <<'JSON'\n\
         [{{\"name\":\"{tool}_run\",\"description\":\"Run.\",\"input_schema\":{{\"type\":\"object\"}}}}]\nJSON\n\
         exit 0; fi\ncat >/dev/null\necho '{{\"label\":\"{label}\"}}'\n",
        counter.display()
    )
}

fn label(w: &World, tool: &str) -> String {
    let (code, out) = call(w, tool, "run", "{}", &[]);
    assert_eq!(code, 0, "{out}");
    out["label"].as_str().unwrap().to_owned()
}

fn probes(counter: &Path) -> usize {
    std::fs::read_to_string(counter).map(|s| s.lines().count()).unwrap_or(0)
}

fn cache_files(w: &World) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out)
            } else {
                out.push(p)
            }
        }
    }
    let mut out = Vec::new();
    walk(&w.data.join("cache/animaworks-tool/schemas"), &mut out);
    out
}

#[test]
fn schemas_run_once_per_file_version() {
    let w = World::new();
    let counter = w.tmp.path().join("probes");
    let path = w.tool(&w.common(), "counted", &counting_tool("counted", &counter, "v1"));
    assert_eq!(label(&w, "counted"), "v1");
    assert_eq!(label(&w, "counted"), "v1");
    list_json(&w);
    assert_eq!(probes(&counter), 1, "one file version, one probe");

    // Same size, new content, a later mtime.
    std::fs::write(&path, counting_tool("counted", &counter, "v2")).unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(label(&w, "counted"), "v2");
    assert_eq!(label(&w, "counted"), "v2");
    assert_eq!(probes(&counter), 2, "a changed file is probed again, once");
}

#[test]
fn new_files_appear_and_removed_files_disappear() {
    let w = World::new();
    let counter = w.tmp.path().join("probes");
    w.tool(&w.common(), "first", &counting_tool("first", &counter, "1"));
    let list = list_json(&w);
    assert!(tool_entry(&list, "first").is_some());
    assert!(tool_entry(&list, "second").is_none());

    let second = w.tool(&w.personal(), "second", &counting_tool("second", &counter, "2"));
    let list = list_json(&w);
    assert!(
        tool_entry(&list, "first").is_some() && tool_entry(&list, "second").is_some(),
        "{list}"
    );
    assert_eq!(label(&w, "second"), "2");

    std::fs::remove_file(&second).unwrap();
    let list = list_json(&w);
    assert!(tool_entry(&list, "second").is_none(), "{list}");
    let (code, out) = call(&w, "second", "run", "{}", &[]);
    assert_eq!(code, 3, "{out}");
    assert_eq!(probes(&counter), 2);
}

#[test]
fn corrupt_cache_is_not_fatal_and_is_rebuilt() {
    let w = World::new();
    let counter = w.tmp.path().join("probes");
    w.tool(&w.common(), "a", &counting_tool("a", &counter, "A"));
    w.tool(&w.personal(), "b", &counting_tool("b", &counter, "B"));
    list_json(&w);
    assert_eq!(probes(&counter), 2);
    let files = cache_files(&w);
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        std::fs::write(f, b"\x00garbage{{{ not json \xff").unwrap();
    }
    let list = list_json(&w);
    assert!(
        tool_entry(&list, "a").is_some() && tool_entry(&list, "b").is_some(),
        "{list}"
    );
    assert_eq!(probes(&counter), 4, "both probed again");
    for f in cache_files(&w) {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&f).unwrap())
            .unwrap_or_else(|e| panic!("{} was not rebuilt: {e}", f.display()));
        assert!(v.is_object());
    }
    assert_eq!(label(&w, "a"), "A");
    assert_eq!(probes(&counter), 4, "the rebuilt cache is used");

    // An empty file and a file truncated mid-way are misses too.
    let files = cache_files(&w);
    std::fs::write(&files[0], b"").unwrap();
    let whole = std::fs::read(&files[1]).unwrap();
    std::fs::write(&files[1], &whole[..whole.len() / 2]).unwrap();
    assert_eq!(label(&w, "b"), "B");
    list_json(&w);
    assert_eq!(probes(&counter), 6);
}

#[test]
fn refresh_probes_everything_again() {
    let w = World::new();
    let counter = w.tmp.path().join("probes");
    w.tool(&w.core, "x", &counting_tool("x", &counter, "X"));
    w.tool(&w.common(), "y", &counting_tool("y", &counter, "Y"));
    w.tool(&w.personal(), "z", &counting_tool("z", &counter, "Z"));
    list_json(&w);
    list_json(&w);
    assert_eq!(probes(&counter), 3);
    let o = w.run(&["refresh"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("probed 3 tools"), "{}", stdout(&o));
    assert_eq!(probes(&counter), 6);
    list_json(&w);
    assert_eq!(probes(&counter), 6, "refresh stored what it probed");
}

// ---------------------------------------------------------------- hanging probes, the shim in the cache

/// One hanging `--schemas` cost every listing its timeout (issue 12 item 11).
#[test]
fn a_timed_out_probe_is_remembered_for_a_while() {
    let w = World::new();
    echo_tool(&w);
    let count = w.tmp.path().join("probes");
    w.tool(
        &w.personal(),
        "hang.sh",
        &format!(
            "#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then echo x >> {}; exec sleep 1000; fi\n",
            count.display()
        ),
    );
    let probes = || std::fs::read_to_string(&count).map(|s| s.lines().count()).unwrap_or(0);
    let o = run_guarded(w.cmd().args(["tools", "--json"]), 120).unwrap();
    assert!(stdout(&o).contains("did not answer"), "{}", stdout(&o));
    assert_eq!(probes(), 1);
    let o = run_guarded(w.cmd().args(["tools", "--json"]), 120).unwrap();
    let v = json(&o);
    let p = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["tool"] == "hang")
        .unwrap()
        .clone();
    assert!(p["message"].as_str().unwrap().contains("not tried again"), "{p}");
    assert_eq!(probes(), 1, "the hanging --schemas was run again on the next listing");
    let o = run_guarded(w.cmd().args(["call", "echo", "say"]), 60).unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// A core Python module, called once so the shim is extracted; the extracted package's folder.
fn py_world() -> (World, std::path::PathBuf) {
    let w = World::new();
    std::fs::write(
        w.core.join("pyecho.py"),
        "def get_tool_schemas():\n    return [{'name': 'pyecho_go', 'input_schema': {'type': 'object'}}]\n\n\
         def dispatch(name, args):\n    return {'ok': True}\n",
    )
    .unwrap();
    let (code, out) = crate::core::call(&w, "pyecho", "go", "{}", &[]);
    assert_eq!(code, 0, "{out}");
    let cache = w.data.join("cache/animaworks-tool");
    let pkg = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("pysdk-"))
        .unwrap()
        .join("animaworks_tool_sdk");
    (w, pkg)
}

/// A changed Python shim in the cache was run (issue 19 item 8): it is checked and extracted anew.
#[test]
fn a_changed_python_shim_in_the_cache_is_never_run() {
    let (w, pkg) = py_world();
    let mark = w.tmp.path().join("pwned");
    let start = pkg.join("_start.py");
    let mut text = std::fs::read_to_string(&start).unwrap();
    text.insert_str(0, &format!("open({:?}, 'w').close()\n", mark.display().to_string()));
    std::fs::write(&start, text).unwrap();
    let (code, out) = crate::core::call(&w, "pyecho", "go", "{}", &["--timeout", "30"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["ok"], true);
    assert!(!mark.exists(), "the changed _start.py ran");
}

/// A cache dir others can write was used (issue 19 item 8): refused with a clear error.
#[test]
fn a_cache_dir_others_can_write_is_refused_with_a_clear_error() {
    use std::os::unix::fs::PermissionsExt;
    let (w, _) = py_world();
    let cache = w.data.join("cache/animaworks-tool");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = w.run(&["call", "pyecho", "go", "--json", "{}"]);
    assert_ne!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(
        e.contains("refusing the cache dir") && e.contains("writable by others"),
        "{e}"
    );
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (code, out) = crate::core::call(&w, "pyecho", "go", "{}", &[]);
    assert_eq!(code, 0, "{out}");
}

// ---------------------------------------------------------------- the listing's own reads (issue 24)

/// A warm listing reads the cache through one open folder per tier and the scan's `stat`: a file changed since
/// its probe is still probed again, by the listing itself, once.
#[test]
fn a_listing_probes_a_changed_file_again_once() {
    let w = World::new();
    let counter = w.tmp.path().join("probes");
    let path = w.tool(&w.common(), "counted", &counting_tool("counted", &counter, "v1"));
    w.tool(&w.personal(), "other", &counting_tool("other", &counter, "o"));
    list_json(&w);
    list_json(&w);
    assert_eq!(probes(&counter), 2, "one probe per file version");
    // Same size, same mtime second: only the nanoseconds and the ctime differ.
    std::fs::write(&path, counting_tool("counted", &counter, "v2")).unwrap();
    list_json(&w);
    assert_eq!(probes(&counter), 3, "the changed file is probed again by the listing");
    list_json(&w);
    assert_eq!(probes(&counter), 3, "and its new version is cached");
    assert_eq!(label(&w, "counted"), "v2");
    assert_eq!(probes(&counter), 3);
}

/// Forged entries read by a listing: a FIFO hangs nothing, a link to a device is refused, another file's entry
/// is not believed; each is a miss, probed again and replaced.
#[test]
fn a_listing_refuses_forged_cache_entries() {
    let w = World::new();
    let counter = w.tmp.path().join("probes");
    w.tool(&w.common(), "a", &counting_tool("a", &counter, "A"));
    w.tool(&w.common(), "b", &counting_tool("b", &counter, "B"));
    list_json(&w);
    assert_eq!(probes(&counter), 2);
    let files = cache_files(&w);
    let entry = |name: &str| files.iter().find(|f| f.file_name().unwrap() == name).unwrap().clone();
    let (a, b) = (entry("a.json"), entry("b.json"));
    let listed = |w: &World| {
        let o = run_guarded(w.cmd().args(["tools", "--json"]), 60).expect("the listing hung on a forged entry");
        assert!(o.status.success(), "{}", stderr(&o));
        json(&o)
    };

    std::fs::remove_file(&a).unwrap();
    mkfifo(&a);
    let list = listed(&w);
    assert!(tool_entry(&list, "a").is_some(), "{list}");
    assert_eq!(probes(&counter), 3, "a FIFO entry is a miss");

    std::fs::remove_file(&a).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &a).unwrap();
    listed(&w);
    assert_eq!(probes(&counter), 4, "a device behind an entry is a miss");
    assert!(
        std::fs::symlink_metadata(&a).unwrap().file_type().is_file(),
        "the entry was rebuilt"
    );

    // b's whole, well-formed entry in a's place: it names another file, so it is not a's.
    std::fs::copy(&b, &a).unwrap();
    let list = listed(&w);
    let actions = &tool_entry(&list, "a").expect("a is listed")["actions"];
    assert_eq!(actions[0]["schema_name"], "a_run", "{list}");
    assert_eq!(probes(&counter), 5, "another file's entry is a miss");
    listed(&w);
    assert_eq!(probes(&counter), 5);
}

/// A cache dir others can write is believed by no listing: every tool is probed every time.
#[test]
fn a_listing_believes_no_entry_of_a_cache_dir_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    let counter = w.tmp.path().join("probes");
    w.tool(&w.common(), "a", &counting_tool("a", &counter, "A"));
    list_json(&w);
    list_json(&w);
    assert_eq!(probes(&counter), 1);
    let cache = w.data.join("cache/animaworks-tool");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = w.run(&["tools", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("writable by others"), "{}", stderr(&o));
    assert_eq!(probes(&counter), 2, "the entry of an untrusted cache dir was believed");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    list_json(&w);
    assert_eq!(probes(&counter), 2);
}

/// A listing that probes many tools writes their entries into one file (the folder's pack): the next listing and
/// a call take them from it; a forged pack (a FIFO, another tool's line under a name) is only a miss; a tool
/// changed later is probed alone and gets an entry file of its own, looked at before the pack.
#[test]
fn a_cold_listing_of_many_tools_keeps_their_entries_in_one_pack() {
    let w = World::new();
    let counter = w.tmp.path().join("probes");
    let names: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    for n in &names {
        w.tool(&w.common(), n, &counting_tool(n, &counter, n));
    }
    list_json(&w);
    assert_eq!(probes(&counter), 10);
    let files = cache_files(&w);
    assert_eq!(files.len(), 1, "{files:?}");
    let pack = files[0].clone();
    assert_eq!(pack.file_name().unwrap(), "pack");
    list_json(&w);
    assert_eq!(label(&w, "t4"), "t4");
    assert_eq!(probes(&counter), 10, "the pack's entries were not believed");
    let listed = |w: &World| {
        let o = run_guarded(w.cmd().args(["tools", "--json"]), 60).expect("the listing hung on a forged pack");
        assert!(o.status.success(), "{}", stderr(&o));
        json(&o)
    };

    std::fs::remove_file(&pack).unwrap();
    mkfifo(&pack);
    let list = listed(&w);
    assert!(tool_entry(&list, "t9").is_some(), "{list}");
    assert_eq!(probes(&counter), 20, "a FIFO pack is a miss for every tool");
    assert!(std::fs::symlink_metadata(&pack).unwrap().file_type().is_file(), "the pack was rebuilt");

    // t1's line under t0's name: it names another file, so it is not t0's.
    let text = std::fs::read_to_string(&pack).unwrap();
    let line = |n: &str| text.lines().find(|l| l.starts_with(&format!("{n}.json\t"))).unwrap().to_owned();
    let forged = text.replace(&line("t0"), &line("t1").replacen("t1.json\t", "t0.json\t", 1));
    std::fs::write(&pack, forged).unwrap();
    let list = listed(&w);
    let actions = &tool_entry(&list, "t0").expect("t0 is listed")["actions"];
    assert_eq!(actions[0]["schema_name"], "t0_run", "{list}");
    assert_eq!(probes(&counter), 21, "another file's line is a miss, and only for its name");

    // Changed alone: probed alone, into an entry file of its own, which is believed before the pack's line.
    let path = w.common().join("t3");
    std::fs::write(&path, counting_tool("t3", &counter, "t3 v2")).unwrap();
    listed(&w);
    assert_eq!(probes(&counter), 22);
    assert!(cache_files(&w).iter().any(|f| f.file_name().unwrap() == "t3.json"));
    listed(&w);
    assert_eq!(label(&w, "t3"), "t3 v2");
    assert_eq!(probes(&counter), 22);
}
