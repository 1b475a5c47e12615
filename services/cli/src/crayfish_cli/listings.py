"""`crayfish sessions`, `crayfish skills`, `crayfish tools` and `crayfish memory`: list, show,
search."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

from crayfish_cli.api import CrayfishClient
from crayfish_cli.content import plain_text
from crayfish_cli.render import Style, short_args, shorten, use_colour

CITATION = re.compile(r"^(?P<path>.+?)(?:#L(?P<start>\d+)(?:-L?(?P<end>\d+))?)?$")


def _style() -> Style:
    return Style(use_colour(sys.stdout))


def _dump(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


def _when(value: Any) -> str:
    if isinstance(value, int | float):
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(value))
    return str(value or "")[:16].replace("T", " ")


def list_sessions(client: CrayfishClient, as_json: bool) -> int:
    sessions = client.sessions()
    if as_json:
        _dump(sessions)
        return 0
    if not sessions:
        print("no sessions yet")
        return 0
    s = _style()
    for item, depth in nested_sessions(sessions):
        count = f"{item.get('messages', 0)} msgs"
        when = s.dim(_when(item.get("updated_at")))
        if depth:
            label = item.get("label") or "subagent"
            title = f"{'  ' * depth}↳ {shorten(str(label), 40)} ({item.get('status') or '?'})"
        else:
            title = shorten(str(item.get("title") or ""), 50)
        print(f"{s.bold(str(item['id']))}  {when}  {count:>8}  {title}")
    return 0


def nested_sessions(sessions: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Sessions in their order, a subagent's right under the session that spawned it (with
    its depth); one whose parent is not listed stays where it is."""
    ids = {item["id"] for item in sessions}
    under: dict[str, list[dict[str, Any]]] = {}
    top = []
    for item in sessions:
        parent = str(item.get("parent_session") or "")
        if parent in ids:
            under.setdefault(parent, []).append(item)
        else:
            top.append(item)
    out: list[tuple[dict[str, Any], int]] = []

    def add(item: dict[str, Any], depth: int) -> None:
        out.append((item, depth))
        for child in under.get(item["id"], []):
            add(child, depth + 1)

    for item in top:
        add(item, 0)
    return out


def show_session(client: CrayfishClient, session_id: str, as_json: bool) -> int:
    session = client.session(session_id)
    if as_json:
        _dump(session)
        return 0
    s = _style()
    replies = {r.get("message_index"): r for r in session.get("channel_replies") or []}
    owed: dict[str, Any] | None = None
    for index, message in enumerate(session.get("messages", [])):
        role, content = message.get("role"), plain_text(message.get("content"))
        if role == "user":
            _delivery(s, owed)
            owed = replies.get(index)
            print(s.bold("you: ") + str(content))
        elif role == "assistant":
            if content:
                print(s.cyan("crayfish: ") + str(content))
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                print(s.dim(f"  ⚙ {function.get('name')} {short_args(function.get('arguments'))}"))
        elif role == "tool":
            print(s.dim(f"  → {shorten(str(content), 90)}"))
    _delivery(s, owed)
    return 0


def _delivery(s: Style, reply: dict[str, Any] | None) -> None:
    """Where a chat turn's answer went, under the turn (a failure with its error)."""
    if reply is None:
        return
    where = f"{reply.get('channel')} chat {reply.get('chat_id')}"
    if reply.get("status") == "failed":
        print(s.red(f"  ✗ not delivered to {where}: {reply.get('error') or 'no reason given'}"))
    elif reply.get("status") == "pending":
        print(s.dim(f"  … on its way to {where}"))
    else:
        print(s.dim(f"  ✓ delivered to {where}"))


def delete_session(client: CrayfishClient, session_id: str) -> int:
    client.delete_session(session_id)
    print(f"deleted session {session_id}")
    return 0


def list_skills(client: CrayfishClient, as_json: bool) -> int:
    catalog = client.skills()
    if as_json:
        _dump(catalog)
        return 0
    s = _style()
    for skill in catalog.get("skills", []):
        mark = s.green("✓") if skill.get("available") else s.red("✗")
        emoji = f"{skill['emoji']} " if skill.get("emoji") else ""
        source = s.dim(f"[{skill.get('source', '')}]")
        name = s.bold(str(skill.get("name")))
        print(f"{mark} {emoji}{name} {source}  {skill.get('description', '')}")
        if skill.get("missing"):
            print(s.dim(f"    missing: {', '.join(map(str, skill['missing']))}"))
    for problem in catalog.get("diagnostics", []):
        print(f"! {problem.get('path')}: {problem.get('reason')}", file=sys.stderr)
    if not catalog.get("skills"):
        print("no skills")
    return 0


def list_tools(client: CrayfishClient, as_json: bool) -> int:
    listed = client.tools()
    if as_json:
        _dump(listed)
        return 0
    s = _style()
    for tool in listed.get("tools", []):
        later = s.dim(" (via tool_search)") if tool.get("deferred") else ""
        service = s.dim(f"[{tool['service']}]")
        print(f"{s.bold(tool['name'])} {service}{later}  {shorten(str(tool['description']), 70)}")
    for service, reason in listed.get("unavailable", {}).items():
        print(f"{service}: unavailable ({reason})", file=sys.stderr)
    for refused in listed.get("refused", []):
        print(
            f"{refused['name']} [{refused['service']}]: refused, the name belongs to"
            f" {refused['owner']}",
            file=sys.stderr,
        )
    for name, reason in listed.get("not_offered", {}).items():
        print(f"{name}: not offered ({reason})", file=sys.stderr)
    return 0


def search_memory(client: CrayfishClient, query: str, top_k: int | None, as_json: bool) -> int:
    hits = client.memory_search(query, top_k)
    if as_json:
        _dump(hits)
        return 0
    if not hits:
        print("no matches")
        return 0
    s = _style()
    for hit in hits:
        citation = hit.get("citation") or f"{hit.get('path')}#L{hit.get('start_line')}"
        score = f"{float(hit.get('score') or 0):.3f}"
        print(f"{s.bold(str(citation))}  {s.dim(score)}")
        for line in str(hit.get("snippet", "")).strip().splitlines()[:6]:
            print(f"    {line}")
    return 0


def show_memory(client: CrayfishClient, citation: str, as_json: bool) -> int:
    """Prints the lines a citation like `MEMORY.md#L3-L5` points at."""
    match = CITATION.match(citation.strip())
    if match is None:
        raise ValueError(f"not a citation: {citation!r} (expected path#Lx-Ly)")
    start = int(match["start"]) if match["start"] else None
    end = int(match["end"]) if match["end"] else start
    lines = client.memory_file(match["path"], start, end)
    if as_json:
        _dump(lines)
        return 0
    first = int(lines.get("start_line") or 1)
    for offset, line in enumerate(str(lines.get("text", "")).splitlines()):
        print(f"{_style().dim(f'{first + offset:>5}')}  {line}")
    return 0
