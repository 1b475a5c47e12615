"""Redaction: a secret's value in a tool's output becomes `[secret NAME]` before it leaves.

Each value is matched as itself, in standard base64 (at any of the three byte alignments, so
inside a longer encoded text too; every character that carries bits of the value, and the
padding) and in hex, each also when broken across lines (`fold`, `base64`'s 76-column lines,
CRLF). Anything else a command can do to a value (reverse it, print a piece of it, rot13, gzip,
xor) is not recognised: redaction stops accidents, it is no barrier against a command that wants
the value out (see the README).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

# Shorter encoded forms would match ordinary output by chance.
MIN_FORM_CHARS = 8
# A piece of a value at an output cut this long or longer is redacted too.
MIN_PIECE_BYTES = 4
LINE_BREAK = r"(?:\r?\n)?"
LINE_BREAK_BYTES = 2


B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def encoded_forms(value: str) -> list[list[str]]:
    """The value and the encodings recognised as it, each as one regex per character (only
    those long enough to be telling), longest first."""
    raw = value.encode("utf-8")
    forms = [[re.escape(char) for char in text] for text in (value, raw.hex(), raw.hex().upper())]
    forms += [base64_characters(raw, pad) for pad in range(3)]
    unique = {tuple(form): form for form in forms if len(form) >= MIN_FORM_CHARS}
    return sorted(unique.values(), key=len, reverse=True)


def base64_characters(raw: bytes, pad: int) -> list[str]:
    """raw in base64 after `pad` unknown bytes (and before unknown ones): each character that
    carries bits of raw, as itself or as the class of characters its known bits allow (at the
    two ends, where it mixes in bits of the neighbours)."""
    first, last = pad * 8, (pad + len(raw)) * 8  # raw's bits in the stream
    characters = []
    for index in range(first // 6, (last + 5) // 6):
        low, high = max(index * 6, first), min(index * 6 + 6, last)
        known = 0  # raw's bits that fall in this character, in place
        for bit in range(low, high):
            byte = raw[(bit - first) // 8]
            if byte >> (7 - (bit - first) % 8) & 1:
                known |= 1 << (5 - (bit - index * 6))
        mask = sum(1 << (5 - (bit - index * 6)) for bit in range(low, high))
        allowed = [B64_ALPHABET[c] for c in range(64) if c & mask == known]
        characters.append(re.escape(allowed[0]) if len(allowed) == 1 else _class(allowed))
    characters[-1] += "(?:==?)?"  # the padding, never a line break before it
    return characters


def _class(characters: list[str]) -> str:
    return "[" + "".join(re.escape(c) for c in characters) + "]"


def _pattern(form: list[str]) -> str:
    return LINE_BREAK.join(form)


class Redactor:
    """Replaces the values of secrets (value -> name) in text and in byte streams."""

    def __init__(self, names_by_value: dict[str, str]):
        self.names: list[str] = []
        self.values = [(v.encode("utf-8"), n) for v, n in names_by_value.items()]
        parts: list[str] = []
        self.span = 0  # the longest a match can be, in bytes
        # Longer values first: a value inside another is not matched in its place.
        for value in sorted(names_by_value, key=len, reverse=True):
            for form in encoded_forms(value):
                parts.append(f"(?P<s{len(self.names)}>{_pattern(form)})")
                self.names.append(names_by_value[value])
                size = 4 * len(form) + LINE_BREAK_BYTES * (len(form) - 1)
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

    def cut_pieces(self, head: bytearray, tail: bytearray) -> None:
        """Where output was cut (head kept, middle dropped, tail kept), the head may end with
        the start of a value and the tail begin with its end: those pieces become markers."""
        for value, name in self.values:
            marker = f"[secret {name}, cut]".encode()
            ending = _piece_length(bytes(head), value, at_end=True)
            if ending:
                head[-ending:] = marker
            starting = _piece_length(bytes(tail), value, at_end=False)
            if starting:
                tail[:starting] = marker


def _piece_length(data: bytes, value: bytes, at_end: bool) -> int:
    """The longest piece of value (its start at data's end, or its end at data's start)."""
    for size in range(min(len(value) - 1, len(data)), MIN_PIECE_BYTES - 1, -1):
        if data.endswith(value[:size]) if at_end else data.startswith(value[-size:]):
            return size
    return 0


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
