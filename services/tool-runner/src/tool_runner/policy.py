"""Defence in depth for exec: deny patterns and an optional allowlist of programs.

Program names come from shlex, not bashlex: a tokenizer that errs on the strict side is enough
for a second line of defence (the sandbox is the first) and adds no dependency.
"""

from __future__ import annotations

import re
import shlex

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class CommandPolicy:
    """Refuses commands matching a deny regex, or (allowlist mode) starting unlisted programs."""

    def __init__(self, deny_patterns: list[str], allowlist: list[str]):
        self.deny = [re.compile(p) for p in deny_patterns]
        self.allow = set(allowlist)

    def check(self, command: str) -> str | None:
        """None when allowed, else the reason it is refused."""
        for pattern in self.deny:
            if pattern.search(command):
                return f"command matches deny pattern {pattern.pattern!r}"
        if self.allow:
            for program in first_words(command):
                if program not in self.allow:
                    return (
                        f"program {program!r} is not in the allowlist "
                        f"({', '.join(sorted(self.allow))})"
                    )
        return None


def first_words(command: str) -> list[str]:
    """The program name of each simple command in a shell line (after VAR=value prefixes).

    Command substitutions count as commands too; when the line cannot be tokenized, every
    whitespace-separated word counts, so allowlist mode errs on the strict side.
    """
    line = command.replace("$(", " ; ").replace("`", " ; ").replace("\n", " ; ")
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        return [w.rsplit("/", 1)[-1] for w in line.split()]
    words, expect, skip = [], True, False
    for token in tokens:
        if skip:
            skip = False
        elif token and set(token) <= set(";&|()"):
            expect = True
        elif token and set(token) <= set("<>&"):
            skip = True
        elif expect and not _ASSIGNMENT.match(token):
            words.append(token.rsplit("/", 1)[-1])
            expect = False
    return words
