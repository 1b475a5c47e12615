"""Email's reading of mails: whose they are, which thread, what is new in them."""

from __future__ import annotations

import re

from channels.contract import Inbound
from channels.conversations import session_of
from channels.email import mail
from channels.email.auth import verified

OURS = "mx.example.org"


def _mail(headers: str, body: str = "Hello") -> bytes:
    return f"{headers}\r\nMessage-ID: <m1@a.test>\r\n\r\n{body}\r\n".encode()


def test_only_our_servers_dmarc_pass_for_the_from_domain_counts() -> None:
    def check(results: str) -> bool:
        message = mail.parse(_mail(f"From: a@a.test\r\n{results}"))
        return verified(message, "a@a.test", OURS)

    assert check(f"Authentication-Results: {OURS}; dmarc=pass header.from=a.test")
    assert not check(f"Authentication-Results: {OURS}; dmarc=fail header.from=a.test")
    assert not check(f"Authentication-Results: {OURS}; dmarc=pass header.from=b.test")
    assert not check("Authentication-Results: mx.a.test; dmarc=pass header.from=a.test")
    assert not check("")
    # Our server's header is the topmost: a pass the sender wrote below it does not count.
    assert not check(
        f"Authentication-Results: {OURS}; dmarc=fail header.from=a.test\r\n"
        f"Authentication-Results: {OURS}; dmarc=pass header.from=a.test"
    )


def test_several_from_addresses_have_no_sender() -> None:
    assert mail.sender(mail.parse(_mail("From: a@a.test, b@b.test"))) is None
    assert mail.sender(mail.parse(_mail("From: Ann <Ann@A.test>"))) == "ann@a.test"


def test_a_reply_belongs_to_its_threads_first_mail_and_keeps_only_its_new_text() -> None:
    raw = _mail(
        "From: a@a.test\r\nReferences: <root@a.test> <bot@b.test>\r\nIn-Reply-To: <bot@b.test>",
        "Thanks!\r\n\r\nOn Monday, Bot wrote:\r\n> the old answer",
    )
    received = mail.inbound(mail.parse(raw), "a@a.test", raw, "1")
    message, thread = received.inbound, received.thread
    assert message.chat_id == "a@a.test <root@a.test>" and message.message_id == "<m1@a.test>"
    assert message.text == "Thanks!"
    assert thread.last_id == "<m1@a.test>" and thread.references[0] == "<root@a.test>"


def test_distinct_chats_get_distinct_valid_session_ids() -> None:
    one = session_of("email", Inbound("a+b@x.test <r@x>", "1", "a+b@x.test", "hi"))
    two = session_of("email", Inbound("a_b@x.test <r@x>", "1", "a_b@x.test", "hi"))
    orchestrators = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # store/sessions.py
    assert one != two and orchestrators.fullmatch(one) and orchestrators.fullmatch(two)
    assert session_of("telegram", Inbound("-1001", "1", "5", "hi")) == "telegram.-1001"
