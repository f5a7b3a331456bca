"""Batched transactions (rocketq extension): prepared batches and ranged END_TRANSACTION helpers.

Theory of operation.  A prepared SEND_BATCH_MESSAGE is stored in one append with every inner
message rewritten into queue 0 of the half topic, so the messages get contiguous half-queue
offsets.  The send processor rewrites the usual batch as bytes (:func:`half_properties`: ``REAL_*``
appended to each message's properties) and falls back to :func:`to_half_batch`, the
single-message rewrite of :func:`~.half_message.to_half_message`, for anything else.

A ranged END_TRANSACTION names half messages by ``(first half-queue offset, count)`` ranges.
:func:`check_ranges` refuses requests above the configured message count.  The usual records
are then ended by bytes (:mod:`.bulk_commit`); the others go through :func:`load_ranges`, which
reads them through the half topic's ConsumeQueue as columns (:mod:`.half_read`; bodies as stored,
never decompressed), refusing missing offsets, non-half records, a wrong producer group and more
than the configured bytes before anything is written.  The service
(``service.TransactionalMessageService.end_transaction_ranges``) then drops the offsets already
ended and, on commit, :func:`append_committed` appends the real
messages (the committed properties the reader made, plus the delay-level rewrite RocketMQ applies
to committed messages): grouped by destination queue in range order, one store append per group,
so a consumer sees a group's messages all at once.  Two limits of the store split a group into
several appends, in order: messages born on different producer connections (a store batch has
one born host) and a group larger than the store's ``maxMessageSize`` (its batch limit).
:func:`committed_message` is the same rewrite for the single END_TRANSACTION.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TypeVar

from rocketq.broker.schedule.delay import apply_delay_level
from rocketq.broker.store.message_store import MessageStore
from rocketq.broker.store.record_batch import MessageBatchToStore, MessageToStore
from rocketq.broker.store.status import PutMessageResult
from rocketq.broker.transaction.half_message import (
    HALF_QUEUE_ID,
    HALF_TOPIC,
    restore_real_message,
    to_half_message,
)
from rocketq.broker.transaction.half_read import HalfColumns, read_halves
from rocketq.broker.transaction.op_log import iter_queue_reads
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.message import (
    TRANSACTION_TYPE_MASK,
    StoredMessage,
    SysFlag,
    stored_record_size,
)
from rocketq.client.remoting.properties import MessageConst, find_property

__all__ = [
    "RangedEndResult",
    "RangedRefused",
    "append_committed",
    "check_half_batch",
    "check_ranges",
    "committed_message",
    "half_properties",
    "load_ranges",
    "to_half_batch",
]

_V = TypeVar("_V")
_DISPATCH_WAIT_S = 3.0
_LOAD_BATCH = 4096  # records per read of the half queue: numpy's fixed costs are paid per read
_COMMIT = int(SysFlag.TRANSACTION_COMMIT)
log = logging.getLogger(__name__)


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
            return (
                f"a transactional batch must have TRAN_MSG=true on every message; message {i} has "
                f"TRAN_MSG={props.get(MessageConst.TRANSACTION_PREPARED)!r}"
            )
        group = props.get(MessageConst.PRODUCER_GROUP)
        if not group:
            return f"a transactional batch must have PGROUP on every message; message {i} has none"
        groups.add(group)
    if len(groups) > 1:
        return f"a transactional batch must have one producer group (PGROUP), found {sorted(groups)}"
    return None


_TRAN_TRUE = f"\x02{MessageConst.TRANSACTION_PREPARED}\x01true\x02".encode()
#: keys a prepared message must not carry (the broker writes them), found with one regex pass
_FORBIDDEN = re.compile(
    b"\x02(?:"
    + b"|".join(
        re.escape(k.encode())
        for k in (
            MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET,
            MessageConst.TRANSACTION_CHECK_TIMES,
            MessageConst.REAL_TOPIC,
            MessageConst.REAL_QUEUE_ID,
        )
    )
    + b")\x01"
)


def half_properties(
    properties: Sequence[bytes], topic: str, queue_id: int, *, cluster: bytes = b""
) -> list[bytes] | None:
    """The half-topic properties of a prepared batch's messages, rewritten as bytes; None if unsure.

    Equivalent to :func:`check_half_batch` passing and :func:`to_half_message`'s property rewrite
    (``REAL_TOPIC``/``REAL_QID`` appended) for the common case: ASCII properties, each ending in ``\x02``,
    has ``TRAN_MSG=true`` and the first message's ``PGROUP`` exactly once, and none of the
    broker-owned or ``REAL_*`` keys.  ``cluster`` (an encoded ``CLUSTER`` property) is appended
    before the ``REAL_*`` ones, and then no message may have a ``CLUSTER`` already.  Anything else
    returns None: the caller then decodes each message (and gets the precise error, if any).
    """
    n = len(properties)
    if not n:
        return None
    tail = _common_tail(properties)
    if tail is None and not all(map(bytes.endswith, properties, repeat(b"\x02"))):
        return None
    joined = b"\x02" + b"\x02".join(properties)
    if not joined.isascii() or _FORBIDDEN.search(joined) is not None:
        return None
    if cluster and b"\x02" + cluster[: cluster.index(b"\x01") + 1] in joined:
        return None
    group_key = _TRAN_TRUE[:1] + f"{MessageConst.PRODUCER_GROUP}\x01".encode()
    if tail is not None:  # every message ends with TRAN_MSG=true and one PGROUP: count the keys only
        if joined.count(_TRAN_TRUE[:-5]) != n or joined.count(group_key) != n:
            return None
    else:
        if joined.count(_TRAN_TRUE) != n or joined.count(_TRAN_TRUE[:-5]) != n:
            return None
        group_value = find_property(properties[0], MessageConst.PRODUCER_GROUP)
        if group_value is None:
            return None
        if joined.count(group_key + group_value.encode() + b"\x02") != n or joined.count(group_key) != n:
            return None
    suffix = (
        cluster
        + f"{MessageConst.REAL_TOPIC}\x01{topic}\x02{MessageConst.REAL_QUEUE_ID}\x01{queue_id}\x02".encode()
    )
    return [p + suffix for p in properties]


def _common_tail(properties: Sequence[bytes]) -> bytes | None:
    """``TRAN_MSG=true`` then ``PGROUP`` (and nothing else) ending every message, or None.

    Senders that encode their entries (the Spark sink, ``send_half_batch`` of a ``PreparedHalfBatch``)
    put these two last; then one ``endswith`` per message replaces two exact counts over the whole
    batch."""
    first = properties[0]
    at = first.rfind(_TRAN_TRUE)
    if at < 0:
        return None
    tail = first[at:]  # from the \x02 ending the property before: the keys are delimited
    rest = tail[len(_TRAN_TRUE) :]
    if (
        not rest.startswith(f"{MessageConst.PRODUCER_GROUP}\x01".encode())
        or rest.count(b"\x02") != 1
        or not rest.endswith(b"\x02")
    ):
        return None
    return tail if all(map(bytes.endswith, properties, repeat(tail))) else None


def to_half_batch(msgs: Sequence[MessageToStore]) -> list[MessageToStore]:
    """The prepared messages rewritten into the half topic, in order."""
    return [to_half_message(m) for m in msgs]


# ---------------------------------------------------------------------------- ranged end


def check_ranges(store: MessageStore, ranges: Sequence[tuple[int, int]], *, max_messages: int) -> None:
    """Refuse requests above ``max_messages`` (:class:`RangedRefused`); wait a moment for the half
    ConsumeQueue to cover the ranges (they may have just been stored)."""
    total = sum(count for _, count in ranges)
    if total > max_messages:
        raise RangedRefused(
            ResponseCode.MESSAGE_ILLEGAL,
            (
                f"ranged END_TRANSACTION names {total} half messages, more than transactionBatchMaxMessages="
                f"{max_messages}: split it into several requests"
            ),
        )
    end = max(first + count for first, count in ranges)
    if store.get_max_offset_in_queue(HALF_TOPIC, HALF_QUEUE_ID) < end:
        store.wait_dispatched(_DISPATCH_WAIT_S)  # just stored: the half ConsumeQueue may lag a little


def load_ranges(
    store: MessageStore, ranges: Sequence[tuple[int, int]], producer_group: str, *, max_bytes: int
) -> HalfColumns:
    """The half records of ``ranges`` in range order (the caller ran :func:`check_ranges`);
    raises :class:`RangedRefused`."""
    out = HalfColumns()
    loaded = 0
    for first, count in ranges:
        expected = first
        for cols in iter_queue_reads(
            store, HALF_TOPIC, HALF_QUEUE_ID, first, first + count, read_halves, batch=_LOAD_BATCH
        ):
            n = len(cols)
            qos = cols.queue_offsets
            if qos != list(range(expected, expected + n)):  # a hole: stop at it
                n = next(i for i, qo in enumerate(qos) if qo != expected + i)
                cols.truncate(n)
            bad = _first_bad(cols, producer_group)
            if bad is not None:
                raise RangedRefused(ResponseCode.SYSTEM_ERROR, bad)
            loaded += sum(cols.sizes)
            if loaded > max_bytes:
                raise RangedRefused(
                    ResponseCode.MESSAGE_ILLEGAL,
                    (
                        f"ranged END_TRANSACTION loads more than transactionBatchMaxBytes={max_bytes} "
                        "bytes of messages: split it into several requests"
                    ),
                )
            out.extend(cols)
            expected += n
            if n < len(qos):
                break
        if expected != first + count:
            raise RangedRefused(
                ResponseCode.SYSTEM_ERROR,
                f"Find prepared transaction message failed: half offset {expected} not found",
            )
    return out


def _first_bad(cols: HalfColumns, producer_group: str) -> str | None:
    """Why the records cannot be ended (the first offending one), or None."""
    n = len(cols)
    if (
        cols.topics.count(HALF_TOPIC) == n
        and None not in cols.reals
        and cols.groups.count(producer_group) == n
    ):
        return None
    for qo, topic, real, group in zip(cols.queue_offsets, cols.topics, cols.reals, cols.groups, strict=True):
        if topic != HALF_TOPIC or real is None:
            return f"half offset {qo} does not hold a half message"
        if group != producer_group:
            return f"The producer group wrong (half offset {qo})"
    return None


def committed_message(half: StoredMessage, origin: int, max_delay_level: int) -> MessageToStore:
    """The real message of a committed half, sent to SCHEDULE_TOPIC_XXXX if it carries ``DELAY``."""
    real = restore_real_message(half, commit_log_offset=half.physical_offset, prepared_queue_offset=origin)
    props = real.properties_text()  # encoded once: sizing and the store reuse the text
    if MessageConst.DELAY_TIME_LEVEL not in half.properties:
        return dataclasses.replace(real, properties=props)
    topic, queue_id, props = apply_delay_level(real.topic, real.queue_id, props, max_delay_level)
    return dataclasses.replace(real, topic=topic, queue_id=queue_id, properties=props)


def _destinations(
    cols: HalfColumns,
    todo: Sequence[int],
    max_delay_level: int,
) -> dict[tuple[str, int], tuple[list[int], list[bytes]]]:
    """Records (indices, committed properties) per destination queue, in order."""
    groups: dict[tuple[str, int], tuple[list[int], list[bytes]]] = {}
    reals, committed, delayed = cols.reals, cols.committed, cols.delayed
    for i in todo:
        real = reals[i]
        assert real is not None  # load_ranges refuses halves without a real queue
        props = committed[i]
        if delayed[i]:
            topic, queue_id, text = apply_delay_level(real[0], real[1], props.decode(), max_delay_level)
            real, props = (topic, queue_id), text.encode()
        group = groups.get(real)
        if group is None:
            group = groups[real] = ([], [])
        group[0].append(i)
        group[1].append(props)
    return groups


def _runs(
    cols: HalfColumns, idx: list[int], props: list[bytes], topic: str, max_batch_bytes: int
) -> Iterator[tuple[int, int]]:
    """``[lo, hi)`` runs of ``idx`` with one born and store host, each at most ``max_batch_bytes``."""
    born, store = _column(cols.born_hosts, idx), _column(cols.store_hosts, idx)
    bodies = _column(cols.bodies, idx)
    topic_len = len(topic.encode())
    if born.count(born[0]) == len(born) and store.count(store[0]) == len(store):
        fixed = stored_record_size(0, topic_len, 0, born_v6=":" in born[0][0], store_v6=":" in store[0][0])
        if fixed * len(idx) + sum(map(len, bodies)) + sum(map(len, props)) <= max_batch_bytes:
            yield 0, len(idx)  # the usual case: one producer connection, one append
            return
    lo, size = 0, 0
    for k, (body, p, b, s) in enumerate(zip(bodies, props, born, store, strict=True)):
        rec = stored_record_size(len(body), topic_len, len(p), born_v6=":" in b[0], store_v6=":" in s[0])
        if k > lo and (b != born[lo] or s != store[lo] or size + rec > max_batch_bytes):
            yield lo, k
            lo, size = k, 0
        size += rec
    if lo < len(idx):
        yield lo, len(idx)


def _column(values: Sequence[_V], idx: list[int]) -> list[_V]:
    return [values[i] for i in idx]


def append_committed(
    store: MessageStore,
    cols: HalfColumns,
    todo: Sequence[int],
    max_delay_level: int,
    max_batch_bytes: int,
    wrote: dict[str, list[int]] | None = None,
) -> tuple[list[int], PutMessageResult | None]:
    """Append the real messages of records ``todo`` (indices into ``cols``) per destination queue.

    Returns the indices whose real messages are stored, and the failed put (None if all were
    stored).  Appending stops at the first failure.  ``wrote`` (if given) gains per topic the
    messages and bytes stored, ``[messages, bytes]``.
    """
    stored: list[int] = []
    for (topic, queue_id), (idx, props) in _destinations(cols, todo, max_delay_level).items():
        for lo, hi in _runs(cols, idx, props, topic, max_batch_bytes):
            run = idx[lo:hi]
            batch = MessageBatchToStore(
                topic=topic,
                queue_id=queue_id,
                born_host=cols.born_hosts[run[0]],
                store_host=cols.store_hosts[run[0]],
                bodies=_column(cols.bodies, run),
                properties=props[lo:hi],
                born_timestamps=_column(cols.born_timestamps, run),
                flags=_column(cols.flags, run),
                sys_flags=[(f & ~TRANSACTION_TYPE_MASK) | _COMMIT for f in _column(cols.sys_flags, run)],
                reconsume_times=_column(cols.reconsume_times, run),
                prepared_transaction_offsets=_column(cols.physical_offsets, run),
            )
            result: PutMessageResult = store.put_batch(batch)
            if not result.is_ok:
                return stored, result
            stored.extend(run)
            if wrote is not None and result.append_result is not None:
                amounts = wrote.setdefault(topic, [0, 0])
                amounts[0] += len(run)
                amounts[1] += result.append_result.wrote_bytes
    return stored, None
