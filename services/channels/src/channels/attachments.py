"""A message's attachments as the orchestrator takes them: images as data: URLs for the model's
image path (the orchestrator checks their type and size again), fetched within a size cap."""

from __future__ import annotations

import base64
import logging

from channels.contract import Channel, Inbound, PlatformRefused

log = logging.getLogger(__name__)
# The orchestrator's default CRAYFISH_IMAGE_MAX_BYTES; a bigger one is refused there anyway.
IMAGE_MAX_BYTES = 5_000_000
IMAGES_PER_MESSAGE = 4


async def images_of(channel: Channel, message: Inbound) -> tuple[list[str], list[str]]:
    """The message's images as data: URLs, and why any were left out. RetryLater propagates:
    the message stays unacknowledged and comes again."""
    urls: list[str] = []
    refused: list[str] = []
    for attachment in [a for a in message.attachments if a.image][:IMAGES_PER_MESSAGE]:
        try:
            data = await channel.fetch(attachment, IMAGE_MAX_BYTES)
        except PlatformRefused as exc:
            log.info("%s: image %s not taken: %s", channel.name, attachment.name, exc)
            refused.append(f"{attachment.name}: {exc}")
            continue
        mime = attachment.mime or "image/jpeg"
        urls.append(f"data:{mime};base64,{base64.b64encode(data).decode()}")
    return urls, refused
