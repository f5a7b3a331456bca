"""The POP state records of the revive log: checkpoints (CK), acks (AK) and batch acks, in RocketMQ's JSON.

A POP writes one checkpoint per queue batch to the revive topic (``rmq_sys_REVIVE_LOG_<cluster>``,
``reviveQueueNum`` queues); each ACK writes an ack record to the same revive queue.  The bodies
are the JSON fastjson writes for Java's ``PopCheckPoint``, ``AckMsg`` and ``BatchAckMsg``
(``store/pop/``), keys sorted as fastjson sorts them::

    CK   {"bm":0,"bn":"broker-a","c":"group","d":[0,1,2],"it":60000,"n":3,"pt":1700000000000,
          "q":1,"reviveTime":1700000060000,"ro":0,"so":100,"t":"topic"}
    AK   {"ao":101,"bn":"broker-a","c":"group","pt":1700000000000,"q":1,"so":100,"t":"topic"}
    bAck {"ao":-1,"aol":[100,102],"bn":"broker-a","c":"group","pt":...,"q":1,"so":100,"t":"topic"}

``reviveTime`` is what fastjson adds for ``PopCheckPoint.getReviveTime()``; readers ignore it and
any other unknown key, and accept the acks' long key names (``ackOffset`` ...) as Java's
``alternateNames`` do.  Messages carry tag ``ck``/``ack``/``bAck``, a ``UNIQ_KEY`` built as
``PopMessageProcessor.genCkUniqueId``/``genAckUniqueId``/``genBatchAckUniqueId`` build it, and
``TIMER_DELIVER_MS``: ``popTime + invisibleTime - 1000`` for a checkpoint, ``popTime +
invisibleTime`` for an ack (Java's ``ackTimeInterval``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketq.broker.errors import BrokerError
from rocketq.broker.store.record_batch import MessageToStore
from rocketq.client.remoting.properties import MessageConst

__all__ = [
    "ACK_TAG",
    "ACK_TIME_INTERVAL_MS",
    "BATCH_ACK_TAG",
    "CK_TAG",
    "AckMsg",
    "PopCheckPoint",
    "ReviveRecordError",
    "ack_message",
    "ck_message",
    "decode_record",
]

CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
#: ``PopAckConstants.ackTimeInterval``: a checkpoint is delivered this much before its revive time
ACK_TIME_INTERVAL_MS = 1000
_SPLIT = "@"


class ReviveRecordError(BrokerError):
    """A revive-log body that is not a checkpoint or ack record (the position is in the message)."""


def _jstr(text: str) -> str:
    """A JSON string as ``json.dumps`` writes it (topic and group names need no escapes)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return json.dumps(text)


def _jints(values: tuple[int, ...]) -> str:
    return f"[{','.join(map(str, values))}]"


def _pick(doc: Mapping[str, Any], short: str, long: str, default: Any = None) -> Any:
    if short in doc:
        return doc[short]
    return doc.get(long, default)


@dataclass(frozen=True, kw_only=True, slots=True)
class PopCheckPoint:
    """One POP of one queue: which offsets went out, when, and for how long they are invisible."""

    start_offset: int
    pop_time: int
    invisible_time: int
    queue_id: int
    topic: str
    cid: str
    queue_offset_diff: tuple[int, ...]
    broker_name: str | None = None
    bit_map: int = 0
    revive_offset: int = 0
    re_put_times: str | None = None

    @property
    def num(self) -> int:
        return len(self.queue_offset_diff)

    @property
    def revive_time(self) -> int:
        """``PopCheckPoint.getReviveTime``: when its un-acked messages come back."""
        return self.pop_time + self.invisible_time

    def queue_offset(self, index: int) -> int:
        return self.start_offset + self.queue_offset_diff[index]

    @property
    def queue_offsets(self) -> list[int]:
        return [self.start_offset + d for d in self.queue_offset_diff]

    @property
    def end_offset(self) -> int:
        """The queue offset after the last message of the batch (the pop offset it implies)."""
        return self.start_offset + (self.queue_offset_diff[-1] + 1 if self.queue_offset_diff else 0)

    def to_json(self) -> bytes:
        """fastjson's text: keys sorted, ``bn``/``rp`` left out when None (written on every POP, so
        by hand rather than through ``json.dumps(sort_keys=True)``)."""
        bn = "" if self.broker_name is None else f'"bn":{_jstr(self.broker_name)},'
        rp = "" if self.re_put_times is None else f'"rp":{_jstr(self.re_put_times)},'
        return (
            f'{{"bm":{int(self.bit_map)},{bn}"c":{_jstr(self.cid)},"d":{_jints(self.queue_offset_diff)},'
            f'"it":{int(self.invisible_time)},"n":{self.num},"pt":{int(self.pop_time)},'
            f'"q":{int(self.queue_id)},"reviveTime":{int(self.revive_time)},"ro":{int(self.revive_offset)},'
            f'{rp}"so":{int(self.start_offset)},"t":{_jstr(self.topic)}}}'
        ).encode()

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> PopCheckPoint:
        diff = doc.get("d")
        if diff is None:  # Java writes a null list for a mock checkpoint of n messages
            diff = list(range(int(doc.get("n", 0))))
        return cls(
            start_offset=int(doc["so"]),
            pop_time=int(doc["pt"]),
            invisible_time=int(doc["it"]),
            queue_id=int(doc["q"]),
            topic=str(doc["t"]),
            cid=str(doc["c"]),
            queue_offset_diff=tuple(map(int, diff)),
            broker_name=doc.get("bn"),
            bit_map=int(doc.get("bm", 0)),
            revive_offset=int(doc.get("ro", 0)),
            re_put_times=doc.get("rp"),
        )

    def unique_id(self) -> str:
        """``genCkUniqueId``: ``topic@queueId@startOffset@cid@popTime@brokerName@ck``."""
        return _SPLIT.join(
            (
                self.topic,
                str(self.queue_id),
                str(self.start_offset),
                self.cid,
                str(self.pop_time),
                str(self.broker_name),
                CK_TAG,
            )
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class AckMsg:
    """An ack of one offset (``AckMsg``) or, with ``ack_offsets``, of several (``BatchAckMsg``)."""

    ack_offset: int
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str | None = None
    #: BatchAckMsg's ``aol``; empty for a single ack
    ack_offsets: tuple[int, ...] = field(default=())

    @property
    def is_batch(self) -> bool:
        return bool(self.ack_offsets)

    @property
    def offsets(self) -> tuple[int, ...]:
        return self.ack_offsets if self.is_batch else (self.ack_offset,)

    def to_json(self) -> bytes:
        """fastjson's text: keys sorted, ``bn`` left out when None, ``aol`` for a batch only."""
        aol = f'"aol":{_jints(self.ack_offsets)},' if self.is_batch else ""
        bn = "" if self.broker_name is None else f'"bn":{_jstr(self.broker_name)},'
        return (
            f'{{"ao":{int(self.ack_offset)},{aol}{bn}"c":{_jstr(self.consumer_group)},'
            f'"pt":{int(self.pop_time)},"q":{int(self.queue_id)},"so":{int(self.start_offset)},'
            f'"t":{_jstr(self.topic)}}}'
        ).encode()

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> AckMsg:
        aol = _pick(doc, "aol", "ackOffsetList") or ()
        return cls(
            ack_offset=int(_pick(doc, "ao", "ackOffset", -1)),
            start_offset=int(_pick(doc, "so", "startOffset")),
            consumer_group=str(_pick(doc, "c", "consumerGroup")),
            topic=str(_pick(doc, "t", "topic")),
            queue_id=int(_pick(doc, "q", "queueId")),
            pop_time=int(_pick(doc, "pt", "popTime")),
            broker_name=_pick(doc, "bn", "brokerName"),
            ack_offsets=tuple(map(int, aol)),
        )

    def unique_id(self) -> str:
        """``genAckUniqueId`` (``topic@queueId@ackOffset@group@popTime@brokerName@ack``), or for a
        batch ``genBatchAckUniqueId`` (``topic@queueId@[o1, o2]@group@popTime@bAck``)."""
        parts: tuple[str, ...]
        if self.is_batch:
            listed = "[" + ", ".join(map(str, self.ack_offsets)) + "]"
            parts = (
                self.topic,
                str(self.queue_id),
                listed,
                self.consumer_group,
                str(self.pop_time),
                BATCH_ACK_TAG,
            )
        else:
            parts = (
                self.topic,
                str(self.queue_id),
                str(self.ack_offset),
                self.consumer_group,
                str(self.pop_time),
                str(self.broker_name),
                ACK_TAG,
            )
        return _SPLIT.join(parts)


def decode_record(tag: str | None, body: bytes) -> PopCheckPoint | AckMsg:
    """A revive-log message back into its record, chosen by the message's tag."""
    try:
        doc = json.loads(body)
        if not isinstance(doc, dict):
            raise TypeError("not a JSON object")
        if tag == CK_TAG:
            return PopCheckPoint.from_doc(doc)
        if tag in (ACK_TAG, BATCH_ACK_TAG):
            return AckMsg.from_doc(doc)
    except (ValueError, TypeError, KeyError) as exc:
        raise ReviveRecordError(
            f"revive record with tag {tag!r} is malformed ({exc}): {body[:200]!r}"
        ) from exc
    raise ReviveRecordError(f"revive record with unknown tag {tag!r}: {body[:200]!r}")


def _record_message(
    *,
    revive_topic: str,
    revive_qid: int,
    tag: str,
    body: bytes,
    uniq_key: str,
    deliver_ms: int,
    now_ms: int,
    store_host: tuple[str, int],
) -> MessageToStore:
    props = {
        MessageConst.TAGS: tag,
        MessageConst.UNIQ_KEY: uniq_key,
        MessageConst.TIMER_DELIVER_MS: str(deliver_ms),
    }
    return MessageToStore(
        topic=revive_topic,
        queue_id=revive_qid,
        body=body,
        properties=props,
        born_timestamp=now_ms,
        born_host=store_host,
        store_host=store_host,
    )


def ck_message(
    ck: PopCheckPoint, *, revive_topic: str, revive_qid: int, now_ms: int, store_host: tuple[str, int]
) -> MessageToStore:
    """``PopMessageProcessor.buildCkMsg``: delivered ``ackTimeInterval`` before the revive time."""
    return _record_message(
        revive_topic=revive_topic,
        revive_qid=revive_qid,
        tag=CK_TAG,
        body=ck.to_json(),
        uniq_key=ck.unique_id(),
        deliver_ms=ck.revive_time - ACK_TIME_INTERVAL_MS,
        now_ms=now_ms,
        store_host=store_host,
    )


def ack_message(
    ack: AckMsg,
    *,
    invisible_time: int,
    revive_topic: str,
    revive_qid: int,
    now_ms: int,
    store_host: tuple[str, int],
) -> MessageToStore:
    """``AckMessageProcessor.appendAck``: delivered at ``popTime + invisibleTime``."""
    return _record_message(
        revive_topic=revive_topic,
        revive_qid=revive_qid,
        tag=BATCH_ACK_TAG if ack.is_batch else ACK_TAG,
        body=ack.to_json(),
        uniq_key=ack.unique_id(),
        deliver_ms=ack.pop_time + invisible_time,
        now_ms=now_ms,
        store_host=store_host,
    )
