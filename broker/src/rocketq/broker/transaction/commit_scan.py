"""Crash-window repair: committed real messages whose op record never reached the log.

Theory of operation.  A commit is two appends: the real message(s), then the op message.  A
broker killed between them (or whose op message was still unflushed when it died) restarts with
the real messages in the CommitLog but the transaction un-ended in the op log; a replayed COMMIT
would store the real messages a second time.  Every committed real message identifies its
transaction: its sys flag carries the COMMIT transaction value, ``TRAN_PREPARED_QUEUE_OFFSET`` is
the half offset of the transaction's first copy (its origin) and ``PREPAREDTRANSACTIONOFFSET`` is
the CommitLog offset of the half copy it was made from.

Since one commit's appends are made under the service lock, only records written after the last
durable op record can lack one.  :func:`scan_start` is that op record's CommitLog offset (or, with
no op record at all, the first retained half message's), and :func:`find_unrecorded_commits`
walks the CommitLog from there to its end, segment by segment, reading only the sys flag of each
record and, for COMMIT records, the header and properties (``record_header_fields``); bodies are
never decoded.  A candidate counts only when the half record it names is a half message of the
same transaction with the same ``UNIQ_KEY``, so a stray COMMIT flag does not end a transaction.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from rocketq.broker.transaction.half_message import HALF_QUEUE_ID, HALF_TOPIC, OP_TOPIC
from rocketq.broker.transaction.op_log import OP_QUEUE_ID, DoneOffsets
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import RecordHeader, record_header_fields
from rocketq.client.remoting.msgid import bytes_to_ip
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.record_layout import (
    BLANK_MAGIC,
    PORT_SIZE,
    SIZE_MAGIC,
    SYSFLAG_POS,
    TRANSACTION_COMMIT_TYPE,
    store_host_len,
    store_host_pos,
    transaction_value,
)

if TYPE_CHECKING:
    from rocketq.broker.store.commit_log import CommitLog
    from rocketq.broker.store.message_store import MessageStore

__all__ = ["UnrecordedCommit", "find_unrecorded_commits", "scan_start"]

_COMMIT: Final = TRANSACTION_COMMIT_TYPE
_INT32: Final = struct.Struct(">i")
assert _INT32.size == PORT_SIZE


@dataclass(frozen=True, kw_only=True, slots=True)
class UnrecordedCommit:
    """A committed transaction without an op record: the half copy it came from and its origin."""

    half_offset: int
    origin: int
    store_host: tuple[str, int]


def _first_unit(store: MessageStore, topic: str, queue_id: int, queue_offset: int) -> int | None:
    cq = store.find_consume_queue(topic, queue_id)
    unit = cq.unit_at(queue_offset) if cq is not None else None
    return None if unit is None else int(unit[0])


def scan_start(store: MessageStore) -> int | None:
    """Where committed messages may lack an op record, or None if nothing can (no half message)."""
    last_op = store.get_max_offset_in_queue(OP_TOPIC, OP_QUEUE_ID) - 1
    start = None
    if last_op >= store.get_min_offset_in_queue(OP_TOPIC, OP_QUEUE_ID) and last_op >= 0:
        start = _first_unit(store, OP_TOPIC, OP_QUEUE_ID, last_op)
    if start is None:
        min_half = store.get_min_offset_in_queue(HALF_TOPIC, HALF_QUEUE_ID)
        if store.get_max_offset_in_queue(HALF_TOPIC, HALF_QUEUE_ID) <= min_half:
            return None
        start = _first_unit(store, HALF_TOPIC, HALF_QUEUE_ID, min_half)
        if start is None:
            return None
    return max(start, int(store.min_phy_offset))


def _committed_records(commit_log: CommitLog, start: int, end: int) -> Iterator[tuple[int, memoryview, int]]:
    """(CommitLog offset, segment view, position) of each COMMIT record in ``[start, end)``."""
    offset = start
    while offset < end:
        mf = commit_log.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return
        next_segment = mf.file_from_offset + mf.file_size
        tail = commit_log.segment_tail(offset)
        if tail is not None:
            _, _, view = tail
            try:
                pos = 0
                while pos + SIZE_MAGIC.size <= len(view):
                    size, magic = SIZE_MAGIC.unpack_from(view, pos)
                    if magic == BLANK_MAGIC or size <= SYSFLAG_POS + _INT32.size or pos + size > len(view):
                        break
                    (sys_flag,) = _INT32.unpack_from(view, pos + SYSFLAG_POS)
                    if transaction_value(sys_flag) == _COMMIT:
                        yield offset + pos, view, pos
                    pos += size
            finally:
                view.release()
        offset = next_segment


def _int(props: Mapping[str, str], key: str) -> int | None:
    try:
        return int(props[key])
    except (KeyError, ValueError):
        return None


def _half_origin(half: RecordHeader) -> int:
    """``half_message.origin_offset`` on a header (no body decoded)."""
    origin = _int(half.properties, MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET)
    if origin is None or origin < 0 or origin > half.queue_offset:
        return half.queue_offset
    return origin


def _half_copy(
    commit_log: CommitLog, offset: int, origin: int, uniq_key: str | None
) -> UnrecordedCommit | None:
    """The half copy at CommitLog ``offset`` if it belongs to transaction ``origin`` (same ``UNIQ_KEY``)."""
    size = commit_log.record_size_at(offset) if offset >= 0 else 0
    view = commit_log.view(offset, size) if size > 0 else None
    if view is None:
        return None
    try:
        half = record_header_fields(view)
        if (
            half.topic != HALF_TOPIC
            or _half_origin(half) != origin
            or half.properties.get(MessageConst.UNIQ_KEY) != uniq_key
        ):
            return None
        pos = store_host_pos(half.sys_flag)
        ip_len = store_host_len(half.sys_flag) - PORT_SIZE
        host = (bytes_to_ip(bytes(view[pos : pos + ip_len])), int(_INT32.unpack_from(view, pos + ip_len)[0]))
        return UnrecordedCommit(half_offset=half.queue_offset, origin=origin, store_host=host)
    except MessageFormatError:
        return None
    finally:
        view.release()


def find_unrecorded_commits(
    store: MessageStore, start: int, done: DoneOffsets
) -> tuple[list[UnrecordedCommit], int]:
    """Committed transactions from ``start`` to the CommitLog's end that ``done`` lacks.

    Returns them and the number of COMMIT records seen."""
    commit_log = store.commit_log
    found: dict[int, UnrecordedCommit] = {}
    seen = 0
    for _offset, view, pos in _committed_records(commit_log, start, commit_log.max_offset):
        seen += 1
        try:
            header = record_header_fields(view, pos)
        except MessageFormatError:
            continue
        origin = _int(header.properties, MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET)
        if origin is None or origin < done.base or origin in done or origin in found:
            continue
        copy = _half_copy(
            commit_log,
            header.prepared_transaction_offset,
            origin,
            header.properties.get(MessageConst.UNIQ_KEY),
        )
        if copy is not None:
            found[origin] = copy
    return list(found.values()), seen
