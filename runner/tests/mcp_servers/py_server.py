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
async def hang(pidfile: str) -> str:
    """Write the server's pid and wait forever (cancel and kill tests)."""
    with open(pidfile, "w") as f:
        f.write(str(os.getpid()))
    await asyncio.sleep(3600)
    return "never"


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
    server.run()
