"""A shell line as the simple commands it runs, from bashlex's parse tree (never a regex):
quoting, lists, pipes and compound commands are the parser's job. What cannot be judged by its
programs alone (substitutions, function definitions, a line bashlex cannot parse) is named."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

import bashlex  # type: ignore[import-untyped]

# bashlex reads bash, the sandbox runs /bin/sh (dash): where the two read a line differently,
# the line needs a person. `ls &>/dev/null rm x` is one command to bash and two to dash.
BASH_ONLY_REDIRECTS = ("&>", "&>>")
# Longer lines are not parsed (bashlex is pure Python and recursive): they need an approval.
MAX_PARSED_CHARS = 8_192


@dataclass(frozen=True)
class Word:
    """One word of a simple command: its text once unquoted, or None when the shell would
    expand it ($X, ~, a substitution) or it cannot be unquoted."""

    source: str
    text: str | None


@dataclass(frozen=True)
class SimpleCommand:
    assignments: tuple[str, ...]  # NAME=value prefixes
    words: tuple[Word, ...]


@dataclass
class ParsedLine:
    commands: list[SimpleCommand] = field(default_factory=list)
    # Why the line needs a person even if every program were allowed.
    problems: list[str] = field(default_factory=list)


def parse_line(line: str) -> ParsedLine:
    """Every simple command of the line, in order, with the problems found on the way."""
    parsed = ParsedLine()
    if len(line) > MAX_PARSED_CHARS:
        parsed.problems.append(f"the command is longer than {MAX_PARSED_CHARS} characters")
        return parsed
    try:
        trees = bashlex.parse(line)
    except Exception as exc:  # bashlex raises ParsingError, NotImplementedError and others
        parsed.problems.append(f"the shell parser cannot read it ({_first_line(exc)})")
        return parsed
    for tree in trees:
        _walk(tree, parsed, line)
    return parsed


def _walk(node: Any, parsed: ParsedLine, line: str) -> None:
    kind = getattr(node, "kind", "")
    if kind == "command":
        parsed.commands.append(_simple(node, line))
    elif kind == "commandsubstitution":
        parsed.problems.append("command substitution ($(…) or backticks)")
    elif kind == "processsubstitution":
        parsed.problems.append("process substitution (<(…) or >(…))")
    elif kind == "function":
        parsed.problems.append("a shell function definition")
    elif kind == "redirect" and node.type in BASH_ONLY_REDIRECTS:
        parsed.problems.append(
            f"`{node.type}` is bash's; the sandbox's sh reads `&` (run in the background) "
            "and starts the rest as another command"
        )
    elif kind in ("arithmetic", "heredoc"):
        pass
    for name in ("parts", "list", "command", "output"):
        child = getattr(node, name, None)
        children = child if isinstance(child, list) else [child]
        for item in children:
            if hasattr(item, "kind"):
                _walk(item, parsed, line)


def _simple(node: Any, line: str) -> SimpleCommand:
    assignments: list[str] = []
    words: list[Word] = []
    for part in node.parts:
        source = line[part.pos[0] : part.pos[1]]
        if part.kind == "assignment" and not words:
            assignments.append(source)
        elif part.kind == "word":
            words.append(Word(source, _unquoted(part, source)))
    return SimpleCommand(tuple(assignments), tuple(words))


def _unquoted(word: Any, source: str) -> str | None:
    """The word as the shell passes it on, if that does not depend on an expansion. Unquoted
    from its source text: bashlex's own `word` keeps the quotes of `'r''m'`."""
    if getattr(word, "parts", None):
        return None  # a parameter, tilde or substitution inside
    try:
        tokens = shlex.split(source)
    except ValueError:
        return None
    if len(tokens) != 1:
        return "" if not tokens and source in ("''", '""') else None
    return tokens[0]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
