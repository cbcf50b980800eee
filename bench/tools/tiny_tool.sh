#!/usr/bin/env bash
# A tiny bash tool: `list` over 200 copies of it measures discovery and the schema cache, not the tools.
if [ "${1-}" = "--schemas" ]; then
  echo '{"protocol":1,"actions":[{"name":"ping","description":"Answer pong."}]}'
  exit 0
fi
read -r _ || true
echo '"pong"'
