"""Markdown as Slack's mrkdwn: formatting converted, and nothing the model writes becomes a
mention, a broadcast or a link it did not write as one."""

from __future__ import annotations

from channels.slack.mrkdwn import to_mrkdwn


def test_emphasis_code_and_links_become_mrkdwn() -> None:
    markdown = "**bold**, *italic*, ~~gone~~, `x*y`, [docs](https://example.org/a_b)"
    assert to_mrkdwn(markdown) == "*bold*, _italic_, ~gone~, `x*y`, <https://example.org/a_b|docs>"


def test_headings_bullets_quotes_and_code_blocks() -> None:
    markdown = "## Steps\n- one\n  * two\n> said\n```python\nif a < b:\n    pass\n```"
    assert to_mrkdwn(markdown) == (
        "*Steps*\n• one\n  • two\n> said\n```\nif a &lt; b:\n    pass\n```"
    )


def test_control_sequences_are_escaped_not_sent() -> None:
    shown = to_mrkdwn("<!channel> hi <@U123> & <https://evil.example|click>")
    assert "<" not in shown and ">" not in shown
    assert shown == "&lt;!channel&gt; hi &lt;@U123&gt; &amp; &lt;https://evil.example|click&gt;"


def test_an_unclosed_code_block_is_still_code() -> None:
    assert to_mrkdwn("look:\n```\n**not bold**") == "look:\n```\n**not bold**\n```"
