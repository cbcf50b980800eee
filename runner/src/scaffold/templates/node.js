#!/usr/bin/env node
// {{name}}: a tool for animaworks-tool in plain Node.js (protocol.md is the whole contract).
"use strict";

const SCHEMAS = {
  protocol: 1,
  name: "{{name}}",
  version: "0.1.0",
  description: "Echoes a text back.",
  events: true,
  actions: [
    {
      name: "echo",
      description: "Echo a text back.",
      input_schema: {
        type: "object",
        properties: { text: { type: "string", description: "The text to echo back", examples: ["hello"] } },
        required: ["text"],
      },
      // "sandbox": what the action needs beyond reading its own folder: none (protocol.md §2.4).
      profile: { expected_seconds: 1, hints: { read_only: true, idempotent: true }, sandbox: {} },
    },
  ],
};

const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");

function main() {
  if (process.argv[2] === "--schemas") {
    emit(SCHEMAS);
    return 0;
  }
  // Not process.stdin.isTTY: touching process.stdin makes descriptor 0 non-blocking, and the read below would
  // fail (EAGAIN) on a request that has not arrived yet.
  if (require("tty").isatty(0)) {
    process.stderr.write("{{name}}: a tool for animaworks-tool; run it through the runner: animaworks-tool {{name}} --help\n");
    return 2;
  }
  const req = JSON.parse(require("fs").readFileSync(0, "utf8").split("\n")[0]);
  const text = (req.args || {}).text || "";
  if (text.trim() === "") {
    emit({ type: "error", code: "empty_text", message: "the text is empty", hint: "pass a text with at least one character" });
    return 1;
  }
  emit({ type: "progress", progress: 1, total: 1, message: "echoing" });
  emit({ type: "result", result: { echo: text } });
  return 0;
}

process.exitCode = main();
