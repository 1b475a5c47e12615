"""The web page in headless Chromium: streamed answer, folded tool call, citations, sessions."""

from __future__ import annotations

import os
from typing import Any

import pytest
from orchestrator.agent.turn_context import without_turn_context
from playwright.sync_api import expect

from devstack.launcher import LocalStack
from tests.e2e.conftest import TOKEN
from tests.fakes import FakeLLM, Reply

pytestmark = pytest.mark.slow  # starts the whole stack

SCREENSHOT = os.environ.get("CRAYFISH_E2E_SCREENSHOT")  # a path, to look at the page by hand


def _tool_output(body: dict[str, Any]) -> str:
    return [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]


def test_chat_turn_with_a_tool_call_and_a_citation(page: Any, stack: LocalStack, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("exec", {"command": "echo crayfish-$((6*7))"}))
    fake_llm.reply_with(
        lambda body: Reply(
            text=(
                f"The command printed {_tool_output(body).split()[-1]}. We chose PostgreSQL "
                "(Source: MEMORY.md#L4-L5). <b>not bold</b> **bold**\n```sh\necho hi\n```\nend"
            ),
            delay=0.4,
        )
    )
    page.goto(stack.url)
    page.fill("#input", "run the magic command")
    page.press("#input", "Enter")

    user = page.locator(".msg.user .text")
    expect(user).to_have_text("run the magic command")
    tool = page.locator("details.tool")
    expect(tool).to_have_count(1)
    expect(tool.locator(".tool-name")).to_have_text("exec")
    expect(tool.locator(".tool-args")).to_have_text("echo crayfish-$((6*7))")
    expect(tool).to_have_class("tool ok", timeout=15_000)
    assert tool.get_attribute("open") is None  # folded until clicked
    tool.locator("summary").click()
    expect(tool.locator(".tool-output")).to_contain_text("crayfish-42")

    answer = page.locator(".msg.assistant .text").last
    expect(answer).to_contain_text("The command printed crayfish-42.", timeout=15_000)
    expect(answer).to_contain_text("<b>not bold</b>")  # model text is text, never markup
    assert page.locator(".msg.assistant b").count() == 0
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator("pre.code")).to_have_text("echo hi")
    expect(page.locator("#send")).to_be_visible()  # the turn is over

    citation = answer.locator("a.citation")
    expect(citation).to_have_text("MEMORY.md#L4-L5")
    citation.click()
    viewer = page.locator("#viewer")
    expect(viewer).to_be_visible()
    expect(page.locator("#viewer-title")).to_have_text("MEMORY.md#L4-L5")
    expect(viewer.locator(".line").first).to_contain_text("PostgreSQL over MySQL", timeout=30_000)
    expect(viewer.locator(".line-no").first).to_have_text("4")
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT, full_page=True)


def test_sessions_are_listed_and_reopened(page: Any, stack: LocalStack, fake_llm: FakeLLM):
    fake_llm.reply_text("Noted: your boat is blue.")
    page.goto(stack.url)
    page.fill("#input", "remember my boat is blue")
    page.click("#send")
    expect(page.locator(".msg.assistant .text")).to_have_text("Noted: your boat is blue.")
    entry = page.locator("#sessions li", has_text="remember my boat is blue")
    expect(entry).to_have_count(1)
    expect(entry).to_have_class("active")

    page.click("#new-session")
    expect(page.locator(".msg")).to_have_count(0)
    expect(page.locator("#empty")).to_be_visible()

    entry.locator(".session-open").click()
    expect(page.locator(".msg.user .text")).to_have_text("remember my boat is blue")
    expect(page.locator(".msg.assistant .text")).to_have_text("Noted: your boat is blue.")

    fake_llm.reply_with(lambda body: Reply(text=f"{len(body['messages'])} messages of context"))
    page.fill("#input", "what colour is my boat?")
    page.press("#input", "Enter")
    expect(page.locator(".msg.assistant .text").last).to_have_text("4 messages of context")


def test_model_lists_the_presets_and_chooses_the_sessions(
    page: Any, stack: LocalStack, fake_llm: FakeLLM
):
    fake_llm.reply_forever_with(lambda body: Reply(text=f"served by {body['model']}"))
    page.goto(stack.url)
    page.fill("#input", "/model")
    page.press("#input", "Enter")
    notes = page.locator(".msg.assistant .note")
    expect(notes).to_have_text(["○ main: main-model (default)", "○ small: small-model"])
    page.fill("#input", "/model small")
    page.press("#input", "Enter")
    expect(notes.last).to_have_text("model: small")
    page.fill("#input", "hello")
    page.press("#input", "Enter")
    expect(page.locator(".msg.assistant .text").last).to_have_text("served by small-model")
    page.fill("#input", "/model")
    page.press("#input", "Enter")
    expect(notes.last).to_have_text("● small: small-model")
    page.fill("#input", "again")
    page.press("#input", "Enter")
    expect(page.locator(".msg.assistant .text").last).to_have_text("served by small-model")
    fake_llm.reply_forever_with(None)


def test_stop_cancels_a_running_turn(page: Any, stack: LocalStack, fake_llm: FakeLLM):
    fake_llm.reply_tool_calls(("exec", {"command": "sleep 30"}))
    fake_llm.reply_text("should never be asked for")
    page.goto(stack.url)
    page.fill("#input", "sleep a while")
    page.press("#input", "Enter")
    expect(page.locator("details.tool.running .tool-args")).to_have_text("sleep 30")
    page.click("#stop")
    expect(page.locator(".msg.assistant .error")).to_have_text("stopped", timeout=15_000)
    expect(page.locator("#send")).to_be_visible()
    assert fake_llm.pending == 1  # the model was never asked to go on
    while fake_llm.pending:
        fake_llm._queue.popleft()


def test_a_session_link_reopens_the_conversation(page: Any, stack: LocalStack, fake_llm: FakeLLM):
    fake_llm.reply_text("Paris it is.")
    page.goto(stack.url)
    page.fill("#input", "capital of France?")
    page.press("#input", "Enter")
    expect(page.locator(".msg.assistant .text")).to_have_text("Paris it is.")
    link = page.url
    assert "#session=" in link
    page.goto("about:blank")
    page.goto(link)
    expect(page.locator(".msg.user .text")).to_have_text("capital of France?")
    expect(page.locator(".msg.assistant .text")).to_have_text("Paris it is.")


def test_the_token_is_asked_for_once_and_kept(
    fresh_page: Any, stack: LocalStack, fake_llm: FakeLLM
):
    page = fresh_page
    page.goto(stack.url)
    expect(page.locator("#banner")).to_contain_text("API token")
    expect(page.locator("#token")).to_be_visible()  # the settings fold opened by itself
    page.fill("#token", TOKEN)
    page.click("#save-token")
    expect(page.locator("#banner")).to_be_hidden()
    fake_llm.reply_text("Authenticated hello.")
    page.fill("#input", "hi")
    page.press("#input", "Enter")
    expect(page.locator(".msg.assistant .text")).to_have_text("Authenticated hello.")
    page.reload()
    expect(page.locator("#sessions li")).not_to_have_count(0)
    expect(page.locator("#banner")).to_be_hidden()


MARKDOWN_ANSWER = """## Plan
1. Read `notes.md` (see MEMORY.md#L4-L5)
2. Write the *summary*
   - keep it **short**
- loose item

| tool | runs in |
|---|---|
| exec | the sandbox |

> quoted [docs](https://example.org/docs) and [bad](javascript:alert(1)) <script>alert(1)</script>
---
Plain ~~old~~ line
```
code <i>raw</i>
```"""


def test_answers_render_markdown_as_nodes_never_as_html(
    page: Any, stack: LocalStack, fake_llm: FakeLLM
):
    fake_llm.reply_text(MARKDOWN_ANSWER)
    page.goto(stack.url)
    page.fill("#input", "plan it")
    page.press("#input", "Enter")
    answer = page.locator(".msg.assistant .text").last
    expect(answer.locator("h2")).to_have_text("Plan", timeout=15_000)
    steps = answer.locator("ol > li")
    expect(steps).to_have_count(2)
    expect(steps.first.locator("code")).to_have_text("notes.md")
    expect(steps.first.locator("a.citation")).to_have_text("MEMORY.md#L4-L5")
    expect(steps.nth(1).locator("em")).to_have_text("summary")
    expect(steps.nth(1).locator("ul > li strong")).to_have_text("short")  # nested list
    expect(answer.locator(":scope > ul > li")).to_have_text("loose item")
    expect(answer.locator("table th")).to_have_text(["tool", "runs in"])
    expect(answer.locator("table td")).to_have_text(["exec", "the sandbox"])
    quote = answer.locator("blockquote")
    expect(quote.locator("a.external")).to_have_attribute("href", "https://example.org/docs")
    expect(quote.locator("a.external")).to_have_attribute("rel", "noopener noreferrer")
    expect(quote).to_contain_text("[bad](javascript:alert(1))")  # not a link: shown as text
    expect(quote).to_contain_text("<script>alert(1)</script>")
    assert page.locator(".msg.assistant script, .msg.assistant i").count() == 0
    expect(answer.locator("hr")).to_have_count(1)
    expect(answer.locator("del")).to_have_text("old")
    expect(answer.locator("pre.code")).to_have_text("code <i>raw</i>")
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT.replace(".png", "") + "-markdown.png", full_page=True)


def test_a_notification_shows_and_an_attached_image_reaches_the_model(
    page: Any, stack: LocalStack, fake_llm: FakeLLM, tmp_path: Any
):
    fake_llm.reply_tool_calls(("notify", {"text": "the disk is 93% full", "title": "disk check"}))
    fake_llm.reply_text("I told you about the disk.")
    page.goto(stack.url)
    page.fill("#input", "check the disk")
    page.press("#input", "Enter")
    note = page.locator("#notifications .notification")
    expect(note).to_have_count(1, timeout=15_000)
    expect(note.locator(".notification-title")).to_have_text("disk check")
    expect(note.locator(".notification-text")).to_have_text("the disk is 93% full")
    note.locator(".notification-close").click()
    expect(note).to_have_count(0)
    expect(page.locator("#send")).to_be_visible(timeout=15_000)

    picture = tmp_path / "pixel.gif"
    picture.write_bytes(b"GIF89a" + b"\x00" * 20)
    fake_llm.reply_text("A tiny GIF.")
    page.set_input_files("#image-file", str(picture))
    expect(page.locator("#attachment")).to_be_visible()
    page.fill("#input", "what is this?")
    page.press("#input", "Enter")
    expect(page.locator(".msg.user img.thumb")).to_have_count(1)
    expect(page.locator(".msg.assistant .text").last).to_contain_text("A tiny GIF.", timeout=15_000)
    assert page.locator("#attachment").is_hidden()
    parts = fake_llm.last_request["messages"][-1]["content"]
    assert without_turn_context(parts[0]["text"]) == "what is this?"
    assert parts[1]["image_url"]["url"].startswith("data:image/gif;base64,R0lGODlh")


WIDER_THAN_SHOWN = """() => {
  const boxes = [document.documentElement, document.body, ...document.querySelectorAll(
    "main, #messages, #composer, #sidebar")];
  const wide = boxes.filter((box) => box.scrollWidth > Math.min(box.clientWidth, innerWidth));
  return [innerWidth, document.documentElement.scrollWidth,
          ...wide.map((box) => `${box.id || box.tagName}: ${box.scrollWidth}`)];
}"""


def assert_no_sideways_scroll(page: Any) -> None:
    """Nothing is wider than the screen: neither the page nor the conversation scrolls sideways
    (tables and code blocks scroll inside their own boxes)."""
    screen, page_width, *too_wide = page.evaluate(WIDER_THAN_SHOWN)
    assert page_width <= screen and not too_wide, (screen, page_width, too_wide)


def test_on_a_phone_the_menu_holds_the_sessions_and_new_chat(
    phone_page: Any, stack: LocalStack, fake_llm: FakeLLM
):
    page = phone_page
    page.goto(stack.url)
    menu, sidebar = page.locator("#menu"), page.locator("#sidebar")
    expect(menu).to_be_visible()
    expect(sidebar).to_be_hidden()  # the page has the whole width
    expect(menu).to_have_attribute("aria-expanded", "false")
    fake_llm.reply_text("A long word: " + "crayfish" * 30 + "\n\n" + MARKDOWN_ANSWER)
    page.fill("#input", "first phone chat")
    page.locator("#send").tap()
    expect(page.locator(".msg.assistant table")).to_be_visible(timeout=15_000)
    assert_no_sideways_scroll(page)  # a long word, a table, a code block

    menu.tap()
    expect(sidebar).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(page.locator("#new-session")).to_be_focused()
    expect(page.locator("#settings summary")).to_be_visible()  # the token entry is there too
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT.replace(".png", "") + "-phone-menu.png")
    first = page.locator("#sessions li", has_text="first phone chat")
    expect(first).to_have_class("active")
    assert_no_sideways_scroll(page)
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(menu).to_be_focused()

    menu.tap()
    page.locator("#new-session").tap()
    expect(sidebar).to_be_hidden()
    expect(page.locator(".msg")).to_have_count(0)
    fake_llm.reply_text("A new chat from the phone.")
    page.fill("#input", "second phone chat")
    page.locator("#send").tap()
    expect(page.locator(".msg.assistant .text")).to_have_text("A new chat from the phone.")
    assert len(fake_llm.last_request["messages"]) == 2  # a new session: no earlier turns

    menu.tap()
    expect(page.locator("#sessions li", has_text="second phone chat")).to_have_class("active")
    first.locator(".session-open").tap()  # tapping a session opens it and closes the menu
    expect(sidebar).to_be_hidden()
    expect(page.locator(".msg.user .text")).to_have_text("first phone chat")
    assert_no_sideways_scroll(page)
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT.replace(".png", "") + "-phone.png")


def test_on_a_phone_the_token_is_asked_for_in_the_menu(
    fresh_phone_page: Any, stack: LocalStack, fake_llm: FakeLLM
):
    page = fresh_phone_page
    page.goto(stack.url)
    expect(page.locator("#banner")).to_contain_text("API token")
    expect(page.locator("#sidebar")).to_be_visible()  # the menu opened by itself
    expect(page.locator("#menu")).to_have_attribute("aria-expanded", "true")
    page.fill("#token", TOKEN)
    page.locator("#save-token").tap()
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.locator("#banner")).to_be_hidden()
    fake_llm.reply_text("Hello, phone.")
    page.fill("#input", "hi")
    page.locator("#send").tap()
    expect(page.locator(".msg.assistant .text")).to_have_text("Hello, phone.")


def test_on_a_phone_the_usage_view_charts_30_days(
    phone_page: Any, stack: LocalStack, fake_llm: FakeLLM
):
    page = phone_page
    page.goto(stack.url)
    fake_llm.reply_text("Counted.")
    page.fill("#input", "count this turn")
    page.locator("#send").tap()
    expect(page.locator(".msg.assistant .text")).to_have_text("Counted.")
    page.locator("#menu").tap()
    page.locator("#usage summary").tap()
    bars = page.locator("#usage-body svg.usage-chart rect.bar")
    expect(bars).to_have_count(30)
    today = bars.last
    assert float(today.get_attribute("height") or 0) > 0  # today's turn is drawn
    today.tap()
    expect(page.locator("#usage-day")).to_contain_text(" tokens in ")
    expect(page.locator(".usage-caps")).to_contain_text("no cap")
    assert_no_sideways_scroll(page)
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT.replace(".png", "") + "-phone-usage.png")
