#!/usr/bin/env bash
# Runs every test of the repository: the Rust workspace (unit, integration, cross-language) and the Python SDK,
# then prints one line counting what ran: `N passed, N failed, N skipped`.
# Needs the Rust toolchain and Python 3 (>= 3.10) with venv (Debian: python3-venv). The Python test tools (pytest,
# the MCP SDK) go into a virtual environment of their own, target/test-venv; the system Python is not touched.
# With npm (Node 18 or newer), the MCP TypeScript SDK client goes into runner/tests/mcp_client_ts/node_modules.
set -uo pipefail
cd "$(dirname "$0")"

venv=target/test-venv
if [ ! -x "$venv/bin/python3" ]; then
  mkdir -p target
  python3 -m venv "$venv" || { echo "test.sh: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 2; }
fi
# pytest and the MCP SDK, pinned; the Rust tests that run python3 find this one first on PATH.
"$venv/bin/python3" -m pip install -q --disable-pip-version-check pytest==8.4.2 -r runner/tests/mcp_client/requirements.txt ||
  { echo "test.sh: installing the Python test tools into $venv failed" >&2; exit 2; }
PATH="$PWD/$venv/bin:$PATH"
export PATH
# The MCP TypeScript SDK client, exactly as its lockfile pins it, into runner/tests/mcp_client_ts/node_modules;
# reinstalled only when the lockfile changed. Without npm the TypeScript client's test skips (fails under CI=true).
ts=runner/tests/mcp_client_ts
if command -v npm >/dev/null 2>&1; then
  if [ "$ts/package-lock.json" -nt "$ts/node_modules/.package-lock.json" ]; then
    (cd "$ts" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
      { echo "test.sh: npm ci in $ts failed" >&2; exit 2; }
  fi
else
  echo "test.sh: npm not found; the MCP TypeScript client test is skipped (Debian: apt-get install npm)" >&2
fi

# The official MCP reference server that runner/tests/it/mcp_servers.rs runs as a tool (pinned; npm registry).
if command -v npm >/dev/null 2>&1 \
  && [ ! -f target/npm-mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/package.json ]; then
  npm install --no-audit --no-fund --silent --prefix target/npm-mcp-servers \
    @modelcontextprotocol/server-filesystem@2026.8.31
fi

log=$(mktemp)
# A Rust test that lacks a requirement here (a kernel feature, a program, a server) returns early after adding its
# name to this file (awt_sys::skipped!): it is counted as skipped, not passed. Under CI=true it fails instead.
skips=$(mktemp)
export AWT_TEST_SKIPS="$skips"
trap 'rm -f "$log" "$skips"' EXIT
status=0
# Each stage's output is shown and kept in $log, whose summaries are counted at the end.
stage() { "$@" 2>&1 | tee -a "$log"; local s=${PIPESTATUS[0]}; [ "$s" = 0 ] || status=$s; return "$s"; }

cargo build --workspace --quiet || exit $?
# The six real MCP servers runner/tests/it/mcp_real_servers.rs runs confined, declared as users copy them (npx,
# uvx) and pinned in runner/tests/mcp_real_servers/animaworks-tool.json, installed by the runner's own
# `mcp-servers install` (npm, PyPI) into target/mcp-real-servers; kept while each lock matches its declaration.
if command -v npm >/dev/null 2>&1; then
  real=target/mcp-real-servers
  mkdir -p "$real" && cp runner/tests/mcp_real_servers/animaworks-tool.json "$real/animaworks-tool.json"
  target/debug/animaworks-tool --data-dir "$real" mcp-servers install >/dev/null ||
    echo "test.sh: installing the real MCP servers failed; their tests skip (fail under CI=true)" >&2
fi
stage cargo test --workspace --quiet --no-fail-fast
stage python3 -m pytest tool-sdk-py -q -W error -p no:cacheprovider
# The crate docs name the real functions of a call's path: a broken or private intra-doc link fails the run.
RUSTDOCFLAGS="-D warnings" stage cargo doc --workspace --no-deps --quiet

# cargo: "test result: ok. 12 passed; 0 failed; 3 ignored; ..." per test binary; pytest: "3 passed, 1 skipped in 0.2s".
summary=$(python3 - "$log" "$skips" <<'EOF'
import re, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
n = {"passed": 0, "failed": 0, "skipped": 0}
for m in re.finditer(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored;", text, re.M):
    n["passed"] += int(m[1]); n["failed"] += int(m[2]); n["skipped"] += int(m[3])
# Rust tests that returned early for want of a requirement: cargo counted them as passed (one line per skip, a
# test that skipped two parts counts once; one that skipped and then failed was counted failed by cargo).
failed = set(re.findall(r"^---- (\S+) stdout ----$", text, re.M))
lines = {l for l in open(sys.argv[2], encoding="utf-8", errors="replace").read().splitlines() if " " in l}
k = len({l for l in lines if l.split(" ", 1)[1] not in failed})
n["passed"] -= k; n["skipped"] += k
for line in re.findall(r"^=*\s*(\d+ (?:passed|failed|skipped|error|errors|xfailed|xpassed|deselected)\b.* in [\d.]+s.*)$", text, re.M):
    for count, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", line):
        key = {"error": "failed", "errors": "failed", "xfailed": "skipped", "xpassed": "passed"}.get(word, word)
        n[key] += int(count)
print(f"{n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped")
EOF
)
echo "$summary"
# A stage that failed without a failing test (a build error, a doc warning) still fails the run.
exit "$status"
