"""Slack end to end: slack-sdk's AsyncWebClient and Socket Mode client against the fake Slack
on loopback, the channels service as its own process, the real stack behind it; the
conformance suite and Slack's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chat_channels.conformance import PNG, ChannelConformance, Start, user_images
from tests.chat_channels.platform import new_person
from tests.chat_channels.slack_platform import SlackPlatform
from tests.fakes import FakeLLM, Reply
from tests.fakes.slack_api import BOT_USER, FakeSlack


@pytest.fixture
def platform() -> Iterator[SlackPlatform]:
    with FakeSlack() as fake:
        yield SlackPlatform(fake)


class TestSlack(ChannelConformance):
    def test_a_streamed_answer_is_one_message_edited_with_chat_update(
        self, platform: SlackPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        answer = " ".join(f"word{i}" for i in range(60))
        llm.reply_text(answer, delay=4.0)  # its deltas arrive over about two seconds
        platform.say("talk to me", person)
        shown = platform.fake.wait_for(
            lambda: [m for m in platform.fake.bot_messages(person) if m.text == answer]
        )
        assert len(platform.fake.bot_messages(person)) == 1
        versions = shown[0].versions
        assert len(versions) >= 2 and versions[0] != answer and answer.startswith(versions[0])
        assert any(method == "chat.update" for method, _, _ in platform.fake.calls)

    def test_markdown_is_shown_as_slack_renders_it(
        self, platform: SlackPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text(
            "# Plan\n\n- **bold** step with `a < b`\n- [docs](https://example.org/a_b) <!channel>"
        )
        platform.say("plan?", person)
        sent = platform.fake.wait_for(
            lambda: [m for m in platform.fake.bot_messages(person) if "docs" in m.text]
        )[0]
        assert sent.text == "Plan\n\n• bold step with a < b\n• docs <!channel>"
        assert "*bold*" in sent.raw and "<https://example.org/a_b|docs>" in sent.raw
        assert "&lt;!channel&gt;" in sent.raw  # shown as typed, never a mention of everyone

    def test_a_thread_is_a_session_of_its_own_answered_in_the_thread(
        self, platform: SlackPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person, group = new_person(), f"-100{new_person()}"
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_forever_with(lambda body: Reply(text=f"answer {len(llm.requests)}"))
        mention = f"<@{BOT_USER}>"
        first = platform.fake.user_says(f"{mention} first question", person, group, "channel")
        platform.fake.wait_for(lambda: platform.fake.texts(group) == ["answer 1"])
        platform.fake.user_says(f"{mention} in a thread", person, group, "channel", first, person)
        answers = platform.fake.wait_for(
            lambda: [m for m in platform.fake.bot_messages(group) if m.text == "answer 2"]
        )
        assert answers[0].thread_ts == first  # answered in the thread, not the channel
        asked = [str(m["content"]) for m in llm.requests[-1]["messages"] if m["role"] == "user"]
        assert any("in a thread" in text for text in asked)
        assert not any("first question" in text for text in asked)  # a session of its own

    def test_wrong_tokens_show_in_readyz(
        self, platform: SlackPlatform, start_service: Start
    ) -> None:
        env = {**self.settings(platform), "CHANNELS_SLACK_BOT_TOKEN": "xoxb-wrong"}
        service = start_service(env)
        platform.fake.wait_for(lambda: any(e == "invalid_auth" for _, _, e in platform.fake.calls))
        platform.fake.wait_for(lambda: service.readyz().status_code == 503)
        state = service.readyz().json()["channels"]["slack"]
        assert state["state"] == "reconnecting" and "token" in state["error"].lower()

    def test_a_dropped_socket_is_reopened_and_messages_keep_coming(
        self, platform: SlackPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_forever_text("still here")
        opened = lambda: sum(m == "apps.connections.open" for m, _, _ in platform.fake.calls)  # noqa: E731
        before = opened()
        platform.fake.drop_sockets()
        platform.fake.wait_for(lambda: opened() > before and platform.fake.sockets)
        platform.say("are you there?", person)
        assert platform.fake.wait_for(lambda: platform.fake.texts(person) == ["still here"])

    def test_an_open_channels_threads_are_open_too(
        self, platform: SlackPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        someone, group = new_person(), f"-100{new_person()}"
        start_service(self.settings(platform, dm_policy="allowlist", open_groups=group)).ready()
        llm.reply_forever_with(lambda body: Reply(text=f"answer {len(llm.requests)}"))
        first = platform.fake.user_says("anyone?", someone, group, "channel")
        platform.fake.wait_for(lambda: platform.fake.texts(group) == ["answer 1"])
        platform.fake.user_says("and in here?", someone, group, "channel", first, someone)
        answers = platform.fake.wait_for(
            lambda: [m for m in platform.fake.bot_messages(group) if m.text == "answer 2"]
        )
        assert answers[0].thread_ts == first

    def test_the_bot_token_goes_to_slacks_files_host_and_nowhere_else(
        self, platform: SlackPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_forever_text("Seen.")
        fake = platform.fake
        fake.user_shares_file(PNG, "here.png", person, person, "image/png", "first")
        # the files host gets the token (it serves the bytes only with it)
        fake.wait_for(lambda: any(h == "slack" and a for h, _, a in fake.file_requests))
        fake.wait_for(lambda: len(llm.requests) == 1)
        assert user_images(llm.requests[0])  # the image reached the model
        fake.user_shares_file(
            PNG, "far.png", person, person, "image/png", "second", host="elsewhere"
        )
        with fake.lock:
            fake.redirect_files = True  # Slack's files host sending the download elsewhere
        fake.user_shares_file(PNG, "moved.png", person, person, "image/png", "third")
        fake.wait_for(lambda: len(llm.requests) == 3)
        texts = platform.wait_texts(person, 5)
        assert sum("Not taken: far.png" in t for t in texts) == 1, texts
        assert sum("Not taken: moved.png" in t for t in texts) == 1, texts
        assert "third" in str(llm.requests[2]["messages"])  # the text still became a turn
        with fake.lock:
            elsewhere = [auth for host, _, auth in fake.file_requests if host == "elsewhere"]
        assert not any(fake.bot_token in auth for auth in elsewhere)

    @pytest.mark.parametrize("stated", [5_000_000, 100], ids=["stated", "understated"])
    def test_an_oversize_file_is_refused_in_the_chat_and_its_text_still_asked(
        self, platform: SlackPlatform, start_service: Start, llm: FakeLLM, stated: int
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("Understood.")
        big = b"x" * 800_000  # over the 700 KB a message may bring
        fake = platform.fake
        fake.user_shares_file(
            big, "big.bin", person, person, text="see attached", stated_size=stated
        )
        texts = platform.wait_texts(person, 2)
        assert any("Not taken: big.bin" in t for t in texts), texts
        assert "see attached" in str(llm.requests[0]["messages"])
        downloads = [p for h, p, _ in fake.file_requests if p.endswith("big.bin")]
        assert len(downloads) == (0 if stated > len(big) else 1)  # a stated size is believed

    def test_an_image_url_the_answer_shows_follows_as_an_image_block(
        self, platform: SlackPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("A cat:\n\n![a cat](https://example.org/cat.png)")
        platform.say("show me a cat", person)
        platform.fake.wait_for(lambda: platform.pictures(person))
        assert platform.pictures(person) == ["https://example.org/cat.png"]
        assert any("A cat" in text for text in platform.texts(person))
