"""Drives `animaworks-tool mcp` with the official MCP Python SDK (see requirements.txt) and prints one JSON object
of what it saw, for runner/tests/it/llm.rs to check.

argv: BIN. Environment: the test world's (ANIMAWORKS_*), plus
  MCP_TEST_PIDFILE   where the `hang` action writes its pid
  MCP_TEST_NEWTOOL   a path to write while connected (a new tool in a tier folder)
"""

import json
import os
import sys
import time
import warnings

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


def group_gone(pgid: int, deadline_s: float) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


async def main() -> None:
    out: dict = {}
    list_changed = anyio.Event()

    async def on_message(message) -> None:
        if type(message).__name__ == "ToolListChangedNotification":
            list_changed.set()

    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()

            listed = await session.list_tools()
            out["tools"] = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]

            r = await session.call_tool("t_greet", {"who": "Ada"})
            out["greet"] = r.model_dump(mode="json", by_alias=True, exclude_none=True)

            progress: list = []

            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append([p, total, message])

            r = await session.call_tool("t_steps", {}, progress_callback=on_progress)
            out["steps"] = r.model_dump(mode="json", by_alias=True, exclude_none=True)
            out["progress"] = progress

            r = await session.call_tool("t_fail", {})
            out["fail"] = r.model_dump(mode="json", by_alias=True, exclude_none=True)

            # Tool-level failures are results the model can read (SEP-1303); only an unknown name raises.
            for name, args, key in [("t_purge", {}, "gated"), ("t_greet", {"who": 3}, "invalid"), ("nope_x", {}, "unknown")]:
                try:
                    r = await session.call_tool(name, args)
                    out[key] = {"raised": False, "result": r.model_dump(mode="json", by_alias=True, exclude_none=True)}
                except MCPError as e:
                    out[key] = {"raised": True, "code": e.error.code, "message": e.error.message, "data": e.error.data}

            # logging/setLevel is answered; a bogus cursor is -32602.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the SDK marks logging deprecated for 2026-07-28 only
                await session.set_logging_level("debug")
            out["set_level"] = True
            try:
                await session.list_tools(params=types.PaginatedRequestParams(cursor="bogus"))
                out["bad_cursor"] = {"raised": False}
            except MCPError as e:
                out["bad_cursor"] = {"raised": True, "code": e.error.code}

            # Background: task_submit answers at once with an id; task_show follows it to its end. A gated action
            # is refused before anything is queued.
            r = await session.call_tool("task_submit", {"tool": "t", "action": "greet", "args": {"who": "Bg"}})
            receipt = json.loads(r.content[0].text)
            out["bg_receipt"] = receipt
            end = time.monotonic() + 30
            shown: dict = {}
            while time.monotonic() < end:
                r = await session.call_tool("task_show", {"task_id": receipt["task_id"]})
                shown = json.loads(r.content[0].text)
                if shown.get("status") not in ("pending", "running"):
                    break
                await anyio.sleep(0.05)
            out["bg_final"] = shown
            r = await session.call_tool("task_submit", {"tool": "t", "action": "purge", "args": {}})
            out["bg_gated"] = r.model_dump(mode="json", by_alias=True, exclude_none=True)

            # A cancelled call: the client abandons it once the tool runs; the server must end the tool's group.
            pidfile = os.environ["MCP_TEST_PIDFILE"]
            with anyio.CancelScope() as scope:

                async def cancel_when_running() -> None:
                    while not (os.path.exists(pidfile) and open(pidfile).read().strip()):
                        await anyio.sleep(0.02)
                    scope.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(cancel_when_running)
                    await session.call_tool("t_hang", {})
            pgid = int(open(pidfile).read().strip())
            out["hang_pgid"] = pgid
            out["hang_group_gone"] = await anyio.to_thread.run_sync(group_gone, pgid, 15.0)

            # The server still serves after a cancellation.
            r = await session.call_tool("t_greet", {"who": "again"})
            out["after_cancel"] = r.model_dump(mode="json", by_alias=True, exclude_none=True)

            # A new file in a tier folder: tools/list_changed arrives, and the new tool is listed.
            newtool = os.environ["MCP_TEST_NEWTOOL"]
            with open(os.environ["MCP_TEST_NEWTOOL_SRC"]) as src, open(newtool, "w") as dst:
                dst.write(src.read())
            os.chmod(newtool, 0o755)
            with anyio.move_on_after(20):
                await list_changed.wait()
            out["list_changed"] = list_changed.is_set()
            listed = await session.list_tools()
            out["tools_after"] = [t.name for t in listed.tools]
    print(json.dumps(out))


anyio.run(main)
