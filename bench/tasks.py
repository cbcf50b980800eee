#!/usr/bin/env python3
"""Background tasks on both stores, side by side in one run: submit latency, submit→claim and claim→start latency,
and tasks per second with 1, 2 and 4 workers running a tool that takes 50 ms (BENCH_TASK_SLEEP), against the
tool-bound ideal of workers / 50 ms.

Usage: bench/tasks.py [--bin target/release/animaworks-tool] [--submits N] [--tasks N]

Postgres: a throwaway cluster (initdb + postgres as the `postgres` user when run as root), default durability
(fsync on, synchronous_commit on), on a free local port over TCP, in a temporary folder removed at the end.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TOOL = r"""#!/usr/bin/env bash
if [ "$1" = --schemas ]; then echo '{"protocol":1,"actions":[{"name":"ping","profile":{"background_eligible":true}}]}'; exit 0; fi
date +%s.%N > "$(dirname "$ANIMAWORKS_ANIMA_DIR")/starts/$ANIMAWORKS_CALL_ID"
cat >/dev/null
sleep "${BENCH_TASK_SLEEP:-0.05}"
echo '{"type":"result","result":"pong"}'
"""


def pg_bin() -> Path:
    for d in [*(os.environ.get("PATH", "").split(":")), "/usr/local/bin",
              *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]:
        if d and (Path(d) / "initdb").is_file() and (Path(d) / "postgres").is_file():
            return Path(d)
    sys.exit("no initdb/postgres found (apt-get install postgresql)")


class Cluster:
    def __init__(self, tmp: Path):
        b = pg_bin()
        self.dir = tmp / "pg"
        (self.dir / "data").mkdir(parents=True)
        (self.dir / "sock").mkdir()
        os.chmod(tmp, 0o755)
        as_pg: dict = {}
        if os.geteuid() == 0:
            import pwd
            pw = pwd.getpwnam("postgres")
            for p in (self.dir, self.dir / "data", self.dir / "sock"):
                os.chown(p, pw.pw_uid, pw.pw_gid)
            as_pg = {"user": pw.pw_uid, "group": pw.pw_gid}
        subprocess.run([b / "initdb", "-D", self.dir / "data", "-A", "trust", "-U", "postgres", "--no-locale",
                        "-E", "UTF8"], check=True, stdout=subprocess.DEVNULL, **as_pg)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.proc = subprocess.Popen([b / "postgres", "-D", self.dir / "data", "-p", str(self.port), "-k",
                                      self.dir / "sock", "-c", "listen_addresses=127.0.0.1", "-c",
                                      "max_connections=200"], stdout=subprocess.DEVNULL,
                                     stderr=open(self.dir / "log", "w"), **as_pg)
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", self.port)).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.5)
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait()


class World:
    def __init__(self, root: Path, backend: str, url: str | None, limit: int):
        self.root = root
        self.data = root / "data"
        self.animas = root / "animas"
        self.anima = self.animas / "alice"
        for d in (self.data / "common_tools", self.anima / "tools", root / "core", self.animas / "starts"):
            d.mkdir(parents=True, exist_ok=True)
        t = self.data / "common_tools" / "t"
        t.write_text(TOOL)
        t.chmod(0o755)
        cfg: dict = {"max_running_tasks": limit}
        if backend == "postgres":
            cfg["tasks"] = {"backend": "postgres", "url": url, "poll_s": 1}
        (self.data / "animaworks-tool.json").write_text(json.dumps(cfg))

    def env(self) -> dict:
        return {"PATH": os.environ["PATH"], "HOME": str(self.root), "ANIMAWORKS_DATA_DIR": str(self.data),
                "ANIMAWORKS_ANIMA_DIR": str(self.anima), "ANIMAWORKS_CORE_TOOLS": str(self.root / "core")}


def run(bin_: Path, w: World, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([str(bin_), *args], env=w.env(), capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit(f"{args}: {p.returncode}: {p.stdout} {p.stderr}")
    return p


def tasks(bin_: Path, w: World) -> list[dict]:
    return json.loads(run(bin_, w, "jobs", "list", "--json").stdout)


def wait_all(bin_: Path, w: World, n: int, timeout: float = 600) -> list[dict]:
    end = time.time() + timeout
    while time.time() < end:
        ts = tasks(bin_, w)
        if len(ts) >= n and all(t["status"] not in ("pending", "running") for t in ts):
            return ts
        time.sleep(0.2)
    sys.exit("tasks did not finish")


def start_workers(bin_: Path, w: World, n: int, concurrency: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([str(bin_), "worker", "--concurrency", str(concurrency), "--animas-dir", str(w.animas)],
                             env=w.env(), stdout=subprocess.DEVNULL, stderr=open(w.root / f"worker{i}.log", "w"))
            for i in range(n)]


def stop_workers(ws: list[subprocess.Popen]) -> None:
    for p in ws:
        p.send_signal(signal.SIGTERM)
    for p in ws:
        p.wait()


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.1f} ms (p90 {sorted(xs)[int(len(xs) * 0.9)] * 1000:.1f})"


def latencies(bin_: Path, w: World, backend: str, submits: int) -> dict:
    """Each submit timed alone, the previous task finished first, so that a worker is idle and waiting."""
    sub, to_claim, to_start = [], [], []
    for _ in range(submits):
        t0 = time.perf_counter()
        p = run(bin_, w, "submit", "t", "ping", "--json", "{}")
        sub.append(time.perf_counter() - t0)
        tid = json.loads(p.stdout)["task_id"]
        run(bin_, w, "jobs", "wait", tid)
        t = json.loads(run(bin_, w, "jobs", "show", tid).stdout)
        started = float((w.animas / "starts" / tid).read_text())
        to_claim.append(t["started_at"] - t["created_at"])
        to_start.append(started - t["started_at"])
    return {"submit": ms(sub), "submit→claim": ms(to_claim), "claim→start": ms(to_start)}


def throughput(bin_: Path, tmp: Path, backend: str, url: str | None, workers: int, n: int) -> float:
    w = World(tmp / f"{backend}-tp{workers}", backend, url, limit=workers)
    procs: list[subprocess.Popen] = []
    if backend == "postgres":
        run(bin_, w, "jobs", "prune", "--older-than", "0s")
    for _ in range(n):
        run(bin_, w, "submit", "t", "ping", "--json", "{}")
    if backend == "postgres":
        # Queued first, then the workers: the queue drains with nothing else going on.
        procs = start_workers(bin_, w, workers, 1)
    ts = wait_all(bin_, w, n)
    stop_workers(procs)
    if backend == "postgres":
        run(bin_, w, "jobs", "prune", "--older-than", "0s")
    first = min(t["started_at"] for t in ts)
    last = max(t["completed_at"] for t in ts)
    bad = [t for t in ts if t["status"] != "completed"]
    if bad:
        sys.exit(f"{len(bad)} tasks did not complete: {bad[0]}")
    return n / (last - first)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(ROOT / "target/release/animaworks-tool"))
    ap.add_argument("--submits", type=int, default=50)
    ap.add_argument("--tasks", type=int, default=200)
    a = ap.parse_args()
    bin_ = Path(a.bin)
    tmp = Path(tempfile.mkdtemp(prefix="awt-bench-tasks-"))
    cluster = Cluster(tmp)
    out: dict = {"machine": {"cpus": os.cpu_count(), "load": os.getloadavg()[0]}}
    try:
        for backend in ("files", "postgres"):
            url = cluster.url if backend == "postgres" else None
            w = World(tmp / f"{backend}-lat", backend, url, limit=4)
            procs = []
            if backend == "postgres":
                run(bin_, w, "jobs", "migrate")
                procs = start_workers(bin_, w, 1, 4)
                time.sleep(0.5)
            for _ in range(3):
                tid = json.loads(run(bin_, w, "submit", "t", "ping", "--json", "{}").stdout)["task_id"]
                run(bin_, w, "jobs", "wait", tid)
            res = latencies(bin_, w, backend, a.submits)
            stop_workers(procs)
            for k in (1, 2, 4):
                res[f"tasks/s, {k} worker(s)"] = f"{throughput(bin_, tmp, backend, url, k, a.tasks):.0f}"
            out[backend] = res
            print(backend, json.dumps(res, ensure_ascii=False), flush=True)
    finally:
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    dest = ROOT / "bench" / "out"
    dest.mkdir(exist_ok=True)
    (dest / "tasks.json").write_text(json.dumps(out, indent=1, ensure_ascii=False))
    rows = ["submit", "submit→claim", "claim→start", *[f"tasks/s, {k} worker(s)" for k in (1, 2, 4)]]
    sleep = float(os.environ.get("BENCH_TASK_SLEEP", "0.05"))
    print(f"\n| | files | postgres | tool-bound ideal |\n|---|---|---|---|")
    for r in rows:
        ideal = f"{int(r.split(', ')[1][0]) / sleep:.0f}" if r.startswith("tasks/s") else ""
        print(f"| {r} | {out['files'][r]} | {out['postgres'][r]} | {ideal} |")


if __name__ == "__main__":
    main()
