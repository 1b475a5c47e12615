"""Matrix end to end: matrix-nio against the fake homeserver on loopback, the channels service
as its own process, the real stack behind it; the conformance suite and Matrix's own."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from channels.attachments import FILE_MAX_BYTES

from tests.chat_channels.conformance import (
    PNG,
    ChannelConformance,
    Start,
    sender_of,
    user_images,
)
from tests.chat_channels.matrix_person import EncryptedPerson
from tests.chat_channels.matrix_platform import MatrixPlatform
from tests.chat_channels.platform import new_person
from tests.fakes import FakeLLM, Reply
from tests.fakes.matrix_homeserver import BOT, BOT_DEVICE, ENCRYPTION, FakeHomeserver
from tests.stacks import running_stack

STATE = ("m.room.member", ENCRYPTION)


@pytest.fixture
def platform(tmp_path: Path) -> Iterator[MatrixPlatform]:
    with FakeHomeserver() as fake:
        yield MatrixPlatform(fake, tmp_path / "matrix-store")


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

    def test_a_server_without_authenticated_media_serves_files_on_the_legacy_path(
        self, platform: MatrixPlatform, start_service: Start, llm: FakeLLM, workspace: Path
    ) -> None:
        platform.fake.authenticated_media = False  # a homeserver from before Matrix 1.11
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_forever_text("Filed.")
        platform.send_attachment(b"first", "one.txt", person, image=False)
        platform.wait_texts(person, 1)
        platform.send_attachment(b"second", "two.txt", person, image=False)
        platform.wait_texts(person, 2)
        asked = str([r["messages"] for r in llm.requests])
        paths = re.findall(r"inbox/[0-9a-f]{8}-(?:one|two)\.txt", asked)
        assert sorted((workspace / p).read_bytes() for p in set(paths)) == [b"first", b"second"]
        gets = [(path, status) for method, path, status in platform.fake.calls if method == "GET"]
        media = [(p.split("/download/")[0], s) for p, s in gets if "/download/" in p]
        # asked the authenticated API once, then only the legacy path
        assert media == [
            ("/_matrix/client/v1/media", 404),
            ("/_matrix/media/v3", 200),
            ("/_matrix/media/v3", 200),
        ]

    def test_a_file_over_the_cap_is_not_taken_whether_its_size_is_stated_or_not(
        self, platform: MatrixPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_forever_text("Noted.")
        big = b"x" * (FILE_MAX_BYTES + 1)
        platform.send_attachment(big, "stated.bin", person, caption="one", image=False)
        platform.fake.wait_for(lambda: any("stated.bin" in t for t in platform.texts(person)))
        assert platform.fake.downloads == []  # refused by its stated size, never fetched
        platform.fake.unsized_media = True  # served without Content-Length
        platform.send_attachment(big, "unsized.bin", person, caption="two", image=False, size=0)
        platform.fake.wait_for(lambda: any("unsized.bin" in t for t in platform.texts(person)))
        refusals = [t for t in platform.texts(person) if t.startswith("⚠️ Not taken")]
        assert len(refusals) == 2 and all("over 700000 bytes" in t for t in refusals)
        assert len(platform.fake.downloads) == 1  # this one was read, and dropped at the cap
        # the captions still reached the model; the files did not
        asked = [str(r["messages"]) for r in llm.requests]
        assert any("one" in a for a in asked) and not any("inbox/" in a for a in asked)

    def test_a_picture_the_answer_links_is_not_fetched_and_its_link_stays(
        self, platform: MatrixPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("Look: ![a cat](https://example.org/cat.png)")
        platform.say("show me a cat", person)
        platform.fake.wait_for(lambda: "a cat" in "".join(platform.texts(person)))
        time.sleep(1.0)
        sent = platform.fake.bot_events(platform.room(person))
        assert 'href="https://example.org/cat.png"' in str(sent[-1]["content"])
        assert platform.pictures(person) == [] and platform.fake.uploads == []

    def test_an_encrypted_direct_chat_is_answered_encrypted_also_after_a_restart(
        self, platform: MatrixPlatform, start_service: Start, llm: FakeLLM, tmp_path: Path
    ) -> None:
        """The person is matrix-nio with e2e too: both sides a real SDK, the fake between."""
        fake, person = platform.fake, new_person()
        user, room = platform.sender_id(person), platform.room(person)
        settings = self.settings(platform, allow_from=person)
        service = start_service(settings)
        service.ready()
        fake.encrypted_dm(room, user)  # as Element makes a direct chat
        fake.wait_for(lambda: fake.rooms[room].joined_at is not None)
        them = EncryptedPerson(fake, user, tmp_path / "person-store")
        try:
            llm.reply_text("the hidden answer")
            them.say(room, "a hidden question")
            them.wait_answer("the hidden answer")  # decrypted by the person's device
            assert "a hidden question" in str(llm.requests[0]["messages"])  # the bot read it
            said = [e for e in fake.rooms[room].events if e["type"] not in STATE]
            assert len(said) >= 2 and {e["type"] for e in said} == {"m.room.encrypted"}
            assert "hidden" not in json.dumps([fake.rooms[room].events, fake.keys.inbox])
            device_keys = fake.keys.devices[BOT]
            claims, sent = len(fake.keys.claims), len(fake.keys.sent)

            service.stop()
            start_service(settings).ready()
            llm.reply_text("the second answer")
            them.say(room, "another hidden question")
            them.wait_answer("the second answer")
            # the same device with the same keys: nothing published again but one-time keys
            assert fake.keys.devices[BOT] == device_keys and list(device_keys) == [BOT_DEVICE]
            published = [b for (who, _), b in fake.keys.uploads if who == BOT]
            assert sum("device_keys" in b for b in published) == 1
            # the person's room key from before the restart still opened their message (they
            # sent no new one), and the bot's olm session with them survived (no new claim)
            assert [s for s in fake.keys.sent[sent:] if s[0][0] == user] == []
            assert [c for c in fake.keys.claims[claims:] if c[0] == BOT] == []
            assert them.unreadable == 0
        finally:
            them.close()

    def test_pictures_in_an_encrypted_chat_are_encrypted_both_ways(
        self,
        platform: MatrixPlatform,
        start_service: Start,
        llm: FakeLLM,
        tmp_path: Path,
        workspace: Path,
    ) -> None:
        fake, person = platform.fake, new_person()
        user, room = platform.sender_id(person), platform.room(person)
        start_service(self.settings(platform, allow_from=person)).ready()
        fake.encrypted_dm(room, user)
        fake.wait_for(lambda: fake.rooms[room].joined_at is not None)
        them = EncryptedPerson(fake, user, tmp_path / "person-store")
        chart = f"charts/chart-{person}.png"
        (workspace / chart).parent.mkdir(exist_ok=True)
        (workspace / chart).write_bytes(PNG)
        try:
            llm.reply_text(f"A pixel. Here is the chart:\n\n![the chart]({chart})")
            them.send_image(room, PNG, "pixel.png", "image/png")
            them.wait_answer("A pixel. Here is the chart:")
            # in: the encrypted upload reached the model decrypted
            assert user_images(llm.requests[0]) == [
                f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
            ]
            # out: uploaded encrypted, readable with the key in the encrypted event
            them.wait_pictures()
            time.sleep(1.0)
            them.sync()
            assert [them.picture(content) for content in them.pictures] == [PNG]  # once
            assert all(fake.media_of(uri).data != PNG for uri in fake.uploads)
        finally:
            them.close()

    def test_a_device_whose_keys_change_is_not_trusted(
        self, platform: MatrixPlatform, start_service: Start, llm: FakeLLM, tmp_path: Path
    ) -> None:
        fake, person = platform.fake, new_person()
        user, room = platform.sender_id(person), platform.room(person)
        service = start_service(self.settings(platform, allow_from=person))
        service.ready()
        fake.encrypted_dm(room, user)
        fake.wait_for(lambda: fake.rooms[room].joined_at is not None)
        them = EncryptedPerson(fake, user, tmp_path / "person-store")
        other = None
        try:
            llm.reply_forever_text("an answer")
            them.say(room, "hello")
            them.wait_answer("an answer")  # the device is trusted on first use
            # the same device id with other keys (a homeserver that lies, or a stolen login)
            other = EncryptedPerson(fake, user, tmp_path / "other-store")
            event_id = other.say(room, "an impostor's question")
            fake.wait_for(lambda: fake.handed.get(event_id, 0) >= 1)  # the bot synced it
            time.sleep(2.0)
            asked = [str(r["messages"]) for r in llm.requests]
            assert len(asked) == 1 and "impostor" not in "".join(asked)
            logs = service.logs()
            assert f"the signing key of {user}'s device PERSONDEVICE changed" in logs
            assert f"not taking {event_id}" in logs
        finally:
            them.close()
            if other is not None:
                other.close()


def test_the_stack_runs_the_channels_service_when_matrix_is_configured(tmp_path: Path) -> None:
    """`make run`'s launcher: the channels service gets the Matrix settings (and the channels
    token, never the owner's) and answers in Matrix."""
    with FakeLLM() as llm, FakeHomeserver() as fake:
        platform = MatrixPlatform(fake, tmp_path / "matrix-store")
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
