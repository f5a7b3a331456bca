"""The checks of a send before anything is stored, in RocketMQ's order.

Broker role and write permission (a slave, an unconfirmed master in controller mode), topic name,
system topics, topic existence (auto-creating it from ``defaultTopic`` = ``TBW102`` when allowed,
or a retry/DLQ topic from its subscription group), the queue id, and the body and properties sizes.
Each failed check is the response the client gets, with RocketMQ's code and remark.
"""

from __future__ import annotations

from rocketq.broker.ha.replication import Replication
from rocketq.broker.processor.context import BrokerContext
from rocketq.broker.topic_manager import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TopicConfig,
    is_system_topic,
    validate_topic,
)
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import SendMessageRequestHeader
from rocketq.client.remoting.properties import MAX_PROPERTIES_SIZE

__all__ = ["FAQ", "check_send", "check_sizes", "find_or_create_topic"]

FAQ = "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def check_send(
    ctx: BrokerContext,
    replication: Replication | None,
    request: RemotingCommand,
    header: SendMessageRequestHeader,
) -> tuple[RemotingCommand | None, TopicConfig | None]:
    """The error response of the first check that fails, else the topic's config (RocketMQ's order)."""
    if not ctx.config.is_master:
        refusal = _slave_remark(ctx.broker_addr)
        return request.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, refusal), None
    fenced = replication.write_refusal() if replication is not None else None
    if fenced is not None:  # controller mode: an unconfirmed master (docs/failover.md)
        return request.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, fenced), None
    if not ctx.writeable:
        return request.make_response(
            ResponseCode.NO_PERMISSION, f"the broker[{ctx.broker_addr}] sending message is forbidden"
        ), None
    remark = validate_topic(header.topic)
    if remark is not None:
        return request.make_response(ResponseCode.MESSAGE_ILLEGAL, remark), None
    if is_system_topic(header.topic):
        return request.make_response(
            ResponseCode.NO_PERMISSION, f"Sending message to topic[{header.topic}] is forbidden."
        ), None
    tc = find_or_create_topic(ctx, header)
    if tc is None:
        return request.make_response(
            ResponseCode.TOPIC_NOT_EXIST,
            f"topic[{header.topic}] not exist, apply first please! {FAQ}",
        ), None
    if not tc.is_writeable:
        return request.make_response(
            ResponseCode.NO_PERMISSION,
            f"the topic[{header.topic}] sending message is forbidden",
        ), None
    valid_ids = max(tc.write_queue_nums, tc.read_queue_nums)
    if header.queue_id >= valid_ids:
        return request.make_response(
            ResponseCode.SYSTEM_ERROR,
            f"request queueId[{header.queue_id}] is illegal, {tc.topic_name} "
            f"(writeQueueNums={tc.write_queue_nums}) Producer: {_producer_of(request)}",
        ), None
    return None, tc


def find_or_create_topic(ctx: BrokerContext, header: SendMessageRequestHeader) -> TopicConfig | None:
    """The topic's config; an unknown topic is created from ``defaultTopic`` when allowed, a retry
    or DLQ topic from its subscription group."""
    topics = ctx.topics
    tc = topics.select(header.topic)
    if tc is not None:
        return tc
    if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or header.topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        group = header.topic.split("%", 2)[-1]
        sgc = ctx.groups.find(group)
        if sgc is not None:
            return topics.create_retry_topic(header.topic, max(1, sgc.retry_queue_nums))
        return None
    return topics.create_in_send_process(
        header.topic, header.default_topic, header.default_topic_queue_nums, 0
    )


def check_sizes(
    ctx: BrokerContext, request: RemotingCommand, body_len: int, props_len: int
) -> RemotingCommand | None:
    """MESSAGE_ILLEGAL for a body over ``maxMessageSize`` or properties over the wire limit."""
    limit = ctx.config.max_message_size
    if body_len > limit:
        return request.make_response(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message body size {body_len} bytes is larger than the limit maxMessageSize={limit} bytes",
        )
    if props_len > MAX_PROPERTIES_SIZE:
        return request.make_response(
            ResponseCode.MESSAGE_ILLEGAL,
            f"the message properties size {props_len} bytes is larger than the limit "
            f"{MAX_PROPERTIES_SIZE} bytes",
        )
    return None


def _slave_remark(broker_addr: str) -> str:
    return (
        f"the broker[{broker_addr}] is a slave (brokerRole=SLAVE): it does not accept messages; "
        "send to the master of its broker group"
    )


def _producer_of(request: RemotingCommand) -> str:
    return request.ext_fields.get("a") or request.ext_fields.get("producerGroup") or "unknown"
