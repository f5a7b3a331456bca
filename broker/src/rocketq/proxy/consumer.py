"""ReceiveMessage, AckMessage and ChangeInvisibleDuration on the brokers' POP (``ConsumerProcessor``).

Theory of operation.  A receive names a message queue (topic and broker) but, as in RocketMQ's
proxy, only its broker counts: the proxy pops with ``queueId -1`` (every queue of the topic on
that broker's master), with the SDK's filter, batch size and invisible duration.  The long-polling
time is the SDK's ``long_polling_timeout`` clamped to the configured range and to what is left of
the call's deadline; less than the minimum left is ILLEGAL_POLLING_TIME.  A popped message's
receipt handle is RocketMQ's: the broker's ``POP_CK`` (``ckQueueOffset popTime invisibleTime
reviveQid retryFlag brokerName queueId queueOffset``) with the message's CommitLog offset
appended, so an ack needs nothing but the handle and the topic.  Acks and changes go to the master
of the broker the handle names; a handle whose invisible time is over is refused before that
(INVALID_RECEIPT_HANDLE), since the message is already on its way to another consumer.

FIFO groups (``consumeMessageOrderly``, :mod:`rocketq.proxy.groups`) are popped orderly
(``order=true`` with the SDK's ``attempt_id``, so a retried receive gets the same batch): the
broker hands out a queue's messages only while none of its earlier ones is in flight, and a
message the consumer does not ack blocks what follows it until it is delivered again.

Dead letters, as RocketMQ's proxy (``PopMessageResultFilterImpl``): the broker revives an un-acked
POP message forever, so a popped message that has already been delivered ``consumerMaxAttempts``
times is not handed out again: the proxy sends it back with delay level -1
(CONSUMER_SEND_MSG_BACK, the broker stores it in ``%DLQ%<group>``), acks it, and leaves it out of
the answer.  Should either step fail, the message is handed out as usual.  The limit is the
group's retryMaxTimes + 1; for FIFO groups the broker applies it while popping orderly.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from rocketq.client.consumer.pop_rpc import (
    PopStatus,
    ack_message,
    change_invisible_time,
    pop_message,
)
from rocketq.client.errors import HeaderError, RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.client.model import MessageExt
from rocketq.client.remoting.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ConsumeInitMode,
    ExtraInfo,
    PopMessageRequestHeader,
)
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import validate_group
from rocketq.proxy.config import ProxyConfig
from rocketq.proxy.convert import Refusal
from rocketq.proxy.status import code_of_error
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb

__all__ = [
    "Popped",
    "ReceiveOrder",
    "change_handle",
    "change_invisible",
    "check_group",
    "forward_to_dead_letter_queue",
    "plan_receive",
    "pop",
    "settle_ack",
]

log = logging.getLogger("rocketq.proxy")

#: time kept from the call's deadline for the answer to travel back
_DEADLINE_RESERVE_MS = 500


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _duration_ms(seconds: int, nanos: int) -> int:
    return seconds * 1000 + nanos // 1_000_000


def check_group(group: pb.Resource) -> Refusal | None:
    problem = validate_group(group.name) if group.name else "it is empty"
    if problem is not None:
        return Refusal(pb.Code.ILLEGAL_CONSUMER_GROUP, f"invalid consumer group {group.name!r}: {problem}")
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class ReceiveOrder:
    """One receive, checked: what to pop from which broker, for how long."""

    group: str
    topic: str
    broker_name: str
    batch_size: int
    invisible_ms: int
    poll_ms: int
    exp_type: str
    exp: str
    #: deliveries a message gets before it goes to the group's dead-letter topic
    max_attempts: int
    #: the group consumes FIFO: an orderly pop, repeated with the SDK's attempt id
    fifo: bool = False
    attempt_id: str | None = None


def plan_receive(
    request: spb.ReceiveMessageRequest, config: ProxyConfig, time_remaining_s: float | None
) -> ReceiveOrder | Refusal:
    """Check a ReceiveMessageRequest (group, topic, filter, invisible and polling times)."""
    refused = check_group(request.group)
    if refused is not None:
        return refused
    topic = request.message_queue.topic.name
    if not topic:
        return Refusal(pb.Code.ILLEGAL_TOPIC, "the receive names no topic (message_queue.topic)")
    if request.HasField("invisible_duration"):
        invisible = _duration_ms(request.invisible_duration.seconds, request.invisible_duration.nanos)
        low, high = config.min_invisible_time_mills_for_recv, config.max_invisible_time_mills
        if not low <= invisible <= high:
            return Refusal(
                pb.Code.ILLEGAL_INVISIBLE_TIME,
                f"invisible_duration {invisible} ms is outside {low}..{high} ms",
            )
    elif request.auto_renew:
        invisible = config.default_invisible_time_mills
    else:
        return Refusal(
            pb.Code.ILLEGAL_INVISIBLE_TIME, "a receive without auto_renew needs an invisible_duration"
        )
    low_poll = config.grpc_client_consumer_min_long_polling_timeout_millis
    high_poll = config.grpc_client_consumer_max_long_polling_timeout_millis
    poll = high_poll
    if request.HasField("long_polling_timeout"):
        poll = _duration_ms(request.long_polling_timeout.seconds, request.long_polling_timeout.nanos)
    poll = min(max(poll, low_poll), high_poll)
    if time_remaining_s is not None:
        left = int(time_remaining_s * 1000) - _DEADLINE_RESERVE_MS
        if left < low_poll:
            return Refusal(
                pb.Code.ILLEGAL_POLLING_TIME,
                f"the call's deadline leaves {left} ms to poll, less than the minimum {low_poll} ms:"
                " give the receive a timeout longer than its await duration",
            )
        poll = min(poll, left)
    fe = request.filter_expression
    exp = fe.expression.strip() or "*"
    exp_type = "SQL92" if fe.type == pb.FilterType.SQL else "TAG"
    batch = min(max(request.batch_size, 1), config.grpc_client_consumer_long_polling_batch_size)
    return ReceiveOrder(
        group=request.group.name,
        topic=topic,
        broker_name=request.message_queue.broker.name,
        batch_size=batch,
        invisible_ms=invisible,
        poll_ms=poll,
        exp_type=exp_type,
        exp=exp,
        max_attempts=config.consumer_max_attempts,
        attempt_id=request.attempt_id if request.HasField("attempt_id") and request.attempt_id else None,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Popped:
    """The messages of one receive, each with its receipt handle (empty when none came)."""

    messages: list[tuple[MessageExt, str]]


async def pop(instance: ClientInstance, order: ReceiveOrder, api_timeout_ms: int) -> Popped | Refusal:
    """Pop from the broker the order names (or the topic's first readable broker)."""
    try:
        route = await instance.get_route(order.topic)
        names = sorted({mq.broker_name for mq in route.readable_queues(order.topic)})
        if not names:
            return Refusal(pb.Code.FORBIDDEN, f"topic {order.topic} has no readable queue")
        broker_name = order.broker_name if order.broker_name in names else names[0]
        addr = await instance.find_master_addr_or_refresh(broker_name, order.topic)
        header = PopMessageRequestHeader(
            consumer_group=order.group,
            topic=order.topic,
            queue_id=-1,
            max_msg_nums=order.batch_size,
            invisible_time=order.invisible_ms,
            poll_time=order.poll_ms,
            born_time=_now_ms(),
            init_mode=int(ConsumeInitMode.MAX),
            exp_type=order.exp_type,
            exp=order.exp,
            broker_name=broker_name,
            order=order.fifo,
            attempt_id=order.attempt_id if order.fifo else None,
        )
        result = await pop_message(instance.api, addr, broker_name, header, order.poll_ms + api_timeout_ms)
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"receive from {order.topic} failed: {exc}")
    if result.status is not PopStatus.FOUND:
        return Popped([])
    popped = []
    for msg in result.messages:
        handle = ExtraInfo.parse(msg.properties[MessageConst.POP_CK])
        handle = dataclasses.replace(handle, commit_log_offset=msg.physical_offset)
        # an orderly pop's broker dead-letters past the group's retryMaxTimes itself
        if (
            not order.fifo
            and msg.reconsume_times + 1 > order.max_attempts
            and await _dead_letter(instance, order, addr, msg, handle)
        ):
            continue
        popped.append((msg, str(handle)))
    return Popped(popped)


async def _dead_letter(
    instance: ClientInstance, order: ReceiveOrder, addr: str, msg: MessageExt, handle: ExtraInfo
) -> bool:
    """Move a message past its last delivery to ``%DLQ%<group>`` and ack it; False if that failed."""
    try:
        await instance.api.consumer_send_message_back(addr, msg, order.group, -1, order.max_attempts - 1)
    except RocketQError as exc:
        log.warning(
            "cannot dead-letter message %s of %s for %s: %s", msg.msg_id, order.topic, order.group, exc
        )
        return False
    refused = await settle_ack(instance, order.group, order.topic, str(handle))
    if refused is not None:  # it is in the DLQ; the broker will revive the popped copy once more
        log.warning("dead-lettered message %s of %s not acked: %s", msg.msg_id, order.topic, refused.message)
    return True


def _handle(text: str) -> ExtraInfo | Refusal:
    try:
        handle = ExtraInfo.parse(text)
    except HeaderError as exc:
        return Refusal(pb.Code.INVALID_RECEIPT_HANDLE, str(exc))
    if handle.queue_offset is None:
        return Refusal(pb.Code.INVALID_RECEIPT_HANDLE, f"receipt handle {text!r} has no queue offset")
    now = _now_ms()
    expired = handle.pop_time + handle.invisible_time
    if expired <= now:
        return Refusal(
            pb.Code.INVALID_RECEIPT_HANDLE,
            f"the receipt handle expired {now - expired} ms ago: the message is delivered again;"
            " ack or change it before its invisible duration ends",
        )
    return handle


async def settle_ack(instance: ClientInstance, group: str, topic: str, receipt_handle: str) -> Refusal | None:
    """ACK one message; None when the broker took it."""
    handle = _handle(receipt_handle)
    if isinstance(handle, Refusal):
        return handle
    assert handle.queue_offset is not None
    header = AckMessageRequestHeader(
        consumer_group=group,
        topic=handle.real_topic(topic, group),
        queue_id=handle.queue_id,
        extra_info=receipt_handle,
        offset=handle.queue_offset,
        broker_name=handle.broker_name,
    )
    try:
        addr = await instance.find_master_addr_or_refresh(handle.broker_name, topic)
        await ack_message(instance.api, addr, header)
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"ack failed: {exc}")
    return None


async def change_invisible(
    instance: ClientInstance, request: spb.ChangeInvisibleDurationRequest, config: ProxyConfig
) -> str | Refusal:
    """CHANGE_MESSAGE_INVISIBLETIME; the new receipt handle (the old one stops working)."""
    refused = check_group(request.group)
    if refused is not None:
        return refused
    group, topic = request.group.name, request.topic.name
    invisible = _duration_ms(request.invisible_duration.seconds, request.invisible_duration.nanos)
    # 0 is allowed, as in RocketMQ's proxy: the Node.js SDK's PushConsumer nacks with it when it
    # has no back-off of its own (it ignores the customized back-off of the Settings)
    if not 0 <= invisible <= config.max_invisible_time_mills:
        return Refusal(
            pb.Code.ILLEGAL_INVISIBLE_TIME,
            f"invisible_duration {invisible} ms is outside 0..{config.max_invisible_time_mills} ms",
        )
    changed = await change_handle(instance, group, topic, request.receipt_handle, invisible)
    return changed if isinstance(changed, Refusal) else changed[0]


async def change_handle(
    instance: ClientInstance, group: str, topic: str, receipt_handle: str, invisible_ms: int
) -> tuple[str, int] | Refusal:
    """CHANGE_MESSAGE_INVISIBLETIME of one handle (a client's change, or a renewal of
    :mod:`rocketq.proxy.renew`): the new handle and when the message becomes visible under it."""
    handle = _handle(receipt_handle)
    if isinstance(handle, Refusal):
        return handle
    assert handle.queue_offset is not None
    header = ChangeInvisibleTimeRequestHeader(
        consumer_group=group,
        topic=handle.real_topic(topic, group),
        queue_id=handle.queue_id,
        extra_info=receipt_handle,
        offset=handle.queue_offset,
        invisible_time=invisible_ms,
        broker_name=handle.broker_name,
    )
    try:
        addr = await instance.find_master_addr_or_refresh(handle.broker_name, topic)
        answer = await change_invisible_time(instance.api, addr, header)
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"change of invisible duration failed: {exc}")
    new = handle.changed(
        offset=handle.queue_offset,
        pop_time=answer.pop_time,
        invisible_time=answer.invisible_time,
        revive_qid=answer.revive_qid,
    )
    # an orderly handle keeps its pop time: the new end is pop time + the answered invisible time
    new = dataclasses.replace(new, commit_log_offset=handle.commit_log_offset)
    return str(new), new.next_visible_time


async def forward_to_dead_letter_queue(
    instance: ClientInstance, request: spb.ForwardMessageToDeadLetterQueueRequest
) -> Refusal | None:
    """ForwardMessageToDeadLetterQueue (a FIFO push consumer's last failed attempt): the message the
    handle names goes to ``%DLQ%<group>`` (CONSUMER_SEND_MSG_BACK, delay level -1), then is acked."""
    refused = check_group(request.group)
    if refused is not None:
        return refused
    group, topic = request.group.name, request.topic.name
    handle = _handle(request.receipt_handle)
    if isinstance(handle, Refusal):
        return handle
    if handle.commit_log_offset is None:
        return Refusal(pb.Code.INVALID_RECEIPT_HANDLE, "the receipt handle has no CommitLog offset")
    try:
        addr = await instance.find_master_addr_or_refresh(handle.broker_name, topic)
        stored = await instance.api.view_message(addr, handle.commit_log_offset)
        # a redelivered message is stored in the pop retry topic: the dead letter names the original
        msg = dataclasses.replace(stored, topic=topic)
        await instance.api.consumer_send_message_back(
            addr, msg, group, -1, max(request.max_delivery_attempts - 1, 0)
        )
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"forward to the dead-letter queue of {group} failed: {exc}")
    return await settle_ack(instance, group, topic, request.receipt_handle)
