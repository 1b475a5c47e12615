"""Email end to end: aioimaplib against the fake IMAP mailbox and aiosmtplib against a real
SMTP server (aiosmtpd) on loopback, the channels service as its own process, the real stack
behind it; the conformance suite and email's own: threads, forged senders, robots, IDLE and
polling, hostile attachments."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.chat_channels.conformance import PNG, ChannelConformance, Start
from tests.chat_channels.email_platform import AUTHSERV, EmailPlatform, address, wait
from tests.chat_channels.platform import new_person
from tests.fakes import FakeLLM
from tests.fakes.imap_server import FakeIMAP
from tests.fakes.smtp_server import FakeSMTP

NO_GROUPS = "email has no group chats to mention the bot in"


@pytest.fixture
def platform() -> Iterator[EmailPlatform]:
    with FakeIMAP() as imap, FakeSMTP() as smtp:
        yield EmailPlatform(imap, smtp)


class TestEmail(ChannelConformance):
    def test_a_group_is_answered_only_when_the_bot_is_addressed(self) -> None:  # type: ignore[override]
        print(f"skipped: {NO_GROUPS}")
        pytest.skip(NO_GROUPS)

    def test_a_stranger_in_a_group_gets_no_code_and_takes_no_pairing_slot(self) -> None:  # type: ignore[override]
        print(f"skipped: {NO_GROUPS}")
        pytest.skip(NO_GROUPS)

    def test_a_reply_in_the_thread_continues_its_session_and_answers_in_it(
        self, platform: EmailPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_text("Noted: **blue**.")
        first = platform.mail("My favourite colour is blue.", person, subject="colours")
        platform.send(first)
        answer = wait(lambda: platform.smtp.to(address(person)))[0].message
        assert answer["In-Reply-To"] == first["Message-ID"]
        assert answer["Subject"] == "Re: colours" and answer["Auto-Submitted"] == "auto-replied"
        assert platform.texts(person) == ["Noted: blue."]  # Markdown as plain text
        llm.reply_text("Blue, you said.")
        follow_up = platform.mail(
            "What did I say?\n\nOn Thu, someone wrote:\n> Noted: blue.",
            person,
            subject="Re: colours",
            In_Reply_To=str(answer["Message-ID"]),
            References=f"{first['Message-ID']} {answer['Message-ID']}",
        )
        platform.send(follow_up)
        wait(lambda: len(platform.texts(person)) == 2)
        asked = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "user"]
        assert len(asked) == 2  # one session: the first mail is history, the quote dropped
        assert asked[0].startswith("My favourite colour is blue.")
        assert asked[1].startswith("What did I say?") and "Noted" not in asked[1]
        second = platform.smtp.to(address(person))[1].message
        assert second["In-Reply-To"] == follow_up["Message-ID"]
        assert str(first["Message-ID"]) in str(second["References"])

    def test_the_answer_mail_itself_carries_the_pictures_it_shows(
        self, platform: EmailPlatform, start_service: Start, llm: FakeLLM, workspace: Path
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        chart = f"charts/mail-{person}.png"
        (workspace / chart).parent.mkdir(exist_ok=True)
        (workspace / chart).write_bytes(PNG)
        remote = "https://example.test/remote.png"
        llm.reply_text(f"Two views:\n\n![the chart]({chart})\n\n![elsewhere]({remote})")
        platform.say("charts, please", person)
        wait(lambda: platform.smtp.to(address(person)))
        time.sleep(1.5)  # a second mail (a picture sent after the answer) would be here by now
        (answer,) = platform.smtp.to(address(person))
        (picture,) = answer.message.iter_attachments()
        assert picture.get_filename() == f"mail-{person}.png"
        assert picture.get_content_type() == "image/png" and picture.get_content() == PNG
        assert chart not in answer.text and remote in answer.text  # a URL stays a link
        assert answer.text.startswith("Two views:")

    def test_a_forged_from_is_ignored_and_a_verified_one_answered(
        self, platform: EmailPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_forever_text("answered")
        forged = [
            platform.mail("no verdict at all", person, authentication_results=""),
            platform.mail(
                "dmarc failed",
                person,
                authentication_results=f"{AUTHSERV}; dmarc=fail header.from=example.test",
            ),
            platform.mail(  # a pass written by the sender's own server, not ours
                "someone else's pass",
                person,
                authentication_results="mx.evil.test; dmarc=pass header.from=example.test",
            ),
        ]
        uids = [platform.imap.deliver(m.as_bytes()) for m in forged]
        wait(lambda: all(platform.imap.seen(uid) for uid in uids))  # read, and let be
        assert platform.texts(person) == [] and llm.requests == []
        platform.say("the real me", person)
        wait(lambda: platform.texts(person) == ["answered"])
        assert len(llm.requests) == 1

    def test_auto_replies_are_never_answered(
        self, platform: EmailPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        start_service(self.settings(platform, allow_from=person)).ready()
        llm.reply_forever_text("answered")
        robot = platform.mail("I am out of office", person, Auto_Submitted="auto-replied")
        uid = platform.imap.deliver(robot.as_bytes())
        wait(lambda: platform.imap.seen(uid))
        platform.say("back now", person)
        wait(lambda: platform.texts(person) == ["answered"])
        assert len(llm.requests) == 1

    def test_a_wrong_password_shows_in_readyz(
        self, platform: EmailPlatform, start_service: Start
    ) -> None:
        env = {**self.settings(platform), "CHANNELS_EMAIL_PASSWORD": "wrong"}
        service = start_service(env)

        def refused() -> httpx.Response | None:
            try:
                reply = service.readyz()
            except httpx.TransportError:
                return None  # not listening yet
            return reply if reply.json()["channels"].get("email", {}).get("error") else None

        reply = wait(refused)
        assert reply.status_code == 503
        state = reply.json()["channels"]["email"]
        assert state["state"] == "reconnecting" and "login" in state["error"].lower()


def _answered(platform: EmailPlatform, person: str, count: int = 1) -> list[str]:
    return list(wait(lambda: len(platform.texts(person)) >= count and platform.texts(person)))


def _nested(depth: int, platform: EmailPlatform, person: str) -> bytes:
    """A mail of `depth` multiparts within each other: more than Python's parser can walk."""
    head = platform.mail("", person).as_bytes().split(b"\n\n", 1)[0].replace(b"\r", b"")
    head = b"\n".join(line for line in head.split(b"\n") if not line.startswith(b"Content-"))
    opened = b"".join(
        b'Content-Type: multipart/mixed; boundary="n%d"\n\n--n%d\n' % (i, i) for i in range(depth)
    )
    closed = b"".join(b"\n--n%d--" % i for i in reversed(range(depth)))
    return head + b"\n" + opened + b"Content-Type: text/plain\n\nhi" + closed + b"\n"


class TestHostileMail:
    def test_odd_attachments_are_taken_safely_or_named_as_not_taken(
        self, platform: EmailPlatform, start_service: Start, llm: FakeLLM, workspace: Path
    ) -> None:
        person = new_person()
        allowed = {"CHANNELS_EMAIL_ALLOW_FROM": address(person)}
        start_service({**platform.env(), **allowed}).ready()
        llm.reply_forever_text("looked at it")
        bomb = platform.imap.deliver(_nested(5000, platform, person))
        message = platform.mail("the files", person)
        message.add_attachment(b"\x89PNG not base64 at all", "image", "png", filename="pic.png")
        broken = message.get_payload()[-1]
        broken.set_payload("!!! this is *not* base64 !!!")  # as a broken mailer sends it
        escape = f"=?utf-8?q?=2E=2E=2F=2E=2E=2F=2E=2E=2Fescaped-{person}=2Etxt?="
        message.add_attachment(b"payload", "text", "plain", filename="x")
        message.get_payload()[-1].replace_header(
            "Content-Disposition", f'attachment; filename="{escape}"'
        )
        platform.send(message)
        texts = _answered(platform, person, 2)
        assert any("pic.png: not valid base64" in text for text in texts), texts
        assert "looked at it" in texts
        asked = str(llm.requests[0]["messages"])
        assert "the files" in asked
        path = re.search(rf"(inbox/[0-9a-f]{{8}}-escaped-{person}\.txt) \(7 bytes\)", asked)
        assert path is not None, asked
        assert (workspace / path[1]).read_bytes() == b"payload"
        assert not list(workspace.parent.glob(f"**/escaped-{person}.txt"))  # nowhere else
        assert platform.imap.seen(bomb) and len(llm.requests) == 1  # read, and let be


class TestNewMail:
    """How new mail is noticed: IDLE where the server offers it, else a look every interval."""

    def settings(self, platform: EmailPlatform, person: str, **env: str) -> dict[str, str]:
        allowed = {"CHANNELS_EMAIL_ALLOW_FROM": address(person)}
        return {**platform.env(), **allowed, **env}

    def test_mail_arriving_during_idle_is_answered_without_waiting_for_a_look(
        self, platform: EmailPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        # A look every ten minutes: only IDLE's word can bring the mail in within the wait.
        start_service(self.settings(platform, person, CHANNELS_EMAIL_POLL_EVERY="600")).ready()
        llm.reply_forever_text("heard you")
        wait(lambda: platform.imap.idles >= 1)  # idling before the mail arrives
        arrived = time.monotonic()
        platform.say("are you listening?", person)
        assert _answered(platform, person) == ["heard you"]
        answered = platform.smtp.to(address(person))[0].at
        print(f"email with IDLE: answer mail {1000 * (answered - arrived):.0f} ms after arrival")

    def test_a_server_without_idle_is_looked_at_every_interval(
        self, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        with FakeIMAP(idle=False) as imap, FakeSMTP() as smtp:
            platform = EmailPlatform(imap, smtp)
            start_service(self.settings(platform, person)).ready()  # a look every 0.2 s
            llm.reply_forever_text("polled")
            platform.say("anyone?", person)
            assert _answered(platform, person) == ["polled"]
            platform.say("still there?", person)
            assert _answered(platform, person, 2)[1] == "polled"
            assert imap.idles == 0

    def test_a_server_that_stops_answering_is_dropped_and_reopened(
        self, platform: EmailPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        env = self.settings(
            platform, person, CHANNELS_EMAIL_POLL_EVERY="600", CHANNELS_EMAIL_IDLE_EVERY="1"
        )
        start_service(env).ready()
        llm.reply_forever_text("back again")
        wait(lambda: platform.imap.idles >= 1)
        logins = platform.imap.logins
        platform.imap.freeze()  # the connection idling now never says a word again
        platform.say("hello after the hang", person)
        assert _answered(platform, person) == ["back again"]
        assert platform.imap.logins > logins  # through a new connection

    def test_a_connection_the_server_closes_is_reopened_at_once(
        self, platform: EmailPlatform, start_service: Start, llm: FakeLLM
    ) -> None:
        person = new_person()
        # Neither a look nor the IDLE's re-issue (25 min) comes within the wait: only noticing
        # the closed connection brings the mail in.
        start_service(self.settings(platform, person, CHANNELS_EMAIL_POLL_EVERY="600")).ready()
        llm.reply_forever_text("reconnected")
        wait(lambda: platform.imap.idles >= 1)
        logins = platform.imap.logins
        platform.imap.drop()
        platform.say("hello after the restart", person)
        assert _answered(platform, person) == ["reconnected"]
        assert platform.imap.logins > logins
