// Drives `animaworks-tool mcp` with the official MCP TypeScript SDK client (package.json pins it) and prints one
// JSON object of what it saw, for runner/tests/it/mcp_clients.rs to check.
// argv: BIN. Environment: the test world's (ANIMAWORKS_*), plus MCP_TEST_PIDFILE, where the `hang` action's pid
// appears, and MCP_TEST_PROGRESS_SEEN, written when the last progress step has reached onprogress.
import { readFileSync, existsSync, writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LoggingMessageNotificationSchema, McpError } from "@modelcontextprotocol/sdk/types.js";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function groupGone(pgid) {
  try {
    process.kill(-pgid, 0);
    return false;
  } catch (e) {
    return e.code === "ESRCH";
  }
}

async function tryCall(client, params) {
  try {
    return { raised: false, result: await client.callTool(params) };
  } catch (e) {
    if (e instanceof McpError) return { raised: true, code: e.code, message: e.message, data: e.data };
    return { raised: true, message: String(e) };
  }
}

// The package's exports map hides its package.json from import; the file is read instead.
const sdkPkg = new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url);
const out = { sdk: JSON.parse(readFileSync(sdkPkg, "utf8")).version };
// The SDK passes only HOME, PATH, ... by default; the server needs the world's ANIMAWORKS_* as well.
const transport = new StdioClientTransport({ command: process.argv[2], args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "animaworks-tool-tests", version: "1" });
const logs = [];
out.client_errors = [];
client.onerror = (e) => out.client_errors.push(String(e));
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  logs.push(n.params);
});
await client.connect(transport);

// Pagination: follow nextCursor until the last page. The SDK keeps the output-schema validators of the page it
// listed last only (each listTools replaces them); w's tools are on that page (`many` sorts first), and
// stamp_validated below says whether the client really held w_stamp's schema.
out.pages = [];
out.tools = [];
let cursor;
do {
  const page = await client.listTools(cursor === undefined ? {} : { cursor });
  out.pages.push(page.tools.length);
  out.tools.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor !== undefined && out.pages.length < 20);

out.greet = await client.callTool({ name: "w_greet", arguments: { who: "Ada" } });

out.progress = [];
out.steps = await client.callTool({ name: "w_steps", arguments: {} }, undefined, {
  onprogress: (p) => {
    out.progress.push([p.progress, p.total ?? null, p.message ?? null]);
    if (p.progress === p.total) writeFileSync(process.env.MCP_TEST_PROGRESS_SEEN, "");
  },
});

out.invalid = await tryCall(client, { name: "w_greet", arguments: { who: 3 } });
out.gated = await tryCall(client, { name: "w_purge", arguments: {} });

await client.setLoggingLevel("debug");
out.talk = await client.callTool({ name: "w_talk", arguments: {} });
// Notifications sent before the answer are handled before it; a short grace covers any scheduling.
for (let i = 0; i < 50 && logs.length < 2; i++) await sleep(20);
out.logs = logs;

// Structured output checked by the SDK's AJV validator (with ajv-formats: `date-time` is asserted).
const validator = client.getToolOutputValidator?.("w_stamp");
out.stamp_validated = typeof validator === "function";
// The same validator refuses a value that is not a date-time: the formats are asserted, not just annotations.
out.stamp_refuses_bad_date = out.stamp_validated && validator({ at: "yesterday" }).valid === false;
out.stamp = await tryCall(client, { name: "w_stamp", arguments: {} });

// Cancel: abort the call once the tool runs; the SDK sends notifications/cancelled.
const pidfile = process.env.MCP_TEST_PIDFILE;
const ac = new AbortController();
const hung = client.callTool({ name: "w_hang", arguments: {} }, undefined, { signal: ac.signal, timeout: 120000 });
const hungDone = hung.then(() => "answered", (e) => `rejected: ${e?.message ?? e}`);
while (!(existsSync(pidfile) && readFileSync(pidfile, "utf8").trim())) await sleep(20);
ac.abort("the test cancels");
out.hang_outcome = await hungDone;
out.hang_pgid = parseInt(readFileSync(pidfile, "utf8").trim(), 10);
out.hang_group_gone = false;
for (let i = 0; i < 750 && !out.hang_group_gone; i++) {
  out.hang_group_gone = groupGone(out.hang_pgid);
  if (!out.hang_group_gone) await sleep(20);
}

out.after_cancel = await client.callTool({ name: "w_greet", arguments: { who: "again" } });
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
