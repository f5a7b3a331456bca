"""CommitLog: the single append-only log of every stored message, and the only source of truth.

Theory of operation.  A record is encoded outside the lock with the client's codec
(:func:`rocketq.client.remoting.message.encode_stored_message`); a batch is one ``bytearray`` made
by a single join.  Under the one append lock the store assigns the queue offset(s) from the
per-queue table, the physical offset and the store timestamp, patches them into the buffer with
precompiled structs and copies the whole buffer into the mapped segment in one memcpy.  A record
(or batch) that does not fit, keeping the 8 bytes needed for the end-of-file marker, is preceded by
a blank record (``TOTALSIZE = remaining``, ``BLANK_MAGIC``) and goes to a new segment.  Prepared
and rolled-back transaction records get queue offset 0 and never enter a ConsumeQueue.
"""

from __future__ import annotations

import logging
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rocketq.broker.store.config import END_FILE_MIN_BLANK_LENGTH, StoreConfig
from rocketq.broker.store.errors import StoreError
from rocketq.broker.store.mapped_file import MappedFile
from rocketq.broker.store.mapped_file_queue import MappedFileQueue
from rocketq.broker.store.status import AppendMessageResult, AppendMessageStatus, PutMessageStatus
from rocketq.client.errors import RocketQError
from rocketq.client.remoting.javahash import tags_hash_code
from rocketq.client.remoting.message import (
    PHYSICALOFFSET_POS,
    QUEUEOFFSET_POS,
    TRANSACTION_TYPE_MASK,
    SysFlag,
    encode_blank,
    encode_stored_message,
    store_timestamp_pos,
)
from rocketq.client.remoting.msgid import ip_to_bytes
from rocketq.client.remoting.properties import decode_properties, encode_properties, split_keys

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_QO_PHY = struct.Struct(">qq")
_INT64 = struct.Struct(">q")
_SIZE_MAGIC = struct.Struct(">iI")
assert QUEUEOFFSET_POS + 8 == PHYSICALOFFSET_POS and _QO_PHY.size == 16
_PREPARED = int(SysFlag.TRANSACTION_PREPARED)
_ROLLBACK = int(SysFlag.TRANSACTION_ROLLBACK)


@dataclass(frozen=True, kw_only=True, slots=True)
class MessageToStore:
    """A message as the broker hands it to the store (before offsets and store time exist)."""

    topic: str
    queue_id: int
    flag: int = 0
    body: bytes
    properties: Mapping[str, str] | str
    sys_flag: int = 0
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    def properties_text(self) -> str:
        props = self.properties
        return props if isinstance(props, str) else encode_properties(props)


def enters_consume_queue(sys_flag: int) -> bool:
    """False for prepared and rolled-back transaction records."""
    tran = sys_flag & TRANSACTION_TYPE_MASK
    return tran != _PREPARED and tran != _ROLLBACK


def check_topic(topic: str, max_length: int) -> bool:
    return 0 < len(topic) <= max_length and TOPIC_PATTERN.match(topic) is not None


def offset_msg_id_prefix(store_host: tuple[str, int]) -> str:
    return (ip_to_bytes(store_host[0]) + struct.pack(">i", store_host[1])).hex().upper()


@dataclass(slots=True)
class EncodedBatch:
    """Records of one topic/queue encoded back to back, plus what dispatch needs to know of them."""

    buf: bytearray
    layout: list[tuple[int, int]]      # (start in buf, sys_flag) per record
    sizes: list[int]
    tags_codes: list[int]
    keys: list[list[str]]              # KEYS values + UNIQ_KEY per record


@dataclass(slots=True)
class DispatchHint:
    """What the appender already knows about a batch, so dispatch need not re-parse it.

    The CommitLog stays the truth: hints only exist for appends made by this process, and
    dispatch falls back to decoding records whenever no hint matches its offset.
    """

    base: int
    total: int
    topic: str
    queue_id: int
    first_queue_offset: int
    in_cq: bool
    starts: list[int]
    sizes: list[int]
    tags_codes: list[int]
    keys: list[list[str]]
    store_timestamp: int


MAX_HINTS = 65536


class CommitLog:
    """Appends records under one lock and serves zero-copy views of them."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.mfq = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log_bytes,
                                   preallocate=config.preallocate_files)
        self.put_lock = threading.Lock()
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.begin_time_in_lock_ms = 0
        self.last_store_timestamp = 0
        self._msg_id_prefixes: dict[tuple[str, int], str] = {}
        self._valid_topics: set[str] = set()
        self.hints: deque[DispatchHint] = deque()
        self.hints_enabled = True

    # -- validation and encoding (outside the lock) ----------------------------------------------
    def validate(self, msg: MessageToStore, props: bytes) -> PutMessageStatus | None:
        cfg = self.config
        if msg.topic not in self._valid_topics:
            if not check_topic(msg.topic, cfg.max_topic_length):
                log.warning("put message illegal: bad topic name %r", msg.topic[:300])
                return PutMessageStatus.MESSAGE_ILLEGAL
            if len(self._valid_topics) < 100_000:
                self._valid_topics.add(msg.topic)
        if len(props) > cfg.max_properties_size_bytes:
            log.warning("put message illegal: properties of %d bytes for topic %s", len(props), msg.topic)
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        if len(msg.body) > cfg.max_message_size_bytes or msg.queue_id < 0:
            log.warning("put message illegal: body of %d bytes / queue %d for topic %s",
                        len(msg.body), msg.queue_id, msg.topic)
            return PutMessageStatus.MESSAGE_ILLEGAL
        return None

    def encode_batch(self, msgs: Sequence[MessageToStore]) -> EncodedBatch | PutMessageStatus:
        """Encode messages of one topic and queue back to back (one join), with their dispatch data."""
        first = msgs[0]
        topic, queue_id = first.topic, first.queue_id
        if topic not in self._valid_topics and self.validate(first, b"") is not None:
            return PutMessageStatus.MESSAGE_ILLEGAL
        cfg = self.config
        max_props, max_body = cfg.max_properties_size_bytes, cfg.max_message_size_bytes
        records: list[bytes] = []
        layout: list[tuple[int, int]] = []
        sizes: list[int] = []
        tags_codes: list[int] = []
        all_keys: list[list[str]] = []
        pos = 0
        for m in msgs:
            if m.topic != topic or m.queue_id != queue_id:
                log.warning("put messages illegal: a batch mixes topics or queues")
                return PutMessageStatus.MESSAGE_ILLEGAL
            props = m.properties
            if isinstance(props, str):
                text = props
                pmap: Mapping[str, str] = decode_properties(props)
            else:
                text = encode_properties(props)
                pmap = props
            props_b = text.encode()
            if len(props_b) > max_props or len(m.body) > max_body or queue_id < 0:
                return self.validate(m, props_b) or PutMessageStatus.MESSAGE_ILLEGAL
            try:
                rec = encode_stored_message(
                    topic=topic, queue_id=queue_id, flag=m.flag, body=m.body, properties=props_b,
                    sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
                    store_host=m.store_host, reconsume_times=m.reconsume_times,
                    prepared_transaction_offset=m.prepared_transaction_offset)
            except RocketQError as exc:
                log.warning("put message illegal: %s", exc)
                return PutMessageStatus.MESSAGE_ILLEGAL
            tags = pmap.get("TAGS")
            tags_codes.append(tags_hash_code(tags) if tags else 0)
            keys_value = pmap.get("KEYS")
            keys = split_keys(keys_value) if keys_value else []
            uniq = pmap.get("UNIQ_KEY")
            if uniq:
                keys.append(uniq)
            all_keys.append(keys)
            records.append(rec)
            size = len(rec)
            layout.append((pos, int.from_bytes(rec[36:40], "big", signed=True)))
            sizes.append(size)
            pos += size
        buf = bytearray(b"".join(records)) if len(records) > 1 else bytearray(records[0])
        return EncodedBatch(buf=buf, layout=layout, sizes=sizes, tags_codes=tags_codes, keys=all_keys)

    def encode(self, msg: MessageToStore) -> bytes | PutMessageStatus:
        """The record bytes with zero offsets and store time, or the status that rejects it."""
        props = msg.properties_text().encode()
        bad = self.validate(msg, props)
        if bad is not None:
            return bad
        try:
            record = encode_stored_message(
                topic=msg.topic, queue_id=msg.queue_id, flag=msg.flag, body=msg.body, properties=props,
                sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                store_host=msg.store_host, reconsume_times=msg.reconsume_times,
                prepared_transaction_offset=msg.prepared_transaction_offset)
        except RocketQError as exc:
            log.warning("put message illegal: %s", exc)
            return PutMessageStatus.MESSAGE_ILLEGAL
        return record

    # -- appending (under the lock) --------------------------------------------------------------
    def is_os_page_cache_busy(self) -> bool:
        begin = self.begin_time_in_lock_ms
        return begin > 0 and int(time.time() * 1000) - begin > self.config.os_page_cache_busy_timeout_ms

    def append(self, batch: EncodedBatch, topic: str, queue_id: int,
               store_host: tuple[str, int]) -> AppendMessageResult:
        """Append the encoded records of ``batch`` (all of ``topic``/``queue_id``) contiguously.

        Raises StoreError if a new segment cannot be created.
        """
        buf, layout = batch.buf, batch.layout
        total = len(buf)
        if total + END_FILE_MIN_BLANK_LENGTH > self.mfq.mapped_file_size:
            return AppendMessageResult(status=AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        key = (topic, queue_id)
        sys_flag0 = layout[0][1]
        in_cq = enters_consume_queue(sys_flag0)
        with self.put_lock:
            now = int(time.time() * 1000)
            self.begin_time_in_lock_ms = now
            try:
                mf = self._writable_file(total)
                base = mf.file_from_offset + mf.wrote_position
                queue_offset = self.topic_queue_table.get(key, 0) if in_cq else 0
                qo = queue_offset
                pack_qp, pack_ts = _QO_PHY.pack_into, _INT64.pack_into
                ts_pos = store_timestamp_pos(sys_flag0)
                for start, sys_flag in layout:
                    pack_qp(buf, start + QUEUEOFFSET_POS, qo, base + start)
                    pack_ts(buf, start + (ts_pos if sys_flag == sys_flag0 else store_timestamp_pos(sys_flag)), now)
                    if in_cq:
                        qo += 1
                mf.append(buf)
                if in_cq:
                    self.topic_queue_table[key] = qo
                self.last_store_timestamp = now
                if self.hints_enabled and len(self.hints) < MAX_HINTS and topic != SCHEDULE_TOPIC:
                    self.hints.append(DispatchHint(
                        base=base, total=total, topic=topic, queue_id=queue_id, first_queue_offset=queue_offset,
                        in_cq=in_cq, starts=[start for start, _ in layout], sizes=batch.sizes,
                        tags_codes=batch.tags_codes, store_timestamp=now,
                        keys=batch.keys if sys_flag0 & TRANSACTION_TYPE_MASK != _ROLLBACK else []))
            finally:
                self.begin_time_in_lock_ms = 0
        msg_ids = self._msg_ids(store_host, base, layout)
        return AppendMessageResult(status=AppendMessageStatus.PUT_OK, wrote_offset=base, wrote_bytes=total,
                                   msg_id=msg_ids, queue_offset=queue_offset, store_timestamp=now,
                                   msg_num=len(layout))

    def _writable_file(self, size: int) -> MappedFile:
        mf = self.mfq.get_last_mapped_file()
        remaining = mf.remaining
        if size + END_FILE_MIN_BLANK_LENGTH > remaining:
            # Every append leaves >= 8 bytes, so the marker always fits.
            mf.write_at(mf.wrote_position, encode_blank(remaining))
            mf.wrote_position = mf.file_size
            mf = self.mfq.get_last_mapped_file()
        return mf

    def _msg_ids(self, store_host: tuple[str, int], base: int, layout: Sequence[tuple[int, int]]) -> str:
        prefix = self._msg_id_prefixes.get(store_host)
        if prefix is None:
            prefix = self._msg_id_prefixes[store_host] = offset_msg_id_prefix(store_host)
        if len(layout) == 1:
            return f"{prefix}{base:016X}"
        return ",".join([f"{prefix}{base + start:016X}" for start, _ in layout])

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
        head = self.view(offset, 8)
        if head is None:
            return 0
        size, magic = _SIZE_MAGIC.unpack(head)
        if magic == 0xCBD43194 or size <= 0:
            return 0
        return int(size)

    def store_timestamp_at(self, offset: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``offset``, or -1 if it is not stored."""
        rec = self.view(offset, min(size, 80) if size > 0 else 80)
        if rec is None or len(rec) < 64:
            return -1
        (sys_flag,) = struct.unpack_from(">i", rec, 36)
        ts_pos = store_timestamp_pos(sys_flag)
        if ts_pos + 8 > len(rec):
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
        return self.mfq.flush(least_pages)

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


__all__ = ["CommitLog", "DispatchHint", "EncodedBatch", "MessageToStore", "StoreError", "check_topic", "enters_consume_queue"]
