"""The model's Markdown as the HTML subset Telegram renders (parse_mode HTML): bold, italic,
strike, inline code, code blocks with their language, links, quotes; headings become bold and
list bullets `•`. Everything else is escaped text, so nothing the model writes is taken as a tag.

Not MarkdownV2: it makes every `.`, `-`, `(` outside an entity an error unless escaped, so a
converter's one miss fails the whole message; HTML needs only `<`, `>` and `&` escaped."""

from __future__ import annotations

import html
import re

FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+#.-]*)\s*$")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
BULLET = re.compile(r"^(\s*)[-*+]\s+")
RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
QUOTE = re.compile(r"^\s{0,3}>\s?")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[([^\]\n]+)\]\((https?://[^)\s]+)\)")  # an image too: its link
BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
ITALIC = re.compile(
    r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)"
)
STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")


def to_html(markdown: str) -> str:
    out: list[str] = []
    code: list[str] | None = None  # lines of an open code block
    language = ""
    quote: list[str] = []
    for line in markdown.split("\n"):
        fence = FENCE.match(line)
        if code is not None:
            if fence and not fence.group(2):
                out.append(_code_block(code, language))
                code = None
            else:
                code.append(line)
            continue
        if QUOTE.match(line):
            quote.append(inline(QUOTE.sub("", line, count=1)))
            continue
        if quote:
            out.append(f"<blockquote>{chr(10).join(quote)}</blockquote>")
            quote = []
        if fence:
            code, language = [], fence.group(2)
            continue
        out.append(_line(line))
    if quote:
        out.append(f"<blockquote>{chr(10).join(quote)}</blockquote>")
    if code is not None:  # never closed: still shown as code
        out.append(_code_block(code, language))
    return "\n".join(out)


def _line(line: str) -> str:
    if RULE.match(line):
        return "──────"
    heading = HEADING.match(line)
    if heading:
        return f"<b>{inline(heading.group(1))}</b>"
    bullet = BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {inline(line[bullet.end() :])}"
    return inline(line)


def _code_block(lines: list[str], language: str) -> str:
    body = html.escape("\n".join(lines), quote=False)
    if language:
        return f'<pre><code class="language-{html.escape(language)}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def inline(text: str) -> str:
    """One line's inline Markdown; code spans first, so nothing inside them is formatted."""
    parts = CODE_SPAN.split(text)
    rendered = []
    for index, part in enumerate(parts):
        if index % 2:
            rendered.append(f"<code>{html.escape(part, quote=False)}</code>")
        else:
            rendered.append(_styled(html.escape(part, quote=False)))
    return "".join(rendered)


def _styled(text: str) -> str:
    """Bold, strike, italic, and links, whose addresses are set aside first (an address's `_`
    or `*` is not emphasis)."""
    links: list[tuple[str, str]] = []

    def set_aside(match: re.Match[str]) -> str:
        links.append((match.group(1), match.group(2).replace('"', "%22")))
        return f"\x00{len(links) - 1}\x00"

    text = LINK.sub(set_aside, text)
    text = BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = STRIKE.sub(lambda m: f"<s>{m.group(1)}</s>", text)
    text = ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", text)
    return re.sub(
        "\x00(\\d+)\x00",
        lambda m: '<a href="{1}">{0}</a>'.format(*links[int(m.group(1))]),
        text,
    )


def visible_length(markdown: str) -> int:
    """Characters Telegram counts for the converted text (tags and entities parsed)."""
    return len(html.unescape(re.sub(r"<[^>]+>", "", to_html(markdown))))
