"""PullMessage, GetOffset, UpdateOffset and QueryOffset: a queue's messages and offsets for 5.x pull
consumers, on the brokers' remoting PULL_MESSAGE and offset requests.

RocketMQ's Java proxy leaves these four RPCs unimplemented over gRPC (its remoting side serves the
same requests through ``ConsumerProcessor``); rocketq serves them with the protocol's own
vocabulary.  Every RPC names one message queue: the topic, the broker by name and the queue id,
which is the broker's queue id (the ids QueryRoute gives when, as usual, a topic has as many read
as write queues).  Answers, as the other RPCs: an unknown topic TOPIC_NOT_FOUND, a broker that
holds no queue of the topic or a queue id past its read queues BAD_REQUEST (RocketMQ's
INVALID_BROKER_NAME), a negative or too large offset ILLEGAL_OFFSET, a group without a committed
offset on the queue OFFSET_NOT_FOUND, a broker's refusal mapped as :mod:`rocketq.proxy.status`.

* PullMessage reads from ``offset`` at most ``batch_size`` messages (1..32) matching the filter;
  with a ``long_polling_timeout`` it waits that long (clamped to the long-polling range and the
  call's deadline) for a first one.  The stream is the status (OK, MESSAGE_NOT_FOUND when nothing
  matched, ILLEGAL_OFFSET when ``offset`` is outside the queue), one response per message, then
  the offset to pull from next (the broker's correction after ILLEGAL_OFFSET).  Pulled messages
  carry no receipt handle: the consumer owns its progress (UpdateOffset), nothing is acked.
* GetOffset / UpdateOffset read and commit the group's consume offset on the broker, the one
  remoting consumers and ``mqadmin`` see (QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET).
* QueryOffset answers the queue's first offset (BEGINNING), the next offset to be written (END),
  or the first offset stored at or after ``timestamp`` (TIMESTAMP).
"""

from __future__ import annotations

import dataclasses

from rocketq.client.errors import RocketQError
from rocketq.client.instance import ClientInstance
from rocketq.client.model import MessageExt, PullStatus
from rocketq.client.remoting.headers import PullMessageRequestHeader
from rocketq.client.remoting.vocabulary import ExpressionType, PullSysFlag, build_subscription
from rocketq.proxy.config import ProxyConfig
from rocketq.proxy.consumer import check_group
from rocketq.proxy.convert import Refusal
from rocketq.proxy.status import code_of_error
from rocketq.proxy.v2 import definition_pb2 as pb
from rocketq.proxy.v2 import service_pb2 as spb

__all__ = ["Pulled", "get_offset", "pull", "query_offset", "update_offset"]

#: time kept from the call's deadline for the answer to travel back
_DEADLINE_RESERVE_MS = 500


@dataclasses.dataclass(frozen=True, slots=True)
class QueueAt:
    """A checked message queue: the broker's master address and the queue there."""

    topic: str
    broker_name: str
    queue_id: int
    addr: str


@dataclasses.dataclass(frozen=True, slots=True)
class Pulled:
    """One pull's answer: its status code, the messages, and where the next pull starts."""

    code: pb.Code
    message: str
    messages: list[MessageExt]
    next_offset: int


async def _queue(instance: ClientInstance, mq: pb.MessageQueue) -> QueueAt | Refusal:
    topic, broker_name = mq.topic.name, mq.broker.name
    if not topic:
        return Refusal(pb.Code.ILLEGAL_TOPIC, "the request names no topic (message_queue.topic)")
    try:
        route = await instance.get_route(topic)
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"no route of topic {topic}: {exc}")
    queue_data = next((q for q in route.queue_datas if q.broker_name == broker_name), None)
    if queue_data is None:
        brokers = sorted({q.broker_name for q in route.queue_datas})
        return Refusal(
            pb.Code.BAD_REQUEST,
            f"broker {broker_name!r} holds no queue of topic {topic}; its brokers are {brokers}"
            " (message_queue.broker.name, as QueryRoute answers it)",
        )
    if not 0 <= mq.id < queue_data.read_queue_nums:
        return Refusal(
            pb.Code.BAD_REQUEST,
            f"queue {mq.id} is not a readable queue of topic {topic} on {broker_name}:"
            f" its queue ids are 0..{queue_data.read_queue_nums - 1}",
        )
    try:
        addr = await instance.find_master_addr_or_refresh(broker_name, topic)
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"broker {broker_name} of topic {topic} has no master: {exc}")
    return QueueAt(topic, broker_name, mq.id, addr)


def _duration_ms(seconds: int, nanos: int) -> int:
    return seconds * 1000 + nanos // 1_000_000


def _poll_ms(
    request: spb.PullMessageRequest, config: ProxyConfig, time_remaining_s: float | None
) -> int | Refusal:
    """How long the broker may hold the pull for a first message (0: answer at once)."""
    if not request.HasField("long_polling_timeout"):
        return 0
    asked = _duration_ms(request.long_polling_timeout.seconds, request.long_polling_timeout.nanos)
    if asked <= 0:
        return 0
    poll = min(
        max(asked, config.grpc_client_consumer_min_long_polling_timeout_millis),
        config.grpc_client_consumer_max_long_polling_timeout_millis,
    )
    if time_remaining_s is not None:
        left = int(time_remaining_s * 1000) - _DEADLINE_RESERVE_MS
        if left <= 0:
            return Refusal(
                pb.Code.ILLEGAL_POLLING_TIME,
                "the call's deadline leaves no time to poll: give the pull a timeout longer than"
                " its long_polling_timeout",
            )
        poll = min(poll, left)
    return poll


async def pull(
    instance: ClientInstance,
    request: spb.PullMessageRequest,
    config: ProxyConfig,
    time_remaining_s: float | None,
    api_timeout_ms: int,
) -> Pulled | Refusal:
    """PULL_MESSAGE from the queue the request names, without committing an offset."""
    refused = check_group(request.group)
    if refused is not None:
        return refused
    if request.offset < 0:
        return Refusal(pb.Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
    poll = _poll_ms(request, config, time_remaining_s)
    if isinstance(poll, Refusal):
        return poll
    queue = await _queue(instance, request.message_queue)
    if isinstance(queue, Refusal):
        return queue
    fe = request.filter_expression
    kind = ExpressionType.SQL92 if fe.type == pb.FilterType.SQL else ExpressionType.TAG
    sub = build_subscription(queue.topic, fe.expression, kind)
    flag = PullSysFlag.SUBSCRIPTION | (PullSysFlag.SUSPEND if poll else PullSysFlag(0))
    header = PullMessageRequestHeader(
        consumer_group=request.group.name,
        topic=queue.topic,
        queue_id=queue.queue_id,
        queue_offset=request.offset,
        max_msg_nums=min(max(request.batch_size, 1), config.grpc_client_consumer_long_polling_batch_size),
        sys_flag=int(flag),
        commit_offset=0,
        suspend_timeout_millis=poll,
        subscription=sub.sub_string,
        sub_version=sub.sub_version,
        expression_type=str(sub.expression_type),
    )
    try:
        result = await instance.api.pull_message(
            queue.addr, header, poll + api_timeout_ms, tags_filter=sub.tags_filter()
        )
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"pull from {queue.topic} queue {queue.queue_id} failed: {exc}")
    if result.status is PullStatus.FOUND and result.messages:
        return Pulled(pb.Code.OK, "OK", list(result.messages), result.next_begin_offset)
    if result.status is PullStatus.OFFSET_ILLEGAL:
        return Pulled(
            pb.Code.ILLEGAL_OFFSET,
            f"offset {request.offset} is outside queue {queue.queue_id} of {queue.topic} on"
            f" {queue.broker_name} ({result.min_offset}..{result.max_offset}); pull from next_offset",
            [],
            result.next_begin_offset,
        )
    return Pulled(pb.Code.MESSAGE_NOT_FOUND, "no new message", [], result.next_begin_offset)


async def get_offset(instance: ClientInstance, request: spb.GetOffsetRequest) -> int | Refusal:
    """The group's committed offset of the queue (QUERY_CONSUMER_OFFSET)."""
    refused = check_group(request.group)
    if refused is not None:
        return refused
    queue = await _queue(instance, request.message_queue)
    if isinstance(queue, Refusal):
        return queue
    try:
        offset = await instance.api.query_consumer_offset(
            queue.addr, request.group.name, queue.topic, queue.queue_id
        )
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"offset query of {request.group.name} failed: {exc}")
    if offset is None:
        return Refusal(
            pb.Code.OFFSET_NOT_FOUND,
            f"group {request.group.name} has no offset on queue {queue.queue_id} of {queue.topic}"
            f" on {queue.broker_name}: set one with UpdateOffset (QueryOffset gives the queue's ends)",
        )
    return offset


async def update_offset(instance: ClientInstance, request: spb.UpdateOffsetRequest) -> Refusal | None:
    """Commit the group's offset of the queue (UPDATE_CONSUMER_OFFSET); 0..the queue's max offset."""
    refused = check_group(request.group)
    if refused is not None:
        return refused
    if request.offset < 0:
        return Refusal(pb.Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
    queue = await _queue(instance, request.message_queue)
    if isinstance(queue, Refusal):
        return queue
    try:
        high = await instance.api.get_max_offset(queue.addr, queue.topic, queue.queue_id)
        if request.offset > high:
            return Refusal(
                pb.Code.ILLEGAL_OFFSET,
                f"offset {request.offset} is past the end of queue {queue.queue_id} of {queue.topic}"
                f" on {queue.broker_name} (max offset {high})",
            )
        await instance.api.update_consumer_offset(
            queue.addr, request.group.name, queue.topic, queue.queue_id, request.offset
        )
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"offset update of {request.group.name} failed: {exc}")
    return None


async def query_offset(instance: ClientInstance, request: spb.QueryOffsetRequest) -> int | Refusal:
    """The queue's first offset, its end, or the first offset stored at or after a time."""
    policy = request.query_offset_policy
    if policy == pb.QueryOffsetPolicy.TIMESTAMP and not request.HasField("timestamp"):
        return Refusal(pb.Code.BAD_REQUEST, "query_offset_policy TIMESTAMP needs a timestamp")
    if policy not in (
        pb.QueryOffsetPolicy.BEGINNING,
        pb.QueryOffsetPolicy.END,
        pb.QueryOffsetPolicy.TIMESTAMP,
    ):
        return Refusal(
            pb.Code.BAD_REQUEST, f"unknown query_offset_policy {policy}: BEGINNING, END or TIMESTAMP"
        )
    queue = await _queue(instance, request.message_queue)
    if isinstance(queue, Refusal):
        return queue
    api = instance.api
    try:
        if policy == pb.QueryOffsetPolicy.BEGINNING:
            return await api.get_min_offset(queue.addr, queue.topic, queue.queue_id)
        if policy == pb.QueryOffsetPolicy.END:
            return await api.get_max_offset(queue.addr, queue.topic, queue.queue_id)
        at_ms = request.timestamp.ToMilliseconds()
        return await api.search_offset(queue.addr, queue.topic, queue.queue_id, at_ms)
    except RocketQError as exc:
        return Refusal(code_of_error(exc), f"offset query of {queue.topic} failed: {exc}")
