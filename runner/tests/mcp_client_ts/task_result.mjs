// Reads a background task's result through `animaworks-tool mcp` with the official MCP TypeScript SDK client
// (tasks/result), for runner/tests/it/tasks_pg.rs to check. argv: BIN TASK_ID.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [bin, taskId] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: bin, args: ["mcp"], env: { ...process.env }, stderr: "inherit" });
const client = new Client({ name: "animaworks-tool-task-tests", version: "1" }, { capabilities: { tasks: {} } });
const errors = [];
client.onerror = (e) => errors.push(String(e));
await client.connect(transport);
const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
await client.close();
console.log(JSON.stringify({ result, errors }));
