#!/usr/bin/env python3
"""A real npx server, installed by `mcp-servers install`, directly and through the tier, side by side.

  bench/mcp_real_servers.py [--bin PATH] [--baseline PATH] [--calls N] [--rounds R] [--batches B]

Needs the servers test.sh installs into target/mcp-real-servers (or run
`animaworks-tool --data-dir target/mcp-real-servers mcp-servers install` with
runner/tests/mcp_real_servers/animaworks-tool.json copied there).

1. Warm call: one raw JSON-RPC client (this script) calls `echo` of @modelcontextprotocol/server-everything N
   times (a) on the installed server started directly (`node <entry>`), (b) through `animaworks-tool mcp` with the
   server declared as users copy it (`npx -y @modelcontextprotocol/server-everything@…`), common tier, sandbox
   off and on (the default); the cases interleaved round by round (with `--baseline`, another build of
   `animaworks-tool` too, in the same rounds). Printed: each case's median per call, its difference and ratio to
   the direct one, and the spread of the rounds' medians (how noisy the machine was).
2. Concurrency on one session: B batches of 1 and of 4 calls sent at once (`echo`, and a 0.2 s
   `trigger-long-running-operation`), through the tier (sandboxed); printed: each batch's median wall time.
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
INSTALLED = ROOT / "target/mcp-real-servers/mcp_servers"
FIXTURE = ROOT / "runner/tests/mcp_real_servers/animaworks-tool.json"


class Session:
    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env=env)
        self.next = 1
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                   "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        self.wait({0})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, obj):
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()

    def wait(self, ids):
        ids = set(ids)
        while ids:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("the server closed its output")
            msg = json.loads(line)
            if msg.get("id") in ids and "method" not in msg:
                assert "result" in msg and not msg["result"].get("isError"), msg
                ids.discard(msg["id"])

    def batch(self, name, args, k):
        ids = []
        for _ in range(k):
            i = self.next
            self.next += 1
            ids.append(i)
            self.send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": args}})
        t = time.perf_counter()
        self.wait(ids)
        return time.perf_counter() - t

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def world(tmp, sandbox, name=None):
    data = Path(tmp) / ("data-" + (name or sandbox))
    anima = Path(tmp) / ("animas-" + (name or sandbox)) / "alice"
    anima.mkdir(parents=True)
    (data / "common_tools").mkdir(parents=True)
    (anima / "status.json").write_text("{}")
    (anima / "permissions.json").write_text(json.dumps({"version": 1, "external_tools": {"allow_all": True}}))
    (data / "mcp_servers").symlink_to(INSTALLED)
    decl = json.loads(FIXTURE.read_text())["mcp_servers"]["everything"]
    settings = {"mcp_servers": {"everything": decl}, "sandbox": {"common": sandbox}}
    (data / "animaworks-tool.json").write_text(json.dumps(settings))
    return data, anima


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release/animaworks-tool"))
    ap.add_argument("--baseline", help="another build of animaworks-tool, timed in the same rounds")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batches", type=int, default=100)
    a = ap.parse_args()
    lock = json.loads((INSTALLED / "everything/lock.json").read_text())
    how, entry = lock["run"]
    direct_argv = ["node", str(INSTALLED / "everything" / lock["dir"] / entry)]
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
    echo = ("echo", {"message": "x"})
    with tempfile.TemporaryDirectory() as tmp:
        cases = {"direct": (direct_argv, "echo")}
        builds = [("", a.bin)] + ([("baseline, ", a.baseline)] if a.baseline else [])
        for label, binary in builds:
            for sandbox in ("off", "enforce"):
                data, anima = world(tmp, sandbox, ("base-" if label else "") + sandbox)
                argv = [binary, "--data-dir", str(data), "--anima-dir", str(anima), "mcp"]
                cases[f"{label}tier, sandbox {sandbox}"] = (argv, "everything_echo")
                # The first listing probes the server; not measured.
                subprocess.run([binary, "--data-dir", str(data), "--anima-dir", str(anima), "tools"], env=env,
                               stdout=subprocess.DEVNULL, check=True)
        per = {k: [] for k in cases}
        rounds = {k: [] for k in cases}
        load = [os.getloadavg()[0]]
        for _ in range(a.rounds):
            for k, (argv, name) in cases.items():
                s = Session(argv, env)
                s.batch(name, echo[1], 1)  # starts the session
                got = [s.batch(name, echo[1], 1) for _ in range(a.calls)]
                per[k].extend(got)
                rounds[k].append(statistics.median(got) * 1000)
                s.close()
        load.append(os.getloadavg()[0])
        base = statistics.median(per["direct"]) * 1000
        print(f"warm echo of server-everything {lock['version']}, median of {a.calls * a.rounds} calls "
              f"(load {load[0]:.1f} at the start, {load[1]:.1f} at the end; rounds' medians min-max):")
        for k, v in per.items():
            m = statistics.median(v) * 1000
            spread = f"  [{min(rounds[k]):.2f}-{max(rounds[k]):.2f}]"
            print(f"  {k:32} {m:6.2f} ms" + ("" if k == "direct" else f"  (+{m - base:.2f} ms, {m / base:.1f}x)")
                  + spread)
        argv, _ = cases["tier, sandbox enforce"]
        for tool, args in (("everything_echo", echo[1]),
                           ("everything_trigger-long-running-operation", {"duration": 0.2, "steps": 1})):
            s = Session(argv, env)
            s.batch(tool, args, 1)
            n = a.batches if tool.endswith("echo") else max(5, a.batches // 10)
            one = statistics.median(s.batch(tool, args, 1) for _ in range(n)) * 1000
            four = statistics.median(s.batch(tool, args, 4) for _ in range(n)) * 1000
            s.close()
            print(f"one session, sandboxed, {tool}: 1 call {one:.2f} ms, 4 at once {four:.2f} ms "
                  f"({four / one:.2f}x one; {n} batches each)")


if __name__ == "__main__":
    sys.exit(main())
