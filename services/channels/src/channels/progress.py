"""What a chat sees while its turn runs: typing until the answer is there, the answer's first
words as soon as they stream, then edits of that message at most every `every` seconds, and
the questions of commands waiting for an approval."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator

from channels.api_client import TurnEvent
from channels.contract import Channel, PlatformRefused, RetryLater
from channels.pictures import streamed_text
from channels.text import size

log = logging.getLogger(__name__)
TYPING_EVERY = 4.0  # Telegram shows "typing" for 5 s


class TurnProgress:
    """One running turn's progress in one chat; `message_id` is the streamed message, if any."""

    def __init__(self, channel: Channel, chat_id: str, every: float):
        self.channel = channel
        self.chat_id = chat_id
        self.every = every
        self.message_id: str | None = None
        self.text = ""
        self.round = -1
        self.shown = ""
        self.quiet_until = 0.0  # a 429 asked to wait: no edits until then
        self.last_edit = 0.0

    async def follow(self, events: AsyncIterator[TurnEvent]) -> int:
        """Shows the events until the stream ends; the id of the last one seen."""
        last = 0
        typing = asyncio.create_task(self._keep_typing(), name=f"typing-{self.chat_id}")
        try:
            async for event in events:
                last = max(last, event.id)
                await self._show(event)
        finally:
            typing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await typing
        return last

    async def _show(self, event: TurnEvent) -> None:
        if event.type == "assistant.delta":
            round_no = int(event.data.get("round", 0))
            if round_no != self.round:  # a new round's text replaces the last one's
                self.round, self.text = round_no, ""
            self.text += str(event.data.get("text", ""))
            await self._stream()
        elif event.type == "approval.requested":
            await self._ask_approval(event.data)

    async def _stream(self) -> None:
        now = time.monotonic()
        if not self.channel.can_edit or now < self.quiet_until or not self.text.strip():
            return
        if self.message_id is not None and now - self.last_edit < self.every:
            return
        shown = _preview(streamed_text(self.text), self.channel.text_limit)
        if shown == self.shown:
            return
        try:
            if self.message_id is None:
                self.message_id = await self.channel.send(self.chat_id, shown)
            else:
                await self.channel.edit(self.chat_id, self.message_id, shown)
            self.shown, self.last_edit = shown, time.monotonic()
        except RetryLater as exc:
            self.quiet_until = time.monotonic() + exc.retry_after
        except PlatformRefused as exc:
            log.warning("%s: streaming to %s stopped: %s", self.channel.name, self.chat_id, exc)
            self.quiet_until = float("inf")

    async def _ask_approval(self, data: dict[str, object]) -> None:
        approval = data.get("id")
        command = str(data.get("command", ""))[:500]
        text = (
            f"The assistant wants to run:\n```\n{command}\n```\n"
            f"Reply /approve {approval}, /approve {approval} always, or /deny {approval}."
        )
        try:
            await self.channel.send(self.chat_id, text)
        except (RetryLater, PlatformRefused) as exc:
            log.warning("%s: approval question not shown: %s", self.channel.name, exc)

    async def typing_once(self) -> None:
        """The chat sees typing at once: a turn may end before its status is first read."""
        try:
            await self.channel.typing(self.chat_id)
        except (RetryLater, PlatformRefused) as exc:
            log.info("%s: typing in %s: %s", self.channel.name, self.chat_id, exc)

    async def _keep_typing(self) -> None:
        while True:
            await self.typing_once()
            await asyncio.sleep(TYPING_EVERY)


def _preview(text: str, limit: int) -> str:
    """A streaming answer as one message shows it: its start, cut short of the limit."""
    text = text.strip()
    if size(text) <= limit:
        return text
    cut = text[: limit - 2]
    while size(cut) > limit - 2:  # characters outside the BMP count twice
        cut = cut[:-1]
    return cut.rstrip() + " …"
