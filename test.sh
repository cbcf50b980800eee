#!/usr/bin/env bash
# Runs every test of the repository: the Rust workspace (unit, integration, cross-language) and the Python SDK.
# Needs the Rust toolchain and Python 3 (>= 3.10); installs the Python test dependencies with pip.
set -euo pipefail
cd "$(dirname "$0")"

python3 -m pytest --version >/dev/null 2>&1 || python3 -m pip install -q pytest
if [ -f runner/tests/mcp_client/requirements.txt ]; then
  python3 -m pip install -q -r runner/tests/mcp_client/requirements.txt
fi

# The official MCP reference server that runner/tests/it/mcp_servers.rs runs as a tool (pinned; npm registry).
if command -v npm >/dev/null 2>&1 \
  && [ ! -f target/npm-mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/package.json ]; then
  npm install --no-audit --no-fund --silent --prefix target/npm-mcp-servers \
    @modelcontextprotocol/server-filesystem@2026.8.31
fi

cargo build --workspace --quiet
cargo test --workspace --quiet 2>&1
python3 -m pytest tool-sdk-py -q -W error
# The crate docs name the real functions of a call's path: a broken or private intra-doc link fails the run.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
