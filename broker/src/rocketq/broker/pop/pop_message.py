"""POP_MESSAGE (200050) and PEEK_MESSAGE (200052): hand out messages of any queue without owning it.

Theory of operation (RocketMQ 5's ``PopMessageProcessor``, non-orderly).  A POP names a topic and
a queue (-1 = every queue of the topic, starting from a rotating one), how many messages it wants
(``maxMsgNums`` <= 32) and for how long they stay invisible to other pops (``invisibleTime``).
Each queue read starts at the group's POP offset; what it finds is recorded in a checkpoint (CK)
written to revive queue ``reviveQid`` (round robin over ``reviveQueueNum``) and the POP offset
moves past it — the messages are then in flight until acked or revived (:mod:`.revive`).  A queue
another pop of the same group is reading is skipped, as Java's ``queueLockManager.tryLock``.
The group's POP retry topic is read first with probability ``popFromRetryProbability`` percent,
else after the topic when it yielded fewer than ``maxMsgNums``.  The response body is the records
as PULL returns them; records of a retry topic are re-encoded with the original topic and a
``POP_CK`` property (unless ``popResponseReturnActualRetryTopic``), as Java does.  The header
carries ``popTime``, ``invisibleTime``, ``reviveQid``, ``restNum`` (messages left behind) and the
``startOffsetInfo``/``msgOffsetInfo`` strings the client builds each message's receipt handle
from.  Nothing found: with ``pollTime`` > 0 the pop waits in :class:`.polling.PopLongPolling`
until a message arrives or ``bornTime + pollTime``, then answers POLLING_TIMEOUT (Java's code
for "no message").

Orderly pops (``order=true``) follow :mod:`.orderly`: each queue is read from the consumer offset
under the FIFO rules of the order table, no checkpoint is written, the retry topic is not read,
``reviveQid`` is 999 and ``orderCountInfo`` carries the consumed counts.  A long-polling orderly
pop waits at most until the first held queue's lock frees (Java's
``enableNotifyAfterPopOrderLockRelease``).

PEEK reads the same way but writes nothing and moves no offset.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketq.broker.executor import Busy
from rocketq.broker.pop.appender import put_records
from rocketq.broker.pop.orderly import orderly_pop_queue
from rocketq.broker.pop.polling import PopLongPolling
from rocketq.broker.pop.reading import (
    Filter,
    QueueRead,
    all_retry_topics,
    is_hot,
    pop_offset,
    read_queue,
    retry_topics,
)
from rocketq.broker.pop.records import PopCheckPoint, ck_message
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.broker.processor.pull import compile_sql92_subscription, readable_max_offset
from rocketq.broker.store.status import GetMessageStatus
from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.codes import V5_POLLING_FULL, V5_POLLING_TIMEOUT, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.message import StoredMessage, decode_stored_message, encode_stored_message
from rocketq.client.remoting.pop import (
    POP_ORDER_REVIVE_QUEUE,
    ExtraInfo,
    PeekMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    join_info,
    msg_offset_info_entry,
    start_offset_info_entry,
)
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import (
    ExpressionType,
    build_subscription,
    parse_expression_type,
    revive_topic,
)
from rocketq.server import Channel

__all__ = ["MAX_POP_NUMS", "PopMessageProcessor"]

#: ``maxMsgNums`` above this is refused (INVALID_PARAMETER), as Java does
MAX_POP_NUMS = 32
#: ``PopMessageRequestHeader.isTimeoutTooMuch``: a request older than bornTime + pollTime + this
TIMEOUT_TOO_MUCH_MS = 500
_CORRECTED = frozenset(
    {
        GetMessageStatus.OFFSET_TOO_SMALL,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        GetMessageStatus.OFFSET_FOUND_NULL,
    }
)
_SKIPPED = frozenset(
    {
        GetMessageStatus.NO_MATCHED_MESSAGE,
        GetMessageStatus.OFFSET_FOUND_NULL,
        GetMessageStatus.MESSAGE_WAS_REMOVING,
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
    }
)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class _Popped:
    """What one POP request collected over its queues."""

    pop_time: int
    revive_qid: int
    max_nums: int
    records: list[bytes] = field(default_factory=list)
    start_offset_info: list[str] = field(default_factory=list)
    msg_offset_info: list[str] = field(default_factory=list)
    rest_num: int = 0
    order_count_info: list[str] = field(default_factory=list)

    @property
    def full(self) -> bool:
        return len(self.records) >= self.max_nums


class PopMessageProcessor:
    """Registered for POP_MESSAGE and PEEK_MESSAGE."""

    def __init__(self, ctx: BrokerContext, polling: PopLongPolling) -> None:
        self.ctx = ctx
        self.polling = polling
        self._ck_number = itertools.count()
        self._start_queue = itertools.count()
        self._busy: set[tuple[str, str, int]] = set()  # (topic, group, queue) being popped

    # -- checks ----------------------------------------------------------------------------------
    def _check(
        self, request: RemotingCommand, topic: str, group: str, queue_id: int
    ) -> RemotingCommand | None:
        ctx = self.ctx
        if not ctx.readable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{ctx.broker_addr}] pop message is forbidden"
            )
        if not ctx.config.is_master:
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{ctx.broker_addr}] is a slave: pop from the master (POP state lives there)",
            )
        tc = ctx.topics.select(topic)
        if tc is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not tc.is_readable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden"
            )
        if queue_id >= tc.read_queue_nums:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}] "
                f"consumer:[{group}]",
            )
        sgc = ctx.groups.find(group)
        if sgc is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist"
            )
        if not sgc.consume_enable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )
        return None

    def _filter(self, request: RemotingCommand, header: PopMessageRequestHeader) -> Filter | RemotingCommand:
        if not header.exp:
            return None
        try:
            expression_type = parse_expression_type(header.exp_type)
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        if expression_type is ExpressionType.SQL92:
            compiled = compile_sql92_subscription(self.ctx.config.enable_property_filter, header.exp)
            if isinstance(compiled, str):
                return request.make_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, compiled)
            return compiled
        sub = build_subscription(header.topic, header.exp, expression_type)
        return None if sub.is_all else sub.code_set

    # -- POP -------------------------------------------------------------------------------------
    async def process(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, PopMessageRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        now = _now_ms()
        if now - header.born_time - header.poll_time > TIMEOUT_TOO_MUCH_MS:
            return request.make_response(
                V5_POLLING_TIMEOUT, f"the broker[{self.ctx.broker_addr}] pop message is timeout too much"
            )
        if header.max_msg_nums > MAX_POP_NUMS:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"the broker[{self.ctx.broker_addr}] pop message's num is greater than {MAX_POP_NUMS}",
            )
        refused = self._check(request, header.topic, header.consumer_group, header.queue_id)
        if refused is not None:
            return refused
        msg_filter = self._filter(request, header)
        if isinstance(msg_filter, RemotingCommand):
            return msg_filter
        deadline = min(header.born_time + header.poll_time, now + max(header.poll_time, 0))
        while True:
            try:
                popped = await self._pop(header, msg_filter)
            except Busy as busy:
                self.ctx.stats.busy_rejects += 1
                return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
            if popped.records or header.poll_time <= 0:
                return self._respond(request, header, popped)
            remaining = deadline - _now_ms()
            if remaining <= 0:
                return self._respond(request, header, popped)
            if header.order:
                topics = [header.topic]
                free_at = self._first_lock_free(header)
                if free_at is not None:
                    remaining = max(min(remaining, free_at - _now_ms()), 1)
            else:
                topics = [
                    header.topic,
                    *all_retry_topics(self.ctx.config, header.topic, header.consumer_group),
                ]
            future = self.polling.wait(
                topics, header.consumer_group, remaining, self._recheck(header, topics)
            )
            if future is None:
                return self._respond(request, header, popped, polling_full=True)
            if not await asyncio.shield(future) and not header.order:
                return self._respond(request, header, popped)
            await asyncio.sleep(0)  # woken at once by the recheck: let the other requests run first

    def _queue_ids(self, header: PopMessageRequestHeader) -> list[int]:
        tc = self.ctx.topics.select(header.topic)
        if tc is None:
            return []
        return list(range(tc.read_queue_nums)) if header.queue_id < 0 else [header.queue_id]

    def _first_lock_free(self, header: PopMessageRequestHeader) -> int | None:
        """When the first held queue of an orderly pop frees (None: none is held)."""
        order = self.ctx.pop_order
        times = [
            t
            for qid in self._queue_ids(header)
            if (t := order.lock_free_timestamp(header.topic, header.consumer_group, qid)) is not None
        ]
        return min(times) if times else None

    def _recheck(self, header: PopMessageRequestHeader, topics: list[str]) -> Callable[[], bool]:
        return lambda: self._has_new(header, topics)

    def _has_new(self, header: PopMessageRequestHeader, topics: list[str]) -> bool:
        ctx = self.ctx
        for topic in topics:
            tc = ctx.topics.select(topic)
            if tc is None:
                continue
            queue_ids = (
                range(tc.read_queue_nums)
                if header.queue_id < 0 or topic != header.topic
                else [header.queue_id]
            )
            for qid in queue_ids:
                if (topic, header.consumer_group, qid) in self._busy:
                    continue  # the pop reading it takes what is there
                if header.order and ctx.pop_order.lock_free_timestamp(topic, header.consumer_group, qid):
                    continue  # held: the wait ends when its lock frees
                offset = ctx.offsets.query_offset(header.consumer_group, topic, qid)
                if offset < readable_max_offset(ctx.store, topic, qid):
                    return True
        return False

    def _respond(
        self,
        request: RemotingCommand,
        header: PopMessageRequestHeader,
        popped: _Popped,
        *,
        polling_full: bool = False,
    ) -> RemotingCommand:
        response_header = PopMessageResponseHeader(
            pop_time=popped.pop_time,
            invisible_time=header.invisible_time,
            revive_qid=popped.revive_qid,
            rest_num=popped.rest_num,
            start_offset_info=join_info(popped.start_offset_info),
            msg_offset_info=join_info(popped.msg_offset_info),
            order_count_info=join_info(popped.order_count_info) if header.order else None,
        )
        fields = response_header.to_ext_fields()
        if popped.records:
            ctx = self.ctx
            ctx.stats.get_found += 1
            ctx.stats.get_messages += len(popped.records)
            body = b"".join(popped.records)
            return request.make_response(ResponseCode.SUCCESS, GetMessageStatus.FOUND.name, fields, body)
        code = V5_POLLING_FULL if polling_full else V5_POLLING_TIMEOUT
        return request.make_response(code, GetMessageStatus.NO_MESSAGE_IN_QUEUE.name, fields)

    async def _pop(self, header: PopMessageRequestHeader, msg_filter: Filter) -> _Popped:
        if header.order:
            return await self._pop_orderly(header, msg_filter)
        cfg = self.ctx.config
        random_q = random.randrange(100)
        popped = _Popped(
            pop_time=_now_ms(),
            revive_qid=next(self._ck_number) % cfg.revive_queue_num,
            max_nums=max(1, header.max_msg_nums),
        )
        need_retry = random_q < cfg.pop_from_retry_probability
        retry = retry_topics(cfg, header.topic, header.consumer_group, random_q)
        if need_retry:
            await self._pop_topics(retry, header, msg_filter, popped, is_retry=True)
        if header.queue_id < 0:
            await self._pop_topics([header.topic], header, msg_filter, popped, is_retry=False)
        else:
            await self._pop_queue(header.topic, header.queue_id, header, msg_filter, popped, is_retry=False)
        if not need_retry and not popped.full:
            await self._pop_topics(retry, header, msg_filter, popped, is_retry=True)
        return popped

    async def _pop_orderly(self, header: PopMessageRequestHeader, msg_filter: Filter) -> _Popped:
        popped = _Popped(
            pop_time=_now_ms(), revive_qid=POP_ORDER_REVIVE_QUEUE, max_nums=max(1, header.max_msg_nums)
        )
        queue_ids = self._queue_ids(header)
        if header.queue_id < 0 and queue_ids:
            first = next(self._start_queue) % len(queue_ids)
            queue_ids = queue_ids[first:] + queue_ids[:first]
        for qid in queue_ids:
            await self._pop_orderly_queue(header, qid, msg_filter, popped)
        return popped

    def _claim(self, key: tuple[str, str, int], init_mode: int, popped: _Popped) -> bool:
        """Take queue ``key`` (topic, group, queue id) for this pop; when another pop is reading it
        or this pop is full, only count its messages left (``restNum``) and return False.  The
        caller releases the claim (``self._busy``) when done."""
        topic, group, queue_id = key
        if key in self._busy or popped.full:
            popped.rest_num += self._left(topic, group, queue_id, init_mode)
            return False
        self._busy.add(key)
        return True

    def _left(self, topic: str, group: str, queue_id: int, init_mode: int) -> int:
        """The messages of a queue past the group's POP offset (its share of ``restNum``)."""
        ctx = self.ctx
        offset = pop_offset(
            ctx.store, ctx.offsets, ctx.config, group, topic, queue_id, init_mode, commit_init=False
        )
        return max(ctx.store.get_max_offset_in_queue(topic, queue_id) - offset, 0)

    async def _pop_orderly_queue(
        self, header: PopMessageRequestHeader, queue_id: int, msg_filter: Filter, popped: _Popped
    ) -> None:
        ctx = self.ctx
        group, topic = header.consumer_group, header.topic
        key = (topic, group, queue_id)
        store = ctx.store
        if not self._claim(key, header.init_mode, popped):
            return
        try:
            offset = pop_offset(
                store, ctx.offsets, ctx.config, group, topic, queue_id, header.init_mode, commit_init=True
            )
            low = store.get_min_offset_in_queue(topic, queue_id)
            if offset < low:  # the offset left the queue's range: start again at its minimum
                ctx.pop_order.clear_block(topic, group, queue_id)
                offset = low
                ctx.offsets.commit_offset(group, topic, queue_id, offset)
            batch = await orderly_pop_queue(
                ctx,
                group=group,
                topic=topic,
                queue_id=queue_id,
                offset=offset,
                attempt_id=header.attempt_id,
                pop_time=popped.pop_time,
                invisible_time=header.invisible_time,
                max_nums=popped.max_nums - len(popped.records),
                msg_filter=msg_filter,
            )
            popped.rest_num += batch.rest_num
            if batch.records:
                size = sum(len(r) for r in batch.records)  # mqadmin statsAll, per queue read as Java
                ctx.stats_items.record_get(group, topic, len(batch.records), size)
                popped.start_offset_info.append(start_offset_info_entry(topic, queue_id, batch.start_offset))
                popped.msg_offset_info.append(msg_offset_info_entry(topic, queue_id, batch.queue_offsets))
                popped.order_count_info.extend(batch.order_count_info)
                popped.records.extend(batch.records)
        finally:
            self._busy.discard(key)

    async def _pop_topics(
        self,
        topics: list[str],
        header: PopMessageRequestHeader,
        msg_filter: Filter,
        popped: _Popped,
        *,
        is_retry: bool,
    ) -> None:
        for topic in topics:
            tc = self.ctx.topics.select(topic)
            if tc is None:
                continue
            n = tc.read_queue_nums
            first = next(self._start_queue)
            for i in range(n):
                queue_id = (first + i) % n
                if popped.full:  # (what _claim does for a full pop, without a coroutine per queue)
                    popped.rest_num += self._left(topic, header.consumer_group, queue_id, header.init_mode)
                else:
                    await self._pop_queue(topic, queue_id, header, msg_filter, popped, is_retry=is_retry)

    async def _pop_queue(
        self,
        topic: str,
        queue_id: int,
        header: PopMessageRequestHeader,
        msg_filter: Filter,
        popped: _Popped,
        *,
        is_retry: bool,
    ) -> None:
        ctx = self.ctx
        group = header.consumer_group
        key = (topic, group, queue_id)
        store = ctx.store
        if not self._claim(key, header.init_mode, popped):
            return
        try:
            offset = pop_offset(
                store, ctx.offsets, ctx.config, group, topic, queue_id, header.init_mode, commit_init=True
            )
            read = await self._read(
                topic, queue_id, offset, popped.max_nums - len(popped.records), group, msg_filter
            )
            if read.status in _CORRECTED and read.next_begin_offset != offset:
                offset = read.next_begin_offset  # the offset left the queue's range: start again there
                ctx.offsets.commit_offset(group, topic, queue_id, offset)
                read = await self._read(
                    topic, queue_id, offset, popped.max_nums - len(popped.records), group, msg_filter
                )
            if read.records:
                if not await self._append_checkpoint(header, topic, queue_id, offset, read, popped):
                    popped.rest_num += max(read.max_offset - offset, 0)
                    return
                ctx.offsets.commit_offset(group, topic, queue_id, read.next_begin_offset)
                self._add(header, topic, queue_id, offset, read, popped, is_retry=is_retry)
            elif read.status in _SKIPPED and read.next_begin_offset > offset:
                ctx.offsets.commit_offset(group, topic, queue_id, read.next_begin_offset)  # Java's addCkMock
            popped.rest_num += max(read.max_offset - read.next_begin_offset, 0)
        finally:
            self._busy.discard(key)

    async def _read(
        self, topic: str, queue_id: int, offset: int, max_nums: int, group: str, msg_filter: Filter
    ) -> QueueRead:
        ctx = self.ctx
        store = ctx.store
        max_bytes = ctx.config.max_transfer_bytes_on_message_in_memory

        def read() -> QueueRead:
            return read_queue(store, group, topic, queue_id, offset, max_nums, max_bytes, msg_filter)

        if is_hot(store, topic, queue_id, offset, msg_filter):
            return read()
        return await ctx.pull_executor.run(read)

    async def _append_checkpoint(
        self,
        header: PopMessageRequestHeader,
        topic: str,
        queue_id: int,
        offset: int,
        read: QueueRead,
        popped: _Popped,
    ) -> bool:
        """Write the batch's checkpoint to its revive queue (``appendCheckPoint``); False if it failed."""
        ctx = self.ctx
        ck = PopCheckPoint(
            start_offset=offset,
            pop_time=popped.pop_time,
            invisible_time=header.invisible_time,
            queue_id=queue_id,
            topic=topic,
            cid=header.consumer_group,
            queue_offset_diff=tuple(qo - offset for qo in read.queue_offsets),
            broker_name=ctx.config.broker_name,
        )
        msg = ck_message(
            ck,
            revive_topic=revive_topic(ctx.config.broker_cluster_name),
            revive_qid=popped.revive_qid,
            now_ms=_now_ms(),
            store_host=ctx.store_host,
        )
        (result,) = await put_records(ctx, [msg])
        return result.is_ok

    def _add(
        self,
        header: PopMessageRequestHeader,
        topic: str,
        queue_id: int,
        offset: int,
        read: QueueRead,
        popped: _Popped,
        *,
        is_retry: bool,
    ) -> None:
        if read.records:  # mqadmin statsAll: per queue read, under the topic read (retry too), as Java
            size = sum(len(r) for r in read.records)
            self.ctx.stats_items.record_get(header.consumer_group, topic, len(read.records), size)
        popped.start_offset_info.append(start_offset_info_entry(topic, queue_id, offset))
        popped.msg_offset_info.append(msg_offset_info_entry(topic, queue_id, read.queue_offsets))
        if not is_retry or self.ctx.config.pop_response_return_actual_retry_topic:
            popped.records.extend(read.records)
            return
        broker_name = self.ctx.config.broker_name
        for record in read.records:
            msg = decode_stored_message(record, decompress=False)
            props = dict(msg.properties)
            handle = ExtraInfo.build(
                ck_queue_offset=offset,
                pop_time=popped.pop_time,
                invisible_time=header.invisible_time,
                revive_qid=popped.revive_qid,
                topic=msg.topic,
                broker_name=broker_name,
                queue_id=msg.queue_id,
                queue_offset=msg.queue_offset,
            )
            props.setdefault(MessageConst.POP_CK, str(handle))
            popped.records.append(_reencoded(msg, header.topic, props))

    # -- PEEK ------------------------------------------------------------------------------------
    async def peek(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, PeekMessageRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        if header.max_msg_nums > MAX_POP_NUMS:
            return request.make_response(
                ResponseCode.INVALID_PARAMETER, f"peek message's num is greater than {MAX_POP_NUMS}"
            )
        refused = self._check(request, header.topic, header.consumer_group, header.queue_id)
        if refused is not None:
            return refused
        ctx = self.ctx
        group = header.consumer_group
        want = max(1, header.max_msg_nums)
        records: list[bytes] = []
        rest = 0
        topics = [*all_retry_topics(ctx.config, header.topic, group), header.topic]
        for topic in topics:
            tc = ctx.topics.select(topic)
            if tc is None:
                continue
            queue_ids = (
                range(tc.read_queue_nums)
                if header.queue_id < 0 or topic != header.topic
                else [header.queue_id]
            )
            for qid in queue_ids:
                offset = pop_offset(
                    ctx.store, ctx.offsets, ctx.config, group, topic, qid, 0, commit_init=False
                )
                if len(records) < want:
                    read = await self._read(topic, qid, offset, want - len(records), group, None)
                    records.extend(read.records)
                    rest += max(read.max_offset - read.next_begin_offset, 0)
                else:
                    rest += max(ctx.store.get_max_offset_in_queue(topic, qid) - offset, 0)
        response_header = PopMessageResponseHeader(
            pop_time=_now_ms(), invisible_time=0, revive_qid=0, rest_num=rest
        )
        fields = response_header.to_ext_fields()
        if not records:
            return request.make_response(
                ResponseCode.PULL_NOT_FOUND, GetMessageStatus.NO_MESSAGE_IN_QUEUE.name, fields
            )
        return request.make_response(
            ResponseCode.SUCCESS, GetMessageStatus.FOUND.name, fields, b"".join(records)
        )


def _reencoded(msg: StoredMessage, topic: str, props: dict[str, str]) -> bytes:
    """A retry-topic record as the original ``topic`` with ``props`` (Java's ``MessageDecoder.encode``)."""
    return encode_stored_message(
        topic=topic,
        queue_id=msg.queue_id,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        store_host=msg.store_host,
        body=msg.body,
        flag=msg.flag,
        queue_offset=msg.queue_offset,
        physical_offset=msg.physical_offset,
        sys_flag=msg.sys_flag,
        store_timestamp=msg.store_timestamp,
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
        properties=props,
    )
