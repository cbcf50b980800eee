"""The error a tool raises to report its own failure."""
from __future__ import annotations

from typing import Any


class ToolError(Exception):
    """Raise to end the call with the tool's own error event (protocol §5.2): the caller sees ``tool_error``.

    ``code`` is a short machine-readable word (default ``"tool_error"``), ``hint`` tells the caller what to do,
    ``data`` is any JSON value to pass along. Any other exception is reported with code ``internal`` and its
    traceback goes to stderr.
    """

    def __init__(self, message: str, code: str = "tool_error", hint: str | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.hint = hint
        self.data = data
