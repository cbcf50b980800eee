"""An MCP server written with the official Python SDK (runner/tests/mcp_client/requirements.txt), for the tests
of MCP servers as tools (runner/tests/it/mcp_servers.rs). stdio; every tool does one thing a test checks."""

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("py-test", instructions="A test server of animaworks-tool.")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Say the text back."""
    return text


@server.tool()
def write_note(path: str, text: str) -> str:
    """Write a file (not read-only: gated unless granted)."""
    with open(path, "w") as f:
        f.write(text)
    return "written"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_file(path: str) -> str:
    """Read a file, to show what the sandbox lets the server see."""
    with open(path) as f:
        return f.read()


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def token() -> str:
    """The GITHUB_TOKEN the server was started with (a credential test: the runner masks it)."""
    return "token=" + os.environ.get("GITHUB_TOKEN", "<none>")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def count(n: int, ctx: Context) -> str:
    """Report progress n times."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"step {i + 1}")
        await asyncio.sleep(0.01)
    return f"counted {n}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def hang(pidfile: str, cancelled_to: str = "") -> str:
    """Write the server's pid and wait forever (cancel and kill tests); when the call is cancelled in the server
    (notifications/cancelled), write "cancelled" to `cancelled_to`."""
    with open(pidfile, "w") as f:
        f.write(str(os.getpid()))
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        if cancelled_to:
            with open(cancelled_to, "w") as f:
                f.write("cancelled")
        raise
    return "never"


COUNTER = [0]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def counter(wait_s: float = 0.0) -> dict:
    """The server's own state: a counter raised by each call (after `wait_s`), with the server's pid."""
    await asyncio.sleep(wait_s)
    COUNTER[0] += 1
    return {"count": COUNTER[0], "pid": os.getpid()}


IN_FLIGHT = [0]
MET = [0]


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def meet(n: int, within_s: float = 60.0) -> dict:
    """Wait until `n` calls of meet are in flight at once (or `within_s` passed); say how many were seen."""
    IN_FLIGHT[0] += 1
    MET[0] = max(MET[0], IN_FLIGHT[0])
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + within_s
        while MET[0] < n and loop.time() < end:
            await asyncio.sleep(0.02)
        return {"seen": MET[0], "pid": os.getpid()}
    finally:
        IN_FLIGHT[0] -= 1


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def pid() -> int:
    """The server's process id (a warm server keeps it across calls)."""
    return os.getpid()


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def crash() -> str:
    """Die in the middle of a call."""
    print("the server is going down", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def fail() -> str:
    """A tool error (isError: true)."""
    raise ValueError("no such bookmark")


if __name__ == "__main__":
    if os.environ.get("PY_SERVER_BANNER"):
        # A stray line on stdout, as a server's print() at start leaves one.
        print("py-test server starting", flush=True)
    server.run()
