// Drives `devagent acp` with the official TypeScript ACP client (@agentclientprotocol/sdk).
// Usage: node drive.mjs SCENARIO CONFIG_JSON ; prints one JSON summary line on stdout.
//   SCENARIO "main": initialize (fs offered), session/new, three prompts: a permission allowed (the
//     read goes through fs/read_text_file, the write through fs/write_text_file), a permission
//     rejected, a running command cancelled with session/cancel.
//   SCENARIO "load": initialize, session/load of CONFIG.sessionId, the replayed history, one more prompt.
//   SCENARIO "list": initialize, then session/list for each of CONFIG.listCwds (null: all sessions),
//     following nextCursor to the end: the pages of each.
// CONFIG: {argv: [...], cwd, env, answers: [optionId...], buffers: {path: text}, sessionId, listCwds}
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { client, methods, ndJsonStream, PROTOCOL_VERSION } from "@agentclientprotocol/sdk";

const [scenario, configJson] = process.argv.slice(2);
const config = JSON.parse(configJson);
const child = spawn(config.argv[0], config.argv.slice(1), {
  cwd: config.cwd,
  env: config.env,
  stdio: ["pipe", "pipe", "inherit"],
});
const stream = ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const updates = [];
const permissions = [];
const reads = [];
const writes = [];
const answers = [...(config.answers ?? [])];
const buffers = { ...(config.buffers ?? {}) };
let onUpdate = () => {};

const app = client({ name: "devagent-acp-test" })
  .onNotification(methods.client.session.update, ({ params }) => {
    updates.push(params.update);
    onUpdate(params.update);
  })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    permissions.push(params);
    const optionId = answers.shift();
    return optionId ? { outcome: { outcome: "selected", optionId } } : { outcome: { outcome: "cancelled" } };
  })
  .onRequest(methods.client.fs.readTextFile, ({ params }) => {
    reads.push(params.path);
    if (!(params.path in buffers)) throw new Error(`no buffer for ${params.path}`);
    return { content: buffers[params.path] };
  })
  .onRequest(methods.client.fs.writeTextFile, ({ params }) => {
    writes.push([params.path, params.content]);
    buffers[params.path] = params.content;
    writeFileSync(params.path, params.content); // the editor saves it, so the test can see it
    return {};
  });

const summary = await app.connectWith(stream, async (agent) => {
  const init = await agent.request(methods.agent.initialize, {
    protocolVersion: PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
    clientInfo: { name: "devagent-acp-test", version: "1.0.0" },
  });
  const prompt = (sessionId, text) =>
    agent.request(methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text }] });
  if (scenario === "main") {
    const session = await agent.request(methods.agent.session.new, { cwd: config.cwd, mcpServers: [] });
    const sessionId = session.sessionId;
    const allowed = await prompt(sessionId, "read the readme and write a.txt");
    const rejected = await prompt(sessionId, "write b.txt");
    const started = new Promise((resolve) => {
      onUpdate = (u) => {
        if (u.toolCallId === "sh" && JSON.stringify(u.content ?? []).includes("started")) resolve();
      };
    });
    const running = prompt(sessionId, "run the slow command");
    await started;
    await agent.notify(methods.agent.session.cancel, { sessionId });
    const cancelled = await running;
    return { init, session, stopReasons: [allowed.stopReason, rejected.stopReason, cancelled.stopReason] };
  }
  if (scenario === "list") {
    const listings = [];
    for (const cwd of config.listCwds) {
      const pages = [];
      let cursor;
      do {
        const params = { ...(cwd === null ? {} : { cwd }), ...(cursor ? { cursor } : {}) };
        const page = await agent.request(methods.agent.session.list, params);
        pages.push(page.sessions);
        cursor = page.nextCursor;
      } while (cursor && pages.length < 20);
      listings.push(pages);
    }
    return { init, listings };
  }
  // The history is replayed before the answer to session/load, the commands right after it. The
  // SDK hands the answer over as it reads it, while each notification is still on its way through
  // the client's handlers: the replay is known to be whole once the commands update is seen (an
  // event), not when the answer resolves (which, on a loaded machine, may come first).
  const commandsShown = new Promise((resolve) => {
    onUpdate = (u) => {
      if (u.sessionUpdate === "available_commands_update") resolve();
    };
  });
  const loaded = await agent.request(methods.agent.session.load, {
    sessionId: config.sessionId,
    cwd: config.cwd,
    mcpServers: [],
  });
  await commandsShown;
  const replayed = updates.findIndex((u) => u.sessionUpdate === "available_commands_update");
  const after = await prompt(config.sessionId, "and now?");
  return { init, loaded, replayed, stopReasons: [after.stopReason] };
});
child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
console.log(JSON.stringify({ ...summary, updates, permissions, reads, writes }));
process.exit(0);
