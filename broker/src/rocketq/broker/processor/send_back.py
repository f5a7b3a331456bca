"""CONSUMER_SEND_MSG_BACK (36): a consumer hands a message it failed to consume back to the broker.

Theory of operation (RocketMQ 4.9's ``SendMessageProcessor.asyncConsumerSendMsgBack``, A.3.7).  The
message is looked up by its CommitLog ``offset`` and written again, body and properties unchanged
except for:

* ``RETRY_TOPIC`` = the topic it was first consumed from (kept if already set) and
  ``ORIGIN_MESSAGE_ID`` = the first delivery's offset msgId (kept if already set);
* ``reconsumeTimes`` + 1;
* destination ``%RETRY%<group>`` (``retryQueueNums`` queues, created on demand with perm RW and
  registered with the NameServers at once) with ``DELAY`` = the header's ``delayLevel`` if > 0,
  else ``3 + reconsumeTimes`` (10 s, 30 s, 1 m … with the default levels), so the delay service
  (:mod:`rocketq.broker.schedule`) delivers it later;
* or, once ``reconsumeTimes >= maxReconsumeTimes`` (the header's value; -1 or absent means the
  group's ``retryMaxTimes``, 16) or when ``delayLevel < 0``: ``%DLQ%<group>`` (1 queue, perm RW as
  in RocketMQ 4.9 — 4.0–4.3 created it write-only), without delay.

A group with ``retryQueueNums <= 0`` drops the message (SUCCESS), as RocketMQ does.
"""

from __future__ import annotations

import random

from rocketq.broker.executor import Busy
from rocketq.broker.processor.context import BrokerContext, parse_header
from rocketq.broker.schedule.delay import apply_delay_level
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.subscription_manager import SubscriptionGroupConfig
from rocketq.broker.topic_manager import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, TopicConfig
from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import ConsumerSendMsgBackRequestHeader
from rocketq.client.remoting.message import StoredMessage, SysFlag, decode_stored_message
from rocketq.client.remoting.properties import MessageConst, encode_properties
from rocketq.client.remoting.vocabulary import validate_group
from rocketq.server import Channel

__all__ = ["DLQ_QUEUE_NUMS", "SendMessageBackProcessor", "dlq_topic", "max_reconsume_times", "retry_topic"]

DLQ_QUEUE_NUMS = 1
_FAQ = "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def max_reconsume_times(sgc: SubscriptionGroupConfig, requested: int | None) -> int:
    """The client's ``maxReconsumeTimes`` when given (>= 0), else the group's ``retryMaxTimes``."""
    return requested if requested is not None and requested >= 0 else sgc.retry_max_times


class SendMessageBackProcessor:
    """Registered for CONSUMER_SEND_MSG_BACK."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def process(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        header = parse_header(request, ConsumerSendMsgBackRequestHeader)
        if isinstance(header, RemotingCommand):
            return header
        ctx = self.ctx
        problem = validate_group(header.group)  # never create %RETRY%../../x
        if problem is not None:
            return request.make_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, problem)
        sgc = ctx.groups.find(header.group)
        if sgc is None:
            return request.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {header.group} {_FAQ}",
            )
        if not ctx.writeable:
            return request.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{ctx.config.broker_ip1}] sending message is forbidden",
            )
        if sgc.retry_queue_nums <= 0:
            return request.make_response(ResponseCode.SUCCESS)
        tc = ctx.topics.create_retry_topic(retry_topic(header.group), sgc.retry_queue_nums)
        if not tc.is_writeable:
            return request.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{tc.topic_name}] sending message is forbidden"
            )
        try:
            msg = await ctx.send_executor.run(lambda: self._look(header.offset))
        except Busy as busy:
            ctx.stats.busy_rejects += 1
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        if msg is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}"
            )
        props = dict(msg.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, msg.topic)
        props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, msg.offset_msg_id)
        props.pop(MessageConst.DELAY_TIME_LEVEL, None)
        delay_level = header.delay_level
        if msg.reconsume_times >= max_reconsume_times(sgc, header.max_reconsume_times) or delay_level < 0:
            tc = ctx.topics.create_retry_topic(dlq_topic(header.group), DLQ_QUEUE_NUMS)
            queue_id = random.randrange(DLQ_QUEUE_NUMS)
        else:
            props[MessageConst.DELAY_TIME_LEVEL] = str(
                delay_level if delay_level > 0 else 3 + msg.reconsume_times
            )
            queue_id = random.randrange(max(1, min(sgc.retry_queue_nums, tc.write_queue_nums)))
        response = await self._put(request, msg, tc, queue_id, props)
        if response.code == ResponseCode.SUCCESS:  # mqadmin statsAll (rocketq.broker.stats_items)
            ctx.stats_items.record_send_back(header.group, props[MessageConst.RETRY_TOPIC])
        return response

    def _look(self, offset: int) -> StoredMessage | None:
        raw = self.ctx.store.look_message_by_offset(offset)
        if raw is None:
            return None
        try:
            return decode_stored_message(raw, decompress=False)
        except MessageFormatError:
            return None

    async def _put(
        self,
        request: RemotingCommand,
        msg: StoredMessage,
        tc: TopicConfig,
        queue_id: int,
        props: dict[str, str],
    ) -> RemotingCommand:
        ctx = self.ctx
        topic, queue_id, properties = apply_delay_level(
            tc.topic_name, queue_id, encode_properties(props), len(ctx.delay_levels_ms)
        )
        sys_flag = msg.sys_flag & ~int(SysFlag.STOREHOST_V6)
        if ":" in ctx.store_host[0]:
            sys_flag |= int(SysFlag.STOREHOST_V6)
        to_store = MessageToStore.copy_of(
            msg,
            topic=topic,
            queue_id=queue_id,
            properties=properties,
            sys_flag=sys_flag,
            store_host=ctx.store_host,
            reconsume_times=msg.reconsume_times + 1,
            prepared_transaction_offset=0,
        )
        try:
            result = await ctx.send_executor.run(lambda: ctx.store.put_message(to_store))
        except Busy as busy:
            ctx.stats.busy_rejects += 1
            return request.make_response(ResponseCode.SYSTEM_BUSY, busy.remark)
        if not result.is_ok:
            return request.make_response(ResponseCode.SYSTEM_ERROR, result.status.name)
        ctx.stats.put_messages += 1
        if ctx.metrics is not None and tc.topic_name.startswith(DLQ_GROUP_TOPIC_PREFIX):
            group = tc.topic_name[len(DLQ_GROUP_TOPIC_PREFIX) :]
            ctx.metrics.record_dlq(group, props.get(MessageConst.RETRY_TOPIC, msg.topic))
        return request.make_response(ResponseCode.SUCCESS)
