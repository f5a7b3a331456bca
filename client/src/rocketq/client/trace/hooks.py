"""The trace hooks of producers and consumers (Java's ``SendMessageTraceHookImpl``,
``ConsumeMessageTraceHookImpl`` and ``EndTransactionTraceHookImpl``).

A producer or consumer built with ``enable_msg_trace=True`` owns a :class:`ProducerTracer` or a
:class:`ConsumerTracer`; without it there is no tracer object and the only cost on the send and
consume paths is one ``is not None`` test.  The tracers turn what the client just did into
:class:`TraceRecord`s and hand them to a :class:`TraceDispatcher`; they never raise into the
traced call (a failure to build a record is logged and the record skipped).

* Pub: one record per message a broker answered (a batch gives one per inner message; a oneway
  send one with success true, as nothing comes back), with the send's cost split evenly over the
  batch, the store host and the offset msgId.  Half messages are ``Trans_Msg_Half``, delayed ones
  ``Delay_Msg``.
* SubBefore / SubAfter: around each listener call, per message; SubAfter carries the call's cost
  divided by the batch size, success, and how the call ended (:class:`ConsumeReturnType`).
* EndTransaction: after each END_TRANSACTION, with the state and whether a check-back asked.

Messages of the trace topic itself and messages with the property ``TRACE_ON=false`` are not
traced.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from rocketq.client.errors import MessageFormatError
from rocketq.client.model import LocalTransactionState, Message, MessageExt, SendResult, SendStatus
from rocketq.client.remoting.batch import decode_batch
from rocketq.client.remoting.msgid import new_uniq_key
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.vocabulary import TRACE_TOPIC
from rocketq.client.trace.dispatcher import CONSUME_TRACE, PRODUCE_TRACE, TraceDispatcher, TraceSender
from rocketq.client.trace.model import (
    DEFAULT_REGION,
    ConsumeReturnType,
    MessageType,
    TraceRecord,
    TraceType,
)

__all__ = [
    "ConsumeTrace",
    "ConsumerTracer",
    "ProducerTracer",
    "consume_outcome",
    "consumer_tracer",
    "now_ms",
    "producer_tracer",
]

log = logging.getLogger("rocketq.client.trace")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _never_raises(fn: Callable[_P, _R | None]) -> Callable[_P, _R | None]:
    """A hook must not break the traced call: its failure is logged and the record skipped."""

    @functools.wraps(fn)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R | None:
        try:
            return fn(*args, **kwargs)
        except Exception:
            log.exception("message trace hook %s failed; the trace record is skipped", fn.__name__)
            return None

    return guarded


def now_ms() -> int:
    return int(time.time() * 1000)


def _msg_type(props: Mapping[str, str]) -> MessageType:
    if props.get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true":
        return MessageType.Trans_Msg_Half
    if props.get(MessageConst.DELAY_TIME_LEVEL, "0") not in ("", "0"):
        return MessageType.Delay_Msg
    return MessageType.Normal_Msg


def _traced(props: Mapping[str, str]) -> bool:
    return props.get(MessageConst.TRACE_SWITCH, "").lower() != "false"


class ProducerTracer:
    """Pub and EndTransaction records of one producer."""

    def __init__(self, dispatcher: TraceDispatcher, group: str) -> None:
        self.dispatcher = dispatcher
        self.group = group

    async def start(self) -> None:
        await self.dispatcher.start()

    async def shutdown(self) -> None:
        await self.dispatcher.shutdown()

    def _skip(self, topic: str) -> bool:
        return topic == self.dispatcher.trace_topic

    @_never_raises
    def on_send(
        self,
        topic: str,
        props: Mapping[str, str],
        body_length: int,
        result: SendResult | None,
        store_host: str,
        begin_ms: int,
    ) -> None:
        """A single message was sent (``result`` None: oneway); ``props`` as sent."""
        if self._skip(topic) or not _traced(props):
            return
        self.dispatcher.append([self._pub(topic, props, body_length, result, store_host, begin_ms, 1, None)])

    @_never_raises
    def on_batch(
        self, topic: str, body: bytes, result: SendResult, store_host: str, begin_ms: int, *, prepared: bool
    ) -> None:
        """An encoded SEND_BATCH_MESSAGE body was sent: one Pub record per inner message."""
        if self._skip(topic):
            return
        try:
            entries = decode_batch(body)
        except MessageFormatError as exc:
            log.warning("not tracing a batch to %s: its body does not decode: %s", topic, exc)
            return
        offset_ids = result.offset_msg_id.split(",")
        records = []
        for i, entry in enumerate(entries):
            props = entry.properties
            if not _traced(props):
                continue
            if prepared:
                props = {**props, MessageConst.TRANSACTION_PREPARED: "true"}
            offset_id = offset_ids[i] if len(offset_ids) == len(entries) else ""
            records.append(
                self._pub(
                    topic, props, len(entry.body), result, store_host, begin_ms, len(entries), offset_id
                )
            )
        self.dispatcher.append(records)

    def _pub(
        self,
        topic: str,
        props: Mapping[str, str],
        body_length: int,
        result: SendResult | None,
        store_host: str,
        begin_ms: int,
        count: int,
        offset_msg_id: str | None,
    ) -> TraceRecord:
        """A Pub record; ``offset_msg_id`` None: the result's (a single message)."""
        now = now_ms()
        if result is None:
            offset_msg_id, success, region = "", True, DEFAULT_REGION
        else:
            if offset_msg_id is None:
                offset_msg_id = result.offset_msg_id
            success = result.send_status is SendStatus.SEND_OK
            region = result.region_id or DEFAULT_REGION
        return TraceRecord(
            trace_type=TraceType.Pub,
            timestamp_ms=begin_ms,
            region_id=region,
            group_name=self.group,
            topic=topic,
            msg_id=props.get(MessageConst.UNIQ_KEY, ""),
            tags=props.get(MessageConst.TAGS) or None,
            keys=props.get(MessageConst.KEYS) or None,
            store_host=store_host,
            body_length=body_length,
            cost_time_ms=max(0, now - begin_ms) // max(1, count),
            success=success,
            msg_type=_msg_type(props),
            offset_msg_id=offset_msg_id,
        )

    @_never_raises
    def on_end_transaction(
        self,
        msg: Message | MessageExt,
        msg_id: str,
        transaction_id: str | None,
        store_host: str,
        state: LocalTransactionState,
        *,
        from_check: bool,
    ) -> None:
        """END_TRANSACTION was sent for the half message ``msg``."""
        if self._skip(msg.topic):
            return
        props = msg.properties
        keys = props.get(MessageConst.KEYS) or (msg.keys_str if isinstance(msg, Message) else None)
        tags = props.get(MessageConst.TAGS) or msg.tags
        record = TraceRecord(
            trace_type=TraceType.EndTransaction,
            timestamp_ms=now_ms(),
            region_id=props.get(MessageConst.MSG_REGION) or DEFAULT_REGION,
            group_name=self.group,
            topic=msg.topic,
            msg_id=msg_id,
            tags=tags or None,
            keys=keys or None,
            store_host=store_host,
            msg_type=MessageType.Trans_msg_Commit,
            transaction_id=transaction_id,
            transaction_state=state,
            from_transaction_check=from_check,
        )
        self.dispatcher.append([record])


@dataclass(slots=True)
class ConsumeTrace:
    """The SubBefore records of one listener call, kept until it returns."""

    begin_ms: int
    request_id: str
    before: list[TraceRecord]


class ConsumerTracer:
    """SubBefore and SubAfter records of one consumer group."""

    def __init__(self, dispatcher: TraceDispatcher, group: str) -> None:
        self.dispatcher = dispatcher
        self.group = group

    async def start(self) -> None:
        await self.dispatcher.start()

    async def shutdown(self) -> None:
        await self.dispatcher.shutdown()

    @_never_raises
    def before(self, msgs: Sequence[MessageExt]) -> ConsumeTrace | None:
        """SubBefore for the traced messages of ``msgs``; None when none is traced."""
        begin = now_ms()
        request_id = new_uniq_key()
        records = []
        for m in msgs:
            props = m.properties
            if m.topic == self.dispatcher.trace_topic or not _traced(props):
                continue
            records.append(
                TraceRecord(
                    trace_type=TraceType.SubBefore,
                    timestamp_ms=begin,
                    region_id=props.get(MessageConst.MSG_REGION) or DEFAULT_REGION,
                    group_name=self.group,
                    topic=m.topic,
                    request_id=request_id,
                    msg_id=m.msg_id,
                    tags=m.tags or None,
                    keys=props.get(MessageConst.KEYS) or None,
                    store_host=_host(m.store_host),
                    body_length=len(m.body),
                    retry_times=m.reconsume_times,
                )
            )
        if not records:
            return None
        self.dispatcher.append(records)
        return ConsumeTrace(begin, request_id, records)

    @_never_raises
    def after(self, trace: ConsumeTrace | None, success: bool, how: ConsumeReturnType) -> None:
        """SubAfter for the messages of ``trace``: the listener call ended ``how``."""
        if trace is None:
            return
        end = now_ms()
        cost = max(0, end - trace.begin_ms) // len(trace.before)
        self.dispatcher.append(
            [
                TraceRecord(
                    trace_type=TraceType.SubAfter,
                    timestamp_ms=end,
                    region_id=b.region_id,
                    group_name=self.group,
                    topic=b.topic,
                    request_id=trace.request_id,
                    msg_id=b.msg_id,
                    tags=b.tags,
                    keys=b.keys,
                    store_host=b.store_host,
                    body_length=b.body_length,
                    cost_time_ms=cost,
                    success=success,
                    context_code=how,
                )
                for b in trace.before
            ]
        )


def consume_outcome(status: object, success: bool, raised: bool) -> ConsumeReturnType:
    """How a listener call ended: it raised, returned no status, failed, or succeeded."""
    if raised:
        return ConsumeReturnType.EXCEPTION
    if status is None:
        return ConsumeReturnType.RETURNNULL
    return ConsumeReturnType.SUCCESS if success else ConsumeReturnType.FAILED


def _host(addr: tuple[str, int] | str) -> str:
    return addr if isinstance(addr, str) else f"{addr[0]}:{addr[1]}"


def producer_tracer(sender: TraceSender, group: str, trace_topic: str | None) -> ProducerTracer:
    """The tracer of a producer with ``enable_msg_trace`` (``trace_topic`` None: RMQ_SYS_TRACE_TOPIC);
    ``sender``: the inner producer of ``trace_producer_config(group, PRODUCE_TRACE, ...)``."""
    dispatcher = TraceDispatcher(
        sender, trace_topic=trace_topic or TRACE_TOPIC, owner_group=group, kind=PRODUCE_TRACE
    )
    return ProducerTracer(dispatcher, group)


def consumer_tracer(sender: TraceSender, group: str, trace_topic: str | None) -> ConsumerTracer:
    """The tracer of a consumer with ``enable_msg_trace`` (``trace_topic`` None: RMQ_SYS_TRACE_TOPIC);
    ``sender``: the inner producer of ``trace_producer_config(group, CONSUME_TRACE, ...)``."""
    dispatcher = TraceDispatcher(
        sender, trace_topic=trace_topic or TRACE_TOPIC, owner_group=group, kind=CONSUME_TRACE
    )
    return ConsumerTracer(dispatcher, group)
