"""A real SMTP server on loopback (aiosmtpd) that keeps what it is given, and can answer 451
(try later) a number of times or never answer for a recipient."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from devstack.launcher import free_port
from tests.fakes.platform_base import FakePlatform


@dataclass
class Sent:
    to: str
    message: EmailMessage
    at: float  # time.monotonic() when it arrived

    @property
    def text(self) -> str:
        body = self.message.get_body(preferencelist=("plain",))
        text = str(body.get_content()) if body is not None else ""
        return text.replace("\r\n", "\n").strip()  # as a mail client shows it


class FakeSMTP(FakePlatform):
    """Floods are of "MAIL" (451s, the numbers the seconds said); hung calls are "RCPT" to a
    recipient."""

    label = "SMTP"

    def __init__(self, username: str = "bot@crayfish.test", password: str = "secret") -> None:
        super().__init__()
        self.login = (username.encode(), password.encode())
        self.sent: list[Sent] = []
        # aiosmtpd's Controller checks it is up by connecting to its port: not 0.
        self.controller = Controller(
            self,
            hostname="127.0.0.1",
            port=free_port(),
            authenticator=self._authenticate,
            auth_require_tls=False,  # loopback only: no TLS here
            auth_required=True,
        )

    @property
    def port(self) -> int:
        return int(self.controller.port)

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: object
    ) -> AuthResult:
        given = (data.login, data.password) if isinstance(data, LoginPassword) else None
        return AuthResult(success=given == self.login)

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        wait = self.next_flood("MAIL")
        if wait is not None:
            return f"451 4.7.1 Rate limited, try again in {wait} s"
        envelope.mail_from = address
        return "250 OK"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if self.is_hung("RCPT", address.lower()):
            await asyncio.sleep(3600)
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        message = BytesParser(policy=policy.default).parsebytes(bytes(envelope.content or b""))
        assert isinstance(message, EmailMessage)
        with self.lock:
            for to in envelope.rcpt_tos:
                self.sent.append(Sent(to.lower(), message, time.monotonic()))
        return "250 Message accepted"

    def to(self, address: str) -> list[Sent]:
        with self.lock:
            return [s for s in self.sent if s.to == address.lower()]

    def __enter__(self) -> FakeSMTP:
        self.controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.controller.stop()
