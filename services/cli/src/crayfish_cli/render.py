"""Terminal output of a turn: streamed answer text, compact tool progress lines, colours.

Five ANSI colours written by hand rather than with rich or colorama: not worth a dependency.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, TextIO

ARG_KEYS = ("command", "path", "query", "name", "pattern", "url", "content")


def use_colour(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")


class Style:
    """ANSI styles, or nothing when the stream is not a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def cyan(self, text: str) -> str:
        return self._wrap("36", text)


def shorten(text: str, width: int = 72) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def short_args(arguments: Any) -> str:
    """The one argument a reader cares about (the command, the path...), else compact JSON."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return shorten(arguments)
    if isinstance(arguments, dict):
        for key in ARG_KEYS:
            if isinstance(arguments.get(key), str):
                return shorten(arguments[key])
        return shorten(json.dumps(arguments, ensure_ascii=False))
    return shorten(str(arguments))


NOISE = re.compile(r"^(exit code: -?\d+|stdout:|stderr:|\(empty\))$")


def gist(output: str) -> str:
    """The line of a failed tool's output most worth a glance: its last meaningful one."""
    lines = [x.strip() for x in output.splitlines() if x.strip() and not NOISE.match(x.strip())]
    return lines[-1] if lines else ""


def format_duration(ms: Any) -> str:
    if not isinstance(ms, int | float):
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


class TurnPrinter:
    """Prints one turn's events: answer text to `out` (live or at the end), progress to `err`."""

    def __init__(self, out: TextIO, err: TextIO, *, live: bool, quiet: bool, verbose: bool):
        self.out, self.err = out, err
        self.live, self.quiet, self.verbose = live, quiet, verbose
        self.style = Style(use_colour(err))
        self.streamed = ""  # answer text printed since the last tool call
        self.at_line_start = True
        self.answer = ""

    def progress(self, text: str) -> None:
        if self.quiet:
            return
        if self.live and not self.at_line_start:
            self.out.write("\n")
            self.out.flush()
            self.at_line_start = True
        self.err.write(text + "\n")
        self.err.flush()

    def write_answer(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.out.flush()
        self.streamed += text
        self.at_line_start = text.endswith("\n")

    def handle(self, kind: str, data: dict[str, Any]) -> None:
        s = self.style
        if kind == "assistant.delta" and self.live:
            self.write_answer(str(data.get("text", "")))
        elif kind == "tool.started":
            self.streamed = ""
            self.progress(
                s.cyan("⚙ ")
                + s.bold(str(data.get("tool")))
                + " "
                + short_args(data.get("arguments"))
            )
        elif kind == "tool.output" and self.verbose:
            for line in str(data.get("text", "")).splitlines():
                self.progress(s.dim(f"  │ {line}"))
        elif kind == "tool.finished":
            self.progress(self._finished_line(data))
        elif kind.startswith("approval."):
            self.progress(self._approval_line(kind, data))
        elif kind == "memory.recall" and data.get("citations"):
            self.progress(s.dim("recalled " + ", ".join(map(str, data["citations"]))))
        elif kind == "assistant.message":
            self.answer = str(data.get("text", ""))
            if self.live and not self.streamed.strip():
                self.write_answer(self.answer)

    def _finished_line(self, data: dict[str, Any]) -> str:
        s = self.style
        took = format_duration(data.get("duration_ms"))
        name = str(data.get("tool"))
        exit_code = data.get("exit_code")
        if data.get("ok") and exit_code in (None, 0):
            return s.green("✓ ") + f"{name} " + s.dim(took)
        code = f"exit {exit_code} · " if exit_code not in (None, 0) else ""
        first = shorten(gist(str(data.get("output", ""))), 60)
        return s.red("✗ ") + f"{name} " + s.dim(f"{code}{took}") + (f"  {first}" if first else "")

    def _approval_line(self, kind: str, data: dict[str, Any]) -> str:
        s = self.style
        ident = str(data.get("id"))
        if kind == "approval.requested":
            return (
                s.cyan("⏸ ")
                + f"approval {s.bold(ident)}: "
                + shorten(str(data.get("command")), 60)
                + s.dim(f"  (crayfish approvals allow|deny {ident})")
            )
        if kind == "approval.expired":
            return s.dim(f"⏱ approval {ident}: no answer in time, {data.get('action')}")
        return s.dim(f"▶ approval {ident}: {data.get('decision')}")

    def end_answer(self) -> None:
        if self.live and not self.at_line_start:
            self.out.write("\n")
            self.out.flush()
            self.at_line_start = True
