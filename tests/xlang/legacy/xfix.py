"""xfix: the cross-language transcript fixture as an AnimaWorks legacy module (see tests/xlang/README.md)."""
from __future__ import annotations

from typing import Any


def get_tool_schemas() -> list[dict]:
    obj = {"type": "object"}
    return [
        {"name": "xfix_steps", "description": "Steps.", "input_schema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]}},
        {"name": "xfix_fail", "description": "Fail.", "input_schema": obj},
        {"name": "xfix_big", "description": "Big.", "input_schema": {"type": "object", "properties": {"bytes": {"type": "integer", "minimum": 0}}, "required": ["bytes"]}},
        {"name": "xfix_echo", "description": "Echo.", "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "xfix_nested", "description": "Nested.", "input_schema": {"type": "object", "properties": {"outer": obj}, "required": ["outer"]}},
    ]


def dispatch(name: str, args: dict[str, Any]) -> Any:
    args.pop("anima_dir", None)
    if name == "xfix_steps":
        return {"steps": args["n"]}
    if name == "xfix_fail":
        raise RuntimeError("the fixture failed on purpose")
    if name == "xfix_big":
        return "x" * args["bytes"]
    if name == "xfix_echo":
        return {"text": args["text"], "chars": len(args["text"])}
    if name == "xfix_nested":
        items = args["outer"].get("items", [])
        return {"outer": args["outer"], "sum": sum(i["v"] for i in items), "keys": [i["k"] for i in items]}
    raise ValueError(f"Unknown tool: {name}")
