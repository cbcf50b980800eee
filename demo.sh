#!/usr/bin/env bash
# Builds animaworks-tool and calls the bundled example tools: bash and Node.js (no SDK), Python on tool-sdk-py,
# an AnimaWorks-style legacy module, and Rust on tool-sdk-rs. Everything happens in a temporary data dir.
set -euo pipefail
cd "$(dirname "$0")"
repo=$PWD

echo "== building (cargo build --release)"
# Apart, as `cargo install --path runner` builds the runner (built together, shared dependencies get other
# features).
cargo build --release --quiet -p animaworks-tool
cargo build --release --quiet -p rust-hello
bin=$repo/target/release/animaworks-tool

world=$(mktemp -d)
trap 'rm -rf "$world"' EXIT
export ANIMAWORKS_DATA_DIR=$world/data
export ANIMAWORKS_ANIMA_DIR=$world/animas/alice
export ANIMAWORKS_CORE_TOOLS=$world/core
mkdir -p "$ANIMAWORKS_DATA_DIR/common_tools" "$ANIMAWORKS_ANIMA_DIR/tools" "$ANIMAWORKS_CORE_TOOLS"
cp examples/bash-weather/weather.sh "$ANIMAWORKS_CORE_TOOLS/"
cp examples/python-progress/progress_tool.py "$ANIMAWORKS_DATA_DIR/common_tools/"
ln -s "$repo/target/release/rust-hello" "$ANIMAWORKS_DATA_DIR/common_tools/rust-hello"
cp examples/legacy-notes/legacy_notes.py "$ANIMAWORKS_ANIMA_DIR/tools/"
if command -v node >/dev/null; then
  cp examples/node-counter/counter.js "$ANIMAWORKS_ANIMA_DIR/tools/"
else
  echo "(node not found: the Node.js example is skipped)"
fi

run() { echo; echo "\$ animaworks-tool $*"; "$bin" "$@" || echo "(exit code $?)"; }

run tools
run weather forecast --city tokyo --days 2
run progress_tool count-words --text "the quick brown fox jumps over the lazy dog the end" --steps 3
run rust-hello greet --who Ada
if command -v node >/dev/null; then run counter count --text "こんにちは world"; fi
run call legacy_notes add --json '{"title": "first note"}'
run legacy_notes list -j
run legacy_notes purge-all --yes
echo '{"external_tools": {"allow_all": true, "allow": ["legacy_notes_purge-all"]}}' > "$ANIMAWORKS_ANIMA_DIR/permissions.json"
echo "(granted legacy_notes_purge-all in permissions.json)"
run legacy_notes purge-all --yes -j
run weather forecast --city nowhere
run weather forecast --days 9 --city tokyo
echo
echo "audit log: $(wc -l < "$ANIMAWORKS_ANIMA_DIR/state/tool_audit.jsonl") lines in \$ANIMAWORKS_ANIMA_DIR/state/tool_audit.jsonl"
