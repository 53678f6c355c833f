// Drives devagent's wire mode through kimi-cli's Node SDK: one prompt with an external tool call
// (answered by the SDK's handler) and a shell command that needs approval (approved here).
// Usage: node drive.mjs EXECUTABLE WORK_DIR SESSION_ID ; prints one JSON summary line.
import { createSession, createExternalTool } from "@moonshot-ai/kimi-agent-sdk";
import { z } from "zod";

const [executable, workDir, sessionId] = process.argv.slice(2);
const calls = [];
const openInIde = createExternalTool({
  name: "open_in_ide",
  description: "Open file in IDE",
  parameters: z.object({ path: z.string() }),
  handler: async ({ path }) => {
    calls.push(path);
    return { output: `Opened ${path}`, message: "ok" };
  },
});

const session = createSession({ workDir, sessionId, executable, externalTools: [openInIde] });
const types = [];
const approvals = [];
const toolResults = [];
const errors = [];
let text = "";
const turn = session.prompt("open the readme, then run a command");
for await (const event of turn) {
  types.push(event.type);
  if (event.type === "error") errors.push(event);
  if (event.type === "ContentPart" && event.payload.type === "text") text += event.payload.text;
  if (event.type === "ToolResult") toolResults.push(event.payload);
  if (event.type === "ApprovalRequest") {
    approvals.push(event.payload);
    await turn.approve(event.payload.id, "approve");
  }
}
const result = await turn.result;
const slashCommands = (session.slashCommands ?? []).map((c) => c.name);
await session.close();
console.log(JSON.stringify({ result, types, approvals, toolResults, calls, text, errors, slashCommands }));
