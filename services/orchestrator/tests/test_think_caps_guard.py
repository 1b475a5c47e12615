"""Reasoning stays out of answers, long text keeps head and tail, loops are detected."""

from __future__ import annotations

import pytest
from crayfish_common.textcap import cap_text
from orchestrator.agent.guard import RepeatGuard
from orchestrator.agent.prompt import CAP_HEAD_SHARE
from orchestrator.agent.think import ThinkFilter, strip_think


def test_strip_think_removes_the_block_and_keeps_the_reasoning() -> None:
    answer, reasoning = strip_think("<think>user wants a joke</think>\nWhy did the crab...")
    assert answer == "Why did the crab..."
    assert reasoning == "user wants a joke"


def test_strip_think_handles_a_missing_opening_tag() -> None:
    answer, reasoning = strip_think("hmm, plan it</think>The plan is ready.")
    assert answer == "The plan is ready." and reasoning == "hmm, plan it"


def test_think_filter_across_split_tags() -> None:
    think = ThinkFilter()
    pieces = ["<thi", "nk>secret plan", "</th", "ink>Hello", " world"]
    shown = "".join(think.feed(p) for p in pieces) + think.flush()
    assert shown == "Hello world"


def test_cap_keeps_head_and_tail_and_says_what_was_cut() -> None:
    text = "HEAD" + "x" * 10_000 + "TAIL"
    capped = cap_text(text, 1000, CAP_HEAD_SHARE)
    assert len(capped.text) <= 1000 and capped.truncated
    assert capped.text.startswith("HEAD") and capped.text.endswith("TAIL")
    assert f"[... {capped.cut} of 10008 chars cut here ...]" in capped.text
    assert len(capped.text) - len(capped.text.split("\n[")[0]) < 800  # the head is the larger part


@pytest.mark.parametrize("limit", [60, 61, 100, 999, 1000])
@pytest.mark.parametrize("share", [0.0, 0.5, CAP_HEAD_SHARE, 1.0])
def test_cap_never_exceeds_the_limit_and_counts_what_it_cut(limit: int, share: float) -> None:
    text = "".join(chr(65 + i % 26) for i in range(5000))
    capped = cap_text(text, limit, share)
    head, _, rest = capped.text.partition("\n[...")
    tail = rest.partition("...]\n")[2]
    assert len(capped.text) <= limit
    assert capped.cut == len(text) - len(head) - len(tail)
    assert text.startswith(head) and text.endswith(tail)


def test_half_and_half_keeps_as_much_of_each_end() -> None:
    """The tool-runner's split: as much of the end (where errors are) as of the beginning."""
    capped = cap_text("a" * 5000 + "b" * 5000, 1000, 0.5)
    head, _, rest = capped.text.partition("\n[...")
    tail = rest.partition("...]\n")[2]
    assert set(head) == {"a"} and set(tail) == {"b"} and abs(len(head) - len(tail)) <= 1


def test_cap_leaves_short_text_alone() -> None:
    assert cap_text("short", 100) == ("short", 0)
    assert cap_text("no cap at all", 0).text == "no cap at all"


def test_guard_stops_identical_calls() -> None:
    guard = RepeatGuard(exact_limit=3)
    assert guard.check("exec", '{"command": "ls"}') is None
    assert guard.check("exec", '{"command": "ls"}') is None
    assert "3 times" in (guard.check("exec", '{"command": "ls"}') or "")


def test_guard_stops_near_identical_calls_that_get_nowhere() -> None:
    guard = RepeatGuard(exact_limit=3, similar_limit=4)
    reasons = [
        guard.check("exec", f'{{"command": "ls -la /workspace{"/" * i}"}}', "same listing")
        for i in range(4)
    ]
    assert reasons[:3] == [None, None, None]
    assert reasons[3] is not None and "nearly the same arguments" in reasons[3]


def test_guard_allows_similar_calls_that_make_progress() -> None:
    guard = RepeatGuard(exact_limit=3, similar_limit=4)
    reads = [
        guard.check("read_file", {"path": f"chapter-{i}.md"}, f"text of chapter {i}")
        for i in range(12)
    ]
    assert reads == [None] * 12


def test_guard_allows_different_work() -> None:
    guard = RepeatGuard()
    commands = ["ls", "git status", "python -m pytest -q", "cat README.md", "du -sh ."]
    assert all(guard.check("exec", {"command": c}, "out") is None for c in commands)
