"""An MCP server written with the official Python SDK whose tools return content blocks that are not text (an image,
a resource link, annotations), for runner/tests/it/mcp_content.rs. stdio."""

import base64
import os
import struct
import zlib

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    Annotations,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolAnnotations,
)

server = MCPServer("content-test")


def png(width: int) -> bytes:
    """A real PNG of `width` x 1 red pixels (its IDAT stored, not compressed, so that its size follows `width`)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"\x00" + b"\xff\x00\x00" * width
    head = struct.pack(">IIBBBBB", width, 1, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", head) + chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")


@server.tool(title="Draw a picture", annotations=ToolAnnotations(readOnlyHint=True))
def picture(width: int = 4000) -> CallToolResult:
    """A red line as a PNG image, a caption holding the server's GITHUB_TOKEN, and a link to a file."""
    data = base64.b64encode(png(width)).decode()
    return CallToolResult(
        content=[
            TextContent(text="caption " + os.environ.get("GITHUB_TOKEN", "<none>")),
            ImageContent(data=data, mime_type="image/png", annotations=Annotations(audience=["user"], priority=0.5)),
            ResourceLink(uri="file:///tmp/red.png", name="red.png", mime_type="image/png"),
        ]
    )


@server.tool(
    name="a_tool_with_a_name_long_enough_to_pass_a_clients_limit_with_its_prefix",
    annotations=ToolAnnotations(readOnlyHint=True, title="Long name"),
)
def long_name() -> str:
    """Answers ok."""
    return "ok"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def encoded() -> CallToolResult:
    """The server's GITHUB_TOKEN inside base64: in an image's data and in a resource's blob; a plain image beside."""
    token = os.environ.get("GITHUB_TOKEN", "<none>").encode()
    return CallToolResult(
        content=[
            ImageContent(data=base64.b64encode(png(3) + b"tEXt" + token).decode(), mime_type="image/png"),
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="file:///tmp/token.bin", blob=base64.b64encode(b"token=" + token).decode()
                )
            ),
            ImageContent(data=base64.b64encode(png(3)).decode(), mime_type="image/png"),
        ]
    )


if __name__ == "__main__":
    server.run()
