// The usage view in the sidebar: tokens per day for the last 30 days as an SVG bar chart (tap a
// bar for its day), today's spend against the budget. No chart library: plain SVG elements.

import { api } from "/static/api.js";
import { $, el } from "/static/render.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 300; // the chart's viewBox; it scales to the sidebar's width
const HEIGHT = 80;

function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  return node;
}

function tokens(row) {
  return row.prompt_tokens + row.completion_tokens;
}

function describe(row) {
  const price = row.price === null ? "" : `, $${row.price.toFixed(4)}`;
  const failed = row.failed ? `, ${row.failed} failed` : "";
  return `${row.key}: ${tokens(row).toLocaleString()} tokens in ${row.requests} requests` +
    ` (${row.cached_tokens.toLocaleString()} cached${failed}${price})`;
}

// One bar per day, as tall as its share of the busiest day; each bar names its day.
function chart(rows) {
  const most = Math.max(1, ...rows.map(tokens));
  const step = WIDTH / Math.max(rows.length, 1);
  const box = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: "none", role: "img",
    class: "usage-chart", "aria-label": "Tokens per day, last 30 days",
  });
  rows.forEach((row, index) => {
    const height = Math.max(tokens(row) ? 1 : 0, (HEIGHT * tokens(row)) / most);
    const bar = svg("rect", {
      x: index * step + step * 0.1, y: HEIGHT - height, width: step * 0.8, height,
      class: row.failed ? "bar failed" : "bar", tabindex: 0, "data-day": row.key,
    });
    const title = svg("title", {});
    title.textContent = describe(row);
    bar.append(title);
    bar.addEventListener("click", () => ($("usage-day").textContent = describe(row)));
    bar.addEventListener("focus", () => ($("usage-day").textContent = describe(row)));
    box.append(bar);
  });
  return box;
}

function capLine(label, spent, cap, unit) {
  const shown = unit === "$" ? `$${spent.toFixed(4)}` : spent.toLocaleString();
  const limit = cap === null ? "no cap" : unit === "$" ? `$${cap}` : cap.toLocaleString();
  const over = cap !== null && spent >= cap;
  const named = unit === "$" ? shown : `${shown} tokens`;
  const against = cap === null ? "no cap" : `cap ${limit}${over ? ", reached" : ""}`;
  return el("li", over ? "over" : "", `${label}: ${named} (${against})`);
}

// Fetches the last 30 days and the budget, and draws them.
export async function showUsage() {
  const box = $("usage-body");
  try {
    const [report, budget] = await Promise.all([
      api("/api/usage?by=day"), api("/api/usage/budget"),
    ]);
    const total = report.total;
    const price = total.price === null ? "" : `, $${total.price.toFixed(2)}`;
    const today = budget.today;
    box.replaceChildren(
      chart(report.rows),
      el("p", "hint", `${report.rows[0]?.key ?? ""} – ${report.rows.at(-1)?.key ?? ""}`),
      el("p", "usage-day", ""),
      el("p", "", `30 days: ${tokens(total).toLocaleString()} tokens, ${total.requests} requests${price}`),
      el("ul", "usage-caps"),
    );
    box.querySelector(".usage-day").id = "usage-day";
    box.querySelector(".usage-caps").append(
      capLine("Today", today.tokens, budget.daily_tokens, "tokens"),
      capLine("Today", today.usd, budget.daily_usd, "$"),
      capLine("Background", today.background_tokens, budget.background_daily_tokens, "tokens"),
      capLine("Background", today.background_usd, budget.background_daily_usd, "$"),
    );
  } catch (err) {
    box.replaceChildren(el("p", "error", err.message));
  }
}

export function wireUsage() {
  $("usage").addEventListener("toggle", () => {
    if ($("usage").open) showUsage();
  });
}
