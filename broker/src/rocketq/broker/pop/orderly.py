"""Orderly POP (``order=true``) of one queue: RocketMQ 5's PopMessageProcessor with isOrder.

Theory of operation.  An orderly pop reads a queue from the group's consumer offset and asks the
:class:`~rocketq.broker.pop.order_info.ConsumerOrderInfoManager` what it may deliver: nothing
while the queue (``popOrderBlockScope=queue``) or a message group (``group``) is held by an
un-acked, still invisible message of an earlier orderly pop; a pop repeating that batch's
attemptId gets the same batch.  Under ``group`` scope the read starts past the acked and in-flight
messages at the consumer offset and takes windows of several times ``maxNums`` messages until
``maxNums`` are free (:class:`_Scan`), so held groups can be passed over.  No checkpoint is
written (Java writes none for orderly pops): the batch is in flight in the manager's table, the
handle carries reviveQid 999, and the committed consumer offset is the read's start (``queue``)
or the manager's (``group``); it moves on acks (:mod:`.ack`).  The POP retry topic is never read.

Retry limit (rocketq; Java leaves it to the proxy).  A message that failed more than the group's
``retryMaxTimes`` deliveries is put into ``%DLQ%group`` instead of being delivered again and is
acked in the manager, so its queue (or group) moves on.  A failed delivery is one in which it was
its message group's first un-acked message and was not acked (the manager's ``failed_counts``).
The consumed count sent as orderCountInfo (Java's) is not used: it also counts the deliveries of
the group's later messages behind the failing one, which a FIFO consumer does not try, and under
``queue`` scope the redeliveries of messages already acked.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from rocketq.broker.config import PopOrderBlockScope
from rocketq.broker.metadata import SubscriptionGroupConfig
from rocketq.broker.pop.order_info import COMMIT_NOT_NEEDED, Candidate, OrderlySelection
from rocketq.broker.pop.reading import Filter, QueueRead, read_queue
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.client.remoting.message import StoredMessage, decode_stored_message
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX, dlq_topic

__all__ = [
    "GROUP_SCOPE_READ_FACTOR",
    "MAX_GROUP_SCOPE_READ",
    "MAX_GROUP_SCOPE_SCAN",
    "OrderlyBatch",
    "orderly_may_deliver",
    "orderly_pop_queue",
    "settle_ack",
]

#: under ``group`` scope a pop reads this many times maxNums, so held groups can be skipped
GROUP_SCOPE_READ_FACTOR = 4
#: and never more than this many messages in one read
MAX_GROUP_SCOPE_READ = 256
#: nor more than this many in all the reads of one pop of a queue
MAX_GROUP_SCOPE_SCAN = 4096
_DLQ_QUEUE_NUMS = 1


@dataclass(slots=True)
class OrderlyBatch:
    """What an orderly pop of one queue delivers."""

    start_offset: int
    records: list[bytes] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    order_count_info: list[str] = field(default_factory=list)
    rest_num: int = 0


def _read(
    ctx: BrokerContext, group: str, topic: str, queue_id: int, offset: int, n: int, msg_filter: Filter
) -> tuple[QueueRead, set[int] | None, int]:
    """Every message from ``offset`` (up to ``n``), the offsets the filter accepts, the scan limit."""
    max_bytes = ctx.config.max_transfer_bytes_on_message_in_memory
    read = read_queue(ctx.store, group, topic, queue_id, offset, n, max_bytes, None)
    if msg_filter is None:
        return read, None, read.next_begin_offset
    matching = read_queue(ctx.store, group, topic, queue_id, offset, n, max_bytes, msg_filter)
    return read, set(matching.queue_offsets), min(read.next_begin_offset, matching.next_begin_offset)


def _candidates(
    read: QueueRead, accepted: set[int] | None, limit: int
) -> tuple[dict[int, tuple[bytes, StoredMessage]], list[Candidate]]:
    """The read's messages below ``limit`` by offset, and as candidates (group, filter verdict)."""
    messages: dict[int, tuple[bytes, StoredMessage]] = {}
    candidates: list[Candidate] = []
    for record, qo in zip(read.records, read.queue_offsets, strict=True):
        if qo >= limit:
            break
        msg = decode_stored_message(record, decompress=False)
        messages[qo] = (record, msg)
        sharding = dict(msg.properties).get(MessageConst.SHARDING_KEY) or None
        candidates.append(Candidate(qo, sharding, accepted is None or qo in accepted))
    return messages, candidates


class _Scan:
    """The read of an orderly pop of one queue, window by window, and what it may deliver.

    ``queue`` scope: one read of ``maxNums`` from the consumer offset.  ``group`` scope: from past
    the run of acked or in-flight messages at the consumer offset, windows of several times
    ``maxNums`` until ``maxNums`` messages are free, the queue ends, or MAX_GROUP_SCOPE_SCAN
    messages were read (so messages of held groups, however many, do not hide the free ones).
    The caller reads each :meth:`next_read` and gives it to :meth:`add` (in a thread or not).
    """

    def __init__(
        self,
        ctx: BrokerContext,
        *,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        attempt_id: str | None,
        invisible_time: int,
        max_nums: int,
    ) -> None:
        self.ctx, self.group, self.topic, self.queue_id = ctx, group, topic, queue_id
        self.offset, self.attempt_id, self.invisible_time, self.max_nums = (
            offset,
            attempt_id,
            invisible_time,
            max_nums,
        )
        manager = ctx.pop_order
        self.group_scope = manager.scope is PopOrderBlockScope.GROUP
        self.window = (
            min(MAX_GROUP_SCOPE_READ, max_nums * GROUP_SCOPE_READ_FACTOR) if self.group_scope else max_nums
        )
        self.max_offset = ctx.store.get_max_offset_in_queue(topic, queue_id)
        self.start = (
            manager.scan_start(attempt_id, topic, group, queue_id, offset) if self.group_scope else offset
        )
        self.limit = self.start
        self.messages: dict[int, tuple[bytes, StoredMessage]] = {}
        self.candidates: list[Candidate] = []
        self.selection = OrderlySelection(candidates=())
        self._done = False

    def next_read(self) -> tuple[int, int] | None:
        """``(offset, n)`` to read next, or None when the scan is over."""
        return None if self._done else (self.limit, self.window)

    def add(self, read: QueueRead, accepted: set[int] | None, limit: int) -> None:
        """One window's read (:func:`_read`); selects what may be delivered so far."""
        messages, candidates = _candidates(read, accepted, limit)
        self.messages.update(messages)
        self.candidates.extend(candidates)
        progressed = limit > self.limit
        self.limit = max(self.limit, limit)
        if self.candidates:
            self.selection = self.ctx.pop_order.select(
                attempt_id=self.attempt_id,
                topic=self.topic,
                group=self.group,
                queue_id=self.queue_id,
                invisible_time=self.invisible_time,
                consumer_offset=self.offset,
                candidates=self.candidates,
                max_nums=self.max_nums,
            )
        self._done = (
            not self.group_scope
            or not progressed
            or self.limit >= self.max_offset
            or len(self.selection.candidates) >= self.max_nums
            or len(self.candidates) >= MAX_GROUP_SCOPE_SCAN
        )


def orderly_may_deliver(
    ctx: BrokerContext, group: str, topic: str, queue_id: int, attempt_id: str | None
) -> bool:
    """NOTIFICATION of an orderly consumer: False when held messages keep an orderly pop of the
    queue from delivering anything (the caller checks that the queue has messages at all).

    ``queue`` scope: the queue is blocked.  ``group`` scope: while some message group is held, the
    queue is scanned as a pop scans it and asked whether a message is free.
    """
    manager = ctx.pop_order
    if manager.scope is PopOrderBlockScope.QUEUE:
        return not manager.check_block(attempt_id, topic, group, queue_id, 0)
    offset = ctx.offsets.query_offset(group, topic, queue_id)
    if offset < 0 or manager.lock_free_timestamp(topic, group, queue_id) is None:
        return True  # nothing held
    scan = _Scan(
        ctx, group=group, topic=topic, queue_id=queue_id, offset=offset, attempt_id=attempt_id,
        invisible_time=0, max_nums=1,
    )  # fmt: skip
    while (at := scan.next_read()) is not None:
        scan.add(*_read(ctx, group, topic, queue_id, at[0], at[1], None))
    return bool(scan.selection.candidates)


async def orderly_pop_queue(
    ctx: BrokerContext,
    *,
    group: str,
    topic: str,
    queue_id: int,
    offset: int,
    attempt_id: str | None,
    pop_time: int,
    invisible_time: int,
    max_nums: int,
    msg_filter: Filter,
) -> OrderlyBatch:
    """One queue of an orderly pop (the caller holds the queue's pop lock and commits nothing)."""
    manager = ctx.pop_order
    batch = OrderlyBatch(start_offset=offset)
    max_offset = ctx.store.get_max_offset_in_queue(topic, queue_id)
    if manager.check_block(attempt_id, topic, group, queue_id, invisible_time):
        batch.rest_num = max(max_offset - offset, 0)
        return batch
    scan = _Scan(
        ctx, group=group, topic=topic, queue_id=queue_id, offset=offset, attempt_id=attempt_id,
        invisible_time=invisible_time, max_nums=max_nums,
    )  # fmt: skip
    while (at := scan.next_read()) is not None:
        scan.add(*await asyncio.to_thread(_read, ctx, group, topic, queue_id, at[0], at[1], msg_filter))
    group_scope, messages, candidates, limit = scan.group_scope, scan.messages, scan.candidates, scan.limit
    batch.rest_num = max(max_offset - offset, 0)
    if not candidates:
        if limit > offset and not group_scope:
            ctx.offsets.commit_offset(group, topic, queue_id, limit)  # nothing there for this filter
        return batch
    sel = scan.selection
    if not sel.candidates and not sel.filtered:
        if not group_scope and not sel.blocked and all(not c.matches for c in candidates):
            ctx.offsets.commit_offset(group, topic, queue_id, limit)
        return batch
    counts = manager.update(
        attempt_id=attempt_id,
        topic=topic,
        group=group,
        queue_id=queue_id,
        pop_time=pop_time,
        invisible_time=invisible_time,
        popped=sel.candidates,
        filtered=sel.filtered,
    )
    over = _beyond_retry_limit(ctx, group, dict(counts.failed_counts))
    if over:
        await _dead_letter(ctx, group, topic, [messages[o][1] for o in over if o in messages])
        for o in over:
            settle_ack(ctx, group, topic, queue_id, o, pop_time)
    if group_scope:
        committed = manager.consumer_offset(topic, group, queue_id)
        if committed is not None and committed > ctx.offsets.query_offset(group, topic, queue_id):
            ctx.offsets.commit_offset(group, topic, queue_id, committed)
    dead = set(over)
    for c in sel.candidates:
        found = messages.get(c.offset)
        if found is not None and c.offset not in dead:
            batch.records.append(found[0])
            batch.queue_offsets.append(c.offset)
    if batch.records:
        batch.order_count_info = counts.entries(topic, queue_id)
        batch.rest_num = max(max_offset - batch.queue_offsets[-1] - 1, 0)
    return batch


def _retry_max_times(ctx: BrokerContext, group: str) -> int:
    cfg = ctx.groups.find(group)
    return (cfg if cfg is not None else SubscriptionGroupConfig(group_name=group)).retry_max_times


def _beyond_retry_limit(ctx: BrokerContext, group: str, failed: dict[int, int]) -> list[int]:
    """Offsets to dead-letter: those that failed more deliveries than the group's retryMaxTimes."""
    limit = _retry_max_times(ctx, group)
    return sorted(o for o, n in failed.items() if n > limit)


def settle_ack(
    ctx: BrokerContext, group: str, topic: str, queue_id: int, queue_offset: int, pop_time: int
) -> int:
    """An orderly ack of one message: commit what the manager answers; returns its answer.

    Offsets below the consumer offset are already consumed (answer COMMIT_NOT_NEEDED).
    """
    if queue_offset < ctx.offsets.query_offset(group, topic, queue_id):
        return COMMIT_NOT_NEEDED
    nxt = ctx.pop_order.commit_and_next(topic, group, queue_id, queue_offset, pop_time)
    if nxt >= 0 and nxt > ctx.offsets.query_offset(group, topic, queue_id):
        ctx.offsets.commit_offset(group, topic, queue_id, nxt)
    return nxt


async def _dead_letter(ctx: BrokerContext, group: str, topic: str, msgs: list[StoredMessage]) -> None:
    target = dlq_topic(group)
    ctx.topics.create_retry_topic(target, _DLQ_QUEUE_NUMS)
    for msg in msgs:
        props = dict(msg.properties)
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            props.setdefault(MessageConst.RETRY_TOPIC, topic)
        to_store = MessageToStore.copy_of(
            msg,
            topic=target,
            queue_id=0,
            properties=props,
            born_host=ctx.store_host,
            store_host=ctx.store_host,
            reconsume_times=msg.reconsume_times + 1,
            prepared_transaction_offset=0,
        )
        result = await asyncio.to_thread(ctx.store.put_message, to_store)
        if not result.is_ok:
            raise OSError(f"orderly dead letter of {topic} offset {msg.queue_offset}: {result.status.name}")
