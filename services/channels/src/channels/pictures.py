"""The images an answer shows, sent to the chat after its text: an http(s) one as its URL (for
platforms that fetch images), a workspace one (`![a chart](charts/chart.png)`) as its bytes,
which the orchestrator serves only to the channel that delivers an answer showing it. The
chat's text holds a workspace image's alt text instead of its link (a folder it cannot see)."""

from __future__ import annotations

import asyncio
import functools
import logging
import posixpath
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from crayfish_common.markdown_images import ShownImage, shown_images, without_workspace_images

from channels.api_client import OrchestratorClient, OrchestratorError, OrchestratorUnreachable
from channels.attempts import GaveUp
from channels.contract import Channel, Picture, PlatformRefused

log = logging.getLogger(__name__)
IMAGES_PER_ANSWER = 4
UNFINISHED_IMAGE = re.compile(r"!\[[^\]\n]*(\]\([^)\n]*)?$")
FETCH_RETRY = 2.0  # seconds between attempts to fetch an image while the orchestrator is away
# Why the orchestrator did not give an image, as the chat is told (by HTTP status).
REFUSED = {
    404: "it is not in the workspace",
    413: "it is too large",
    415: "it is not a PNG, JPEG, GIF or WebP image",
    422: "it was refused",
}
Attempt = Callable[[Callable[[], Awaitable[object]]], Awaitable[None]]
NOT_SHOWN = (GaveUp, PlatformRefused, OrchestratorError, OrchestratorUnreachable)


def answer_images(markdown: str) -> list[ShownImage]:
    """The images to send: http(s) and workspace ones, in order, each once, at most four."""
    chosen: dict[str, ShownImage] = {}
    for image in shown_images(markdown):
        if (image.remote or image.in_workspace) and image.target not in chosen:
            chosen[image.target] = image
    return list(chosen.values())[:IMAGES_PER_ANSWER]


def chat_text(markdown: str) -> str:
    """The answer as the chat shows it: workspace images as their alt text."""
    return without_workspace_images(markdown)


def streamed_text(markdown: str) -> str:
    """A streaming answer as the chat shows it so far: `chat_text`, less an image link still
    being written at its end (its path would show until the link is complete)."""
    return UNFINISHED_IMAGE.sub("", chat_text(markdown))


@dataclass
class Attached:
    """The pictures to attach to an answer, and the workspace images that could not be had
    (with why), told in the chat after it."""

    pictures: list[Picture] = field(default_factory=list)
    missing: list[tuple[ShownImage, str]] = field(default_factory=list)


class Pictures:
    """Sends the images an answer shows; `attempt` retries a platform call (Replies')."""

    def __init__(
        self, channel: Channel, api: OrchestratorClient, attempt: Attempt, fetch_attempts: int
    ):
        self.channel = channel
        self.api = api
        self.attempt = attempt
        self.fetch_attempts = fetch_attempts

    async def send(
        self, chat_id: str, markdown: str, task_id: str = "", message_id: int = 0
    ) -> None:
        """Each image the text (the answer of `task_id`, or the message `message_id`) shows;
        one that fails is logged, and a workspace one (the text no longer holds its link)
        is followed by a short note in the chat."""
        for image in answer_images(markdown):
            try:
                picture = await self._picture(image, task_id, message_id)
                await self.attempt(functools.partial(self.channel.send_image, chat_id, picture))
            except NOT_SHOWN as exc:  # one image never stops the others
                log.info("%s: image %s not shown: %s", self.channel.name, image.target[:200], exc)
                if image.in_workspace:
                    await self._tell(chat_id, image, _why(exc))

    async def attached(self, markdown: str, task_id: str) -> Attached:
        """For a channel that attaches pictures to the answer (`attaches_pictures`): the
        workspace images' bytes. An http(s) image stays a link in the text: this service
        never fetches a URL a model wrote."""
        found = Attached()
        for image in answer_images(markdown):
            if not image.in_workspace:
                continue
            try:
                found.pictures.append(await self._picture(image, task_id, 0))
            except (OrchestratorError, OrchestratorUnreachable) as exc:
                log.info("%s: image %s not had: %s", self.channel.name, image.target[:200], exc)
                found.missing.append((image, _why(exc)))
        return found

    async def tell_missing(self, chat_id: str, attached: Attached) -> None:
        for image, why in attached.missing:
            await self._tell(chat_id, image, why)

    async def _picture(self, image: ShownImage, task_id: str, message_id: int) -> Picture:
        name = posixpath.basename(image.target.rstrip("/"))[:100] or "image"
        if image.remote:
            return Picture(name, url=image.target)
        for attempt in range(1, self.fetch_attempts + 1):
            try:
                data, mime = await self.api.answer_image(
                    self.channel.name, image.target, task_id, message_id
                )
                return Picture(name, mime.split(";")[0].strip(), data)
            except OrchestratorUnreachable:
                if attempt == self.fetch_attempts:
                    raise
                await asyncio.sleep(FETCH_RETRY)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _tell(self, chat_id: str, image: ShownImage, why: str) -> None:
        label = image.alt or posixpath.basename(image.target)
        try:
            await self.attempt(
                lambda: self.channel.send(chat_id, f"⚠️ The image “{label}” is not shown: {why}.")
            )
        except (GaveUp, PlatformRefused) as exc:
            log.warning("%s: note on image %s not sent: %s", self.channel.name, label, exc)


def _why(exc: Exception) -> str:
    if isinstance(exc, OrchestratorError):
        return REFUSED.get(exc.status, "the assistant could not read it")
    if isinstance(exc, OrchestratorUnreachable):
        return "the assistant did not answer"
    if isinstance(exc, PlatformRefused):
        return str(exc)[:200] or "the platform refused it"
    return "the platform did not take it in time"
