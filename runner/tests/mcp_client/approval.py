"""Calls a gated action that asks a human through `animaworks-tool mcp` with the official MCP Python SDK, and prints
one JSON object of what it saw, for runner/tests/it/approvals.rs to check.

argv: BIN MODE, MODE one of accept | decline | cancel (the client's elicitation callback answers so) or none (the
client declares no elicitation capability). Environment: the test world's (ANIMAWORKS_*).
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


async def main() -> None:
    mode = sys.argv[2]
    out: dict = {"asked": []}

    async def on_elicit(context, params):
        out["asked"].append({"message": params.message, "schema": params.requested_schema})
        if mode == "accept":
            return types.ElicitResult(action="accept", content={})
        return types.ElicitResult(action=mode)

    kwargs = {} if mode == "none" else {"elicitation_callback": on_elicit}
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **kwargs) as session:
            await session.initialize()
            listed = await session.list_tools()
            out["listed"] = [t.name for t in listed.tools]
            r = await session.call_tool("mail_send", {"to": "bob"})
            out["call"] = r.model_dump(mode="json", by_alias=True, exclude_none=True)
    print(json.dumps(out))


anyio.run(main)
