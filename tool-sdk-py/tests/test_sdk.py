"""SDK tools: the decorator's schemas, the context's events, errors, run() by hand and through the shim."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import OWN_FIXTURES, SDK_SRC, base_env, install, request, run_shim, Run


def run_direct(tool: Path, *args: str, stdin: str = "") -> Run:
    env = base_env(tool.parent, PYTHONPATH=str(SDK_SRC))
    return Run(subprocess.run([sys.executable, str(tool), *args], input=stdin.encode(), capture_output=True, env=env))


@pytest.fixture
def sdk_tool(tier: Path) -> Path:
    return install(OWN_FIXTURES / "own_sdk.py", tier)


def test_schemas(sdk_tool: Path) -> None:
    doc = run_shim(sdk_tool, "--schemas").doc
    assert doc == run_direct(sdk_tool, "--schemas").doc  # the same through the shim and run()
    assert doc["name"] == "own_sdk" and doc["version"] == "9.9.9" and doc["events"] and doc["persistent"]
    assert doc["description"].startswith("Repo-owned SDK fixture")
    assert doc["credentials"] == [{"name": "demo", "env": "DEMO_TOKEN", "required": False}]
    actions = {a["name"]: a for a in doc["actions"]}
    assert list(actions) == ["shapes", "fail-soft", "crash", "later", "where"]
    shapes = actions["shapes"]
    assert shapes["description"] == "Echo typed arguments."
    assert shapes["profile"] == {"expected_seconds": 2, "timeout_s": 10, "hints": {"read_only": True}}
    assert shapes["input_schema"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "a name"},
            "count": {"type": "integer", "description": "how many", "minimum": 1, "default": 2},
            "ratio": {"type": "number", "description": "a ratio over two lines", "default": 0.5},
            "flag": {"type": "boolean", "default": False},
            "items": {"type": ["array", "null"], "items": {"type": "string"}},
            "meta": {"type": ["object", "null"], "additionalProperties": {"type": "integer"}},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "maybe": {"type": ["integer", "null"]},
            "anything": {},
        },
        "additionalProperties": False,
        "required": ["name"],
    }
    assert actions["fail-soft"]["input_schema"] == {"type": "object", "properties": {"why": {"type": "string"}}}
    assert actions["fail-soft"]["profile"] == {"gated": True, "gated_as": "danger"}
    assert actions["later"]["input_schema"]["required"] == ["x"]


def test_call_events_and_stray_print(sdk_tool: Path) -> None:
    r = run_shim(sdk_tool, stdin=request("own_sdk_shapes", {"name": "n", "items": ["a"]}, call_id="q", anima_dir="/an"))
    assert r.code == 0, r.stderr
    assert r.events == [
        {"type": "progress", "progress": 1, "total": 2, "message": "half"},
        {"type": "log", "level": "warning", "message": "a log line"},
        {"type": "partial", "data": {"piece": 1}},
        {"type": "result", "result": {"name": "n", "count": 2, "ratio": 0.5, "flag": False, "items": ["a"], "meta": None,
                                      "mode": "a", "color": "red", "maybe": None, "call_id": "q", "anima_dir": "/an"}},
    ]
    assert "stray print from an SDK action" in r.stderr


def test_errors(sdk_tool: Path) -> None:
    r = run_shim(sdk_tool, stdin=request("own_sdk_fail-soft", {"why": "w"}))
    assert r.code == 1
    assert r.final == {"type": "error", "code": "refused", "message": "refused: w", "hint": "ask nicely", "data": {"why": "w"}}
    r = run_shim(sdk_tool, stdin=request("own_sdk_crash"))
    assert r.final == {"type": "error", "code": "internal", "message": "ZeroDivisionError: division by zero"}
    assert "Traceback" in r.stderr
    r = run_shim(sdk_tool, stdin=request("own_sdk_nope"))
    assert r.final["code"] == "unknown_action"


def test_spelling_async_and_serve(sdk_tool: Path) -> None:
    assert run_shim(sdk_tool, stdin=request("own_sdk_fail_soft")).final["code"] == "refused"
    reqs = [request("own_sdk_later", {"x": 21}, call_id="a"), request("own_sdk_shapes", {"name": "z"}, call_id="b")]
    r = run_shim(sdk_tool, "--serve", stdin="\n".join(reqs) + "\n")
    assert r.code == 0
    assert r.events[0] == {"type": "result", "result": 42, "call_id": "a"}
    assert [e["call_id"] for e in r.events[1:]] == ["b"] * 4


def test_run_by_hand(sdk_tool: Path) -> None:
    r = run_direct(sdk_tool, stdin=request("own_sdk_later", {"x": 2}))
    assert r.final == {"type": "result", "result": 4}
    r = run_direct(sdk_tool, "--help")
    assert r.code == 0 and "shapes" in r.stdout and "--schemas" in r.stdout
    assert run_direct(sdk_tool, "--what").code == 2


def test_tty_prints_help(sdk_tool: Path) -> None:
    import pty

    env = base_env(sdk_tool.parent, PYTHONPATH=str(SDK_SRC))
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, str(sdk_tool)], stdin=terminal, capture_output=True, env=env)
    finally:
        import os

        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 2 and b"--schemas" in proc.stderr and proc.stdout == b""


BAD = {
    "no hint": "def f(x):\n    pass",
    "*args": "def f(*args: int):\n    pass",
    "**kwargs": "def f(**kw: int):\n    pass",
    "positional-only": "def f(x: int, /):\n    pass",
    "unsupported": "def f(x: complex):\n    pass",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_signature_fails_at_import(case: str, tier: Path) -> None:
    tool = tier / "bad.py"
    tool.write_text(f"from animaworks_tool_sdk import action\n\n@action()\n{BAD[case]}\n")
    r = run_shim(tool, "--schemas")
    assert r.code == 3 and r.stdout == ""
    last = r.stderr.splitlines()[-1]
    assert last.startswith(f"animaworks-tool: cannot import {tool}: SignatureError: action f")


def test_decorator_returns_function_unchanged() -> None:
    code = ("from animaworks_tool_sdk import action\n"
            "def g(x: int) -> int:\n    return x + 1\n"
            "def h(y: str) -> str:\n    return y\n"
            "assert action()(g) is g and action(h) is h and g(1) == 2\n"
            "import animaworks_tool_sdk as s\nassert sorted(s.__all__) == sorted(n for n in s.__all__ if hasattr(s, n))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base_env(Path("/tmp"), PYTHONPATH=str(SDK_SRC)))
    assert proc.returncode == 0, proc.stderr


def test_sandbox_declaration_reaches_the_profile() -> None:
    code = ("import json\nfrom animaworks_tool_sdk import action\nfrom animaworks_tool_sdk._action import REGISTRY\n"
            "@action(sandbox={'read': ['$ANIMA_DIR/notes'], 'net': ['api.example.com:443']})\n"
            "def fetch(q: str) -> str:\n    return q\n"
            "print(json.dumps(REGISTRY[-1].profile))\n"
            "for bad in ({'nope': []}, {'read': 'x'}, {'net': 'yes'}, {'net': ['no-port']}):\n"
            "    try:\n        action(sandbox=bad)\n    except TypeError:\n        pass\n"
            "    else:\n        raise SystemExit(f'accepted {bad}')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base_env(Path("/tmp"), PYTHONPATH=str(SDK_SRC)))
    assert proc.returncode == 0, proc.stderr
    import json
    assert json.loads(proc.stdout) == {"sandbox": {"read": ["$ANIMA_DIR/notes"], "net": ["api.example.com:443"]}}


def test_annotations_are_declared_beside_the_input_schema() -> None:
    code = ("import json\nfrom animaworks_tool_sdk import action\nfrom animaworks_tool_sdk._action import REGISTRY\n"
            "@action(annotations={'readOnlyHint': True, 'openWorldHint': False})\n"
            "def look(q: str) -> str:\n    return q\n"
            "@action\ndef plain(q: str) -> str:\n    return q\n"
            "print(json.dumps([REGISTRY[-2].describe(), REGISTRY[-1].describe()]))\n"
            "for bad in ({'readOnly': True}, {'readOnlyHint': 'yes'}):\n"
            "    try:\n        action(annotations=bad)\n    except TypeError:\n        pass\n"
            "    else:\n        raise SystemExit(f'accepted {bad}')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base_env(Path("/tmp"), PYTHONPATH=str(SDK_SRC)))
    assert proc.returncode == 0, proc.stderr
    import json
    look, plain = json.loads(proc.stdout)
    assert look["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert "annotations" not in plain
