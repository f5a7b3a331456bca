"""The revive service: POP messages not acked within their invisible time go back to the consumers.

Theory of operation.  Every POP writes a checkpoint (CK) and every ACK an ack record (AK) to the
revive topic (:mod:`.records`); the CommitLog is the only place POP state lives, so a SIGKILL
loses none of it.  Per revive queue the service reads the records in order from its committed
offset and keeps, in memory, the checkpoints not yet resolved together with the offsets acked in
them.  A record is due at its ``TIMER_DELIVER_MS`` (``TIMER_OUT_MS`` when it came through the
timer wheel).  The service is correct whichever way the records arrive:

* straight away (no timer wheel in between): the pending checkpoint waits here until its revive
  time (``popTime + invisibleTime``); every ack written before then has been read by then;
* at their deliver time (through the timer wheel, as in RocketMQ): the checkpoint arrives one
  second before its revive time and its acks at the revive time, so a checkpoint that came
  through the wheel is revived only :data:`TIMER_ACK_GRACE_MS` after its revive time.

A checkpoint is resolved when all its messages are acked, or at its revive time (plus
:data:`ACK_GRACE_MS`, which covers an ack's dispatch): each un-acked message is read from its
queue and written again to the POP retry topic (``%RETRY%group_topic``, or ``%RETRY%group+topic``
with ``enableRetryTopicV2``), queue 0, ``RECONSUME_TIMES`` + 1, ``1ST_POP_TIME`` set on the first
retry, as Java's ``PopReviveService.reviveRetry``.  rocketq goes beyond Java here: once the new
reconsume count exceeds the group's ``retryMaxTimes`` the message goes to ``%DLQ%group`` instead
(Java leaves that to the gRPC proxy or the client).  The service then writes a batch ack of the
revived offsets to the revive queue, so a replay after a crash does not revive them again.

Progress is the consumer offset of ``CID_RMQ_SYS_REVIVE_GROUP`` on each revive queue: the offset
of the oldest checkpoint still pending (or the read position when none is).  It is persisted with
the other consumer offsets, so the next start replays every checkpoint that was not resolved.
Replaying also raises each queue's POP offset to the end of the batches its checkpoints name:
consumer offsets are persisted every ``flushConsumerOffsetInterval``, and without this a restart
would hand out again messages popped (and perhaps acked) since the last flush.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketq.broker.metadata import SubscriptionGroupConfig
from rocketq.broker.pop.reading import pop_retry_topic
from rocketq.broker.pop.records import (
    AckMsg,
    PopCheckPoint,
    ReviveRecordError,
    ack_message,
    decode_record,
)
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.store.status import GetMessageStatus
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import StoredMessage, decode_stored_message, record_header_fields
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.record_layout import COMPRESSED_FLAG
from rocketq.client.remoting.vocabulary import (
    RETRY_GROUP_TOPIC_PREFIX,
    REVIVE_GROUP,
    dlq_topic,
    revive_topic,
)
from rocketq.client.transport.cancel import cancel_and_wait

__all__ = ["ACK_GRACE_MS", "TIMER_ACK_GRACE_MS", "ReviveService", "original_topic"]

log = logging.getLogger(__name__)

#: a checkpoint read straight from the revive topic is revived this long after its revive time
ACK_GRACE_MS = 1_000
#: ... and one that came through the timer wheel this long (its acks arrive at the revive time)
TIMER_ACK_GRACE_MS = 2_000
#: acks for checkpoints not (or no longer) pending are kept this long after their deliver time
ORPHAN_ACK_KEEP_MS = 10_000
READ_BATCH_MSGS = 256
READ_BATCH_BYTES = 4 * 1024 * 1024
#: POP retry topics have one queue (``PopAckConstants.retryQueueNum``)
RETRY_QUEUE_NUMS = 1
#: stop reading a revive queue in one round after this many records (the next round goes on)
MAX_RECORDS_PER_ROUND = 50_000

CkKey = tuple[str, int, int, int, str]  # topic, queueId, startOffset, popTime, group


def _now_ms() -> int:
    return int(time.time() * 1000)


def original_topic(topic: str, group: str) -> str:
    """The topic a POP retry topic of ``group`` stands for (``topic`` itself if it is not one)."""
    for sep in ("_", "+"):
        prefix = f"{RETRY_GROUP_TOPIC_PREFIX}{group}{sep}"
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return topic


@dataclass(slots=True)
class _Pending:
    ck: PopCheckPoint
    revive_offset: int  # the checkpoint's offset in its revive queue
    due_ms: int
    acked: set[int] = field(default_factory=set)

    @property
    def done(self) -> bool:
        return all(o in self.acked for o in self.ck.queue_offsets)


@dataclass(slots=True)
class _ReviveQueue:
    """What one revive queue's reader knows: its read position and the unresolved checkpoints."""

    read_offset: int
    pending: dict[CkKey, _Pending] = field(default_factory=dict)
    by_offset: list[tuple[int, CkKey]] = field(default_factory=list)  # heap of revive offsets
    orphans: dict[CkKey, tuple[set[int], int]] = field(default_factory=dict)  # acks, keep until

    def committed_offset(self) -> int:
        while self.by_offset:
            offset, key = self.by_offset[0]
            p = self.pending.get(key)
            if p is not None and p.revive_offset == offset:
                return offset
            heapq.heappop(self.by_offset)
        return self.read_offset


def _ck_key(ck: PopCheckPoint) -> CkKey:
    return (ck.topic, ck.queue_id, ck.start_offset, ck.pop_time, ck.cid)


def _ack_key(ack: AckMsg) -> CkKey:
    return (ack.topic, ack.queue_id, ack.start_offset, ack.pop_time, ack.consumer_group)


@dataclass(frozen=True, slots=True)
class _Record:
    revive_offset: int
    record: PopCheckPoint | AckMsg
    due_ms: int
    timer_fed: bool


class ReviveService:
    """Reads the revive topic, revives due checkpoints and commits its progress (on the event loop)."""

    def __init__(
        self,
        ctx: BrokerContext,
        *,
        clock: Callable[[], int] = _now_ms,
        on_revived: Callable[[int, int], None] | None = None,
    ) -> None:
        """``on_revived(retried, dead_lettered)`` is told the counts of each round (metrics, tests)."""
        self.ctx = ctx
        self.clock = clock
        self.on_revived = on_revived
        self.topic = revive_topic(ctx.config.broker_cluster_name)
        self.queues: dict[int, _ReviveQueue] = {}
        self.revived = 0
        self.dead_lettered = 0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Replay the revive log (:meth:`recover`), then revive every ``reviveInterval`` ms."""
        await self.recover()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pop-revive")

    async def recover(self) -> None:
        """Create the revive topic and replay every revive queue from its committed offset."""
        n = self.ctx.config.revive_queue_num
        self.ctx.topics.create_retry_topic(self.topic, n)
        for qid in range(n):
            committed = self.ctx.offsets.query_offset(REVIVE_GROUP, self.topic, qid)
            start = max(committed, self.ctx.store.get_min_offset_in_queue(self.topic, qid), 0)
            self.queues[qid] = _ReviveQueue(read_offset=start)
        for qid in range(n):
            await self._read_queue(qid, replay=True)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)  # a cancellation dropped by wait_for (a wake) is repeated
        self._commit()

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        interval_s = self.ctx.config.revive_interval_ms / 1000.0
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=interval_s)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.run_round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("revive round failed; retried in %.1f s", interval_s)

    async def run_round(self) -> int:
        """Read every revive queue to its end, revive what is due, commit; the messages revived."""
        total = 0
        for qid in list(self.queues):
            await self._read_queue(qid, replay=False)
            total += await self._revive_due(qid)
        self._commit()
        return total

    def pending_count(self) -> int:
        """Checkpoints not resolved yet (POP batches in flight)."""
        return sum(len(q.pending) for q in self.queues.values())

    # -- reading ---------------------------------------------------------------------------------
    async def _read_queue(self, qid: int, *, replay: bool) -> None:
        """Read the queue to its end; a round stops after ``MAX_RECORDS_PER_ROUND`` records (the
        next round goes on), a replay does not: every POP offset must be raised before pops are served."""
        rq = self.queues[qid]
        batches = 0
        while replay or batches < MAX_RECORDS_PER_ROUND // READ_BATCH_MSGS:
            batches += 1
            records, next_offset = await asyncio.to_thread(self._read_batch, qid, rq.read_offset)
            for rec in records:
                self._apply(rq, rec, replay=replay)
            if not replay:
                for rec in records:
                    self.ctx.pop_stats.record_revive_read(rec.record, qid)
            if next_offset == rq.read_offset:
                return
            rq.read_offset = next_offset

    def _read_batch(self, qid: int, offset: int) -> tuple[list[_Record], int]:
        """Decode the records from ``offset`` (worker thread: reads only)."""
        result = self.ctx.store.get_message(
            REVIVE_GROUP, self.topic, qid, offset, READ_BATCH_MSGS, READ_BATCH_BYTES
        )
        try:
            if result.status is not GetMessageStatus.FOUND:
                if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_FOUND_NULL):
                    return [], max(result.next_begin_offset, offset)
                return [], offset  # at the end (or nothing readable yet)
            out: list[_Record] = []
            for queue_offset, buf in zip(result.queue_offsets, result.buffers, strict=True):
                rec = _decode(buf, queue_offset)
                if rec is not None:
                    out.append(rec)
            return out, result.next_begin_offset
        finally:
            result.release()

    def _apply(self, rq: _ReviveQueue, rec: _Record, *, replay: bool) -> None:
        record = rec.record
        if isinstance(record, PopCheckPoint):
            if replay:  # the pop offset persisted may be older than this checkpoint
                self._raise_pop_offset(record)
            key = _ck_key(record)
            grace = TIMER_ACK_GRACE_MS if rec.timer_fed else ACK_GRACE_MS
            pending = _Pending(record, rec.revive_offset, record.revive_time + grace)
            orphan = rq.orphans.pop(key, None)
            if orphan is not None:
                pending.acked.update(orphan[0])
            if pending.done:
                return
            rq.pending[key] = pending
            heapq.heappush(rq.by_offset, (rec.revive_offset, key))
            return
        key = _ack_key(record)
        p = rq.pending.get(key)
        if p is None:
            acked, _ = rq.orphans.get(key, (set(), 0))
            acked.update(record.offsets)
            rq.orphans[key] = (acked, rec.due_ms + ORPHAN_ACK_KEEP_MS)
            return
        p.acked.update(record.offsets)
        if p.done:
            del rq.pending[key]

    def _raise_pop_offset(self, ck: PopCheckPoint) -> None:
        offsets = self.ctx.offsets
        if offsets.query_offset(ck.cid, ck.topic, ck.queue_id) < ck.end_offset:
            offsets.commit_offset(ck.cid, ck.topic, ck.queue_id, ck.end_offset)

    # -- reviving --------------------------------------------------------------------------------
    async def _revive_due(self, qid: int) -> int:
        rq = self.queues[qid]
        now = self.clock()
        rq.orphans = {k: v for k, v in rq.orphans.items() if v[1] > now}
        due = [p for p in rq.pending.values() if p.due_ms <= now]
        count = 0
        for p in sorted(due, key=lambda p: p.revive_offset):
            revived = await self._revive(p)
            if revived is None:
                continue  # a put failed: retried next round
            count += len(revived)
            if revived:
                await self._ack_revived(qid, p.ck, revived)
            rq.pending.pop(_ck_key(p.ck), None)
        return count

    async def _revive(self, p: _Pending) -> list[int] | None:
        """Re-put the checkpoint's un-acked messages; their offsets, or None when a put failed."""
        ck = p.ck
        group = self.ctx.groups.find(ck.cid)
        revived: list[int] = []
        for offset in ck.queue_offsets:
            if offset in p.acked:
                continue
            msg = await asyncio.to_thread(self._look, ck.topic, ck.queue_id, offset)
            if msg is None:
                log.warning("revive: %s queue %d offset %d is gone; skipped", ck.topic, ck.queue_id, offset)
                continue
            to_store, dead = self._retry_message(ck, msg, group)
            result = await asyncio.to_thread(self.ctx.store.put_message, to_store)
            self.ctx.pop_stats.record_revived(ck, result.status.name, ok=result.is_ok)
            if not result.is_ok:
                log.warning("revive: put to %s failed (%s); retried", to_store.topic, result.status.name)
                return None
            revived.append(offset)
            if result.append_result is not None:  # mqadmin statsAll: Java counts the re-put
                self.ctx.stats_items.record_put(to_store.topic, 1, result.append_result.wrote_bytes)
            if dead:
                self.dead_lettered += 1
                if self.ctx.metrics is not None:
                    self.ctx.metrics.record_dlq(ck.cid, original_topic(ck.topic, ck.cid))
            else:
                self.revived += 1
        if self.on_revived is not None:
            self.on_revived(self.revived, self.dead_lettered)
        return revived

    def _look(self, topic: str, queue_id: int, offset: int) -> StoredMessage | None:
        result = self.ctx.store.get_message(REVIVE_GROUP, topic, queue_id, offset, 1, READ_BATCH_BYTES)
        try:
            if not result.buffers or (result.queue_offsets and result.queue_offsets[0] != offset):
                return None
            return decode_stored_message(result.buffers[0])
        except MessageFormatError:
            return None
        finally:
            result.release()

    def _retry_message(
        self, ck: PopCheckPoint, msg: StoredMessage, group: SubscriptionGroupConfig | None
    ) -> tuple[MessageToStore, bool]:
        """The message to put for an un-acked one, and whether it is a dead letter."""
        ctx = self.ctx
        reconsume = msg.reconsume_times + 1
        props = dict(msg.properties)
        if msg.reconsume_times == 0 or MessageConst.FIRST_POP_TIME not in props:
            props[MessageConst.FIRST_POP_TIME] = str(ck.pop_time)
        max_times = (
            group.retry_max_times
            if group is not None
            else SubscriptionGroupConfig(group_name=ck.cid).retry_max_times
        )
        dead = reconsume > max_times
        if dead:
            props.setdefault(MessageConst.RETRY_TOPIC, original_topic(ck.topic, ck.cid))
            topic = dlq_topic(ck.cid)
        elif ck.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            topic = ck.topic
        else:
            topic = pop_retry_topic(ck.topic, ck.cid, v2=ctx.config.enable_retry_topic_v2)
        ctx.topics.create_retry_topic(topic, RETRY_QUEUE_NUMS)
        to_store = MessageToStore.copy_of(
            msg,
            topic=topic,
            queue_id=0,
            properties=props,
            born_host=ctx.store_host,
            store_host=ctx.store_host,
            reconsume_times=reconsume,
            prepared_transaction_offset=0,
        )
        return to_store, dead

    async def _ack_revived(self, qid: int, ck: PopCheckPoint, offsets: list[int]) -> None:
        """Mark revived offsets acked in the revive log, so a replay does not revive them again."""
        ack = AckMsg(
            ack_offset=-1,
            start_offset=ck.start_offset,
            consumer_group=ck.cid,
            topic=ck.topic,
            queue_id=ck.queue_id,
            pop_time=ck.pop_time,
            broker_name=ck.broker_name,
            ack_offsets=tuple(offsets),
        )
        to_store = ack_message(
            ack,
            invisible_time=ck.invisible_time,
            revive_topic=self.topic,
            revive_qid=qid,
            now_ms=self.clock(),
            store_host=self.ctx.store_host,
        )
        result = await asyncio.to_thread(self.ctx.store.put_message, to_store)
        if not result.is_ok:  # a replay may revive these again: at least once
            log.warning("revive: cannot record the revived offsets of %s (%s)", ck.unique_id(), result.status)

    def _commit(self) -> None:
        for qid, rq in self.queues.items():
            self.ctx.offsets.commit_offset(REVIVE_GROUP, self.topic, qid, rq.committed_offset())


def _decode(buf: memoryview, revive_offset: int) -> _Record | None:
    try:
        head = record_header_fields(buf)  # (no hosts, no body copy: a revive round reads thousands)
        props = head.properties
        if head.sys_flag & COMPRESSED_FLAG:
            body = decode_stored_message(buf).body
        else:
            body = bytes(buf[head.body_pos : head.body_pos + head.body_length])
        record = decode_record(props.get(MessageConst.TAGS), body)
    except (MessageFormatError, ReviveRecordError) as exc:
        log.error("revive log offset %d skipped: %s", revive_offset, exc)
        return None
    timer_out = props.get(MessageConst.TIMER_OUT_MS)
    due_text = timer_out or props.get(MessageConst.TIMER_DELIVER_MS)
    due_ms = int(due_text) if due_text and due_text.lstrip("-").isdigit() else head.store_timestamp
    return _Record(revive_offset, record, due_ms, timer_out is not None)
