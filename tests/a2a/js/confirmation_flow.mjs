// Drives devagent's A2A server through the RFC appendix flow with @a2a-js/sdk's A2AClient.
// Usage: node confirmation_flow.mjs BASE_URL TOKEN WORKSPACE ; prints a JSON summary on stdout.
import { A2AClient } from "@a2a-js/sdk/client";
import { randomUUID } from "node:crypto";

const [base, token, workspace] = process.argv.slice(2);
const EXT = "https://github.com/google-gemini/gemini-cli/blob/main/docs/a2a/developer-profile/v0/spec.md";
const authedFetch = (url, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set("Authorization", `Bearer ${token}`);
  headers.set("X-A2A-Extensions", EXT);
  return fetch(url, { ...init, headers });
};

const client = await A2AClient.fromCardUrl(`${base}.well-known/agent-card.json`, { fetchImpl: authedFetch });
const card = await client.getAgentCard();
const out = { card: { name: card.name, extension: card.capabilities.extensions?.[0]?.uri }, first: [], second: [] };

const summarize = (ev) => {
  const meta = ev.metadata?.[EXT] ?? {};
  const part = ev.status?.message?.parts?.[0];
  return {
    kind: ev.kind,
    state: ev.status?.state,
    final: ev.final,
    devKind: meta.kind,
    data: part?.kind === "data" ? part.data : undefined,
    text: part?.kind === "text" ? part.text : undefined,
  };
};

let taskId, contextId;
for await (const ev of client.sendMessageStream({
  message: {
    kind: "message", messageId: randomUUID(), role: "user",
    parts: [{ kind: "text", text: "write the file" }],
    metadata: { [EXT]: { workspace_path: workspace } },
  },
})) {
  if (ev.kind === "task") { taskId = ev.id; contextId = ev.contextId; }
  out.first.push(summarize(ev));
}
const pending = out.first.filter((e) => e.devKind === "TOOL_CALL_UPDATE").at(-1).data;
for await (const ev of client.sendMessageStream({
  message: {
    kind: "message", messageId: randomUUID(), role: "user", taskId, contextId,
    parts: [{ kind: "data", data: { tool_call_id: pending.tool_call_id, selected_option_id: "proceed_once" } }],
  },
})) {
  out.second.push(summarize(ev));
}
const got = await client.getTask({ id: taskId });
out.final = got.result?.status?.state;
console.log(JSON.stringify(out));
