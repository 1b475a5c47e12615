// REST and server-sent events for the Crayfish page; no DOM here.

export const TOKEN_KEY = "crayfish.token";
const TERMINAL = new Set(["task.completed", "task.failed", "task.cancelled", "task.interrupted"]);

/** An error answer of the API: its JSON message, with the HTTP status. */
export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function authHeaders() {
  const token = localStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
}

export async function api(path, options = {}) {
  const headers = { ...authHeaders(), ...(options.headers || {}) };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const reply = await fetch(path, {
    ...options,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  if (reply.status === 401) {
    throw new HttpError(401, "The server wants an API token: enter it under “API token”.");
  }
  if (!reply.ok) {
    let message = reply.status + " " + reply.statusText;
    try {
      message = (await reply.json()).error.message || message;
    } catch (_) { /* not JSON */ }
    throw new HttpError(reply.status, message);
  }
  return reply.status === 204 ? null : reply.json();
}

// Reads one SSE stream with fetch: by hand, as EventSource cannot send an Authorization header.
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
export async function followTask(taskId, onEvent) {
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


// Follows the global event stream (every task, and notifications) from `after` on, for ever,
// resuming with Last-Event-ID when it drops; onEvent(type, data) for each event.
export async function followAll(onEvent, after = 0) {
  let last = after;
  for (let attempt = 0; ; attempt++) {
    try {
      const headers = { ...authHeaders(), Accept: "text/event-stream" };
      if (last) headers["Last-Event-ID"] = String(last);
      const response = await fetch("/api/events", { headers });
      if (response.ok) {
        attempt = 0;
        await readSse(response, (id, type, data) => {
          last = Math.max(last, id);
          onEvent(type, data);
        });
      }
    } catch (_) { /* dropped: try again below */ }
    await new Promise((r) => setTimeout(r, Math.min(1000 * 2 ** attempt, 30000)));
  }
}
