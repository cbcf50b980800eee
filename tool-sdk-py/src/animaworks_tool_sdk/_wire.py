"""The wire side shared by the shim and the SDK runtime: stdout belongs to the protocol.

Imports only ``os``, ``sys`` and ``json`` so the legacy shim stays fast (and no ``__future__``: annotations are strings).

How stdout is kept clean: on first use the process's real stdout (fd 1) is duplicated to a private,
non-inheritable descriptor that only :func:`emit` writes to; fd 1 is then pointed at stderr, and
``sys.stdout`` is replaced by ``sys.stderr``. A stray ``print``, a C extension writing to fd 1, or a child
process inheriting fd 1 all end up on stderr, and a grandchild can never hold the protocol pipe open.
"""
import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the shim must start fast
    from typing import Any, BinaryIO, Iterator

_out_fd: int | None = None


def take_stdout() -> None:
    """Reserve the real stdout for protocol lines and send everything else written to fd 1 to stderr."""
    global _out_fd
    if _out_fd is not None:
        return
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):
        pass
    _out_fd = os.dup(1)  # os.dup makes a non-inheritable descriptor: children never get the protocol pipe
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def _json_default(value: "Any") -> "Any":
    # Common non-JSON values an author may return; anything else becomes its str().
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    enum = sys.modules.get("enum")
    if enum is not None and isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def dumps(value: "Any") -> str:
    """One JSON line, UTF-8 kept as is; NaN and infinities are refused (they are not JSON)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_json_default)


def write_line(line: str) -> None:
    """Write one line to the protocol stdout (the real fd 1), whole, and flush it."""
    take_stdout()
    assert _out_fd is not None
    data = (line + "\n").encode("utf-8")
    while data:
        n = os.write(_out_fd, data)
        data = data[n:]


def emit(event: "dict[str, Any]", call_id: "str | None" = None) -> None:
    """Write one event line; in a persistent worker every event carries the call's ``call_id`` (protocol §9)."""
    if call_id is not None:
        event = {**event, "call_id": call_id}
    try:
        line = dumps(event)
    except (TypeError, ValueError) as exc:
        if event.get("type") not in ("result", "error"):
            raise
        # A final event must still be written, or the stream would end without one.
        line = dumps(
            {
                "type": "error",
                "code": "internal",
                "message": f"the tool's {event['type']} is not JSON: {exc}",
                **({"call_id": call_id} if call_id is not None else {}),
            }
        )
    write_line(line)


def error_event(code: str, message: str, hint: "str | None" = None, data: "Any" = None) -> "dict[str, Any]":
    event: dict[str, Any] = {"type": "error", "code": code, "message": message}
    if hint is not None:
        event["hint"] = hint
    if data is not None:
        event["data"] = data
    return event


def anima_dir_of(context: "dict[str, Any]") -> "str | None":
    """The calling anima's directory: the request context's, else ``$ANIMAWORKS_ANIMA_DIR``, else None."""
    value = context.get("anima_dir")
    if isinstance(value, str) and value:
        return value
    return os.environ.get("ANIMAWORKS_ANIMA_DIR") or None


def setup_logging() -> None:
    """Give Python logging a stderr handler at INFO when the program has configured none (only if in use)."""
    logging = sys.modules.get("logging")
    if logging is None:
        return  # nothing imported logging: do not pay for importing it
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)


def read_requests(stream: "BinaryIO") -> "Iterator[tuple[dict[str, Any] | None, str]]":
    """Yield (request or None, error text) for each non-blank line of a binary stream."""
    for raw in stream:
        if not raw.strip():
            continue
        try:
            req = json.loads(raw)
        except ValueError as exc:
            yield None, f"the request is not JSON: {exc}"
            continue
        if not isinstance(req, dict) or not isinstance(req.get("name"), str):
            yield None, "the request must be a JSON object with a string 'name'"
            continue
        yield req, ""
