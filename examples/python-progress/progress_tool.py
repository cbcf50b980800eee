"""Counts words in a text, reporting progress as it goes: an example tool on tool-sdk-py."""
from __future__ import annotations

from typing import Annotated

from animaworks_tool_sdk import Context, Param, ToolError, action, run

__version__ = "0.1.0"


@action(expected_seconds=1, hints={"read_only": True, "idempotent": True})
def count_words(
    text: Annotated[str, "The text whose words are counted"],
    ctx: Context,
    steps: Annotated[int, Param("How many progress steps to report", minimum=1, maximum=100)] = 4,
) -> dict[str, object]:
    """Count the words of a text, in `steps` chunks, reporting progress after each chunk."""
    words = text.split()
    if not words:
        raise ToolError("the text has no words", code="empty_text", hint="pass a text with at least one word")
    size = max(1, -(-len(words) // steps))
    chunks = [words[i:i + size] for i in range(0, len(words), size)]
    counts: dict[str, int] = {}
    for done, chunk in enumerate(chunks, 1):
        for word in chunk:
            key = word.strip(".,;:!?\"'()").lower()
            if key:
                counts[key] = counts.get(key, 0) + 1
        ctx.progress(done, len(chunks), f"counted {min(done * size, len(words))} of {len(words)} words")
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    ctx.log(f"{len(counts)} distinct words")
    return {"words": len(words), "distinct": len(counts), "top": [{"word": w, "count": n} for w, n in top]}


if __name__ == "__main__":
    run()
