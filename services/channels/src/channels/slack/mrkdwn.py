"""The model's Markdown as Slack's mrkdwn: `*bold*`, `_italic_`, `~strike~`, inline code and
code blocks (no language), `<url|label>` links, `>` quotes; headings become bold, bullets `•`.
`&`, `<` and `>` are escaped everywhere else, as Slack requires, so nothing the model writes is
taken as a mention (`<!channel>`) or a link."""

from __future__ import annotations

import re

FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+#.-]*)\s*$")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
BULLET = re.compile(r"^(\s*)[-*+]\s+")
RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
QUOTE = re.compile(r"^\s{0,3}>\s?")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
ITALIC = re.compile(
    r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)"
)
STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
# Placeholders while converting: bold's `*` must not be read again as italic's.
BOLD_MARK, LINK_MARK = "\x01", "\x00"


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    out: list[str] = []
    code: list[str] | None = None  # lines of an open code block
    for line in markdown.split("\n"):
        fence = FENCE.match(line)
        if code is not None:
            if fence and not fence.group(2):
                out.append(_code_block(code))
                code = None
            else:
                code.append(line)
            continue
        if fence:
            code = []
            continue
        if QUOTE.match(line):
            out.append("> " + inline(QUOTE.sub("", line, count=1)))
            continue
        out.append(_line(line))
    if code is not None:  # never closed: still shown as code
        out.append(_code_block(code))
    return "\n".join(out)


def _line(line: str) -> str:
    if RULE.match(line):
        return "──────"
    heading = HEADING.match(line)
    if heading:
        return f"*{inline(heading.group(1))}*"
    bullet = BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {inline(line[bullet.end() :])}"
    return inline(line)


def _code_block(lines: list[str]) -> str:
    return "```\n" + escape("\n".join(lines)) + "\n```"


def inline(text: str) -> str:
    """One line's inline Markdown; code spans first, so nothing inside them is formatted."""
    parts = CODE_SPAN.split(text)
    rendered = []
    for index, part in enumerate(parts):
        rendered.append(f"`{escape(part)}`" if index % 2 else _styled(escape(part)))
    return "".join(rendered)


def _styled(text: str) -> str:
    """Bold, strike, italic and links, whose addresses are set aside first (an address's `_`
    or `*` is not emphasis)."""
    links: list[tuple[str, str]] = []

    def set_aside(match: re.Match[str]) -> str:
        links.append((match.group(1).replace("|", "¦"), match.group(2).replace("|", "%7C")))
        return f"{LINK_MARK}{len(links) - 1}{LINK_MARK}"

    text = LINK.sub(set_aside, text)
    text = BOLD.sub(lambda m: f"{BOLD_MARK}{m.group(1) or m.group(2)}{BOLD_MARK}", text)
    text = STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    text = ITALIC.sub(lambda m: f"_{m.group(1) or m.group(2)}_", text)
    text = text.replace(BOLD_MARK, "*")
    return re.sub(
        f"{LINK_MARK}(\\d+){LINK_MARK}",
        lambda m: "<{1}|{0}>".format(*links[int(m.group(1))]),
        text,
    )
