"""Runs AnimaWorks' own code paths in this interpreter (AnimaWorks 0.15.0's, adapter or not) and prints what each
answered as one JSON object. argv[1]: the anima dir; argv[2]: a JSON list of steps. Used by animaworks_adapter.rs.

A step is [kind, ...]: ["schemas"], ["dispatch", name, args], ["files", name, args] (the
dispatcher's file fallback alone), ["use_tool", tool, action, args],
["handle", name, args] (a real ToolHandler built by core.tooling.standalone), ["gate", tool, action],
["refresh"],
["fork", step] (the step in a forked child), ["write", path under the anima dir, text].
"""
import json
import logging
import os
import sys
from pathlib import Path

# What the adapter says in AnimaWorks' log ("animaworks.*" loggers), kept for the answer.
_said = []


class _Keep(logging.Handler):
    def emit(self, record):
        if record.name == "animaworks.tool_adapter":
            _said.append(record.getMessage())


logging.getLogger("animaworks").addHandler(_Keep())

anima = Path(sys.argv[1])
steps = json.loads(sys.argv[2])


def tools():
    from core.integrations import discover_common_tools, discover_personal_tools

    return {**discover_common_tools(), **discover_personal_tools(anima)}


_handler = None


def handler():
    global _handler
    if _handler is None:
        from core.tooling.standalone import build_standalone_tool_handler

        _handler = build_standalone_tool_handler(anima, for_mcp=True)
    return _handler


def run(step):
    kind = step[0]
    if kind == "schemas":
        from core.tooling.schemas import load_all_tool_schemas

        return load_all_tool_schemas(tool_registry=[], personal_tools=tools())
    if kind == "dispatch":
        from core.tooling.dispatch import ExternalToolDispatcher

        return ExternalToolDispatcher([], tools()).dispatch(step[1], {**step[2], "anima_dir": str(anima)})
    if kind == "files":
        from core.tooling.dispatch import ExternalToolDispatcher

        return ExternalToolDispatcher([], tools())._dispatch_from_files(step[1], {**step[2], "anima_dir": str(anima)})
    if kind == "fork":  # the step after it, in a forked child (AnimaWorks' processes fork), bounded
        import select

        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                out = run(step[1])
            except Exception as e:
                out = {"raised": type(e).__name__, "text": str(e)}
            os.write(w, json.dumps(out).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while select.select([r], [], [], 60)[0]:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
        else:
            os.kill(pid, 9)
        os.waitpid(pid, 0)
        return json.loads(data) if data else "the forked child gave no answer within 60 s"
    if kind == "use_tool":
        return handler().handle("use_tool", {"tool_name": step[1], "action": step[2], "args": step[3]})
    if kind == "handle":
        return handler().handle(step[1], step[2])
    if kind == "gate":
        from core.tooling.permissions import check_tool_access

        t = tools()
        d = check_tool_access(anima, step[1], step[2], origin="personal", tool_file=Path(t[step[1]]))
        return {"allowed": d.allowed, "reason": d.reason, "message": d.message}
    if kind == "write":  # a tool file changed while the server runs
        (anima / step[1]).write_text(step[2])
        return None
    if kind == "refresh":
        return handler().handle("refresh_tools", {})
    raise SystemExit(f"unknown step {kind}")


results = []
for step in steps:
    try:
        results.append(run(step))
    except Exception as e:
        results.append({"raised": type(e).__name__, "text": str(e)})
patches = sys.modules.get("animaworks_tool_adapter._patches")
print(json.dumps({
    "pid": os.getpid(),
    "patched": sorted(patches.ORIGINALS) if patches else [],
    "results": results,
    "log": _said,
}, ensure_ascii=False))
sys.stdout.flush()
os._exit(0)  # the adapter's runner servers end with their stdin
