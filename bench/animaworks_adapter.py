#!/usr/bin/env python3
"""The AnimaWorks adapter against AnimaWorks 0.15.0's own loader, side by side (docs/animaworks.md, "The adapter").

  bench/animaworks_adapter.py [--bin PATH] [--modules N] [--rounds R] [--calls C]

Needs bench/.venv (bench/setup-legacy-venv). A fresh world with N personal modules written as the tool-creator
guide teaches (two schemas, a dispatch, an EXECUTION_PROFILE), and a virtualenv of its own that sees
bench/.venv's packages, with the adapter installed (`animaworks install`).

1. `load_all_tool_schemas` (what every agent cycle calls) in AnimaWorks' interpreter: the original (the same
   virtualenv with ANIMAWORKS_TOOL_ADAPTER=off, which leaves the hook inert) against the adapter on a warm cache,
   R rounds interleaved, each round a fresh interpreter timing 20 calls after one warm-up; the adapter's first
   call in a fresh interpreter (the runner's cache warm, the adapter's memory cold) too. Medians.
2. One dispatched call: `ExternalToolDispatcher._dispatch_from_files` through the adapter against the same request
   written by hand to a `use-tool --serve` of the same runner, interleaved call by call, C calls. Medians.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_VENV = ROOT / "bench/.venv"

MODULE = '''"""Tool {i}: a personal tool as the guide writes it."""
import json
import logging
from typing import Any

logger = logging.getLogger(__name__)

EXECUTION_PROFILE = {{"echo": {{"expected_seconds": 5}}, "wipe": {{"gated": True, "expected_seconds": 5}}}}


def get_tool_schemas() -> list[dict[str, Any]]:
    return [
        {{"name": "tool_{i:02}_echo", "description": "Echo the text back.",
         "input_schema": {{"type": "object", "properties": {{"text": {{"type": "string"}}}}, "required": ["text"]}}}},
        {{"name": "tool_{i:02}_wipe", "description": "Wipe it.", "input_schema": {{"type": "object", "properties": {{}}}}}},
    ]


def dispatch(name: str, args: dict[str, Any]) -> Any:
    args.pop("anima_dir", None)
    if name.endswith("_echo"):
        return {{"echo": args["text"]}}
    return "wiped"
'''

SCHEMAS = r'''
import json, os, statistics, sys, time
from pathlib import Path
anima = Path(sys.argv[1])
t0 = time.perf_counter()
from core.integrations import discover_personal_tools
from core.tooling.schemas import load_all_tool_schemas
tools = discover_personal_tools(anima)
t1 = time.perf_counter()
first = load_all_tool_schemas(tool_registry=[], personal_tools=tools)
t2 = time.perf_counter()
times = []
for _ in range(20):
    t = time.perf_counter()
    got = load_all_tool_schemas(tool_registry=[], personal_tools=tools)
    times.append(time.perf_counter() - t)
assert got == first and len(got) == 2 * len(tools), (len(got), len(tools))
print(json.dumps({"first": t2 - t1, "warm": statistics.median(times), "schemas": len(got)}))
sys.stdout.flush()
os._exit(0)
'''

DISPATCH = r'''
import json, os, statistics, subprocess, sys, time
from pathlib import Path
anima, runner, data, calls = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
from core.integrations import discover_personal_tools
from core.tooling.dispatch import ExternalToolDispatcher
d = ExternalToolDispatcher([], discover_personal_tools(anima))
serve = subprocess.Popen([runner, "--data-dir", data, "--anima-dir", str(anima), "--python", sys.executable,
                          "use-tool", "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def direct(i):
    serve.stdin.write((json.dumps({"id": i, "name": "tool_00_echo", "args": {"text": "hi"}}) + "\n").encode())
    serve.stdin.flush()
    return json.loads(serve.stdout.readline())["result"]
def adapter(i):
    return d._dispatch_from_files("tool_00_echo", {"text": "hi", "anima_dir": str(anima)})
want = '{\n  "echo": "hi"\n}'
for i in range(20):  # warm-up: workers started on both sides
    assert direct(i) == want and adapter(i) == want
a, b = [], []
for i in range(calls):
    for f, out in ((adapter, a), (direct, b)) if i % 2 else ((direct, b), (adapter, a)):
        t = time.perf_counter()
        f(i)
        out.append(time.perf_counter() - t)
print(json.dumps({"adapter": statistics.median(a), "serve": statistics.median(b)}))
sys.stdout.flush()
os._exit(0)
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "target/release/animaworks-tool"))
    ap.add_argument("--modules", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=400)
    a = ap.parse_args()
    if not (BENCH_VENV / "bin/python").exists():
        sys.exit("bench/.venv is missing: run bench/setup-legacy-venv")
    runner = os.path.abspath(a.bin)
    with tempfile.TemporaryDirectory(prefix="awt-bench-adapter-") as tmp:
        tmp = Path(tmp)
        data, anima = tmp / "data", tmp / "data/animas/alice"
        (anima / "tools").mkdir(parents=True)
        (anima / "permissions.json").write_text("{}")
        for i in range(a.modules):
            (anima / "tools" / f"tool_{i:02}.py").write_text(MODULE.format(i=i))
        venv = tmp / "venv"
        subprocess.run([BENCH_VENV / "bin/python", "-m", "venv", "--without-pip", venv], check=True)
        site = subprocess.run([venv / "bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        bench_site = subprocess.run([BENCH_VENV / "bin/python", "-c",
                                     "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                    check=True, capture_output=True, text=True).stdout.strip()
        Path(site, "_bench_animaworks.pth").write_text(bench_site + "\n")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "ANIMAWORKS_DATA_DIR": str(data)}
        subprocess.run([runner, "animaworks", "install", "--venv", venv], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        script = tmp / "schemas.py"
        script.write_text(SCHEMAS)

        def schemas(adapter):
            e = dict(env) if adapter else dict(env, ANIMAWORKS_TOOL_ADAPTER="off")
            out = subprocess.run([venv / "bin/python", script, anima], check=True, capture_output=True, env=e)
            return json.loads(out.stdout)

        schemas(True)  # the runner's cache: probed once
        orig, adap = [], []
        for r in range(a.rounds):
            for adapter, out in ((True, adap), (False, orig)) if r % 2 else ((False, orig), (True, adap)):
                out.append(schemas(adapter))
        o_warm = statistics.median(x["warm"] for x in orig)
        a_warm = statistics.median(x["warm"] for x in adap)
        a_first = statistics.median(x["first"] for x in adap)
        o_first = statistics.median(x["first"] for x in orig)
        print(f"load_all_tool_schemas, {a.modules} personal modules ({adap[0]['schemas']} schemas), "
              f"median of {a.rounds} interpreters x 20 calls:")
        print(f"  original               {o_warm * 1e3:8.2f} ms   (first call {o_first * 1e3:.2f} ms)")
        print(f"  adapter, warm          {a_warm * 1e3:8.3f} ms   ({o_warm / a_warm:.0f}x faster)")
        print(f"  adapter, first call    {a_first * 1e3:8.2f} ms   (the runner's cache warm, a fresh interpreter)")
        script = tmp / "dispatch.py"
        script.write_text(DISPATCH)
        out = subprocess.run([venv / "bin/python", script, anima, runner, data, str(a.calls)], check=True,
                             capture_output=True, env=env)
        d = json.loads(out.stdout)
        print(f"one dispatched call (tool_00_echo), median of {a.calls}, interleaved:")
        print(f"  use-tool --serve       {d['serve'] * 1e3:8.3f} ms")
        print(f"  adapter                {d['adapter'] * 1e3:8.3f} ms   ({(d['adapter'] - d['serve']) * 1e3:+.3f} ms)")


if __name__ == "__main__":
    main()
