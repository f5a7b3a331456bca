"""Messages between the gRPC protocol (``apache.rocketmq.v2.Message``) and the remoting client's.

Theory of operation.  A 5.x SDK's message carries its fields in ``system_properties``; the
broker's record carries them as message properties.  :func:`to_remoting_message` maps the first
onto the second as RocketMQ's proxy does (``GrpcConverter`` / ``SendMessageActivity``): the SDK's
``message_id`` becomes the ``UNIQ_KEY`` (so both protocols see one id), ``tag`` the ``TAGS``,
``keys`` the space-separated ``KEYS``, ``message_group`` the ``__SHARDINGKEY`` (FIFO) and
``delivery_timestamp`` the ``TIMER_DELIVER_MS`` of a timer message.  :func:`to_grpc_message` maps
a popped record back: ``body_digest`` is the MD5 of the body in uppercase hex (the Python SDK
compares strings exactly), ``delivery_attempt`` is ``reconsume_times + 1``, the message type is
derived from the properties, and the receipt handle is the one the caller built.  Checks that
fail answer a :class:`Refusal` (a ``Code`` and a sentence), never an exception.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from rocketq.client.model import Message, MessageExt
from rocketq.client.remoting.properties import MessageConst
from rocketq.proxy.naming import unwrap
from rocketq.proxy.v2 import definition_pb2 as pb

__all__ = [
    "SYSTEM_PROPERTY_KEYS",
    "Refusal",
    "message_type_of",
    "timestamp_ms",
    "to_grpc_message",
    "to_remoting_message",
]

#: properties the broker's record uses for system fields: never copied into user_properties
SYSTEM_PROPERTY_KEYS = frozenset(
    {
        MessageConst.TAGS,
        MessageConst.KEYS,
        MessageConst.UNIQ_KEY,
        MessageConst.SHARDING_KEY,
        MessageConst.WAIT_STORE_MSG_OK,
        MessageConst.POP_CK,
        MessageConst.FIRST_POP_TIME,
        MessageConst.TIMER_DELIVER_MS,
        MessageConst.TIMER_DELAY_SEC,
        MessageConst.TIMER_DELAY_MS,
        MessageConst.TIMER_OUT_MS,
        MessageConst.TIMER_ENQUEUE_MS,
        MessageConst.TIMER_DEQUEUE_MS,
        MessageConst.TIMER_ROLL_TIMES,
        MessageConst.TIMER_DEL_UNIQKEY,
        MessageConst.TRANSACTION_PREPARED,
        MessageConst.PRODUCER_GROUP,
        MessageConst.MIN_OFFSET,
        MessageConst.MAX_OFFSET,
        MessageConst.RETRY_TOPIC,
        MessageConst.REAL_TOPIC,
        MessageConst.REAL_QUEUE_ID,
        MessageConst.DELAY_TIME_LEVEL,
        MessageConst.BORN_HOST,
        MessageConst.BORN_TIMESTAMP,
        MessageConst.MESSAGE_TYPE,
        MessageConst.CLUSTER,
        MessageConst.TRACE_SWITCH,
        MessageConst.INNER_NUM,
        MessageConst.INNER_BASE,
        MessageConst.DUP_INFO,
        MessageConst.CONSUME_START_TIMESTAMP,
        MessageConst.RECONSUME_TIME,
        MessageConst.MAX_RECONSUME_TIMES,
        MessageConst.ORIGIN_MESSAGE_ID,
    }
)


# The enum values of the hot paths, looked up once: protobuf's ``pb.Encoding.GZIP`` goes through a
# Python ``__getattr__`` on every access (about 2.5 us, several per message).
_GZIP = pb.Encoding.GZIP
_IDENTITY = pb.Encoding.IDENTITY
_MD5 = pb.DigestType.MD5
_NOT_SERVED_TYPES = frozenset({pb.MessageType.LITE, pb.MessageType.PRIORITY})
_TRANSACTION = pb.MessageType.TRANSACTION
_DELAY = pb.MessageType.DELAY
_FIFO = pb.MessageType.FIFO
_NORMAL = pb.MessageType.NORMAL
_DELAY_PROPERTIES = (
    MessageConst.DELAY_TIME_LEVEL,
    MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_DELAY_SEC,
    MessageConst.TIMER_DELAY_MS,
)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request cannot be served: the ``apache.rocketmq.v2.Code`` and a sentence for the user."""

    code: pb.Code
    message: str


def timestamp_ms(ts: Timestamp) -> int:
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def _set_timestamp(ts: Timestamp, ms: int) -> None:
    ts.seconds, ts.nanos = ms // 1000, (ms % 1000) * 1_000_000


def to_remoting_message(message: pb.Message, max_body_size: int) -> Message | Refusal:
    """The remoting message to store for one SDK message, or why it cannot be sent."""
    topic = message.topic.name
    sp = message.system_properties
    body = message.body
    if not topic:
        return Refusal(pb.Code.ILLEGAL_TOPIC, "the message names no topic")
    if not body:
        return Refusal(pb.Code.MESSAGE_BODY_EMPTY, f"the message body is empty (topic {topic})")
    if len(body) > max_body_size:
        return Refusal(
            pb.Code.MESSAGE_BODY_TOO_LARGE,
            f"message body of {len(body)} bytes exceeds maxMessageSize {max_body_size} (topic {topic})",
        )
    if sp.body_encoding == _GZIP:
        return Refusal(pb.Code.NOT_IMPLEMENTED, "GZIP-encoded bodies are not served yet; send IDENTITY")
    message_type = sp.message_type
    if message_type in _NOT_SERVED_TYPES:
        name = pb.MessageType.Name(message_type)
        return Refusal(pb.Code.NOT_IMPLEMENTED, f"{name} messages are not served by rocketq's proxy yet")
    properties: dict[str, str] = {}
    if message.user_properties:
        properties.update(message.user_properties)
        clash = properties.keys() & SYSTEM_PROPERTY_KEYS
        if clash:
            return Refusal(
                pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                f"user property {min(clash)!r} is a system property name; choose another key",
            )
    if sp.message_id:
        properties[MessageConst.UNIQ_KEY] = sp.message_id
    deliver_at: int | None = None
    if sp.HasField("delivery_timestamp"):
        deliver_at = timestamp_ms(sp.delivery_timestamp)
        if deliver_at < 0:
            return Refusal(pb.Code.ILLEGAL_DELIVERY_TIME, f"delivery_timestamp {deliver_at} ms is negative")
    group = sp.message_group if sp.HasField("message_group") and sp.message_group else None
    if group is not None and deliver_at is not None:
        return Refusal(
            pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a message cannot have both a message_group (FIFO) and a delivery_timestamp (DELAY)",
        )
    if message_type == _TRANSACTION and (group is not None or deliver_at is not None):
        return Refusal(
            pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            "a transactional message cannot have a message_group or a delivery_timestamp",
        )
    return Message(
        topic,
        body,
        tags=sp.tag or None,
        keys=list(sp.keys) if sp.keys else None,
        properties=properties,
        message_group=group,
        deliver_at=deliver_at,
    )


def message_type_of(properties: dict[str, str]) -> pb.MessageType:
    """The 5.x message type of a stored record (``GrpcConverter.buildMessageType``)."""
    if properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return _TRANSACTION
    if any(key in properties for key in _DELAY_PROPERTIES):
        return _DELAY
    if properties.get(MessageConst.SHARDING_KEY):
        return _FIFO
    return _NORMAL


def _host(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


def to_grpc_message(msg: MessageExt, receipt_handle: str | None, namespace: str = "") -> pb.Message:
    """The SDK's view of a popped (or pulled) record; its topic loses the ``namespace%`` prefix."""
    props = msg.properties
    # filled in place: building sub-messages and passing them to a constructor copies each once more
    out = pb.Message(body=msg.body)
    out.topic.CopyFrom(unwrap(msg.topic, namespace))
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_KEYS}
    if user:
        out.user_properties.update(user)
    sp = out.system_properties
    sp.message_id = msg.msg_id
    sp.body_encoding = _IDENTITY
    sp.message_type = message_type_of(props)
    sp.born_host = _host(msg.born_host)
    sp.store_host = _host(msg.store_host)
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = msg.reconsume_times + 1
    digest = sp.body_digest
    digest.type, digest.checksum = _MD5, hashlib.md5(msg.body).hexdigest().upper()
    _set_timestamp(sp.born_timestamp, msg.born_timestamp)
    _set_timestamp(sp.store_timestamp, msg.store_timestamp)
    tags = props.get(MessageConst.TAGS)
    if tags:
        sp.tag = tags
    keys = msg.keys
    if keys:
        sp.keys.extend(keys)
    group = props.get(MessageConst.SHARDING_KEY)
    if group:
        sp.message_group = group
    deliver_ms = props.get(MessageConst.TIMER_DELIVER_MS)
    if deliver_ms and deliver_ms.lstrip("-").isdigit():
        _set_timestamp(sp.delivery_timestamp, int(deliver_ms))
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    return out
