"""Helpers: run the shim (or a tool) as the runner does — a real subprocess, real JSON on stdin and stdout."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SDK_SRC = Path(__file__).resolve().parents[1] / "src"
SHIM = SDK_SRC / "animaworks_tool_sdk" / "_shim.py"
REPO = Path(__file__).resolve().parents[2]
OWN_FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHARED_FIXTURES = REPO / "tests" / "fixtures"  # copies of ../shared/fixtures, unedited
LEGACY_TOOLS = SHARED_FIXTURES / "legacy_tools"
needs_shared = pytest.mark.skipif(
    not LEGACY_TOOLS.is_dir(), reason=f"{LEGACY_TOOLS} is absent"
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """A skip is not a pass, nor is it one under CI=true (where everything a test needs is installed): there it
    fails, unless the test marks itself optional (its reason starts with "optional:")."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("CI") == "true" and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not reason.removeprefix("Skipped: ").startswith("optional:"):
            report.outcome = "failed"
            report.longrepr = f"CI=true, and this machine lacks what the test needs: {reason}"


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[bytes]) -> None:
        self.code = proc.returncode
        self.stdout = proc.stdout.decode("utf-8")
        self.stderr = proc.stderr.decode("utf-8")

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every stdout line must be a JSON object with a type: that is the protocol (§5.2)."""
        out = []
        for line in self.stdout.splitlines():
            if line.strip():
                event = json.loads(line)
                assert isinstance(event, dict) and isinstance(event.get("type"), str), line
                out.append(event)
        return out

    @property
    def final(self) -> dict[str, Any]:
        events = self.events
        finals = [e for e in events if e["type"] in ("result", "error")]
        assert len(finals) == 1 and events[-1] is finals[0], self.stdout
        return finals[0]

    @property
    def doc(self) -> dict[str, Any]:
        assert self.code == 0, self.stderr
        doc = json.loads(self.stdout)
        assert isinstance(doc, dict)
        return doc


def request(name: str, args: dict[str, Any] | None = None, call_id: str = "c-1", **context: Any) -> str:
    ctx = {"protocol": 1, "call_id": call_id, "anima_dir": None, **context}
    return json.dumps({"name": name, "args": args or {}, "context": ctx}, ensure_ascii=False)


def base_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANIMAWORKS_") and k != "PYTHONPATH"}
    env["ANIMAWORKS_DATA_DIR"] = str(tmp / "data")
    env.update(extra)
    return env


def run_shim(tool: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None, shim: Path = SHIM) -> Run:
    proc = subprocess.run(
        [sys.executable, str(shim), str(tool), *args],
        input=stdin.encode("utf-8"),
        capture_output=True,
        env=env if env is not None else base_env(tool.parent),
        cwd=tool.parent,
    )
    return Run(proc)


@pytest.fixture
def tier(tmp_path: Path) -> Path:
    d = tmp_path / "tools"
    d.mkdir()
    return d


def install(src: Path, tier_dir: Path) -> Path:
    """Copy a fixture module, unedited, into a temporary tier."""
    dest = tier_dir / src.name
    shutil.copyfile(src, dest)
    return dest
