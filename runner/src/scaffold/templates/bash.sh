#!/usr/bin/env bash
# {{name}}: a tool for animaworks-tool in plain bash (protocol.md is the whole contract).
set -u

if [ "${1:-}" = --schemas ]; then
  cat <<'JSON'
{
  "protocol": 1,
  "name": "{{name}}",
  "version": "0.1.0",
  "description": "Echoes a text back.",
  "events": true,
  "actions": [
    {
      "name": "echo",
      "description": "Echo a text back.",
      "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "The text to echo back", "examples": ["hello"]}},
        "required": ["text"]
      },
      "profile": {"expected_seconds": 1, "hints": {"read_only": true, "idempotent": true}, "sandbox": {}}
    }
  ]
}
JSON
  exit 0
fi

if [ -t 0 ]; then
  echo "{{name}}: a tool for animaworks-tool; run it through the runner: animaworks-tool {{name}} --help" >&2
  exit 2
fi

# One request line on stdin; the runner has validated args against input_schema already.
IFS= read -r req || true
text=$(printf '%s' "$req" | sed -n -E 's/.*"args"[[:space:]]*:[[:space:]]*\{[^{}]*"text"[[:space:]]*:[[:space:]]*"(([^"\\]|\\.)*)".*/\1/p')

if [ -z "$text" ]; then
  printf '%s\n' '{"type":"error","code":"empty_text","message":"the text is empty","hint":"pass a text with at least one character"}'
  exit 1
fi
printf '%s\n' '{"type":"progress","progress":1,"total":1,"message":"echoing"}'
printf '{"type":"result","result":{"echo":"%s"}}\n' "$text"
