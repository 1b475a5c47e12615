"""Images a tool leaves in the workspace (`browser_screenshot`'s PNG in inbox/, or any tool result
whose data has `image: {"path": ...}`): read as hostile input, stored in the media store, and shown
to a model with vision as a user message after the tool results; otherwise the tool result says
where the image was saved and why the model does not see it."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crayfish_common.safe_files import FileRefused, SafeRoot
from crayfish_common.tools import ToolResult

from orchestrator.content.media import MediaStore, for_llm, sniff

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolImage:
    """What became of one tool result's image: the note its result gets, and the image
    reference to show (None: not shown)."""

    note: str
    ref: dict[str, Any] | None = None


class ToolImages:
    """Takes the images tool results name from the workspace, never following a link out of it
    (a sandboxed command may have put a link, FIFO, device or huge file at the path)."""

    def __init__(self, workspace: Path, media: MediaStore, vision: bool):
        self.root = SafeRoot(workspace)
        self.media = media
        self.vision = vision

    async def attach(self, calls: list[tuple[str, str, ToolResult]]) -> list[dict[str, Any]]:
        """For each (tool name, call id, result) whose data names an image: a note at the end of
        its output; returns the user message showing the images taken ([] if none)."""
        parts: list[dict[str, Any]] = []
        for name, call_id, result in calls:
            image = result.data.get("image") if isinstance(result.data, dict) else None
            if image is None:
                continue
            taken = await self.take(image)
            result.output = f"{result.output}\n\n{taken.note}" if result.output else taken.note
            if taken.ref is not None:
                path = image["path"]
                text = f"[Crayfish] The image {name} saved to {path} (call {call_id}):"
                parts += [{"type": "text", "text": text}, taken.ref]
        return [{"role": "user", "content": parts}] if parts else []

    async def for_llm(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages as the model takes them (image references as image parts)."""
        return await for_llm(messages, self.media, self.vision)

    async def take(self, image: Any) -> ToolImage:
        path = image.get("path") if isinstance(image, dict) else None
        if not isinstance(path, str) or not path:
            return ToolImage("[the tool named an image without a path: not shown]")
        if not self.vision:
            return ToolImage(
                f"[image saved to {path} in the workspace; not shown: the model takes no images]"
            )
        try:
            ref = await asyncio.to_thread(self._store, path)
        except FileRefused as exc:
            log.warning("tool image %s refused: %s", path, exc)
            return ToolImage(f"[image {path} not shown: {_why(exc)}]")
        except OSError as exc:
            log.warning("tool image %s not stored: %s", path, exc)
            return ToolImage(f"[image {path} not shown: it could not be stored ({exc.strerror})]")
        if ref is None:
            return ToolImage(f"[image {path} not shown: it is not a PNG, JPEG, GIF or WebP image]")
        return ToolImage(f"[image {path} is shown in the next message]", ref)

    def _store(self, path: str) -> dict[str, Any] | None:
        """The stored image's reference; None if the file is no image (by its content)."""
        data = self.root.read_bytes(path, self.media.max_bytes)
        if sniff(data) is None:
            return None
        ref = self.media.save(data)
        self.media.prune({ref["path"]})
        return ref


def _why(exc: FileRefused) -> str:
    """A refusal in the model's words (the path is already in the note)."""
    if exc.kind == "missing":
        return "there is no such file in the workspace"
    if exc.kind == "too_large":
        return "it is larger than the image limit (CRAYFISH_IMAGE_MAX_BYTES)"
    return f"it was refused ({exc})"
