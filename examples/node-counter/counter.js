#!/usr/bin/env node
// counter: an animaworks-tool tool in plain Node.js (no SDK, no npm packages; protocol.md is the contract).
// Counts the characters, words and lines of a text, in Unicode code points, reporting progress per line.
"use strict";

const SCHEMAS = {
  protocol: 1,
  name: "counter",
  version: "0.1.0",
  description: "Counts characters (Unicode code points), words and lines; an example tool in plain Node.js.",
  events: true,
  actions: [
    {
      name: "count",
      description: "Count the characters, words and lines of a text; the most frequent character comes back too.",
      input_schema: {
        type: "object",
        properties: {
          text: { type: "string", description: "The text to count", examples: ["こんにちは world"] },
          ignore_spaces: { type: "boolean", default: false, description: "Leave whitespace out of the character count" },
        },
        required: ["text"],
      },
      profile: { expected_seconds: 1, hints: { read_only: true, idempotent: true } },
    },
  ],
};

const emit = (event) => process.stdout.write(JSON.stringify(event) + "\n");

class ToolError extends Error {
  constructor(code, message, hint) {
    super(message);
    this.code = code;
    this.hint = hint;
  }
}

function count(args) {
  const text = args.text;
  if (text.trim() === "") {
    throw new ToolError("empty_text", "there is nothing to count: the text is empty or only whitespace", "pass a text with at least one word");
  }
  const lines = text.split("\n");
  const freq = new Map();
  let chars = 0;
  lines.forEach((line, i) => {
    // Iterating a string yields code points, so "🦀" counts once, not as two UTF-16 units.
    for (const ch of line) {
      if (args.ignore_spaces && /\s/u.test(ch)) continue;
      chars += 1;
      freq.set(ch, (freq.get(ch) || 0) + 1);
    }
    emit({ type: "progress", progress: i + 1, total: lines.length, message: `line ${i + 1} of ${lines.length}` });
  });
  if (!args.ignore_spaces) chars += lines.length - 1;
  let top = null;
  for (const [ch, n] of freq) if (top === null || n > top.count) top = { char: ch, count: n };
  return { chars, words: text.split(/\s+/u).filter(Boolean).length, lines: lines.length, most_frequent: top };
}

function main() {
  if (process.argv[2] === "--schemas") {
    process.stdout.write(JSON.stringify(SCHEMAS) + "\n");
    return 0;
  }
  // Not process.stdin.isTTY: touching process.stdin makes descriptor 0 non-blocking, and the read below would
  // fail (EAGAIN) on a request that has not arrived yet.
  if (require("tty").isatty(0)) {
    process.stderr.write("counter: an animaworks-tool tool; run it through the runner: animaworks-tool counter --help\n");
    return 2;
  }
  let input = "";
  try {
    input = require("fs").readFileSync(0, "utf8");
  } catch (e) {
    process.stderr.write(`counter: cannot read the request: ${e.message}\n`);
    return 2;
  }
  let req;
  try {
    req = JSON.parse(input.split("\n")[0]);
  } catch (e) {
    emit({ type: "error", code: "bad_request", message: `the request is not JSON: ${e.message}` });
    return 1;
  }
  const action = req.context && req.context.action ? req.context.action : String(req.name).replace(/^counter_/, "");
  try {
    if (action !== "count") throw new ToolError("unknown_action", `counter has no action "${action}"`, "see counter --schemas");
    emit({ type: "result", result: count(req.args || {}) });
    return 0;
  } catch (e) {
    if (e instanceof ToolError) {
      emit({ type: "error", code: e.code, message: e.message, hint: e.hint });
      return 1;
    }
    process.stderr.write(`${e.stack}\n`);
    emit({ type: "error", code: "internal", message: String(e.message) });
    return 1;
  }
}

process.exitCode = main();
