// The client-tools design's workflow (client-tools-via-datapart) against devagent, with
// @a2a-js/sdk's A2AClient: tool definitions in a DataPart, the send / execute locally / send the
// results loop. Round "design" is the design's A2AClientAgent as written, sloppy parts included
// (the message passed as the params, no messageId, no taskId, results as `Tool results: [...]`
// text); round "structured" sends `{message}` params and a `tool_results` DataPart with the call
// ids (still without taskId).
// Usage: node client_tools.mjs BASE_URL TOKEN ; prints a JSON summary on stdout.
import { A2AClient } from "@a2a-js/sdk/client";
import { randomUUID } from "node:crypto";

const [base, token] = process.argv.slice(2);
const authedFetch = (url, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set("Authorization", `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

// The design's two sample tools, verbatim. devagent has a built-in read_file, so it refuses the
// client's (C6) and says so.
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather information for a given location",
    parameters: {
      type: "object",
      properties: {
        location: { type: "string", description: "The city and state, e.g. San Francisco, CA" },
        unit: { type: "string", enum: ["celsius", "fahrenheit"], description: "The temperature unit to use" },
      },
      required: ["location"],
    },
  },
};
const readFileTool = {
  type: "function",
  function: {
    name: "read_file",
    description: "Read contents from a file",
    parameters: {
      type: "object",
      properties: {
        file_path: { type: "string", description: "Absolute path to the file" },
        encoding: { type: "string", enum: ["utf-8", "ascii", "base64"], description: "File encoding" },
      },
      required: ["file_path"],
    },
  },
};
const tools = [weatherTool, readFileTool];

// The local tool implementation.
const executed = [];
async function executeToolLocally(toolCall) {
  const { name, args } = toolCall;
  executed.push({ name, args });
  switch (name) {
    case "get_weather":
      if (args.location.startsWith("Atlantis")) throw new Error(`unknown location: ${args.location}`);
      return { location: args.location, temperature: 18, unit: args.unit || "celsius" };
    default:
      throw new Error(`Unknown tool: ${name}`);
  }
}

// What the design's `parseA2AMessageForLangChain` does, for devagent's replies: the calls are in
// the `tool_calls` DataPart of the task's status; the answer is the task's latest `reply`
// artifact (where A2A puts results; a client without the extension gets it once, there).
const rejections = [];
function parse(task) {
  const parts = task.status?.message?.parts ?? [];
  const calls = parts.find((p) => p.kind === "data" && p.data?.tool_calls)?.data.tool_calls ?? [];
  for (const m of task.history ?? []) {
    const report = m.parts.find((p) => p.kind === "data" && p.metadata?.type === "tool-definitions-rejected");
    if (report) rejections.push(...report.data.rejected_tools); // a notice, not the answer
  }
  const replies = (task.artifacts ?? []).filter((a) => a.name === "reply");
  const last = replies[replies.length - 1];
  const content = last ? last.parts.filter((p) => p.kind === "text").map((p) => p.text).join("") : "";
  return { toolCalls: calls, content, state: task.status.state };
}

const buildMessage = (text) => ({
  kind: "message",
  role: "user",
  parts: [
    { kind: "text", text },
    { kind: "data", data: { tools }, metadata: { type: "tool-definitions", format: "langchain" } },
  ],
});

const client = await A2AClient.fromCardUrl(`${base}.well-known/agent-card.json`, { fetchImpl: authedFetch });
const out = {};

// Round "design": the design's sendMessageWithTools loop.
{
  const rounds = [];
  let currentMessage = buildMessage("What's the weather in SF and in Atlantis?");
  currentMessage.parts[1].metadata.count = tools.length;
  let maxIterations = 5;
  let answer = null;
  while (maxIterations-- > 0) {
    const response = await client.sendMessage(currentMessage); // the message as the params
    if (response.error) throw new Error(JSON.stringify(response.error));
    const parsed = parse(response.result);
    rounds.push({ state: parsed.state, calls: parsed.toolCalls, taskId: response.result.id });
    if (parsed.toolCalls.length === 0) {
      answer = parsed.content;
      break;
    }
    const toolResults = [];
    for (const toolCall of parsed.toolCalls) {
      try {
        toolResults.push({ name: toolCall.name, result: await executeToolLocally(toolCall) });
      } catch (error) {
        toolResults.push({ name: toolCall.name, error: error.message });
      }
    }
    currentMessage = buildMessage(`Tool results: ${JSON.stringify(toolResults)}`);
  }
  out.design = { rounds, answer };
}

// Round "structured": proper params, results by id in a DataPart, still no taskId.
{
  const rounds = [];
  let message = { ...buildMessage("Weather again, please"), messageId: randomUUID() };
  let answer = null;
  for (let i = 0; i < 5; i++) {
    const response = await client.sendMessage({ message });
    if (response.error) throw new Error(JSON.stringify(response.error));
    const parsed = parse(response.result);
    rounds.push({ state: parsed.state, calls: parsed.toolCalls, taskId: response.result.id });
    if (parsed.toolCalls.length === 0) {
      answer = parsed.content;
      break;
    }
    const results = [];
    for (const call of parsed.toolCalls) {
      try {
        results.push({ tool_call_id: call.id, name: call.name, result: await executeToolLocally(call) });
      } catch (error) {
        results.push({ tool_call_id: call.id, name: call.name, error: error.message });
      }
    }
    message = {
      kind: "message",
      messageId: randomUUID(),
      role: "user",
      parts: [{ kind: "data", data: { tool_results: results }, metadata: { type: "tool-results" } }],
    };
  }
  out.structured = { rounds, answer };
}

// A result for a call nobody waits for: a JSON-RPC error.
try {
  const bad = await client.sendMessage({
    message: {
      kind: "message", messageId: randomUUID(), role: "user",
      parts: [{ kind: "data", data: { tool_results: [{ tool_call_id: "nobody", name: "get_weather", result: 1 }] } }],
    },
  });
  out.unknown = bad.error ?? { unexpected: bad.result };
} catch (e) {
  out.unknown = { code: e.code ?? e.errorCode, message: e.message };
}
out.executed = executed;
out.rejections = rejections;
console.log(JSON.stringify(out));
