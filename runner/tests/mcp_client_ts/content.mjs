// Drives `animaworks-tool mcp` with the official MCP TypeScript SDK client and prints the tools it listed and the
// result of one call, for runner/tests/it/mcp_content.rs to check. argv: BIN TOOL [ARGS_JSON].
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, tool, args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: bin, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "animaworks-tool-content-tests", version: "1" });
const errors = [];
client.onerror = (e) => errors.push(String(e));
await client.connect(transport);
const { tools } = await client.listTools();
const result = await client.callTool({ name: tool, arguments: JSON.parse(args || "{}") });
await client.close();
console.log(JSON.stringify({ tools, result, errors }));
