"""_wire's JSON (the C code of ``json`` called directly, and ``pretty``) against ``json`` itself: same text, same
errors, on a table of edge cases and on generated values. The shim uses it so that a legacy call need not import
the ``json`` package."""
from __future__ import annotations

import dataclasses
import enum
import json
import random
import subprocess
import sys
from typing import Any

import pytest

from conftest import SDK_SRC

sys.path.insert(0, str(SDK_SRC))
from animaworks_tool_sdk import _wire  # noqa: E402


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Text(str):
    pass


class Num(float):
    def __repr__(self) -> str:
        return "Num!"


class Whole(int):
    def __repr__(self) -> str:
        return "Whole!"


class Listish(list):
    pass


class Dictish(dict):
    pass


class Odd:
    def __str__(self) -> str:
        return "odd \u00e9 \"quoted\"\n"


@dataclasses.dataclass
class Point:
    x: int
    y: list


def _circular() -> Any:
    a: list = [1]
    a.append({"back": a})
    return a


EDGE: list[Any] = [
    None, True, False, 0, -1, 2**70, -(2**70), 0.0, -0.0, 1.5, 1e300, 1e-300, 3.141592653589793,
    float("nan"), float("inf"), float("-inf"),
    "", "a", "é ü 日本 🎉", "\x00\x01\x1f\x7f", "\"\\/\b\f\n\r\t", "\ud800 lone surrogate", "\u2028\u2029",
    [], {}, (), [[]], [{}], {"a": []}, {"a": {}}, [1, [2, [3, [4, {"x": (5, 6)}]]]],
    {"k": "v", "n": None, "t": True, "f": False, "i": 1, "fl": 2.5, "l": [1, "2", None], "d": {"x": {"y": []}}},
    {1: "int key", 2.5: "float key", True: "bool key", None: "none key", float("nan"): "nan key", "s": 0},
    {False: 0, float("inf"): 1, -0.0: 2, 10**30: 3},
    {("tuple", "key"): 1}, {frozenset(): 1}, {Colour.RED: 1},
    Colour.RED, Level.HIGH, [Level.HIGH], {"lvl": Level.HIGH}, Text("sub"), Num(1.25), Whole(7), {Text("k"): Whole(2)},
    Listish([1, 2]), Dictish(a=1), {"nested": Listish([Dictish(b=[])])},
    Odd(), [Odd(), {"o": Odd()}], {1, 2}, frozenset(), b"bytes", bytearray(b"x"), Point(1, [2]), object,
    {"big": "x" * 5000}, list(range(50)), _circular(), {"self": None},
]


def _outcome(f: Any, value: Any) -> tuple[str, str]:
    try:
        return "ok", f(value)
    except Exception as exc:  # the error's type and text are part of what must match
        return type(exc).__name__, str(exc)


def _json_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_wire._json_default)


def _json_pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _generated(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(12 if depth < 4 else 7)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-(2**64), 2**64)
    if kind == 2:
        return rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-300, 300), float("nan"), -0.0])
    if kind in (3, 4):
        return "".join(chr(rng.choice([rng.randrange(0, 0x80), rng.randrange(0x80, 0x3000), rng.randrange(0x1F300, 0x1F600),
                                       rng.randrange(0xD800, 0xE000)])) for _ in range(rng.randrange(12)))
    if kind == 5:
        return Odd()
    if kind == 6:
        return rng.choice([Colour.RED, Level.HIGH, b"\xff\x00", {3, 4}])
    if kind in (7, 8):
        return [_generated(rng, depth + 1) for _ in range(rng.randrange(5))]
    if kind == 9:
        return tuple(_generated(rng, depth + 1) for _ in range(rng.randrange(4)))
    keys = [rng.choice([_generated(rng, 4) if rng.random() < 0.3 else "k%d" % rng.randrange(9), rng.randrange(5)])
            for _ in range(rng.randrange(5))]
    return {k: _generated(rng, depth + 1) for k in keys if isinstance(k, (str, int, float, bool, type(None)))}


def test_dumps_and_pretty_are_json_on_edge_cases() -> None:
    for value in EDGE:
        assert _outcome(_wire.dumps, value) == _outcome(_json_dumps, value), repr(value)
        assert _outcome(_wire.pretty, value) == _outcome(_json_pretty, value), repr(value)


def test_dumps_and_pretty_are_json_on_generated_values() -> None:
    rng = random.Random(9)
    for _ in range(3000):
        value = _generated(rng)
        assert _outcome(_wire.dumps, value) == _outcome(_json_dumps, value), repr(value)
        assert _outcome(_wire.pretty, value) == _outcome(_json_pretty, value), repr(value)


def test_deep_nesting_is_json() -> None:
    for depth in (100, 5000):
        value: Any = []
        for _ in range(depth):
            value = [value, {"d": 1}]
        assert _outcome(_wire.pretty, value) == _outcome(_json_pretty, value)
        assert _outcome(_wire.dumps, value) == _outcome(_json_dumps, value)


LINES = [
    b'{"name":"x","args":{"a":1}}\n', b'  \t{"name": "x"}  \r\n', b"[]", b'"s"', b"1", b"-0", b"1e400", b"-1.5E-3",
    b"NaN", b"Infinity", b"-Infinity", b"true", b"null", b'{"a":1,"a":2}', b'{"\\u00e9\\ud83c\\udf89":"\\ud800"}',
    '{"é":"日本"}'.encode(), b'{"a":[1,2,{"b":null}],"c":12345678901234567890}',
    b"", b"   ", b"{", b'{"a":1} x', b'{"a":1}{"b":2}', b"{'a':1}", b'{"a":01}', b'"\x01"', b'"\t"',
    b'\xef\xbb\xbf{"a":1}', '{"a":1}'.encode("utf-16"), '{"a":1}'.encode("utf-16-le"), '{"a":1}'.encode("utf-32"),
    b'{"a":"\xff"}', b'{"a":"\xed\xa0\x80"}', b"[" * 10 + b"]" * 10, b"[1,]", b'{"a" 1}', b"\x00",
]


def test_loads_is_json() -> None:
    for raw in LINES:
        mine, theirs = _outcome(_wire.loads, raw), _outcome(json.loads, raw)
        if mine[0] == "ok" and mine == theirs:
            continue
        # NaN != NaN: compare the values' JSON instead.
        assert mine[0] == theirs[0], raw
        assert mine[0] != "ok" and mine == theirs or json.dumps(_wire.loads(raw)) == json.dumps(json.loads(raw)), raw


def test_loads_deep_nesting_is_json() -> None:
    raw = b"[" * 100000 + b"]" * 100000
    assert _outcome(_wire.loads, raw)[0] == _outcome(json.loads, raw)[0]


def test_a_request_nested_too_deep_is_answered_not_fatal() -> None:
    """A --serve worker reads request after request: one nested past the stack is an error for it, not the end."""
    import io

    stream = io.BytesIO(b"[" * 100000 + b"]" * 100000 + b"\n" + b'{"name": "x", "args": {}}\n')
    got = list(_wire.read_requests(stream))
    assert got[0][0] is None and "not JSON" in got[0][1]
    assert got[1] == ({"name": "x", "args": {}}, "")


@pytest.mark.parametrize("python", ["python3.10", "python3.12", "python3.13"])
def test_other_pythons(python: str) -> None:
    """The same checks under the other Pythons the SDK supports, where installed (the C code's signatures)."""
    import shutil

    exe = shutil.which(python)
    if exe is None:
        pytest.skip(f"optional: {python} is not installed")
    if subprocess.run([exe, "-m", "pytest", "--version"], capture_output=True).returncode != 0:
        pytest.skip(f"optional: {python} has no pytest")
    r = subprocess.run([exe, "-m", "pytest", "-q", "-W", "error", "-k", "not other_pythons", __file__],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:]
