// The Markdown model answers use, rendered as DOM nodes: headings, lists, quotes, tables, rules,
// paragraphs, fenced code; inline code, bold, italics, strike-through, links and citations.
// Model text only ever becomes text nodes; links keep http(s) and mailto targets only.
// Not marked or markdown-it: they produce HTML strings (model text would need a sanitizer), and
// the page has no build step and fetches nothing from the internet.

const FENCE = /```[^\n]*\n([\s\S]*?)(?:```|$)/g;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;
const INLINE = /(`[^`\n]+`|\*\*[^*\n]+\*\*|~~[^~\n]+~~|\*[^*\s][^*\n]*\*|\[[^\]\n]+\]\([^)\s]+\)|https?:\/\/[^\s<>()]+)/;
const SAFE_LINK = /^(https?:|mailto:)/i;

function node(tag, className) {
  const made = document.createElement(tag);
  if (className) made.className = className;
  return made;
}

// Inline spans of one line or paragraph; `plain` renders the text between them (citations).
export function appendInline(parent, text, plain) {
  for (const part of text.split(INLINE)) {
    if (!part) continue;
    if (part.length > 2 && part.startsWith("`") && part.endsWith("`")) {
      const code = node("code");
      plain(code, part.slice(1, -1));
      parent.append(code);
    } else if (part.length > 4 && part.startsWith("**") && part.endsWith("**")) {
      wrap(parent, "strong", part.slice(2, -2), plain);
    } else if (part.length > 4 && part.startsWith("~~") && part.endsWith("~~")) {
      wrap(parent, "del", part.slice(2, -2), plain);
    } else if (part.length > 2 && part.startsWith("*") && part.endsWith("*")) {
      wrap(parent, "em", part.slice(1, -1), plain);
    } else if (part.startsWith("[")) {
      const match = part.match(/^\[([^\]]+)\]\(([^)\s]+)\)$/);
      if (match && SAFE_LINK.test(match[2])) parent.append(link(match[1], match[2]));
      else plain(parent, part);
    } else if (/^https?:\/\//.test(part)) {
      const url = part.replace(/[.,;:!?'"]+$/, "");
      parent.append(link(url, url));
      if (url.length < part.length) plain(parent, part.slice(url.length));
    } else {
      plain(parent, part);
    }
  }
}

function wrap(parent, tag, text, plain) {
  const inner = node(tag);
  appendInline(inner, text, plain);
  parent.append(inner);
}

function link(text, href) {
  const anchor = node("a", "external");
  anchor.textContent = text;
  anchor.href = href;
  anchor.target = "_blank";
  anchor.rel = "noopener noreferrer";
  return anchor;
}

function cells(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|")) row = row.slice(0, -1);
  return row.split("|").map((cell) => cell.trim());
}

function isBlockStart(lines, at) {
  const line = lines[at];
  return HEADING.test(line) || RULE.test(line) || ITEM.test(line) || QUOTE.test(line)
    || (line.includes("|") && at + 1 < lines.length && TABLE_RULE.test(lines[at + 1]));
}

function table(lines, at, plain) {
  const box = node("div", "table-wrap");
  const grid = node("table");
  const head = node("tr");
  for (const cell of cells(lines[at])) {
    const th = node("th");
    appendInline(th, cell, plain);
    head.append(th);
  }
  grid.append(node("thead"));
  grid.firstChild.append(head);
  const body = node("tbody");
  let next = at + 2;
  while (next < lines.length && lines[next].includes("|") && lines[next].trim()) {
    const row = node("tr");
    for (const cell of cells(lines[next])) {
      const td = node("td");
      appendInline(td, cell, plain);
      row.append(td);
    }
    body.append(row);
    next += 1;
  }
  grid.append(body);
  box.append(grid);
  return [box, next];
}

// A run of list items; deeper-indented items nest inside the item before them.
function list(lines, at, plain) {
  const items = [];
  let next = at;
  while (next < lines.length) {
    const match = lines[next].match(ITEM);
    if (match) {
      const item = { indent: match[1].replace(/\t/g, "    ").length, marker: match[2], text: match[3] };
      // A marker of the other kind (bullet vs number) at the outer level starts a new list.
      const outer = items.length && item.indent <= items[0].indent;
      if (outer && /\d/.test(item.marker) !== /\d/.test(items[0].marker)) break;
      items.push(item);
    } else if (lines[next].trim() && /^\s+/.test(lines[next]) && items.length) {
      items[items.length - 1].text += "\n" + lines[next].trim(); // a continuation line
    } else {
      break;
    }
    next += 1;
  }
  return [buildList(items, 0, items.length, plain), next];
}

function buildList(items, from, to, plain) {
  const ordered = /\d/.test(items[from].marker);
  const root = node(ordered ? "ol" : "ul");
  if (ordered && parseInt(items[from].marker, 10) !== 1) root.start = parseInt(items[from].marker, 10);
  const base = items[from].indent;
  let at = from;
  while (at < to) {
    const li = node("li");
    appendInline(li, items[at].text, plain);
    let end = at + 1;
    while (end < to && items[end].indent > base) end += 1;
    if (end > at + 1) li.append(buildList(items, at + 1, end, plain));
    root.append(li);
    at = end;
  }
  return root;
}

// Block structure of text without code fences.
function appendBlocks(parent, text, plain) {
  const lines = text.split("\n");
  let at = 0;
  while (at < lines.length) {
    const line = lines[at];
    if (!line.trim()) {
      at += 1;
      continue;
    }
    const heading = line.match(HEADING);
    if (heading) {
      const h = node("h" + heading[1].length);
      appendInline(h, heading[2], plain);
      parent.append(h);
      at += 1;
    } else if (line.includes("|") && at + 1 < lines.length && TABLE_RULE.test(lines[at + 1])) {
      const [box, next] = table(lines, at, plain);
      parent.append(box);
      at = next;
    } else if (RULE.test(line)) {
      parent.append(node("hr"));
      at += 1;
    } else if (ITEM.test(line)) {
      const [made, next] = list(lines, at, plain);
      parent.append(made);
      at = next;
    } else if (QUOTE.test(line)) {
      const quoted = [];
      while (at < lines.length && QUOTE.test(lines[at])) quoted.push(lines[at++].match(QUOTE)[1]);
      const quote = node("blockquote");
      appendBlocks(quote, quoted.join("\n"), plain);
      parent.append(quote);
    } else {
      const para = [line];
      at += 1;
      while (at < lines.length && lines[at].trim() && !isBlockStart(lines, at)) para.push(lines[at++]);
      const p = node("p");
      appendInline(p, para.join("\n"), plain);
      parent.append(p);
    }
  }
}

// Replaces node's content with `text` rendered; an unclosed fence (still streaming) is code too.
export function renderMarkdown(parent, text, plain) {
  parent.replaceChildren();
  let at = 0;
  for (const match of text.matchAll(FENCE)) {
    appendBlocks(parent, text.slice(at, match.index), plain);
    const pre = node("pre", "code");
    const code = node("code");
    code.textContent = match[1].replace(/\n$/, "");
    pre.append(code);
    parent.append(pre);
    at = match.index + match[0].length;
  }
  appendBlocks(parent, text.slice(at), plain);
}
