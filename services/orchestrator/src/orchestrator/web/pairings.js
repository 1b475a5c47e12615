// Chat senders waiting for the owner (pairing codes of the channels service): a card each, with
// a button that lets the sender talk to the assistant. Looked up now and every few seconds.
import { api } from "/static/api.js";
import { $, el } from "/static/render.js";

const LOOK_EVERY_MS = 10_000;
const cards = new Map();  // "channel/code" → its card

function keyOf(pairing) {
  return pairing.channel + "/" + pairing.code;
}

function showPairingCard(pairing) {
  const box = el("div", "notification pairing-card");
  box.setAttribute("role", "status");
  const who = pairing.sender_name ? pairing.sender_name + " (" + pairing.sender_id + ")" : pairing.sender_id;
  box.append(el("strong", "notification-title", "Let " + who + " talk to the assistant on " + pairing.channel + "?"));
  box.append(el("div", "notification-text", "Code " + pairing.code + " · they see the same code in their chat"));
  const buttons = el("div", "approval-buttons");
  const outcome = el("span", "approval-state");
  const approve = el("button", "pairing-approve", "Approve");
  approve.type = "button";
  approve.addEventListener("click", async () => {
    approve.disabled = true;
    try {
      const path = "/api/pairings/" + encodeURIComponent(pairing.code) + "/approve?channel=" + encodeURIComponent(pairing.channel);
      await api(path, { method: "POST" });
      box.remove();
      cards.delete(keyOf(pairing));
    } catch (err) {
      approve.disabled = false;
      outcome.textContent = "✗ " + err.message;
    }
  });
  buttons.append(approve, outcome);
  box.append(buttons);
  $("notifications").append(box);
  return box;
}

async function lookForPairings() {
  try {
    const { pairings } = await api("/api/pairings");
    const waiting = new Set(pairings.map(keyOf));
    for (const pairing of pairings) {
      if (!cards.has(keyOf(pairing))) cards.set(keyOf(pairing), showPairingCard(pairing));
    }
    for (const [key, card] of cards) {
      if (!waiting.has(key)) { card.remove(); cards.delete(key); }  // approved elsewhere, or expired
    }
  } catch (_) { /* no token yet: the next look tries again */ }
}

export function watchPairings() {
  lookForPairings();
  setInterval(lookForPairings, LOOK_EVERY_MS);
}
