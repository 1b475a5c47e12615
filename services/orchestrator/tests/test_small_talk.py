"""Which messages auto-recall skips: greetings, thanks and acknowledgements alone, nothing else."""

from __future__ import annotations

import pytest
from orchestrator.agent.small_talk import is_small_talk


@pytest.mark.parametrize(
    "message",
    ["hi", "hi 3", "Hello there!", "good morning :)", "thanks a lot 🙏", "ok", "👍", "谢谢!"],
)
def test_small_talk_is_skipped(message: str):
    assert is_small_talk(message)


@pytest.mark.parametrize(
    "message",
    [
        "Where does my sister live?",
        "hi Ada",  # a name may be in a note
        "42",  # a bare number may name something (a room, an order)
        "good morning, how are you?",
        "ok so what about Lisbon",
        "When did Caroline go to the LGBTQ support group?",
        "thanks " * 9,  # long messages are always searched
        "",
    ],
)
def test_anything_else_is_searched(message: str):
    assert not is_small_talk(message)
