"""The shim on repo-owned AnimaWorks-style modules: --schemas, one call, --serve, --cli, import failures."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from conftest import OWN_FIXTURES, SHIM, base_env, install, request, run_shim


def test_schemas_document(tier: Path) -> None:
    doc = run_shim(install(OWN_FIXTURES / "own_notes.py", tier), "--schemas").doc
    assert doc["protocol"] == 1 and doc["name"] == "own_notes"
    assert doc["events"] is True and doc["persistent"] is True and doc["cli"] is False
    actions = {a["name"]: a for a in doc["actions"]}
    assert list(actions) == ["add", "wipe_all", "renamed", "shout", "none", "text", "whereami"]
    assert actions["add"]["input_schema"]["properties"] == {"title": {"type": "string"}}
    assert actions["add"]["profile"] == {"expected_seconds": 2, "background_eligible": True}
    assert actions["wipe_all"]["input_schema"] == {"type": "object"}  # from "parameters"
    assert actions["wipe_all"]["profile"] == {"expected_seconds": 1, "gated": True, "gated_as": "wipe-all"}
    assert actions["renamed"]["profile"] == {"gated": True, "gated_as": "special"}
    assert actions["shout"]["input_schema"] == {"type": "object"}
    assert "profile" not in actions["none"]
    assert doc["legacy_profile"]["wipe-all"] == {"expected_seconds": 1, "gated": True}


def test_unreadable_profile_is_reported(tier: Path) -> None:
    # The runner treats every action of such a module as gated (fail closed); the shim must say so, not drop it.
    for profile, words in (("'garbage'", "is a str"), ("{'run': 1}", "'run'")):
        tool = tier / "bp.py"
        tool.write_text(
            f"EXECUTION_PROFILE = {profile}\n"
            "def get_tool_schemas():\n    return [{'name': 'bp_run', 'input_schema': {'type': 'object'}}]\n"
            "def dispatch(name, args):\n    return 'ran'\n"
        )
        doc = run_shim(tool, "--schemas").doc
        assert words in doc["legacy_profile_error"], doc
    (tier / "bp.py").write_text("def get_tool_schemas():\n    return [{'name': 'bp_run'}]\n")
    assert "legacy_profile_error" not in run_shim(tier / "bp.py", "--schemas").doc


def test_call_result_text_and_stray_prints(tier: Path) -> None:
    tool = install(OWN_FIXTURES / "own_notes.py", tier)
    r = run_shim(tool, stdin=request("own_notes_add", {"title": "x"}) + "\n")
    assert r.code == 0, r.stderr
    assert r.events == [r.final]
    text = r.final["result"]
    assert text == json.dumps({"note": {"title": "x", "tags": ["t"]}, "ünï": "✓"}, ensure_ascii=False, indent=2)
    assert "import-time chatter" in r.stderr and "stray print while dispatching" in r.stderr
    assert "INFO" in r.stderr and "dispatch own_notes_add" in r.stderr  # logging goes to stderr at INFO


def test_result_shapes(tier: Path) -> None:
    tool = install(OWN_FIXTURES / "own_notes.py", tier)
    assert run_shim(tool, stdin=request("own_notes_none")).final == {"type": "result", "result": "(no output)"}
    assert run_shim(tool, stdin=request("own_notes_text")).final == {"type": "result", "result": "42"}
    # A schema name without the tool prefix is called as `<stem>_<name>` and dispatched by its own name.
    assert run_shim(tool, stdin=request("own_notes_shout")).final["result"] == "[\n  1,\n  2,\n  3\n]"


def test_anima_dir_injection(tier: Path, tmp_path: Path) -> None:
    tool = install(OWN_FIXTURES / "own_notes.py", tier)
    got = run_shim(tool, stdin=request("own_notes_whereami", anima_dir="/from/context")).final
    assert got["result"] == "/from/context"
    env = base_env(tmp_path, ANIMAWORKS_ANIMA_DIR="/from/env")
    assert run_shim(tool, stdin=request("own_notes_whereami"), env=env).final["result"] == "/from/env"
    assert run_shim(tool, stdin=request("own_notes_whereami")).final["result"] == "(no output)"


def test_exception_is_final_error(tier: Path) -> None:
    r = run_shim(install(OWN_FIXTURES / "own_notes.py", tier), stdin=request("own_notes_wipe_all"))
    assert r.final == {"type": "error", "code": "PermissionError", "message": "Error executing own_notes_wipe_all: nope"}
    assert "Traceback" in r.stderr and "PermissionError: nope" in r.stderr


def test_functions_named_like_schemas(tier: Path) -> None:
    tool = install(OWN_FIXTURES / "own_funcs.py", tier)
    assert run_shim(tool, stdin=request("own_funcs_add", {"a": 2})).final["result"] == '{\n  "sum": 3\n}'
    r = run_shim(tool, stdin=request("own_funcs_add", {"b": 2}))
    assert r.final["code"] == "TypeError" and r.final["message"].startswith("Error executing own_funcs_add: ")


def test_imported_once_per_call(tier: Path, tmp_path: Path) -> None:
    log = tmp_path / "imports.log"
    env = base_env(tmp_path, OWN_NOTES_IMPORT_LOG=str(log))
    tool = install(OWN_FIXTURES / "own_notes.py", tier)
    run_shim(tool, stdin=request("own_notes_add", {"title": "a"}), env=env)
    assert log.read_text() == "imported\n"
    reqs = "\n".join(request("own_notes_text", call_id=f"k{i}") for i in range(3)) + "\n"
    run_shim(tool, "--serve", stdin=reqs, env=env)
    assert log.read_text() == "imported\n" * 2


def test_serve_tags_every_event(tier: Path) -> None:
    tool = install(OWN_FIXTURES / "own_notes.py", tier)
    reqs = [request("own_notes_text", call_id="a"), "", "not json", request("own_notes_wipe_all", call_id="b"),
            request("own_notes_none", call_id="c")]
    r = run_shim(tool, "--serve", stdin="\n".join(reqs) + "\n")
    assert r.code == 0, r.stderr
    events = r.events
    assert [(e["type"], e.get("call_id")) for e in events] == [
        ("result", "a"), ("error", None), ("error", "b"), ("result", "c")]
    assert events[1]["code"] == "bad_request"


def test_cli_passes_argv_and_exit_code(tier: Path) -> None:
    tool = install(OWN_FIXTURES / "own_cli.py", tier)
    doc = run_shim(tool, "--schemas").doc
    assert doc["cli"] is True and doc["actions"] == []
    r = run_shim(tool, "--cli", "greet", "--name", "x", "-j")
    assert r.code == 0, r.stderr
    # sys.argv as AnimaWorks' CLI leaves it: `animaworks-tool <tool> <args…>`.
    assert json.loads(r.stdout) == {
        "argv": ["greet", "--name", "x", "-j"],
        "sys_argv": ["animaworks-tool", "own_cli", "greet", "--name", "x", "-j"],
    }
    r = run_shim(tool, "--cli", "fail")
    assert r.code == 4 and r.stdout == "" and "failing on purpose" in r.stderr


def test_cli_without_cli_main(tier: Path) -> None:
    r = run_shim(install(OWN_FIXTURES / "own_funcs.py", tier), "--cli", "x")
    assert r.code == 2 and "has no cli_main" in r.stderr and r.stdout == ""


def test_import_failure(tier: Path) -> None:
    tool = install(OWN_FIXTURES / "own_broken.py", tier)
    last = f"animaworks-tool: cannot import {tool}: RuntimeError: cannot start: missing configuration"
    for args, stdin in ((["--schemas"], ""), ([], request("own_broken_x")), (["--serve"], request("own_broken_x", call_id="s1"))):
        r = run_shim(tool, *args, stdin=stdin)
        assert r.code == 3, args
        assert "Traceback" in r.stderr
        assert r.stderr.rstrip("\n").splitlines()[-1] == last
        if args == ["--schemas"]:
            assert r.stdout == ""
        else:
            assert r.final["code"] == "import_error" and "RuntimeError" in r.final["message"]
            assert r.final.get("call_id") == ("s1" if args else None)


def test_usage_errors(tier: Path) -> None:
    tool = install(OWN_FIXTURES / "own_funcs.py", tier)
    assert run_shim(tool, "--bogus").code == 2
    r = run_shim(tool, stdin="")
    assert r.code == 2 and r.final["code"] == "bad_request"


def test_shim_runs_from_a_materialised_copy(tier: Path, tmp_path: Path) -> None:
    """The runner copies the package into a cache dir: the shim must import the SDK from that copy."""
    cache = tmp_path / "cache" / "py-shim-0"
    shutil.copytree(SHIM.parent, cache / "animaworks_tool_sdk")
    tool = install(OWN_FIXTURES / "own_sdk.py", tier)
    r = run_shim(tool, stdin=request("own_sdk_where"), shim=cache / "animaworks_tool_sdk" / "_shim.py")
    assert r.final["result"] == str(cache / "animaworks_tool_sdk" / "__init__.py")
    # The package's private modules must not be importable as top-level names.
    probe = tier / "probe.py"
    probe.write_text("def get_tool_schemas():\n    return []\n\ndef dispatch(name, args):\n"
                     "    import importlib.util\n    return importlib.util.find_spec('_wire') is None\n")
    assert run_shim(probe, stdin=request("probe_x"), shim=cache / "animaworks_tool_sdk" / "_shim.py").final["result"] == "True"


def test_shim_import_is_lean() -> None:
    """The shim must not pull in the SDK's heavy half (inspect, typing machinery) for legacy tools."""
    import subprocess

    code = ("import runpy, sys; sys.argv = ['_shim.py']\n"
            "try:\n    runpy.run_path(sys.argv[0] if False else %r, run_name='not_main')\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('inspect', 'animaworks_tool_sdk._action', 'animaworks_tool_sdk._runtime', 'logging') if m in sys.modules))") % str(SHIM)
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_start_script_runs_the_shim_with_its_byte_code_cached(tier: Path, tmp_path: Path) -> None:
    """The runner starts _start.py, which imports the shim: same answers and sys.path as the shim run as a script,
    and the shim's byte code is cached (a script's never is)."""
    cache = tmp_path / "cache" / "py-shim-0"
    shutil.copytree(SHIM.parent, cache / "animaworks_tool_sdk", ignore=shutil.ignore_patterns("__pycache__"))
    start = cache / "animaworks_tool_sdk" / "_start.py"
    probe = tier / "paths.py"
    probe.write_text("import sys\n\ndef get_tool_schemas():\n    return []\n\ndef dispatch(name, args):\n"
                     "    return [p for p in sys.path if 'py-shim-0' in p or p.endswith('tools')]\n")
    env = base_env(tier)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the runner's clean environment does not carry it either
    via_start = run_shim(probe, stdin=request("paths_x"), shim=start, env=env).final["result"]
    via_script = run_shim(probe, stdin=request("paths_x"), shim=start.with_name("_shim.py"), env=env).final["result"]
    assert via_start == via_script
    assert json.loads(via_start) == [str(cache), str(tier)]
    assert list((cache / "animaworks_tool_sdk" / "__pycache__").glob("_shim.*.pyc"))


def test_a_legacy_call_imports_no_json_package(tier: Path) -> None:
    """The call path reads the request and writes the result (a dict: json.dumps(indent=2)) without importing the
    json package or __future__ (each a measurable share of a call); a module that imports json gets it as usual."""
    probe = tier / "lean.py"
    probe.write_text("import sys\nSEEN = sorted(m for m in ('json', '__future__') if m in sys.modules)\n\n"
                     "def get_tool_schemas():\n    return []\n\n"
                     "def dispatch(name, args):\n"
                     "    return {'at_import': SEEN, 'at_call': sorted(m for m in ('json', '__future__') if m in sys.modules),"
                     " 'é': [1.5, None]}\n")
    import subprocess

    # What this interpreter has loaded before any script runs (a .pth file may import json): not the shim's doing.
    pre = json.loads(subprocess.run([sys.executable, "-c", "import sys; print([m for m in ('json', '__future__') "
                                     "if m in sys.modules]).replace(\"'\", '\"')"],
                                    capture_output=True, text=True, env=base_env(tier)).stdout)
    r = run_shim(probe, stdin=request("lean_x"))
    assert r.final["result"] == json.dumps({"at_import": pre, "at_call": pre, "é": [1.5, None]}, ensure_ascii=False, indent=2)
    probe.write_text("import json\n\ndef get_tool_schemas():\n    return []\n\n"
                     "def dispatch(name, args):\n    return json.dumps({'a': json.loads('[1]')})\n")
    assert run_shim(probe, stdin=request("lean_x")).final["result"] == '{"a": [1]}'


def test_what_the_tool_makes_is_still_collected_and_finalized_at_exit(tier: Path, tmp_path: Path) -> None:
    """_start.py freezes what exists before the tool is loaded (the interpreter's last collections then skip it);
    the module's own objects are collected as before: one in a reference cycle is finalized at exit, and an
    unflushed file that only the cycle holds is written out."""
    start = SHIM.with_name("_start.py")
    fin, buffered = tmp_path / "finalized", tmp_path / "buffered"
    probe = tier / "exits.py"
    probe.write_text(
        "import os\n\n"
        "class Cycle:\n"
        "    def __init__(self):\n"
        "        self.me = self\n"
        "    # Late in the interpreter's exit, module globals and builtins may be gone: everything comes in defaults.\n"
        "    def __del__(self, o=os.open, w=os.write, c=os.close, f=os.O_WRONLY | os.O_CREAT):\n"
        f"        fd = o({str(fin)!r}, f)\n"
        "        w(fd, b'finalized')\n"
        "        c(fd)\n\n"
        "KEEP = Cycle()\n"
        "# Held by the cycle only: written out when the collector frees the cycle, not by reference counting.\n"
        f"KEEP.log = open({str(buffered)!r}, 'w')\n"
        "KEEP.log.write('buffered')\n\n"
        "def get_tool_schemas():\n    return []\n\n"
        "def dispatch(name, args):\n"
        "    import gc\n"
        "    return gc.get_freeze_count() > 0\n")
    r = run_shim(probe, stdin=request("exits_x"), shim=start)
    assert r.final["result"] == "True"  # a legacy module's answer is text, as in AnimaWorks
    assert fin.read_text() == "finalized"
    assert buffered.read_text() == "buffered"
