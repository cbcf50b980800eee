#!/usr/bin/env python3
"""Benchmarks of animaworks-tool against baselines run side by side (issues 2 §8, 3 §6, 4 §7, 5 §6, 6 §5).

Usage: bench/run [call|list|stream|legacy|policy|submit|mcp|serve|all] [--runs N] [--timer hyperfine|python]

Every figure is a median. Timer: an interleaved Python loop (A, B, A, B, …) around subprocess.run, or with
--timer hyperfine, hyperfine -N where it can time the commands (each one's runs in a block). Results go to stdout as a table and to
bench/out/results.json. Standard library only.
"""
from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
AWT = TARGET / "release" / "animaworks-tool"
HELLO = TARGET / "release" / "rust-hello"
# Another build of the runner (e.g. the commit before a change, copied out of target/release) timed in the same
# interleaved loop as this one by `call`, `stream` and `legacy`: the side-by-side comparison of a change.
BASELINE = os.environ.get("BENCH_BASELINE")
OUT = BENCH / "out"
SHARED = Path(os.environ.get("ANIMAWORKS_SHARED", ROOT.parent / "shared"))
VENV = BENCH / ".venv"
GIB = 1 << 30
# The interpreter itself, not a launcher such as pyenv's shim script (which would add its own start-up to the
# bare `python3 -c pass` and to ours alike). The original's venv links to the same one.
PYTHON = os.environ.get("BENCH_PYTHON") or os.path.realpath(sys.executable)

RESULTS: list[dict] = []


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def sh(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, **kw)


# ---------------------------------------------------------------------------------------------- timing


class Case:
    """One command to time: argv, what goes on its stdin, its environment, and a command run before each run."""

    def __init__(self, label: str, argv: list[str], env: dict[str, str], stdin: str = "/dev/null", prepare: str | None = None):
        self.label, self.argv, self.env, self.stdin, self.prepare = label, argv, env, stdin, prepare


def time_cases(cases: list[Case], runs: int, warmup: int, timer: str) -> dict[str, float]:
    """Median wall time in ms of each case. The Python loop interleaves the cases (A, B, A, B, …) so that drift
    of a shared machine hits every case alike; hyperfine runs each case's runs in a block."""
    for c in cases:  # a case that fails would time an error path: refuse to report it
        if c.prepare:
            subprocess.run(c.prepare, shell=True, check=True)
        with open(c.stdin, "rb") as f:
            p = subprocess.run(c.argv, stdin=f, env=c.env, capture_output=True)
        if p.returncode != 0:
            raise SystemExit(f"bench: {c.label} failed (exit {p.returncode}): {p.stdout[-400:]!r} {p.stderr[-400:]!r}")
    if timer == "hyperfine":
        why = _hyperfine_unfit(cases)
        if not why:
            return _hyperfine(cases, runs, warmup)
        log(f"hyperfine cannot time these side by side ({why}); timing with the Python loop")
    return _python_loop(cases, runs, warmup)


def _hyperfine_version() -> tuple[int, ...]:
    out = subprocess.run(["hyperfine", "--version"], capture_output=True, text=True).stdout
    return tuple(int(x) for x in re.findall(r"\d+", out)[:3])


def _hyperfine_unfit(cases: list[Case]) -> str:
    if any(c.env != cases[0].env for c in cases):
        return "the commands need different environments"
    stdins = {c.stdin for c in cases}
    if len(stdins) > 1:
        return "the commands need different stdin; hyperfine's --input is one for all"
    if stdins != {"/dev/null"} and _hyperfine_version() < (1, 16):
        return "hyperfine < 1.16 has no --input"
    return ""


def _hyperfine(cases: list[Case], runs: int, warmup: int) -> dict[str, float]:
    """hyperfine without a shell (-N), so nothing but the command itself is timed."""
    OUT.mkdir(exist_ok=True)
    export = OUT / "hyperfine.json"
    argv = ["hyperfine", "-N", "--style", "basic", "--runs", str(runs), "--warmup", str(warmup), "--export-json", str(export)]
    if cases[0].stdin != "/dev/null":
        argv += ["--input", cases[0].stdin]
    if any(c.prepare for c in cases):
        for c in cases:
            argv += ["--prepare", c.prepare or "true"]
    for c in cases:
        argv += ["--command-name", c.label, shlex.join(c.argv)]
    subprocess.run(argv, check=True, env=cases[0].env, stdout=sys.stderr)
    data = json.loads(export.read_text())
    return {r["command"]: r["median"] * 1000 for r in data["results"]}


# Median CPU time (user + system, ms) of each case of the last Python-loop timing: the process and every process
# it reaped (wait4's rusage). Less disturbed than wall time by other work on a shared machine.
CPU_MS: dict[str, float] = {}


def _python_loop(cases: list[Case], runs: int, warmup: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {c.label: [] for c in cases}
    cpu: dict[str, list[float]] = {c.label: [] for c in cases}
    for i in range(warmup + runs):
        for c in cases:
            if c.prepare:
                subprocess.run(c.prepare, shell=True, check=True)
            with open(c.stdin, "rb") as f:
                t0 = time.perf_counter_ns()
                p = subprocess.Popen(c.argv, stdin=f, env=c.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                _, status, ru = os.wait4(p.pid, 0)
                t = (time.perf_counter_ns() - t0) / 1e6
                p.returncode = os.waitstatus_to_exitcode(status)
            if p.returncode != 0:
                raise SystemExit(f"bench: {c.label} failed on run {i} (exit {p.returncode})")
            if i >= warmup:
                samples[c.label].append(t)
                cpu[c.label].append((ru.ru_utime + ru.ru_stime) * 1000)
    for c in cases:
        s = samples[c.label]
        log(f"{c.label}: median {statistics.median(s):.2f} ms, min {min(s):.2f}, max {max(s):.2f} ({len(s)} runs); "
            f"CPU median {statistics.median(cpu[c.label]):.2f} ms")
    CPU_MS.clear()
    CPU_MS.update({k: statistics.median(v) for k, v in cpu.items()})
    return {k: statistics.median(v) for k, v in samples.items()}


def record(bench: str, what: str, value: str, baseline: str, ratio: str, target: str, met: bool | None, **extra) -> None:
    row = {"bench": bench, "what": what, "value": value, "baseline": baseline, "ratio": ratio, "target": target,
           "met": met, **extra}
    RESULTS.append(row)
    verdict = {True: "met", False: "MISSED", None: "-"}[met]
    log(f"RESULT {bench} | {what} | {value} | {baseline} | {ratio} | {target} | {verdict}")


# ---------------------------------------------------------------------------------------------- worlds


class World:
    """A temporary AnimaWorks layout: data dir (common tier, cache) and an anima dir (personal tier)."""

    def __init__(self, root: Path, name: str = "alice"):
        self.root = root
        self.data = root / "data"
        self.anima = self.data / "animas" / name
        self.common = self.data / "common_tools"
        self.personal = self.anima / "tools"
        self.cache = self.data / "cache" / "animaworks-tool"
        for d in (self.common, self.personal, self.data / "core_tools"):
            d.mkdir(parents=True, exist_ok=True)

    def env(self, **more: str) -> dict[str, str]:
        e = {k: v for k, v in os.environ.items() if not k.startswith("ANIMAWORKS_")}
        e.update(ANIMAWORKS_DATA_DIR=str(self.data), ANIMAWORKS_ANIMA_DIR=str(self.anima))
        e.update(more)
        return e


ROOTS: list[Path] = []


def new_root(tag: str) -> Path:
    """A temporary folder, removed at exit unless BENCH_KEEP is set (to look at a world after a run)."""
    p = Path(tempfile.mkdtemp(prefix=f"awt-bench-{tag}-"))
    ROOTS.append(p)
    return p


def remove_roots() -> None:
    if not os.environ.get("BENCH_KEEP"):
        for p in ROOTS:
            shutil.rmtree(p, ignore_errors=True)


def awt(world: World, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(AWT), *args], env=world.env(), capture_output=True, text=True, **kw)


# ---------------------------------------------------------------------------------------------- issue 2 §8


def bench_call(runs: int, timer: str) -> None:
    """A compiled tool's call through the runner vs the same binary started directly with the same request."""
    w = World(new_root("call"))
    # The runner's own cost: the personal tier unconfined (the sandbox's share is 13§4, `bench/run sandbox`).
    (w.data / "animaworks-tool.json").write_text(json.dumps({"sandbox": {"personal": "off"}}))
    tool = w.personal / "rust-hello"
    shutil.copy2(HELLO, tool)
    schemas = json.loads(sh([str(tool), "--schemas"], capture_output=True).stdout)
    schema_name = next(a.get("schema_name") or f"rust-hello_{a['name']}" for a in schemas["actions"] if a["name"] == "greet")
    warm = awt(w, "call", "rust-hello", "greet", "--json", '{"who":"Ada"}')
    assert warm.returncode == 0, warm
    log(f"runner answer: {warm.stdout.strip()}")
    # The request line the runner writes (protocol.md §4), with the same context fields.
    req = {"name": schema_name, "args": {"who": "Ada", "language": "en", "times": 1},
           "context": {"protocol": 1, "call_id": "c-000000000001", "tool": "rust-hello", "action": "greet",
                       "anima_name": "alice", "anima_dir": str(w.anima), "data_dir": str(w.data), "timeout_s": 60.0,
                       "deadline_ms": int(time.time() * 1000) + 3_600_000}}
    req_file = w.root / "request.json"
    req_file.write_text(json.dumps(req) + "\n")
    direct = sh([str(tool)], stdin=open(req_file, "rb"), capture_output=True).stdout.decode().strip()
    log(f"direct answer: {direct}")
    env = w.env()
    cases = [
        Case("direct", [str(tool)], env, stdin=str(req_file)),
        # The same stdin for both (the runner does not read it), so hyperfine >= 1.16 can time them together.
        Case("runner", [str(AWT), "call", "rust-hello", "greet", "--json", '{"who":"Ada"}'], env, stdin=str(req_file)),
        Case("runner --version", [str(AWT), "--version"], env, stdin=str(req_file)),
    ]
    if BASELINE:
        cases.append(Case("baseline runner", [BASELINE, "call", "rust-hello", "greet", "--json", '{"who":"Ada"}'],
                          {**env, "ANIMAWORKS_TOOL_CACHE_DIR": str(w.root / "baseline-cache")}, stdin=str(req_file)))
    m = time_cases(cases, runs, 20, timer)
    ratio, diff = m["runner"] / m["direct"], m["runner"] - m["direct"]
    record("2§8a", "compiled tool call via runner (rust-hello greet)", f"{m['runner']:.2f} ms", f"{m['direct']:.2f} ms direct",
           f"{ratio:.2f}x, +{diff:.2f} ms", "<=1.5x and <=+1.5 ms", ratio <= 1.5 and diff <= 1.5)
    # The same comparison with a tool that does nothing (no input schema, no events): the runner's own share.
    build_tiny(w.personal / "tiny", {"protocol": 1, "actions": [{"name": "go"}]})
    tiny_req = w.root / "tiny-request.json"
    tiny_req.write_text(json.dumps({**req, "name": "tiny_go", "args": {},
                                    "context": {**req["context"], "tool": "tiny", "action": "go"}}) + "\n")
    assert awt(w, "call", "tiny", "go", "--json", "{}").returncode == 0
    t = time_cases([Case("direct tiny", [str(w.personal / "tiny")], env, stdin=str(tiny_req)),
                    Case("runner tiny", [str(AWT), "call", "tiny", "go", "--json", "{}"], env, stdin=str(tiny_req))],
                   runs, 20, timer)
    tr, td = t["runner tiny"] / t["direct tiny"], t["runner tiny"] - t["direct tiny"]
    record("2§8a", "same with a do-nothing compiled tool (no input schema)", f"{t['runner tiny']:.2f} ms",
           f"{t['direct tiny']:.2f} ms direct", f"{tr:.2f}x, +{td:.2f} ms", "issue 9 §3: <= +1.0 ms", td <= 1.0)
    if BASELINE:
        b = m["baseline runner"]
        record("2§8a", "the same call with the baseline build (BENCH_BASELINE), same loop", f"{b:.2f} ms",
               f"{m['direct']:.2f} ms direct", f"{b / m['direct']:.2f}x, +{b - m['direct']:.2f} ms; this build "
               f"{m['runner'] - b:+.2f} ms", "reported", None)
    record("2§8a", "for scale: the runner starting and exiting (--version)", f"{m['runner --version']:.2f} ms",
           f"{m['direct']:.2f} ms direct tool call", f"+{m['runner --version'] - m['direct']:.2f} ms", "reported (no target)", None)


def make_tiny_tools(folder: Path, n: int) -> None:
    src = (BENCH / "tools" / "tiny_tool.sh").read_text()
    for i in range(n):
        (folder / f"t{i:03d}.sh").write_text(src)


def bench_list(runs: int, timer: str) -> None:
    w = World(new_root("list"))
    make_tiny_tools(w.common, 200)
    out = awt(w, "tools", "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    n = len(listed["tools"] if isinstance(listed, dict) else listed)
    assert n == 200, f"list shows {n} tools, not 200"
    env = w.env()
    warm = time_cases([Case("list-warm", [str(AWT), "tools"], env)], runs, 5, timer)["list-warm"]
    record("2§8b", "list, 200 bash tools, warm cache", f"{warm:.2f} ms", "-", "-", "<=10 ms", warm <= 10)
    cold_runs = max(5, runs // 10)
    prep = f"rm -rf {shlex.quote(str(w.cache))}"
    cold = time_cases([Case("list-cold", [str(AWT), "tools"], env, prepare=prep)], cold_runs, 1, timer)["list-cold"]
    one = time_cases([Case("one-probe", ["bash", str(w.common / "t000.sh"), "--schemas"], env)], runs, 5, timer)["one-probe"]
    record("2§8b", "list, 200 bash tools, cold cache (200 probes)", f"{cold:.0f} ms ({cold / 200:.2f} ms a tool)",
           f"{one:.2f} ms one `bash t.sh --schemas` alone", f"{cold / (200 * one):.2f}x of 200 such probes in series",
           "reported (no target)", None)
    # Parallelism, shown where it matters: tools whose --schemas takes 50 ms. In series that is >= 10 s.
    slow = World(new_root("list-slow"))
    src = (BENCH / "tools" / "tiny_tool.sh").read_text().replace('then\n', 'then\n  sleep 0.05\n', 1)
    assert "sleep 0.05" in src
    for i in range(200):
        (slow.common / f"t{i:03d}.sh").write_text(src)
    prep = f"rm -rf {shlex.quote(str(slow.cache))}"
    t = time_cases([Case("list-cold-slow", [str(AWT), "tools"], slow.env(), prepare=prep)], 3, 0, timer)["list-cold-slow"]
    conc = 200 * 50 / t
    record("2§8b", "list, cold cache, 200 tools whose --schemas takes 50 ms", f"{t:.0f} ms",
           "10000 ms = 200 x 50 ms in series", f"{conc:.1f} probes at once on average",
           "probes in parallel", conc > 1.5)


STREAM_TOOL = """#!/usr/bin/env bash
# Streams {lines} progress events ({bytes} bytes), then the result.
if [ "${{1-}}" = "--schemas" ]; then
  echo '{{"protocol":1,"events":true,"actions":[{{"name":"emit","profile":{{"timeout_s":3600}}}}]}}'
  exit 0
fi
read -r _ || true
yes '{{"type":"progress","progress":1}}' | head -n {lines}
echo '{{"type":"result","result":"done"}}'
"""


def peak_rss(argv: list[str], env: dict[str, str], stdout, stderr) -> tuple[float, int, int]:
    """Run argv under /usr/bin/time -v; poll the runner's own VmHWM. Returns (seconds, time's max RSS KiB —
    the largest of the runner and the processes it reaped —, the runner's own VmHWM KiB as last seen)."""
    fmt_file = OUT / "time-v.txt"
    t0 = time.perf_counter()
    p = subprocess.Popen(["/usr/bin/time", "-v", "-o", str(fmt_file), *argv], env=env, stdin=subprocess.DEVNULL,
                         stdout=stdout, stderr=stderr)
    hwm = 0
    child_pid = None
    while p.poll() is None:
        if child_pid is None:
            try:
                kids = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
                child_pid = int(kids[0]) if kids else None
            except OSError:
                pass
        if child_pid:
            try:
                m = re.search(r"VmHWM:\s+(\d+)", Path(f"/proc/{child_pid}/status").read_text())
                hwm = max(hwm, int(m.group(1))) if m else hwm
            except OSError:
                pass
        time.sleep(0.02)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"bench: {argv} failed with exit {p.returncode}: {fmt_file.read_text()[-400:]}")
    maxrss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", fmt_file.read_text()).group(1))
    return dt, maxrss, hwm


def bench_stream(runs: int, timer: str) -> None:
    total = int(os.environ.get("BENCH_STREAM_BYTES", GIB))
    line = b'{"type":"progress","progress":1}\n'
    lines = total // len(line)
    w = World(new_root("stream"))
    tool = w.personal / "stream.sh"
    tool.write_text(STREAM_TOOL.format(lines=lines, bytes=lines * len(line)))
    OUT.mkdir(exist_ok=True)
    env = w.env()
    mib = lines * len(line) / (1 << 20)
    # Correctness first: the runner must end with the result, or the figures would time an error path.
    r = subprocess.run(f"{shlex.quote(str(AWT))} call stream emit --events | tail -n 1", shell=True, env=env,
                       capture_output=True, text=True)
    assert r.stdout.strip().endswith('"done"}') or '"result"' in r.stdout, (r.stdout, r.stderr[-400:])
    runs = int(os.environ.get("BENCH_STREAM_RUNS", 3))
    cases = [
        ("cat", f"bash {shlex.quote(str(tool))} < /dev/null | cat > /dev/null"),
        ("runner --events", f"{shlex.quote(str(AWT))} call stream emit --events > /dev/null"),
        ("runner (no --events)", f"{shlex.quote(str(AWT))} call stream emit > /dev/null 2> /dev/null"),
    ]
    if BASELINE:
        cases.append(("baseline --events", f"{shlex.quote(BASELINE)} call stream emit --events > /dev/null"))
        cases.append(("baseline (no --events)", f"{shlex.quote(BASELINE)} call stream emit > /dev/null 2> /dev/null"))
    times: dict[str, list[float]] = {k: [] for k, _ in cases}
    for _ in range(runs):  # interleaved; each run is seconds long, so spawn overhead does not matter
        for label, cmd in cases:
            t0 = time.perf_counter()
            subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], env=env, check=True)
            times[label].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        log(f"{k}: {[round(x, 2) for x in v]} s")
    for label in [k for k, _ in cases if k != "cat"]:
        record("2§8c", f"throughput, 1 GiB of events, {label}", f"{mib / med[label]:.0f} MiB/s ({med[label]:.2f} s)",
               f"{mib / med['cat']:.0f} MiB/s through cat ({med['cat']:.2f} s)", f"{med['cat'] / med[label]:.2f} of cat",
               "reported (no target)", None)
    for label, argv, err in (("--events", ["call", "stream", "emit", "--events"], subprocess.DEVNULL),
                             ("no --events", ["call", "stream", "emit"], subprocess.DEVNULL)):
        _, maxrss, hwm = peak_rss([str(AWT), *argv], env, subprocess.DEVNULL, err)
        record("2§8c", f"peak RSS streaming 1 GiB, {label}", f"{hwm / 1024:.1f} MB runner VmHWM",
               f"{maxrss / 1024:.1f} MB /usr/bin/time max RSS (largest of runner and its reaped children)", "-",
               "< 32 MB", max(hwm, maxrss) < 32 * 1024)


# ---------------------------------------------------------------------------------------------- issue 3 §6


def original_ok() -> bool:
    return (VENV / "bin" / "animaworks-tool").exists()


def bench_legacy(runs: int, timer: str) -> None:
    fixtures = SHARED / "fixtures" / "legacy_tools"
    if not fixtures.is_dir():
        log(f"legacy: skipped, {fixtures} is absent (set ANIMAWORKS_SHARED)")
        return
    w = World(new_root("legacy"))
    for name in ("cli_only_tool.py", "weather_tool.py"):
        shutil.copy2(fixtures / name, w.personal / name)
    python = PYTHON
    env = w.env(ANIMAWORKS_PYTHON=python)
    argv = ["cli_only_tool", "greet", "--name", "Ada", "-j"]
    ours = [str(AWT), *argv]
    outs = subprocess.run(ours, env=env, capture_output=True, text=True)
    assert outs.returncode == 0 and "hello, Ada" in outs.stdout, outs
    call = ["call", "weather_tool", "forecast", "--json", '{"city":"tokyo"}']
    # The same call with the personal tier unconfined: the sandbox's share (13§4) apart from the shim's.
    wu = World(new_root("legacy-unconfined"))
    (wu.data / "animaworks-tool.json").write_text(json.dumps({"sandbox": {"personal": "off"}}))
    shutil.copy2(fixtures / "weather_tool.py", wu.personal / "weather_tool.py")
    uenv = wu.env(ANIMAWORKS_PYTHON=python)
    assert subprocess.run([str(AWT), *call], env=uenv, capture_output=True).returncode == 0
    cases = [Case("python3 -c pass", [python, "-c", "pass"], env),
             Case("ours cli_main", ours, env),
             Case("ours call weather_tool", [str(AWT), *call], env),
             Case("ours call weather_tool, unconfined", [str(AWT), *call], uenv)]
    benv = None
    if BASELINE:
        # Its own cache: a schema cache entry names the shim that wrote it, so two builds sharing one would probe
        # the module again on every call.
        benv = {**env, "ANIMAWORKS_TOOL_CACHE_DIR": str(w.root / "baseline-cache")}
        for label, args in (("baseline cli_main", argv), ("baseline call weather_tool", call)):
            assert subprocess.run([BASELINE, *args], env=benv, capture_output=True).returncode == 0, label
            cases.append(Case(label, [BASELINE, *args], benv))
    # The shim alone, without the runner: `python3 <shim> weather_tool.py` with a request on stdin, as the runner
    # starts it but unconfined. PYTHONDONTWRITEBYTECODE=1 as for a sandboxed call, which cannot write byte code:
    # the shim then has only what the runner compiled for it.
    request = w.root / "request.json"
    request.write_text(json.dumps({"name": "weather_tool_forecast", "args": {"city": "tokyo"},
                                   "context": {"anima_dir": str(w.anima), "action": "forecast"}}) + "\n")
    senv = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    for label, cache in (("ours", w.cache), ("baseline", Path(benv["ANIMAWORKS_TOOL_CACHE_DIR"]) if benv else None)):
        starts = sorted(cache.glob("pysdk-*/animaworks_tool_sdk/_start.py")) if cache else []
        if starts:
            wait_compiled(starts[0].parent)
            cases.append(Case(f"{label} shim alone, call weather_tool", [python, str(starts[0]), str(w.personal / "weather_tool.py")],
                              senv, stdin=str(request)))
    if original_ok():
        orig = [str(VENV / "bin" / "animaworks-tool"), *argv]
        outo = subprocess.run(orig, env=env, capture_output=True, text=True)
        assert outo.returncode == 0 and "hello, Ada" in outo.stdout, outo
        cases.insert(1, Case("original cli_main", orig, env))
    else:
        log("legacy: the original is not installed; run bench/setup-legacy-venv (needs PyPI)")
    m = time_cases(cases, max(10, runs // 5), 3, timer)  # the original takes most of a second per run
    if "original cli_main" in m:
        sp = m["original cli_main"] / m["ours cli_main"]
        record("3§6", "legacy module's cli_main (cli_only_tool greet -j), ANIMAWORKS_ANIMA_DIR set", f"{m['ours cli_main']:.1f} ms",
               f"{m['original cli_main']:.1f} ms AnimaWorks 0.15.0 animaworks-tool", f"{sp:.1f}x faster", ">=5x faster", sp >= 5)
    bare = m["python3 -c pass"]
    # Issue 9 §3's target (<= +3 ms over a bare Python) is the runner's and the shim's cost: the unconfined call.
    held = "ours call weather_tool, unconfined"
    for label in [c.label for c in cases if c.label.startswith(("ours", "baseline"))]:
        d = m[label] - bare
        record("3§6", f"shim cost: {label} over bare python3 -c pass", f"{m[label]:.1f} ms", f"{bare:.1f} ms python3 -c pass",
               f"{d:+.1f} ms ({m[label] / bare:.2f}x)", *(("issue 9 §3: <= +3 ms", d <= 3.0) if label == held
                                                         else ("reported (no target)", None)))
    bench_legacy_list(runs, timer, fixtures)


def wait_compiled(pkg: Path) -> None:
    """Until the runner's background compile of its shim (pyshim.rs) is done, when that build does one."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not list(pkg.glob("__pycache__/.compiled-*")):
        if not (pkg / "__pycache__").exists() and time.monotonic() > deadline - 15:
            return  # a build that writes no byte code
        time.sleep(0.05)


COUNTING_PYTHON = """#!/bin/sh
# Counts every start of Python by the runner, then runs the real one.
echo "$*" >> {log}
exec {python} "$@"
"""


def bench_legacy_list(runs: int, timer: str, fixtures: Path) -> None:
    w = World(new_root("legacy-list"))
    # Unconfined: the sandbox would not let the counting script below write its log or exec the real Python.
    (w.data / "animaworks-tool.json").write_text(json.dumps({"sandbox": {"common": "off"}}))
    src = (fixtures / "weather_tool.py").read_text()
    for i in range(200):
        (w.common / f"w{i:03d}.py").write_text(src.replace("weather_tool_forecast", f"w{i:03d}_forecast"))
    starts = w.root / "python-starts.log"
    fake = w.root / "counting-python"
    fake.write_text(COUNTING_PYTHON.format(log=shlex.quote(str(starts)), python=shlex.quote(PYTHON)))
    fake.chmod(0o755)
    env = w.env(ANIMAWORKS_PYTHON=str(fake))
    r = subprocess.run([str(AWT), "tools", "--json"], env=env, capture_output=True, text=True)
    listed = json.loads(r.stdout)
    n = len(listed["tools"] if isinstance(listed, dict) else listed)
    # Counted: starts of the shim (`<shim> <tool> --schemas`), not the runner's one-off compile of the shim.
    cold_starts = sum(" --schemas" in line for line in starts.read_text().splitlines()) if starts.exists() else 0
    starts.write_text("")
    warm = time_cases([Case("list-200-legacy-warm", [str(AWT), "tools"], env)], runs, 3, timer)["list-200-legacy-warm"]
    warm_starts = len(starts.read_text().splitlines())
    record("3§6", f"list, 200 legacy .py modules, warm cache ({n} listed)", f"{warm_starts} Python starts over all warm runs",
           f"{cold_starts} Python starts on the cold list", "-", "0 Python starts when warm", warm_starts == 0 and n == 200,
           warm_ms=warm)
    record("3§6", "list, 200 legacy .py modules, warm cache: time", f"{warm:.2f} ms", "-", "-", "reported (cf. <=10 ms of 2§8b)", None)


# ---------------------------------------------------------------------------------------------- issue 4 §7


def bench_sandbox(runs: int, timer: str) -> None:
    """Issue 13 §4: the same tiny compiled personal tool called unconfined, sandboxed (Landlock, seccomp,
    capabilities dropped, PID and mount namespaces), and sandboxed without the namespaces, side by side."""
    spec = {"protocol": 1, "actions": [{"name": "go", "profile": {"sandbox": {"read": ["$ANIMA_DIR"]}}}]}
    # The same tool declaring a host list: with namespaces, a network namespace and the runner's proxy too.
    hosts = {"protocol": 1, "actions": [{"name": "go", "profile": {"sandbox": {"read": ["$ANIMA_DIR"], "net": ["example.com:443"]}}}]}
    undeclared = {"protocol": 1, "actions": [{"name": "go"}]}
    worlds = {
        "unconfined": ({"sandbox": {"personal": "off"}}, spec),
        "unconfined, rlimits only": ({"sandbox": {"personal": "off"}, "limits": {"cgroups": False}}, spec),
        "sandboxed": ({}, spec),
        # The same, memory and processes not in a cgroup of the call (memory as RLIMIT_DATA, processes unbounded).
        "sandboxed, rlimits only": ({"limits": {"cgroups": False}}, spec),
        "sandboxed, no namespaces": ({"sandbox": {"pid_namespace": False}}, spec),
        "sandboxed, host list": ({}, hosts),
        # Issue 20: what an AnimaWorks module gets (nothing declared): its anima dir, shared/, tmp/ and the cwd
        # writable (noexec mounts, read-only binds of the runner's files), the deny list hidden, the network
        # through the proxy.
        "sandboxed, undeclared": ({}, undeclared),
    }
    cases = []
    for label, (settings, schemas) in worlds.items():
        w = World(new_root("sandbox"))
        (w.data / "animaworks-tool.json").write_text(json.dumps(settings))
        (w.anima / "permissions.json").write_text(json.dumps({"sandbox": {"net": ["tiny"]}}))
        build_tiny(w.personal / "tiny", schemas)
        r = awt(w, "call", "tiny", "go", "--json", "{}")
        assert r.returncode == 0, r
        audit = json.loads((w.anima / "state" / "tool_audit.jsonl").read_text().splitlines()[-1])
        log(f"{label}: audit sandbox {audit.get('sandbox')}")
        cases.append(Case(label, [str(AWT), "call", "tiny", "go", "--json", "{}"], w.env()))
        if BASELINE and label in ("unconfined", "unconfined, rlimits only", "sandboxed", "sandboxed, rlimits only", "sandboxed, host list", "sandboxed, undeclared"):
            cases.append(Case(f"baseline {label}", [BASELINE, "call", "tiny", "go", "--json", "{}"], w.env()))
    m = time_cases(cases, runs, 20, timer)
    cpu = dict(CPU_MS)
    for label in ("sandboxed", "sandboxed, rlimits only", "sandboxed, no namespaces"):
        # Each over the unconfined call with the same limits: the rlimits-only world over the unconfined one
        # without a cgroup, the others over the unconfined call with its cgroup.
        base = "unconfined, rlimits only" if label == "sandboxed, rlimits only" else "unconfined"
        d = m[label] - m[base]
        extra = {}
        if label in cpu:
            extra["cpu"] = f"CPU {cpu[label]:.2f} ms, {base} {cpu[base]:.2f} ms: {cpu[label] - cpu[base]:+.2f} ms"
            log(f"13§4 {label}: {extra['cpu']}")
        record("13§4", f"a call {label} (tiny compiled personal tool)", f"{m[label]:.2f} ms",
               f"{m[base]:.2f} ms {base}", f"{d:+.2f} ms", "<= +1 ms", d <= 1.0, **extra)
    # A host list has no target of its own (docs/sandbox.md, "Cost"): reported over the unconfined call and the sandboxed one.
    d = m["sandboxed, host list"] - m["unconfined"]
    record("13§2", "a call sandboxed with a host list (tiny compiled personal tool)",
           f"{m['sandboxed, host list']:.2f} ms", f"{m['unconfined']:.2f} ms unconfined", f"+{d:.2f} ms",
           "reported", None)
    d = m["sandboxed, undeclared"] - m["unconfined"]
    record("20", "a call sandboxed as an undeclared (AnimaWorks) tool: writes, deny-list mounts, proxy",
           f"{m['sandboxed, undeclared']:.2f} ms", f"{m['unconfined']:.2f} ms unconfined", f"+{d:.2f} ms",
           "reported", None)
    d = m["sandboxed, host list"] - m["sandboxed"]
    record("13§2", "a host list enforced (network namespace, proxy) over the same call sandboxed",
           f"{m['sandboxed, host list']:.2f} ms", f"{m['sandboxed']:.2f} ms sandboxed", f"{d:+.2f} ms", "reported", None)
    if BASELINE:
        for label, base in (("sandboxed", "unconfined"), ("sandboxed, rlimits only", "unconfined, rlimits only")):
            b, bu = m[f"baseline {label}"], m[f"baseline {base}"]
            cpu_note = ""
            if f"baseline {label}" in cpu:
                cpu_note = f"; CPU {cpu[f'baseline {label}'] - cpu[f'baseline {base}']:+.2f} ms"
            record("13§4", f"{label} over {base}, the baseline build (BENCH_BASELINE), same loop", f"{b:.2f} ms",
                   f"{bu:.2f} ms {base}", f"{b - bu:+.2f} ms{cpu_note}", "reported", None)
        for label in ("sandboxed", "sandboxed, rlimits only", "sandboxed, host list", "sandboxed, undeclared"):
            b = m[f"baseline {label}"]
            record("13§2", f"{label}, the baseline build (BENCH_BASELINE), same loop", f"{b:.2f} ms",
                   f"this build {m[label]:.2f} ms", f"{m[label] - b:+.2f} ms", "reported", None)


def build_tiny(dest: Path, schemas: dict) -> None:
    env = dict(os.environ, TINY_SCHEMAS=json.dumps(schemas))
    sh(["rustc", "--edition", "2021", "-O", str(BENCH / "tools" / "tiny.rs"), "-o", str(dest)], env=env)


def bench_policy(runs: int, timer: str) -> None:
    """The same tiny compiled tool in four worlds that differ only in policy: none, a permissions.json with the
    gated action granted, a credential resolved from the vault, both."""
    vault = SHARED / "fixtures" / "vault"
    if not vault.is_dir():
        log(f"policy: skipped, {vault} is absent (set ANIMAWORKS_SHARED)")
        return
    root = new_root("policy")
    cred = [{"name": "demo", "env": "DEMO_TOKEN"}]
    gated = [{"name": "go", "profile": {"gated": True}}]
    plain = [{"name": "go"}]
    worlds_spec = {  # label: (schemas, permissions.json?, vault credential?)
        "plain": ({"protocol": 1, "actions": plain}, False, False),
        "permissions": ({"protocol": 1, "actions": gated}, True, False),
        "credential": ({"protocol": 1, "credentials": cred, "actions": plain}, False, True),
        "both": ({"protocol": 1, "credentials": cred, "actions": gated}, True, True),
    }
    grant = {"version": 1, "external_tools": {"allow_all": True, "allow": ["tiny_go"], "deny": []}}
    worlds: dict[str, World] = {}
    for label, (schemas, perms, creds) in worlds_spec.items():
        # One anima name and equally long paths in every world; only the policy differs.
        w = World(root / label[:4].ljust(4, "_"))
        build_tiny(w.personal / "tiny", schemas)
        if perms:
            (w.anima / "permissions.json").write_text(json.dumps(grant))
        if creds:
            for f in ("vault.key", "vault.json"):
                shutil.copy2(vault / f, w.data / f)
                (w.data / f).chmod(0o600)
            (w.data / "config.json").write_text(json.dumps({"credentials": {"demo": {"api_key": {"$vault": "DEMO_TOKEN"}}}}))
        worlds[label] = w
    call = ["call", "tiny", "go", "--json", "{}"]
    for label, w in worlds.items():  # the checks must really happen, or the figures would mean nothing
        r = awt(w, *call)
        want = '"has_secret":true' if worlds_spec[label][2] else '"has_secret":false'
        assert r.returncode == 0 and want in r.stdout, (label, r.stdout, r.stderr)
        log(f"{label}: {r.stdout.strip()}")
        if worlds_spec[label][1]:
            (w.anima / "permissions.json").write_text(json.dumps({"version": 1}))
            assert awt(w, *call).returncode == 6, f"{label}: the gated action ran without a grant"
            (w.anima / "permissions.json").write_text(json.dumps(grant))
    # One environment for all (hyperfine needs that): each world's dirs go on the command line.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANIMAWORKS_")}
    cases = [Case(label, [str(AWT), "--data-dir", str(w.data), "--anima-dir", str(w.anima), *call], env)
             for label, w in worlds.items()]
    m = time_cases(cases, runs, 20, timer)
    base = m["plain"]
    what = {"both": "permissions.json with the gated action granted + credential from the vault",
            "permissions": "  of which: permissions.json with the gated action granted only",
            "credential": "  of which: credential from the vault only"}
    for label in ("both", "permissions", "credential"):
        d = m[label] - base
        record("4§7", what[label], f"{m[label]:.2f} ms", f"{base:.2f} ms no permissions.json, no credential",
               f"{d:+.2f} ms ({m[label] / base:.2f}x)", "<=+1 ms" if label == "both" else "reported",
               d <= 1.0 if label == "both" else None)


# ---------------------------------------------------------------------------------------------- main


# ---------------------------------------------------------------------------------------------- issue 5 §6


def bench_submit(runs: int, timer: str) -> None:
    """`submit` returns at once with a task id; the task runs in a detached worker. Target: <= 20 ms median."""
    w = World(new_root("submit"))
    make_tiny_tools(w.personal, 1)
    env = w.env()
    argv = [str(AWT), "submit", "t000", "ping", "--json", "{}"]
    first = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert first.returncode == 0 and "task_id" in first.stdout, first
    cases = [Case("ours submit", argv, env)]
    fixtures = SHARED / "fixtures" / "legacy_tools"
    if original_ok() and fixtures.is_dir():
        shutil.copy2(fixtures / "cli_only_tool.py", w.personal / "cli_only_tool.py")
        orig = [str(VENV / "bin" / "animaworks-tool"), "submit", "cli_only_tool", "greet", "--name", "Ada"]
        o = subprocess.run(orig, env=env, capture_output=True, text=True)
        if o.returncode == 0:
            cases.append(Case("original submit", orig, env))
        else:
            log(f"submit: the original's submit failed ({o.stderr.strip()[-200:]}); timing ours alone")
    m = time_cases(cases, max(20, runs // 10), 3, timer)
    base = f"{m['original submit']:.1f} ms AnimaWorks 0.15.0 submit" if "original submit" in m else "-"
    ratio = f"{m['original submit'] / m['ours submit']:.0f}x faster" if "original submit" in m else "-"
    record("5§6", "submit (returns with a task id; a detached worker runs it)", f"{m['ours submit']:.1f} ms", base, ratio,
           "<=20 ms", m["ours submit"] <= 20)
    # Let the workers finish before the world is removed.
    end = time.monotonic() + 60
    while time.monotonic() < end:
        out = awt(w, "jobs", "list", "--json")
        if '"pending"' not in out.stdout and '"running"' not in out.stdout:
            break
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------------- issue 6 §5


class McpClient:
    """Raw JSON-RPC over `animaworks-tool mcp`'s stdio: the least a client can add to a round trip."""

    def __init__(self, env: dict[str, str], argv0: str | None = None):
        self.p = subprocess.Popen([argv0 or str(AWT), "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, obj: dict) -> None:
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            m = json.loads(self.p.stdout.readline())
            if m.get("id") == self.next_id:
                return m

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=30)


TRIVIAL_LEGACY = """def get_tool_schemas():
    return [{"name": "ping_tool_ping", "description": "Answer pong.", "input_schema": {"type": "object"}}]


def dispatch(name, args):
    return "pong"
"""


def bench_mcp(runs: int, timer: str) -> None:
    """tools/call of a trivial legacy Python tool with a warm worker vs the same call spawning a process (the
    CLI's `call`), and tools/list over 200 tools with a warm cache. Targets: <= 1 ms and <= 10 ms."""
    w = World(new_root("mcp"))
    (w.personal / "ping_tool.py").write_text(TRIVIAL_LEGACY)
    make_tiny_tools(w.common, 200)
    env = w.env(ANIMAWORKS_PYTHON=PYTHON)
    assert awt(w, "tools").returncode == 0
    c = McpClient(env)
    try:
        listed = c.request("tools/list", {})
        n_tools = len(listed["result"]["tools"])
        lists = []
        for _ in range(max(20, runs // 4)):
            t = time.perf_counter()
            c.request("tools/list", {})
            lists.append((time.perf_counter() - t) * 1000)
        # BENCH_BASELINE: that build's server too, warm, the two asked in turn (side by side).
        clients = [("ours", c)] + ([("baseline", McpClient(env, BASELINE))] if BASELINE else [])
        times: dict[str, list[float]] = {k: [] for k, _ in clients}
        for _, cl in clients:
            first = cl.request("tools/call", {"name": "ping_tool_ping", "arguments": {}})
            assert first["result"]["content"][0]["text"] == "pong", first
        for _ in range(runs):
            for k, cl in clients:
                t = time.perf_counter()
                r = cl.request("tools/call", {"name": "ping_tool_ping", "arguments": {}})
                times[k].append((time.perf_counter() - t) * 1000)
                assert r["result"]["content"][0]["text"] == "pong", r
        calls = times["ours"]
    finally:
        for _, cl in locals().get("clients", [("ours", c)]):
            cl.close()
    spawn = time_cases([Case("call spawning python", [str(AWT), "call", "ping_tool", "ping", "--json", "{}"], env)],
                       max(10, runs // 10), 3, timer)["call spawning python"]
    warm = statistics.median(calls)
    record("6§5", "MCP tools/call, trivial legacy Python tool, warm worker", f"{warm:.2f} ms",
           f"{spawn:.1f} ms a process per call (call)", f"{spawn / warm:.0f}x faster", "<=1 ms", warm <= 1.0)
    if BASELINE:
        base = statistics.median(times["baseline"])
        record("6§5", "MCP tools/call, warm worker, the baseline build (BENCH_BASELINE), same loop", f"{base:.2f} ms",
               f"this build {warm:.2f} ms", f"{base - warm:+.2f} ms", "reported", None)
    lm = statistics.median(lists)
    record("6§5", f"MCP tools/list, 200 tools + 1 (first page: {n_tools} MCP tools), warm cache", f"{lm:.2f} ms", "-", "-", "<=10 ms",
           lm <= 10.0)


# ---------------------------------------------------------------------------------------------- issue 24 §2


WORK_LEGACY = """import time


def get_tool_schemas():
    return [{"name": "work_tool_work", "description": "Waits 10 ms, as a call to a service does.",
             "input_schema": {"type": "object", "properties": {"i": {"type": "integer"}}}}]


def dispatch(name, args):
    time.sleep(0.01)
    return "done %d" % args.get("i", 0)
"""


def serve_rate(awt: Path, env: dict[str, str], in_flight: int, calls: int) -> float:
    """Calls a second through `use-tool --serve`, the client keeping `in_flight` requests outstanding."""
    p = subprocess.Popen([str(awt), "use-tool", "--serve"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)

    def ask(i: int) -> None:
        req = {"id": i, "tool_name": "work_tool", "action": "work", "args": {"i": i}}
        p.stdin.write((json.dumps(req) + "\n").encode())
        p.stdin.flush()

    def answer() -> None:
        m = json.loads(p.stdout.readline())
        assert m.get("status") == "ok", m

    for i in range(8):  # warm the workers
        ask(i)
        answer()
    t = time.perf_counter()
    sent = done = 0
    while done < calls:
        while sent < calls and sent - done < in_flight:
            ask(sent)
            sent += 1
        answer()
        done += 1
    rate = calls / (time.perf_counter() - t)
    p.stdin.close()
    p.wait(timeout=60)
    return rate


def bench_serve(runs: int, timer: str) -> None:
    """`use-tool --serve` with a legacy Python tool whose call waits 10 ms: calls/s with 4 requests in flight vs 1
    (and vs BENCH_BASELINE's binary at 4, which answered in order). Target: >= 1.5x at 4 vs 1."""
    w = World(new_root("serve"))
    (w.personal / "work_tool.py").write_text(WORK_LEGACY)
    env = w.env(ANIMAWORKS_PYTHON=PYTHON)
    assert awt(w, "tools").returncode == 0
    calls = max(40, runs // 2)
    rates: dict[str, list[float]] = {"1": [], "4": [], "base4": []}
    for _ in range(3):  # interleaved rounds
        rates["1"].append(serve_rate(AWT, env, 1, calls))
        rates["4"].append(serve_rate(AWT, env, 4, calls))
        if BASELINE:
            rates["base4"].append(serve_rate(Path(BASELINE), env, 4, calls))
    one, four = statistics.median(rates["1"]), statistics.median(rates["4"])
    record("24§2", "use-tool --serve, Python tool waiting 10 ms a call, 4 in flight", f"{four:.0f} calls/s",
           f"{one:.0f} calls/s at 1 in flight", f"{four / one:.2f}x", ">=1.5x", four / one >= 1.5)
    if rates["base4"]:
        b = statistics.median(rates["base4"])
        record("24§2", "the same, BENCH_BASELINE's binary at 4 in flight", f"{b:.0f} calls/s", "-", "-", "-", None)


def machine() -> dict:
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                if l.startswith("model name")), "?")
    rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "runner"],
                           capture_output=True, text=True).stdout.strip()
    return {"nproc": os.cpu_count(), "cpu": cpu, "loadavg": Path("/proc/loadavg").read_text().split()[:3], "kernel": os.uname().release, "commit": rev + ("+dirty runner" if dirty else ""),
            "python": sys.version.split()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", nargs="*", default="all", choices=["all", "call", "list", "stream", "legacy", "policy", "submit", "mcp", "sandbox", "serve"])
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", 200)))
    # Default: the interleaved Python loop, which times A and B truly side by side and feeds each its own stdin;
    # hyperfine (if installed) is the cross-check.
    ap.add_argument("--timer", choices=["hyperfine", "python"], default=os.environ.get("BENCH_TIMER", "python"))
    ap.add_argument("--no-build", action="store_true", help="use the binaries already in target/release")
    a = ap.parse_args()
    atexit.register(remove_roots)
    if not a.no_build:
        # Apart: built together, the two packages' shared dependencies get other features than `cargo install
        # --path runner` gives the runner.
        sh(["cargo", "build", "--release", "-q", "-p", "animaworks-tool"], cwd=ROOT)
        sh(["cargo", "build", "--release", "-q", "-p", "rust-hello"], cwd=ROOT)
    for b in (AWT, HELLO):
        if not b.exists():
            raise SystemExit(f"bench: {b} is missing; run cargo build --release -p animaworks-tool -p rust-hello")
    if a.timer == "hyperfine" and not shutil.which("hyperfine"):
        log("hyperfine is not installed; using the Python loop")
        a.timer = "python"
    which = ["call", "list", "stream", "legacy", "policy", "submit", "mcp", "sandbox", "serve"] if "all" in a.which else a.which
    m = machine()
    log(f"machine: {m}; timer: {a.timer}; runs: {a.runs}")
    for name in which:
        log(f"--- {name}")
        globals()[f"bench_{name}"](a.runs, a.timer)
    OUT.mkdir(exist_ok=True)
    (OUT / "results.json").write_text(json.dumps({"machine": m, "timer": a.timer, "results": RESULTS}, indent=2))
    print(f"\nmachine: {m['nproc']} cores, {m['cpu']}, kernel {m['kernel']}, load average {' '.join(m['loadavg'])} "
          f"at the start, commit {m['commit']}; timer: {a.timer}; runs: {a.runs}\n")
    print("| bench | what | median | baseline (median) | ratio / difference | target | met |")
    print("|---|---|---|---|---|---|---|")
    for r in RESULTS:
        verdict = {True: "yes", False: "**no**", None: "-"}[r["met"]]
        print(f"| {r['bench']} | {r['what']} | {r['value']} | {r['baseline']} | {r['ratio']} | {r['target']} | {verdict} |")


if __name__ == "__main__":
    main()
