"""Batched transactions: many half messages in one send, ended by one request per queue.

Theory of operation (docs/transactions.md, "rocketq extensions: batched transactions").  A rocketq
broker advertises ``rocketqTransactionBatch`` (:meth:`MQClientAPI.supports_transaction_batch`).
Against it, :func:`send_half_batch` sends a SEND_BATCH_MESSAGE with the TRANSACTION_PREPARED
sysFlag whose inner messages carry ``TRAN_MSG=true``, ``PGROUP`` and a fixed ``UNIQ_KEY`` (the
transaction id); the broker stores them as half messages at contiguous half-queue offsets, so the
returned :class:`HalfBatchResult` is one range.  :func:`end_transaction_batch` sends, per (broker,
topic, queue), ranged END_TRANSACTIONs (two-way) naming all the ranges of that queue; the broker
commits them with one append per queue (a consumer sees the queue's messages at once) and skips
offsets already ended, so repeating a commit is harmless.

Against Apache RocketMQ (no feature) both fall back to per-message transactions: one half send
per message (concurrently) and one two-way END_TRANSACTION per message, in order per queue.  That
is *not* atomic for a consumer, and a repeated commit may duplicate messages (Apache re-commits an
already-committed half message).  A :class:`HalfBatchResult` is a small frozen dataclass of plain
values, picklable, so halves can be sent on Spark executors and ended by the driver with any
:class:`MQClientAPI` of the same NameServer (not the producer that sent them).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketq.client.errors import MessageFormatError, MQBrokerError, MQClientError
from rocketq.client.model import LocalTransactionState, Message, SendStatus
from rocketq.client.remoting.batch import append_properties, decode_batch_columns, encode_batch
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.headers import (
    EndTransactionRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from rocketq.client.remoting.message import SysFlag
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.remoting.properties import (
    MessageConst,
    decode_properties,
    encode_properties,
    find_property,
)
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.remoting.txn_batch import DEFAULT_MAX_BYTES, DEFAULT_MAX_MESSAGES, HALF_COUNT_FIELD

if TYPE_CHECKING:
    from rocketq.client.api import BlockingMQClientAPI, MQClientAPI
    from rocketq.client.producer.transaction import AsyncTransactionProducer

__all__ = [
    "HalfBatchResult",
    "end_transaction_batch",
    "end_transaction_batch_blocking",
    "send_encoded_half_batch",
    "send_half_batch",
    "send_prepared_half_batch",
]

log = logging.getLogger("rocketq.client.transaction")

_MESSAGE_ILLEGAL = 13
_FALLBACK_CONCURRENCY = 32
_STORED_NOT_OK = (ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE)


@dataclass(frozen=True, kw_only=True, slots=True)
class HalfBatchResult:
    """The half messages of one :func:`send_half_batch` call: what ending them needs, nothing more.

    ``ranged``: one contiguous range ``[first_half_offset, first_half_offset + count)`` on a
    rocketq broker.  Otherwise (Apache RocketMQ) ``half_offsets`` lists each message's half
    offset.  ``msg_ids`` are the offset msgIds of the half records, ``transaction_ids`` the
    UNIQ_KEYs (the committed messages' msgIds), both in message order.
    """

    broker_addr: str
    broker_name: str
    topic: str
    queue_id: int
    first_half_offset: int
    count: int
    first_commit_log_offset: int
    msg_ids: tuple[str, ...]
    transaction_ids: tuple[str, ...]
    ranged: bool = True
    half_offsets: tuple[int, ...] = ()
    #: bodies + properties sent, used to keep ranged requests under the broker's byte limit
    data_bytes: int = 0

    def half_offset(self, i: int) -> int:
        return self.first_half_offset + i if self.ranged else self.half_offsets[i]


# ---------------------------------------------------------------------------- send


def _half_items(producer: AsyncTransactionProducer, mq: MessageQueue,
                msgs: Sequence[Message]) -> list[tuple[int, bytes, dict[str, str]]]:
    assert producer._uniq is not None
    items = []
    for m in msgs:
        if m.topic != mq.topic:
            raise MQClientError(f"message topic {m.topic} differs from the queue's {mq.topic}", code=_MESSAGE_ILLEGAL)
        producer._validate(m)
        props = m.wire_properties()
        props[MessageConst.TRANSACTION_PREPARED] = "true"
        props[MessageConst.PRODUCER_GROUP] = producer.group
        props[MessageConst.UNIQ_KEY] = m.properties.get(MessageConst.UNIQ_KEY) or producer._uniq.next_id()
        items.append((m.flag, m.body, props))
    return items


async def send_half_batch(producer: AsyncTransactionProducer, mq: MessageQueue, msgs: Sequence[Message], *,
                          timeout_ms: int | None = None) -> HalfBatchResult:
    """Store ``msgs`` (all of ``mq.topic``) as half messages of ``mq``; see the module docstring.

    On a rocketq broker the encoded batch must fit ``max_message_size`` (4 MiB): split larger
    lists and call this once per part.  Raises on failure; half messages stored but not flushed
    in time are rolled back (best effort) before the error is raised.
    """
    producer._check_running()
    if not msgs:
        raise MQClientError("send_half_batch needs at least one message", code=_MESSAGE_ILLEGAL)
    return await _send_either(producer, mq, timeout_ms,
                              lambda api, addr, timeout: _send_ranged(producer, api, addr, mq, msgs, timeout),
                              lambda: list(msgs))


async def _send_either(producer: AsyncTransactionProducer, mq: MessageQueue, timeout_ms: int | None,
                       ranged: Callable[[MQClientAPI, str, int], Awaitable[HalfBatchResult]],
                       messages: Callable[[], list[Message]]) -> HalfBatchResult:
    """One ranged request on a rocketq broker (``ranged(api, addr, timeout)``), else one half message
    per message of ``messages()``; then the broker is heartbeated once (it may check back)."""
    timeout = timeout_ms or producer.config.send_msg_timeout_ms
    addr = await producer.instance.find_broker_addr_or_refresh(mq.broker_name, mq.topic)
    api = producer.instance.api
    if await api.supports_transaction_batch(addr):
        result = await ranged(api, addr, timeout)
    else:
        result = await _send_each(producer, addr, mq, messages(), timeout)
    await producer.heartbeat_broker(addr)
    return result


async def send_encoded_half_batch(producer: AsyncTransactionProducer, mq: MessageQueue, body: bytes, *,
                                  extra_properties: Mapping[str, str] | None = None,
                                  timeout_ms: int | None = None) -> HalfBatchResult:
    """:func:`send_half_batch` of a batch body already encoded (:func:`~rocketq.client.remoting.batch.encode_batch`).

    Every entry must carry its ``UNIQ_KEY`` (the transaction id).  ``TRAN_MSG``, ``PGROUP`` and
    ``extra_properties`` are appended to every entry's properties as bytes, without decoding the
    messages: this is the bulk path of senders that encode rows themselves (the Spark sink).
    Against brokers without batched transactions the body is decoded and sent message by message.
    """
    producer._check_running()
    extra = {**(extra_properties or {}), MessageConst.TRANSACTION_PREPARED: "true",
             MessageConst.PRODUCER_GROUP: producer.group}
    try:
        wire, cols = append_properties(body, encode_properties(extra).encode())
    except MessageFormatError as exc:
        raise MQClientError(f"the encoded half batch is malformed: {exc}", code=_MESSAGE_ILLEGAL) from exc
    if not len(cols):
        raise MQClientError("send_encoded_half_batch needs at least one message", code=_MESSAGE_ILLEGAL)
    uniq = [find_property(p, MessageConst.UNIQ_KEY) for p in cols.properties]
    if None in uniq:
        raise MQClientError(f"message {uniq.index(None)} of the encoded half batch has no UNIQ_KEY",
                            code=_MESSAGE_ILLEGAL)
    ids = [u for u in uniq if u is not None]
    return await _send_either(
        producer, mq, timeout_ms, lambda api, addr, timeout: _send_ranged_body(producer, api, addr, mq, wire, ids, timeout),
        lambda: [Message(mq.topic, bytes(b), flag=f, properties={**decode_properties(p), **(extra_properties or {})})
                 for f, b, p in zip(cols.flags, cols.bodies, cols.properties, strict=True)])


async def send_prepared_half_batch(producer: AsyncTransactionProducer, mq: MessageQueue, body: bytes,
                                   transaction_ids: Sequence[str], *, timeout_ms: int | None = None) -> HalfBatchResult:
    """:func:`send_encoded_half_batch` of a body whose entries already end with ``TRAN_MSG=true`` and
    this producer's ``PGROUP`` and carry the ``UNIQ_KEY`` values ``transaction_ids`` (in entry order).

    Nothing is decoded or re-encoded on rocketq brokers: this is the path of senders that build the
    whole entry themselves (the Spark sink encodes its rows with the transaction properties).
    Against brokers without batched transactions the body is decoded and sent message by message.
    """
    producer._check_running()
    if not transaction_ids:
        raise MQClientError("send_prepared_half_batch needs at least one message", code=_MESSAGE_ILLEGAL)
    ids = list(transaction_ids)

    def each() -> list[Message]:
        try:
            cols = decode_batch_columns(body)
        except MessageFormatError as exc:
            raise MQClientError(f"the prepared half batch is malformed: {exc}", code=_MESSAGE_ILLEGAL) from exc
        return [Message(mq.topic, bytes(b), flag=f, properties=decode_properties(p))
                for f, b, p in zip(cols.flags, cols.bodies, cols.properties, strict=True)]

    return await _send_either(
        producer, mq, timeout_ms, lambda api, addr, timeout: _send_ranged_body(producer, api, addr, mq, body, ids, timeout),
        each)


async def _send_ranged(producer: AsyncTransactionProducer, api: MQClientAPI, addr: str, mq: MessageQueue,
                       msgs: Sequence[Message], timeout_ms: int) -> HalfBatchResult:
    items = _half_items(producer, mq, msgs)
    return await _send_ranged_body(producer, api, addr, mq, encode_batch(items),
                                   [str(p[MessageConst.UNIQ_KEY]) for _, _, p in items], timeout_ms)


async def _send_ranged_body(producer: AsyncTransactionProducer, api: MQClientAPI, addr: str, mq: MessageQueue,
                            body: bytes, transaction_ids: list[str], timeout_ms: int) -> HalfBatchResult:
    """One prepared SEND_BATCH_MESSAGE of ``body`` (entries carrying TRAN_MSG, PGROUP, UNIQ_KEY)."""
    n = len(transaction_ids)
    if len(body) > producer.config.max_message_size:
        raise MQClientError(f"the half batch is {len(body)} bytes, more than max_message_size="
                            f"{producer.config.max_message_size}: split it", code=_MESSAGE_ILLEGAL)
    header = SendMessageRequestHeaderV2(
        producer_group=producer.group, topic=mq.topic, default_topic=producer.config.create_topic_key,
        default_topic_queue_nums=producer.config.default_topic_queue_nums, queue_id=mq.queue_id,
        sys_flag=int(SysFlag.TRANSACTION_PREPARED), born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties({MessageConst.WAIT_STORE_MSG_OK: "true"}), reconsume_times=0,
        unit_mode=False, batch=True, broker_name=mq.broker_name)
    cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.to_ext_fields(), body)
    response = await api.invoke(addr, cmd, timeout_ms)
    if response.code != ResponseCode.SUCCESS and response.code not in _STORED_NOT_OK:
        raise MQBrokerError.for_code(response.code, response.remark, addr)
    rh = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
    msg_ids = tuple(rh.msg_id.split(","))
    count = int(response.ext_fields.get(HALF_COUNT_FIELD) or 0)
    if count != n or len(msg_ids) != count:
        raise MQClientError(f"broker {addr} stored {count} half messages ({len(msg_ids)} msgIds) of {n}")
    result = HalfBatchResult(
        broker_addr=addr, broker_name=mq.broker_name, topic=mq.topic, queue_id=rh.queue_id,
        first_half_offset=rh.queue_offset, count=count, first_commit_log_offset=decode_offset_msg_id(msg_ids[0])[2],
        msg_ids=msg_ids, transaction_ids=tuple(transaction_ids), data_bytes=len(body))
    if response.code != ResponseCode.SUCCESS:
        await _rollback_quietly(api, producer.group, [result])
        raise MQBrokerError.for_code(response.code, response.remark, addr)
    return result


async def _send_each(producer: AsyncTransactionProducer, addr: str, mq: MessageQueue, msgs: Sequence[Message],
                     timeout_ms: int) -> HalfBatchResult:
    """Fallback for brokers without the extension: one half message per message, concurrently."""
    for m in msgs:
        if m.topic != mq.topic:
            raise MQClientError(f"message topic {m.topic} differs from the queue's {mq.topic}", code=_MESSAGE_ILLEGAL)
        producer._validate(m)
    halves = [producer._prepare_half(m) for m in msgs]  # refuses delayed messages, as Java does
    slots = asyncio.Semaphore(_FALLBACK_CONCURRENCY)

    async def one(half: Message) -> tuple[int, str, int]:
        async with slots:
            sent = await producer._send_kernel(half, mq, timeout_ms)
        assert sent is not None
        return sent.queue_offset, sent.offset_msg_id, 0 if sent.send_status is SendStatus.SEND_OK else 1

    outcomes = await asyncio.gather(*(one(h) for h in halves), return_exceptions=True)
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    result = HalfBatchResult(
        broker_addr=addr, broker_name=mq.broker_name, topic=mq.topic, queue_id=mq.queue_id,
        first_half_offset=done[0][0] if done else -1, count=len(done),
        first_commit_log_offset=decode_offset_msg_id(done[0][1])[2] if done else -1,
        msg_ids=tuple(o[1] for o in done), ranged=False, half_offsets=tuple(o[0] for o in done),
        transaction_ids=tuple(h.properties[MessageConst.UNIQ_KEY] for h, o in zip(halves, outcomes, strict=True)
                              if not isinstance(o, BaseException)),
        data_bytes=sum(len(m.body) for m in msgs))
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if errors or any(o[2] for o in done):
        if done:
            await _rollback_quietly(producer.instance.api, producer.group, [result])
        if errors:
            raise errors[0]
        raise MQClientError(f"{sum(o[2] for o in done)} half messages were stored but not flushed in time; "
                            "all were rolled back")
    return result


async def _rollback_quietly(api: MQClientAPI, group: str, handles: list[HalfBatchResult]) -> None:
    try:
        await end_transaction_batch(api, group, handles, LocalTransactionState.ROLLBACK_MESSAGE)
    except Exception as exc:  # the broker's check-back will ask about them
        log.warning("rollback of %d half messages failed (the broker will check back): %s",
                    sum(h.count for h in handles), exc)


# ---------------------------------------------------------------------------- end


def _split(handles: list[HalfBatchResult], max_messages: int, max_bytes: int) -> list[list[HalfBatchResult]]:
    """Consecutive parts of at most ``max_messages`` messages and ``max_bytes`` data bytes."""
    parts: list[list[HalfBatchResult]] = []
    part: list[HalfBatchResult] = []
    n = size = 0
    for hb in handles:
        if part and (n + hb.count > max_messages or size + hb.data_bytes > max_bytes):
            parts.append(part)
            part, n, size = [], 0, 0
        part.append(hb)
        n += hb.count
        size += hb.data_bytes
    if part:
        parts.append(part)
    return parts


def _end_header(group: str, hb: HalfBatchResult, i: int, state: LocalTransactionState) -> EndTransactionRequestHeader:
    return EndTransactionRequestHeader(
        producer_group=group, tran_state_table_offset=hb.half_offset(i),
        commit_log_offset=decode_offset_msg_id(hb.msg_ids[i])[2], commit_or_rollback=state.commit_or_rollback,
        from_transaction_check=False, msg_id=hb.msg_ids[i], transaction_id=hb.transaction_ids[i], topic=hb.topic)


async def _end_ranged(api: MQClientAPI, group: str, handles: list[HalfBatchResult], state: LocalTransactionState,
                      timeout_ms: int | None) -> None:
    first = handles[0]
    header = _end_header(group, first, 0, state)
    ranges = [(hb.first_half_offset, hb.count) for hb in handles]
    try:
        ended, skipped = await api.end_transaction_ranges(first.broker_addr, header, ranges, timeout_ms)
    except MQBrokerError as exc:
        if exc.code == ResponseCode.MESSAGE_ILLEGAL and len(handles) > 1 and "split" in (exc.remark or ""):
            mid = len(handles) // 2  # the broker's limits are lower than ours: halve and retry
            await _end_ranged(api, group, handles[:mid], state, timeout_ms)
            await _end_ranged(api, group, handles[mid:], state, timeout_ms)
            return
        raise
    log.debug("ranged END_TRANSACTION %s of %s-%d: %d ended, %d skipped", state.value, first.topic,
              first.queue_id, ended, skipped)


async def _end_queue(api: MQClientAPI, group: str, handles: list[HalfBatchResult], state: LocalTransactionState,
                     timeout_ms: int | None, max_messages: int, max_bytes: int) -> None:
    """End the halves of one (broker, topic, queue), in order."""
    ranged = [hb for hb in handles if hb.ranged and hb.count > 0]
    for part in _split(ranged, max_messages, max_bytes):
        await _end_ranged(api, group, part, state, timeout_ms)
    for hb in handles:
        if not hb.ranged:
            for i in range(hb.count):
                await api.end_transaction(hb.broker_addr, _end_header(group, hb, i, state), oneway=False,
                                          timeout_ms=timeout_ms)


async def end_transaction_batch(api: MQClientAPI, group: str, handles: Sequence[HalfBatchResult],
                                state: LocalTransactionState, *, timeout_ms: int | None = None,
                                max_messages: int = DEFAULT_MAX_MESSAGES, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Commit or roll back every half message of ``handles`` (sent by producers of ``group``).

    One two-way ranged END_TRANSACTION per (broker, topic, queue) holding all its ranges (split
    only above ``max_messages`` / ``max_bytes``), queues in parallel; per-message two-way
    END_TRANSACTIONs for fallback handles.  Raises the first failure (an MQBrokerError carries
    the broker's code and remark) after every queue was attempted; repeating the call is safe on
    rocketq brokers.  UNKNOW is refused: leave the halves to the broker's check-back instead.
    """
    if state is LocalTransactionState.UNKNOW:
        raise MQClientError("end_transaction_batch needs COMMIT_MESSAGE or ROLLBACK_MESSAGE")
    queues: dict[tuple[str, str, int], list[HalfBatchResult]] = {}
    for hb in handles:
        queues.setdefault((hb.broker_addr, hb.topic, hb.queue_id), []).append(hb)
    outcomes = await asyncio.gather(
        *(_end_queue(api, group, hbs, state, timeout_ms, max_messages, max_bytes) for hbs in queues.values()),
        return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    for extra in errors[1:]:
        log.warning("END_TRANSACTION (%s) failed as well: %s", state.value, extra)
    if errors:
        raise errors[0]


def end_transaction_batch_blocking(api: BlockingMQClientAPI, group: str, handles: Sequence[HalfBatchResult],
                                   state: LocalTransactionState, *, timeout_ms: int | None = None) -> None:
    """:func:`end_transaction_batch` for blocking code (a Spark driver): runs on ``api``'s loop."""
    api.run(end_transaction_batch(api.api, group, handles, state, timeout_ms=timeout_ms))
