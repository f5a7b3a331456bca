"""Batched transactions: many half messages in one send, ended by one request per queue.

Theory of operation (docs/transactions.md, "rocketq extensions: batched transactions").  A rocketq
broker advertises ``rocketqTransactionBatch`` (:meth:`MQClientAPI.supports_transaction_batch`).
Against it, :func:`send_half_batch` sends a SEND_BATCH_MESSAGE with the TRANSACTION_PREPARED
sysFlag whose inner messages carry ``TRAN_MSG=true``, ``PGROUP`` and a fixed ``UNIQ_KEY`` (the
transaction id); the broker stores them as half messages at contiguous half-queue offsets, so the
returned :class:`HalfBatchResult` is one range.  The layers follow the producer's: messages are
encoded into a :class:`PreparedHalfBatch` (senders that encode their own rows build one
directly), which the producer's internal API sends (``send_batch_request``: header, route lookup
with ``TBW102`` auto-creation, typed errors).  What this module needs of the producer is the
:class:`HalfBatchSender` protocol, which ``AsyncTransactionProducer`` satisfies; this module
imports no transaction producer.  :func:`end_transaction_batch` sends, per (broker,
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
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from rocketq.client.api import BlockingMQClientAPI, MQClientAPI
from rocketq.client.config import ProducerConfig
from rocketq.client.errors import (
    MessageFormatError,
    MQBrokerError,
    MQClientError,
    RemotingError,
    RocketQError,
)
from rocketq.client.instance import ClientInstance
from rocketq.client.model import LocalTransactionState, Message, SendResult, SendStatus
from rocketq.client.producer.core import BatchReply
from rocketq.client.remoting.batch import BatchItem, append_properties, decode_batch_columns, encode_batch
from rocketq.client.remoting.headers import EndTransactionRequestHeader
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.remoting.properties import (
    MessageConst,
    decode_properties,
    encode_properties,
    find_property,
)
from rocketq.client.remoting.txn_batch import DEFAULT_MAX_BYTES, DEFAULT_MAX_MESSAGES, HALF_COUNT_FIELD
from rocketq.client.remoting.vocabulary import MessageQueue, ResponseCode

__all__ = [
    "HalfBatchResult",
    "HalfBatchSender",
    "PreparedHalfBatch",
    "end_transaction_batch",
    "end_transaction_batch_blocking",
    "send_half_batch",
]

log = logging.getLogger("rocketq.client.transaction")

_ILLEGAL = ResponseCode.MESSAGE_ILLEGAL
_FALLBACK_CONCURRENCY = 32


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


class HalfBatchSender(Protocol):
    """What :func:`send_half_batch` needs of a transaction producer (``AsyncTransactionProducer``)."""

    @property
    def group(self) -> str: ...

    @property
    def config(self) -> ProducerConfig: ...

    @property
    def instance(self) -> ClientInstance: ...

    def check_running(self) -> None:
        """Raise MQClientError unless the producer is started."""

    def validate(self, msg: Message) -> None:
        """Raise MQClientError if ``msg`` cannot be sent (topic, body, size)."""

    def half_message(self, msg: Message) -> Message:
        """``msg`` as a half message of this producer (``TRAN_MSG``, ``PGROUP``, ``UNIQ_KEY``)."""
        ...

    async def broker_addr_of(self, mq: MessageQueue) -> str:
        """The master address of ``mq``'s broker, after a send's route lookup."""
        ...

    async def send(self, msg: Message, *, queue: MessageQueue, timeout_ms: int | None) -> SendResult:
        """Send one message to ``queue`` and wait for the broker's answer."""
        ...

    async def send_batch_request(
        self, mq: MessageQueue, body: bytes, *, count: int, prepared: bool, timeout_ms: int | None
    ) -> BatchReply:
        """Send an encoded SEND_BATCH_MESSAGE body to ``mq`` and return the whole answer."""
        ...

    async def heartbeat_broker(self, addr: str) -> None:
        """Register the producer with ``addr`` once (the broker may check back)."""


# ---------------------------------------------------------------------------- batching


@dataclass(frozen=True, slots=True)
class PreparedHalfBatch:
    """An encoded SEND_BATCH_MESSAGE body of half messages, sent as it is.

    Every entry (:func:`~rocketq.client.remoting.batch.encode_batch` format) carries ``UNIQ_KEY``
    = ``transaction_ids[i]`` and ends its properties with ``TRAN_MSG=true`` and the sending
    producer's ``PGROUP`` (last, so that the broker's bulk path recognises them with one
    comparison per entry).  Senders that encode their own rows (the Spark sink) build it
    directly; :meth:`of_encoded` appends the transaction properties to a plain encoded batch.
    """

    body: bytes
    transaction_ids: tuple[str, ...]

    @classmethod
    def of_encoded(
        cls, body: bytes, producer_group: str, *, extra_properties: Mapping[str, str] | None = None
    ) -> PreparedHalfBatch:
        """``body`` (entries carrying their ``UNIQ_KEY``) with ``extra_properties``, ``TRAN_MSG``
        and ``PGROUP`` appended to every entry's properties as bytes, without decoding messages."""
        extra = {
            **(extra_properties or {}),
            MessageConst.TRANSACTION_PREPARED: "true",
            MessageConst.PRODUCER_GROUP: producer_group,
        }
        try:
            wire, cols = append_properties(body, encode_properties(extra).encode())
        except MessageFormatError as exc:
            raise MQClientError(f"the encoded half batch is malformed: {exc}", code=_ILLEGAL) from exc
        uniq = [find_property(p, MessageConst.UNIQ_KEY) for p in cols.properties]
        if None in uniq:
            raise MQClientError(
                f"message {uniq.index(None)} of the encoded half batch has no UNIQ_KEY", code=_ILLEGAL
            )
        return cls(wire, tuple(u for u in uniq if u is not None))

    def messages(self, topic: str) -> list[Message]:
        """The entries as messages of ``topic`` (for brokers without batched transactions)."""
        try:
            cols = decode_batch_columns(self.body)
        except MessageFormatError as exc:
            raise MQClientError(f"the prepared half batch is malformed: {exc}", code=_ILLEGAL) from exc
        return [
            Message(topic, bytes(b), flag=f, properties=decode_properties(p))
            for f, b, p in zip(cols.flags, cols.bodies, cols.properties, strict=True)
        ]


def _prepare(producer: HalfBatchSender, mq: MessageQueue, msgs: Sequence[Message]) -> PreparedHalfBatch:
    """``msgs`` as half messages of ``producer`` encoded in one body (TRAN_MSG and PGROUP last)."""
    items: list[BatchItem] = []
    ids: list[str] = []
    for half in _halves(producer, mq, msgs):
        props = half.wire_properties()
        for key in (MessageConst.TRANSACTION_PREPARED, MessageConst.PRODUCER_GROUP):
            props[key] = props.pop(key)
        items.append((half.flag, half.body, props))
        ids.append(props[MessageConst.UNIQ_KEY])
    try:
        return PreparedHalfBatch(encode_batch(items), tuple(ids))
    except MessageFormatError as exc:
        raise MQClientError(f"cannot batch: {exc}", code=_ILLEGAL) from exc


def _halves(producer: HalfBatchSender, mq: MessageQueue, msgs: Sequence[Message]) -> list[Message]:
    """The half messages of ``msgs`` (validated; delayed messages refused, as Java does)."""
    for m in msgs:
        if m.topic != mq.topic:
            raise MQClientError(f"message topic {m.topic} differs from the queue's {mq.topic}", code=_ILLEGAL)
        producer.validate(m)
    return [producer.half_message(m) for m in msgs]


# ---------------------------------------------------------------------------- send


async def send_half_batch(
    producer: HalfBatchSender,
    mq: MessageQueue,
    batch: Sequence[Message] | PreparedHalfBatch,
    *,
    timeout_ms: int | None = None,
) -> HalfBatchResult:
    """Store ``batch`` (messages of ``mq.topic``, or a prepared body) as half messages of ``mq``.

    The route lookup is every send's (the ``TBW102`` template for a topic that does not exist
    yet, which a broker with ``autoCreateTopicEnable`` creates).  On a rocketq broker: one
    SEND_BATCH_MESSAGE, which must fit ``max_message_size`` (4 MiB; split larger lists); else
    one half message per message.  Then the broker is heartbeated once (it may check back).
    Raises on failure; half messages stored but not flushed in time are rolled back (best
    effort) before the error is raised.
    """
    producer.check_running()
    prepared, msgs = (batch, []) if isinstance(batch, PreparedHalfBatch) else (None, list(batch))
    if not (prepared.transaction_ids if prepared is not None else msgs):
        raise MQClientError("send_half_batch needs at least one message", code=_ILLEGAL)
    timeout = timeout_ms or producer.config.send_msg_timeout_ms
    addr = await producer.broker_addr_of(mq)
    api = producer.instance.api
    if await api.supports_transaction_batch(addr):
        result = await _send_ranged(producer, mq, prepared or _prepare(producer, mq, msgs), timeout)
    else:
        each = msgs if prepared is None else prepared.messages(mq.topic)
        result = await _send_each(producer, addr, mq, each, timeout)
    await producer.heartbeat_broker(addr)
    return result


async def _send_ranged(
    producer: HalfBatchSender, mq: MessageQueue, batch: PreparedHalfBatch, timeout_ms: int
) -> HalfBatchResult:
    """One prepared SEND_BATCH_MESSAGE; the broker must answer with its half count."""
    n = len(batch.transaction_ids)
    reply = await producer.send_batch_request(mq, batch.body, count=n, prepared=True, timeout_ms=timeout_ms)
    sent, addr = reply.result, reply.broker_addr
    msg_ids = tuple(sent.offset_msg_id.split(","))
    count = int(reply.ext_fields.get(HALF_COUNT_FIELD) or 0)
    if count != n or len(msg_ids) != count:
        raise MQClientError(f"broker {addr} stored {count} half messages ({len(msg_ids)} msgIds) of {n}")
    result = HalfBatchResult(
        broker_addr=addr,
        broker_name=mq.broker_name,
        topic=mq.topic,
        queue_id=sent.message_queue.queue_id,
        first_half_offset=sent.queue_offset,
        count=count,
        first_commit_log_offset=decode_offset_msg_id(msg_ids[0])[2],
        msg_ids=msg_ids,
        transaction_ids=batch.transaction_ids,
        data_bytes=len(batch.body),
    )
    if sent.send_status is not SendStatus.SEND_OK:
        await _rollback_quietly(producer.instance.api, producer.group, [result])
        raise MQBrokerError.for_code(reply.code, reply.remark, addr)
    return result


async def _send_each(
    producer: HalfBatchSender, addr: str, mq: MessageQueue, msgs: Sequence[Message], timeout_ms: int
) -> HalfBatchResult:
    """Fallback for brokers without the extension: one half message per message, concurrently."""
    halves = _halves(producer, mq, msgs)
    slots = asyncio.Semaphore(_FALLBACK_CONCURRENCY)

    async def one(half: Message) -> tuple[int, str, int]:
        async with slots:
            sent = await producer.send(half, queue=mq, timeout_ms=timeout_ms)
        return sent.queue_offset, sent.offset_msg_id, 0 if sent.send_status is SendStatus.SEND_OK else 1

    outcomes = await asyncio.gather(*(one(h) for h in halves), return_exceptions=True)
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    result = HalfBatchResult(
        broker_addr=addr,
        broker_name=mq.broker_name,
        topic=mq.topic,
        queue_id=mq.queue_id,
        first_half_offset=done[0][0] if done else -1,
        count=len(done),
        first_commit_log_offset=decode_offset_msg_id(done[0][1])[2] if done else -1,
        msg_ids=tuple(o[1] for o in done),
        ranged=False,
        half_offsets=tuple(o[0] for o in done),
        transaction_ids=tuple(
            h.properties[MessageConst.UNIQ_KEY]
            for h, o in zip(halves, outcomes, strict=True)
            if not isinstance(o, BaseException)
        ),
        data_bytes=sum(len(m.body) for m in msgs),
    )
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    if errors or any(o[2] for o in done):
        if done:
            await _rollback_quietly(producer.instance.api, producer.group, [result])
        if errors:
            raise errors[0]
        raise MQClientError(
            f"{sum(o[2] for o in done)} half messages were stored but not flushed in time; "
            "all were rolled back"
        )
    return result


async def _rollback_quietly(api: MQClientAPI, group: str, handles: list[HalfBatchResult]) -> None:
    try:
        await end_transaction_batch(api, group, handles, LocalTransactionState.ROLLBACK_MESSAGE)
    except Exception as exc:  # the broker's check-back will ask about them
        log.warning(
            "rollback of %d half messages failed (the broker will check back): %s",
            sum(h.count for h in handles),
            exc,
        )


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


def _end_header(
    group: str, hb: HalfBatchResult, i: int, state: LocalTransactionState
) -> EndTransactionRequestHeader:
    return EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=hb.half_offset(i),
        commit_log_offset=decode_offset_msg_id(hb.msg_ids[i])[2],
        commit_or_rollback=state.commit_or_rollback,
        from_transaction_check=False,
        msg_id=hb.msg_ids[i],
        transaction_id=hb.transaction_ids[i],
        topic=hb.topic,
    )


async def _end_ranged(
    api: MQClientAPI,
    group: str,
    handles: list[HalfBatchResult],
    state: LocalTransactionState,
    timeout_ms: int | None,
) -> None:
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
    log.debug(
        "ranged END_TRANSACTION %s of %s-%d: %d ended, %d skipped",
        state.value,
        first.topic,
        first.queue_id,
        ended,
        skipped,
    )


async def _end_queue(
    api: MQClientAPI,
    group: str,
    handles: list[HalfBatchResult],
    state: LocalTransactionState,
    timeout_ms: int | None,
    max_messages: int,
    max_bytes: int,
) -> None:
    """End the halves of one (broker, topic, queue), in order; after a failover, on the group's
    new master (see :func:`_current_master`)."""
    try:
        await _end_queue_at(api, group, handles, state, timeout_ms, max_messages, max_bytes)
    except (RemotingError, MQBrokerError) as exc:
        if isinstance(exc, MQBrokerError) and not exc.retriable:
            raise
        first = handles[0]
        master = await _current_master(api, first)
        if master is None or master == first.broker_addr:
            raise
        log.info(
            "END_TRANSACTION of %s-%d: %s failed (%s); ending on the new master %s of %s",
            first.topic, first.queue_id, first.broker_addr, exc, master, first.broker_name,
        )  # fmt: skip
        moved = [dataclasses.replace(hb, broker_addr=master) for hb in handles]
        await _end_queue_at(api, group, moved, state, timeout_ms, max_messages, max_bytes)


async def _current_master(api: MQClientAPI, hb: HalfBatchResult) -> str | None:
    """The master the NameServer lists now for ``hb``'s broker group (None if none or no answer).

    A master elected in controller mode holds the old master's CommitLog byte for byte up to
    what was acknowledged, so the half messages are at the same offsets there."""
    try:
        route = await api.get_topic_route(hb.topic)
    except RocketQError:
        return None
    return route.master_addr(hb.broker_name)


async def _end_queue_at(
    api: MQClientAPI,
    group: str,
    handles: list[HalfBatchResult],
    state: LocalTransactionState,
    timeout_ms: int | None,
    max_messages: int,
    max_bytes: int,
) -> None:
    ranged = [hb for hb in handles if hb.ranged and hb.count > 0]
    for part in _split(ranged, max_messages, max_bytes):
        await _end_ranged(api, group, part, state, timeout_ms)
    for hb in handles:
        if not hb.ranged:
            for i in range(hb.count):
                await api.end_transaction(
                    hb.broker_addr, _end_header(group, hb, i, state), oneway=False, timeout_ms=timeout_ms
                )


async def end_transaction_batch(
    api: MQClientAPI,
    group: str,
    handles: Sequence[HalfBatchResult],
    state: LocalTransactionState,
    *,
    timeout_ms: int | None = None,
    max_messages: int = DEFAULT_MAX_MESSAGES,
    max_bytes: int = DEFAULT_MAX_BYTES,
    parallel: int | None = None,
) -> None:
    """Commit or roll back every half message of ``handles`` (sent by producers of ``group``).

    One two-way ranged END_TRANSACTION per (broker, topic, queue) holding all its ranges (split
    only above ``max_messages`` / ``max_bytes``), queues in parallel (at most ``parallel`` queues
    at a time when given: the next starts as soon as one is done); per-message two-way
    END_TRANSACTIONs for fallback handles.  Raises the first failure (an MQBrokerError carries
    the broker's code and remark) after every queue was attempted; repeating the call is safe on
    rocketq brokers.  UNKNOW is refused: leave the halves to the broker's check-back instead.
    """
    if state is LocalTransactionState.UNKNOW:
        raise MQClientError("end_transaction_batch needs COMMIT_MESSAGE or ROLLBACK_MESSAGE")
    queues: dict[tuple[str, str, int], list[HalfBatchResult]] = {}
    for hb in handles:
        queues.setdefault((hb.broker_addr, hb.topic, hb.queue_id), []).append(hb)
    if parallel is not None and parallel < 1:
        raise MQClientError(f"end_transaction_batch: parallel must be at least 1, got {parallel}")
    slots = asyncio.Semaphore(parallel or len(queues) or 1)

    async def end_queue(hbs: list[HalfBatchResult]) -> None:
        async with slots:
            await _end_queue(api, group, hbs, state, timeout_ms, max_messages, max_bytes)

    outcomes = await asyncio.gather(*(end_queue(hbs) for hbs in queues.values()), return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    for extra in errors[1:]:
        log.warning("END_TRANSACTION (%s) failed as well: %s", state.value, extra)
    if errors:
        raise errors[0]


def end_transaction_batch_blocking(
    api: BlockingMQClientAPI,
    group: str,
    handles: Sequence[HalfBatchResult],
    state: LocalTransactionState,
    *,
    timeout_ms: int | None = None,
    parallel: int | None = None,
) -> None:
    """:func:`end_transaction_batch` for blocking code (a Spark driver): runs on ``api``'s loop."""
    api.run(end_transaction_batch(api.api, group, handles, state, timeout_ms=timeout_ms, parallel=parallel))
