"""A fetched body as text: the page's charset when it names a real text encoding, else UTF-8."""

from __future__ import annotations

import codecs

# Codecs Python resolves that are not character sets of a page: IDNA and Punycode encode host
# names (and refuse `errors="replace"`), `undefined` always raises, the escape codecs turn
# backslash sequences into any character, and UTF-7 is dropped by browsers because it hides
# markup (`+ADw-script+AD4-`). Bytes-to-bytes codecs (base64, hex, zlib, rot13) are already
# rejected by `_is_text_encoding`.
NOT_PAGE_CHARSETS = frozenset(
    {"idna", "punycode", "undefined", "utf-7", "unicode-escape", "raw-unicode-escape"}
)


def page_codec(charset: str | None) -> str:
    """The codec to decode a page with: its charset if that is a text encoding, else utf-8."""
    if not charset:
        return "utf-8"
    try:
        info = codecs.lookup(charset)
    except (LookupError, ValueError):  # unknown name, or one with a NUL in it
        return "utf-8"
    if not getattr(info, "_is_text_encoding", True) or info.name in NOT_PAGE_CHARSETS:
        return "utf-8"
    return info.name


def decode_page(body: bytes, charset: str | None) -> str:
    """The body as text; bytes the charset cannot decode become U+FFFD, never an error."""
    codec = page_codec(charset)
    try:
        return body.decode(codec, errors="replace")
    except (LookupError, ValueError, TypeError):  # a codec that still refuses: UTF-8 then
        return body.decode("utf-8", errors="replace")
