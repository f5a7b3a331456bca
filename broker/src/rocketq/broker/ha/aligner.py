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
The walk also yields where each record starts, so that the slave can describe what it appends to
dispatch (:mod:`.replica_hints`) without walking the records a second time.
"""

from __future__ import annotations

import numpy as np

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
        chunk = self.feed_records(data)[0]
        return chunk if isinstance(chunk, bytes) else bytes(chunk)

    def feed_records(
        self, data: bytes | bytearray | memoryview, *more: bytes | bytearray | memoryview
    ) -> tuple[bytes | memoryview, list[int]]:
        """:meth:`feed`, plus the positions in the returned bytes where its records start (blank
        fillers excluded).  ``more``: further bytes that follow ``data`` (the payloads of several
        transfers, without joining them first)."""
        # nothing held back: walk the parts in place, joined with one copy if there are several
        # (none for one ``bytes``); the records are handed out as a view of them, only an
        # incomplete tail is copied to be held back
        buf: bytes | bytearray = self._pending
        direct = not buf
        if direct:
            buf = data if not more and isinstance(data, bytes) else b"".join((data, *more))
        else:
            self._pending += data
            for part in more:
                self._pending += part
        starts: list[int] = []
        p = 0
        seg_pos = self.offset % self.segment_size
        while p < len(buf):
            if self._blank_left:
                n = min(self._blank_left, len(buf) - p)
                p += n
                seg_pos = (seg_pos + n) % self.segment_size
                self._blank_left -= n
                continue
            q = _walk(buf, p, p + self.segment_size - seg_pos, starts)
            seg_pos += q - p
            p = q
            if len(buf) - p < SIZE_MAGIC.size:
                break
            # what stopped the walk: a blank filler, a partial record, or bytes that are no record
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
            starts.append(p)
            p += total
            seg_pos += total
        out: bytes | memoryview
        if direct:
            out = buf if isinstance(buf, bytes) and p == len(buf) else memoryview(buf)[:p]
            self._pending += memoryview(buf)[p:]
        else:
            out = bytes(buf[:p])
            del self._pending[:p]
        self.offset += p
        return out, starts


def _walk(buf: bytes | bytearray, p: int, seg_end: int, starts: list[int]) -> int:
    """The hot loop of :meth:`RecordAligner.feed_records`: from ``p``, append the starts of the
    complete, well-formed records that end before ``seg_end`` (less the room an end-of-file marker
    needs); returns where it stopped, for the caller to look at what is there.

    A master's batch is usually a run of records of one size (same body and property lengths), so
    when the next record has the size of the last one, the walk checks the headers of as many
    following records of that size as fit with one numpy comparison (:func:`_same_size_run`); it
    steps through the others one by one.
    """
    unpack = SIZE_MAGIC.unpack_from
    append = starts.append
    magics = _RECORD_MAGICS
    n = len(buf)
    end_max = min(n, seg_end - END_FILE_MIN_BLANK_LENGTH)
    while p <= n - SIZE_MAGIC.size:
        total, magic = unpack(buf, p)
        if magic not in magics or total <= SIZE_MAGIC.size or p + total > end_max:
            return p
        append(p)
        p += total
        k = (end_max - p) // total  # records of this size that would fit
        # a run check only where the next record has this size too: other loads step through
        if k >= _RUN_MIN and buf[p : p + SIZE_MAGIC.size] == buf[p - total : p - total + SIZE_MAGIC.size]:
            same = _same_size_run(buf, p - total, total, k)
            starts.extend(range(p, p + same * total, total))
            p += same * total
    return p


#: below this many records a run check costs more than stepping through them
_RUN_MIN = 8
assert SIZE_MAGIC.size == 8  # _same_size_run reads the size+magic header as one 8-byte word


def _same_size_run(buf: bytes | bytearray, first: int, total: int, k: int) -> int:
    """How many of the ``k`` records after the one at ``first`` have its size and magic (their
    8-byte size+magic headers equal to its own), all before the first that differs: the headers
    are read as one strided column of 8-byte words (no copy of the rows), compared with one
    comparison."""
    heads = np.ndarray((k + 1,), dtype=np.uint64, buffer=buf, offset=first, strides=(total,))
    differs = np.flatnonzero(heads[1:] != heads[0])
    return int(differs[0]) if len(differs) else k
