"""ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and CHANGE_MESSAGE_INVISIBLETIME (200053).

Theory of operation (RocketMQ 5's ``AckMessageProcessor`` and ``ChangeInvisibleTimeProcessor``,
non-orderly).  An ack names the message by its real topic (the POP retry topic for a retried
message), queue id and queue offset, and its checkpoint by the handle (``extraInfo``: the
checkpoint's start offset, popTime, invisibleTime, revive queue and broker name).  The broker
writes an ack record (:class:`~.records.AckMsg`) to that revive queue; the revive service
(:mod:`.revive`) matches it with the checkpoint, so the message is not revived.  A batch ack
carries, per checkpoint, a bit set of acked offsets relative to its start and is written as one
``BatchAckMsg``.  Acks of a message already revived or acked are written all the same and
answered SUCCESS, as Java does (the revive service ignores them).

A change of invisible time first writes a new checkpoint of that one message (starting at its own
offset, ``popTime`` = now, the new ``invisibleTime``, the same revive queue), then acks it in the
old checkpoint; the response carries the new ``popTime``/``invisibleTime``/``reviveQid`` from
which the client builds the new handle.

Orderly handles (``reviveQid`` 999, :mod:`.orderly`) write no revive record: an ack of an offset
below the consumer offset is answered SUCCESS; otherwise ``commit_and_next`` of the order table
answers the consumer offset to commit (then pops waiting on the topic are woken when the queue is
no longer blocked), COMMIT_NOT_NEEDED (a stale popTime: SUCCESS, nothing committed) or
COMMIT_ILLEGAL (MESSAGE_ILLEGAL).  A batch ack does the same per offset.  A change of invisible
time sets the offset's next visible time in the order table (no checkpoint) and answers popTime
unchanged with invisibleTime = next visible time - popTime, as Java's ChangeInvisibleTimeProcessor.
"""

from __future__ import annotations

import time

from rocketq.broker.executor import Busy
from rocketq.broker.pop.appender import put_records
from rocketq.broker.pop.order_info import COMMIT_ILLEGAL
from rocketq.broker.pop.orderly import settle_ack
from rocketq.broker.pop.records import AckMsg, PopCheckPoint, ack_message, ck_message
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.client.errors import HeaderError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.pop import (
    POP_ORDER_REVIVE_QUEUE,
    AckMessageRequestHeader,
    BatchAck,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    real_topic,
)
from rocketq.client.remoting.vocabulary import revive_topic
from rocketq.server import Channel

__all__ = ["AckMessageProcessor"]


def _now_ms() -> int:
    return int(time.time() * 1000)


class AckMessageProcessor:
    """Registered for ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.revive_topic = revive_topic(ctx.config.broker_cluster_name)

    def _check_queue(
        self, request: RemotingCommand, topic: str, queue_id: int, offset: int, *, inclusive_max: bool
    ) -> RemotingCommand | None:
        ctx = self.ctx
        if not ctx.config.is_master:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the broker[{ctx.broker_addr}] is a slave: ack on the master"
            )
        tc = ctx.topics.select(topic)
        if tc is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not 0 <= queue_id < tc.read_queue_nums:
            return request.make_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}]",
            )
        low = ctx.store.get_min_offset_in_queue(topic, queue_id)
        high = ctx.store.get_max_offset_in_queue(topic, queue_id)
        if offset < low or offset > high or (offset == high and not inclusive_max):
            return request.make_response(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{low}~{high}",
            )
        return None

    def _revive_qid_ok(self, request: RemotingCommand, revive_qid: int) -> RemotingCommand | None:
        if 0 <= revive_qid < self.ctx.config.revive_queue_num:
            return None
        return request.make_response(
            ResponseCode.INVALID_PARAMETER,
            f"reviveQid {revive_qid} of the handle is outside 0..{self.ctx.config.revive_queue_num - 1} "
            "(reviveQueueNum): pass the handle a pop returned, unchanged",
        )

    async def _put(self, request: RemotingCommand, msgs: list[MessageToStore]) -> RemotingCommand | None:
        """Store the records; None when stored, else the error response."""
        ctx = self.ctx
        try:
            results = await put_records(ctx, msgs)
        except Busy as busy:
            ctx.stats.busy_rejects += 1
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        for result in results:
            if not result.is_ok:
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR, f"put ack/checkpoint failed: {result.status.name}"
                )
        return None

    def _ack_record(self, ack: AckMsg, invisible_time: int, revive_qid: int) -> MessageToStore:
        return ack_message(
            ack,
            invisible_time=invisible_time,
            revive_topic=self.revive_topic,
            revive_qid=revive_qid,
            now_ms=_now_ms(),
            store_host=self.ctx.store_host,
        )

    # -- ACK_MESSAGE / BATCH_ACK_MESSAGE ---------------------------------------------------------
    async def process(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        if request.code == RequestCode.BATCH_ACK_MESSAGE:
            return await self._batch_ack(request)
        header = parse_header(request, AckMessageRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        refused = self._check_queue(request, header.topic, header.queue_id, header.offset, inclusive_max=True)
        if refused is not None:
            return refused
        try:
            info = ExtraInfo.parse(header.extra_info)
        except HeaderError as exc:
            return request.make_response(ResponseCode.INVALID_PARAMETER, str(exc))
        if info.is_order:
            return self._orderly_ack(
                request, header.consumer_group, header.topic, header.queue_id, [header.offset], info.pop_time
            )
        bad = self._revive_qid_ok(request, info.revive_qid)
        if bad is not None:
            return bad
        ack = _ack_of(header, info)
        failed = await self._put(request, [self._ack_record(ack, info.invisible_time, info.revive_qid)])
        return failed or request.make_response(ResponseCode.SUCCESS)

    async def _batch_ack(self, request: RemotingCommand) -> RemotingCommand:
        try:
            body = BatchAckMessageRequestBody.decode(request.body) if request.body else None
        except HeaderError as exc:
            return request.make_response(ResponseCode.INVALID_PARAMETER, str(exc))
        if body is None or not body.acks:
            return request.make_response(ResponseCode.NO_MESSAGE, "BATCH_ACK_MESSAGE without acks")
        if not self.ctx.config.is_master:
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.ctx.broker_addr}] is a slave: ack on the master",
            )
        msgs: list[MessageToStore] = []
        for back in body.acks:
            if back.revive_queue_id == POP_ORDER_REVIVE_QUEUE:
                topic = real_topic(back.topic, back.consumer_group, back.retry_flag)
                offsets = [back.start_offset + i for i in back.ack_indexes]
                illegal = self._orderly_ack(
                    request, back.consumer_group, topic, back.queue_id, offsets, back.pop_time
                )
                if illegal.code != ResponseCode.SUCCESS:
                    return illegal
                continue
            bad = self._revive_qid_ok(request, back.revive_queue_id)
            if bad is not None:
                return bad
            record = self._batch_record(back, body.broker_name)
            if record is not None:
                msgs.append(record)
        failed = await self._put(request, msgs) if msgs else None
        return failed or request.make_response(ResponseCode.SUCCESS)

    def _orderly_ack(
        self,
        request: RemotingCommand,
        group: str,
        topic: str,
        queue_id: int,
        offsets: list[int],
        pop_time: int,
    ) -> RemotingCommand:
        """Orderly acks of ``offsets`` (one handle's popTime): commit as the order table says."""
        ctx = self.ctx
        for offset in offsets:
            if settle_ack(ctx, group, topic, queue_id, offset, pop_time) == COMMIT_ILLEGAL:
                return request.make_response(
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"offset is illegal, key:{topic}@{group}, queueId:{queue_id}, offset:{offset}",
                )
        if not ctx.pop_order.check_block(None, topic, group, queue_id, 0):
            ctx.pop_polling.notify(topic)
        return request.make_response(ResponseCode.SUCCESS)

    def _batch_record(self, back: BatchAck, broker_name: str | None) -> MessageToStore | None:
        """``appendAck`` of one BatchAck: its offsets inside the queue's range, as one record."""
        topic = real_topic(back.topic, back.consumer_group, back.retry_flag)
        store = self.ctx.store
        low = store.get_min_offset_in_queue(topic, back.queue_id)
        high = store.get_max_offset_in_queue(topic, back.queue_id)
        offsets = tuple(
            back.start_offset + i for i in back.ack_indexes if low <= back.start_offset + i <= high
        )
        if not offsets:
            return None
        ack = AckMsg(
            ack_offset=-1,
            start_offset=back.start_offset,
            consumer_group=back.consumer_group,
            topic=topic,
            queue_id=back.queue_id,
            pop_time=back.pop_time,
            broker_name=broker_name,
            ack_offsets=offsets,
        )
        return self._ack_record(ack, back.invisible_time, back.revive_queue_id)

    # -- CHANGE_MESSAGE_INVISIBLETIME ------------------------------------------------------------
    async def change_invisible_time(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        header = parse_header(request, ChangeInvisibleTimeRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        refused = self._check_queue(
            request, header.topic, header.queue_id, header.offset, inclusive_max=False
        )
        if refused is not None:
            return refused
        try:
            info = ExtraInfo.parse(header.extra_info)
        except HeaderError as exc:
            return request.make_response(ResponseCode.INVALID_PARAMETER, str(exc))
        if info.is_order:
            return self._orderly_change(request, header, info)
        bad = self._revive_qid_ok(request, info.revive_qid)
        if bad is not None:
            return bad
        now = _now_ms()
        ck = PopCheckPoint(
            start_offset=header.offset,
            pop_time=now,
            invisible_time=header.invisible_time,
            queue_id=header.queue_id,
            topic=header.topic,
            cid=header.consumer_group,
            queue_offset_diff=(0,),
            broker_name=info.broker_name,
        )
        ack = _ack_of(header, info)
        ck_msg = ck_message(
            ck,
            revive_topic=self.revive_topic,
            revive_qid=info.revive_qid,
            now_ms=now,
            store_host=self.ctx.store_host,
        )
        failed = await self._put(
            request, [ck_msg, self._ack_record(ack, info.invisible_time, info.revive_qid)]
        )
        if failed is not None:
            return failed
        response_header = ChangeInvisibleTimeResponseHeader(
            pop_time=now, invisible_time=header.invisible_time, revive_qid=info.revive_qid
        )
        return request.make_response(ResponseCode.SUCCESS, ext_fields=response_header.to_ext_fields())

    def _orderly_change(
        self, request: RemotingCommand, header: ChangeInvisibleTimeRequestHeader, info: ExtraInfo
    ) -> RemotingCommand:
        """CHANGE_MESSAGE_INVISIBLETIME of an orderly handle: the order table, no checkpoint."""
        ctx = self.ctx
        group, topic, qid = header.consumer_group, header.topic, header.queue_id
        if header.offset < ctx.offsets.query_offset(group, topic, qid):
            return request.make_response(
                ResponseCode.SUCCESS, ext_fields=self._orderly_times(info, info.pop_time)
            )
        next_visible = _now_ms() + header.invisible_time
        ctx.pop_order.update_next_visible_time(topic, group, qid, header.offset, info.pop_time, next_visible)
        if header.invisible_time <= 0:
            ctx.pop_polling.notify(topic)
        return request.make_response(ResponseCode.SUCCESS, ext_fields=self._orderly_times(info, next_visible))

    @staticmethod
    def _orderly_times(info: ExtraInfo, next_visible: int) -> dict[str, str]:
        response_header = ChangeInvisibleTimeResponseHeader(
            pop_time=info.pop_time,
            invisible_time=max(next_visible - info.pop_time, 0),
            revive_qid=info.revive_qid,
        )
        return response_header.to_ext_fields()


def _ack_of(header: AckMessageRequestHeader | ChangeInvisibleTimeRequestHeader, info: ExtraInfo) -> AckMsg:
    """The ack record of the message ``header`` names, popped under the handle ``info``."""
    return AckMsg(
        ack_offset=header.offset,
        start_offset=info.ck_queue_offset,
        consumer_group=header.consumer_group,
        topic=header.topic,
        queue_id=header.queue_id,
        pop_time=info.pop_time,
        broker_name=info.broker_name,
    )
