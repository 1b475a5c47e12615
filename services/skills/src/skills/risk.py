"""Flags (never runs) risky instructions in skill files: piped downloads, encoded payloads, etc."""

from __future__ import annotations

import re

_SHELLS = r"(?:sudo[ \t]+)?(?:ba|z|da|k|fi)?sh|python[0-9.]*|perl|ruby|node"
RULES: list[tuple[str, re.Pattern[str]]] = [  # (reason, pattern)
    (
        "pipes a download into an interpreter",
        re.compile(rf"\b(?:curl|wget|fetch|iwr|irm)\b[^\n|]*\|[ \t]*(?:{_SHELLS})\b", re.I),
    ),
    (
        "runs a downloaded script",
        re.compile(
            r"(?:sh|bash|zsh|source|\.|eval)[ \t]+(?:-c[ \t]+)?[\"']?"
            r"(?:<\(|\$\()[ \t]*(?:curl|wget)\b",
            re.I,
        ),
    ),
    (
        "decodes base64 and runs it",
        re.compile(rf"base64[ \t]+(?:-d|--decode|-D)\b[^\n]*\|[ \t]*(?:{_SHELLS})\b", re.I),
    ),
    ("contains a long base64 blob", re.compile(r"[A-Za-z0-9+/]{160,}={0,2}")),
    (
        "downloads a program and makes it executable",
        re.compile(r"\b(?:curl|wget)\b[^\n]*(?:&&|;)[ \t]*chmod[ \t]+\+?[0-7]*x", re.I),
    ),
    (
        "removes the macOS quarantine flag",
        re.compile(r"xattr[ \t]+-[a-z]*d[a-z]*[ \t]+com\.apple\.quarantine", re.I),
    ),
    ("opens a reverse shell", re.compile(r"/dev/tcp/|\bn(?:c|cat)\b[^\n]*[ \t]-e[ \t]", re.I)),
    (
        "runs encoded PowerShell",
        re.compile(r"powershell[^\n]*[ \t]-(?:e|enc|encodedcommand)[ \t]", re.I),
    ),
    (
        "reads SSH keys or cloud credentials",
        re.compile(r"~/\.ssh/|\bid_(?:rsa|ed25519)\b|\.aws/credentials"),
    ),
    (
        "extracts a password-protected archive",
        re.compile(r"\b(?:unzip|7z)\b[^\n]*[ \t]-p\S*", re.I),
    ),
]
MAX_WARNINGS = 20
# Cheap substring checks (on the lower-cased text) that must pass before a rule's regex runs.
TRIGGERS: list[tuple[str, ...]] = [
    ("curl", "wget", "fetch", "iwr", "irm"),
    ("curl", "wget"),
    ("base64",),
    ("",),
    ("chmod",),
    ("quarantine",),
    ("/dev/tcp", "-e"),
    ("powershell",),
    (".ssh/", "id_rsa", "id_ed25519", ".aws/"),
    ("unzip", "7z"),
]


def scan(text: str, label: str = "SKILL.md") -> list[str]:
    """One warning per risky line (the first rule that matches it): `label:line: reason: excerpt`.

    Each rule runs once over the whole text; the patterns never cross a line break.
    """
    hits: dict[int, tuple[int, str]] = {}
    lower = text.lower()
    for index, (_, pattern) in enumerate(RULES):
        if not any(trigger in lower for trigger in TRIGGERS[index]):
            continue
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            if line not in hits or hits[line][0] > index:
                hits[line] = (index, match.group(0))
    warnings = []
    for line in sorted(hits)[:MAX_WARNINGS]:
        index, excerpt = hits[line]
        excerpt = excerpt if len(excerpt) <= 60 else excerpt[:57] + "..."
        warnings.append(f"{label}:{line}: {RULES[index][0]}: {excerpt}")
    if len(hits) > MAX_WARNINGS:
        warnings.append(f"{label}: {len(hits) - MAX_WARNINGS} more risky lines not listed")
    return warnings
