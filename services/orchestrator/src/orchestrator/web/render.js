// Rendering for the Crayfish page: model text only ever enters the DOM as text nodes.

import { renderMarkdown } from "/static/markdown.js";

const CITATION = /([A-Za-z0-9_][A-Za-z0-9_.\/-]*)#L(\d+)(?:-L?(\d+))?/g;
const ARG_KEYS = ["command", "path", "query", "name", "pattern", "url"];

export const $ = (id) => document.getElementById(id);

export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function showBanner(text) {
  const banner = $("banner");
  banner.textContent = text;
  banner.hidden = !text;
}

export function setStatus(text) {
  $("status").textContent = text || "";
}

function scrollDown() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}


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

// Answer text as Markdown (see markdown.js), with `path#Lx-Ly` citations as links.
function renderText(node, text) {
  renderMarkdown(node, text, appendCitations);
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

// A user message; `images` are data: URLs shown as thumbnails, or workspace paths (history
// keeps references, not the bytes) shown as their names.
export function addUserMessage(text, images = []) {
  $("empty").hidden = true;
  const bubble = el("div", "msg user");
  const body = el("div", "text", text);
  for (const image of images) {
    if (image.startsWith("data:image/")) {
      const thumb = el("img", "thumb");
      thumb.src = image;
      thumb.alt = "attached image";
      body.append(thumb);
    } else {
      body.append(el("div", "image-ref", "🖼 " + image));
    }
  }
  bubble.append(body);
  $("messages").append(bubble);
  scrollDown();
}

// A command of another turn (a schedule, another client) waiting for approval: a card with
// its buttons until it is answered; returns the card (removed when the answer is seen).
export function showApprovalCard(approval, answer) {
  const box = el("div", "notification approval-card");
  box.setAttribute("role", "status");
  box.append(el("strong", "notification-title", "Approve a command? " + approval.id));
  box.append(el("pre", "approval-command", "$ " + approval.command));
  box.append(el("div", "notification-text", "in " + approval.workdir + " · " + approval.reason));
  const buttons = el("div", "approval-buttons");
  const state = el("span", "approval-state");
  for (const [decision, label] of [["allow-once", "Allow once"], ["allow-always", "Always allow"], ["deny", "Deny"]]) {
    const button = el("button", "approval-" + decision, label);
    button.type = "button";
    button.addEventListener("click", async () => {
      for (const b of buttons.querySelectorAll("button")) b.disabled = true;
      try {
        await answer(approval.id, decision);
        box.remove();
      } catch (err) {
        state.textContent = "✗ " + err.message;
      }
    });
    buttons.append(button);
  }
  buttons.append(state);
  box.append(buttons);
  $("notifications").append(box);
  return box;
}

// A notification from the notify tool: stays until dismissed.
export function showNotification(note) {
  const box = el("div", "notification priority-" + (note.priority || "normal"));
  box.setAttribute("role", "status");
  if (note.title) box.append(el("strong", "notification-title", note.title));
  box.append(el("div", "notification-text", note.text));
  const close = el("button", "notification-close", "×");
  close.type = "button";
  close.setAttribute("aria-label", "Dismiss");
  close.addEventListener("click", () => box.remove());
  box.append(close);
  $("notifications").append(box);
}

// One assistant turn: text blocks and tool blocks in the order they happened. `answer(id,
// decision)` sends a person's answer to a command waiting for approval.
export class TurnView {
  constructor(answer = null) {
    $("empty").hidden = true;
    this.root = el("div", "msg assistant");
    this.tools = new Map();
    this.approvals = new Map();
    this.answer = answer;
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

  // A command waits for a person: what it runs, where and why, with a button per answer.
  approvalAsked(data) {
    const box = el("div", "approval");
    const head = el("div", "approval-head");
    head.append(el("strong", "", "Approve this command?"), el("code", "approval-id", data.id));
    const command = el("pre", "approval-command", "$ " + data.command);
    const why = el("div", "note", "in " + data.workdir + " · " + data.reason);
    const buttons = el("div", "approval-buttons");
    const state = el("span", "approval-state");
    for (const [decision, label] of [["allow-once", "Allow once"], ["allow-always", "Always allow"], ["deny", "Deny"]]) {
      const button = el("button", "approval-" + decision, label);
      button.type = "button";
      button.addEventListener("click", () => this.sendAnswer(data.id, decision));
      buttons.append(button);
    }
    buttons.append(state);
    box.append(head, command, why, buttons);
    this.root.append(box);
    this.approvals.set(data.id, { box, buttons, state });
    setStatus("waiting for your approval…");
    scrollDown();
  }

  async sendAnswer(id, decision) {
    const approval = this.approvals.get(id);
    if (!approval || !this.answer) return;
    for (const button of approval.buttons.querySelectorAll("button")) button.disabled = true;
    try {
      await this.answer(id, decision);
    } catch (err) {
      approval.state.textContent = "✗ " + err.message;
    }
  }

  approvalSettled(id, text) {
    const approval = this.approvals.get(id);
    if (!approval) return;
    for (const button of approval.buttons.querySelectorAll("button")) button.remove();
    approval.state.textContent = text;
    approval.box.classList.add("settled");
  }

  note(text, className = "note") {
    this.root.append(el("div", className, text));
    scrollDown();
  }

  // Where a chat turn's answer went: a failed delivery plainly, with its error.
  delivery(reply) {
    const where = reply.channel + " chat " + reply.chat_id;
    if (reply.status === "failed") {
      this.note("✗ not delivered to " + where + ": " + (reply.error || "no reason given"), "error delivery-failed");
    } else if (reply.status === "pending") {
      this.note("… on its way to " + where, "note delivery-pending");
    } else this.note("✓ delivered to " + where, "note delivery-done");
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
    else if (type === "task.interrupted") this.note("✗ interrupted: " + (data.error || ""), "error");
    else if (type === "llm.request") setStatus("thinking…");
    else if (type === "approval.requested") this.approvalAsked(data);
    else if (type === "approval.answered") this.approvalSettled(data.id, "answered: " + data.decision);
    else if (type === "approval.expired") this.approvalSettled(data.id, "no answer in time: " + data.action);
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

