"""The wire side shared by the shim and the SDK runtime: stdout belongs to the protocol.

Imports only ``os``, ``sys`` and ``_json`` so the legacy shim stays fast (and no ``__future__``: annotations are
strings). Importing the ``json`` package costs a legacy call about 1 ms (it compiles six regular expressions); the
JSON here is ``json``'s own C code (``_json``, what ``json.dumps`` and ``json.loads`` run) called directly, plus
:func:`pretty`, ``json.dumps(indent=2)`` for results. Anything these fast paths do not handle exactly as ``json``
does (bad input, an exception, a Python without ``_json``) is done again by ``json`` itself, so the output and
the errors are ``json``'s.

How stdout is kept clean: on first use the process's real stdout (fd 1) is duplicated to a private,
non-inheritable descriptor that only :func:`emit` writes to; fd 1 is then pointed at stderr, and
``sys.stdout`` is replaced by ``sys.stderr``. A stray ``print``, a C extension writing to fd 1, or a child
process inheriting fd 1 all end up on stderr, and a grandchild can never hold the protocol pipe open.
"""
import os
import sys

try:
    from _json import encode_basestring as _c_str
    from _json import make_encoder as _c_make_encoder
    from _json import make_scanner as _c_make_scanner
except ImportError:  # another implementation of Python: json itself
    _c_str = _c_make_encoder = _c_make_scanner = None

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
    """One JSON line, UTF-8 kept as is; NaN and infinities are refused (they are not JSON).

    ``json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_json_default)``,
    which runs exactly this C encoder."""
    if _c_make_encoder is not None:
        try:
            if isinstance(value, str):
                return _c_str(value)
            return "".join(_c_make_encoder({}, _json_default, _c_str, None, ":", ",", False, False, False)(value, 0))
        except Exception:
            pass  # json raises the same error, or encodes where this could not
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_json_default)


class _Decoding:
    """What ``json.JSONDecoder()`` gives its C scanner."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_scan = None
_SPACE = " \t\n\r"


def loads(raw: bytes) -> "Any":
    """``json.loads(raw)`` for a line of UTF-8."""
    global _scan
    if _c_make_scanner is not None:
        try:
            if _scan is None:
                _scan = _c_make_scanner(_Decoding())
            text = raw.decode("utf-8")  # json would pick another encoding only for bytes invalid here or not JSON
            value, end = _scan(text, len(text) - len(text.lstrip(_SPACE)))
            if not text[end:].strip(_SPACE):
                return value
        except Exception:
            pass  # json raises its own error for this input
    import json

    return json.loads(raw)


def pretty(value: "Any") -> str:
    """``json.dumps(value, ensure_ascii=False, indent=2, default=str)``: how AnimaWorks shows a dict or list result.

    The C encoder does not indent before Python 3.13, so this is json's own indenting encoder, written again."""
    if _c_str is not None:
        try:
            return "".join(_indented(value, 0, {}))
        except Exception:
            pass  # json raises the same error (a circular reference, a bad key, a recursion too deep)
    import json

    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == float("-inf"):
        return "-Infinity"
    return float.__repr__(value)


def _scalar(value: "Any") -> "str | None":
    """The JSON of a str, None, bool, int or float (json's order of tests), else None."""
    if isinstance(value, str):
        return _c_str(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float(value)
    return None


def _indented(value: "Any", level: int, markers: "dict[int, Any]") -> "Iterator[str]":
    text = _scalar(value)
    if text is not None:
        yield text
        return
    if isinstance(value, (list, tuple)):
        items = value
    elif isinstance(value, dict):
        items = None
    else:
        mark = id(value)
        if mark in markers:
            raise ValueError("Circular reference detected")
        markers[mark] = value
        yield from _indented(str(value), level, markers)
        del markers[mark]
        return
    if not value:
        yield "{}" if items is None else "[]"
        return
    mark = id(value)
    if mark in markers:
        raise ValueError("Circular reference detected")
    markers[mark] = value
    level += 1
    newline = "\n" + "  " * level
    yield "{" + newline if items is None else "[" + newline
    first = True
    if items is None:
        for key, item in value.items():
            if isinstance(key, str):
                pass
            elif isinstance(key, float):
                key = _float(key)
            elif key is True:
                key = "true"
            elif key is False:
                key = "false"
            elif key is None:
                key = "null"
            elif isinstance(key, int):
                key = int.__repr__(key)
            else:
                raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")
            if not first:
                yield "," + newline
            first = False
            yield _c_str(key) + ": "
            yield from _indented(item, level, markers)
    else:
        for item in items:
            if not first:
                yield "," + newline
            first = False
            yield from _indented(item, level, markers)
    yield "\n" + "  " * (level - 1) + ("}" if items is None else "]")
    del markers[mark]


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
            req = loads(raw)
        except (ValueError, RecursionError) as exc:
            # RecursionError: nesting deeper than the interpreter's stack (json.loads raises it too).
            yield None, f"the request is not JSON: {exc}"
            continue
        if not isinstance(req, dict) or not isinstance(req.get("name"), str):
            yield None, "the request must be a JSON object with a string 'name'"
            continue
        yield req, ""
