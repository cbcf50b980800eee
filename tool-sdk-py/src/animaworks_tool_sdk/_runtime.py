"""Serving SDK actions over protocol v1: ``--schemas``, one request on stdin, ``--serve``."""
from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any, NoReturn

from . import _wire
from ._action import REGISTRY, TOOL_INFO, Action
from ._context import Context
from ._errors import ToolError


def document(actions: list[Action], module: ModuleType | None, stem: str) -> dict[str, Any]:
    """The ``--schemas`` document (protocol §2.1, full form) of these actions."""
    doc: dict[str, Any] = {"protocol": 1, "name": stem}
    version = TOOL_INFO.get("version", getattr(module, "__version__", None))
    if isinstance(version, str):
        doc["version"] = version
    description = TOOL_INFO.get("description")
    if description is None and module is not None and isinstance(module.__doc__, str) and module.__doc__.strip():
        description = module.__doc__.strip().split("\n\n")[0].replace("\n", " ")
    if description:
        doc["description"] = description
    doc["events"] = True
    doc["persistent"] = bool(TOOL_INFO.get("persistent", True))
    if TOOL_INFO.get("credentials"):
        doc["credentials"] = TOOL_INFO["credentials"]
    doc["actions"] = [a.describe() for a in actions]
    return doc


def _find(actions: list[Action], stem: str, name: str, action: Any) -> Action | None:
    def norm(s: str) -> str:
        return s.replace("-", "_")

    wanted = [name]
    if name.startswith(stem + "_"):
        wanted.append(name[len(stem) + 1:])
    if isinstance(action, str):
        wanted.append(action)
    for w in wanted:
        for a in actions:
            if a.name == w or norm(a.name) == norm(w):
                return a
    return None


def handle(actions: list[Action], stem: str, req: dict[str, Any], tag: bool) -> bool:
    """Run one request and write its events; True when it ended with a result."""
    ctx = Context(req, tag_call_id=tag)
    act = _find(actions, stem, req["name"], ctx.action)
    if act is None:
        known = ", ".join(f"{stem}_{a.name}" for a in actions)
        _wire.emit(_wire.error_event("unknown_action", f"{stem} has no action {req['name']!r}", hint=f"known: {known}"), ctx._tag)
        return False
    args = req.get("args")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        _wire.emit(_wire.error_event("invalid_arguments", "args must be a JSON object"), ctx._tag)
        return False
    kwargs = dict(args)
    for p in act.context_params:
        kwargs[p] = ctx
    try:
        result = act.func(**kwargs)
        if act.is_async:
            import asyncio

            result = asyncio.run(result)
    except ToolError as exc:
        _wire.emit(_wire.error_event(exc.code, exc.message, exc.hint, exc.data), ctx._tag)
        return False
    except Exception as exc:
        import traceback

        traceback.print_exc()
        _wire.emit(_wire.error_event("internal", f"{type(exc).__name__}: {exc}"), ctx._tag)
        return False
    _wire.emit({"type": "result", "result": result}, ctx._tag)
    return True


def serve(mode: str, actions: list[Action], module: ModuleType | None, stem: str) -> int:
    """Serve ``mode`` (``schemas``, ``call`` or ``serve``); returns the exit code. Used by the shim and run()."""
    _wire.take_stdout()
    _wire.setup_logging()
    if mode == "schemas":
        _wire.write_line(_wire.dumps(document(actions, module, stem)))
        return 0
    ok = True
    for req, problem in _wire.read_requests(sys.stdin.buffer):
        if req is None:
            _wire.emit(_wire.error_event("bad_request", problem))
            ok = False
        else:
            ok = handle(actions, stem, req, tag=mode == "serve")
        if mode == "call":
            return 0 if ok else 1
    if mode == "call":
        _wire.emit(_wire.error_event("bad_request", "no request on stdin"))
        return 2
    return 0


def help_text(actions: list[Action], stem: str, prog: str) -> str:
    lines = [
        f"{stem}: a tool for animaworks-tool (protocol 1). animaworks-tool runs it; by hand:",
        f"  {prog} --schemas    print the tool's description (JSON)",
        f"  {prog} --serve      persistent worker: one JSON request per line on stdin",
        f"  {prog} < req.json   one JSON request on stdin, events on stdout",
        "  e.g. echo '{\"name\": \"%s_%s\", \"args\": {}}' | %s" % (stem, actions[0].name if actions else "ACTION", prog),
        "",
        "actions:",
    ]
    for a in actions:
        first = a.description.strip().splitlines()[0] if a.description.strip() else ""
        lines.append(f"  {a.name:<20} {first}")
    return "\n".join(lines) + "\n"


def run() -> NoReturn:
    """Serve the registered actions as the command line asks: ``--schemas``, ``--serve``, or one request on stdin.

    Started by hand on a terminal with no arguments, it prints help instead of waiting for a request.
    Under the runner's shim the file is imported, not run as ``__main__``, so ``run()`` is not reached; keep
    tool-wide settings in :func:`tool_info`, not in code after ``if __name__ == "__main__"``.
    """
    actions = list(REGISTRY)
    if not actions:
        print("animaworks_tool_sdk.run(): no @action is registered", file=sys.stderr)
        sys.exit(2)
    module = sys.modules.get(getattr(actions[0].func, "__module__", "__main__"))
    prog = sys.argv[0] if sys.argv and sys.argv[0] else "tool"
    stem = os.path.splitext(os.path.basename(prog))[0]
    argv = sys.argv[1:]
    if argv in (["-h"], ["--help"]):
        sys.stdout.write(help_text(actions, stem, prog))
        sys.exit(0)
    if argv == ["--schemas"]:
        mode = "schemas"
    elif argv == ["--serve"]:
        mode = "serve"
    elif not argv:
        if sys.stdin is not None and sys.stdin.isatty():
            sys.stderr.write(help_text(actions, stem, prog))
            sys.exit(2)
        mode = "call"
    else:
        sys.stderr.write(f"unknown arguments {argv!r}\n" + help_text(actions, stem, prog))
        sys.exit(2)
    sys.exit(serve(mode, actions, module, stem))
