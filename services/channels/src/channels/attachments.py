"""A message's attachments as the orchestrator takes them: images as data: URLs for the model's
image path (the orchestrator checks their type and size again), other files as base64 for the
workspace's inbox/; each fetched within a size cap."""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field

from channels.contract import Channel, Inbound, PlatformRefused

log = logging.getLogger(__name__)
IMAGES_PER_MESSAGE = 4
FILES_PER_MESSAGE = 4
# The orchestrator takes request bodies up to CRAYFISH_MAX_BODY_BYTES (1 MB by default), and
# base64 grows a file by a third.
FILE_MAX_BYTES = 700_000


@dataclass
class Taken:
    images: list[str] = field(default_factory=list)  # data: URLs
    files: list[dict[str, str]] = field(default_factory=list)  # {name, data (base64)}
    refused: list[str] = field(default_factory=list)  # why an attachment was left out


async def attachments_of(channel: Channel, message: Inbound) -> Taken:
    """The message's images and files, and why any were left out. RetryLater propagates: the
    message stays unacknowledged and comes again."""
    taken = Taken()
    images = [a for a in message.attachments if a.image][:IMAGES_PER_MESSAGE]
    files = [a for a in message.attachments if not a.image][:FILES_PER_MESSAGE]
    for attachment in images + files:
        try:
            data = await channel.fetch(attachment, FILE_MAX_BYTES)
        except PlatformRefused as exc:
            log.info("%s: %s not taken: %s", channel.name, attachment.name, exc)
            taken.refused.append(f"{attachment.name}: {exc}")
            continue
        encoded = base64.b64encode(data).decode()
        if attachment.image:
            taken.images.append(f"data:{attachment.mime or 'image/jpeg'};base64,{encoded}")
        else:
            taken.files.append({"name": attachment.name, "data": encoded})
    return taken
