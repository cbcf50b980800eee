"""The call's context: who is calling, the deadline, and a way to report progress, logs and partial output."""
from __future__ import annotations

import time
from typing import Any

from . import _wire

_LEVELS = ("debug", "info", "warning", "error")


class Context:
    """Given to a parameter annotated ``Context``. Fields come from the request (protocol §4); unknown ones are
    kept in ``raw``. Methods write events (protocol §5.2), tagged with the call id in a persistent worker."""

    def __init__(self, request: dict[str, Any], *, tag_call_id: bool = False) -> None:
        ctx = request.get("context")
        ctx = ctx if isinstance(ctx, dict) else {}
        self.raw: dict[str, Any] = ctx
        self.name: str = request.get("name", "")
        self.call_id: str | None = ctx.get("call_id")
        self.tool: str | None = ctx.get("tool")
        self.action: str | None = ctx.get("action")
        self.anima_name: str | None = ctx.get("anima_name")
        self.anima_dir: str | None = _wire.anima_dir_of(ctx)
        self.data_dir: str | None = ctx.get("data_dir")
        self.timeout_s: float | None = ctx.get("timeout_s")
        self.deadline_ms: int | None = ctx.get("deadline_ms")
        self._tag = self.call_id if tag_call_id else None

    @property
    def remaining_s(self) -> float | None:
        """Seconds left before the deadline, or None when there is none."""
        if not isinstance(self.deadline_ms, (int, float)):
            return None
        return max(0.0, self.deadline_ms / 1000 - time.time())

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report how far along the call is, e.g. ``ctx.progress(3, 10, "fetching")``."""
        event: dict[str, Any] = {"type": "progress", "progress": progress}
        if total is not None:
            event["total"] = total
        if message is not None:
            event["message"] = message
        _wire.emit(event, self._tag)

    def log(self, message: str, level: str = "info") -> None:
        """A line for the caller's log; ``level`` is debug, info, warning or error."""
        if level not in _LEVELS:
            raise ValueError(f"log level must be one of {_LEVELS}, got {level!r}")
        _wire.emit({"type": "log", "level": level, "message": str(message)}, self._tag)

    def partial(self, data: Any) -> None:
        """A piece of output shown as it arrives; it is not part of the result."""
        _wire.emit({"type": "partial", "data": data}, self._tag)
