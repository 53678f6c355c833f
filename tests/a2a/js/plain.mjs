// A generic A2A client: @a2a-js/sdk's A2AClient without the development-tool extension, keeping
// only the contextId between messages (as the A2A Inspector and a2a-handler do). It sends a
// prompt, reads the question, answers "yes" on the context alone, and prints everything a chat UI
// would show: each status message's text and each artifact chunk's text, in order.
// Usage: node plain.mjs BASE_URL TOKEN ; prints a JSON summary on stdout.
import { A2AClient } from "@a2a-js/sdk/client";
import { randomUUID } from "node:crypto";

const [base, token] = process.argv.slice(2);
const authedFetch = (url, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};
const client = await A2AClient.fromCardUrl(`${base}.well-known/agent-card.json`, { fetchImpl: authedFetch });

const shown = (ev) => {
  if (ev.kind === "status-update") {
    const text = (ev.status?.message?.parts || []).map((p) => p.text || "").join("");
    return { kind: "status", state: ev.status.state, final: ev.final, text };
  }
  if (ev.kind === "artifact-update") {
    const text = (ev.artifact?.parts || []).map((p) => p.text || "").join("");
    return { kind: "artifact", name: ev.artifact.name, append: ev.append, lastChunk: ev.lastChunk, text };
  }
  return { kind: ev.kind, state: ev.status?.state };
};

const out = { first: [], second: [] };
let contextId, firstTask;
for await (const ev of client.sendMessageStream({
  message: { kind: "message", messageId: randomUUID(), role: "user", parts: [{ kind: "text", text: "write hello" }] },
})) {
  if (ev.kind === "task") { contextId = ev.contextId; firstTask = ev.id; }
  out.first.push(shown(ev));
}
for await (const ev of client.sendMessageStream({
  message: { kind: "message", messageId: randomUUID(), role: "user", contextId, parts: [{ kind: "text", text: "yes" }] },
})) {
  out.second.push({ ...shown(ev), taskId: ev.taskId ?? ev.id });
}
out.firstTask = firstTask;
out.final = (await client.getTask({ id: firstTask })).result?.status?.state;
console.log(JSON.stringify(out));
