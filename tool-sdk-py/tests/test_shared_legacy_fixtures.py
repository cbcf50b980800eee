"""Every module of ../shared/fixtures/legacy_tools, copied unedited into a temporary tier, through the shim."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import LEGACY_TOOLS, SHIM, base_env, install, needs_shared, request, run_shim

pytestmark = needs_shared


@pytest.fixture
def legacy(tier: Path) -> Path:
    for name in ("notes_tool.py", "weather_tool.py", "cli_only_tool.py", "chatty_tool.py", "slow_tool.py",
                 "broken_tool.py", "_private_helper.py"):
        install(LEGACY_TOOLS / name, tier)
    return tier


def test_every_fixture_is_covered() -> None:
    covered = {"notes_tool.py", "weather_tool.py", "cli_only_tool.py", "chatty_tool.py", "slow_tool.py",
               "broken_tool.py", "_private_helper.py"}
    assert {p.name for p in LEGACY_TOOLS.glob("*.py")} == covered


def test_notes_tool(legacy: Path, tmp_path: Path) -> None:
    tool = legacy / "notes_tool.py"
    doc = run_shim(tool, "--schemas").doc
    assert doc["cli"] is True and [a["name"] for a in doc["actions"]] == ["add", "list", "clear", "delete_all"]
    profiles = {a["name"]: a.get("profile") for a in doc["actions"]}
    assert profiles["delete_all"] == {"expected_seconds": 2, "background_eligible": False, "gated": True, "gated_as": "delete-all"}
    assert doc["actions"][1]["input_schema"] == {"type": "object", "properties": {"tag": {"type": "string"}}}
    assert doc["legacy_profile"]["delete-all"]["gated"] is True

    anima = tmp_path / "animas" / "alice"
    anima.mkdir(parents=True)
    ctx = {"anima_dir": str(anima), "tool": "notes_tool"}
    r = run_shim(tool, stdin=request("notes_tool_add", {"title": "hi", "tags": ["x"]}, action="add", **ctx))
    assert json.loads(r.final["result"]) == {"added": {"title": "hi", "body": "", "tags": ["x"]}, "count": 1}
    assert (anima / "state" / "notes.json").exists()  # anima_dir injected from the context
    r = run_shim(tool, stdin=request("notes_tool_list", {"tag": "x"}, **ctx))
    assert json.loads(r.final["result"]) == [{"title": "hi", "body": "", "tags": ["x"]}]
    assert run_shim(tool, stdin=request("notes_tool_clear", **ctx)).final["result"] == "(no output)"
    r = run_shim(tool, stdin=request("notes_tool_delete_all", {"confirm": False}, **ctx))
    assert r.final == {"type": "error", "code": "ValueError",
                       "message": "Error executing notes_tool_delete_all: confirm must be true to delete every note"}
    env = base_env(tmp_path, ANIMAWORKS_ANIMA_DIR=str(anima))
    r = run_shim(tool, "--cli", "list", "-j", env=env)
    assert r.code == 0 and json.loads(r.stdout) == [{"title": "hi", "body": "", "tags": ["x"]}]


def test_weather_tool(legacy: Path) -> None:
    tool = legacy / "weather_tool.py"
    assert run_shim(tool, "--schemas").doc["cli"] is False
    r = run_shim(tool, stdin=request("weather_tool_forecast", {"city": "Tokyo"}))
    assert json.loads(r.final["result"]) == {"city": "Tokyo", "highs_c": [18, 19, 17]}
    r = run_shim(tool, stdin=request("weather_tool_forecast", {"city": "Paris", "days": 2}))
    assert r.final == {"type": "error", "code": "KeyError",
                       "message": "Error executing weather_tool_forecast: \"no forecast for 'Paris'\""}


def test_cli_only_tool(legacy: Path) -> None:
    tool = legacy / "cli_only_tool.py"
    doc = run_shim(tool, "--schemas").doc
    assert doc["actions"] == [] and doc["cli"] is True
    r = run_shim(tool, "--cli", "--shout", "greet", "--name", "ada", "-j")
    assert r.code == 0 and json.loads(r.stdout) == {"greeting": "HELLO, ADA"}
    r = run_shim(tool, "--cli", "greet")
    assert r.code == 2 and "--name" in r.stderr


def test_chatty_tool(legacy: Path) -> None:
    r = run_shim(legacy / "chatty_tool.py", stdin=request("chatty_tool_count", {"n": 3}))
    assert r.code == 0
    assert r.events == [{"type": "result", "result": "counted to 3"}]
    assert "counting 2" in r.stderr and "step 3 of 3" in r.stderr and "progress: done" in r.stderr


def test_slow_tool_profile_and_its_child_never_holds_stdout(legacy: Path) -> None:
    tool = legacy / "slow_tool.py"
    doc = run_shim(tool, "--schemas").doc
    assert doc["actions"][0]["profile"] == {"expected_seconds": 120, "background_eligible": True}
    r = run_shim(tool, stdin=request("slow_tool_wait", {"seconds": 0}))
    assert json.loads(r.final["result"]) == {"slept": 0.0}


def test_slow_tool_grandchild_never_holds_stdout(legacy: Path) -> None:
    """The grandchild `sleep` inherits fd 1, which the shim points at stderr: when the shim dies, the
    protocol pipe closes at once even though the grandchild lives on."""
    proc = subprocess.Popen([sys.executable, str(SHIM), str(legacy / "slow_tool.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=base_env(legacy))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write((request("slow_tool_wait", {"seconds": 300}) + "\n").encode())
        proc.stdin.close()
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        while not children.read_text().split():  # poll until the grandchild exists
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)  # the shim only, not its group
        assert proc.stdout.read() == b""  # EOF now, although `sleep 300` still runs
        proc.wait()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()


def test_broken_tool(legacy: Path) -> None:
    tool = legacy / "broken_tool.py"
    last = f"animaworks-tool: cannot import {tool}: ModuleNotFoundError: No module named 'module_that_is_not_installed'"
    r = run_shim(tool, "--schemas")
    assert r.code == 3 and r.stdout == "" and r.stderr.splitlines()[-1] == last
    r = run_shim(tool, stdin=request("broken_tool_run"))
    assert r.code == 3 and r.final["code"] == "import_error" and r.stderr.splitlines()[-1] == last


def test_private_helper_is_a_plain_module(legacy: Path) -> None:
    """Discovery (the runner's job) skips `_` files; through the shim it is simply a tool with no actions."""
    doc = run_shim(legacy / "_private_helper.py", "--schemas").doc
    assert doc["actions"] == [] and doc["cli"] is False
