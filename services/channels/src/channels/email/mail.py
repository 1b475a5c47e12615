"""A received mail as an `Inbound` (who sent it, which thread, its new text) and an answer as a
reply mail in the same thread (In-Reply-To, References, Re: subject)."""

from __future__ import annotations

import hashlib
import html
import re
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import getaddresses, make_msgid

from channels.contract import Inbound, Picture
from channels.email.parts import Part, attachments
from channels.telegram.markdown import to_html

ID_LIMIT = 128  # the orchestrator's limit on chat and message ids
MESSAGE_ID = re.compile(r"<[^<>\s]+>")
QUOTE_INTRO = re.compile(r"^On .{1,200} wrote:\s*$")
LINK = re.compile(r'<a href="([^"]*)">(.*?)</a>', re.S)
TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Thread:
    """What a reply in a thread needs: the subject and the ids it answers."""

    subject: str
    last_id: str  # the Message-ID replied to
    references: tuple[str, ...]


def parse(raw: bytes) -> EmailMessage:
    message = BytesParser(policy=policy.default).parsebytes(raw)
    assert isinstance(message, EmailMessage)
    return message


def sender(message: EmailMessage) -> str | None:
    """The one From: address, lowercased; None for none or several."""
    found = getaddresses([str(h) for h in message.get_all("From", [])])
    addresses = [address for _, address in found if "@" in address]
    return addresses[0].strip().lower() if len(addresses) == 1 else None


def automatic(message: EmailMessage) -> bool:
    """An auto-reply, bounce or list mail: never answered, so two robots cannot loop."""
    submitted = str(message.get("Auto-Submitted", "no")).strip().lower()
    precedence = str(message.get("Precedence", "")).strip().lower()
    return submitted != "no" or precedence in ("bulk", "junk", "list")


def _ids(value: object) -> list[str]:
    return MESSAGE_ID.findall(str(value or ""))


def _short(identifier: str) -> str:
    """An id as the orchestrator takes it: as is, or its digest when too long."""
    if len(identifier) <= 64:
        return identifier
    return "<" + hashlib.sha256(identifier.encode()).hexdigest()[:40] + "@digest>"


@dataclass(frozen=True)
class Received:
    """A mail as the inbox takes it, what a reply to it needs, and its attachments' parts."""

    inbound: Inbound
    thread: Thread
    parts: tuple[Part, ...]


def inbound(message: EmailMessage, address: str, raw: bytes, ref: str) -> Received:
    """The mail as an Inbound: its chat is the sender and the thread's first Message-ID (so a
    thread is a session), its id the Message-ID, its text the new text of its body, and its
    attachments (refs `<ref>/<n>`); and what a reply to it needs."""
    own = (_ids(message.get("Message-ID")) or [""])[0]
    if not own:
        own = "<" + hashlib.sha256(raw).hexdigest()[:40] + "@no-message-id>"
    references = _ids(message.get("References")) or _ids(message.get("In-Reply-To"))
    root = references[0] if references else own
    name = ""
    found = getaddresses([str(message.get("From", ""))])
    if found:
        name = found[0][0]
    subject = str(message.get("Subject", "")).strip()
    body = message.get_body(preferencelist=("plain", "html"))
    assert body is None or isinstance(body, EmailMessage)
    parts = tuple(attachments(message, body, ref))
    text = (new_text(body) if body is not None else "") or subject
    chat_id = f"{address} {_short(root)}"[:ID_LIMIT]
    received = Inbound(
        chat_id=chat_id,
        message_id=_short(own),
        sender_id=address,
        sender_name=name,
        text=text,
        attachments=tuple(part.attachment for part in parts),
    )
    return Received(received, Thread(subject, own, (*references, own)), parts)


def new_text(body: EmailMessage) -> str:
    """What the sender wrote in this body part: its text without the quoted history below."""
    text = str(body.get_content())
    if body.get_content_subtype() == "html":
        text = html.unescape(TAG.sub("", text))
    kept: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if QUOTE_INTRO.match(line.strip()) or line.strip() == "-- ":
            break  # the quoted mail (or the signature) starts here
        if not line.startswith(">"):
            kept.append(line)
    return "\n".join(kept).strip()


def plain(markdown: str) -> str:
    """The Markdown as a person reads it in plain text: marks gone, links as `text (url)`."""
    rendered = LINK.sub(lambda m: f"{m[2]} ({m[1]})" if m[1] != m[2] else m[2], to_html(markdown))
    return html.unescape(TAG.sub("", rendered))


def reply(
    sender_address: str,
    to: str,
    thread: Thread | None,
    root: str,
    markdown: str,
    pictures: tuple[Picture, ...] = (),
) -> EmailMessage:
    """The answer as a mail in the thread: plain text and HTML alternatives, and the pictures
    (bytes) as attachments after them."""
    mail = EmailMessage()
    mail["From"] = sender_address
    mail["To"] = to
    subject = thread.subject if thread and thread.subject else "your message"
    mail["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    last = thread.last_id if thread else root
    references = thread.references if thread else (root,)
    if last.endswith("@digest>"):  # a digest stands for an id this process no longer knows
        last, references = "", ()
    if last:
        mail["In-Reply-To"] = last
        mail["References"] = " ".join(references)
    domain = sender_address.rpartition("@")[2] or None
    mail["Message-ID"] = make_msgid(domain=domain)
    mail["Auto-Submitted"] = "auto-replied"  # RFC 3834: other robots do not answer it
    mail.set_content(plain(markdown))
    mail.add_alternative(
        f'<div style="white-space: pre-wrap">{to_html(markdown)}</div>', subtype="html"
    )
    for picture in pictures:
        maintype, _, subtype = (picture.mime or "application/octet-stream").partition("/")
        mail.add_attachment(picture.data, maintype, subtype, filename=picture.name)
    return mail
