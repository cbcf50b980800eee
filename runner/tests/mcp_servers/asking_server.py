"""An MCP server (official Python SDK) whose one tool sends the client a request of its own: roots/list,
elicitation/create or sampling/createMessage, and says what came back (runner/tests/it/mcp_forward.rs)."""

import warnings

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import SamplingMessage, TextContent, ToolAnnotations

warnings.simplefilter("ignore")
server = MCPServer("asking-test")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def ask(what: str, ctx: Context) -> str:
    """Send the client a request ("roots", "elicit" or "sample") and describe its answer."""
    session = ctx.session
    try:
        if what == "roots":
            r = await session.list_roots()
            return f"roots: {len(r.roots)}"
        if what == "elicit":
            r = await session.elicit_form("Which colour?", {"type": "object", "properties": {"c": {"type": "string"}}})
            return f"elicit: {r.action}"
        if what == "sample":
            r = await session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text="hi"))], max_tokens=5
            )
            return f"sample: {r.model}"
    except Exception as e:  # the client's refusal, as the server meets it
        return f"{what} refused: {e}"
    return f"unknown request {what}"


if __name__ == "__main__":
    server.run()
