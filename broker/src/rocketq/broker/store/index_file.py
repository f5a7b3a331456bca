"""IndexFile and IndexService: query messages by key (``KEYS`` values and ``UNIQ_KEY``) and time.

File layout (big-endian), RocketMQ's ``IndexFile``::

     0  begin_timestamp     int64   store time of the first entry
     8  end_timestamp       int64   store time of the last entry
    16  begin_phy_offset    int64
    24  end_phy_offset      int64
    32  hash_slot_count     int32   slots in use
    36  index_count         int32   next entry number; starts at 1 (entry 0 = null pointer)
    40  slots               int32 x max_hash_slot_num   newest entry number per slot (0 = empty)
    ..  entries             20 bytes x max_index_num:
            key_hash int32 | phy_offset int64 | time_diff_s int32 | prev_index int32

Index key = ``topic + "#" + key``, hash = ``abs(Java hashCode)``, slot = hash % slots.  Entries of a
slot form a linked list, newest first.  Files are named by their creation time
(``yyyyMMddHHmmssSSS``); a full file is closed and a new one started.  Theory of operation: only
the reput thread writes (entry, then slot, then header), readers walk the lists lock-free.

Writes go through ``pwrite`` (readers use the mapping, which sees the same page cache), except
the slots of a bulk insert, scattered over the slot table, which numpy stores into the mapping.
A store into a mapped page that the last flush made clean takes a write fault; on ext4 the fault
updates the file time, which can wait for a running journal commit, and a Python thread waits
there holding the GIL, so every request of the broker waits too.  ``pwrite`` waits with the GIL
released.

A crash can land between the slot and the header writes: a slot then points at an entry the
header's ``index_count`` does not cover, and the recovery replay would write the same entry number
again, linking it to itself and cutting the older entries of that slot off.  Loading therefore
repairs such slots: the stale entry was written before its slot, so its ``prev_index`` leads back
to the old head, which is followed until it is a counted entry (RocketMQ avoids the state by
deleting every index file newer than the checkpoint after a crash; this keeps them).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.errors import StoreIOError
from rocketq.broker.store.mapped_file import MappedFile
from rocketq.broker.store.props_scan import pow31
from rocketq.client.remoting.javahash import index_key_hash

log = logging.getLogger(__name__)

HEADER = struct.Struct(">qqqqii")
ENTRY = struct.Struct(">iqii")
SLOT = struct.Struct(">i")
HEADER_SIZE = 40
ENTRY_SIZE = 20
assert HEADER.size == HEADER_SIZE and ENTRY.size == ENTRY_SIZE and SLOT.size == 4
_INT32_MAX = 0x7FFFFFFF
#: up to this many keys per dispatch round are inserted one by one, not through numpy
_SCALAR_INSERT_MAX = 16
ENTRY_DTYPE = np.dtype(
    [("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"), ("prev_index", ">i4")]
)
assert ENTRY_DTYPE.itemsize == ENTRY_SIZE


def bulk_index_key_hash(keys: list[str]) -> npt.NDArray[np.int64]:
    """``index_key_hash`` of many keys at once (Java's hashCode, vectorised; abs, MIN_VALUE -> 0).

    ASCII keys are hashed with numpy; others fall back to the scalar reference implementation.
    """
    joined = "".join(keys)
    if not joined.isascii() or not all(keys):
        return np.fromiter((index_key_hash(k) for k in keys), dtype=np.int64, count=len(keys))
    codes = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).astype(np.uint32)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    ends = np.cumsum(lengths)
    dist = np.repeat(ends, lengths) - 1 - np.arange(len(codes))
    with np.errstate(over="ignore"):
        prod = (codes * pow31(int(lengths.max()))[dist]).astype(np.uint64)
    sums = np.add.reduceat(prod, ends - lengths) & np.uint64(0xFFFFFFFF)
    signed = sums.astype(np.uint32).view(np.int32).astype(np.int64)
    return np.where(signed == -(2**31), 0, np.abs(signed))


def index_file_size(slots: int, entries: int) -> int:
    return HEADER_SIZE + slots * 4 + entries * ENTRY_SIZE


def build_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"


def slot_order(
    slots: npt.NDArray[np.int64], slot_count: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``(order, slots[order])`` with ``order`` a stable argsort of ``slots`` (each in
    ``[0, slot_count)``).  Where slot and position fit in one int64 the keys ``slot << bits | i``
    are unique, so any sort keeps the arrival order within a slot: numpy sorts them three to four
    times faster than its stable argsort (a merge sort) sorts the slots."""
    k = len(slots)
    bits = max(1, (k - 1).bit_length())
    if max(1, (slot_count - 1).bit_length()) + bits > 62:
        order = np.argsort(slots, kind="stable")
        return order, slots[order]
    keyed = np.sort((slots << bits) | np.arange(k, dtype=np.int64))
    return keyed & ((1 << bits) - 1), keyed >> bits


class IndexFile:
    """One index file: header, hash slots and linked entries."""

    def __init__(self, path: str, slots: int, max_index: int, *, preallocate: bool = True) -> None:
        self.slots = slots
        self.max_index = max_index
        existed = os.path.exists(path) and os.path.getsize(path) > 0
        self.mf = MappedFile(path, index_file_size(slots, max_index), preallocate=preallocate)
        self.path = path
        self.file_name = os.path.basename(path)
        values: tuple[int, ...] = (0, 0, 0, 0, 0, 1)
        if existed:
            values = tuple(int(v) for v in HEADER.unpack_from(self.mf.buffer, 0))
        self.begin_timestamp: int = values[0]
        self.end_timestamp: int = values[1]
        self.begin_phy_offset: int = values[2]
        self.end_phy_offset: int = values[3]
        self.hash_slot_count: int = values[4]
        self.index_count: int = max(values[5], 1)
        self._entries_pos = HEADER_SIZE + slots * 4
        if not existed:
            self._write_header()
        else:
            self._repair_slots()

    def _repair_slots(self) -> None:
        """Point slots that name uncounted entries (a crash before the header write) at counted ones."""
        buf = self.mf.buffer
        slot_arr = np.frombuffer(buf, dtype=">i4", count=self.slots, offset=HEADER_SIZE)
        count = self.index_count
        stale = np.flatnonzero((slot_arr >= count) | (slot_arr < 0))
        for slot in stale.tolist():
            idx = int(slot_arr[slot])
            for _ in range(self.max_index):  # entries link to lower numbers; bounded against garbage
                if not count <= idx < self.max_index:
                    break
                idx = ENTRY.unpack_from(buf, self._entries_pos + idx * ENTRY_SIZE)[3]
            SLOT.pack_into(buf, HEADER_SIZE + slot * 4, idx if 0 < idx < count else 0)
        if len(stale):
            log.warning(
                "index file %s: %d hash slots named entries beyond the entry count %d (a crash before "
                "the header write); repaired them to the last counted entries",
                self.path,
                len(stale),
                count,
            )

    def _write_header(self) -> None:
        self.mf.pwrite(
            0,
            HEADER.pack(
                self.begin_timestamp,
                self.end_timestamp,
                self.begin_phy_offset,
                self.end_phy_offset,
                self.hash_slot_count,
                self.index_count,
            ),
        )

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.max_index

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add one entry; False if the file is full."""
        return self.put_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Add one entry for a precomputed key hash; False if the file is full."""
        if self.index_count >= self.max_index:
            return False
        buf = self.mf.buffer
        slot_pos = HEADER_SIZE + (key_hash % self.slots) * 4
        (slot_value,) = SLOT.unpack_from(buf, slot_pos)
        if slot_value <= 0 or slot_value >= self.index_count:
            slot_value = 0
        if self.index_count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        time_diff = 0 if self.begin_timestamp <= 0 else (store_timestamp - self.begin_timestamp) // 1000
        time_diff = min(max(time_diff, 0), _INT32_MAX)
        self.mf.pwrite(
            self._entries_pos + self.index_count * ENTRY_SIZE,
            ENTRY.pack(key_hash, phy_offset, time_diff, slot_value),
        )
        self.mf.pwrite(slot_pos, SLOT.pack(self.index_count))
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        self._write_header()
        return True

    def put_hashes(
        self,
        hashes: npt.NDArray[np.int64],
        phys: npt.NDArray[np.int64],
        store_timestamp: int | npt.NDArray[np.int64],
    ) -> int:
        """Add many entries; return how many fit.  Same bytes as ``put_key`` called for each in turn.

        Slots are chained in a stable order by slot (:func:`slot_order`): in each slot's group,
        the first new entry links to the slot's old head, each later one to the previous entry of
        the group, and the slot ends up pointing at the group's last entry.
        """
        k = min(self.max_index - self.index_count, len(hashes))
        if k <= 0:
            return 0
        h, p = hashes[:k], phys[:k]
        ts = (
            store_timestamp[:k]
            if isinstance(store_timestamp, np.ndarray)
            else np.full(k, store_timestamp, np.int64)
        )
        buf = self.mf.buffer
        slot_arr = np.frombuffer(buf, dtype=">i4", count=self.slots, offset=HEADER_SIZE)
        slots = h % self.slots
        count = self.index_count
        glob = count + np.arange(k, dtype=np.int64)  # the entry number each key gets
        cur = slot_arr[slots].astype(np.int64)
        cur[(cur <= 0) | (cur >= glob)] = 0  # put_key's check against the index count at its turn
        order, ss = slot_order(slots, self.slots)
        same = np.zeros(k, dtype=bool)
        same[1:] = ss[1:] == ss[:-1]
        prev = np.empty(k, dtype=np.int64)
        glob_sorted = glob[order]
        prev[order] = np.where(same, np.concatenate(([0], glob_sorted[:-1])), cur[order])
        if count <= 1:
            self.begin_phy_offset = int(p[0])
            self.begin_timestamp = int(ts[0])
        if self.begin_timestamp <= 0:
            diff: int | npt.NDArray[np.int64] = 0
        else:
            diff = np.clip((ts - self.begin_timestamp) // 1000, 0, _INT32_MAX)
        entries = np.empty(k, dtype=ENTRY_DTYPE)
        entries["key_hash"] = h
        entries["phy_offset"] = p
        entries["time_diff"] = diff
        entries["prev_index"] = prev
        self.mf.pwrite(self._entries_pos + count * ENTRY_SIZE, entries.data)
        last = np.ones(k, dtype=bool)
        last[:-1] = ss[1:] != ss[:-1]
        slot_arr[ss[last]] = glob_sorted[last]
        self.hash_slot_count += int((cur[order][~same] == 0).sum())
        self.index_count = count + k
        self.end_phy_offset = int(p[-1])
        self.end_timestamp = int(ts[-1])
        self._write_header()
        return k

    def is_time_matched(self, begin: int, end: int) -> bool:
        return (
            (begin < self.begin_timestamp and end > self.end_timestamp)
            or self.begin_timestamp <= begin <= self.end_timestamp
            or self.begin_timestamp <= end <= self.end_timestamp
        )

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append to ``out`` the offsets of entries for ``key`` stored within [begin, end]."""
        buf = self.mf.buffer
        key_hash = index_key_hash(key)
        (idx,) = SLOT.unpack_from(buf, HEADER_SIZE + (key_hash % self.slots) * 4)
        count = self.index_count
        if idx <= 0 or idx >= count:
            return
        while len(out) < max_num:
            h, phy, diff, prev = ENTRY.unpack_from(buf, self._entries_pos + idx * ENTRY_SIZE)
            ts = self.begin_timestamp + diff * 1000
            if h == key_hash and begin <= ts <= end:
                out.append(phy)
            if prev <= 0 or prev >= count or prev == idx or ts < begin:
                break
            idx = prev

    def flush(self) -> None:
        # Entries are only ever appended; msync the header, slots and written entries.
        self.mf.wrote_position = min(self._entries_pos + self.index_count * ENTRY_SIZE, self.mf.file_size)
        self.mf.flushed_position = 0
        self.mf.flush()

    def destroy(self) -> None:
        self.mf.destroy()

    def close(self) -> None:
        self.mf.close()


class IndexService:
    """The list of index files; builds entries for dispatched records and answers queries."""

    def __init__(self, index_dir: str, slots: int, max_index: int, *, preallocate: bool = True) -> None:
        self.index_dir = index_dir
        self.slots = slots
        self.max_index = max_index
        self.preallocate = preallocate
        self.files: tuple[IndexFile, ...] = ()
        self._lock = threading.Lock()

    def load(self) -> None:
        if not os.path.isdir(self.index_dir):
            return
        files = []
        expected = index_file_size(self.slots, self.max_index)
        for name in sorted(os.listdir(self.index_dir)):
            path = os.path.join(self.index_dir, name)
            if not name.isdigit():
                continue
            if os.path.getsize(path) != expected:
                log.warning(
                    "index file %s has size %d, expected %d; deleting it (it will be rebuilt)",
                    path,
                    os.path.getsize(path),
                    expected,
                )
                os.unlink(path)
                continue
            files.append(IndexFile(path, self.slots, self.max_index, preallocate=False))
        self.files = tuple(files)

    @property
    def end_phy_offset(self) -> int:
        """The CommitLog offset of the last indexed record (-1 if nothing is indexed)."""
        for f in reversed(self.files):
            if f.index_count > 1:
                return f.end_phy_offset
        return -1

    def _writable(self) -> IndexFile:
        files = self.files
        if files and not files[-1].is_full:
            return files[-1]
        os.makedirs(self.index_dir, exist_ok=True)
        now = time.time()
        while True:
            name = time.strftime("%Y%m%d%H%M%S", time.localtime(now)) + f"{int(now * 1000) % 1000:03d}"
            path = os.path.join(self.index_dir, name)
            if not os.path.exists(path):
                break
            now += 0.001
        try:
            new = IndexFile(path, self.slots, self.max_index, preallocate=self.preallocate)
        except StoreIOError:
            log.error("cannot create index file %s", path)
            raise
        if files:
            files[-1].flush()
        self.files = (*files, new)
        return new

    def build_index(self, topic: str, keys: Iterable[str], phy_offset: int, store_timestamp: int) -> None:
        """Index each key of one record (skipped if that offset is already indexed)."""
        with self._lock:
            if phy_offset < self.end_phy_offset:
                return  # already indexed (recovery replays); the last record may repeat its keys
            for key in keys:
                if not key:
                    continue
                full_key = build_key(topic, key)
                f = self._writable()
                if not f.put_key(full_key, phy_offset, store_timestamp):
                    f = self._writable()
                    f.put_key(full_key, phy_offset, store_timestamp)

    def build_index_hashes(
        self,
        hashes: npt.NDArray[np.int64],
        phys: npt.NDArray[np.int64],
        store_timestamps: npt.NDArray[np.int64],
    ) -> None:
        """Index precomputed key hashes (in CommitLog order); entries below the indexed end are skipped."""
        with self._lock:
            end = self.end_phy_offset
            if end >= 0 and len(phys) and int(phys[0]) < end:
                keep = phys >= end
                hashes, phys, store_timestamps = hashes[keep], phys[keep], store_timestamps[keep]
            if len(hashes) <= _SCALAR_INSERT_MAX:
                # numpy's fixed cost per call dwarfs a handful of scalar inserts (single sends)
                for h, p, t in zip(hashes.tolist(), phys.tolist(), store_timestamps.tolist(), strict=True):
                    if not self._writable().put_hash(h, p, t):
                        self._writable().put_hash(h, p, t)
                return
            while len(hashes):
                n = self._writable().put_hashes(hashes, phys, store_timestamps)
                hashes, phys, store_timestamps = hashes[n:], phys[n:], store_timestamps[n:]

    def query_offsets(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> tuple[list[int], int, int]:
        """(offsets newest first, last update timestamp, last update phy offset)."""
        out: list[int] = []
        files = self.files
        last_ts = last_phy = 0
        full_key = build_key(topic, key)
        for f in reversed(files):
            if f is files[-1]:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.index_count <= 1 or not f.is_time_matched(begin, end):
                continue
            f.select_phy_offsets(full_key, max_num, begin, end, out)
            if len(out) >= max_num:
                break
        return out, last_ts, last_phy

    def flush(self) -> None:
        files = self.files
        if files:
            files[-1].flush()

    def delete_expired(self, phy_min_offset: int) -> int:
        """Delete files whose entries all point below the CommitLog minimum (never the last)."""
        with self._lock:
            files = list(self.files)
            deleted = 0
            while len(files) > 1 and files[0].end_phy_offset < phy_min_offset:
                files.pop(0).destroy()
                deleted += 1
            self.files = tuple(files)
            return deleted

    def remove_from(self, phy_offset: int) -> int:
        """Destroy files holding entries at or beyond ``phy_offset``; return the lowest offset lost."""
        with self._lock:
            files = list(self.files)
            lowest = phy_offset
            while files and files[-1].index_count > 1 and files[-1].end_phy_offset >= phy_offset:
                f = files.pop()
                lowest = min(lowest, f.begin_phy_offset)
                log.warning(
                    "index file %s refers beyond the CommitLog end %d; rebuilding it", f.path, phy_offset
                )
                f.destroy()
            self.files = tuple(files)
            return lowest

    def destroy(self) -> None:
        with self._lock:
            for f in self.files:
                f.destroy()
            self.files = ()

    def close(self) -> None:
        for f in self.files:
            f.close()
