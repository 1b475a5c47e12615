"""Tool hints: the argument a reader cares about, short, with credentials masked."""

from __future__ import annotations

import json

from channels.hints import HINT_CHARS, tool_hint

ENCODED = "dGhpcyBpcyBhIHZlcnkgbG9uZyBiYXNlNjQgc2VjcmV0"  # a key as base64


def hint(tool: str, **arguments: object) -> str:
    return tool_hint(tool, json.dumps(arguments))


def test_a_hint_names_the_tool_and_its_main_argument() -> None:
    assert hint("exec", command="ls -la", timeout=5) == "🔧 exec: `ls -la`"
    assert tool_hint("read_file", {"path": "notes/todo.md"}) == "🔧 read_file: `notes/todo.md`"
    assert hint("memory_search", k=3) == '🔧 memory_search: `{"k": 3}`'
    assert tool_hint("exec", "not json") == "🔧 exec: `not json`"
    assert tool_hint("list_skills", None) == "🔧 list_skills"


def test_a_long_argument_is_cut_and_stays_on_one_line() -> None:
    shown = hint("exec", command="printf 'a b c d e f g h i j ' " * 20 + "\nrm -rf build")
    assert len(shown) < HINT_CHARS + 20 and shown.endswith("…`")
    assert "\n" not in hint("exec", command="cd src\nmake")


def test_what_looks_like_a_credential_is_masked() -> None:
    cases = {
        'curl -H "Authorization: Bearer abc123def456" https://api.example.com': "abc123def456",
        "export GITHUB_TOKEN=ghp_0123456789abcdef && gh pr list": "ghp_0123456789abcdef",
        "mysql --password hunter22 -u app": "hunter22",
        "PGPASSWORD='s3cr3t pass' psql": "s3cr3t",
        "git clone https://ada:pa55word@git.example.com/x.git": "pa55word",
        "echo sk-proj-0123456789abcdefghij": "0123456789abcdefghij",
        f"echo {ENCODED}": ENCODED,
    }
    for command, secret in cases.items():
        shown = hint("exec", command=command)
        assert secret not in shown and "***" in shown, shown
    # An environment variable's name is not its value: kept, as are ordinary commands.
    assert hint("exec", command="echo $API_KEY") == "🔧 exec: `echo $API_KEY`"
    assert hint("exec", command="git status && pytest -q") == "🔧 exec: `git status && pytest -q`"


def test_a_backtick_in_the_argument_cannot_end_the_code_span() -> None:
    assert hint("exec", command="echo `date`") == "🔧 exec: `echo 'date'`"
