"""The file tools: read_file, write_file, edit_file, list_dir (host side, beneath the workspace).

Binary sniffing is a NUL byte and a share of bad UTF-8, not charset-normalizer or libmagic: the
tools only ever show UTF-8 text. The listing is not os.fwalk: it interleaves each folder's
entries depth-first, sorted, and stops at a cap.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import stat
from abc import abstractmethod
from typing import Any

from crayfish_common.safe_files import describe_os_error, openat2_beneath
from crayfish_common.tools import CallContext, Tool, ToolError, ToolResult, object_schema

from tool_runner.workspace import Workspace

PATH_ARG = {"type": "string", "minLength": 1, "description": "Path relative to the workspace."}
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


class FileTool(Tool):
    """A host-side file tool with its size or entry cap; the blocking work runs in a thread."""

    def __init__(self, ws: Workspace, cap: int) -> None:
        self.ws = ws
        self.cap = cap

    async def run(self, args: dict[str, Any], call: CallContext) -> ToolResult:
        return await asyncio.to_thread(self.work, args)

    @abstractmethod
    def work(self, args: dict[str, Any]) -> ToolResult: ...


class ReadFile(FileTool):
    name = "read_file"
    description = "Read a text file from the workspace, paged by lines (offset is 1-based)."
    parameters = object_schema(
        {
            "path": PATH_ARG,
            "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
            "limit": {"type": "integer", "minimum": 1, "description": "Lines to read."},
        },
        required=["path"],
    )

    def work(self, args: dict[str, Any]) -> ToolResult:
        return read_file(self.ws, args, self.cap)


class WriteFile(FileTool):
    name = "write_file"
    description = "Create or overwrite a text file in the workspace (folders are created)."
    parameters = object_schema(
        {"path": PATH_ARG, "content": {"type": "string"}}, required=["path", "content"]
    )

    def work(self, args: dict[str, Any]) -> ToolResult:
        return write_file(self.ws, args, self.cap)


class EditFile(FileTool):
    name = "edit_file"
    description = "Replace one exact, unique occurrence of `old` with `new` in a workspace file."
    parameters = object_schema(
        {"path": PATH_ARG, "old": {"type": "string", "minLength": 1}, "new": {"type": "string"}},
        required=["path", "old", "new"],
    )

    def work(self, args: dict[str, Any]) -> ToolResult:
        return edit_file(self.ws, args, self.cap)


class ListDir(FileTool):
    name = "list_dir"
    description = "List a workspace folder (sizes, symlink targets), optionally recursively."
    parameters = object_schema(
        {
            "path": {"type": "string", "description": "Folder; default the workspace."},
            "depth": {"type": "integer", "minimum": 1, "maximum": 10},
            "ignore": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Name globs to skip.",
            },
        }
    )

    def work(self, args: dict[str, Any]) -> ToolResult:
        return list_dir(self.ws, args, self.cap)
