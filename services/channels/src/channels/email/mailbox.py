"""The assistant's INBOX over IMAP (aioimaplib): unseen mail, a mail read without marking it
(BODY.PEEK[]), a mail flagged \\Seen, and the wait for new mail: IDLE (RFC 2177) where the
server offers it, else a look every poll interval.

An IDLE ends when the server says the mailbox changed, or after CHANNELS_EMAIL_IDLE_EVERY
(RFC 2177: re-issued before the server's 30-minute timeout). Ending it is also the check that
the server still answers: one that does not answer DONE (or IDLE) within the call timeout is
dropped (ConnectionError), and the hub reopens the connection with backoff."""

from __future__ import annotations

import asyncio
import logging
import ssl

from aioimaplib import IMAP4, IMAP4_SSL, Abort, CommandTimeout

from channels.config import ChannelsSettings
from channels.contract import PlatformRefused

log = logging.getLogger(__name__)


LOST = [b"connection lost"]  # what an IDLE hears when the server closed the connection


class Mailbox:
    def __init__(self, settings: ChannelsSettings, client: IMAP4):
        self.settings = settings
        self.client = client
        self.timeout = settings.call_timeout
        self.idles = client.has_capability("IDLE")
        self.lost = False
        # A closed connection ends an IDLE at once, not at its re-issue minutes later.
        client.protocol.conn_lost_cb = self._lost

    def _lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.client.protocol.idle_queue.put_nowait(LOST)

    @classmethod
    async def open(cls, settings: ChannelsSettings) -> Mailbox:
        """A logged-in connection with INBOX selected; PlatformRefused for a wrong login."""
        s = settings
        if s.email_imap_security == "tls":
            client: IMAP4 = IMAP4_SSL(
                s.email_imap_host,
                s.email_imap_port,
                timeout=s.call_timeout,
                ssl_context=ssl.create_default_context(),
            )
        else:
            client = IMAP4(s.email_imap_host, s.email_imap_port, timeout=s.call_timeout)
        await client.wait_hello_from_server()
        login = await client.login(s.email_username, s.email_password)
        if login.result != "OK":
            raise PlatformRefused(f"IMAP refused the login: {said(login.lines)}")
        selected = await client.select("INBOX")
        if selected.result != "OK":
            raise PlatformRefused(f"IMAP refused INBOX: {said(selected.lines)}")
        return cls(settings, client)

    async def unseen(self) -> list[str]:
        found = await self.client.uid_search("UNSEEN", charset=None)
        _check(found, "SEARCH")
        lines = found.lines[:-1]
        return [uid for line in lines for uid in bytes(line).decode().split() if uid.isdigit()]

    async def read(self, uid: str) -> bytes:
        """The whole mail, not marked \\Seen by reading it; b"" when it is gone."""
        fetched = await self.client.uid("fetch", uid, "BODY.PEEK[]")
        _check(fetched, "FETCH")
        return next((bytes(line) for line in fetched.lines if isinstance(line, bytearray)), b"")

    async def flag_seen(self, uid: str) -> None:
        # aioimaplib times out a UID FETCH but not a UID STORE: bounded here.
        stored = await asyncio.wait_for(
            self.client.uid("store", uid, "+FLAGS", "(\\Seen)"), self.timeout
        )
        _check(stored, "STORE")

    async def wait_for_mail(self) -> None:
        """Returns when new mail may be there: IDLE's word, or the poll interval passed."""
        if self.idles:
            await self._idle()
        else:
            await asyncio.sleep(self.settings.email_poll_every)

    async def _idle(self) -> None:
        client = self.client
        every = self.settings.email_idle_every
        try:  # aioimaplib bounds neither the IDLE's continuation nor its end: bounded here
            idling = await asyncio.wait_for(client.idle_start(timeout=every + 60), self.timeout)
        except TimeoutError as exc:
            raise ConnectionError("IMAP did not answer IDLE") from exc
        try:
            pushed = await client.wait_server_push(timeout=every)
            log.debug("email: the server says %s", said(pushed))
        except TimeoutError:
            pass  # no news: re-issued, which checks the server still answers
        finally:
            if self.lost:
                idling.cancel()
            else:
                client.idle_done()
        if self.lost:
            raise ConnectionError("IMAP closed the connection")
        try:
            ended = await asyncio.wait_for(idling, self.timeout)
        except TimeoutError as exc:
            raise ConnectionError("IMAP did not answer the end of IDLE") from exc
        _check(ended, "IDLE")

    async def close(self) -> None:
        if self.lost:
            return  # nothing to log out of
        try:
            await self.client.logout()
        except (TimeoutError, Abort, CommandTimeout, OSError) as exc:
            log.info("email: logout: %s", exc)


def said(lines: list[bytes | bytearray] | list[bytes]) -> str:
    return " ".join(bytes(line).decode(errors="replace") for line in lines)[:300]


def _check(response, command: str) -> None:  # type: ignore[no-untyped-def]
    if response.result != "OK":
        raise ConnectionError(f"IMAP {command}: {response.result} {said(response.lines)}")
