"""Telegram end to end: python-telegram-bot against the fake Bot API on loopback, the channels
service as its own process, the real stack behind it; the conformance suite and Telegram's own
(Markdown as HTML, a wrong token, a document's hostile name, an answer's URL image as a photo
Telegram fetches itself)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chat_channels.conformance import PNG, ChannelConformance, Start, _text_with
from tests.chat_channels.platform import new_person
from tests.chat_channels.telegram_platform import TelegramPlatform
from tests.fakes import FakeLLM, Reply
from tests.fakes.completions import ToolCall
from tests.fakes.telegram_api import FakeTelegram
from tests.stacks import running_stack


@pytest.fixture
def platform() -> Iterator[TelegramPlatform]:
    with FakeTelegram() as fake:
        yield TelegramPlatform(fake)


class TestTelegram(ChannelConformance):
    def test_markdown_is_shown_as_telegram_renders_it(
        self, platform: TelegramPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("# Plan\n\n- **bold** step with `a < b`\n- [docs](https://example.org/a_b)")
        platform.say("plan?", person)
        platform.wait_texts(person, 1)
        sent = platform.fake.wait_for(
            lambda: [
                m for m in platform.fake.shown if m.chat_id == int(person) and "docs" in m.text
            ]
        )[0]
        assert sent.text == "Plan\n\n• bold step with a < b\n• docs"
        assert "<b>bold</b>" in sent.html and '<a href="https://example.org/a_b">' in sent.html

    def test_a_wrong_token_shows_in_readyz_and_nothing_else_breaks(
        self, platform: TelegramPlatform, start_service: Start
    ) -> None:
        env = {**self.settings(platform), "CHANNELS_TELEGRAM_TOKEN": "999:wrong"}
        service = start_service(env)
        platform.fake.wait_for(lambda: any(s == 401 for _, _, s in platform.fake.calls))
        reply = service.readyz()
        assert reply.status_code == 503
        state = reply.json()["channels"]["telegram"]
        assert state["state"] == "reconnecting" and "token" in state["error"].lower()

    def test_a_document_with_a_hostile_name_lands_under_a_safe_name_the_model_reads(
        self, platform: TelegramPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()

        def read_what_was_sent(body: dict[str, object]) -> Reply:
            said = str(body["messages"])
            path = re.search(r"(inbox/[\w.-]+) \(17 bytes\)", said)
            assert path is not None, said
            arguments = json.dumps({"path": path[1]})
            return Reply(tool_calls=[ToolCall("read_file", arguments, "call_read")])

        llm.reply_with(read_what_was_sent)
        llm.reply_with(lambda body: Reply(text=f"It says: {_last_tool_result(body)}"))
        name = "../../.bashrc evil name.txt"  # a hostile name: kept to a safe basename
        platform.fake.user_sends_file(b"quarterly numbers", int(person), photo=False, name=name)
        answer = _text_with(platform, person, "It says:")
        assert "quarterly numbers" in answer
        asked = str(llm.requests[0]["messages"])
        assert re.search(r"inbox/[0-9a-f]{8}-bashrc_evil_name\.txt \(17 bytes\)", asked), asked

    def test_an_image_url_the_answer_shows_is_sent_as_a_photo_telegram_fetches(
        self, platform: TelegramPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        url = "https://example.com/chart.png"
        llm.reply_text(f"Here is the chart:\n\n![chart]({url})")
        platform.say("draw me a chart", person)
        _text_with(platform, person, "Here is the chart")
        shown = [m.html for m in platform.fake.shown if m.chat_id == int(person)]
        assert f'<a href="{url}">chart</a>' in shown[-1]  # the link stays in the text
        sent = platform.fake.wait_for(lambda: platform.fake.photos, timeout=30)
        assert sent == [(int(person), url)]

    def test_hostile_files_an_answer_shows_are_not_sent_and_its_text_still_arrives(
        self, platform: TelegramPlatform, start_service: Start, llm: FakeLLM, workspace: Path
    ) -> None:
        """What a sandboxed command could leave at a path an answer shows: each refused by
        the orchestrator, the chat told in a line, only the real image sent."""
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        folder = f"hostile-{person}"
        (workspace / folder).mkdir()
        (workspace / folder / "passwd.png").symlink_to("/etc/passwd")
        os.mkfifo(workspace / folder / "fifo.png")
        (workspace / folder / "huge.png").write_bytes(PNG + bytes(6_000_000))  # cap: 5 MB
        (workspace / folder / "text.png").write_text("not an image, whatever its name says")
        (workspace / folder / "real.png").write_bytes(PNG)
        (workspace.parent / f"outside-{person}.png").write_bytes(PNG)
        first = {
            "passwd": f"{folder}/passwd.png",
            "fifo": f"{folder}/fifo.png",
            "outside": f"../outside-{person}.png",
            "huge": f"{folder}/huge.png",
        }
        llm.reply_text("First:\n" + "\n".join(f"![{alt}]({p})" for alt, p in first.items()))
        platform.say("show me", person)
        notes = lambda: [t for t in platform.texts(person) if "is not shown" in t]  # noqa: E731
        platform.fake.wait_for(lambda: len(notes()) == 4)
        text = _text_with(platform, person, "First:")
        assert not any(path in text for path in first.values())
        assert [note.split("“")[1].split("”")[0] for note in notes()] == list(first)
        assert "too large" in notes()[3] and all("refused" in n for n in notes()[:3])
        llm.reply_text(f"Second: ![text]({folder}/text.png) ![real]({folder}/real.png)")
        platform.say("and now?", person)
        platform.fake.wait_for(lambda: platform.pictures(person))
        assert "Second: text real" in platform.texts(person)
        assert "not a PNG, JPEG, GIF or WebP image" in notes()[4]
        assert platform.pictures(person) == [PNG]  # only the real image, of all six

    def test_a_notification_to_the_chat_sends_the_image_it_shows(
        self, platform: TelegramPlatform, start_service: Start, llm: FakeLLM, workspace: Path
    ) -> None:
        person = new_person()
        settings = self.settings(platform, allow_from=person)
        start_service({**settings, "CHANNELS_DRAIN_EVERY": "0.5"}).ready()
        chart = f"charts/notified-{person}.png"
        (workspace / chart).parent.mkdir(exist_ok=True)
        (workspace / chart).write_bytes(PNG)
        note = {"title": "Report", "text": f"Numbers are in: ![the chart]({chart})"}
        llm.reply_tool_calls(("notify", json.dumps(note)))
        llm.reply_text("I sent you the report.")
        platform.say("send me the report", person)
        text = _text_with(platform, person, "Numbers are in")
        assert chart not in text and "the chart" in text
        platform.fake.wait_for(lambda: platform.pictures(person))
        assert platform.pictures(person) == [PNG]


def _last_tool_result(body: dict[str, object]) -> str:
    messages = body["messages"]
    assert isinstance(messages, list)
    return str([m["content"] for m in messages if m["role"] == "tool"][-1])[:300]


def test_the_stack_runs_the_channels_service_when_telegram_is_configured() -> None:
    """`make run`'s launcher: the channels service starts with the orchestrators' address and
    the channels token (never the owner's), and answers in Telegram."""
    with FakeLLM() as llm, FakeTelegram() as fake:
        platform = TelegramPlatform(fake)
        person = new_person()
        env = {
            **platform.env(),
            "CHANNELS_TELEGRAM_ALLOW_FROM": person,
            "CRAYFISH_API_TOKEN": "owner-token",
            "CRAYFISH_CHANNELS_TOKEN": "channels-token",
        }
        with running_stack(llm.base_url, env=env, channels=True) as stack:
            llm.reply_text("hello from the stack")
            platform.say("hi", person)
            answered = lambda: fake.texts(int(person)) == ["hello from the stack"]  # noqa: E731
            assert fake.wait_for(answered, 60)
            assert "channels" in stack.processes
