#!/usr/bin/env python3
"""Issue 24's scale suite: each measure side by side with its baseline in the same loop, and the ratio against
the issue's target. Usage: bench/run scale [NAME ...] (names: cold warm mcp serve submit burst pg stream; default all).

Sizes (environment, the issue's by default; smaller ones give a quick look on a busy machine):
SCALE_COLD_TOOLS (1000), SCALE_WARM_TOOLS (10000), SCALE_STORED (2500), SCALE_SUBMITS (500), SCALE_PG_TASKS
(500), SCALE_STREAM_BYTES (1 GiB), SCALE_MCP_CALLS (400), SCALE_SERVE_CALLS (1000; a tenth for the 10 ms tool), SCALE_RUNS (5: interleaved runs of the short
measures; the cold listing and the stream run SCALE_LONG_RUNS, 2). SCALE_BEFORE: another build of the runner
(e.g. main's), timed in the same loops where a measure allows it.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (World, Case, time_cases, build_tiny, record, the release binary)
import tasks as taskbench  # noqa: E402  (the throwaway Postgres cluster)

AWT = str(bench.AWT)
BEFORE = os.environ.get("SCALE_BEFORE")
RUNS = int(os.environ.get("SCALE_RUNS", 5))
LONG_RUNS = int(os.environ.get("SCALE_LONG_RUNS", 2))


def size(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def tiny(dest: Path, background: bool = False, declared: bool = False) -> None:
    profile: dict = {"background_eligible": True} if background else {}
    if declared:
        # What it needs, declared (protocol.md §2.4): no network, so no network namespace and no proxy.
        profile["sandbox"] = {"read": ["$ANIMA_DIR"]}
    bench.build_tiny(dest, {"protocol": 1, "actions": [{"name": "go", "profile": profile}]})


def copies(src: Path, folder: Path, n: int, ext: str = "") -> None:
    for i in range(n):
        shutil.copy2(src, folder / f"t{i:05d}{ext}")


def listed(env: dict, n: int, argv0: str = AWT) -> None:
    r = subprocess.run([argv0, "tools", "--json"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-400:]
    got = json.loads(r.stdout)
    tools = got["tools"] if isinstance(got, dict) else got
    assert len(tools) >= n, f"{len(tools)} tools listed, {n} expected: {r.stderr[-400:]}"


def ratio_row(what: str, ours: float, base: float, unit: str, better: str, target: float | None, sizes: str) -> None:
    """`better` is "lower" (ours / base must be <= target) or "higher" (ours / base must be >= target); a row
    without a target is reported only (the sandbox's share: the same measure with the tier unconfined)."""
    r = ours / base
    if target is None:
        bench.record("24", what, f"{ours:.3g} {unit}", f"{base:.3g} {unit}", f"{r:.2f}x", "reported", None,
                     sizes=sizes)
        return
    met = r <= target if better == "lower" else r >= target
    sign = "<=" if better == "lower" else ">="
    bench.record("24", what, f"{ours:.3g} {unit}", f"{base:.3g} {unit}", f"{r:.2f}x", f"{sign} {target}x", met,
                 sizes=sizes)


def cold() -> None:
    n = size("SCALE_COLD_TOOLS", 1000)
    w = bench.World(bench.new_root("scale-cold"))
    tiny(w.root / "tiny")
    copies(w.root / "tiny", w.personal, n)
    env = w.env()
    listed(env, n)
    wipe = f"rm -rf {shlex.quote(str(w.data / 'cache'))}"
    # `env` runs each file: xargs replaces `{}` in arguments, not in the command's name.
    xargs = f"find {shlex.quote(str(w.personal))} -type f | xargs -P4 -I{{}} env {{}} --schemas"
    # The same tools, the personal tier unconfined: what the listing costs apart from the sandbox.
    u = bench.World(bench.new_root("scale-cold-unconfined"))
    (u.data / "animaworks-tool.json").write_text(json.dumps({"sandbox": {"personal": "off"}}))
    copies(w.root / "tiny", u.personal, n)
    uenv = u.env()
    listed(uenv, n)
    uwipe = f"rm -rf {shlex.quote(str(u.data / 'cache'))}"
    cases = [bench.Case("ours cold tools", [AWT, "tools", "--json"], env, prepare=wipe),
             bench.Case("xargs -P4 --schemas", ["sh", "-c", xargs + " > /dev/null"], env),
             bench.Case("ours cold tools, unconfined", [AWT, "tools", "--json"], uenv, prepare=uwipe)]
    if BEFORE:
        cases.append(bench.Case("before cold tools", [BEFORE, "tools", "--json"], env, prepare=wipe))
    m = bench.time_cases(cases, LONG_RUNS, 0, "python")
    ratio_row(f"cold `tools`, {n} sandboxed native tools (personal tier)", m["ours cold tools"],
              m["xargs -P4 --schemas"], "ms", "lower", 1.3, f"{n} tools")
    ratio_row(f"cold `tools`, {n} native tools, the personal tier unconfined", m["ours cold tools, unconfined"],
              m["xargs -P4 --schemas"], "ms", "lower", None, f"{n} tools")
    if BEFORE:
        ratio_row(f"cold `tools`, {n} sandboxed native tools, the SCALE_BEFORE build", m["before cold tools"],
                  m["xargs -P4 --schemas"], "ms", "lower", 1.3, f"{n} tools")


def warm() -> None:
    n = size("SCALE_WARM_TOOLS", 10000)
    w = bench.World(bench.new_root("scale-warm"))
    src = bench.BENCH / "tools" / "tiny_tool.sh"
    copies(src, w.common, n, ".sh")
    env = w.env()
    bench.log(f"warm: probing {n} tools once")
    listed(env, n)
    ls = ["ls", "-l", str(w.data / "core_tools"), str(w.common), str(w.personal)]
    cases = [bench.Case("ours warm tools", [AWT, "tools", "--json"], env), bench.Case("ls -l", ls, env)]
    if BEFORE:
        cases.append(bench.Case("before warm tools", [BEFORE, "tools", "--json"], env))
    m = bench.time_cases(cases, RUNS, 1, "python")
    ratio_row(f"warm `tools`, {n} tools", m["ours warm tools"], m["ls -l"], "ms", "lower", 3.0, f"{n} tools")
    if BEFORE:
        ratio_row(f"warm `tools`, {n} tools, the SCALE_BEFORE build", m["before warm tools"], m["ls -l"], "ms",
                  "lower", 3.0, f"{n} tools")


def mcp_rate(env: dict, name: str, calls: int, in_flight: int, argv0: str = AWT) -> float:
    """tools/call of `name` over one `mcp` server, `in_flight` requests outstanding at all times: calls/s."""
    p = subprocess.Popen([argv0, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)

    def send(obj: dict) -> None:
        p.stdin.write((json.dumps(obj) + "\n").encode())
        p.stdin.flush()

    def answer() -> dict:
        while True:
            m = json.loads(p.stdout.readline())
            if "id" in m:
                return m

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "scale", "version": "0"}}})
    answer()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = lambda i: send({"jsonrpc": "2.0", "id": i, "method": "tools/call",  # noqa: E731
                           "params": {"name": name, "arguments": {}}})
    call(1)
    first = answer()
    assert "result" in first and not first["result"].get("isError"), first
    sent = 1
    t0 = time.perf_counter()
    for _ in range(in_flight):
        sent += 1
        call(sent)
    done = 0
    while done < calls:
        m = answer()
        assert "result" in m and not m["result"].get("isError"), m
        done += 1
        if sent - 1 < calls:
            sent += 1
            call(sent)
    rate = calls / (time.perf_counter() - t0)
    p.stdin.close()
    p.wait(timeout=30)
    return rate


def mcp_cpu(env: dict, name: str, calls: int, in_flight: int, argv0: str = AWT) -> tuple[float, float]:
    """mcp_rate, and the CPU time (ms) a call of the server and of everything it reaped (the tools, their
    namespaces' init), from getrusage of this script's children: the kernel's workers are not in it."""
    import resource
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rate = mcp_rate(env, name, calls, in_flight, argv0)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000 / (calls + 1)
    return rate, cpu


def mcp() -> None:
    calls = size("SCALE_MCP_CALLS", 400)
    worlds = {}
    for label, settings, declared in (("sandboxed", {}, False), ("unconfined", {"sandbox": {"personal": "off"}}, False),
                                      ("sandboxed, declared", {}, True)):
        w = bench.World(bench.new_root("scale-mcp"))
        (w.data / "animaworks-tool.json").write_text(json.dumps(settings))
        tiny(w.personal / "tiny", declared=declared)
        worlds[label] = w.env()
        listed(worlds[label], 1)
    # The same sandboxed tool with no network namespace kept across calls: each call makes its own.
    worlds["sandboxed, fresh netns"] = dict(worlds["sandboxed"], ANIMAWORKS_TOOL_FRESH_NETNS="1")
    builds = [("ours", AWT)] + ([("before", BEFORE)] if BEFORE else [])
    rates: dict[str, list[float]] = {f"{b} {k}": [] for b, _ in builds for k in worlds}
    cpus: dict[str, list[float]] = {k: [] for k in rates}
    for _ in range(max(1, RUNS // 2)):  # interleaved
        for b, argv0 in builds:
            for label, env in worlds.items():
                rate, cpu = mcp_cpu(env, "tiny_go", calls, 4, argv0)
                rates[f"{b} {label}"].append(rate)
                cpus[f"{b} {label}"].append(cpu)
    # Nothing serial left in a sandboxed call (the first finding): 4 in flight against 1, same server.
    one = [mcp_rate(worlds["sandboxed"], "tiny_go", calls, 1) for _ in range(max(1, RUNS // 2))]
    med = {k: statistics.median(v) for k, v in rates.items()}
    bench.log(f"mcp calls/s: {rates}; sandboxed, 1 in flight: {one}")
    bench.log("mcp CPU a call, median (ms): " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in cpus.items()))
    for b, _ in builds:
        ratio_row("MCP, sandboxed native tool, 4 in flight (calls/s)"
                  + ("" if b == "ours" else ", the SCALE_BEFORE build"), med[f"{b} sandboxed"],
                  med[f"{b} unconfined"], "calls/s", "higher", 0.7, f"{calls} calls a run")
    ratio_row("MCP, the same tool, each call in a fresh network namespace (none kept), 4 in flight (calls/s)",
              med["ours sandboxed, fresh netns"], med["ours unconfined"], "calls/s", "higher", None,
              f"{calls} calls a run")
    ratio_row("MCP, the same tool declaring what it needs (no network), 4 in flight (calls/s)",
              med["ours sandboxed, declared"], med["ours unconfined"], "calls/s", "higher", None,
              f"{calls} calls a run")
    ratio_row("MCP, sandboxed native tool, 4 in flight against 1 in flight (calls/s)", med["ours sandboxed"],
              statistics.median(one), "calls/s", "higher", None, f"{calls} calls a run")


def serve_rate(env: dict, tool: str, calls: int, in_flight: int, argv0: str = AWT) -> float:
    """`use-tool --serve` requests of the legacy `tool` (action `tool` less `_tool`), `in_flight` outstanding at all
    times: calls/s."""
    p = subprocess.Popen([argv0, "use-tool", "--serve"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    action = tool.removesuffix("_tool")

    def send(i: int) -> None:
        req = {"tool_name": tool, "action": action, "args": {}, "id": i}
        p.stdin.write((json.dumps(req) + "\n").encode())
        p.stdin.flush()

    def answer() -> None:
        m = json.loads(p.stdout.readline())
        assert m.get("status") == "ok", m

    # Warm-up: as many workers as will be in flight.
    for _ in range(3):
        for i in range(in_flight):
            send(-1 - i)
        for _ in range(in_flight):
            answer()
    sent = 0
    t0 = time.perf_counter()
    for _ in range(in_flight):
        send(sent)
        sent += 1
    done = 0
    while done < calls:
        answer()
        done += 1
        if sent < calls:
            send(sent)
            sent += 1
    rate = calls / (time.perf_counter() - t0)
    p.stdin.close()
    p.wait(timeout=30)
    return rate


def serve() -> None:
    """Two legacy Python tools: a trivial one (the runner's own cost) and one whose call waits 10 ms (a service)."""
    calls = size("SCALE_SERVE_CALLS", 1000)
    w = bench.World(bench.new_root("scale-serve"))
    (w.personal / "ping_tool.py").write_text(bench.TRIVIAL_LEGACY)
    (w.personal / "work_tool.py").write_text(bench.WORK_LEGACY)
    env = w.env(ANIMAWORKS_PYTHON=bench.PYTHON)
    listed(env, 2)
    builds = [("ours", AWT)] + ([("before", BEFORE)] if BEFORE else [])
    tools = {"ping_tool": ("trivial legacy Python tool", calls), "work_tool": ("legacy Python tool waiting 10 ms a call", max(100, calls // 10))}
    rates: dict[str, list[float]] = {f"{b} {t} {k}": [] for b, _ in builds for t in tools for k in (1, 4)}
    for _ in range(max(1, RUNS // 2)):  # interleaved
        for b, argv0 in builds:
            for t, (_, n) in tools.items():
                for k in (1, 4):
                    rates[f"{b} {t} {k}"].append(serve_rate(env, t, n, k, argv0))
    med = {k: statistics.median(v) for k, v in rates.items()}
    bench.log(f"serve calls/s: {rates}")
    for b, _ in builds:
        for t, (what, n) in tools.items():
            ratio_row(f"`use-tool --serve`, {what}, 4 in flight vs 1 (calls/s)"
                      + ("" if b == "ours" else ", the SCALE_BEFORE build"), med[f"{b} {t} 4"], med[f"{b} {t} 1"],
                      "calls/s", "higher", 1.5, f"{n} calls a run")


def forge_finished(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time() - 3600
    for i in range(n):
        tid = f"f{i:011x}"
        t = {"task_id": tid, "anima_name": "alice", "tool_name": "tiny:go", "tool_args": {}, "status": "completed",
             "created_at": now + i * 1e-3, "completed_at": now + i * 1e-3, "result": "{\"ok\":true}", "error": None,
             "tool": "tiny", "action": "go", "kind": "action", "updated_at": now + i * 1e-3, "outcome": "completed",
             "result_value": {"ok": True}}
        (folder / f"{tid}.json").write_text(json.dumps(t, indent=2) + "\n")


def submit() -> None:
    stored = size("SCALE_STORED", 2500)
    cases = []
    # Each build its own worlds: one build's submits would change the folder behind the other's index.
    for b, argv0 in [("ours", AWT)] + ([("before", BEFORE)] if BEFORE else []):
        for label, n in (("none stored", 0), (f"{stored} finished stored", stored)):
            w = bench.World(bench.new_root("scale-submit"))
            tiny(w.personal / "tiny", background=True)
            forge_finished(w.anima / "state" / "background_tasks", n)
            cases.append(bench.Case(f"{b} {label}", [argv0, "submit", "tiny", "go", "--json", "{}"], w.env()))
    m = bench.time_cases(cases, max(RUNS * 4, 10), 2, "python")
    for b in ["ours"] + (["before"] if BEFORE else []):
        ratio_row(f"file-store submit, {stored} finished tasks stored vs none"
                  + ("" if b == "ours" else ", the SCALE_BEFORE build"), m[f"{b} {stored} finished stored"],
                  m[f"{b} none stored"], "ms", "lower", 1.2, f"{stored} stored")


def all_final(folder: Path, n: int, timeout: float = 900) -> float:
    """Waits until `n` task files in `folder` are final; the time when they were (reading the files directly)."""
    end = time.time() + timeout
    while time.time() < end:
        done = 0
        for f in folder.glob("*.json"):
            try:
                done += json.loads(f.read_text()).get("status") in ("completed", "failed")
            except (OSError, ValueError):
                pass
        if done >= n:
            return time.perf_counter()
        time.sleep(0.05)
    raise SystemExit(f"bench: {n} tasks did not finish in {timeout} s")


def direct(tool: Path, n: int, width: int) -> float:
    """`n` direct spawns of `tool` with a request on stdin, `width` at once: spawns per second."""
    req = json.dumps({"name": "go", "args": {}}).encode()

    def one(_):
        subprocess.run([str(tool)], input=req, stdout=subprocess.DEVNULL, check=True)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(width) as ex:
        list(ex.map(one, range(n)))
    return n / (time.perf_counter() - t0)


def burst_rate(argv0: str, n: int, unconfined: bool = False) -> tuple[float, float]:
    """(tasks/s of `n` submits back to back until all have finished, direct spawns/s of the same tool)."""
    w = bench.World(bench.new_root("scale-burst"))
    if unconfined:
        (w.data / "animaworks-tool.json").write_text(json.dumps({"sandbox": {"personal": "off"}}))
    tiny(w.personal / "tiny", background=True)
    env = w.env()
    folder = w.anima / "state" / "background_tasks"
    base = direct(w.personal / "tiny", n, 1)
    t0 = time.perf_counter()
    for _ in range(n):
        subprocess.run([argv0, "submit", "tiny", "go", "--json", "{}"], env=env, stdout=subprocess.DEVNULL,
                       check=True)
    rate = n / (all_final(folder, n) - t0)
    failed = sum(json.loads(f.read_text())["status"] != "completed" for f in folder.glob("*.json"))
    assert failed == 0, f"{failed} of {n} tasks did not complete"
    return rate, base


def burst() -> None:
    n = size("SCALE_SUBMITS", 500)
    builds = [("ours", AWT)] + ([("before", BEFORE)] if BEFORE else [])
    for b, argv0 in builds:
        rate, base = burst_rate(argv0, n)
        ratio_row(f"{n} submits back to back, file store, end to end (tasks/s)"
                  + ("" if b == "ours" else ", the SCALE_BEFORE build"), rate, base, "tasks/s", "higher", 0.25,
                  f"{n} tasks; baseline: {n} direct spawns one after another")
    rate, base = burst_rate(AWT, n, unconfined=True)
    ratio_row(f"{n} submits back to back, file store, the personal tier unconfined (tasks/s)", rate, base,
              "tasks/s", "higher", None, f"{n} tasks; baseline: {n} direct spawns one after another")


def pg_drain(argv0: str, w, env: dict, n: int) -> float:
    """`n` tasks queued in `w`'s database, then 4 workers (4 slots each) until none is pending or running: tasks/s
    from the workers' start to the last task's end (its `completed_at`, written by the worker that ran it). The
    end is read from the tasks, not from the poll that finds none left, so that the poll can be slow (every 200 ms)
    and its processes (one `jobs list` each, a runner start and a query) take little of the two cores the workers
    and the server share; polled every 50 ms the figure moved with the poll."""
    # Submitted 4 at once: the submits are not timed, only the workers' drain.
    with ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda _: subprocess.run([argv0, "submit", "tiny", "go", "--json", "{}"], env=env,
                                             stdout=subprocess.DEVNULL, check=True), range(n)))
    t0 = time.time()
    procs = taskbench.start_workers(Path(argv0), w, 4, 4)
    try:
        while True:
            time.sleep(0.2)
            ts = json.loads(subprocess.run([argv0, "jobs", "list", "--json", "--status", "pending,running"],
                                           env=env, capture_output=True, text=True, check=True).stdout)
            if not ts:
                break
    finally:
        taskbench.stop_workers(procs)
    done = json.loads(subprocess.run([argv0, "jobs", "list", "--json", "--status", "completed"], env=env,
                                     capture_output=True, text=True, check=True).stdout)
    assert len(done) == n, f"{len(done)} of {n} completed"
    rate = n / (max(t["completed_at"] for t in done) - t0)
    subprocess.run([argv0, "jobs", "prune", "--older-than", "0s"], env=env, check=True, capture_output=True)
    return rate


def pg() -> None:
    n = size("SCALE_PG_TASKS", 500)
    tmp = bench.new_root("scale-pg")
    cluster = taskbench.Cluster(tmp)
    try:
        builds = [("ours", AWT)] + ([("before", BEFORE)] if BEFORE else [])
        # The same drain with the common tier unconfined: what the workers cost apart from the sandbox.
        runs = builds + [("unconfined", AWT)]
        worlds = {}
        for b, argv0 in runs:
            # Each build its own database: a build with an older schema refuses a newer one.
            url = cluster.url
            if b != "ours":
                psql = taskbench.pg_bin() / "psql"
                subprocess.run([str(psql) if psql.is_file() else "psql", cluster.url, "-qc", f"CREATE DATABASE awt_{b}"],
                               check=True, capture_output=True)
                url = cluster.url.rsplit("/", 1)[0] + f"/awt_{b}"
            w = taskbench.World(tmp / b, "postgres", url, limit=8)
            if b == "unconfined":
                cfg = json.loads((w.data / "animaworks-tool.json").read_text())
                cfg["sandbox"] = {"common": "off"}
                (w.data / "animaworks-tool.json").write_text(json.dumps(cfg))
            tool = w.data / "common_tools" / "tiny"
            tiny(tool, background=True)
            (w.data / "common_tools" / "t").unlink()
            env = w.env()
            subprocess.run([argv0, "jobs", "migrate"], env=env, check=True, capture_output=True)
            worlds[b] = (argv0, w, env, tool)
        rates: dict[str, list[float]] = {b: [] for b, _ in runs}
        base: list[float] = []
        for _ in range(RUNS):
            base.append(direct(worlds["ours"][3], n, 8))
            for b, _ in runs:
                argv0, w, env, _tool = worlds[b]
                rates[b].append(pg_drain(argv0, w, env, n))
        bench.log(f"pg tasks/s: {rates}; direct spawns/s: {base}; load {Path('/proc/loadavg').read_text().split()[:3]}")
        med = statistics.median(base)
        for b, _ in builds:
            ratio_row(f"Postgres, 4 workers (4 slots each, per-anima limit 8), {n} trivial tasks (tasks/s)"
                      + ("" if b == "ours" else ", the SCALE_BEFORE build"), statistics.median(rates[b]), med,
                      "tasks/s", "higher", 0.35, f"{n} tasks, median of {RUNS}; baseline: direct spawns, 8 at once")
        ratio_row(f"Postgres, the same, the common tier unconfined (tasks/s)", statistics.median(rates["unconfined"]),
                  med, "tasks/s", "higher", None, f"{n} tasks, median of {RUNS}; baseline: direct spawns, 8 at once")
    finally:
        cluster.stop()


def stream() -> None:
    total = size("SCALE_STREAM_BYTES", bench.GIB)
    line = b'{"type":"progress","progress":1}\n'
    lines = total // len(line)
    w = bench.World(bench.new_root("scale-stream"))
    tool = w.personal / "stream.sh"
    tool.write_text(bench.STREAM_TOOL.format(lines=lines, bytes=lines * len(line)))
    env = w.env()
    q = shlex.quote
    cases = [("cat", f"bash {q(str(tool))} < /dev/null | cat > /dev/null"),
             ("--events", f"{q(AWT)} call stream emit --events > /dev/null"),
             ("no --events", f"{q(AWT)} call stream emit > /dev/null 2> /dev/null")]
    if BEFORE:
        cases += [("before --events", f"{q(BEFORE)} call stream emit --events > /dev/null"),
                  ("before no --events", f"{q(BEFORE)} call stream emit > /dev/null 2> /dev/null")]
    times: dict[str, list[float]] = {k: [] for k, _ in cases}
    for _ in range(LONG_RUNS):
        for label, cmd in cases:
            t0 = time.perf_counter()
            subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], env=env, check=True)
            times[label].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    bench.log(f"stream seconds: {times}")
    mib = lines * len(line) / (1 << 20)
    for label in [k for k, _ in cases if k != "cat"]:
        # Throughput ratio: cat's time over ours.
        ratio_row(f"{mib:.0f} MiB of small progress events, {label} (MiB/s)", mib / med[label], mib / med["cat"],
                  "MiB/s", "higher", 0.6, f"{mib:.0f} MiB")


MEASURES = {"cold": cold, "warm": warm, "mcp": mcp, "serve": serve, "submit": submit, "burst": burst, "pg": pg, "stream": stream}


def main() -> None:
    names = sys.argv[1:] or list(MEASURES)
    unknown = [n for n in names if n not in MEASURES]
    if unknown:
        raise SystemExit(f"bench/run scale: unknown {unknown}; known: {' '.join(MEASURES)}")
    if not bench.AWT.is_file():
        raise SystemExit(f"bench/run scale: build the runner first (cargo build --release -p animaworks-tool)")
    load = Path("/proc/loadavg").read_text().split()[:3]
    bench.log(f"scale suite: {names}; load average at start {load} on {os.cpu_count()} cores")
    try:
        for n in names:
            MEASURES[n]()
    finally:
        bench.remove_roots()
    print(f"\nissue 24, ratios side by side (load average at start {' '.join(load)}, {os.cpu_count()} cores; "
          f"at end {' '.join(Path('/proc/loadavg').read_text().split()[:3])})")
    print("| measure | ours | baseline | ratio | target | met | sizes |")
    print("|---|---|---|---|---|---|---|")
    for r in bench.RESULTS:
        met = {True: "yes", False: "NO", None: "-"}[r.get("met")]
        print(f"| {r['what']} | {r['value']} | {r['baseline']} | {r['ratio']} | {r['target']} | {met} | "
              f"{r.get('sizes', '')} |")


if __name__ == "__main__":
    main()
