"""A bare stdio MCP server (no SDK) whose output has no end: `tools/list` always has a next page (each page one
tool), and its tool `flood` answers with a line longer than any bound (runner/tests/it/mcp_forward.rs). Each
`tools/list` it is asked is counted in the file named by $ENDLESS_PAGES."""

import json
import os
import sys


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


pages = 0
for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "endless", "version": "1"}}})
    elif method == "tools/list":
        pages += 1
        with open(os.environ["ENDLESS_PAGES"], "w") as f:
            f.write(str(pages))
        name = "flood" if pages == 1 else f"t{pages}"
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "tools": [{"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}],
            "nextCursor": str(pages)}})
    elif method == "tools/call":
        # 17 MiB on one line, in pieces, and never a newline before the bound.
        head = '{"jsonrpc": "2.0", "id": ' + json.dumps(mid) + ', "result": {"content": [{"type": "text", "text": "'
        sys.stdout.write(head)
        for _ in range(17):
            sys.stdout.write("x" * (1024 * 1024))
        sys.stdout.write('"}]}}\n')
        sys.stdout.flush()
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": method}})
