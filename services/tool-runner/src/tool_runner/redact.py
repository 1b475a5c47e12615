"""Redaction: a secret's value in a tool's output becomes `[secret NAME]` before it leaves.

Each value is matched as itself, in standard base64 (at any of the three byte alignments, so
inside a longer encoded text too) and in hex, each also when broken across lines (`fold`,
`base64`'s 76-column lines, CRLF). Anything else a command can do to a value (reverse it, print
a piece of it, rot13, gzip, xor) is not recognised: redaction stops accidents, it is no barrier
against a command that wants the value out (see the README).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Callable
from typing import Any

# Shorter encoded forms would match ordinary output by chance.
MIN_FORM_CHARS = 8
LINE_BREAK = r"(?:\r?\n)?"
LINE_BREAK_BYTES = 2


def encoded_forms(value: str) -> list[str]:
    """The value and the encodings recognised as it (only those long enough to be telling)."""
    raw = value.encode("utf-8")
    forms = [value, raw.hex(), raw.hex().upper()]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode("ascii")
        # Characters whose bits come from the value's bytes alone, at this alignment.
        start = 4 if pad else 0
        end = (pad + len(raw)) // 3 * 4
        forms.append(encoded[start:end])
    unique = dict.fromkeys(f for f in forms if len(f) >= MIN_FORM_CHARS)
    return sorted(unique, key=len, reverse=True)


def _pattern(form: str) -> str:
    return LINE_BREAK.join(re.escape(char) for char in form)


class Redactor:
    """Replaces the values of secrets (value -> name) in text and in byte streams."""

    def __init__(self, names_by_value: dict[str, str]):
        self.names: list[str] = []
        parts: list[str] = []
        self.span = 0  # the longest a match can be, in bytes
        # Longer values first: a value inside another is not matched in its place.
        for value in sorted(names_by_value, key=len, reverse=True):
            for form in encoded_forms(value):
                parts.append(f"(?P<s{len(self.names)}>{_pattern(form)})")
                self.names.append(names_by_value[value])
                size = len(form.encode("utf-8")) + LINE_BREAK_BYTES * (len(form) - 1)
                self.span = max(self.span, size)
        source = "|".join(parts)
        self.text_pattern = re.compile(source) if parts else None
        self.bytes_pattern = re.compile(source.encode("utf-8")) if parts else None

    def __bool__(self) -> bool:
        return self.text_pattern is not None

    def _marker(self, found: re.Match[Any]) -> str:
        return f"[secret {self.names[int(str(found.lastgroup)[1:])]}]"

    def text(self, text: str) -> str:
        if self.text_pattern is None or not text:
            return text
        return self.text_pattern.sub(self._marker, text)

    def value(self, data: Any) -> Any:
        """A JSON-like value with every string in it redacted."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {key: self.value(item) for key, item in data.items()}
        if isinstance(data, list | tuple):
            return [self.value(item) for item in data]
        return data

    def marker_bytes(self, found: re.Match[bytes]) -> bytes:
        return self._marker(found).encode("utf-8")


class StreamRedactor:
    """Redacts one byte stream chunk by chunk: the last `span` bytes wait for the next chunk
    (or the end), so a value split between two chunks is still caught."""

    def __init__(self, redactor: Redactor):
        self.redactor = redactor
        self.held = b""

    def feed(self, data: bytes) -> bytes:
        pattern = self.redactor.bytes_pattern
        if pattern is None:
            return data
        text = self.held + data
        # A match not yet complete starts after this point, so it stays held.
        safe = max(len(text) - self.redactor.span, 0)
        out = bytearray()
        done = 0
        for found in pattern.finditer(text):
            if found.start() >= safe:
                break
            out += text[done : found.start()] + self.redactor.marker_bytes(found)
            done = found.end()
        cut = max(done, safe)
        out += text[done:cut]
        self.held = text[cut:]
        return bytes(out)

    def flush(self) -> bytes:
        pattern, rest = self.redactor.bytes_pattern, self.held
        self.held = b""
        if pattern is None or not rest:
            return rest
        return pattern.sub(self.redactor.marker_bytes, rest)


Sink = Callable[[str, bytes], Awaitable[None]]


class RedactingSink:
    """An output sink that passes each stream on through its own StreamRedactor."""

    def __init__(self, sink: Sink, redactor: Redactor):
        self.sink = sink
        self.redactor = redactor
        self.streams: dict[str, StreamRedactor] = {}

    async def __call__(self, stream: str, data: bytes) -> None:
        redacting = self.streams.setdefault(stream, StreamRedactor(self.redactor))
        out = redacting.feed(data)
        if out:
            await self.sink(stream, out)

    async def flush(self) -> None:
        for stream, redacting in self.streams.items():
            out = redacting.flush()
            if out:
                await self.sink(stream, out)
