"""HTML as readable text: the main content's words, one block per paragraph, no markup or scripts.

Scripts, styles and page furniture (navigation, footers, forms) are dropped; `<main>` or
`<article>` is preferred when the page has one; headings get `#`, list items `-`.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser

DROPPED = (
    "script, style, noscript, template, svg, canvas, iframe, object, embed, head,"
    " nav, footer, aside, form, button, select, input, textarea, [hidden], [aria-hidden=true]"
)
BLOCKS = (
    "p, div, section, article, main, header, blockquote, pre, table, tr, ul, ol, dl, dt, dd,"
    " figure, figcaption, br, hr, address, details, summary"
)
HEADINGS = {"h1": "# ", "h2": "## ", "h3": "### ", "h4": "#### ", "h5": "##### ", "h6": "###### "}
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n\s*\n\s*(\n\s*)+")


def html_to_text(html: str) -> tuple[str, str]:
    """(title, text) of an HTML document."""
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node is not None else ""
    for node in tree.css(DROPPED):
        node.decompose()
    root = tree.css_first("main") or tree.css_first("article") or tree.body or tree.root
    if root is None:
        return title, ""
    for node in root.css(", ".join(HEADINGS)):
        node.insert_before("\n\n" + HEADINGS.get(node.tag or "", ""))
        node.insert_after("\n\n")
    for node in root.css("li"):
        node.insert_before("\n- ")
        node.insert_after("\n")
    for node in root.css("td, th"):
        node.insert_after(" | ")
    for node in root.css(BLOCKS):
        node.insert_before("\n")
        node.insert_after("\n")
    return title, tidy(root.text(separator=""))


def tidy(text: str) -> str:
    """Spaces collapsed within lines, at most one blank line between blocks."""
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
