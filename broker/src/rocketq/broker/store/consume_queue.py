"""ConsumeQueue: the per-(topic, queue) index of 20-byte units into the CommitLog.

Unit layout (big-endian)::

     0  commit_log_offset  int64
     8  size               int32
    12  tags_code          int64   Java hashCode of TAGS (0 without a tag)

Segments hold ``mapped_file_size_consume_queue_units`` units and are named by their start byte
offset (logical offset x 20).  Theory of operation: the reput thread is the only writer; it
appends units in bulk (one ``bytearray`` built with ``pack_into``, copied per segment).  A
re-dispatched unit below the current end is skipped (idempotent recovery); a gap (first unit of a
queue whose older data was deleted) is pre-filled with blank units ``(0, 0x7FFFFFFF, 0)``.
Readers are lock-free: lookup by logical offset is O(1) and units are read in bulk through
``numpy.frombuffer`` over the mapped segment.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.config import CQ_UNIT_SIZE
from rocketq.broker.store.mapped_file import MappedFile
from rocketq.broker.store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

UNIT = struct.Struct(">qiq")
assert UNIT.size == CQ_UNIT_SIZE
CQ_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
assert CQ_DTYPE.itemsize == CQ_UNIT_SIZE
BLANK_UNIT = UNIT.pack(0, 0x7FFFFFFF, 0)


class ConsumeQueue:
    """One queue's units; logical offsets are unit indexes."""

    def __init__(
        self, root_dir: str, topic: str, queue_id: int, units_per_file: int, *, preallocate: bool = True
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.units_per_file = units_per_file
        self.mfq = MappedFileQueue(
            os.path.join(root_dir, topic, str(queue_id)),
            units_per_file * CQ_UNIT_SIZE,
            preallocate=preallocate,
        )
        self.min_logic_offset = 0  # byte offset of the first valid unit
        self.max_physic_offset = -1  # CommitLog end (offset + size) of the last unit
        self.gap_filled = False  # set when blank units were written to fill a gap

    # -- bounds ----------------------------------------------------------------------------
    @property
    def min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    @property
    def max_offset_in_queue(self) -> int:
        """The next logical offset to be written."""
        return self.mfq.max_offset // CQ_UNIT_SIZE

    # -- writing (reput thread only) ---------------------------------------------------------
    def put_units(self, first_queue_offset: int, units: bytes | bytearray, last_physic_end: int) -> None:
        """Append consecutive units whose first has logical offset ``first_queue_offset``."""
        expected = first_queue_offset * CQ_UNIT_SIZE
        current = self.mfq.max_offset
        if expected < current:
            skip = current - expected
            if skip >= len(units):
                return  # already dispatched (recovery replays)
            log.debug(
                "consume queue %s-%d: skipping %d re-dispatched units",
                self.topic,
                self.queue_id,
                skip // CQ_UNIT_SIZE,
            )
            units = units[skip:]
            expected = current
        if expected > current:
            self._fill_gap(current, expected)
        view = memoryview(units)
        while view:
            mf = self.mfq.get_last_mapped_file(expected)
            n = min(len(view), mf.remaining)
            mf.append(view[:n])
            view = view[n:]
        self.max_physic_offset = max(self.max_physic_offset, last_physic_end)

    def _fill_gap(self, current: int, expected: int) -> None:
        self.gap_filled = True
        if self.mfq.last() is None:
            mf = self.mfq.get_last_mapped_file(expected)
            start = mf.file_from_offset
            self.min_logic_offset = expected
        else:
            start = current
            log.warning(
                "consume queue %s-%d: gap from logical offset %d to %d filled with blank units",
                self.topic,
                self.queue_id,
                current // CQ_UNIT_SIZE,
                expected // CQ_UNIT_SIZE,
            )
        pos = start
        while pos < expected:
            mf = self.mfq.get_last_mapped_file(pos)
            n = min(expected - pos, mf.remaining)
            mf.append(BLANK_UNIT * (n // CQ_UNIT_SIZE))
            pos += n

    # -- reading -----------------------------------------------------------------------------
    def units_from(self, queue_offset: int, max_units: int) -> npt.NDArray[np.void] | None:
        """Up to ``max_units`` written units from ``queue_offset`` (within one segment), as a record array."""
        byte_offset = queue_offset * CQ_UNIT_SIZE
        if byte_offset < self.min_logic_offset:
            return None
        mf = self.mfq.find_mapped_file_by_offset(byte_offset)
        if mf is None:
            return None
        pos = byte_offset - mf.file_from_offset
        end = mf.wrote_position
        count = min((end - pos) // CQ_UNIT_SIZE, max_units)
        if count <= 0:
            return None
        return np.frombuffer(mf.buffer, dtype=CQ_DTYPE, count=count, offset=pos)

    def raw_units(self, queue_offset: int, max_units: int) -> memoryview | None:
        """Up to ``max_units`` written units from ``queue_offset`` (within one segment), as bytes."""
        byte_offset = queue_offset * CQ_UNIT_SIZE
        if byte_offset < self.min_logic_offset:
            return None
        mf = self.mfq.find_mapped_file_by_offset(byte_offset)
        if mf is None:
            return None
        pos = byte_offset - mf.file_from_offset
        count = min((mf.wrote_position - pos) // CQ_UNIT_SIZE, max_units)
        if count <= 0:
            return None
        return mf.view(pos, count * CQ_UNIT_SIZE)

    def unit_at(self, queue_offset: int) -> tuple[int, int, int] | None:
        units = self.units_from(queue_offset, 1)
        if units is None:
            return None
        u = units[0]
        return int(u["offset"]), int(u["size"]), int(u["tags_code"])

    def offset_by_time(self, timestamp_ms: int, store_time: Callable[[int, int], int], min_phy: int) -> int:
        """The first logical offset whose store time is >= ``timestamp_ms`` (binary search).

        As RocketMQ: a time after every message gives the offset of the last message, a time
        before every message gives the first one.
        """
        lo, hi = self.min_offset_in_queue, self.max_offset_in_queue - 1
        if hi < lo:
            return lo
        first_valid = lo
        while first_valid <= hi:  # skip units whose CommitLog data is gone
            u = self.unit_at(first_valid)
            if u is None or (u[0] >= min_phy and u[1] != 0x7FFFFFFF):
                break
            first_valid += 1
        lo = first_valid
        result = hi
        while lo <= hi:
            mid = (lo + hi) // 2
            u = self.unit_at(mid)
            ts = store_time(u[0], u[1]) if u is not None else -1
            if ts < 0:
                lo = mid + 1
                continue
            if ts >= timestamp_ms:
                result = mid
                hi = mid - 1
            else:
                lo = mid + 1
        return result

    # -- recovery and retention ----------------------------------------------------------------
    def load(self) -> None:
        self.mfq.load()

    def recover(self) -> None:
        """Find the last valid unit (offset >= 0, size > 0) and cut everything after it."""
        files = self.mfq.files
        if not files:
            return
        end = files[0].file_from_offset
        max_phy = -1
        for mf in files:
            arr = np.frombuffer(mf.buffer, dtype=CQ_DTYPE, count=self.units_per_file)
            valid = (arr["offset"] >= 0) & (arr["size"] > 0)
            n_valid = int(np.argmin(valid)) if not valid.all() else len(valid)
            if n_valid:
                last = arr[n_valid - 1]
                if int(last["size"]) != 0x7FFFFFFF:
                    max_phy = int(last["offset"]) + int(last["size"])
            end = mf.file_from_offset + n_valid * CQ_UNIT_SIZE
            if n_valid < self.units_per_file:
                dirty = bool(arr[n_valid:].view(np.uint8).any())
                break
        else:
            dirty = False
        self.mfq.set_max_offset(end, zero_tail=dirty)
        self.max_physic_offset = max_phy
        self.min_logic_offset = max(self.min_logic_offset, self.mfq.min_offset)

    def truncate_dirty(self, phy_offset: int) -> None:
        """Remove units referring to CommitLog data at or beyond ``phy_offset``."""
        if self.max_physic_offset <= phy_offset:
            return  # every unit ends before phy_offset
        files = self.mfq.files
        cut = self.mfq.max_offset
        for mf in reversed(files):
            arr = np.frombuffer(mf.buffer, dtype=CQ_DTYPE, count=mf.wrote_position // CQ_UNIT_SIZE)
            real = arr["size"] != 0x7FFFFFFF
            keep = int(np.searchsorted(np.where(real, arr["offset"], -1), phy_offset, side="left"))
            cut = mf.file_from_offset + keep * CQ_UNIT_SIZE
            if keep > 0:
                break
        log.info(
            "consume queue %s-%d: truncating units from logical offset %d (commit log end %d)",
            self.topic,
            self.queue_id,
            cut // CQ_UNIT_SIZE,
            phy_offset,
        )
        self.mfq.set_max_offset(cut)
        self.max_physic_offset = -1
        last = self.unit_at(self.max_offset_in_queue - 1) if self.max_offset_in_queue > 0 else None
        if last is not None and last[1] != 0x7FFFFFFF:
            self.max_physic_offset = last[0] + last[1]
        if self.min_logic_offset > cut:
            self.min_logic_offset = cut

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """Advance the minimum logical offset past units whose CommitLog data was deleted."""
        first = self.mfq.first()
        if first is None:
            return
        arr = np.frombuffer(first.buffer, dtype=CQ_DTYPE, count=first.wrote_position // CQ_UNIT_SIZE)
        real = (arr["size"] != 0x7FFFFFFF) & (arr["offset"] >= phy_min_offset)
        idx = int(np.argmax(real)) if real.any() else len(arr)
        new_min = first.file_from_offset + idx * CQ_UNIT_SIZE
        if new_min > self.min_logic_offset:
            self.min_logic_offset = new_min

    def delete_expired_files(self, phy_min_offset: int) -> int:
        """Delete segments whose last unit lies below the CommitLog's minimum offset."""

        def expired(mf: MappedFile) -> bool:
            if mf.wrote_position < mf.file_size:
                return False
            (off, _size, _tag) = UNIT.unpack_from(mf.buffer, mf.file_size - CQ_UNIT_SIZE)
            return bool(off < phy_min_offset)

        deleted = self.mfq.delete_files_if(expired, max_count=1 << 30)
        self.min_logic_offset = max(self.min_logic_offset, self.mfq.min_offset)
        self.correct_min_offset(phy_min_offset)
        return deleted

    def flush(self, least_pages: int = 0) -> bool:
        return self.mfq.flush(least_pages)

    def destroy(self) -> None:
        self.mfq.destroy()
        parent = os.path.dirname(self.mfq.store_path)
        try:
            os.rmdir(parent)
        except OSError:
            pass

    def close(self) -> None:
        self.mfq.close()


def build_units(entries: Sequence[tuple[int, int, int]]) -> bytearray:
    """Pack (commit_log_offset, size, tags_code) triples into consecutive units."""
    buf = bytearray(len(entries) * CQ_UNIT_SIZE)
    pack = UNIT.pack_into
    pos = 0
    for off, size, tag in entries:
        pack(buf, pos, off, size, tag)
        pos += CQ_UNIT_SIZE
    return buf
