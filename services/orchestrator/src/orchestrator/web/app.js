// Crayfish web chat: vanilla JS over the native REST API. All model text goes in via textContent.
"use strict";

const TOKEN_KEY = "crayfish.token";
const TERMINAL = new Set(["task.completed", "task.failed", "task.cancelled"]);
const CITATION = /([A-Za-z0-9_][A-Za-z0-9_.\/-]*)#L(\d+)(?:-L?(\d+))?/g;
const FENCE = /```[^\n]*\n([\s\S]*?)```/g;
const ARG_KEYS = ["command", "path", "query", "name", "pattern", "url"];

const $ = (id) => document.getElementById(id);
const state = { session: null, task: null, busy: false };

// ---- small DOM helpers ------------------------------------------------------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function showBanner(text) {
  const banner = $("banner");
  banner.textContent = text;
  banner.hidden = !text;
}

function setStatus(text) {
  $("status").textContent = text || "";
}

function scrollDown() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

// ---- REST ------------------------------------------------------------------------------

function authHeaders() {
  const token = localStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
}

async function api(path, options = {}) {
  const headers = { ...authHeaders(), ...(options.headers || {}) };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const reply = await fetch(path, {
    ...options,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  if (reply.status === 401) {
    $("settings").open = true;
    throw new Error("The server wants an API token: enter it under “API token”.");
  }
  if (!reply.ok) {
    let message = reply.status + " " + reply.statusText;
    try {
      message = (await reply.json()).error.message || message;
    } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return reply.status === 204 ? null : reply.json();
}

// Reads one SSE stream with fetch (EventSource cannot send an Authorization header).
async function readSse(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let event = { id: 0, type: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.search(/\r?\n/)) >= 0) {
      const line = buffer.slice(0, cut);
      buffer = buffer.slice(cut + (buffer[cut] === "\r" ? 2 : 1));
      if (line === "") {
        if (event.data.length) onEvent(event.id, event.type, JSON.parse(event.data.join("\n")));
        event = { id: event.id, type: "message", data: [] };
      } else if (!line.startsWith(":")) {
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "id") event.id = Number(val);
        else if (name === "event") event.type = val;
        else if (name === "data") event.data.push(val);
      }
    }
  }
}

// Follows a task's events until its terminal event, resuming with Last-Event-ID on a drop.
async function followTask(taskId, onEvent) {
  let last = 0;
  let finished = false;
  for (let attempt = 0; !finished && attempt < 6; attempt++) {
    if (attempt) await new Promise((r) => setTimeout(r, 300 * attempt));
    try {
      const headers = { ...authHeaders(), Accept: "text/event-stream" };
      if (last) headers["Last-Event-ID"] = String(last);
      const response = await fetch("/api/tasks/" + encodeURIComponent(taskId) + "/events", { headers });
      if (!response.ok) throw new Error("event stream: HTTP " + response.status);
      await readSse(response, (id, type, data) => {
        last = Math.max(last, id);
        if (TERMINAL.has(type)) finished = true;
        onEvent(type, data);
      });
    } catch (err) {
      if (attempt === 5) throw err;
    }
  }
}

// ---- rendering ---------------------------------------------------------------------------

// Citations `path#Lx-Ly` become links that open those lines.
function appendCitations(node, text) {
  let at = 0;
  for (const match of text.matchAll(CITATION)) {
    node.append(document.createTextNode(text.slice(at, match.index)));
    const link = el("a", "citation", match[0]);
    link.href = "#";
    link.dataset.path = match[1];
    link.dataset.start = match[2];
    link.dataset.end = match[3] || match[2];
    node.append(link);
    at = match.index + match[0].length;
  }
  node.append(document.createTextNode(text.slice(at)));
}

// The little Markdown answers lean on: `code`, **bold**; built as nodes, never as HTML.
function appendInline(node, text) {
  for (const part of text.split(/(`[^`\n]+`|\*\*[^*\n]+\*\*)/)) {
    if (part.length > 2 && part.startsWith("`") && part.endsWith("`")) {
      const code = el("code");
      appendCitations(code, part.slice(1, -1));
      node.append(code);
    } else if (part.length > 4 && part.startsWith("**") && part.endsWith("**")) {
      const strong = el("strong");
      appendCitations(strong, part.slice(2, -2));
      node.append(strong);
    } else {
      appendCitations(node, part);
    }
  }
}

// Renders answer text: fenced code blocks, inline code, bold and citation links.
function renderText(node, text) {
  node.replaceChildren();
  let at = 0;
  for (const match of text.matchAll(FENCE)) {
    appendInline(node, text.slice(at, match.index).replace(/\n$/, ""));
    const pre = el("pre", "code");
    pre.append(el("code", "", match[1].replace(/\n$/, "")));
    node.append(pre);
    at = match.index + match[0].length;
    if (text[at] === "\n") at += 1; // the block already ends the line
  }
  appendInline(node, text.slice(at));
}

function shortArgs(raw) {
  let args = raw;
  if (typeof raw === "string") {
    try { args = JSON.parse(raw); } catch (_) { return raw; }
  }
  if (args && typeof args === "object") {
    for (const key of ARG_KEYS) if (typeof args[key] === "string") return args[key];
    return JSON.stringify(args);
  }
  return String(args ?? "");
}

function addUserMessage(text) {
  $("empty").hidden = true;
  const bubble = el("div", "msg user");
  bubble.append(el("div", "text", text));
  $("messages").append(bubble);
  scrollDown();
}

// One assistant turn: text blocks and tool blocks in the order they happened.
class TurnView {
  constructor() {
    $("empty").hidden = true;
    this.root = el("div", "msg assistant");
    this.tools = new Map();
    this.textBlock = null;
    $("messages").append(this.root);
  }

  text(chunk) {
    if (!this.textBlock) {
      this.textBlock = el("div", "text");
      this.textBlock.raw = "";
      this.root.append(this.textBlock);
    }
    this.textBlock.raw += chunk;
    this.textBlock.append(document.createTextNode(chunk));
    scrollDown();
  }

  finalText(text) {
    if (!this.textBlock && text) this.text(text);
    // Streamed text is whole once the message arrives: re-render it with citation links.
    for (const block of this.root.querySelectorAll(".text")) renderText(block, block.raw);
    if (!text && !this.root.querySelector(".text")) this.note("(no reply)");
  }

  toolStarted(callId, tool, args) {
    this.textBlock = null;
    const box = el("details", "tool running");
    const summary = el("summary");
    summary.append(el("span", "tool-icon", "⚙"), el("span", "tool-name", tool));
    summary.append(el("code", "tool-args", shortArgs(args)), el("span", "tool-state", "running…"));
    const command = el("pre", "tool-command", typeof args === "string" ? prettyJson(args) : "");
    const output = el("pre", "tool-output");
    box.append(summary, command, output);
    this.root.append(box);
    this.tools.set(callId, { box, output, streamed: false });
    scrollDown();
  }

  toolOutput(callId, text) {
    const tool = this.tools.get(callId);
    if (!tool) return;
    tool.streamed = true;
    tool.output.append(document.createTextNode(text));
  }

  toolFinished(data) {
    const tool = this.tools.get(data.call_id);
    if (!tool) return;
    const good = data.ok && (data.exit_code === null || data.exit_code === undefined || data.exit_code === 0);
    tool.box.classList.remove("running");
    tool.box.classList.add(good ? "ok" : "failed");
    const code = good || !data.exit_code ? "" : "exit " + data.exit_code + " · ";
    const took = typeof data.duration_ms === "number" ? Math.round(data.duration_ms) + " ms" : "";
    tool.box.querySelector(".tool-icon").textContent = good ? "✓" : "✗";
    tool.box.querySelector(".tool-state").textContent = code + took + (data.truncated ? " · truncated" : "");
    if (!tool.streamed || data.output) tool.output.textContent = data.output || "(no output)";
  }

  note(text, className = "note") {
    this.root.append(el("div", className, text));
    scrollDown();
  }

  recall(citations) {
    if (!citations || !citations.length) return;
    const line = el("div", "note");
    appendCitations(line, "recalled " + citations.join(", "));
    this.root.append(line);
  }

  handle(type, data) {
    if (type === "assistant.delta") {
      setStatus("");
      this.text(data.text || "");
    } else if (type === "tool.started") {
      setStatus("running " + data.tool + "…");
      this.toolStarted(data.call_id, data.tool, data.arguments);
    }
    else if (type === "tool.output") this.toolOutput(data.call_id, data.text || "");
    else if (type === "tool.finished") this.toolFinished(data);
    else if (type === "memory.recall") this.recall(data.citations);
    else if (type === "assistant.message") this.finalText(data.text || "");
    else if (type === "task.failed") this.note("✗ failed: " + (data.error || "unknown error"), "error");
    else if (type === "task.cancelled") this.note("stopped", "error");
    else if (type === "llm.request") setStatus("thinking…");
  }
}

function prettyJson(raw) {
  try {
    const args = JSON.parse(raw);
    if (args && typeof args.command === "string" && Object.keys(args).length === 1) return "$ " + args.command;
    return JSON.stringify(args, null, 2);
  } catch (_) {
    return raw;
  }
}

// ---- sessions ----------------------------------------------------------------------------

function relativeTime(seconds) {
  const ago = Date.now() / 1000 - seconds;
  if (ago < 60) return "just now";
  if (ago < 3600) return Math.floor(ago / 60) + " min ago";
  if (ago < 86400) return Math.floor(ago / 3600) + " h ago";
  return new Date(seconds * 1000).toLocaleDateString();
}

async function loadSessions() {
  let body;
  try {
    body = await api("/api/sessions");
  } catch (err) {
    showBanner(err.message);
    return;
  }
  const list = $("sessions");
  list.replaceChildren();
  for (const item of body.sessions || []) {
    const row = el("li", item.id === state.session ? "active" : "");
    const open = el("button", "session-open");
    open.type = "button";
    open.title = item.id;
    open.append(el("span", "session-title", item.title || "(untitled)"));
    open.append(el("span", "session-meta", relativeTime(item.updated_at) + " · " + item.messages + " msgs"));
    open.addEventListener("click", () => openSession(item.id));
    const remove = el("button", "session-delete", "×");
    remove.type = "button";
    remove.title = "Delete this session";
    remove.addEventListener("click", () => deleteSession(item.id));
    row.dataset.session = item.id;
    row.append(open, remove);
    list.append(row);
  }
}

function clearMessages() {
  const box = $("messages");
  for (const node of [...box.children]) if (node.id !== "empty") node.remove();
  $("empty").hidden = false;
}

function setSession(id) {
  state.session = id;
  history.replaceState(null, "", id ? "#session=" + encodeURIComponent(id) : location.pathname);
  for (const row of $("sessions").children) row.classList.toggle("active", row.dataset.session === id);
}

async function openSession(id) {
  if (state.busy) return;
  let body;
  try {
    body = await api("/api/sessions/" + encodeURIComponent(id));
  } catch (err) {
    showBanner(err.message);
    return;
  }
  showBanner("");
  clearMessages();
  setSession(id);
  renderHistory(body.messages || []);
}

// Rebuilds a conversation from OpenAI-format messages (tool results matched by call id).
function renderHistory(messages) {
  let view = null;
  for (const message of messages) {
    const content = typeof message.content === "string" ? message.content : "";
    if (message.role === "user") {
      addUserMessage(content);
      view = null;
    } else if (message.role === "assistant") {
      view = view || new TurnView();
      if (content) view.text(content);
      for (const call of message.tool_calls || []) {
        view.toolStarted(call.id, call.function.name, call.function.arguments);
      }
    } else if (message.role === "tool" && view) {
      const exit = content.match(/^exit code: (-?\d+)/); // history keeps no ok/exit fields
      view.toolFinished({ call_id: message.tool_call_id, ok: true, exit_code: exit ? Number(exit[1]) : 0, output: content });
      const tool = view.tools.get(message.tool_call_id);
      if (tool) tool.box.querySelector(".tool-state").textContent = "";
    }
    if (view && message.role === "assistant" && !(message.tool_calls || []).length) view.finalText(content);
  }
}

async function deleteSession(id) {
  if (!confirm("Delete this session and its history?")) return;
  try {
    await api("/api/sessions/" + encodeURIComponent(id), { method: "DELETE" });
  } catch (err) {
    showBanner(err.message);
    return;
  }
  if (state.session === id) newSession();
  loadSessions();
}

function newSession() {
  if (state.busy) return;
  clearMessages();
  setSession(null);
  $("input").focus();
}

// ---- a turn --------------------------------------------------------------------------------

function setBusy(busy) {
  state.busy = busy;
  $("send").hidden = busy;
  $("stop").hidden = !busy;
  $("input").disabled = busy;
  if (!busy) {
    setStatus("");
    $("input").focus();
  }
}

async function send(message) {
  showBanner("");
  setBusy(true);
  addUserMessage(message);
  const view = new TurnView();
  try {
    const accepted = await api("/api/chat", {
      method: "POST",
      body: state.session ? { message, session_id: state.session } : { message },
    });
    state.task = accepted.task_id;
    setSession(accepted.session_id);
    await followTask(accepted.task_id, (type, data) => view.handle(type, data));
  } catch (err) {
    view.note("✗ " + err.message, "error");
  } finally {
    state.task = null;
    setBusy(false);
    loadSessions();
  }
}

async function stop() {
  if (!state.task) return;
  setStatus("stopping…");
  try {
    await api("/api/tasks/" + encodeURIComponent(state.task) + "/cancel", { method: "POST" });
  } catch (err) {
    showBanner(err.message);
  }
}

// ---- cited lines ---------------------------------------------------------------------------

async function openCitation(path, start, end) {
  const viewer = $("viewer");
  const body = $("viewer-body");
  $("viewer-title").textContent = path + "#L" + start + (end !== start ? "-L" + end : "");
  body.replaceChildren(el("p", "hint", "loading…"));
  viewer.hidden = false;
  const query = new URLSearchParams({ path, start_line: start, end_line: end });
  try {
    const lines = await api("/api/memory/file?" + query.toString());
    body.replaceChildren();
    const first = lines.start_line || Number(start);
    lines.text.split("\n").forEach((line, i) => {
      const row = el("div", "line");
      row.append(el("span", "line-no", first + i), el("span", "line-text", line));
      body.append(row);
    });
  } catch (err) {
    body.replaceChildren(el("p", "error", err.message));
  }
}

// ---- wiring --------------------------------------------------------------------------------

function wire() {
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const message = $("input").value.trim();
    if (!message || state.busy) return;
    $("input").value = "";
    send(message);
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", stop);
  $("new-session").addEventListener("click", newSession);
  $("messages").addEventListener("click", (event) => {
    const link = event.target.closest("a.citation");
    if (!link) return;
    event.preventDefault();
    openCitation(link.dataset.path, link.dataset.start, link.dataset.end);
  });
  $("viewer").addEventListener("click", (event) => {
    if (event.target.id === "viewer-close") $("viewer").hidden = true;
  });
  $("save-token").addEventListener("click", () => {
    const token = $("token").value.trim();
    if (token) localStorage.setItem(TOKEN_KEY, token);
    $("token").value = "";
    $("settings").open = false;
    showBanner("");
    loadSessions();
  });
  $("clear-token").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    $("token").value = "";
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") $("viewer").hidden = true;
  });
}

wire();
loadSessions().then(() => {
  const match = location.hash.match(/^#session=(.+)$/);
  if (match) openSession(decodeURIComponent(match[1]));
});
