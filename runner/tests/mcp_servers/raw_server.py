"""A bare stdio MCP server (no SDK) for what the SDKs do not let a test write: a dotted tool name, a tool that
runs only as a task, and a server that announces its tools before any request. Every line it reads is answered
in order."""

import json
import sys


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "repo.search", "description": "Search the repository.",
     "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
     "annotations": {"readOnlyHint": True}},
    {"name": "long_job", "description": "Runs only as a task.", "inputSchema": {"type": "object"},
     "execution": {"taskSupport": "required"}, "annotations": {"readOnlyHint": True}},
]

for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "raw", "version": "1"}}})
    elif method == "notifications/initialized":
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        p = msg["params"]
        text = f"{p['name']}: {p.get('arguments', {}).get('q', '')}"
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": text}]}})
    elif mid is not None:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": method}})
