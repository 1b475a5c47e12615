// `/model` typed in the composer: list the model presets, or choose one for the session.

import { api } from "/static/api.js";
import { TurnView } from "/static/render.js";

const RESET = "default"; // `/model default`: back to the default preset

// Runs the command; returns the preset to send with the first message of a session not made
// yet (state.pendingModel), which app.js then makes that session's own.
export async function modelCommand(arg, state) {
  const view = new TurnView();
  try {
    const listed = (await api("/v1/models")).data.filter((m) => m.crayfish);
    const names = listed.map((m) => m.id);
    if (!arg) {
      const current = state.session
        ? (await api("/api/sessions/" + encodeURIComponent(state.session))).model
        : state.pendingModel;
      for (const preset of listed) {
        const marks = ["default", "fallback", "background"].filter((m) => preset.crayfish[m]);
        const chosen = preset.id === current ? "● " : "○ ";
        const extra = marks.length ? " (" + marks.join(", ") + ")" : "";
        view.note(chosen + preset.id + ": " + preset.crayfish.model + extra);
      }
      return;
    }
    const model = arg === RESET && !names.includes(RESET) ? null : arg;
    if (model !== null && !names.includes(model)) {
      view.note("✗ no model preset named " + model + "; /model lists them", "error");
      return;
    }
    if (state.session) {
      const body = { model };
      await api("/api/sessions/" + encodeURIComponent(state.session), { method: "PATCH", body });
    } else {
      state.pendingModel = model;
    }
    view.note("model: " + (model || "the default"));
  } catch (err) {
    view.note("✗ " + err.message, "error");
  }
}
