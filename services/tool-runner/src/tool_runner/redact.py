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
from dataclasses import dataclass
from typing import Any

# Shorter encoded forms would match ordinary output by chance.
MIN_FORM_CHARS = 8
# A piece of a value at an output cut this long or longer is redacted too.
MIN_PIECE_BYTES = 4
LINE_BREAK = r"(?:\r?\n)?"
MAX_COMPILED = 64
LINE_BREAK_BYTES = 2


B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


@dataclass(frozen=True)
class Form:
    """One way a value may appear: a regex per character, and the longest run of characters
    known exactly (every match holds it once line breaks are taken out)."""

    characters: tuple[str, ...]
    needle: str

    @classmethod
    def literal(cls, text: str) -> Form:
        return cls(tuple(re.escape(char) for char in text), text)


def encoded_forms(value: str) -> list[Form]:
    """The value and the encodings recognised as it (only those long enough to be telling)."""
    raw = value.encode("utf-8")
    forms = [Form.literal(text) for text in (value, raw.hex(), raw.hex().upper())]
    forms += [base64_form(raw, pad) for pad in range(3)]
    unique = {form.characters: form for form in forms if len(form.characters) >= MIN_FORM_CHARS}
    return sorted(unique.values(), key=lambda form: len(form.characters), reverse=True)


def base64_form(raw: bytes, pad: int) -> Form:
    """raw in base64 after `pad` unknown bytes (and before unknown ones): each character that
    carries bits of raw, as itself or as the class of characters its known bits allow (at the
    two ends, where it mixes in bits of the neighbours), then the padding."""
    first, last = pad * 8, (pad + len(raw)) * 8  # raw's bits in the stream
    characters, exact = [], []
    for index in range(first // 6, (last + 5) // 6):
        low, high = max(index * 6, first), min(index * 6 + 6, last)
        known = 0  # raw's bits that fall in this character, in place
        for bit in range(low, high):
            byte = raw[(bit - first) // 8]
            if byte >> (7 - (bit - first) % 8) & 1:
                known |= 1 << (5 - (bit - index * 6))
        mask = sum(1 << (5 - (bit - index * 6)) for bit in range(low, high))
        allowed = [B64_ALPHABET[c] for c in range(64) if c & mask == known]
        exact.append(allowed[0] if len(allowed) == 1 else "")
        characters.append(re.escape(allowed[0]) if len(allowed) == 1 else _class(allowed))
    characters[-1] += "(?:==?)?"  # the padding, never a line break before it
    needle = max("".join(c or "\n" for c in exact).split("\n"), key=len)
    return Form(tuple(characters), needle)


def _class(characters: list[str]) -> str:
    return "[" + "".join(re.escape(c) for c in characters) + "]"


def _squashed(text: str) -> str:
    return text.replace("\r", "").replace("\n", "")


@dataclass(frozen=True)
class Patterns:
    """The regex of some secrets' forms, as text and as bytes, and the name of each group."""

    text: re.Pattern[str]
    data: re.Pattern[bytes]
    names: list[str]

    def marker(self, found: re.Match[Any]) -> str:
        return f"[secret {self.names[int(str(found.lastgroup)[1:])]}]"

    def marker_bytes(self, found: re.Match[bytes]) -> bytes:
        return self.marker(found).encode("utf-8")


class Redactor:
    """Replaces the values of secrets (value -> name) in text and in byte streams.

    One regex over every form of every secret took 20 s per MB of output with 20 secrets; so a
    text is first searched (line breaks taken out) for each form's needle, and only the secrets
    found are matched by regex: 11 ms per MB when none is there, 95 ms with one."""

    def __init__(self, names_by_value: dict[str, str]):
        # Longer values first: a value inside another is not matched in its place.
        ordered = sorted(names_by_value, key=len, reverse=True)
        self.secrets = [(names_by_value[v], encoded_forms(v)) for v in ordered]
        self.values = [(v.encode("utf-8"), names_by_value[v]) for v in ordered]
        self.span = (
            max(  # the longest a match can be, in bytes
                (4 * len(f.characters) + LINE_BREAK_BYTES * len(f.characters) + 2)
                for _, forms in self.secrets
                for f in forms
            )
            if self.secrets
            else 0
        )
        self._compiled: dict[tuple[int, ...], Patterns] = {}

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def patterns_for(self, text: str) -> Patterns | None:
        """The regex of the secrets whose needles text holds, or None when it holds none."""
        squashed = _squashed(text)
        chosen = tuple(
            index
            for index, (_, forms) in enumerate(self.secrets)
            if any(form.needle in squashed for form in forms)
        )
        if not chosen:
            return None
        if chosen not in self._compiled:
            if len(self._compiled) >= MAX_COMPILED:  # sets of secrets seen together: few
                self._compiled.clear()
            parts: list[str] = []
            names: list[str] = []
            for index in chosen:
                name, forms = self.secrets[index]
                for form in forms:
                    parts.append(f"(?P<s{len(names)}>{LINE_BREAK.join(form.characters)})")
                    names.append(name)
            source = "|".join(parts)
            self._compiled[chosen] = Patterns(
                re.compile(source), re.compile(source.encode("utf-8")), names
            )
        return self._compiled[chosen]

    def text(self, text: str) -> str:
        patterns = self.patterns_for(text) if self.secrets and text else None
        return text if patterns is None else patterns.text.sub(patterns.marker, text)

    def value(self, data: Any) -> Any:
        """A JSON-like value with every string in it redacted."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            return {key: self.value(item) for key, item in data.items()}
        if isinstance(data, list | tuple):
            return [self.value(item) for item in data]
        return data

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
        if not self.redactor:
            return data
        text = self.held + data
        # A match not yet complete starts after this point, so it stays held.
        safe = max(len(text) - self.redactor.span, 0)
        patterns = self.redactor.patterns_for(text.decode("utf-8", "replace"))
        if patterns is None:  # no value's needle: only the tail waits
            self.held = text[safe:]
            return text[:safe]
        out = bytearray()
        done = 0
        for found in patterns.data.finditer(text):
            if found.start() >= safe:
                break
            out += text[done : found.start()] + patterns.marker_bytes(found)
            done = found.end()
        cut = max(done, safe)
        out += text[done:cut]
        self.held = text[cut:]
        return bytes(out)

    def flush(self) -> bytes:
        rest, self.held = self.held, b""
        patterns = self.redactor.patterns_for(rest.decode("utf-8", "replace")) if rest else None
        return rest if patterns is None else patterns.data.sub(patterns.marker_bytes, rest)


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
