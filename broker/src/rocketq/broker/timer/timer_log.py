"""TimerLog: the ``timerlog/`` segments of 52-byte records (layout in :mod:`.layout`).

Records are appended and never changed; each names a parked CommitLog message (``offset_py``,
``size_py``), when it is due and the previous record of the same wheel slot.  A record never
straddles two segments: when the tail of a segment cannot hold one plus a blank record, the blank
record fills it and the record goes to the next segment (RocketMQ's ``TimerLog.append``).

Recovery (:meth:`TimerLog.recover`) scans from the segment before the last durable position: it
stops at the first record whose size or magic is wrong (a torn write), skips to the next segment
at a blank record, hands every good record to a callback (which revises the wheel) and cuts the
log there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from rocketq.broker.store.mapped_file import MappedFile
from rocketq.broker.store.mapped_file_queue import MappedFileQueue
from rocketq.broker.timer.layout import (
    BLANK,
    BLANK_MAGIC_CODE,
    MIN_BLANK_LEN,
    RECORD,
    RECORD_SIZE,
    is_magic_ok,
)

__all__ = ["TimerLog", "TimerRecord"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TimerRecord:
    """One timer-log record, decoded."""

    prev_pos: int
    magic: int
    curr_write_time_ms: int
    delayed_time_ms: int
    offset_py: int
    size_py: int
    topic_hash: int

    def encode(self) -> bytes:
        return RECORD.pack(
            RECORD_SIZE,
            self.prev_pos,
            self.magic,
            self.curr_write_time_ms,
            self.delayed_time_ms - self.curr_write_time_ms,
            self.offset_py,
            self.size_py,
            self.topic_hash,
            0,
        )


def encode_blank(remaining: int) -> bytes:
    """The blank record ending a segment with ``remaining`` bytes left."""
    return BLANK.pack(remaining, 0, BLANK_MAGIC_CODE)


class TimerLog:
    """The timer log: append records, read one at a position, recover the tail."""

    def __init__(self, store_path: str, file_size: int) -> None:
        if file_size < RECORD_SIZE + MIN_BLANK_LEN:
            raise ValueError(
                f"mappedFileSizeTimerLog must be >= {RECORD_SIZE + MIN_BLANK_LEN}, got {file_size}"
            )
        self.file_size = file_size
        self.queue = MappedFileQueue(store_path, file_size, preallocate=False)

    def load(self) -> None:
        self.queue.load()

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    def append(self, record: TimerRecord) -> int:
        """Append ``record``; the absolute position it was written at."""
        mf = self.queue.get_last_mapped_file(0)
        if RECORD_SIZE + MIN_BLANK_LEN > mf.remaining:
            mf.append(encode_blank(mf.remaining))
            mf.wrote_position = self.file_size
            mf = self.queue.get_last_mapped_file(0)
        pos = mf.file_from_offset + mf.wrote_position
        mf.append(record.encode())
        return pos

    def read(self, pos: int) -> TimerRecord | None:
        """The record at ``pos``; None if no segment holds it or the bytes there are not a record."""
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel + RECORD_SIZE > self.file_size:
            return None
        size, prev, magic, write_ms, delta, offset_py, size_py, topic_hash, _ = RECORD.unpack_from(
            mf.buffer, rel
        )
        if size != RECORD_SIZE or not is_magic_ok(magic):
            return None
        return TimerRecord(prev, magic, write_ms, write_ms + delta, offset_py, size_py, topic_hash)

    def last_record(self) -> TimerRecord | None:
        """The last record written (None if the log is empty)."""
        end = self.max_offset
        record = self.read(end - RECORD_SIZE) if end >= RECORD_SIZE else None
        if record is not None:
            return record
        # the tail segment is empty or starts after a blank: the last record ends the one before
        mf = self.queue.find_mapped_file_by_offset(end - 1) if end > 0 else None
        if mf is None:
            return None
        pos = self._last_in_segment(mf.file_from_offset)
        return self.read(pos) if pos >= 0 else None

    def _last_in_segment(self, start: int) -> int:
        """The position of the last record of the full segment starting at ``start``."""
        mf = self.queue.find_mapped_file_by_offset(start)
        assert mf is not None
        pos = 0
        last = -1
        while pos + RECORD_SIZE <= self.file_size:
            size, _, magic = BLANK.unpack_from(mf.buffer, pos)
            if magic == BLANK_MAGIC_CODE or size != RECORD_SIZE:
                break
            last = pos
            pos += RECORD_SIZE
        return start + last if last >= 0 else -1

    def recover(self, begin_offset: int, on_record: Callable[[int, TimerRecord], None]) -> int:
        """Scan from the segment holding ``begin_offset``; cut the log after the last good record."""
        files = self.queue.files
        if not files:
            return 0
        index = len(files) - 1
        while index > 0 and begin_offset < files[index].file_from_offset:
            index -= 1
        check_offset = files[index].file_from_offset
        for mf in files[index:]:
            buf = mf.buffer
            pos = 0
            torn = False
            while pos + MIN_BLANK_LEN <= self.file_size:
                size, _, magic = BLANK.unpack_from(buf, pos)
                if magic == BLANK_MAGIC_CODE:
                    break
                if size != RECORD_SIZE or not is_magic_ok(magic) or pos + RECORD_SIZE > self.file_size:
                    torn = True
                    break
                record = self.read(mf.file_from_offset + pos)
                assert record is not None
                on_record(mf.file_from_offset + pos, record)
                pos += RECORD_SIZE
            check_offset = mf.file_from_offset + pos
            if torn:
                break
        log.info("timer log recovered up to %d", check_offset)
        self.queue.set_max_offset(check_offset)
        self.queue.flushed_where = check_offset
        return check_offset

    @property
    def last_unit_pos(self) -> int:
        """Where the last record of a full segment lies (``TimerLog.getOffsetForLastUnit``)."""
        size = self.file_size
        return size - (size - MIN_BLANK_LEN) % RECORD_SIZE - MIN_BLANK_LEN - RECORD_SIZE

    def delete_expired(self, min_offset_py: int) -> int:
        """Delete the full segments whose last record names a CommitLog offset below
        ``min_offset_py`` (its messages are gone); how many (``deleteExpiredFileByOffsetForTimerLog``)."""

        def expired(mf: MappedFile) -> bool:
            record = self.read(mf.file_from_offset + self.last_unit_pos)
            return record is not None and record.offset_py < min_offset_py

        return self.queue.delete_files_if(expired, max_count=len(self.queue.files))

    def flush(self) -> None:
        self.queue.flush(0)

    @property
    def flushed_where(self) -> int:
        return self.queue.flushed_where

    def close(self) -> None:
        self.queue.close()
