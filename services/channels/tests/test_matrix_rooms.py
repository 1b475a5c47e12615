"""Matrix room ids as chat ids (a session id's characters, read back exactly) and what counts
as speaking to the bot in a group."""

from __future__ import annotations

import re

import pytest
from channels.matrix.rooms import (
    chat_id_of,
    mentions,
    replied_to,
    room_id_of,
    without_mention,
    without_reply_fallback,
)

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # the orchestrator's
BOT = "@crayfish:example.org"


@pytest.mark.parametrize(
    "room_id",
    ["!OGEhHVWSdvArJzumhm:matrix.org", "!a_b:host.example:8448", "!ü x/..:h", "!_5f:x"],
)
def test_a_room_id_becomes_a_session_safe_chat_id_and_back(room_id: str) -> None:
    chat_id = chat_id_of(room_id)
    assert SESSION_ID.match(f"matrix.{chat_id}")
    assert room_id_of(chat_id) == room_id


def test_different_rooms_never_share_a_chat_id() -> None:
    rooms = ["!a_3ab:x", "!a:b:x", "!a_b:x", "!a-b:x", "!a.b:x"]
    assert len({chat_id_of(room) for room in rooms}) == len(rooms)


def test_a_chat_id_that_is_not_ours_is_refused() -> None:
    with pytest.raises(ValueError):
        room_id_of("abc_zz")


def test_the_bot_is_mentioned_by_m_mentions_its_id_or_its_name_only() -> None:
    names = ("crayfish",)
    assert mentions({"body": "hi", "m.mentions": {"user_ids": [BOT]}}, BOT, names)
    assert mentions({"body": f"{BOT} hi"}, BOT, names)
    assert mentions({"body": "Crayfish: what time is it?"}, BOT, names)
    assert not mentions({"body": "crayfishing today?"}, BOT, names)
    assert not mentions({"body": "ask @crayfish:evil.org"}, BOT, names)
    assert not mentions({"body": "hi", "m.mentions": {"user_ids": ["@x:y"]}}, BOT, names)


def test_a_reply_names_its_event_and_loses_its_quoted_fallback() -> None:
    content = {"m.relates_to": {"m.in_reply_to": {"event_id": "$abc"}}}
    assert replied_to(content) == "$abc" and replied_to({"body": "x"}) == ""
    body = f"> <{BOT}> earlier answer\n> second line\n\nand now?"
    assert without_reply_fallback(body) == "and now?"
    assert without_reply_fallback("> a quote of my own") == "> a quote of my own"


def test_the_bots_name_is_dropped_from_the_start_of_a_command() -> None:
    assert without_mention("crayfish: /help", BOT, ("crayfish",)) == "/help"
    assert without_mention(f"{BOT} hi there", BOT, ("crayfish",)) == "hi there"
    assert without_mention("crayfish", BOT, ("crayfish",)) == "crayfish"
