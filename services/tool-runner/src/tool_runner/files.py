"""The file tools: read_file, write_file, edit_file, list_dir (host side, beneath the workspace)."""

from __future__ import annotations

import fnmatch
import os
import stat
from typing import Any

from crayfish_common.safe_files import describe_os_error, openat2_beneath

from tool_runner.fsafe import ToolError, Workspace
from tool_runner.result import ToolResult

DEFAULT_IGNORE = [".git", "node_modules", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache"]
BINARY_SNIFF = 8192


def decode_text(path: str, data: bytes) -> str:
    """UTF-8 text (a few bad bytes replaced), or a ToolError for binary content."""
    if b"\x00" in data[:BINARY_SNIFF]:
        raise ToolError(f"{path}: binary file ({len(data)} bytes); not shown")
    text = data.decode("utf-8", "replace")
    if text.count("\ufffd") > max(8, len(text) // 100):
        raise ToolError(f"{path}: not UTF-8 text ({len(data)} bytes); not shown")
    return text


def read_file(ws: Workspace, args: dict[str, Any], max_bytes: int) -> ToolResult:
    path = args["path"]
    offset = int(args.get("offset", 1))
    limit = int(args.get("limit", 2000))
    text = decode_text(path, ws.read_bytes(path, max_bytes))
    lines = text.splitlines(keepends=True)
    total = len(lines)
    if total and offset > total:
        raise ToolError(f"{path}: offset {offset} is past the end ({total} lines)")
    chosen = lines[offset - 1 : offset - 1 + limit]
    body = "".join(chosen)
    last = offset - 1 + len(chosen)
    more = last < total
    if more or offset > 1:
        note = f"[lines {offset}-{last} of {total}"
        note += f"; call again with offset={last + 1} for more]" if more else "]"
        body = body + ("" if body.endswith("\n") or not body else "\n") + note
    data = {"path": path, "offset": offset, "lines": len(chosen), "total_lines": total}
    return ToolResult(ok=True, output=body, data=data)


def write_file(ws: Workspace, args: dict[str, Any], max_bytes: int) -> ToolResult:
    path, content = args["path"], args["content"]
    data = content.encode("utf-8")
    created = ws.write_atomic(path, data, max_bytes)
    verb = "created" if created else "overwrote"
    return ToolResult(
        ok=True, output=f"{verb} {path} ({len(data)} bytes)", data={"bytes": len(data)}
    )


def edit_file(ws: Workspace, args: dict[str, Any], max_bytes: int) -> ToolResult:
    path, old, new = args["path"], args["old"], args["new"]
    if old == "":
        raise ToolError("'old' must not be empty")
    text = decode_text(path, ws.read_bytes(path, max_bytes))
    count = text.count(old)
    if count == 0:
        raise ToolError(f"{path}: 'old' text not found (it must match exactly, whitespace too)")
    if count > 1:
        raise ToolError(
            f"{path}: 'old' text found {count} times; include more context so it is unique"
        )
    updated = text.replace(old, new, 1)
    ws.write_atomic(path, updated.encode("utf-8"), max_bytes)
    line = text[: text.index(old)].count("\n") + 1
    return ToolResult(ok=True, output=f"edited {path} at line {line}", data={"line": line})


def list_dir(ws: Workspace, args: dict[str, Any], max_entries: int) -> ToolResult:
    path = args.get("path", ".")
    depth = int(args.get("depth", 1))
    ignore = list(args.get("ignore", DEFAULT_IGNORE))
    rel = ws.relative(path)
    lines: list[str] = []
    with ws.open(path, os.O_RDONLY | os.O_DIRECTORY) as fd:
        complete = _walk(fd, "", depth, ignore, lines, max_entries)
    if not complete:
        lines.append(f"[stopped after {max_entries} entries]")
    output = "\n".join(lines) if lines else f"{rel}: empty directory"
    return ToolResult(ok=True, output=output, data={"entries": len(lines)}, truncated=not complete)


def _walk(fd: int, prefix: str, depth: int, ignore: list[str], out: list[str], cap: int) -> bool:
    """Appends entries of the folder at fd; False once the entry cap is hit."""
    with os.scandir(fd) as entries:
        items = sorted(entries, key=lambda e: e.name)
    for entry in items:
        if any(fnmatch.fnmatch(entry.name, pat) for pat in ignore):
            continue
        if len(out) >= cap:
            return False
        info = entry.stat(follow_symlinks=False)
        name = prefix + entry.name
        if stat.S_ISLNK(info.st_mode):
            out.append(f"{name} -> {os.readlink(entry.name, dir_fd=fd)}")
        elif stat.S_ISDIR(info.st_mode):
            out.append(name + "/")
            if depth > 1 and not _walk_child(
                fd, entry.name, name + "/", depth - 1, ignore, out, cap
            ):
                return False
        elif stat.S_ISREG(info.st_mode):
            out.append(f"{name} ({info.st_size} bytes)")
        else:
            out.append(f"{name} (special file)")
    return True


def _walk_child(
    fd: int, name: str, prefix: str, depth: int, ignore: list[str], out: list[str], cap: int
) -> bool:
    try:
        child = openat2_beneath(fd, name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        out.append(f"{prefix} [{describe_os_error(prefix, exc)}]")
        return True
    try:
        return _walk(child, prefix, depth, ignore, out, cap)
    finally:
        os.close(child)
