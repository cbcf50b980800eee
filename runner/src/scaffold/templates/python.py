#!/usr/bin/env python3
"""Echo a text back, a number of times."""
# The docstring above is the tool's description, which an LLM reads: say what {{name}} does.
# A tool for animaworks-tool on tool-sdk-py: the runner provides the SDK to .py tools; to run this file directly
# (./{{name}}.py --schemas), install it with `pip install ./tool-sdk-py` from the animaworks-tool repository.
from __future__ import annotations

from typing import Annotated

from animaworks_tool_sdk import Context, Param, ToolError, action, run

__version__ = "0.1.0"


# sandbox: what the action needs beyond reading its own folder, here nothing (protocol.md §2.4).
@action(expected_seconds=1, hints={"read_only": True, "idempotent": True}, sandbox={})
def echo(
    text: Annotated[str, Param("The text to echo back", examples=["hello"])],
    ctx: Context,
    times: Annotated[int, Param("How many times", minimum=1, maximum=10)] = 1,
) -> dict[str, object]:
    """Echo a text back, a number of times, reporting progress."""
    if not text.strip():
        raise ToolError("the text is empty", code="empty_text", hint="pass a text with at least one character")
    lines = []
    for i in range(times):
        ctx.progress(i + 1, times, f"echo {i + 1} of {times}")
        lines.append(text)
    return {"echo": lines}


if __name__ == "__main__":
    run()
