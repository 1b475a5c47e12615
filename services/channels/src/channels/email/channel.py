"""Email through aioimaplib (INBOX polled for UNSEEN mail, read with BODY.PEEK[] so reading
does not mark it) and aiosmtplib (one connection per reply). A mail is flagged \\Seen only after
the inbox took it, so a crash before its turn was queued leaves it unseen: read again.

Email cannot edit a sent mail nor show typing: `can_edit` is false (the answer goes out once,
whole) and `typing` does nothing."""

from __future__ import annotations

import asyncio
import logging
import re
import ssl

import aiosmtplib
from aioimaplib import IMAP4, IMAP4_SSL, Abort, CommandTimeout

from channels.config import ChannelsSettings
from channels.contract import Access, Channel, Inbox, PlatformRefused, RetryLater
from channels.email import mail
from channels.email.auth import verified

log = logging.getLogger(__name__)
# Mail has no length limit; a long answer still goes as several mails of this size, so each
# stays readable (and under providers' size limits once converted to plain text and HTML).
TEXT_LIMIT = 10_000
SMTP_RETRY = 2.0  # seconds before retrying a 4xx answer or a timeout: SMTP has no retry-after
FETCHED = re.compile(rb"\bUID (\d+)")


def factory(settings: ChannelsSettings) -> EmailChannel | None:
    """The `crayfish.channels` entry point: the channel when CHANNELS_EMAIL_IMAP_HOST is set."""
    if not settings.email_imap_host:
        return None
    return EmailChannel(settings)


class EmailChannel(Channel):
    name = "email"
    text_limit = TEXT_LIMIT
    can_edit = False

    def __init__(self, settings: ChannelsSettings):
        self.settings = settings
        self.access = Access.parse(settings.email_dm_policy, settings.email_allow_from, "")
        self.address = (settings.email_address or settings.email_username).lower()
        self.authserv_id = settings.email_authserv_id or settings.email_imap_host
        self.timeout = settings.call_timeout
        self.threads: dict[str, mail.Thread] = {}  # chat id → how to reply in it

    async def _imap(self) -> IMAP4:
        """A logged-in IMAP connection with INBOX selected."""
        s = self.settings
        if s.email_imap_security == "tls":
            client: IMAP4 = IMAP4_SSL(
                s.email_imap_host,
                s.email_imap_port,
                timeout=self.timeout,
                ssl_context=ssl.create_default_context(),
            )
        else:
            client = IMAP4(s.email_imap_host, s.email_imap_port, timeout=self.timeout)
        await client.wait_hello_from_server()
        login = await client.login(s.email_username, s.email_password)
        if login.result != "OK":
            raise PlatformRefused(f"IMAP refused the login: {_said(login.lines)}")
        selected = await client.select("INBOX")
        if selected.result != "OK":
            raise PlatformRefused(f"IMAP refused INBOX: {_said(selected.lines)}")
        return client

    async def start(self) -> None:
        client = await self._imap()
        await _logout(client)
        log.info("email: connected as %s", self.address)

    async def receive(self, inbox: Inbox) -> None:
        client = await self._imap()
        try:
            while True:
                for uid in await self._unseen(client):
                    await self._take(client, uid, inbox)
                await asyncio.sleep(self.settings.email_poll_every)
        finally:
            await _logout(client)

    async def _unseen(self, client: IMAP4) -> list[str]:
        found = await client.uid_search("UNSEEN", charset=None)
        _check(found, "SEARCH")
        return [uid for line in found.lines[:-1] for uid in line.decode().split() if uid.isdigit()]

    async def _take(self, client: IMAP4, uid: str, inbox: Inbox) -> None:
        """One mail to the inbox, then flagged \\Seen (never before: a crash reads it again)."""
        fetched = await client.uid("fetch", uid, "BODY.PEEK[]")
        _check(fetched, "FETCH")
        raw = next((bytes(line) for line in fetched.lines if isinstance(line, bytearray)), b"")
        handed = self._inbound(raw) if raw else None
        log.info("email: mail %s read, %s", uid, "taken" if handed else "ignored")
        if handed is not None:
            message, thread = handed
            self.threads[message.chat_id] = thread
            await inbox(message)  # raises: left unseen, read again
        # aioimaplib times out a UID FETCH but not a UID STORE: bounded here.
        stored = await asyncio.wait_for(
            client.uid("store", uid, "+FLAGS", "(\\Seen)"), self.timeout
        )
        _check(stored, "STORE")

    def _inbound(self, raw: bytes):  # type: ignore[no-untyped-def]
        """The mail as (Inbound, Thread); None for what no person may have written to us."""
        message = mail.parse(raw)
        address = mail.sender(message)
        if address is None or address == self.address or mail.automatic(message):
            return None
        if self.settings.email_verify_sender and not verified(message, address, self.authserv_id):
            log.warning("email: From %s not verified by %s: ignored", address, self.authserv_id)
            return None
        return mail.inbound(message, address, raw)

    async def send(self, chat_id: str, markdown: str) -> str:
        to, _, root = chat_id.partition(" ")
        message = mail.reply(self.address, to, self.threads.get(chat_id), root, markdown)
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


def _said(lines: list[bytes | bytearray]) -> str:
    return " ".join(bytes(line).decode(errors="replace") for line in lines)[:300]


def _check(response, command: str) -> None:  # type: ignore[no-untyped-def]
    if response.result != "OK":
        raise ConnectionError(f"IMAP {command}: {response.result} {_said(response.lines)}")


async def _logout(client: IMAP4) -> None:
    try:
        await client.logout()
    except (TimeoutError, Abort, CommandTimeout, OSError) as exc:
        log.info("email: logout: %s", exc)
