"""Calls, through `animaworks-tool mcp`, tools of a declared MCP server that send requests of their own to the
client (roots/list, sampling/createMessage, elicitation/create), with the official MCP Python SDK as that client,
and prints one JSON object of what it saw, for runner/tests/it/mcp_forward.rs to check.

argv: BIN MODE CALLS: MODE is `declare` (the client declares sampling, elicitation and roots, and answers them),
`error` (it declares them and answers each with a JSON-RPC error), `hold` (it declares them and never answers an
elicitation: once the calls are done it waits, 30 s at most, until that elicitation is cancelled) or `none` (it
declares none); CALLS is a JSON list of [tool, arguments] called at once. With a fourth argument
`roots-changed`, the client then says its roots changed and calls `asking_changes` until the server heard it
(30 s at most). Environment: the test world's (ANIMAWORKS_*).
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client


async def main() -> None:
    mode, calls = sys.argv[2], json.loads(sys.argv[3])
    out: dict = {"asked": {"roots": 0, "sample": [], "elicit": []}, "calls": [None] * len(calls), "cancelled": []}

    def refuse(what):
        return types.ErrorData(code=-32000, message=f"the client will not {what}")

    async def on_roots(context):
        out["asked"]["roots"] += 1
        if mode == "error":
            return refuse("list roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/fwd-root", name="fwd root")])

    async def on_sample(context, params):
        text = params.messages[0].content.text
        out["asked"]["sample"].append(text)
        if params.system_prompt is not None:
            out["asked"].setdefault("system", []).append(params.system_prompt)
        out["asked"].setdefault("context", []).append(params.include_context)
        if mode == "error":
            return refuse("sample")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled: {text}"),
            model="fwd-model",
            stop_reason="endTurn",
        )

    async def on_elicit(context, params):
        out["asked"]["elicit"].append(params.message)
        out["asked"].setdefault("schemas", []).append(params.requested_schema)
        if mode == "error":
            return refuse("ask")
        if mode == "hold":
            try:
                await anyio.sleep_forever()
            finally:
                out["cancelled"].append(params.message)
        return types.ElicitResult(action="accept", content={"c": "blue"})

    kwargs = {}
    if mode in ("declare", "error", "hold"):
        kwargs = {"sampling_callback": on_sample, "elicitation_callback": on_elicit, "list_roots_callback": on_roots}
    params = StdioServerParameters(command=sys.argv[1], args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, **kwargs) as session:
            await session.initialize()

            async def call(i, tool, args):
                r = await session.call_tool(tool, args)
                out["calls"][i] = r.model_dump(mode="json", by_alias=True, exclude_none=True)

            async with anyio.create_task_group() as tg:
                for i, (tool, args) in enumerate(calls):
                    tg.start_soon(call, i, tool, args)
            if mode == "hold":
                with anyio.move_on_after(30):
                    while not out["cancelled"]:
                        await anyio.sleep(0.1)
                # What was cancelled while the session was open (closing it cancels what is left).
                out["cancelled_open"] = list(out["cancelled"])
            if sys.argv[4:] == ["roots-changed"]:
                await session.send_roots_list_changed()
                with anyio.move_on_after(30):
                    while True:
                        r = await session.call_tool("asking_changes", {})
                        out["changes"] = r.structured_content["result"]
                        if out["changes"] != "0":
                            break
                        await anyio.sleep(0.1)
    print(json.dumps(out))


anyio.run(main)
