// client.mjs — drives `brig mcp` with the official MCP TypeScript SDK's
// client (tests/integration/test_mcp.py). The steps come as JSON on stdin:
//   {"command": [...], "cwd": DIR, "env": {...}, "steps": [STEP...]}
// STEP: {"tool": NAME, "arguments": {...}} | {"op": "listTools"} |
//       {"op": "listResources"} | {"op": "read", "uri": URI} |
//       {"op": "setLevel", "level": L}
// and prints one JSON document: the server's answers to initialize, each
// step's result (or {"error": message}), the notifications/message it
// sent, its pid and what it wrote on stderr.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const plan = JSON.parse(Buffer.concat(chunks).toString());

const transport = new StdioClientTransport({
  command: plan.command[0],
  args: plan.command.slice(1),
  cwd: plan.cwd,
  env: plan.env,
  stderr: "pipe",
});
let stderr = "";
transport.stderr.on("data", (d) => { stderr += d.toString(); });
const client = new Client({ name: "brig-test", version: "1.0.0" }, { capabilities: {} });
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });

const out = { steps: [] };
await client.connect(transport);
out.pid = transport.pid;
out.server = client.getServerVersion();
out.capabilities = client.getServerCapabilities();
out.protocolVersion = transport._protocolVersion ?? null;
const opts = { timeout: 180000, maxTotalTimeout: 180000 };
for (const step of plan.steps) {
  try {
    if (step.tool) out.steps.push(await client.callTool({ name: step.tool, arguments: step.arguments ?? {} }, undefined, opts));
    else if (step.op === "listTools") out.steps.push(await client.listTools());
    else if (step.op === "listResources") out.steps.push(await client.listResources());
    else if (step.op === "read") out.steps.push(await client.readResource({ uri: step.uri }));
    else if (step.op === "setLevel") out.steps.push(await client.setLoggingLevel(step.level));
    else throw new Error(`unknown step ${JSON.stringify(step)}`);
  } catch (e) {
    out.steps.push({ error: String(e && e.message ? e.message : e), code: e && e.code });
  }
}
await client.close();
out.logs = logs;
out.stderr = stderr;
process.stdout.write(JSON.stringify(out));
