"""tools/list over 200 tools (400 actions) with a warm schema cache: median round trip over raw JSON-RPC on the
server's stdio. Usage: python3 bench_tools_list.py target/release/animaworks-tool"""
import json, os, subprocess, sys, tempfile, time, statistics
binp = sys.argv[1]
tmp = tempfile.mkdtemp()
data, anima, core = f"{tmp}/data", f"{tmp}/animas/alice", f"{tmp}/core"
for d in (f"{data}/common_tools", f"{anima}/tools", core): os.makedirs(d)
for i in range(200):
    p = f"{data}/common_tools/tool{i:03d}.sh"
    schemas = [{"name": f"tool{i:03d}_{a}", "description": f"Action {a} of tool {i}.",
                "input_schema": {"type": "object", "properties": {"x": {"type": "string"}, "n": {"type": "integer"}}, "required": ["x"]}} for a in ("get", "put")]
    open(p, "w").write("#!/usr/bin/env bash\nif [ \"$1\" = --schemas ]; then cat <<'J'\n" + json.dumps(schemas) + "\nJ\nexit 0; fi\ncat >/dev/null; echo ok\n")
    os.chmod(p, 0o755)
env = dict(PATH=os.environ["PATH"], HOME=tmp, ANIMAWORKS_DATA_DIR=data, ANIMAWORKS_ANIMA_DIR=anima, ANIMAWORKS_CORE_TOOLS=core)
subprocess.run([binp, "tools"], env=env, capture_output=True, check=True)  # warm the schema cache
p = subprocess.Popen([binp, "mcp"], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def rpc(obj):
    p.stdin.write((json.dumps(obj) + "\n").encode()); p.stdin.flush()
def read_reply(i):
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i: return m
rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
read_reply(0)
rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
times = []
for i in range(1, 52):
    t = time.perf_counter()
    rpc({"jsonrpc": "2.0", "id": i, "method": "tools/list"})
    r = read_reply(i)
    times.append((time.perf_counter() - t) * 1000)
    assert len(r["result"]["tools"]) == 400, len(r["result"]["tools"])
times = times[1:]
print(f"tools/list, 200 tools / 400 actions, warm cache: median {statistics.median(times):.2f} ms, min {min(times):.2f}, max {max(times):.2f} (n={len(times)})")
p.stdin.close(); p.wait()
