"""RECALL_MESSAGE (370): cancel a scheduled timer message (RocketMQ 5.3.2's ``RecallMessageProcessor``).

Checks in Java's order: ``recallMessageEnable`` (else NO_PERMISSION), a master (else
SLAVE_NOT_AVAILABLE), a writable broker, the topic exists, the handle decodes
(ILLEGAL_OPERATION otherwise), names this topic and this broker, and its time is in the future
but within ``timerMaxDelaySec``.  The recall is then a tombstone put through the timer send
rules: body ``"0"``, tag ``_RECALL_TAG_``, ``TIMER_DEL_UNIQKEY=<topic>+<uniqId>``,
``UNIQ_KEY=<uniqId>`` and ``TIMER_DELIVER_MS`` = the handle's time, which lands in the recalled
message's wheel slot; when that slot is read the message is dropped (:mod:`rocketq.broker.timer.store`).
The answer carries the recalled message's id.
"""

from __future__ import annotations

import time

from rocketq.broker.executor import Busy
from rocketq.broker.processor.context import BrokerContext, peer_host
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.timer.config import timer_config_of
from rocketq.broker.timer.rules import TimerRouteStatus, route_timer_message
from rocketq.broker.timer.store import delete_key
from rocketq.client.errors import HeaderError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import RecallMessageRequestHeader, RecallMessageResponseHeader
from rocketq.client.remoting.properties import MessageConst, encode_properties
from rocketq.client.remoting.recall_handle import RecallHandleError, decode_recall_handle
from rocketq.server import Channel

__all__ = ["RECALL_MESSAGE_TAG", "RecallMessageProcessor"]

RECALL_MESSAGE_TAG = "_RECALL_TAG_"
_UNAVAILABLE = "recall failed, broker service not available"


class RecallMessageProcessor:
    """Answers RECALL_MESSAGE for one broker."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def process(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        ctx = self.ctx
        try:
            header = RecallMessageRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(exc))
        if not ctx.config.recall_message_enable:
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                "recall failed, operation is forbidden: the broker runs with recallMessageEnable=false "
                "(set recallMessageEnable=true in broker.conf to allow recalls)",
            )
        if not ctx.config.is_master:
            return request.make_response(ResponseCode.SLAVE_NOT_AVAILABLE, _UNAVAILABLE)
        if not ctx.writeable:
            return request.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, _UNAVAILABLE)
        if ctx.topics.select(header.topic) is None:
            return request.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{header.topic}] not exist"
            )
        try:
            handle = decode_recall_handle(header.recall_handle)
        except RecallHandleError as exc:
            return request.make_response(ResponseCode.ILLEGAL_OPERATION, str(exc))
        if handle.topic != header.topic:
            return request.make_response(ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != ctx.config.broker_name:
            return request.make_response(ResponseCode.ILLEGAL_OPERATION, _UNAVAILABLE)
        timer = timer_config_of(ctx.config)
        now = int(time.time() * 1000)
        try:
            timestamp = int(handle.timestamp)
        except ValueError:
            timestamp = -1
        time_left = timestamp - now
        if time_left <= 0 or time_left >= timer.max_delay_sec * 1000:
            return request.make_response(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        props = {
            MessageConst.TAGS: RECALL_MESSAGE_TAG,
            MessageConst.TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
            MessageConst.UNIQ_KEY: handle.message_id,
            MessageConst.TIMER_DELIVER_MS: str(timestamp),
            MessageConst.BORN_TIMESTAMP: str(now),
            MessageConst.TRACE_CONTEXT: "",
        }
        if header.producer_group is not None:
            props[MessageConst.PRODUCER_GROUP] = header.producer_group
        route = route_timer_message(timer, handle.topic, 0, encode_properties(props), now)
        if route.status is not TimerRouteStatus.TIMER:
            return request.make_response(ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        msg = MessageToStore(
            topic=route.topic,
            queue_id=route.queue_id,
            body=b"0",
            properties=route.properties,
            born_timestamp=now,
            born_host=peer_host(channel),
            store_host=ctx.store_host,
        )
        try:
            result = await ctx.send_executor.run(lambda: ctx.store.put_message(msg))
        except Busy as busy:
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        if not result.status.is_ok:
            return request.make_response(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        fields = RecallMessageResponseHeader(msg_id=handle.message_id).to_ext_fields()
        return request.make_response(ResponseCode.SUCCESS, ext_fields=fields)
