#!/usr/bin/env bash
# issue 6 §5: a trivial legacy Python tool through a warm persistent worker vs spawn per call, median of
# BENCH_CALLS (default 200) calls each, release build. Measured through the library (Runner::call), which is what
# the MCP server's tools/call runs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p animaworks-tool --bench worker_latency "$@"
