"""Batch sends: validate a list of messages, give each a UNIQ_KEY, split it, encode the bodies.

RocketMQ's ``MessageBatch.generateFromList`` rules: every message of a batch has the same topic
and the same ``wait_store_msg_ok``; delay messages and retry topics are not allowed.  The body of
SEND_BATCH_MESSAGE concatenates one record per message (:mod:`rocketq.client.remoting.batch`),
and one request may carry at most ``max_message_size`` (4 MiB) of records, so a longer list is
split into consecutive chunks (the ``ListSplitter`` of RocketMQ's batch example, exact about the
record size: :func:`rocketq.client.remoting.batch.split_batches`).  The batch request's own
properties carry only ``WAIT``; its SendResult's ``msg_id`` is the chunk's UNIQ_KEYs joined by
commas, as in the Java client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rocketq.client.errors import MessageFormatError, MQClientError
from rocketq.client.model import Message
from rocketq.client.remoting.batch import DEFAULT_MAX_BATCH_BYTES, BatchItem, encode_batch, split_batches
from rocketq.client.remoting.msgid import UniqKeyGenerator
from rocketq.client.remoting.properties import MessageConst, encode_properties_bytes
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX, ResponseCode

__all__ = ["EncodedBatch", "prepare_batches"]
_ILLEGAL = ResponseCode.MESSAGE_ILLEGAL


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """One SEND_BATCH_MESSAGE request: the carrier message, the encoded body and the ids."""

    message: Message
    body: bytes
    msg_id: str
    count: int


def _check_batch(msgs: Sequence[Message]) -> None:
    first = msgs[0]
    for m in msgs:
        if m.delay_time_level > 0:
            raise MQClientError("TimeDelayLevel is not supported for batching", code=_ILLEGAL)
        if m.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise MQClientError("Retry Group is not supported for batching", code=_ILLEGAL)
        if m.topic != first.topic:
            raise MQClientError("The topic of the messages in one batch should be the same", code=_ILLEGAL)
        if m.wait_store_msg_ok != first.wait_store_msg_ok:
            raise MQClientError(
                "The waitStoreMsgOK of the messages in one batch should the same", code=_ILLEGAL
            )


def prepare_batches(
    msgs: Sequence[Message], uniq: UniqKeyGenerator, max_size: int = DEFAULT_MAX_BATCH_BYTES
) -> list[EncodedBatch]:
    """Validate, assign UNIQ_KEYs, split into requests of at most ``max_size`` bytes, encode.

    Each message's properties are encoded to bytes exactly once; :func:`split_batches` and
    :func:`encode_batch` then only measure and copy them.
    """
    if not msgs:
        return []
    _check_batch(msgs)
    first = msgs[0]
    wait = "true" if first.wait_store_msg_ok else "false"
    items, ids = _encode_items(msgs, uniq, wait)
    try:
        chunks = split_batches(items, max_size)
    except MessageFormatError as exc:
        raise MQClientError(f"cannot batch: {exc}", code=_ILLEGAL) from exc
    batches = []
    start = 0
    for chunk in chunks:
        carrier = Message(first.topic, b"\0", wait_store_msg_ok=first.wait_store_msg_ok)
        carrier.properties[MessageConst.WAIT_STORE_MSG_OK] = wait
        end = start + len(chunk)
        batches.append(EncodedBatch(carrier, encode_batch(chunk), ",".join(ids[start:end]), len(chunk)))
        start = end
    return batches


def _encode_items(
    msgs: Sequence[Message], uniq: UniqKeyGenerator, wait: str
) -> tuple[list[BatchItem], list[str]]:
    """``(flag, body, properties bytes)`` per message and the UNIQ_KEYs, in order.

    A message with no user property and none of tags, keys, sharding key (the common case of a
    bulk send) skips the property map: its properties are ``WAIT`` and ``UNIQ_KEY`` only.
    """
    plain_head = f"{MessageConst.WAIT_STORE_MSG_OK}\x01{wait}\x02{MessageConst.UNIQ_KEY}\x01"
    if not any(m.properties or m.tags or m.keys is not None or m.sharding_key for m in msgs):
        ids = uniq.next_ids(len(msgs))  # all plain: ids in bulk, properties by one format each
        return [
            (m.flag, m.body, f"{plain_head}{uid}\x02".encode()) for m, uid in zip(msgs, ids, strict=True)
        ], ids
    items: list[BatchItem] = []
    ids = []
    next_id = uniq.next_id
    for m in msgs:
        if not m.properties and not m.tags and m.keys is None and not m.sharding_key:
            uid = next_id()
            data = (plain_head + uid + "\x02").encode()
        else:
            props = m.wire_properties()
            uid = props.get(MessageConst.UNIQ_KEY) or next_id()
            props[MessageConst.UNIQ_KEY] = uid
            try:
                data = encode_properties_bytes(props)
            except MessageFormatError as exc:
                raise MQClientError(f"cannot batch: {exc}", code=_ILLEGAL) from exc
        items.append((m.flag, m.body, data))
        ids.append(uid)
    return items, ids
