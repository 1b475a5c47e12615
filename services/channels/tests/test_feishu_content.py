"""Feishu message content as text and attachments: text, post (rich text), image, file."""

from __future__ import annotations

import json

from channels.feishu.content import content_of, resource_of


def test_a_post_gives_its_text_links_mentions_and_images() -> None:
    post = {
        "title": "Report",
        "content": [
            [
                {"tag": "at", "user_id": "@_user_1", "user_name": "Bot"},
                {"tag": "text", "text": " see "},
                {"tag": "a", "text": "docs", "href": "https://x.org"},
            ],
            [{"tag": "img", "image_key": "img_v3_1"}],
            [{"tag": "code_block", "language": "PYTHON", "text": "print(1)"}],
            [{"tag": "emotion", "emoji_type": "SMILE"}],
        ],
    }
    said = content_of("post", json.dumps(post), "om_9")
    assert said is not None
    assert said.text == "Report\n@_user_1 see [docs](https://x.org)\n```python\nprint(1)\n```"
    assert [(a.ref, a.image) for a in said.attachments] == [("om_9/image/img_v3_1", True)]


def test_a_post_wrapped_in_a_language_reads_the_same() -> None:
    post = {"zh_cn": {"title": "", "content": [[{"tag": "text", "text": "hi"}]]}}
    said = content_of("post", json.dumps(post), "om_1")
    assert said is not None and said.text == "hi"


def test_image_and_file_messages_are_attachments_naming_their_resource() -> None:
    image = content_of("image", '{"image_key": "img_v3_2"}', "om_2")
    file = content_of("file", '{"file_key": "file_v3_3", "file_name": "q3.csv"}', "om_3")
    assert image is not None and file is not None
    assert resource_of(image.attachments[0].ref) == ("om_2", "image", "img_v3_2")
    assert (file.attachments[0].name, file.attachments[0].mime) == ("q3.csv", "text/csv")
    assert resource_of(file.attachments[0].ref) == ("om_3", "file", "file_v3_3")


def test_what_the_channel_does_not_read_is_none() -> None:
    assert content_of("sticker", '{"file_key": "x"}', "om_4") is None
    assert content_of("text", "not json", "om_5") is None
    assert content_of("image", "{}", "om_6") is None
