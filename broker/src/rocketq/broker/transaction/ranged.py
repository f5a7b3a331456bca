"""Batched transactions (rocketq extension): prepared batches and ranged END_TRANSACTION helpers.

Theory of operation.  A prepared SEND_BATCH_MESSAGE is stored by :func:`to_half_batch` +
``store.put_messages``: every inner message becomes a half message (exactly the single-message
rewrite of :func:`~.half_message.to_half_message`), all in queue 0 of the half topic, so one
append gives them contiguous half-queue offsets.

A ranged END_TRANSACTION names half messages by ``(first half-queue offset, count)`` ranges.
:func:`load_ranges` reads them through the half topic's ConsumeQueue (bodies as stored, never
decompressed), refusing missing offsets, non-half records, a wrong producer group and requests
above the configured limits (count and loaded bytes) before anything is written.  The service
(``service.TransactionalMessageService.end_transaction_ranges``) then drops the offsets already
ended and, on commit, turns the rest into real messages with :func:`committed_message` (the
single-commit rewrite plus the delay-level rewrite RocketMQ applies to committed messages) and
:func:`append_runs` appends them: grouped by destination queue in range order, one store append
per group, so a consumer sees a group's messages all at once.  Two limits of the store split a
group into several appends, in order: messages born on different producer connections (a store
batch has one born host) and a group larger than the store's ``maxMessageSize`` (its batch limit).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rocketq.broker.schedule.delay import apply_delay_level
from rocketq.broker.store.commit_log import MessageToStore
from rocketq.broker.store.status import PutMessageResult
from rocketq.broker.transaction.half_message import (
    HALF_QUEUE_ID,
    HALF_TOPIC,
    real_queue,
    restore_real_message,
    to_half_message,
)
from rocketq.broker.transaction.op_log import iter_queue_records
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.message import StoredMessage, SysFlag, stored_record_size
from rocketq.client.remoting.properties import MessageConst

__all__ = [
    "RangedEndResult",
    "RangedRefused",
    "append_runs",
    "check_half_batch",
    "committed_message",
    "load_ranges",
    "to_half_batch",
]

_V6 = int(SysFlag.BORNHOST_V6), int(SysFlag.STOREHOST_V6)
_DISPATCH_WAIT_S = 3.0


@dataclass(frozen=True, kw_only=True, slots=True)
class RangedEndResult:
    """Outcome of a ranged END_TRANSACTION: the response code and remark, and the counts."""

    code: ResponseCode
    remark: str
    ended: int = 0
    skipped: int = 0


class RangedRefused(Exception):
    """A ranged request refused before anything was written (carries the response)."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


# ---------------------------------------------------------------------------- prepared batches


def check_half_batch(properties: Sequence[dict[str, str]]) -> str | None:
    """Why the inner messages of a prepared batch cannot be stored as one, or None if they can."""
    groups = set()
    for i, props in enumerate(properties):
        if props.get(MessageConst.TRANSACTION_PREPARED, "").lower() != "true":
            return (f"a transactional batch must have TRAN_MSG=true on every message; message {i} has "
                    f"TRAN_MSG={props.get(MessageConst.TRANSACTION_PREPARED)!r}")
        group = props.get(MessageConst.PRODUCER_GROUP)
        if not group:
            return f"a transactional batch must have PGROUP on every message; message {i} has none"
        groups.add(group)
    if len(groups) > 1:
        return f"a transactional batch must have one producer group (PGROUP), found {sorted(groups)}"
    return None


def to_half_batch(msgs: Sequence[MessageToStore]) -> list[MessageToStore]:
    """The prepared messages rewritten into the half topic, in order."""
    return [to_half_message(m) for m in msgs]


# ---------------------------------------------------------------------------- ranged end


def load_ranges(store: Any, ranges: Sequence[tuple[int, int]], producer_group: str, *,
                max_messages: int, max_bytes: int) -> list[StoredMessage]:
    """The half records of ``ranges`` in range order; raises :class:`RangedRefused`."""
    total = sum(count for _, count in ranges)
    if total > max_messages:
        raise RangedRefused(ResponseCode.MESSAGE_ILLEGAL, (
            f"ranged END_TRANSACTION names {total} half messages, more than transactionBatchMaxMessages="
            f"{max_messages}: split it into several requests"))
    end = max(first + count for first, count in ranges)
    if store.get_max_offset_in_queue(HALF_TOPIC, HALF_QUEUE_ID) < end:
        store.wait_dispatched(_DISPATCH_WAIT_S)  # just stored: the half ConsumeQueue may lag a little
    out: list[StoredMessage] = []
    loaded = 0
    for first, count in ranges:
        expected = first
        for rec in iter_queue_records(store, HALF_TOPIC, HALF_QUEUE_ID, first, first + count):
            if rec.queue_offset != expected:
                break
            if rec.topic != HALF_TOPIC or real_queue(rec) is None:
                raise RangedRefused(ResponseCode.SYSTEM_ERROR,
                                    f"half offset {expected} does not hold a half message")
            if rec.properties.get(MessageConst.PRODUCER_GROUP) != producer_group:
                raise RangedRefused(ResponseCode.SYSTEM_ERROR, f"The producer group wrong (half offset {expected})")
            loaded += rec.total_size
            if loaded > max_bytes:
                raise RangedRefused(ResponseCode.MESSAGE_ILLEGAL, (
                    f"ranged END_TRANSACTION loads more than transactionBatchMaxBytes={max_bytes} bytes of "
                    f"messages: split it into several requests"))
            out.append(rec)
            expected += 1
        if expected != first + count:
            raise RangedRefused(ResponseCode.SYSTEM_ERROR,
                                f"Find prepared transaction message failed: half offset {expected} not found")
    return out


def committed_message(half: StoredMessage, origin: int, max_delay_level: int) -> MessageToStore:
    """The real message of a committed half, sent to SCHEDULE_TOPIC_XXXX if it carries ``DELAY``."""
    real = restore_real_message(half, commit_log_offset=half.physical_offset, prepared_queue_offset=origin)
    props = real.properties_text()  # encoded once: sizing and the store reuse the text
    if MessageConst.DELAY_TIME_LEVEL not in half.properties:
        return dataclasses.replace(real, properties=props)
    topic, queue_id, props = apply_delay_level(real.topic, real.queue_id, props, max_delay_level)
    return dataclasses.replace(real, topic=topic, queue_id=queue_id, properties=props)


def _record_size(msg: MessageToStore) -> int:
    props = msg.properties_text().encode()
    return stored_record_size(len(msg.body), len(msg.topic.encode()), len(props),
                              born_v6=bool(msg.sys_flag & _V6[0]), store_v6=bool(msg.sys_flag & _V6[1]))


def _runs(group: list[tuple[int, MessageToStore]], max_batch_bytes: int) -> Iterator[list[tuple[int, MessageToStore]]]:
    """Consecutive runs of one born host, each at most ``max_batch_bytes`` of records."""
    run: list[tuple[int, MessageToStore]] = []
    size = 0
    for item in group:
        rec_size = _record_size(item[1])
        if run and (item[1].born_host != run[0][1].born_host or size + rec_size > max_batch_bytes):
            yield run
            run, size = [], 0
        run.append(item)
        size += rec_size
    if run:
        yield run


def append_runs(store: Any, items: Sequence[tuple[int, MessageToStore]],
                max_batch_bytes: int) -> tuple[list[int], PutMessageResult | None]:
    """Append ``(half offset, real message)`` items grouped by destination queue, in range order.

    Returns the half offsets whose real messages are stored, and the failed put (None if all were
    stored).  Appending stops at the first failure.
    """
    groups: dict[tuple[str, int], list[tuple[int, MessageToStore]]] = {}
    for item in items:
        groups.setdefault((item[1].topic, item[1].queue_id), []).append(item)
    stored: list[int] = []
    for group in groups.values():
        for run in _runs(group, max_batch_bytes):
            result: PutMessageResult = store.put_messages([m for _, m in run])
            if not result.is_ok:
                return stored, result
            stored.extend(off for off, _ in run)
    return stored, None

