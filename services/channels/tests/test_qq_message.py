"""OneBot v11 messages in both formats, and Markdown as the plain text QQ shows."""

from __future__ import annotations

from channels.qq.message import parse, plain_text

BOT = "3890001"


def test_the_string_format_reads_cq_codes_and_unescapes_text() -> None:
    said = parse(f"[CQ:reply,id=42][CQ:at,qq={BOT}] is &#91;x&#93; &amp; y?", BOT)
    assert said.text == "is [x] & y?"
    assert said.mentions == {BOT} and said.reply_to == "42"


def test_the_array_format_keeps_others_mentions_as_names_and_drops_the_bots() -> None:
    message = [
        {"type": "at", "data": {"qq": BOT}},
        {"type": "text", "data": {"text": " ask "}},
        {"type": "at", "data": {"qq": "777", "name": "Bob"}},
        {"type": "image", "data": {"file": "a.png"}},
    ]
    said = parse(message, BOT)
    assert said.text == "ask @Bob" and said.mentions == {BOT, "777"} and said.reply_to == ""


def test_markdown_becomes_plain_text_with_link_addresses() -> None:
    shown = plain_text("## Title\n**bold** `a < b` [site](https://x.org/?a=1&b=2)\n```\n<tag>\n```")
    assert shown == "Title\nbold a < b site (https://x.org/?a=1&b=2)\n<tag>"


def test_images_and_files_become_attachments_in_either_format() -> None:
    from channels.qq.files import attachments

    url = "https://multimedia.nt.qq.com.cn/download?appid=1407&amp;fileid=abc&#44;1"
    said = parse(f"[CQ:image,file=A1B2.png,url={url},file_size=69]look", BOT)
    array = parse(
        [{"type": "file", "data": {"file": "q3.pdf", "file_id": "/f1", "file_size": "17"}}], BOT
    )
    image, file = attachments(said.media) + attachments(array.media)
    assert said.text == "look"
    assert (image.ref, image.name, image.mime, image.size, image.image) == (
        "https://multimedia.nt.qq.com.cn/download?appid=1407&fileid=abc,1",
        "A1B2.png",
        "image/png",
        69,
        True,
    )
    assert (file.ref, file.name, file.mime, file.size, file.image) == (
        "/f1",
        "q3.pdf",
        "application/pdf",
        17,
        False,
    )
