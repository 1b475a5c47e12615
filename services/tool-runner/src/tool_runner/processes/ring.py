"""A bounded byte buffer addressed by absolute offsets: the output of one background process."""

from __future__ import annotations


class RingBuffer:
    """Keeps the last `capacity` bytes written; offsets count every byte ever written."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._data = bytearray()
        # Absolute offset of the first byte still kept.
        self.start = 0

    @property
    def end(self) -> int:
        """Absolute offset just past the last byte written (the total ever written)."""
        return self.start + len(self._data)

    def append(self, data: bytes) -> None:
        self._data += data
        over = len(self._data) - self.capacity
        if over > 0:
            del self._data[:over]
            self.start += over

    def read(self, offset: int, limit: int) -> tuple[bytes, int]:
        """Up to `limit` bytes from `offset` (moved up to the oldest byte kept when it was
        dropped); returns them and the offset they really start at."""
        offset = max(offset, self.start)
        begin = offset - self.start
        return bytes(self._data[begin : begin + max(limit, 0)]), offset

    def tail(self, limit: int) -> bytes:
        return bytes(self._data[-limit:]) if limit > 0 else b""
