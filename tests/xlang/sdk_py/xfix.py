"""xfix: the cross-language transcript fixture, on tool-sdk-py (see tests/xlang/README.md)."""
from __future__ import annotations

from typing import Annotated, Any

from animaworks_tool_sdk import Context, Param, ToolError, action, run


@action
def steps(n: Annotated[int, Param("How many steps", minimum=1)], ctx: Context) -> dict[str, int]:
    """Report n progress steps."""
    for i in range(1, n + 1):
        ctx.progress(i, n, f"step {i} of {n}")
    return {"steps": n}


@action
def fail() -> None:
    """Fail with the tool's own error."""
    raise ToolError("the fixture failed on purpose", code="fixture_failed", hint="this is expected")


@action
def big(bytes: Annotated[int, Param("Size of the result", minimum=0)]) -> str:
    """A result of `bytes` x characters."""
    return "x" * bytes


@action
def echo(text: str, ctx: Context) -> dict[str, Any]:
    """Echo a text, as a partial and in the result."""
    ctx.partial(text)
    return {"text": text, "chars": len(text)}


@action
def nested(outer: dict[str, Any]) -> dict[str, Any]:
    """Sum nested values."""
    items = outer.get("items", [])
    return {"outer": outer, "sum": sum(i["v"] for i in items), "keys": [i["k"] for i in items]}


if __name__ == "__main__":
    run()
