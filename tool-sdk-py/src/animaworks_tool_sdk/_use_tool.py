"""``use_tool`` for Python hosts (AnimaWorks' LiteLLM mode): one call through the ``animaworks-tool`` runner,
answered as AnimaWorks' own ``use_tool`` answers — the result text, the tool's own error as the text
``Error executing <tool>_<action>: …``, or a one-line JSON error object
``{"status": "error", "error_type", "message", "suggestion"?, "code"}``. Validation, permissions, gates,
timeouts and the 50 KB cut all happen in the runner.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Mapping


def _error(message: str, suggestion: str) -> str:
    return json.dumps(
        {"status": "error", "error_type": "ToolExecutionError", "message": message, "suggestion": suggestion,
         "code": "internal"},
        ensure_ascii=False,
    )


def use_tool(
    tool_name: str,
    action: str,
    args: Mapping[str, Any] | None = None,
    *,
    runner: str | None = None,
    timeout: float | None = None,
    max_chars: int | None = None,
) -> str:
    """Call ``action`` of ``tool_name`` with ``args`` and return the text an LLM should read.

    The runner is ``runner``, else ``$ANIMAWORKS_TOOL_BIN``, else ``animaworks-tool`` on ``PATH``. The calling
    anima and the data dir come from the environment (``ANIMAWORKS_ANIMA_DIR``, ``ANIMAWORKS_DATA_DIR``) as for
    every runner command. ``timeout`` overrides the action's deadline (seconds); ``max_chars`` the 50,000-byte cut.
    Never raises for a failed call: failures are returned as the JSON error text, as the original does.
    """
    exe = runner or os.environ.get("ANIMAWORKS_TOOL_BIN") or shutil.which("animaworks-tool")
    if not exe:
        return _error(
            "the animaworks-tool runner was not found",
            "install it on PATH, or set ANIMAWORKS_TOOL_BIN to its path",
        )
    argv = [exe, "use-tool"]
    if timeout is not None:
        argv += ["--timeout", str(timeout)]
    if max_chars is not None:
        argv += ["--max-chars", str(max_chars)]
    request = json.dumps({"tool_name": tool_name, "action": action, "args": dict(args or {})}, ensure_ascii=False)
    try:
        proc = subprocess.run(argv, input=request.encode("utf-8"), capture_output=True, check=False)
    except OSError as e:
        return _error(f"cannot start {exe}: {e}", "check the path in ANIMAWORKS_TOOL_BIN")
    out = proc.stdout.decode("utf-8", errors="replace")
    if proc.returncode != 0 and not out.strip():
        tail = proc.stderr.decode("utf-8", errors="replace")[-2000:]
        return _error(f"animaworks-tool use-tool exited with code {proc.returncode}: {tail}", "read the runner's message")
    return out
