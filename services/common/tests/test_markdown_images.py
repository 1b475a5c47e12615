"""What counts as an image a Markdown text shows: the orchestrator serves a workspace file only
for such a link, and the channels service sends only those."""

from __future__ import annotations

from crayfish_common.markdown_images import (
    shown_images,
    without_workspace_images,
    workspace_paths,
)


def test_each_way_of_writing_an_image_link_is_found_with_its_alt_text() -> None:
    text = (
        '![a](charts/a.png) ![b](<my charts/b.png>) ![c](./c.png "a title") '
        "![](/workspace/d.png) ![e](https://x.test/e.png) [not an image](f.png)"
    )
    found = [(image.alt, image.target) for image in shown_images(text)]
    assert found == [
        ("a", "charts/a.png"),
        ("b", "my charts/b.png"),
        ("c", "./c.png"),
        ("", "/workspace/d.png"),
        ("e", "https://x.test/e.png"),
    ]
    assert workspace_paths(text) == {
        "charts/a.png",
        "my charts/b.png",
        "./c.png",
        "/workspace/d.png",
    }


def test_urls_of_other_schemes_are_no_workspace_files() -> None:
    text = "![d](data:image/png;base64,AA==) ![f](file:///etc/passwd) ![g](//host/g.png)"
    assert [image.in_workspace for image in shown_images(text)] == [False, False, False]
    assert workspace_paths(text) == set()


def test_a_link_in_a_fenced_code_block_shows_nothing() -> None:
    text = "How to:\n```md\n![chart](charts/a.png)\n```\nand unclosed:\n~~~\n![x](x.png)"
    assert shown_images(text) == []
    assert without_workspace_images(text) == text


def test_the_reader_sees_a_workspace_image_as_its_alt_text() -> None:
    text = "Chart: ![the chart](charts/a.png)!\n![web](https://x.test/w.png)"
    assert without_workspace_images(text) == "Chart: the chart!\n![web](https://x.test/w.png)"
