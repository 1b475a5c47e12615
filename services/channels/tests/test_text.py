"""Long answers in pieces a platform accepts, and the Markdown Telegram is sent."""

from __future__ import annotations

from channels.telegram.markdown import to_html, visible_length
from channels.text import size, split_text


def test_pieces_break_between_paragraphs_and_keep_every_word() -> None:
    paragraphs = [f"p{i} " + "word " * 90 for i in range(40)]
    text = "\n\n".join(paragraphs)
    pieces = split_text(text, 1000)
    assert all(size(piece) <= 1000 for piece in pieces)
    shown = [p.strip() for piece in pieces for p in piece.split("\n\n")]
    assert shown == [p.strip() for p in paragraphs]


def test_a_paragraph_longer_than_the_limit_breaks_at_spaces() -> None:
    text = "x" * 30 + " " + "word " * 400
    pieces = split_text(text, 500)
    assert all(size(piece) <= 500 for piece in pieces)
    assert " ".join(pieces).split() == text.split()


def test_a_code_block_cut_in_two_is_closed_and_reopened() -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(200))
    pieces = split_text(f"Here:\n\n```python\n{code}\n```", 800)
    assert len(pieces) > 2
    for piece in pieces[1:]:
        assert piece.startswith("```python\n") and piece.endswith("\n```")
        assert "<pre>" in to_html(piece) or "<code" in to_html(piece)


def test_emoji_count_twice_as_telegram_counts_them() -> None:
    pieces = split_text("😀" * 3000, 4096)
    assert all(size(piece) <= 4096 for piece in pieces) and len(pieces) == 2


def test_markdown_becomes_the_html_telegram_renders() -> None:
    html = to_html("## Title\n**bold** _it_ ~~no~~ `x<y` & [a](https://e.org/a_b)\n* one")
    assert html == (
        "<b>Title</b>\n<b>bold</b> <i>it</i> <s>no</s> <code>x&lt;y</code> &amp; "
        '<a href="https://e.org/a_b">a</a>\n• one'
    )


def test_snake_case_and_arithmetic_are_not_emphasis() -> None:
    assert to_html("snake_case_name and 2*3*4") == "snake_case_name and 2*3*4"


def test_what_the_model_writes_as_tags_is_text() -> None:
    assert to_html("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert visible_length("<b>") == 3


def test_an_unclosed_code_block_is_still_code() -> None:
    assert to_html("```\nx = 1") == "<pre>x = 1</pre>"


def test_the_images_an_answer_shows_are_found_once_each_in_order() -> None:
    from channels.pictures import answer_images

    answer = "![a](https://x.test/a.png) text ![b](charts/b.png) [link](https://z.test)"
    again = " ![a again](https://x.test/a.png) ![b again](charts/b.png)"
    found = answer_images(answer + again)
    assert [image.target for image in found] == ["https://x.test/a.png", "charts/b.png"]
    assert [image.alt for image in found] == ["a", "b"]
    code = "```\n![not shown](code.png)\n```\n![data](data:image/png;base64,AA==)"
    assert answer_images(code) == []  # in code, or no file and no http(s) URL
    many = "".join(f"![{n}](chart-{n}.png)" for n in range(6))
    assert len(answer_images(many)) == 4


def test_the_chat_reads_a_workspace_image_as_its_alt_text() -> None:
    from channels.pictures import chat_text, streamed_text

    answer = "See:\n\n![the chart](charts/c.png)\n![u](https://u.test/x.png) ![](/workspace/d.png)"
    assert chat_text(answer) == "See:\n\nthe chart\n![u](https://u.test/x.png) "
    assert streamed_text("See: ![the chart](charts/c") == "See: "  # not its path, half written
    assert streamed_text("Done!") == "Done!"
