// Crayfish web chat: sessions, turns, cited lines and the token, wired to the page.

import { HttpError, TOKEN_KEY, api, followAll, followTask } from "/static/api.js";
import { closeMenu, menuIsOpen, openMenu, wireMenu } from "/static/menu.js";
import { modelCommand } from "/static/model_command.js";
import { wireHistory } from "/static/memory_history.js";
import { wireUsage } from "/static/usage.js";
import { watchPairings } from "/static/pairings.js";
import {
  $, TurnView, addUserMessage, el, setStatus, showApprovalCard, showBanner, showNotification,
} from "/static/render.js";

const state = { session: null, task: null, busy: false, image: null, pendingModel: null };
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

// Shows an error; a missing or wrong token opens the token field.
function report(err) {
  showBanner(err.message);
  if (err instanceof HttpError && err.status === 401) {
    openMenu(); // on a phone the token field is in the menu
    $("settings").open = true;
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

// Subagents' sessions right under their parent's (children of children under theirs); the
// others in the order listed.
function nested(sessions) {
  const ids = new Set(sessions.map((item) => item.id));
  const under = new Map();
  const top = [];
  for (const item of sessions) {
    if (item.parent_session && ids.has(item.parent_session)) {
      if (!under.has(item.parent_session)) under.set(item.parent_session, []);
      under.get(item.parent_session).push(item);
    } else top.push(item);
  }
  const out = [];
  const add = (item, depth) => {
    out.push({ item, depth });
    for (const child of under.get(item.id) || []) add(child, depth + 1);
  };
  for (const item of top) add(item, 0);
  return out;
}

async function loadSessions() {
  let body;
  try {
    body = await api("/api/sessions");
  } catch (err) {
    report(err);
    return;
  }
  const list = $("sessions");
  list.replaceChildren();
  for (const { item, depth } of nested(body.sessions || [])) {
    const row = el("li", item.id === state.session ? "active" : "");
    if (depth) row.style.marginLeft = depth * 14 + "px";
    const open = el("button", "session-open");
    open.type = "button";
    open.title = item.id;
    const title = item.parent_session ? "↳ subagent " + (item.label || item.id) : item.title || "(untitled)";
    open.append(el("span", "session-title", title));
    const status = item.parent_session ? (item.status || "") + " · " : "";
    open.append(el("span", "session-meta", status + relativeTime(item.updated_at) + " · " + item.messages + " msgs"));
    open.addEventListener("click", () => {
      closeMenu();
      openSession(item.id);
    });
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
    report(err);
    return;
  }
  showBanner("");
  clearMessages();
  setSession(id);
  renderHistory(body.messages || [], body.channel_replies || []);
}

// Rebuilds a conversation from OpenAI-format messages (tool results matched by call id); a
// chat turn's reply (placed by the index of its user message) ends its turn.
function renderHistory(messages, replies) {
  const replyAt = new Map(replies.filter((r) => r.message_index !== null).map((r) => [r.message_index, r]));
  let view = null;
  let owed = null;
  const settle = () => {
    if (owed) (view || new TurnView()).delivery(owed);
    owed = null;
  };
  for (const [index, message] of messages.entries()) {
    if (message.role === "user") settle();
    const parts = Array.isArray(message.content) ? message.content : [];
    const content = typeof message.content === "string"
      ? message.content
      : parts.filter((p) => p.type === "text").map((p) => p.text).join("\n");
    if (message.role === "user") {
      addUserMessage(content, parts.filter((p) => p.type === "image_ref").map((p) => p.path));
      view = null;
      owed = replyAt.get(index) || null;
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
  settle();
}

async function deleteSession(id) {
  if (!confirm("Delete this session and its history?")) return;
  try {
    await api("/api/sessions/" + encodeURIComponent(id), { method: "DELETE" });
  } catch (err) {
    report(err);
    return;
  }
  if (state.session === id) newSession();
  loadSessions();
}

function newSession() {
  if (state.busy) return;
  state.pendingModel = null;
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
  const images = state.image ? [state.image.url] : [];
  addUserMessage(message, images);
  clearImage();
  const view = new TurnView(answerApproval);
  try {
    const body = state.session ? { message, session_id: state.session } : { message };
    if (images.length) body.images = images;
    const chosen = state.session ? null : state.pendingModel;
    if (chosen) body.model = chosen;
    const accepted = await api("/api/chat", { method: "POST", body });
    state.task = accepted.task_id;
    setSession(accepted.session_id);
    await followTask(accepted.task_id, (type, data) => view.handle(type, data));
    if (chosen) {
      // The session exists once its first turn took the message: now it keeps the choice.
      state.pendingModel = null;
      const change = { method: "PATCH", body: { model: chosen } };
      await api("/api/sessions/" + encodeURIComponent(accepted.session_id), change);
    }
  } catch (err) {
    view.note("✗ " + err.message, "error");
  } finally {
    state.task = null;
    setBusy(false);
    loadSessions();
  }
}

// A person's answer to a command waiting for approval (any replica takes it).
function answerApproval(id, decision) {
  return api("/api/approvals/" + encodeURIComponent(id), { method: "POST", body: { decision } });
}

async function stop() {
  if (!state.task) return;
  setStatus("stopping…");
  try {
    await api("/api/tasks/" + encodeURIComponent(state.task) + "/cancel", { method: "POST" });
  } catch (err) {
    report(err);
  }
}

// ---- an attached image ---------------------------------------------------------------------

function attachImage(file) {
  if (!file) return;
  if (!IMAGE_TYPES.includes(file.type)) {
    showBanner("Only PNG, JPEG, GIF or WebP images can be attached (" + (file.type || "unknown type") + ").");
    return;
  }
  const reader = new FileReader();
  reader.onload = () => {
    state.image = { url: reader.result, name: file.name || "pasted image" };
    $("attachment-preview").src = reader.result;
    $("attachment-name").textContent = state.image.name;
    $("attachment").hidden = false;
  };
  reader.readAsDataURL(file);
}

function clearImage() {
  state.image = null;
  $("attachment").hidden = true;
  $("attachment-preview").removeAttribute("src");
  $("image-file").value = "";
}

// ---- notifications -------------------------------------------------------------------------

// Shows the notify tool's notifications as they come (not older ones: the stream starts with
// the last events of the server).
function watchNotifications() {
  const since = Date.now() / 1000 - 5;
  followAll((type, data) => {
    if (type === "notification" && data.notification && data.notification.ts >= since) {
      showNotification(data.notification);
    } else if (type.startsWith("approval.") && !(type === "approval.requested" && data.created_at < since)) {
      approvalSeen(type, data);  // older questions still waiting come from /api/approvals
    } else if (type === "task.completed" && data.kind === "subagent_report" && data.ts >= since) {
      subagentReported(data.session_id);
    }
  });
  showWaitingApprovals();
}

// A subagent's end was answered in a session: shown at once when it is the one open here (and
// no turn of the page runs in it), and the list shows the child's new status.
function subagentReported(sessionId) {
  if (sessionId === state.session && !state.busy) openSession(sessionId);
  loadSessions();
}

// Commands of other turns waiting for approval (the turn shown here has its own buttons).
const approvalCards = new Map();

function approvalSeen(type, data) {
  if (type === "approval.requested") {
    if (data.task_id !== state.task && !approvalCards.has(data.id)) {
      approvalCards.set(data.id, showApprovalCard(data, answerApproval));
    }
  } else if (approvalCards.has(data.id)) {
    approvalCards.get(data.id).remove();
    approvalCards.delete(data.id);
  }
}

async function showWaitingApprovals() {
  try {
    const { approvals } = await api("/api/approvals");
    for (const approval of approvals) approvalSeen("approval.requested", approval);
  } catch (_) { /* no token yet: the turn views still show their own */ }
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
    const message = $("input").value.trim() || (state.image ? "(image)" : "");
    if (!message || state.busy) return;
    $("input").value = "";
    if (message === "/model" || message.startsWith("/model ")) {
      modelCommand(message.slice("/model".length).trim(), state);
      return;
    }
    send(message);
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", stop);
  $("attach").addEventListener("click", () => $("image-file").click());
  $("image-file").addEventListener("change", (event) => attachImage(event.target.files[0]));
  $("attachment-remove").addEventListener("click", clearImage);
  $("input").addEventListener("paste", (event) => {
    const item = [...(event.clipboardData?.items || [])].find((i) => i.type.startsWith("image/"));
    if (!item) return;
    event.preventDefault();
    attachImage(item.getAsFile());
  });
  $("new-session").addEventListener("click", () => {
    closeMenu();
    newSession();
  });
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
    closeMenu();
    showBanner("");
    loadSessions();
  });
  $("clear-token").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    $("token").value = "";
  });
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    if (menuIsOpen()) closeMenu(true);
    else $("viewer").hidden = true;
  });
}

wire();
wireMenu();
wireUsage();
wireHistory();
watchNotifications();
watchPairings();
loadSessions().then(() => {
  const match = location.hash.match(/^#session=(.+)$/);
  if (match) openSession(decodeURIComponent(match[1]));
});
