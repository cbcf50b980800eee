"""Drives `animaworks-tool mcp` with the official MCP Python SDK (see requirements.txt) through the scenario the
TypeScript client runs too (../mcp_client_ts/scenario.mjs), and prints one JSON object of what it saw, for
runner/tests/it/mcp_clients.rs to check.

argv: BIN. Environment: the test world's (ANIMAWORKS_*), plus MCP_TEST_PIDFILE, where the `hang` action's pid
appears, and MCP_TEST_PROGRESS_SEEN, written when the last progress step has reached the callback.
"""

import json
import os
import sys
import time
import warnings
from importlib.metadata import version

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


def dump(r) -> dict:
    return r.model_dump(mode="json", by_alias=True, exclude_none=True)


def group_gone(pgid: int, deadline_s: float) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


async def try_call(session: ClientSession, name: str, args: dict) -> dict:
    try:
        return {"raised": False, "result": dump(await session.call_tool(name, args))}
    except MCPError as e:
        return {"raised": True, "code": e.error.code, "message": e.error.message, "data": e.error.data}
    except RuntimeError as e:  # the SDK's own output-schema check
        return {"raised": True, "message": str(e)}


async def main() -> None:
    out: dict = {"sdk": version("mcp")}
    logs: list = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))

    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log) as session:
            await session.initialize()

            # Pagination: follow nextCursor to the last page.
            out["pages"], out["tools"] = [], []
            cursor = None
            while len(out["pages"]) < 20:
                page = await session.list_tools(
                    params=None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
                )
                out["pages"].append(len(page.tools))
                out["tools"].extend(t.name for t in page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break

            out["greet"] = dump(await session.call_tool("w_greet", {"who": "Ada"}))

            progress: list = []

            async def on_progress(p: float, total: float | None, message: str | None) -> None:
                progress.append([p, total, message])
                if p == total:
                    open(os.environ["MCP_TEST_PROGRESS_SEEN"], "w").close()

            out["steps"] = dump(await session.call_tool("w_steps", {}, progress_callback=on_progress))
            out["progress"] = progress

            out["invalid"] = await try_call(session, "w_greet", {"who": 3})
            out["gated"] = await try_call(session, "w_purge", {})

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the SDK marks logging deprecated for 2026-07-28 only
                await session.set_logging_level("debug")
            out["talk"] = dump(await session.call_tool("w_talk", {}))
            with anyio.move_on_after(1):
                while len(logs) < 2:
                    await anyio.sleep(0.02)
            out["logs"] = logs

            # The SDK validates structuredContent against the listed output schema (jsonschema, formats not
            # asserted); it must hold the schema for the tool to have checked anything.
            out["stamp_validated"] = session._tool_output_schemas.get("w_stamp") is not None
            out["stamp"] = await try_call(session, "w_stamp", {})

            # Cancel: abandon the call once the tool runs; the server must end the tool's group.
            pidfile = os.environ["MCP_TEST_PIDFILE"]
            with anyio.CancelScope() as scope:

                async def cancel_when_running() -> None:
                    while not (os.path.exists(pidfile) and open(pidfile).read().strip()):
                        await anyio.sleep(0.02)
                    scope.cancel()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(cancel_when_running)
                    await session.call_tool("w_hang", {})
            pgid = int(open(pidfile).read().strip())
            out["hang_pgid"] = pgid
            out["hang_group_gone"] = await anyio.to_thread.run_sync(group_gone, pgid, 15.0)

            out["after_cancel"] = dump(await session.call_tool("w_greet", {"who": "again"}))
    print(json.dumps(out))


anyio.run(main)
