"""Defence in depth for exec: deny patterns and an optional allowlist of programs."""

from __future__ import annotations

import re
import shlex

# Splits a shell line into pipeline/list elements; good enough to find each first word.
_SEPARATORS = re.compile(r"\|\||&&|[;|&\n()`]|\$\(")
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
    """The program name of each simple command in a shell line (after VAR=value prefixes)."""
    words = []
    for part in _SEPARATORS.split(command):
        try:
            tokens = shlex.split(part, comments=True)
        except ValueError:
            tokens = part.split()
        tokens = [t for t in tokens if not _ASSIGNMENT.match(t)]
        if tokens:
            words.append(tokens[0].rsplit("/", 1)[-1])
    return words
