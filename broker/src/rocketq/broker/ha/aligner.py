"""Keeps a slave's CommitLog appends on record boundaries.

A master cuts its CommitLog into transfers of at most ``haTransferBatchSize`` bytes wherever the
batch size falls, usually inside a record.  If a slave appended a half record and was then killed,
its recovery could mistake the half record followed by zeros for a complete one (the length fields
are there; only a body CRC check would notice) and report an offset past bytes it never received.
So the slave appends only whole records: :class:`RecordAligner` holds the bytes of an incomplete
record back until the rest arrives.  The one exception is the blank end-of-file filler, whose
8-byte header claims the rest of the segment: the filler's bytes are zeros on both sides, so they
are passed through as they come.  Headers are checked as they go by (magic, a size that fits the
segment): bytes that are no CommitLog raise :class:`HAProtocolError` before anything is appended.
"""

from __future__ import annotations

from rocketq.broker.ha.protocol import HAProtocolError
from rocketq.client.remoting.record_layout import (
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_LENGTH,
    MAGIC_V1,
    MAGIC_V2,
    SIZE_MAGIC,
)

__all__ = ["RecordAligner"]

_RECORD_MAGICS = frozenset({MAGIC_V1, MAGIC_V2})


class RecordAligner:
    """Turns a contiguous stream of CommitLog bytes starting at ``offset`` into whole-record runs."""

    def __init__(self, offset: int, segment_size: int) -> None:
        self.offset = offset  # CommitLog offset of the first byte not handed out yet
        self.segment_size = segment_size
        self._pending = bytearray()
        self._blank_left = 0  # bytes of a blank filler still to pass through

    @property
    def pending(self) -> int:
        """Bytes received but held back (an incomplete record)."""
        return len(self._pending)

    @property
    def received_end(self) -> int:
        """The CommitLog offset after the last byte received."""
        return self.offset + len(self._pending)

    def feed(self, data: bytes | bytearray | memoryview) -> bytes:
        """Add ``data`` (the bytes at :attr:`received_end`); return the prefix to append now."""
        self._pending += data
        buf = self._pending
        p = 0
        seg_pos = self.offset % self.segment_size
        while p < len(buf):
            if self._blank_left:
                n = min(self._blank_left, len(buf) - p)
                p += n
                seg_pos = (seg_pos + n) % self.segment_size
                self._blank_left -= n
                continue
            if len(buf) - p < SIZE_MAGIC.size:
                break
            total, magic = SIZE_MAGIC.unpack_from(buf, p)
            remaining = self.segment_size - seg_pos
            if magic == BLANK_MAGIC and total == remaining:
                self._blank_left = total
                continue
            if (
                magic not in _RECORD_MAGICS
                or not SIZE_MAGIC.size < total <= remaining - END_FILE_MIN_BLANK_LENGTH
            ):
                raise HAProtocolError(
                    f"no CommitLog record at offset {self.offset + p} (size {total}, magic {magic:#010x}, "
                    f"{remaining} bytes left in the segment)",
                    position=self.offset + p,
                    found=bytes(buf[p : p + 16]),
                )
            if len(buf) - p < total:
                break
            p += total
            seg_pos += total
        out = bytes(buf[:p])
        del buf[:p]
        self.offset += p
        return out
