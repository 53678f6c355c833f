// devagent's web console. It reads sessions from /ui/api and acts through A2A itself (the
// development-tool extension's JSON-RPC at the server's root), with the same bearer token: an
// approval here is the same request an IDE sends. Every piece of text from the server (a model's
// answer, a file's content, a command) reaches the page through textContent or markdown.js,
// never as HTML.

import { render as markdown } from "./markdown.js";

const EXT = "https://github.com/google-gemini/gemini-cli/blob/main/docs/a2a/developer-profile/v0/spec.md";
const TOKEN_KEY = "devagent.console.token";
const LIST_POLL_MS = 3000;
const VIEW_POLL_MS = 2000;
const PAGE = 25;

const $ = (id) => document.getElementById(id);
const S = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  // signed in through the identity provider: the session is an HttpOnly cookie this page never
  // reads; each request says it comes from the console (the header the server asks of it)
  cookie: false,
  me: null,
  commands: [],
  list: { offset: 0, total: 0, timer: 0, shown: "" },
  view: null, // the open session: {contextId, data, items, stream, timer, shown}
};

// --- talking to the server ------------------------------------------------------------------

class Unauthorized extends Error {}

function authHeaders() {
  return S.token ? { Authorization: `Bearer ${S.token}` } : { "X-Devagent-Console": "1" };
}

async function api(path) {
  const r = await fetch(path, { headers: authHeaders(), cache: "no-store" });
  if (r.status === 401) throw new Unauthorized("the server refused the token");
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
  return body;
}

function rpcHeaders() {
  return {
    ...authHeaders(),
    "Content-Type": "application/json",
    "A2A-Version": "1.0",
    "A2A-Extensions": EXT,
  };
}

function rpcBody(method, params) {
  return JSON.stringify({ jsonrpc: "2.0", id: crypto.randomUUID(), method, params });
}

async function rpc(method, params) {
  const r = await fetch("/", { method: "POST", headers: rpcHeaders(), body: rpcBody(method, params) });
  if (r.status === 401) throw new Unauthorized("the server refused the token");
  const body = await r.json();
  if (body.error) throw new Error(body.error.message || `error ${body.error.code}`);
  return body.result;
}

// A streaming JSON-RPC request (SendStreamingMessage, SubscribeToTask): each server-sent event's
// result goes to onEvent; resolves when the server closes the stream.
async function rpcStream(method, params, onEvent, signal) {
  const r = await fetch("/", {
    method: "POST",
    headers: { ...rpcHeaders(), Accept: "text/event-stream" },
    body: rpcBody(method, params),
    signal,
  });
  if (r.status === 401) throw new Unauthorized("the server refused the token");
  if ((r.headers.get("content-type") || "").includes("application/json")) {
    const body = await r.json();
    if (body.error) throw new Error(body.error.message || `error ${body.error.code}`);
    if (body.result) onEvent(body.result);
    return;
  }
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let end;
    while ((end = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end).replace(/^\r?\n\r?\n/, "");
      const data = block
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).replace(/^ /, ""))
        .join("\n");
      if (!data) continue;
      const msg = JSON.parse(data);
      if (msg.error) throw new Error(msg.error.message || `error ${msg.error.code}`);
      onEvent(msg.result);
    }
  }
}

// --- small DOM helpers --------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

function show(section) {
  for (const id of ["loading", "signin", "list", "new", "view"]) $(id).hidden = id !== section;
}

function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

function stateLabel(session) {
  if (session.asking) return ["waiting for an answer", "waiting"];
  if (session.waiting) return ["waiting for approval", "waiting"];
  if (session.state === "running") return ["running", "running"];
  if (session.state === "awaiting_input") return ["waiting for its client", "waiting"];
  if (session.outcome === "error") return ["ended with an error", "error"];
  if (session.outcome === "cancelled") return ["cancelled", "idle"];
  return ["idle", "idle"];
}

// --- sign-in --------------------------------------------------------------------------------------

async function signIn(token) {
  S.token = token;
  S.me = await api("/ui/api/me");
  S.cookie = !token;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  $("who").textContent = S.me.identity ? `signed in as ${S.me.identity}` : "signed in";
  $("signout").hidden = false;
  const list = $("workspaces");
  list.replaceChildren(...S.me.workspaces.map((w) => el("option", { value: w })));
  try {
    S.commands = (await rpc("commands/get", {})).commands || [];
  } catch {
    S.commands = [];
  }
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  if (S.cookie) fetch("/ui/logout", { method: "POST", headers: { "X-Devagent-Console": "1" } }).catch(() => {});
  S.cookie = false;
  S.token = "";
  S.me = null;
  stopView();
  clearTimeout(S.list.timer);
  $("who").textContent = "";
  $("signout").hidden = true;
  $("signin-error").textContent = message || "";
  show("signin");
  $("token").focus();
}

function failed(e, where) {
  if (e instanceof Unauthorized) signOut("That token is not accepted by this server.");
  else if (where) where.textContent = e.message || String(e);
}

// --- the session list -------------------------------------------------------------------------

async function loadList() {
  clearTimeout(S.list.timer);
  if (location.hash && location.hash !== "#/") return;
  try {
    const state = $("filter").value;
    const data = await api(`/ui/api/sessions?state=${encodeURIComponent(state)}&offset=${S.list.offset}&limit=${PAGE}`);
    const shown = JSON.stringify(data);
    if (shown !== S.list.shown) {
      S.list.shown = shown;
      drawList(data);
    }
  } catch (e) {
    failed(e, $("page-info"));
    if (e instanceof Unauthorized) return;
  }
  loadWorkers();
  S.list.timer = setTimeout(loadList, LIST_POLL_MS);
}

// The workers (sandbox_backend = worker), for an operator: drawn with the list, refreshed with it.
async function loadWorkers() {
  if (!S.me || !S.me.operator) return;
  try {
    const data = await api("/ui/api/workers");
    const rows = data.workers.map((w) =>
      el(
        "tr",
        {},
        el("td", { text: w.name, title: `token ${w.token}, ${w.backend}` }),
        el("td", { text: w.pool }),
        el("td", { text: w.alive ? "alive" : "lost", class: w.alive ? "" : "error" }),
        el("td", { text: `${w.sessions} of ${w.capacity}` }),
        el("td", { text: String(w.running) }),
        el("td", { text: ago(w.last_seen), title: w.last_seen }),
      ),
    );
    $("workers-rows").replaceChildren(...rows);
    $("workers-empty").hidden = rows.length > 0;
    $("workers").hidden = false;
  } catch {
    $("workers").hidden = true;
  }
}

// Another identity's session: listed for an operator only, shown read-only (acting on it is its
// owner's, through A2A).
function foreign(owner) {
  return Boolean(owner && S.me && owner !== S.me.identity);
}

function sessionHref(s) {
  const own = `#/s/${encodeURIComponent(s.context_id)}`;
  return foreign(s.owner) ? `${own}/${encodeURIComponent(s.owner)}` : own;
}

function drawList(data) {
  S.list.total = data.total;
  const items = data.sessions.map((s) => {
    const [label, cls] = stateLabel(s);
    return el(
      "li",
      { class: "session" },
      el(
        "a",
        { href: sessionHref(s), class: "session-link" },
        el("span", { class: "title", text: s.title || "(no prompt yet)" }),
        el("span", { class: `badge ${cls}`, text: label }),
      ),
      el(
        "span",
        { class: "muted meta" },
        ...(foreign(s.owner) ? [el("span", { class: "owner", text: s.owner }), " · "] : []),
        el("span", { class: "workspace", text: s.workspace }),
        " · ",
        el("time", { datetime: s.updated, title: s.updated, text: ago(s.updated) }),
        ` · ${s.tokens.toLocaleString()} tokens`,
      ),
    );
  });
  $("sessions").replaceChildren(...items);
  $("sessions-empty").hidden = items.length > 0;
  const first = data.total ? data.offset + 1 : 0;
  $("page-info").textContent = `${first}–${data.offset + data.sessions.length} of ${data.total}`;
  $("newer").disabled = data.offset === 0;
  $("older").disabled = data.offset + data.sessions.length >= data.total;
}

// --- a session --------------------------------------------------------------------------------

function stopView() {
  const v = S.view;
  if (!v) return;
  clearTimeout(v.timer);
  if (v.stream) v.stream.abort();
  S.view = null;
}

async function openView(contextId, owner) {
  stopView();
  S.view = { contextId, owner: foreign(owner) ? owner : "", data: null, items: [], stream: null, timer: 0, shown: "", live: null, open: new Map() };
  $("conversation").replaceChildren();
  $("permissions").replaceChildren();
  $("changed-files").replaceChildren();
  $("changes").hidden = true;
  $("repository").hidden = true;
  $("repository-patch").replaceChildren();
  $("view-title").textContent = "";
  $("view-status").textContent = "";
  show("view");
  await refreshView();
}

// The stored view of the session (what every replica reads alike), drawn when it changed; while
// a turn runs that this page does not drive, its events are followed live (SubscribeToTask).
async function refreshView() {
  const v = S.view;
  if (!v) return;
  clearTimeout(v.timer);
  try {
    const whose = v.owner ? `?owner=${encodeURIComponent(v.owner)}` : "";
    const data = await api(`/ui/api/sessions/${encodeURIComponent(v.contextId)}${whose}`);
    if (S.view !== v) return;
    const shown = JSON.stringify(data);
    if (shown !== v.shown && !v.stream) {
      v.shown = shown;
      v.data = data;
      v.items = data.items.map((i) => ({ ...i }));
      drawView();
    }
    if (!v.stream && !v.owner && data.session.state === "running" && data.session.task_id) {
      follow(v, "SubscribeToTask", { id: data.session.task_id });
      return;
    }
  } catch (e) {
    if (S.view !== v) return;
    failed(e, $("view-status"));
    if (e instanceof Unauthorized) return;
  }
  if (S.view === v && !v.stream) v.timer = setTimeout(refreshView, VIEW_POLL_MS);
}

// Run one streaming request for the open session, drawing its events as they come, then read the
// stored view again (the authority on what happened).
async function follow(v, method, params, onError, onDone) {
  const ctl = new AbortController();
  v.stream = ctl;
  v.live = null;
  v.sawText = false;
  setRunning(true);
  try {
    await rpcStream(method, params, (ev) => S.view === v && liveEvent(v, ev), ctl.signal);
  } catch (e) {
    if (ctl.signal.aborted) return;
    if (onError) onError(e);
    else if (!(e instanceof Unauthorized)) {
      /* a subscription to a turn that ended meanwhile: the stored view says what happened */
    } else failed(e);
  } finally {
    if (v.stream === ctl) v.stream = null;
  }
  if (onDone) onDone();
  if (S.view === v) {
    v.shown = "";
    await refreshView();
  }
}

function setRunning(running) {
  $("cancel").hidden = !running;
  $("send").disabled = running;
  $("prompt").disabled = running;
  $("prompt").placeholder = running ? "devagent is working; Cancel turn stops it" : "";
  if (running) {
    $("view-state").textContent = "running";
    $("view-state").className = "badge running";
  }
}

// One event of a stream: the extension's TEXT_CONTENT / THOUGHT / TOOL_CALL_UPDATE status updates,
// or (for a turn a plain A2A client drives) the answer's artifact chunks.
function liveEvent(v, ev) {
  if (ev.task) {
    v.taskId = ev.task.id;
    return;
  }
  if (ev.artifactUpdate) {
    // A plain client's turn streams its answer as artifact chunks; for an extension client the
    // reply artifact repeats the TEXT_CONTENT already shown.
    if (v.sawText) return;
    for (const p of ev.artifactUpdate.artifact?.parts || []) if (p.text) appendLive(v, "text", p.text);
    return;
  }
  const su = ev.statusUpdate;
  if (!su) return;
  v.taskId = su.taskId;
  const kind = (su.metadata?.[EXT] || {}).kind;
  const parts = su.status?.message?.parts || [];
  for (const p of parts) {
    if (kind === "TEXT_CONTENT" && p.text) {
      v.sawText = true;
      appendLive(v, "text", p.text);
    }
    else if (kind === "THOUGHT" && p.data) appendLive(v, "thought", String(p.data.description || ""));
    else if (kind === "TOOL_CALL_UPDATE" && p.data?.tool_call_id) upsertCall(v, p.data);
  }
}

function appendLive(v, kind, text) {
  let last = v.items[v.items.length - 1];
  if (!last || last.kind !== kind || !last.live) {
    last = { kind, text: "", live: true };
    v.items.push(last);
  }
  last.text += text;
  drawItems(v);
}

function upsertCall(v, call) {
  for (const item of v.items) if (item.live) item.live = false; // text after a call is a new piece
  const found = v.items.find((i) => i.kind === "tool" && i.call.tool_call_id === call.tool_call_id);
  if (found) found.call = call;
  else v.items.push({ kind: "tool", call });
  drawItems(v);
}

// Keyed drawing: every entry of a list has a key (a tool call's id, else its kind and its rank
// among that kind) and a signature (its content). A node is built again only when its entry's
// signature changed, and nodes that stay are never moved, so an expanded call, a half-typed
// reason or an edit in progress (and the focus) survive every refresh that did not touch them.
const drawn = new WeakMap(); // node -> {key, sig}
const callSigs = new WeakMap(); // a call as received -> its signature (a live update brings a new object)

function callSig(call) {
  let sig = callSigs.get(call);
  if (sig === undefined) callSigs.set(call, (sig = JSON.stringify(call)));
  return sig;
}

function reconcile(container, entries, build) {
  const have = new Map();
  for (const node of container.children) {
    const d = drawn.get(node);
    if (d) have.set(d.key, node);
  }
  const nodes = entries.map((e) => {
    const old = have.get(e.key);
    if (old && drawn.get(old).sig === e.sig) return old;
    const node = build(e);
    drawn.set(node, { key: e.key, sig: e.sig });
    return node;
  });
  const keep = new Set(nodes);
  let changed = false;
  for (const node of [...container.children]) {
    if (!keep.has(node)) {
      node.remove();
      changed = true;
    }
  }
  let at = container.firstChild;
  for (const node of nodes) {
    if (node === at) at = at.nextSibling;
    else {
      container.insertBefore(node, at);
      changed = true;
    }
  }
  return changed;
}

function itemEntries(items) {
  const rank = {};
  return items.map((item) => {
    const n = (rank[item.kind] = (rank[item.kind] ?? -1) + 1);
    const key = item.kind === "tool" ? `tool:${item.call.tool_call_id}` : `${item.kind}:${n}`;
    const sig = item.kind === "tool" ? callSig(item.call) : JSON.stringify([item.text, item.command]);
    return { key, sig, item };
  });
}

function drawItems(v) {
  const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  const entries = itemEntries([...v.items, ...(v.notes || [])]);
  const changed = reconcile($("conversation"), entries, (e) => itemNode(e.item, e.key, v.open));
  if (changed && atBottom && v.stream) window.scrollTo(0, document.body.scrollHeight);
}

function drawView() {
  const v = S.view;
  const { session, waiting } = v.data;
  $("view-title").textContent = session.title || "(no prompt yet)";
  const [label, cls] = stateLabel(session);
  $("view-state").textContent = label;
  $("view-state").className = `badge ${cls}`;
  const model = session.model || S.me?.model;
  const meta = [v.owner, session.workspace, model, `${session.tokens.toLocaleString()} tokens`];
  $("view-meta").textContent = meta.filter(Boolean).join(" · ");
  drawItems(v);
  drawRepository(v);
  drawChanges(v);
  const cards = waiting.map((call) => ({ key: call.tool_call_id, sig: callSig(call), call }));
  reconcile($("permissions"), cards, (e) => permissionNode(e.call));
  // off while an answer runs, and in another identity's session (read-only) unless the caller's
  // group approves with its owner's
  for (const b of $("permissions").querySelectorAll("button")) b.disabled = Boolean(v.stream || (v.owner && !v.data.may_answer));
  $("cancel").hidden = session.state !== "running" || Boolean(v.owner);
  $("prompt-form").hidden = Boolean(v.owner);
  $("send").disabled = session.state === "running" || waiting.length > 0;
  $("prompt").disabled = waiting.length > 0;
  $("prompt").placeholder = waiting.length ? "Answer the request above first" : "";
}

// A session cloned from a repository: where from, and the branch its result was pushed to; its
// patch (against the ref it started from) is made on request.
function drawRepository(v) {
  const repo = v.data.repository;
  $("repository").hidden = !repo;
  if (!repo) return;
  const pushed = repo.branch ? ` · pushed to branch ${repo.branch} (${repo.commit.slice(0, 12)})` : " · not pushed";
  $("repository-info").textContent = `${repo.url} at ${repo.ref} (${repo.base_commit.slice(0, 12)})${pushed}`;
}

async function showPatch() {
  const v = S.view;
  if (!v) return;
  const box = $("repository-patch");
  try {
    const got = await api(`/ui/api/sessions/${encodeURIComponent(v.contextId)}/patch`);
    box.replaceChildren(got.patch ? diffNode(got.patch) : el("p", { class: "muted", text: "No changes." }));
  } catch (e) {
    failed(e, box);
  }
}

// The files the session changed (the stored view's list: its edits, writes and patches), each a
// folded line with its path and the lines it added and removed, opening to its diff.
function drawChanges(v) {
  const files = v.data.changed_files || [];
  const entries = files.map((f) => ({ key: f.path, sig: JSON.stringify(f), file: f }));
  reconcile($("changed-files"), entries, (e) => changedFileNode(e.file, v));
  $("changes-title").textContent = files.length ? `Changed files (${files.length})` : "Changed files";
  $("changes").hidden = files.length === 0;
}

function changedFileNode(file, v) {
  const workspace = v.data.session.workspace;
  const path = workspace && file.path.startsWith(`${workspace}/`) ? file.path.slice(workspace.length + 1) : file.path;
  let added = 0;
  let removed = 0;
  for (const line of file.diff.split("\n")) {
    if (line.startsWith("+") && !line.startsWith("+++")) added += 1;
    else if (line.startsWith("-") && !line.startsWith("---")) removed += 1;
  }
  const summary = el(
    "summary",
    {},
    el("code", { class: "path", text: path }),
    " ",
    el("span", { class: "count-add", text: `+${added}` }),
    " ",
    el("span", { class: "count-del", text: `−${removed}` }),
    file.changes > 1 ? el("span", { class: "muted", text: ` · ${file.changes} changes` }) : null,
  );
  return el("li", { class: "changed-file" }, folding(v.open, `file:${file.path}`, false, summary, diffNode(file.diff)));
}

// A <details> whose open state the person chose (by its summary) keeps that choice when its
// node is built again; until then it opens as its content suggests.
function folding(open, key, byDefault, summary, ...body) {
  const chosen = open.get(key);
  const details = el("details", { open: (chosen ?? byDefault) || undefined }, summary, ...body);
  summary.addEventListener("click", () => open.set(key, !details.open));
  return details;
}

function itemNode(item, key, open) {
  let node;
  if (item.kind === "user") {
    node = el("li", { class: "msg user" }, el("span", { class: "who-label", text: "You" }), el("p", { class: "plain", text: item.text }));
  } else if (item.kind === "text") {
    node = el("li", { class: "msg agent" }, el("span", { class: "who-label", text: "devagent" }), el("div", { class: "md" }, markdown(item.text)));
  } else if (item.kind === "note") {
    node = el(
      "li",
      { class: "msg note" },
      el("span", { class: "who-label", text: `${item.command} (command output, not part of the conversation)` }),
      el("div", { class: "md" }, markdown(item.text)),
    );
  } else if (item.kind === "thought") {
    node = el("li", { class: "thought" }, folding(open, key, false, el("summary", { text: "Thinking" }), el("p", { class: "plain", text: item.text })));
  } else {
    node = el("li", { class: "tool" }, toolNode(item.call, key, open));
  }
  return node;
}

const STATUS = {
  PENDING: "waiting",
  EXECUTING: "running",
  SUCCEEDED: "done",
  FAILED: "failed",
  CANCELLED: "cancelled",
};

const SHELL = "run_shell_command";

// A call: what it was asked to do (a command as a command, other arguments as a short list; for
// an edit that has run, its diff instead), live output and result.
function toolNode(call, key, open) {
  const status = call.status || "PENDING";
  const body = [];
  const out = call.output;
  const diff = out?.diff?.formatted_diff;
  if (!diff) body.push(...argsNodes(call));
  if (call.live_content) body.push(el("pre", { class: "live", text: call.live_content }));
  if (diff) body.push(diffNode(diff));
  else if (out?.text) body.push(el("pre", { class: "output", text: out.text }));
  else if (out?.structured_data) body.push(el("pre", { class: "output", text: JSON.stringify(out.structured_data, null, 2) }));
  if (call.error) body.push(el("p", { class: "error", text: call.error.message }));
  const running = status === "EXECUTING" || (Boolean(call.live_content) && status !== "SUCCEEDED");
  const summary = el(
    "summary",
    {},
    el("span", { class: `badge ${status.toLowerCase()}`, text: STATUS[status] || status }),
    " ",
    toolTitle(call),
  );
  return folding(open, key, running, summary, ...body);
}

function shellCommand(call) {
  const command = call.input_parameters?.command;
  return call.tool_name === SHELL && typeof command === "string" ? command : null;
}

// The call's one-line title: a command's first line in monospace, else the core's description.
function toolTitle(call) {
  const command = shellCommand(call);
  if (command === null) return el("span", { class: "tool-desc", text: call.description || call.tool_name });
  const lines = command.split("\n");
  const first = lines[0] + (lines.length > 1 ? " …" : "");
  const background = call.input_parameters.background === true ? " (in the background)" : "";
  return el("span", { class: "tool-desc cmd", text: first + background });
}

const scalar = (v) => ["string", "number", "boolean"].includes(typeof v);

// A call's arguments as a person reads them: a shell command as the command it runs, in a
// monospace block, with its directory and how it runs; another tool's arguments as a list of
// names and values (long or multi-line text in a block); JSON only for what has no plainer form.
function argsNodes(call) {
  const args = call.input_parameters || {};
  const command = shellCommand(call);
  if (command !== null) {
    const how = [];
    if (typeof args.description === "string" && args.description) how.push(args.description);
    how.push(`in ${typeof args.directory === "string" && args.directory ? args.directory : "the workspace"}`);
    if (args.background === true) how.push("in the background");
    if (typeof args.timeout === "number") how.push(`stopped after ${args.timeout} s`);
    return [el("pre", { class: "command", text: command }), el("p", { class: "muted command-meta", text: how.join(" · ") })];
  }
  const rows = [];
  const rest = {};
  for (const [name, value] of Object.entries(args)) {
    if (scalar(value) || (Array.isArray(value) && value.length && value.every(scalar))) {
      const text = Array.isArray(value) ? value.join(", ") : String(value);
      const block = text.includes("\n") || text.length > 100;
      rows.push(el("dt", { text: name }), el("dd", {}, el(block ? "pre" : "code", { text })));
    } else if (value !== null && value !== undefined && !(Array.isArray(value) && !value.length)) {
      rest[name] = value;
    }
  }
  const nodes = rows.length ? [el("dl", { class: "params" }, ...rows)] : [];
  if (Object.keys(rest).length) nodes.push(el("pre", { class: "args", text: JSON.stringify(rest, null, 2) }));
  return nodes;
}

// Syntax colour for the code in a diff: comments, strings, numbers and keywords, told apart by a
// small lexer for the languages whose comments start with # or //, chosen by the file's extension
// (other files stay plain). Every token is a text node in a span: code is never markup.
const HASH_COMMENTS = new Set(["py", "pyi", "sh", "bash", "zsh", "rb", "pl", "r", "yaml", "yml", "toml", "cfg", "ini", "mk"]);
const SLASH_COMMENTS = new Set(["js", "mjs", "cjs", "ts", "tsx", "jsx", "go", "rs", "c", "h", "cc", "cpp", "hpp", "java", "kt", "swift", "cs", "php", "scala", "dart"]);
const KEYWORDS = new Set(
  ("and as assert async await break case catch class const continue def default defer del do elif else enum except " +
    "export extends false False finally fn for from func function if impl import in interface is lambda let match mod " +
    "mut new nil none None not null or package pass pub raise return self static struct super switch this throw " +
    "true True try type use var void while with yield").split(" "),
);
const TOKENS = {
  "#": /(#.*$)|("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?)|\b(\d[\w.]*)|\b([A-Za-z_]\w*)\b/g,
  "//": /(\/\/.*$)|("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?|`(?:[^`\\]|\\.)*`?)|\b(\d[\w.]*)|\b([A-Za-z_]\w*)\b/g,
};

function commentStyle(diff) {
  const file = /^\+\+\+ (?:b\/)?(\S+)/m.exec(diff)?.[1] || "";
  const ext = file.includes(".") ? file.split(".").pop().toLowerCase() : "";
  return HASH_COMMENTS.has(ext) ? "#" : SLASH_COMMENTS.has(ext) ? "//" : null;
}

function codeNodes(code, style) {
  if (!style) return [code];
  const out = [];
  let last = 0;
  for (const m of code.matchAll(TOKENS[style])) {
    const [tok, comment, string, number, word] = m;
    const cls = comment ? "tok-com" : string ? "tok-str" : number ? "tok-num" : KEYWORDS.has(word) ? "tok-kw" : null;
    if (!cls) continue;
    if (m.index > last) out.push(code.slice(last, m.index));
    out.push(el("span", { class: cls, text: tok }));
    last = m.index + tok.length;
  }
  if (last < code.length) out.push(code.slice(last));
  return out;
}

// A unified diff, coloured by line and by syntax; a button shows it side by side.
function diffNode(text) {
  const wrap = el("div", { class: "diff" });
  const unified = el("pre", { class: "diff-unified" });
  const style = commentStyle(text);
  for (const line of text.replace(/\n$/, "").split("\n")) {
    const cls = line.startsWith("+++") || line.startsWith("---") ? "file" : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    if (cls === "file" || cls === "hunk") unified.append(el("span", { class: cls, text: line + "\n" }));
    else unified.append(el("span", { class: cls }, line.slice(0, 1), ...codeNodes(line.slice(1), style), "\n"));
  }
  const split = sideBySide(text, style);
  split.hidden = true;
  const toggle = el("button", {
    type: "button",
    class: "small neutral",
    text: "Side by side",
    onclick: () => {
      split.hidden = !split.hidden;
      unified.hidden = !split.hidden;
      toggle.textContent = split.hidden ? "Side by side" : "Unified";
    },
  });
  wrap.append(toggle, unified, split);
  return wrap;
}

function sideBySide(text, style) {
  const table = el("table", { class: "diff-split" });
  const rows = [];
  let dels = [];
  let adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) rows.push([dels[i], adds[i]]);
    dels = [];
    adds = [];
  };
  for (const line of text.replace(/\n$/, "").split("\n")) {
    if (line.startsWith("+++") || line.startsWith("---")) continue;
    if (line.startsWith("@@")) {
      flush();
      rows.push(["hunk", line]);
    } else if (line.startsWith("-")) dels.push(line.slice(1));
    else if (line.startsWith("+")) adds.push(line.slice(1));
    else {
      flush();
      rows.push([line.slice(1), line.slice(1), true]);
    }
  }
  flush();
  for (const [a, b, same] of rows) {
    if (a === "hunk") {
      table.append(el("tr", { class: "hunk" }, el("td", { colspan: "2", text: b })));
      continue;
    }
    table.append(
      el(
        "tr",
        {},
        el("td", { class: same ? "ctx" : a === undefined ? "none" : "del" }, ...codeNodes(a ?? "", style)),
        el("td", { class: same ? "ctx" : b === undefined ? "none" : "add" }, ...codeNodes(b ?? "", style)),
      ),
    );
  }
  return table;
}

// Where this server runs a shell command, in words (the server says whether its sandbox is on).
function whereCommandsRun(sandbox) {
  if (!sandbox) return "";
  if (sandbox.unavailable) return "Will not run: this server's sandbox is on but cannot start here, so commands are refused.";
  if (sandbox.on) return `Runs in the sandbox: only the workspace is writable, ${sandbox.network ? "with" : "without"} network.`;
  return "Not sandboxed: runs as the server's user, with that user's files and network.";
}

// What a permission option's button looks like: allowing is positive (once: filled; always:
// outlined), refusing for good is danger, a plain cancel (this call not run) is neutral, as the
// turn's own Cancel is.
function optionClass(id) {
  if (id === "proceed_once") return "allow";
  if (id.startsWith("proceed")) return "allow secondary";
  if (id === "cancel_always") return "danger";
  return "neutral";
}

// A call that waits: what it would do, and the answers the server offers for it.
function permissionNode(call) {
  const cr = call.confirmation_request;
  const id = `perm-${call.tool_call_id}`;
  const box = el("div", { class: "permission", role: "group", "aria-labelledby": id });
  // a command's heading says what is asked; the command itself is the block below it
  const asks = cr?.execute_details ? "devagent asks to run a command" : `devagent asks: ${call.description || call.tool_name}`;
  box.append(el("h2", { id, text: cr ? asks : `Waiting for its client to run ${call.tool_name}` }));
  if (!cr) {
    box.append(el("p", { class: "muted", text: "The client that started this turn runs this tool; only it can answer." }));
    return box;
  }
  // in another member's session (a group that approves): allow once or refuse, nothing more
  const approver = Boolean(S.view?.owner);
  if (cr.question_details && approver) {
    box.append(el("p", { class: "muted", text: "Only the session's owner answers its questions." }));
    return box;
  }
  if (cr.question_details) return questionNode(call, box, id);
  const fe = cr.file_edit_details;
  if (fe) {
    box.append(el("p", { class: "muted", text: fe.file_path || fe.file_name }));
    box.append(diffNode(fe.formatted_diff || ""));
  } else if (cr.execute_details) {
    box.append(el("p", { class: "muted", text: `in ${cr.execute_details.working_directory || "the workspace"}` }));
    box.append(el("pre", { class: "command", text: cr.execute_details.command }));
    box.append(el("p", { class: "where", text: whereCommandsRun(S.me?.sandbox) }));
  } else if (cr.mcp_details) {
    box.append(el("p", { text: `MCP server ${cr.mcp_details.server_name}, tool ${cr.mcp_details.tool_name}` }));
  } else if (cr.generic_details) {
    box.append(el("p", { class: "plain", text: cr.generic_details.description || "" }));
  }
  const buttons = el("div", { class: "options" });
  for (const o of (cr.options || []).filter((o) => !approver || o.id === "proceed_once" || o.id === "cancel")) {
    buttons.append(el("button", { type: "button", class: optionClass(o.id), title: o.description || "", "data-option": o.id, text: o.name, onclick: () => answer(call, o.id) }));
  }
  box.append(buttons);
  const refuse = (cr.options || []).find((o) => o.id === "cancel");
  if (refuse) {
    const reasonId = `reason-${call.tool_call_id}`;
    const reason = el("textarea", { id: reasonId, rows: "2" });
    box.append(
      el(
        "details",
        { class: "refuse" },
        el("summary", { text: "Refuse with a reason" }),
        el("label", { for: reasonId, text: "What should devagent do instead?" }),
        reason,
        el("button", { type: "button", class: "danger", text: "Refuse", onclick: () => answer(call, "cancel", { reason: reason.value }) }),
      ),
    );
  }
  const once = (cr.options || []).find((o) => o.id === "proceed_once");
  if (fe && once && !approver) {
    const editId = `edit-${call.tool_call_id}`;
    const edit = el("textarea", { id: editId, rows: "10", class: "code", spellcheck: "false" });
    edit.value = fe.new_content ?? "";
    box.append(
      el(
        "details",
        { class: "edit" },
        el("summary", { text: "Edit before allowing" }),
        el("label", { for: editId, text: `New content of ${fe.file_name || fe.file_path}` }),
        edit,
        el("button", { type: "button", class: "allow", text: "Allow with my changes", onclick: () => answer(call, "proceed_once", { newContent: edit.value }) }),
      ),
    );
  }
  return box;
}

// A question the model asks: a button per choice, a box for an answer in one's own words (where
// the question takes one), and Dismiss, which lets the turn go on unanswered.
function questionNode(call, box, id) {
  const cr = call.confirmation_request;
  const q = cr.question_details;
  box.querySelector("h2").textContent = "devagent asks";
  box.append(el("p", { class: "plain question", text: q.question || "" }));
  const buttons = el("div", { class: "options" });
  for (const o of cr.options || []) {
    if (o.id === "answer" || o.id === "cancel") continue;
    buttons.append(el("button", { type: "button", class: "secondary", "data-option": o.id, text: o.name, onclick: () => answer(call, o.id) }));
  }
  box.append(buttons);
  if ((cr.options || []).some((o) => o.id === "answer")) {
    const typedId = `answer-${call.tool_call_id}`;
    const typed = el("textarea", { id: typedId, rows: "2" });
    const send = () => typed.value.trim() && answer(call, "answer", { answerText: typed.value.trim() });
    box.append(
      el("label", { for: typedId, text: (q.choices || []).length ? "Or answer in your own words" : "Your answer" }),
      typed,
      el("div", { class: "options" }, el("button", { type: "button", text: "Send answer", onclick: send })),
    );
  }
  if ((cr.options || []).some((o) => o.id === "cancel")) {
    box.append(el("div", { class: "options" }, el("button", { type: "button", class: "neutral", text: "Dismiss", title: "Do not answer; the agent goes on", onclick: () => answer(call, "cancel") })));
  }
  return box;
}

// The answer to a waiting call: the extension's ToolCallConfirmation on the session's task, and
// the turn it lets go on, followed live. A request that was answered meanwhile is refused by the
// server; its reason is shown and the view read again.
async function answer(call, option, { reason, newContent, answerText } = {}) {
  const v = S.view;
  if (!v || v.stream) return;
  for (const b of $("permissions").querySelectorAll("button")) b.disabled = true;
  const conf = { tool_call_id: call.tool_call_id, selected_option_id: option };
  if (newContent !== undefined) conf.file_details = { new_content: newContent };
  if (answerText !== undefined) conf.question_details = { answer: answerText };
  const parts = [{ data: conf }];
  if (reason && reason.trim()) parts.push({ text: reason.trim() });
  const message = {
    messageId: crypto.randomUUID(),
    role: "ROLE_USER",
    contextId: v.contextId,
    taskId: v.data.session.task_id,
    parts,
  };
  $("view-status").textContent = "";
  for (const node of [...$("permissions").children]) if (drawn.get(node)?.key === call.tool_call_id) node.remove();
  await follow(v, "SendStreamingMessage", { message }, (e) => {
    $("view-status").textContent = `Not sent: ${e.message}. The session has moved on; this is how it stands now.`;
  });
}

async function sendPrompt(text) {
  const v = S.view;
  if (!v || v.stream || !text.trim()) return;
  const message = {
    messageId: crypto.randomUUID(),
    role: "ROLE_USER",
    contextId: v.contextId,
    parts: [{ text }],
    metadata: { [EXT]: { workspace_path: v.data.session.workspace } },
  };
  $("prompt").value = "";
  $("command-hint").textContent = "";
  $("view-status").textContent = "";
  v.items.push({ kind: "user", text });
  drawItems(v);
  const mark = v.items.length;
  const command = text.trim().startsWith("/") ? text.trim().split(/\s/)[0] : null;
  if (!command) v.notes = [];
  // A slash command's output is not stored in the conversation: kept on the page until the next prompt.
  const keep = () => {
    const out = v.items.slice(mark).filter((i) => i.kind === "text").map((i) => i.text).join("");
    if (command && out) v.notes = [...(v.notes || []), { kind: "note", command, text: out }];
  };
  await follow(
    v,
    "SendStreamingMessage",
    { message },
    (e) => {
      $("view-status").textContent = `Not sent: ${e.message}`;
    },
    keep,
  );
}

async function cancelTurn() {
  const v = S.view;
  const taskId = v && (v.taskId || v.data?.session.task_id);
  if (!taskId) return;
  $("cancel").disabled = true;
  try {
    await rpc("CancelTask", { id: taskId });
    $("view-status").textContent = "Cancelled.";
  } catch (e) {
    failed(e, $("view-status"));
  } finally {
    $("cancel").disabled = false;
  }
  if (v.stream) v.stream.abort();
  v.stream = null;
  v.shown = "";
  await refreshView();
}

async function startSession(workspace, prompt, repository) {
  const settings = { workspace_path: workspace };
  if (repository) settings.repository = repository;
  const message = {
    messageId: crypto.randomUUID(),
    role: "ROLE_USER",
    parts: [{ text: prompt }],
    metadata: { [EXT]: settings },
  };
  // The first event names the new conversation; the page moves to it and follows the turn there.
  const ctl = new AbortController();
  let v = null;
  await rpcStream(
    "SendStreamingMessage",
    { message },
    (ev) => {
      if (v === null) {
        const ctx = ev.task?.contextId || ev.statusUpdate?.contextId;
        if (!ctx) return;
        stopView();
        v = S.view = { contextId: ctx, data: null, items: [{ kind: "user", text: prompt }], stream: ctl, timer: 0, shown: "", live: null, open: new Map() };
        v.data = { session: { title: prompt, workspace, model: "", tokens: 0, state: "running", task_id: ev.task?.id || "" }, waiting: [] };
        history.replaceState(null, "", `#/s/${encodeURIComponent(ctx)}`);
        show("view");
        drawView();
        setRunning(true);
      }
      if (S.view === v) liveEvent(v, ev);
    },
    ctl.signal,
  );
  if (v === null) throw new Error("the server started no session");
  if (v.stream === ctl) v.stream = null;
  if (S.view === v) {
    v.shown = "";
    await refreshView();
  }
}

// --- routing and wiring -------------------------------------------------------------------------

async function route() {
  if (!S.me) return;
  const hash = location.hash || "#/";
  clearTimeout(S.list.timer);
  if (hash.startsWith("#/s/")) {
    const [contextId, owner] = hash.slice(4).split("/").map(decodeURIComponent);
    await openView(contextId, owner);
  } else if (hash === "#/new") {
    stopView();
    $("new-error").textContent = "";
    if (!$("new-workspace").value && S.me.workspaces.length) $("new-workspace").value = S.me.workspaces[0];
    show("new");
    $("new-prompt").focus();
  } else {
    stopView();
    show("list");
    S.list.shown = "";
    await loadList();
  }
}

function wire() {
  $("signin-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    $("signin-error").textContent = "";
    try {
      await signIn($("token").value.trim());
      $("token").value = "";
      await route();
    } catch (err) {
      signOut(err instanceof Unauthorized ? "That token is not accepted by this server." : err.message);
    }
  });
  $("signout").addEventListener("click", () => signOut(""));
  $("filter").addEventListener("change", () => {
    S.list.offset = 0;
    S.list.shown = "";
    loadList();
  });
  $("newer").addEventListener("click", () => {
    S.list.offset = Math.max(0, S.list.offset - PAGE);
    loadList();
  });
  $("older").addEventListener("click", () => {
    S.list.offset += PAGE;
    loadList();
  });
  $("prompt-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sendPrompt($("prompt").value);
  });
  // Ctrl+Enter (⌘+Enter) in a prompt box sends it, as the hint beside its button says.
  for (const form of [$("prompt-form"), $("new-form")]) {
    form.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && e.target.tagName === "TEXTAREA") {
        e.preventDefault();
        form.requestSubmit();
      }
    });
  }
  $("prompt").addEventListener("input", () => {
    const t = $("prompt").value;
    if (!t.startsWith("/") || t.includes(" ")) {
      $("command-hint").textContent = "";
      return;
    }
    const want = t.slice(1);
    const hits = S.commands.filter((c) => c.name.startsWith(want)).slice(0, 6);
    $("command-hint").textContent = hits.map((c) => `/${c.name} – ${c.description}`).join("   ");
  });
  $("cancel").addEventListener("click", cancelTurn);
  $("show-patch").addEventListener("click", showPatch);
  $("new-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    $("new-error").textContent = "";
    try {
      const url = $("new-repo").value.trim();
      const repository = url ? { url, ref: $("new-ref").value.trim(), push: $("new-push").checked } : null;
      await startSession($("new-workspace").value.trim(), $("new-prompt").value, repository);
      $("new-prompt").value = "";
    } catch (err) {
      failed(err, $("new-error"));
    }
  });
  window.addEventListener("hashchange", route);
}

// Whether the server offers the sign-in through its identity provider (shown beside the token's).
async function offerIdp() {
  try {
    const r = await fetch("/ui/auth", { cache: "no-store" });
    $("idp-signin").hidden = !(r.ok && (await r.json()).idp);
  } catch {
    $("idp-signin").hidden = true;
  }
}

async function main() {
  wire();
  await offerIdp();
  try {
    await signIn(S.token); // no token: the identity provider's session cookie, if any
  } catch (e) {
    signOut(e instanceof Unauthorized ? "" : e.message);
    return;
  }
  await route();
}

main();
