"""Email through aioimaplib (INBOX: new mail waited for with IDLE where the server offers it,
else polled; each mail read with BODY.PEEK[] so reading does not mark it) and aiosmtplib (one
connection per mail sent). A mail is flagged \\Seen only after the inbox took it, so a crash
before its turn was queued leaves it unseen: read again.

A mail's attachments are held while the inbox takes it (`fetch` decodes them then). Pictures an
answer shows go as attachments of a mail in the thread. Email cannot edit a sent mail nor show
typing: `can_edit` is false (the answer goes out once, whole) and `typing` does nothing."""

from __future__ import annotations

import asyncio
import logging

import aiosmtplib

from channels.config import ChannelsSettings
from channels.contract import (
    Access,
    Attachment,
    Channel,
    Inbox,
    Picture,
    PlatformRefused,
    RetryLater,
)
from channels.email import mail
from channels.email.auth import verified
from channels.email.mailbox import Mailbox
from channels.email.parts import Part, decoded

log = logging.getLogger(__name__)
# Mail has no length limit; a long answer still goes as several mails of this size, so each
# stays readable (and under providers' size limits once converted to plain text and HTML).
TEXT_LIMIT = 10_000
SMTP_RETRY = 2.0  # seconds before retrying a 4xx answer or a timeout: SMTP has no retry-after


class EmailChannel(Channel):
    name = "email"
    text_limit = TEXT_LIMIT
    can_edit = False
    attaches_pictures = True  # one mail: the answer and the pictures it shows

    def __init__(self, settings: ChannelsSettings):
        self.settings = settings
        self.access = Access.parse(settings.email_dm_policy, settings.email_allow_from, "")
        self.address = (settings.email_address or settings.email_username).lower()
        self.authserv_id = settings.email_authserv_id or settings.email_imap_host
        self.timeout = settings.call_timeout
        self.threads: dict[str, mail.Thread] = {}  # chat id → how to reply in it
        self.parts: dict[str, Part] = {}  # attachment ref → its part, while the inbox takes it

    async def start(self) -> None:
        mailbox = await Mailbox.open(self.settings)
        await mailbox.close()
        how = "IDLE" if mailbox.idles else f"a look every {self.settings.email_poll_every} s"
        log.info("email: connected as %s; new mail by %s", self.address, how)

    async def receive(self, inbox: Inbox) -> None:
        mailbox = await Mailbox.open(self.settings)
        try:
            while True:
                for uid in await mailbox.unseen():
                    await self._take(mailbox, uid, inbox)
                await mailbox.wait_for_mail()
        finally:
            await mailbox.close()

    async def _take(self, mailbox: Mailbox, uid: str, inbox: Inbox) -> None:
        """One mail to the inbox, then flagged \\Seen (never before: a crash reads it again)."""
        raw = await mailbox.read(uid)
        # Parsed off the event loop: a hostile mail's structure costs time, not other chats'.
        handed = await asyncio.to_thread(self._inbound, raw, uid) if raw else None
        log.info("email: mail %s read, %s", uid, "taken" if handed else "ignored")
        if handed is not None:
            self.threads[handed.inbound.chat_id] = handed.thread
            self.parts = {part.attachment.ref: part for part in handed.parts}
            try:
                await inbox(handed.inbound)  # raises: left unseen, read again
            finally:
                self.parts = {}
        await mailbox.flag_seen(uid)

    def _inbound(self, raw: bytes, uid: str) -> mail.Received | None:
        """The mail as the inbox takes it; None for what no person may have written to us."""
        try:
            message = mail.parse(raw)
            address = mail.sender(message)
            if address is None or address == self.address or mail.automatic(message):
                return None
            if self.settings.email_verify_sender and not verified(
                message, address, self.authserv_id
            ):
                log.warning("email: From %s not verified by %s: ignored", address, self.authserv_id)
                return None
            return mail.inbound(message, address, raw, uid)
        except RecursionError:  # nested past what Python's parser walks: no person wrote it
            log.warning("email: mail %s nested too deep to read: ignored", uid)
            return None

    async def fetch(self, attachment: Attachment, max_bytes: int) -> bytes:
        """The attachment's bytes, decoded from the mail being taken."""
        part = self.parts.get(attachment.ref)
        if part is None:
            raise PlatformRefused(f"{attachment.name} is no longer at hand")
        return await asyncio.to_thread(decoded, part, max_bytes)

    async def send(self, chat_id: str, markdown: str) -> str:
        return await self._mail(chat_id, markdown, ())

    async def send_with_pictures(
        self, chat_id: str, markdown: str, pictures: tuple[Picture, ...]
    ) -> str:
        """The answer mail, the pictures (bytes) attached to it; a URL stays a link in the text."""
        return await self._mail(chat_id, markdown, tuple(p for p in pictures if p.data))

    async def send_image(self, chat_id: str, picture: Picture) -> str:
        """A mail in the thread with the picture attached (a notification's picture: an
        answer's go with it). A URL is refused: this service never fetches a URL a model
        wrote, and the text already holds the link."""
        if not picture.data:
            raise PlatformRefused("email attaches pictures; a link stays in the text")
        return await self._mail(chat_id, picture.name, (picture,))

    async def _mail(self, chat_id: str, markdown: str, pictures: tuple[Picture, ...]) -> str:
        """One reply mail in the chat's thread, sent over SMTP; its Message-ID."""
        to, _, root = chat_id.partition(" ")
        message = mail.reply(self.address, to, self.threads.get(chat_id), root, markdown, pictures)
        s = self.settings
        try:
            await aiosmtplib.send(
                message,
                hostname=s.email_smtp_host,
                port=s.email_smtp_port,
                username=s.email_username or None,
                password=s.email_password or None,
                use_tls=s.email_smtp_security == "tls",
                start_tls=s.email_smtp_security == "starttls",
                timeout=self.timeout,
            )
        except aiosmtplib.SMTPResponseException as exc:
            if 400 <= exc.code < 500:
                raise RetryLater(f"SMTP {exc.code}: {exc.message}", SMTP_RETRY) from exc
            raise PlatformRefused(f"SMTP {exc.code}: {exc.message}") from exc
        except aiosmtplib.SMTPNotSupported as exc:  # e.g. no AUTH without TLS: settings
            raise PlatformRefused(f"SMTP: {exc}") from exc
        except (TimeoutError, aiosmtplib.SMTPException, OSError) as exc:
            raise RetryLater(f"SMTP did not answer: {exc}", SMTP_RETRY) from exc
        return str(message["Message-ID"])

    async def edit(self, chat_id: str, message_id: str, markdown: str) -> None:
        raise PlatformRefused("a sent mail cannot be edited")

    async def typing(self, chat_id: str) -> None:
        """Email has no typing indicator."""

    async def close(self) -> None:
        """Nothing held: receive logs out when it ends, each send has its own connection."""
