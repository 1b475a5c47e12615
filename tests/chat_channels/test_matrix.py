"""Matrix end to end: matrix-nio against the fake homeserver on loopback, the channels service
as its own process, the real stack behind it; the conformance suite and Matrix's own."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import ChannelConformance, Start, sender_of
from tests.chat_channels.matrix_platform import MatrixPlatform
from tests.chat_channels.platform import new_person
from tests.fakes import FakeLLM, Reply
from tests.fakes.matrix_homeserver import FakeHomeserver
from tests.stacks import running_stack


@pytest.fixture
def platform() -> Iterator[MatrixPlatform]:
    with FakeHomeserver() as fake:
        yield MatrixPlatform(fake)


class TestMatrix(ChannelConformance):
    def test_markdown_is_sent_as_matrix_html_and_a_streamed_answer_is_edited(
        self, platform: MatrixPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_tool_calls(("list_dir", {"path": "."}), content="Let me look.")
        plan = "# Plan\n\n- **bold** step with `a < b`\n- [docs](https://example.org/a_b)"
        llm.reply_with(lambda body: Reply(text=plan, delay=1.5))  # the start is streamed first
        platform.say("plan?", person)
        platform.fake.wait_for(lambda: "docs" in "".join(platform.texts(person)))
        sent = platform.fake.bot_events(platform.room(person))
        first, edits = sent[0]["content"], [e["content"] for e in sent[1:]]
        assert platform.texts(person) == ["Plan\n\n• bold step with a < b\n• docs"]
        assert first["body"] == "Let me look."  # the streamed start, then edited in place
        final = edits[-1]["m.new_content"]
        assert edits[-1]["m.relates_to"] == {
            "rel_type": "m.replace",
            "event_id": sent[0]["event_id"],
        }
        assert final["format"] == "org.matrix.custom.html"
        assert "<b>bold</b>" in final["formatted_body"]
        assert '<a href="https://example.org/a_b">' in final["formatted_body"]
        assert final["body"] == "Plan\n\n• bold step with a < b\n• docs"  # plain: no Markdown

    def test_history_from_before_the_first_start_is_not_answered_but_new_messages_are(
        self, platform: MatrixPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        old = platform.say("an old question from last year", person)
        platform.fake.bot_joined_before(platform.room(person))
        llm.reply_forever_text("an answer")
        start_service(self.settings(platform, allow_from=person)).ready()
        platform.fake.wait_for(lambda: platform.deliveries(old) >= 1)  # it was seen...
        time.sleep(1.5)
        assert platform.texts(person) == [] and llm.requests == []  # ...and left alone
        platform.say("a new question", person)
        assert platform.wait_texts(person, 1) == ["an answer"]
        asked = [m["content"] for r in llm.requests for m in r["messages"] if m["role"] == "user"]
        assert not any("old question" in str(text) for text in asked)

    def test_a_wrong_token_shows_in_readyz_and_nothing_else_breaks(
        self, platform: MatrixPlatform, start_service: Start
    ) -> None:
        env = {**self.settings(platform), "CHANNELS_MATRIX_ACCESS_TOKEN": "syt_wrong"}
        service = start_service(env)
        platform.fake.wait_for(lambda: any(s == 401 for _, _, s in platform.fake.calls))
        time.sleep(0.5)
        reply = service.readyz()
        assert reply.status_code == 503
        state = reply.json()["channels"]["matrix"]
        assert state["state"] == "reconnecting" and "token" in state["error"].lower()


def test_the_stack_runs_the_channels_service_when_matrix_is_configured() -> None:
    """`make run`'s launcher: the channels service gets the Matrix settings (and the channels
    token, never the owner's) and answers in Matrix."""
    with FakeLLM() as llm, FakeHomeserver() as fake:
        platform = MatrixPlatform(fake)
        person = new_person()
        env = {
            **platform.env(),
            "CHANNELS_MATRIX_ALLOW_FROM": sender_of(platform, person),
            "CRAYFISH_API_TOKEN": "owner-token",
            "CRAYFISH_CHANNELS_TOKEN": "channels-token",
        }
        with running_stack(llm.base_url, env=env, channels=True) as stack:
            llm.reply_text("hello from the stack")
            platform.say("hi", person)
            answered = lambda: platform.texts(person) == ["hello from the stack"]  # noqa: E731
            assert fake.wait_for(answered, 60)
            assert "channels" in stack.processes
