"""Workspace images an answer shows (`![a chart](charts/chart.png)`), read for the chat channel
that delivers the answer: only a path the answer shows as an image, beneath the workspace (as
the sandbox shows it too: `/workspace/...`), a regular file within CRAYFISH_IMAGE_MAX_BYTES
whose bytes are a PNG, JPEG, GIF or WebP image. The file is hostile input: a sandboxed command
may have put a link, FIFO, device or anything else at the path."""

from __future__ import annotations

import asyncio
from pathlib import Path

from crayfish_common.markdown_images import workspace_paths
from crayfish_common.safe_files import FileRefused, SafeRoot

from orchestrator.approvals.programs import SANDBOX_ROOT
from orchestrator.content.media import sniff
from orchestrator.store.channels import ChannelStore

# A reply or message still owed or delivered: a failed one is not sent again.
SENDING = ("pending", "delivered")


class AnswerImageRefused(Exception):
    """An image not served. `kind`: not_shown (the answer shows no such image), missing,
    too_large, not_image (its bytes are no image), refused (a link out of the workspace, a
    FIFO, device or hard-linked file, a path that is no file name)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


class AnswerImages:
    def __init__(self, channels: ChannelStore, workspace: Path, max_bytes: int):
        self.channels = channels
        self.root = SafeRoot(workspace, aliases=(SANDBOX_ROOT,))
        self.max_bytes = max_bytes

    async def of_reply(self, channel: str, task_id: str, path: str) -> tuple[bytes, str]:
        """An image the answer of a turn shows whose reply `channel` owes or delivered."""
        replies = await self.channels.replies(channel, None, task_id)
        answers = [
            r.result for r in replies if r.status in SENDING and r.task_status == "completed"
        ]
        if not answers or not answers[0]:
            raise AnswerImageRefused(f"{channel} owes no answer of task {task_id!r}", "not_shown")
        return await self.read(answers[0], path)

    async def of_message(self, channel: str, message_id: int, path: str) -> tuple[bytes, str]:
        """An image a message (a notification) `channel` owes or delivered shows."""
        message = await self.channels.message(channel, message_id)
        if message is None or message.status not in SENDING:
            raise AnswerImageRefused(f"{channel} owes no message {message_id}", "not_shown")
        return await self.read(message.text, path)

    async def read(self, answer: str, path: str) -> tuple[bytes, str]:
        """The image's bytes and its type (by its content); AnswerImageRefused."""
        if path not in workspace_paths(answer):
            raise AnswerImageRefused(f"the answer shows no image {path!r}", "not_shown")
        try:
            data = await asyncio.to_thread(self.root.read_bytes, path, self.max_bytes)
        except FileRefused as exc:
            raise AnswerImageRefused(str(exc), _KINDS.get(exc.kind, "refused")) from exc
        mime = sniff(data)
        if mime is None:
            message = f"{path}: not a PNG, JPEG, GIF or WebP image"
            raise AnswerImageRefused(message, "not_image")
        return data, mime


_KINDS = {
    "missing": "missing",
    "too_large": "too_large",
}
