"""CommitLog: the single append-only log of every stored message, and the only source of truth.

Theory of operation.  Records are encoded outside the lock by :mod:`.record_batch` (columns in
bulk with numpy, or the scalar codec for tiny batches).  Under the one append lock the store
assigns the queue offsets from the per-queue table, the physical offsets and the store timestamp,
renders the batch into one buffer and writes it with ``pwrite`` (see :meth:`MappedFile.pwrite`).
A batch is written contiguously (as RocketMQ does): when it does not fit in the rest of a
segment, keeping the 8 bytes of the end-of-file marker, the segment is closed with a blank record
(``TOTALSIZE = remaining``, ``BLANK_MAGIC``) and the batch starts the next segment, which is
created before the blank is published.  Prepared and rolled-back transaction records get queue offset 0
and never enter a ConsumeQueue.  Each append leaves a :class:`DispatchHint` so that dispatch need
not parse the records again.
"""

from __future__ import annotations

import logging
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rocketq.broker.store.config import StoreConfig
from rocketq.broker.store.errors import StoreError
from rocketq.broker.store.mapped_file import MappedFile
from rocketq.broker.store.mapped_file_queue import MappedFileQueue
from rocketq.broker.store.props_scan import Buffer
from rocketq.broker.store.record_batch import SMALL_BATCH, PreparedBatch
from rocketq.broker.store.status import AppendMessageResult, AppendMessageStatus
from rocketq.client.remoting.message import encode_blank
from rocketq.client.remoting.msgid import ip_to_bytes
from rocketq.client.remoting.record_layout import (
    BLANK_MAGIC,
    END_FILE_MIN_BLANK_LENGTH,
    HEADER_LAYOUTS,
    SIZE_MAGIC,
    STORETIMESTAMP_POS,
    SYSFLAG_POS,
    store_timestamp_pos,
)
from rocketq.client.remoting.vocabulary import (
    NAME_PATTERN,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
)

log = logging.getLogger(__name__)

#: Topics dispatched without reading properties: ConsumeQueue tags code 0, no IndexFile entries.
#: The transaction half topic holds every prepared message once more, and nothing reads it by tag
#: or key (the check service and ranged commits read its queue unfiltered; a key query names a
#: user topic), so scanning and indexing its records was pure cost on the exactly-once path.
UNSCANNED_TOPICS = frozenset({TRANS_HALF_TOPIC})
TOPIC_PATTERN = re.compile(NAME_PATTERN)
#: RocketMQ 5's V2 POP retry topics, ``%RETRY%group+topic``: the broker writes them itself (clients
#: cannot send to a name with "+", as in Java, whose store does not check names at all)
_NAME_CHARS = r"[%|a-zA-Z0-9_-]+"
POP_RETRY_V2_PATTERN = re.compile(f"^{re.escape(RETRY_GROUP_TOPIC_PREFIX)}{_NAME_CHARS}\\+{_NAME_CHARS}$")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_PORT = struct.Struct(">i")
#: Bytes of a record that hold STORETIMESTAMP whatever its hosts, and the least that may.
_STORE_TIMESTAMP_END = max(layout.store_timestamp_pos for layout in HEADER_LAYOUTS) + _INT64.size
_STORE_TIMESTAMP_MIN_END = STORETIMESTAMP_POS + _INT64.size
I64 = npt.NDArray[np.int64]


def _handed_over(prep: PreparedBatch) -> tuple[I64 | list[int] | None, list[list[str]] | None]:
    """The tags codes and index keys a hint carries (those of an unscanned topic: none to find)."""
    if prep.topic in UNSCANNED_TOPICS:
        return np.zeros(prep.n, dtype=np.int64), [[]] * prep.n
    return prep.tags_codes, prep.keys


def check_topic(topic: str, max_length: int) -> bool:
    if not 0 < len(topic) <= max_length:
        return False
    return TOPIC_PATTERN.match(topic) is not None or POP_RETRY_V2_PATTERN.match(topic) is not None


def offset_msg_id_prefix(store_host: tuple[str, int]) -> str:
    return (ip_to_bytes(store_host[0]) + _PORT.pack(store_host[1])).hex().upper()


@dataclass(slots=True, eq=False)
class DispatchHint:
    """What the appender already knows about a batch, so dispatch need not re-parse it.

    The CommitLog stays the truth: hints only exist for appends made by this process, and
    dispatch falls back to decoding records whenever no hint matches its offset.
    """

    base: int  # offset of the first record
    end: int  # offset after the last record (a blank may lie in between)
    topic: str
    queue_id: int
    first_queue_offset: int
    phys: I64 | list[int]
    sizes: I64 | list[int]
    in_cq: npt.NDArray[np.bool_] | list[bool]
    all_in_cq: bool
    properties: Sequence[Buffer]  # dispatch extracts tags codes and index keys from these ...
    plen: I64 | list[int]
    unindexed: npt.NDArray[np.bool_] | list[bool] | None
    tags_codes: I64 | list[int] | None  # ... unless the appender handed them over
    keys: list[list[str]] | None
    store_timestamp: int


MAX_HINTS = 65536
#: a slave's chunks waiting for their hints (about 10 s of reads); beyond, chunks are decoded
MAX_REPLICA_PENDING = 1024

#: makes the dispatch hints of replicated CommitLog bytes (``ha.replica_hints.replica_hints``)
Hinter = Callable[[Buffer, int, npt.NDArray[np.int64]], list[DispatchHint]]


@dataclass(frozen=True, slots=True)
class ReplicaChunk:
    """Bytes a slave appended whose dispatch hints the reput thread makes (many chunks at once)."""

    base: int
    end: int
    starts: Sequence[int]  # where its records start, relative to ``base``
    hinter: Hinter


class CommitLog:
    """Appends records under one lock and serves zero-copy views of them."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.mfq = MappedFileQueue(
            config.commit_log_dir,
            config.mapped_file_size_commit_log_bytes,
            preallocate=config.preallocate_files,
            page_cache_window=config.commit_log_page_cache_window_bytes,
        )
        self.put_lock = threading.Lock()
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.begin_time_in_lock_ms = 0
        self.last_store_timestamp = 0
        self._msg_id_prefixes: dict[tuple[str, int], str] = {}
        self._valid_topics: set[str] = set()
        self.hints: deque[DispatchHint] = deque()
        self.hints_enabled = True
        #: a slave's appended chunks still without hints: dispatch holds back from the first one's
        #: base until the reput thread has made them (dispatch.py, ``Dispatcher._replica_hints``)
        self.replica_pending: deque[ReplicaChunk] = deque()
        #: called with the seconds each flush that wrote data took (the broker's metrics)
        self.flush_observer: Callable[[float], None] | None = None

    # -- validation (outside the lock) ------------------------------------------------------------
    def topic_ok(self, topic: str) -> bool:
        """True if ``topic`` is a legal name (cached)."""
        if topic in self._valid_topics:
            return True
        if not check_topic(topic, self.config.max_topic_length):
            log.warning("put message illegal: bad topic name %r", topic[:300])
            return False
        if len(self._valid_topics) < 100_000:
            self._valid_topics.add(topic)
        return True

    # -- appending (under the lock) --------------------------------------------------------------
    def is_os_page_cache_busy(self) -> bool:
        begin = self.begin_time_in_lock_ms
        return begin > 0 and int(time.time() * 1000) - begin > self.config.os_page_cache_busy_timeout_ms

    def append(self, prep: PreparedBatch) -> AppendMessageResult:
        """Append the records of ``prep`` in order; raises StoreError if a segment cannot be created."""
        sizes = prep.sizes
        biggest = int(sizes.max()) if isinstance(sizes, np.ndarray) else max(sizes)
        if biggest + END_FILE_MIN_BLANK_LENGTH > self.mfq.mapped_file_size:
            return AppendMessageResult(status=AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        key = (prep.topic, prep.queue_id)
        with self.put_lock:
            now = int(time.time() * 1000)
            self.begin_time_in_lock_ms = now
            try:
                mf = self.mfq.get_last_mapped_file()
                base = mf.file_from_offset + mf.wrote_position
                first_qo = self.topic_queue_table.get(key, 0)
                queue_offsets, next_qo = _queue_offsets(prep, first_qo)
                chunks = self._place(prep, mf)
                phys = _physical_offsets(prep, chunks)
                rendered = prep.render(queue_offsets, phys, now)
                self._write(chunks, prep, rendered)
                if next_qo != first_qo:
                    self.topic_queue_table[key] = next_qo
                self.last_store_timestamp = now
                end = self.mfq.max_offset
                if self.hints_enabled and len(self.hints) < MAX_HINTS and prep.topic != SCHEDULE_TOPIC:
                    tags_codes, keys = _handed_over(prep)
                    self.hints.append(
                        DispatchHint(
                            base=base,
                            end=end,
                            topic=prep.topic,
                            queue_id=prep.queue_id,
                            first_queue_offset=first_qo,
                            phys=phys,
                            sizes=prep.sizes,
                            in_cq=prep.in_cq,
                            all_in_cq=prep.all_in_cq,
                            properties=prep.dispatch_properties(rendered),
                            plen=prep.plen,
                            unindexed=prep.unindexed,
                            tags_codes=tags_codes,
                            keys=keys,
                            store_timestamp=now,
                        )
                    )
            finally:
                self.begin_time_in_lock_ms = 0
        first_phy = int(phys[0])
        return AppendMessageResult(
            status=AppendMessageStatus.PUT_OK,
            wrote_offset=first_phy,
            wrote_bytes=end - first_phy,
            msg_id=self._msg_ids(prep.store_host, phys) if prep.want_msg_ids else "",
            queue_offset=int(queue_offsets[0]),
            store_timestamp=now,
            msg_num=prep.n,
        )

    def append_replica(
        self,
        phy_offset: int,
        data: bytes | bytearray | memoryview,
        hints: Sequence[DispatchHint] = (),
        *,
        starts: Sequence[int] | None = None,
        hinter: Hinter | None = None,
    ) -> int:
        """:meth:`append_raw` of bytes copied from the master, with what dispatch needs: ``hints``
        where given, else the record ``starts`` and the ``hinter`` that makes hints of them later,
        held in ``replica_pending`` (see ``MessageStore.append_replicated``)."""
        deferred = (
            starts is not None
            and hinter is not None
            and self.hints_enabled
            and len(self.replica_pending) < MAX_REPLICA_PENDING  # (dispatch stopped: decode them later)
        )
        if deferred:  # before the write: dispatch never sees these bytes without their hints
            assert starts is not None and hinter is not None
            self.replica_pending.append(ReplicaChunk(phy_offset, phy_offset + len(data), starts, hinter))
        try:
            end = self.append_raw(phy_offset, data)
        except BaseException:
            if deferred:
                self.replica_pending.pop()  # never written whole: no hold on it
            raise
        if hints and self.hints_enabled:  # after the write: a hint names written bytes
            self.hints.extend(hints)
        # no wakeup: the reput thread finds the bytes at its next look (replicaDispatchIntervalMs),
        # so a round dispatches several reads at once; waking it per read costs the slave more
        # CPU per message (its fixed costs per round, and a thread switch each time)
        return end

    def append_raw(self, phy_offset: int, data: bytes | bytearray | memoryview) -> int:
        """Write bytes copied from another CommitLog (a slave's replication) at exactly ``phy_offset``.

        ``phy_offset`` must be the end of this log, or, for an empty log, the start of a segment
        (a slave that starts empty begins at its master's first retained segment).  Segments are
        created as the data crosses their ends; blank end-of-file fillers arrive as data.  No
        dispatch hint is left: dispatch parses the records.  Returns the new end of the log.
        """
        size = self.mfq.mapped_file_size
        with self.put_lock:
            if self.mfq.last() is None:
                if phy_offset % size:
                    raise StoreError(
                        f"an empty commit log can only start at a segment boundary, not {phy_offset}"
                    )
            elif phy_offset != self.mfq.max_offset:
                raise StoreError(
                    f"replicated data at {phy_offset} does not continue the commit log, "
                    f"which ends at {self.mfq.max_offset}"
                )
            view = memoryview(data)
            while view:
                mf = self.mfq.get_last_mapped_file(phy_offset)
                n = min(len(view), mf.remaining)
                mf.pwrite(mf.wrote_position, view[:n])
                mf.wrote_position += n
                view = view[n:]
            return self.mfq.max_offset

    def _place(self, prep: PreparedBatch, mf: MappedFile) -> list[tuple[MappedFile | None, int, int, int]]:
        """Per-segment chunks ``(segment, or None for the next one, position, i0, i1)`` of the batch.

        As in RocketMQ a batch is written contiguously: if it does not fit in the rest of the
        segment (keeping the 8 bytes of the end-of-file marker) the segment is closed with a blank
        record and the whole batch starts the next one.
        """
        pos = mf.wrote_position
        if prep.total + END_FILE_MIN_BLANK_LENGTH <= self.mfq.mapped_file_size - pos:
            return [(mf, pos, 0, prep.n)]
        return [(mf, pos, 0, 0), (None, 0, 0, prep.n)]

    def _write(
        self, chunks: list[tuple[MappedFile | None, int, int, int]], prep: PreparedBatch, data: object
    ) -> None:
        view = memoryview(data)  # type: ignore[arg-type]
        starts, total = prep.starts, prep.total
        mf = chunks[0][0]
        assert mf is not None
        for k, (_, pos, i0, i1) in enumerate(chunks):
            lo, hi = int(starts[i0]), (int(starts[i1]) if i1 < prep.n else total)
            if hi > lo:
                mf.pwrite(pos, view[lo:hi])
            if k + 1 == len(chunks):
                mf.wrote_position = pos + hi - lo
                return
            blank_at = pos + hi - lo
            mf.write_at(blank_at, encode_blank(mf.file_size - blank_at))
            try:
                nxt = self.mfq.create_next()
            except StoreError:
                mf.write_at(pos, bytes(blank_at + END_FILE_MIN_BLANK_LENGTH - pos))  # unpublish
                raise
            mf.wrote_position = mf.file_size
            mf = nxt

    def _msg_ids(self, store_host: tuple[str, int], phys: I64 | list[int]) -> str:
        prefix = self._msg_id_prefixes.get(store_host)
        if prefix is None:
            prefix = self._msg_id_prefixes[store_host] = offset_msg_id_prefix(store_host)
        if len(phys) < SMALL_BATCH:
            return ",".join([f"{prefix}{int(p):016X}" for p in phys])
        arr = np.asarray(phys, dtype=np.int64)
        width = len(prefix) + 17
        out = np.empty((len(arr), width), dtype=np.uint8)
        out[:, : len(prefix)] = np.frombuffer(prefix.encode(), dtype=np.uint8)
        hex_digits = arr.astype(">u8").tobytes().hex().upper().encode()  # 16 per offset, in C
        out[:, len(prefix) : -1] = np.frombuffer(hex_digits, dtype=np.uint8).reshape(len(arr), 16)
        out[:, -1] = 44  # ","
        return out.tobytes()[:-1].decode("ascii")

    # -- reading ---------------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        return self.mfq.max_offset

    @property
    def min_offset(self) -> int:
        first = self.mfq.first()
        if first is None:
            return 0
        return first.file_from_offset

    def view(self, offset: int, size: int) -> memoryview | None:
        """Zero-copy view of ``size`` bytes at ``offset``, or None if not (or no longer) stored."""
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position or size <= 0:
            return None
        return mf.view(pos, size)

    def record_size_at(self, offset: int) -> int:
        """TOTALSIZE of the record at ``offset`` (0 if absent or a blank marker)."""
        head = self.view(offset, SIZE_MAGIC.size)
        if head is None:
            return 0
        size, magic = SIZE_MAGIC.unpack(head)
        if magic == BLANK_MAGIC or size <= 0:
            return 0
        return int(size)

    def store_timestamp_at(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset``, or -1 if it is not stored."""
        end = _STORE_TIMESTAMP_END
        rec = self.view(offset, min(size, end) if size > 0 else end)
        if rec is None or len(rec) < _STORE_TIMESTAMP_MIN_END:
            return -1
        (sys_flag,) = _INT32.unpack_from(rec, SYSFLAG_POS)
        ts_pos = store_timestamp_pos(sys_flag)
        if ts_pos + _INT64.size > len(rec):
            return -1
        return int(_INT64.unpack_from(rec, ts_pos)[0])

    def segment_tail(self, offset: int) -> tuple[MappedFile, int, memoryview] | None:
        """(segment, position, view from ``offset`` to the written end of its segment)."""
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        end = mf.wrote_position
        if pos >= end:
            return None
        return mf, pos, mf.view(pos, end - pos)

    def flush(self, least_pages: int = 0) -> bool:
        observer = self.flush_observer
        if observer is None:
            return self.mfq.flush(least_pages)
        start = time.perf_counter()
        flushed = self.mfq.flush(least_pages)
        if flushed:
            observer(time.perf_counter() - start)
        return flushed

    @property
    def flushed_where(self) -> int:
        return self.mfq.flushed_where

    def recover_topic_queue_table(self, table: Mapping[tuple[str, int], int]) -> None:
        with self.put_lock:
            self.topic_queue_table = dict(table)

    def remove_queue_offsets(self, topic: str) -> None:
        with self.put_lock:
            for key in [k for k in self.topic_queue_table if k[0] == topic]:
                del self.topic_queue_table[key]


def _queue_offsets(prep: PreparedBatch, first: int) -> tuple[I64 | list[int], int]:
    """Queue offset of each record (0 outside ConsumeQueues) and the queue's next offset."""
    n = prep.n
    if prep.all_in_cq:
        if isinstance(prep.starts, np.ndarray):
            return np.arange(first, first + n, dtype=np.int64), first + n
        return list(range(first, first + n)), first + n
    in_cq = prep.in_cq
    if isinstance(in_cq, np.ndarray):
        counts = np.cumsum(in_cq)
        return np.where(in_cq, first + counts - 1, 0).astype(np.int64), first + int(counts[-1])
    out, qo = [], first
    for flag in in_cq:
        out.append(qo if flag else 0)
        qo += flag
    return out, qo


def _physical_offsets(
    prep: PreparedBatch, chunks: list[tuple[MappedFile | None, int, int, int]]
) -> I64 | list[int]:
    """Absolute CommitLog offset of each record given its chunk placement."""
    starts = prep.starts
    seg_from = chunks[0][0].file_from_offset if chunks[0][0] is not None else 0
    size = chunks[0][0].file_size if chunks[0][0] is not None else 0
    shifts = []
    for k, (_, pos, i0, i1) in enumerate(chunks):
        shifts.append((seg_from + k * size + pos - int(starts[i0]), i0, i1))
    if isinstance(starts, np.ndarray):
        if len(shifts) == 1:
            return starts + shifts[0][0]
        phys = np.empty_like(starts)
        for shift, i0, i1 in shifts:
            phys[i0:i1] = starts[i0:i1] + shift
        return phys
    return [s + shift for shift, i0, i1 in shifts for s in starts[i0:i1]]
