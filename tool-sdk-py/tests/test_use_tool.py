"""``use_tool`` through the real runner binary (built by ``cargo build``; test.sh builds it first)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import sys

import pytest
from conftest import SDK_SRC

sys.path.insert(0, str(SDK_SRC))
from animaworks_tool_sdk import use_tool  # noqa: E402  (the package is tested from its source tree)

REPO = Path(__file__).resolve().parents[2]
BIN = os.environ.get("ANIMAWORKS_TOOL_BIN") or str(REPO / "target" / "debug" / "animaworks-tool")

TOOL = r"""#!/usr/bin/env bash
if [ "$1" = --schemas ]; then
  echo '[{"name":"echo_say","description":"Say.","input_schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]'
  exit 0
fi
req=$(cat)
echo "$req" | sed -E 's/.*"text":"([^"]*)".*/{"said": "\1", "note": "日本"}/'
"""


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    assert Path(BIN).is_file(), f"{BIN} is missing: run `cargo build -p animaworks-tool` first (test.sh does)"
    data, anima, core = tmp_path / "data", tmp_path / "animas" / "alice", tmp_path / "core"
    for d in (data / "common_tools", anima / "tools", core):
        d.mkdir(parents=True)
    tool = data / "common_tools" / "echo.sh"
    tool.write_text(TOOL)
    tool.chmod(0o755)
    monkeypatch.setenv("ANIMAWORKS_DATA_DIR", str(data))
    monkeypatch.setenv("ANIMAWORKS_ANIMA_DIR", str(anima))
    monkeypatch.setenv("ANIMAWORKS_CORE_TOOLS", str(core))
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_result_text_like_the_original(world: Path) -> None:
    out = use_tool("echo", "say", {"text": "hi"}, runner=BIN)
    assert json.loads(out) == {"said": "hi", "note": "日本"}
    assert '\n  "note": "日本"' in out, "indent 2, non-ASCII kept (ensure_ascii=False)"


def test_errors_are_json_with_the_original_types(world: Path) -> None:
    err = json.loads(use_tool("echo", "say", {"text": 3}, runner=BIN))
    assert err["status"] == "error"
    assert err["error_type"] == "InvalidArguments"
    assert "/text" in err["message"]
    err = json.loads(use_tool("nope", "x", {}, runner=BIN))
    assert err["error_type"] == "PermissionDenied", "an unknown tool is 'not permitted', as in AnimaWorks"


def test_cap_is_passed_on(world: Path) -> None:
    out = use_tool("echo", "say", {"text": "hello"}, runner=BIN, max_chars=5)
    assert out.startswith('{\n  "\n\n['), out
    assert out.endswith("]") and "50KB" in out, "the marker, in config.json's locale (ja by default)"


def test_missing_runner_is_an_error_answer(world: Path) -> None:
    err = json.loads(use_tool("echo", "say", {"text": "hi"}, runner=str(world / "no-such-binary")))
    assert err["error_type"] == "ToolExecutionError"
    assert "no-such-binary" in err["message"]
