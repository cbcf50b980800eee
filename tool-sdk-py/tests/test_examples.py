"""The two examples of the repository, run through the shim as the runner runs them."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO, base_env, install, request, run_shim

EXAMPLES = REPO / "examples"


def test_python_progress(tier: Path) -> None:
    tool = install(EXAMPLES / "python-progress" / "progress_tool.py", tier)
    doc = run_shim(tool, "--schemas").doc
    assert [a["name"] for a in doc["actions"]] == ["count_words"] and doc["version"] == "0.1.0"
    r = run_shim(tool, stdin=request("progress_tool_count_words", {"text": "a b a c. A", "steps": 2}))
    assert r.code == 0, r.stderr
    kinds = [e["type"] for e in r.events]
    assert kinds == ["progress", "progress", "log", "result"]
    assert r.events[1] == {"type": "progress", "progress": 2, "total": 2, "message": "counted 5 of 5 words"}
    assert r.final["result"]["words"] == 5 and r.final["result"]["top"][0] == {"word": "a", "count": 3}
    r = run_shim(tool, stdin=request("progress_tool_count_words", {"text": "   "}))
    assert r.final["code"] == "empty_text" and r.code == 1


def test_legacy_notes(tier: Path, tmp_path: Path) -> None:
    tool = install(EXAMPLES / "legacy-notes" / "legacy_notes.py", tier)
    doc = run_shim(tool, "--schemas").doc
    assert doc["cli"] is True
    purge = [a for a in doc["actions"] if a["name"] == "purge_all"][0]
    assert purge["profile"]["gated"] is True and purge["profile"]["gated_as"] == "purge-all"
    anima = tmp_path / "alice"
    r = run_shim(tool, stdin=request("legacy_notes_add", {"title": "n1"}, anima_dir=str(anima)))
    assert json.loads(r.final["result"]) == {"added": "n1", "count": 1}
    env = base_env(tmp_path, ANIMAWORKS_ANIMA_DIR=str(anima))
    r = run_shim(tool, "--cli", "list", "-j", env=env)
    assert r.code == 0 and json.loads(r.stdout) == ["n1"]
    r = run_shim(tool, "--cli", "purge-all", "--yes", "-j", env=env)
    assert json.loads(r.stdout) == {"purged": 1}
