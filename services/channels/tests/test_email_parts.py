"""Email attachments as a hostile sender writes them: names with folders or encoded-words, bad
base64, forwarded mails, absurd part counts and nesting; and pictures attached to an answer."""

from __future__ import annotations

import base64

import pytest
from channels.contract import Picture, PlatformRefused
from channels.email import mail
from channels.email.parts import MAX_ATTACHMENTS, decoded, safe_name

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
HEAD = (
    'From: a@a.test\r\nMessage-ID: <m1@a.test>\r\nContent-Type: multipart/mixed; boundary="b"\r\n'
)


def _mime(*parts: str, head: str = HEAD) -> bytes:
    body = "".join(f"--b\r\n{part}\r\n" for part in parts)
    return f"{head}\r\n{body}--b--\r\n".encode()


def _received(raw: bytes) -> mail.Received:
    return mail.inbound(mail.parse(raw), "a@a.test", raw, "7")


TEXT = "Content-Type: text/plain\r\n\r\nsee attached"


def _part(mime: str, disposition: str, data: str, encoding: str = "base64") -> str:
    return (
        f"Content-Type: {mime}\r\nContent-Disposition: {disposition}\r\n"
        f"Content-Transfer-Encoding: {encoding}\r\n\r\n{data}"
    )


def test_pictures_and_files_are_attachments_and_the_body_is_the_text() -> None:
    png = base64.b64encode(PNG).decode()
    received = _received(
        _mime(
            TEXT,
            _part("image/png", "inline", png),
            _part("application/pdf", 'attachment; filename="report.pdf"', "JVBERi0="),
        )
    )
    assert received.inbound.text == "see attached"
    found = received.inbound.attachments
    assert [(a.ref, a.name, a.mime, a.image) for a in found] == [
        ("7/1", "attachment-1.png", "image/png", True),
        ("7/2", "report.pdf", "application/pdf", False),
    ]
    assert decoded(received.parts[0], 10_000) == PNG
    assert decoded(received.parts[1], 10_000) == b"%PDF-"


def test_names_lose_their_folders_and_odd_characters() -> None:
    assert safe_name("../../etc/passwd", 1, "text/plain") == "passwd"
    assert safe_name("C:\\Users\\me\\a.txt", 1, "text/plain") == "a.txt"
    assert safe_name("..", 3, "image/png") == "attachment-3.png"
    assert safe_name("a\x00b\r\nc?.txt", 1, "text/plain") == "a_b__c_.txt"
    assert (
        safe_name("x" * 300 + ".pdf", 1, "application/pdf") == "x" * 96 + ".pdf"
    )  # 100 characters
    # An RFC 2047 encoded-word hiding a path is decoded first, then loses it.
    encoded = "=?utf-8?q?=2E=2E=2F=2E=2E=2Fcron=2Ed=2Fevil?="
    received = _received(
        _mime(TEXT, _part("text/plain", f'attachment; filename="{encoded}"', "aGk="))
    )
    assert received.inbound.attachments[0].name == "evil"


def test_bad_base64_is_refused_not_guessed_at() -> None:
    received = _received(_mime(TEXT, _part("image/png", "attachment", "!!not*base64!!")))
    with pytest.raises(PlatformRefused, match="not valid base64"):
        decoded(received.parts[0], 10_000)


def test_a_part_over_the_cap_is_refused_before_it_is_decoded() -> None:
    big = base64.b64encode(b"x" * 3000).decode()
    received = _received(_mime(TEXT, _part("application/zip", "attachment", big)))
    assert received.inbound.attachments[0].size == 3000
    with pytest.raises(PlatformRefused, match="over 1000 bytes"):
        decoded(received.parts[0], 1000)


def test_a_forwarded_mail_is_one_eml_file_not_opened() -> None:
    inner = "From: c@c.test\r\nSubject: old news\r\n\r\nforwarded text"
    received = _received(
        _mime(
            TEXT, f"Content-Type: message/rfc822\r\nContent-Disposition: attachment\r\n\r\n{inner}"
        )
    )
    (only,) = received.inbound.attachments
    assert only.name == "attachment-1.eml" and not only.image
    assert b"forwarded text" in decoded(received.parts[0], 10_000)
    assert received.inbound.text == "see attached"


def test_absurd_counts_and_nesting_are_cut_short() -> None:
    many = [_part("text/plain", f'attachment; filename="f{i}.txt"', "aGk=") for i in range(500)]
    received = _received(_mime(TEXT, *many))
    assert len(received.inbound.attachments) == MAX_ATTACHMENTS
    assert received.inbound.text == "see attached"
    # A picture nested 40 multiparts deep is past what is walked: the mail is still read.
    deep = "Content-Type: text/plain\r\n\r\nhi"
    for level in range(40):
        deep = (
            f'Content-Type: multipart/mixed; boundary="n{level}"\r\n\r\n'
            f"--n{level}\r\n{deep}\r\n--n{level}--"
        )
    received = _received(_mime(TEXT, deep))
    assert received.inbound.text == "see attached" and received.inbound.attachments == ()


def test_an_answer_carries_its_pictures_after_its_text() -> None:
    answer = mail.reply(
        "bot@b.test",
        "a@a.test",
        None,
        "<r@a.test>",
        "Here: **chart**",
        (Picture("chart.png", "image/png", PNG),),
    )
    assert answer.get_body(preferencelist=("plain",)).get_content().strip() == "Here: chart"
    (picture,) = answer.iter_attachments()
    assert picture.get_filename() == "chart.png" and picture.get_content() == PNG
