"""Flags (never runs) risky instructions in skill files: piped downloads, encoded payloads, etc."""

from __future__ import annotations

import re

_SHELLS = r"(?:sudo\s+)?(?:ba|z|da|k|fi)?sh|python[0-9.]*|perl|ruby|node"
RULES: list[tuple[str, re.Pattern[str]]] = [
    (
        "pipes a download into an interpreter",
        re.compile(rf"\b(?:curl|wget|fetch|iwr|irm)\b[^\n|]*\|\s*(?:{_SHELLS})\b", re.I),
    ),
    (
        "runs a downloaded script",
        re.compile(r"(?:sh|bash|zsh|source|\.|eval)\s+[\"']?(?:<\(|\$\()\s*(?:curl|wget)\b", re.I),
    ),
    (
        "decodes base64 and runs it",
        re.compile(rf"base64\s+(?:-d|--decode|-D)\b[^\n]*\|\s*(?:{_SHELLS})\b", re.I),
    ),
    ("contains a long base64 blob", re.compile(r"[A-Za-z0-9+/]{160,}={0,2}")),
    (
        "downloads a program and makes it executable",
        re.compile(r"\b(?:curl|wget)\b[^\n]*(?:&&|;)\s*chmod\s+\+?[0-7]*x", re.I),
    ),
    (
        "removes the macOS quarantine flag",
        re.compile(r"xattr\s+-[a-z]*d[a-z]*\s+com\.apple\.quarantine", re.I),
    ),
    ("opens a reverse shell", re.compile(r"/dev/tcp/|\bn(?:c|cat)\b[^\n]*\s-e\s", re.I)),
    (
        "runs encoded PowerShell",
        re.compile(r"powershell[^\n]*\s-(?:e|enc|encodedcommand)\s", re.I),
    ),
    (
        "reads SSH keys or cloud credentials",
        re.compile(r"~/\.ssh/|\bid_(?:rsa|ed25519)\b|\.aws/credentials"),
    ),
    ("extracts a password-protected archive", re.compile(r"\b(?:unzip|7z)\b[^\n]*\s-p\S*", re.I)),
]
MAX_WARNINGS = 20


def scan(text: str, label: str = "SKILL.md") -> list[str]:
    """One warning per risky line: `label:line: reason: excerpt`."""
    warnings: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        for reason, pattern in RULES:
            match = pattern.search(line)
            if match:
                excerpt = match.group(0)
                excerpt = excerpt if len(excerpt) <= 60 else excerpt[:57] + "..."
                warnings.append(f"{label}:{number}: {reason}: {excerpt}")
                break
        if len(warnings) >= MAX_WARNINGS:
            warnings.append(f"{label}: more risky lines not listed")
            break
    return warnings
