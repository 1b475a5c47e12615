"""A command's captured output: the first and last bytes of a stream, with a count of the rest.

Hand-written, not `crayfish_common.textcap`: that caps a finished text, this keeps bytes of a
stream of unknown length in bounded memory as they arrive.
"""

from __future__ import annotations

HEAD_SHARE = 0.5  # as much of the end as of the beginning: errors are often printed last


class HeadTail:
    """Keeps the first and last bytes of a stream of unknown length, counting the rest."""

    def __init__(self, limit: int):
        self.head_limit = int(limit * HEAD_SHARE)
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.truncated:
            return head + self.tail.decode("utf-8", "replace")
        omitted = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", "replace")
        return f"{head}\n... [{omitted} bytes omitted] ...\n{tail}"
