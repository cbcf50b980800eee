#!/usr/bin/env python3
"""MCP servers as tools, side by side (issue: "Existing MCP servers as a tool tier").

  bench/mcp_servers.py [--bin PATH] [--calls N] [--rounds R] [--python PY]

1. Warm call: one raw JSON-RPC client (this script, no SDK) calls `echo` of the Python SDK test server
   (runner/tests/mcp_servers/py_server.py) N times, (a) talking to the server directly, (b) through
   `animaworks-tool mcp` with the server declared as the tool `py` (common tier, sandbox off and on), the
   cases interleaved round by round. Printed: each case's median per call and the difference.
2. Warm listing of 20 declared servers: `animaworks-tool tools` after one listing filled the cache, median of R runs.
3. Cold start of the Python SDK server: `animaworks-tool refresh` (the server started and listed once) and
   `animaworks-tool py echo` once it is listed (the server started for one call, the call, its end), medians of
   a few runs.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "runner/tests/mcp_servers/py_server.py"


def rpc_session(argv, env, calls, name):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    def send(obj):
        p.stdin.write((json.dumps(obj) + "\n").encode())
        p.stdin.flush()
    def answer(i):
        while True:
            line = p.stdout.readline()
            if not line:
                raise SystemExit(f"{argv[0]} closed its output")
            msg = json.loads(line)
            if msg.get("id") == i:
                return msg
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
          "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    answer(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    times = []
    for i in range(1, calls + 2):
        t = time.perf_counter()
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": {"text": "x"}}})
        msg = answer(i)
        dt = time.perf_counter() - t
        assert "result" in msg and not msg["result"].get("isError"), msg
        if i > 1:  # the first call starts the pooled server
            times.append(dt)
    p.stdin.close()
    p.wait(timeout=30)
    return times


def world(tmp, python, sandbox, servers=1):
    data = Path(tmp) / "data"
    anima = data / "animas" / "alice"
    (anima / "tools").mkdir(parents=True, exist_ok=True)
    (data / "common_tools").mkdir(exist_ok=True)
    decl = {f"py{i}" if servers > 1 else "py": {"command": python, "args": [str(SERVER)], "sandbox": {"read": [str(SERVER.parent)]}}
            for i in range(servers)}
    settings = {"mcp_servers": decl}
    if not sandbox:
        settings["sandbox"] = {"common": "off", "personal": "off"}
    (data / "animaworks-tool.json").write_text(json.dumps(settings))
    (anima / "permissions.json").write_text(json.dumps({"sandbox": {"read": [str(SERVER.parent)]}}))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "ANIMAWORKS_DATA_DIR": str(data), "ANIMAWORKS_ANIMA_DIR": str(anima)}
    return env


def median_ms(xs):
    return statistics.median(xs) * 1000


def run(argv, env):
    t = time.perf_counter()
    r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert r.returncode == 0, (argv, r.returncode)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release/animaworks-tool"))
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    cases = {"direct": [], "runner": [], "runner, sandboxed": []}
    with tempfile.TemporaryDirectory() as t1, tempfile.TemporaryDirectory() as t2:
        env_off, env_on = world(t1, a.python, False), world(t2, a.python, True)
        for env in (env_off, env_on):
            run([a.bin, "tools"], env)
        for _ in range(a.rounds):
            cases["direct"] += rpc_session([a.python, str(SERVER)], dict(os.environ), a.calls, "echo")
            cases["runner"] += rpc_session([a.bin, "mcp"], env_off, a.calls, "py_echo")
            cases["runner, sandboxed"] += rpc_session([a.bin, "mcp"], env_on, a.calls, "py_echo")
    d = median_ms(cases["direct"])
    print(f"warm call, median of {a.rounds} x {a.calls}:")
    for k, v in cases.items():
        m = median_ms(v)
        print(f"  {k:20s} {m:7.3f} ms   ({m - d:+.3f} ms over direct)")
    with tempfile.TemporaryDirectory() as t:
        env = world(t, a.python, False, servers=20)
        run([a.bin, "tools"], env)
        warm = [run([a.bin, "tools"], env) for _ in range(max(a.rounds * 4, 20))]
        print(f"warm `tools` with 20 servers declared: median {median_ms(warm):.2f} ms")
    with tempfile.TemporaryDirectory() as t:
        env = world(t, a.python, False)
        cold_list, cold_call = [], []
        for _ in range(3):
            cold_list.append(run([a.bin, "refresh"], env))
            cold_call.append(run([a.bin, "py", "echo", "--text", "x"], env))
        print(f"`refresh` (start + list the Python SDK server): median {median_ms(cold_list):.0f} ms")
        print(f"one-shot `py echo` (start the server, call, stop): median {median_ms(cold_call):.0f} ms")


if __name__ == "__main__":
    main()
