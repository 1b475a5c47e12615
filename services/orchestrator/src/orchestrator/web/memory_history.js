// The memory history in the sidebar: revisions of MEMORY.md, USER.md, SOUL.md and memory/, each
// opening its diff in the viewer panel, with a button that restores the files as they were there.

import { api } from "/static/api.js";
import { $, el } from "/static/render.js";

function when(revision) {
  return revision.time.replace("T", " ").slice(0, 16);
}

function diffLine(line) {
  let kind = "";
  if (line.startsWith("+") && !line.startsWith("+++")) kind = " added";
  else if (line.startsWith("-") && !line.startsWith("---")) kind = " removed";
  else if (line.startsWith("@@") || line.startsWith("diff ")) kind = " hunk";
  return el("div", "diff-line" + kind, line);
}

async function restore(revision, body) {
  const short = revision.rev.slice(0, 12);
  try {
    const done = await api("/api/memory/restore", {
      method: "POST", body: { rev: revision.rev },
    });
    const said = done.revision === null
      ? "The files already were as at " + short + "."
      : `Restored ${short} as ${done.revision.rev.slice(0, 12)}: ${done.files.join(", ")}`;
    body.prepend(el("p", "restored", said));
    showHistory();
  } catch (err) {
    body.prepend(el("p", "error", err.message));
  }
}

// Opens one revision's diff in the viewer panel.
export async function openRevision(revision) {
  const body = $("viewer-body");
  $("viewer-title").textContent = `${revision.rev.slice(0, 12)} · ${revision.author}`;
  body.replaceChildren(el("p", "hint", "loading…"));
  $("viewer").hidden = false;
  try {
    const shown = await api("/api/memory/history/" + encodeURIComponent(revision.rev));
    // A restore is itself a new revision, so it can be undone the same way: no confirmation.
    const button = el("button", "restore", "Restore the files as they were here");
    button.type = "button";
    button.addEventListener("click", () => restore(revision, body));
    body.replaceChildren(el("p", "revision-reason", `${when(shown)} — ${shown.reason}`), button);
    const diff = el("div", "diff");
    diff.append(...shown.diff.split("\n").map(diffLine));
    body.append(diff);
  } catch (err) {
    body.replaceChildren(el("p", "error", err.message));
  }
}

function item(revision) {
  const row = el("li", "revision");
  const link = el("button", "revision-link", `${when(revision)} ${revision.author}`);
  link.type = "button";
  link.title = `${revision.reason}\n${revision.files.join(", ")}`;
  link.dataset.rev = revision.rev;
  link.addEventListener("click", () => openRevision(revision));
  const reason = revision.reason.length > 80 ? revision.reason.slice(0, 79) + "…" : revision.reason;
  row.append(
    link,
    el("span", "revision-files", revision.files.join(", ")),
    el("span", "revision-why", reason),
  );
  return row;
}

// Fetches the newest revisions and lists them.
export async function showHistory() {
  const box = $("history-body");
  try {
    const { revisions } = await api("/api/memory/history?limit=50");
    if (!revisions.length) {
      box.replaceChildren(el("p", "hint", "No revisions yet."));
      return;
    }
    const list = el("ul", "revisions");
    list.append(...revisions.map(item));
    box.replaceChildren(list);
  } catch (err) {
    box.replaceChildren(el("p", "error", err.message));
  }
}

export function wireHistory() {
  $("memory-history").addEventListener("toggle", () => {
    if ($("memory-history").open) showHistory();
  });
}
