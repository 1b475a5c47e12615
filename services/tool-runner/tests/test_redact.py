"""Redaction on its own: every split of a stream, every encoding recognised, nothing garbled."""

from __future__ import annotations

import base64

from tool_runner.redact import Redactor, StreamRedactor

VALUE = "ghp_Redact0123456789abcdefXYZ"
TEXT = f"before {VALUE} middle {base64.b64encode(VALUE.encode()).decode()} after\n".encode()


def stream(redactor: Redactor, pieces: list[bytes]) -> bytes:
    redacting = StreamRedactor(redactor)
    return b"".join(redacting.feed(piece) for piece in pieces) + redacting.flush()


def test_a_stream_split_anywhere_gives_the_same_redacted_bytes():
    redactor = Redactor({VALUE: "GITHUB_TOKEN"})
    whole = redactor.text(TEXT.decode()).encode()
    assert whole == b"before [secret GITHUB_TOKEN] middle [secret GITHUB_TOKEN] after\n"
    for cut in range(1, len(TEXT)):
        assert stream(redactor, [TEXT[:cut], TEXT[cut:]]) == whole, cut
    assert stream(redactor, [bytes([b]) for b in TEXT]) == whole  # a byte at a time


def test_base64_at_every_alignment_keeps_only_the_neighbours_characters():
    redactor = Redactor({VALUE: "GITHUB_TOKEN"})
    for line in (VALUE, VALUE + "\n", "x" + VALUE, "xy" + VALUE + "z"):
        encoded = base64.b64encode(line.encode()).decode()
        first, rest = redactor.text(f"{encoded}\nnext\n").split("\n", 1)
        assert rest == "next\n", line  # the line break is not taken
        assert "[secret GITHUB_TOKEN]" in first, line
        # Left: characters made of the neighbours' bits alone (x, y, z, a newline), padding.
        assert len(first.replace("[secret GITHUB_TOKEN]", "")) <= 4, (line, first)


def test_ordinary_output_passes_unchanged():
    redactor = Redactor({VALUE: "GITHUB_TOKEN"})
    ordinary = "exit 0\nghp_ is a prefix; 0123456789 digits; Z2hw base64 of 'ghp'\n"
    assert redactor.text(ordinary) == ordinary
    assert stream(redactor, [ordinary.encode()]) == ordinary.encode()


def test_a_value_inside_another_is_named_by_the_longer():
    redactor = Redactor({"abcdefgh12": "SHORT", "xxabcdefgh12yy": "LONG"})
    assert redactor.text("xxabcdefgh12yy abcdefgh12") == "[secret LONG] [secret SHORT]"
