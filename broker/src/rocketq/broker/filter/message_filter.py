"""Pull-side SQL92 filtering: read a queue and keep only the records whose properties match.

Theory of operation.  The store reads batches of record views from the requested offset (no tag
filter); for each record only the header and the properties are decoded
(:func:`record_header_fields`, no body copy) and the compiled expression is evaluated.  Matching
records are collected up to the pull's message and byte caps; scanning stops there, at the end of
the queue, or after ``max_scan`` queue units (RocketMQ's ``maxFilterMessageCount`` = 16 000), so a
pull over a long run of non-matching messages is bounded and answers NO_MATCHED_MESSAGE with the
next offset moved past them.  When the caps stop the scan inside a batch, ``next_begin_offset`` is
the first record not returned, so nothing is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketq.broker.filter.expression import Node, matches
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.status import GetMessageResult, GetMessageStatus
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import record_header_fields

__all__ = ["FilteredRead", "read_matching"]

SCAN_BATCH_MSGS = 256
SCAN_BATCH_BYTES = 4 * 1024 * 1024
MAX_SCAN_UNITS = 16_000
#: Statuses a scan steps over (to the store's next offset) instead of answering them.
_SKIPPABLE = frozenset(
    {
        GetMessageStatus.NO_MATCHED_MESSAGE,
        GetMessageStatus.MESSAGE_WAS_REMOVING,
        GetMessageStatus.OFFSET_FOUND_NULL,
    }
)


@dataclass(frozen=True, slots=True)
class FilteredRead:
    """What a filtered pull answers: the store status, offsets and the joined records."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes = b""
    msg_count: int = 0


def read_matching(
    store: MessageStore,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    max_msg_nums: int,
    max_total_bytes: int,
    expr: Node,
    *,
    max_scan: int = MAX_SCAN_UNITS,
) -> FilteredRead:
    """Scan ``topic``/``queue_id`` from ``offset``; return the records matching ``expr`` (bounded)."""
    views: list[memoryview] = []
    results: list[GetMessageResult] = []
    total = 0
    next_offset = offset
    first = None
    try:
        while len(views) < max_msg_nums and next_offset - offset < max_scan:
            result = store.get_message(
                group, topic, queue_id, next_offset, SCAN_BATCH_MSGS, SCAN_BATCH_BYTES, None
            )
            results.append(result)
            if first is None:
                first = result
                if result.status is not GetMessageStatus.FOUND and result.status not in _SKIPPABLE:
                    return FilteredRead(
                        result.status, result.next_begin_offset, result.min_offset, result.max_offset
                    )
            if result.status is not GetMessageStatus.FOUND:
                if result.status in _SKIPPABLE and result.next_begin_offset > next_offset:
                    next_offset = result.next_begin_offset
                    continue
                break
            stopped, next_offset, total = _take(result, views, total, max_msg_nums, max_total_bytes, expr)
            if stopped:
                break
        assert first is not None
        status = GetMessageStatus.FOUND if views else GetMessageStatus.NO_MATCHED_MESSAGE
        return FilteredRead(
            status, next_offset, first.min_offset, results[-1].max_offset, b"".join(views), len(views)
        )
    finally:
        for r in results:
            r.release()


def _take(
    result: GetMessageResult,
    views: list[memoryview],
    total: int,
    max_msg_nums: int,
    max_total_bytes: int,
    expr: Node,
) -> tuple[bool, int, int]:
    """Add the matching records of one batch; (stopped by a cap, next offset, bytes so far)."""
    for buf in result.buffers:
        try:
            h = record_header_fields(buf)
        except MessageFormatError:
            continue  # unreadable record: never delivered, as the client could not decode it either
        if not matches(expr, h.properties):
            continue
        if len(views) >= max_msg_nums or (views and total + len(buf) > max_total_bytes):
            return True, h.queue_offset, total
        views.append(buf)
        total += len(buf)
    return False, result.next_begin_offset, total
