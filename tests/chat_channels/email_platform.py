"""The mail fakes (tests/fakes/imap_server.py, smtp_server.py) as the conformance suite's
Platform: a person is an address at example.test whose mail the receiving server verified."""

from __future__ import annotations

import mimetypes
import time
from email.message import EmailMessage
from email.utils import make_msgid

from tests.fakes.imap_server import FakeIMAP
from tests.fakes.smtp_server import FakeSMTP

DOMAIN = "example.test"
AUTHSERV = "mx.crayfish.test"


def address(person: str) -> str:
    """The person's address: the sender id the channel sees."""
    return person if "@" in person else f"{person}@{DOMAIN}"


class EmailPlatform:
    name = "email"
    text_limit = 10_000
    shows_typing = False

    def __init__(self, imap: FakeIMAP, smtp: FakeSMTP):
        self.imap, self.smtp = imap, smtp
        self.uids: dict[str, int] = {}  # Message-ID → its UID

    def sender_id(self, person: str) -> str:
        return address(person)

    def person_of(self, chat_id: str) -> str:
        """The person whose thread the chat is (its id: their address and the thread)."""
        return chat_id.partition(" ")[0].removesuffix(f"@{DOMAIN}")

    def env(self) -> dict[str, str]:
        return {
            "CHANNELS_EMAIL_IMAP_HOST": "127.0.0.1",
            "CHANNELS_EMAIL_IMAP_PORT": str(self.imap.port),
            "CHANNELS_EMAIL_IMAP_SECURITY": "none",
            "CHANNELS_EMAIL_SMTP_HOST": "127.0.0.1",
            "CHANNELS_EMAIL_SMTP_PORT": str(self.smtp.port),
            "CHANNELS_EMAIL_SMTP_SECURITY": "none",
            "CHANNELS_EMAIL_USERNAME": self.imap.username,
            "CHANNELS_EMAIL_PASSWORD": self.imap.password,
            "CHANNELS_EMAIL_POLL_EVERY": "0.2",
            "CHANNELS_EMAIL_AUTHSERV_ID": AUTHSERV,
        }

    def mail(self, text: str, person: str, **headers: str) -> EmailMessage:
        """A mail from the person as their server sends it and ours marks it (DMARC passed)."""
        sender = address(person)
        message = EmailMessage()
        message["Authentication-Results"] = headers.pop(
            "authentication_results", f"{AUTHSERV}; dmarc=pass header.from={DOMAIN}"
        )
        message["From"] = headers.pop("from_", f"Person {person} <{sender}>")
        message["To"] = self.imap.username
        message["Subject"] = headers.pop("subject", "a question")
        message["Message-ID"] = make_msgid(domain=DOMAIN)
        for name, value in headers.items():
            message[name.replace("_", "-")] = value
        message.set_content(text)
        return message

    def send(self, message: EmailMessage) -> str:
        self.uids[str(message["Message-ID"])] = self.imap.deliver(message.as_bytes())
        return str(message["Message-ID"])

    def say(self, text: str, person: str, chat: str | None = None, **how: bool) -> str:
        assert chat is None and not how, "email has no group chats"
        return self.send(self.mail(text, person))

    def send_attachment(
        self, data: bytes, name: str, person: str, caption: str = "", image: bool = True
    ) -> str:
        """A mail whose body is the caption, the file attached (a picture inline, as mail
        programs put a pasted one; a file as an attachment)."""
        message = self.mail(caption, person)
        guessed = mimetypes.guess_type(name)[0] or "application/octet-stream"
        maintype, _, subtype = guessed.partition("/")
        message.add_attachment(
            data, maintype, subtype, filename=name, disposition="inline" if image else "attachment"
        )
        return self.send(message)

    def pictures(self, chat: str) -> list[bytes | str]:
        """The pictures attached to the mails sent to the person, oldest first."""
        return [
            bytes(part.get_content())
            for sent in self.smtp.to(address(chat))
            for part in sent.message.iter_attachments()
            if part.get_content_maintype() == "image"
        ]

    def texts(self, chat: str) -> list[str]:
        return [sent.text for sent in self.smtp.to(address(chat))]

    def wait_texts(self, chat: str, count: int, timeout: float = 30.0) -> list[str]:
        return list(self.imap.wait_for(lambda: len(self.texts(chat)) >= count and self.texts(chat)))

    def typed(self, chat: str) -> bool:
        return False  # email has no typing indicator

    def first_sign(self, chat: str, after: float) -> float | None:
        times = [sent.at for sent in self.smtp.to(address(chat)) if sent.at >= after]
        return min(times) if times else None

    def flood_sends(self, *retry_after: int) -> None:
        self.smtp.flood("MAIL", *retry_after)

    def hang_sends(self, chat: str) -> None:
        self.smtp.hang("RCPT", address(chat))

    def hold_acks(self, hold: bool) -> None:
        with self.imap.lock:
            self.imap.hold_acks = hold
            self.imap.lock.notify_all()

    def deliveries(self, message_id: str) -> int:
        return self.imap.fetched(self.uids[message_id])


def wait(check, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")
