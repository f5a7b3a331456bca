"""POP consumption on the wire: the RocketMQ 5 headers, extraInfo (receipt handle) strings and bodies.

Everything a POP client and a POP broker must agree on byte for byte lives here, for both sides:
the request/response headers of POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME,
NOTIFICATION, POLLING_INFO and PEEK_MESSAGE, the BATCH_ACK_MESSAGE body, the ``extraInfo``
string (``ExtraInfoUtil``) and the per-message ``POP_CK`` property a client derives from a pop
response (``MQClientAPIImpl.processPopResponse``).

Theory of operation.  A pop leases messages instead of moving an offset: the broker answers
with the messages and, in the response header, ``popTime``, ``invisibleTime`` and ``reviveQid``
(the revive queue holding the checkpoint; 999 marks an orderly pop) plus three strings that
say where each message came from, keyed by ``retryFlag@queueId``:

- ``startOffsetInfo`` ``"flag queueId startOffset;..."``: the first offset of the checkpoint
  the broker wrote for that queue (the checkpoint's identity);
- ``msgOffsetInfo`` ``"flag queueId o1,o2,...;..."``: the queue offsets popped from it, in
  the order the messages appear in the body;
- ``orderCountInfo`` ``"flag queueId count"`` or ``"flag qo<queueId>%<offset> count"``: how
  often an orderly message was consumed before (it becomes ``reconsumeTimes``).

``flag`` is the retry flag of the topic the message was read from: "0" the topic itself, "1"
the pop retry topic ``%RETRY%group_topic``, "2" its V2 form ``%RETRY%group+topic``.  From these
the client builds each message's ``POP_CK``, the receipt handle, nine space-separated fields::

    ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId queueOffset [commitLogOffset]

(the ninth is appended by the gRPC proxy only).  An ack or a change of invisible time sends the
handle back as ``extraInfo`` together with the *real* topic (the pop retry topic for flags 1 and
2), the queue id and the message's queue offset; the broker finds the checkpoint from the first
fields.  A change of invisible time acks the old checkpoint and writes a new one that starts at
the message itself, so the new handle is ``offset newPopTime newInvisible reviveQid flag broker
queueId offset``.  The message becomes visible again at ``popTime + invisibleTime``.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from rocketq.client.errors import HeaderError
from rocketq.client.remoting.headers import CommandHeader, command_header, jbool, jint, jlong, jstr
from rocketq.client.remoting.message import StoredMessage
from rocketq.client.remoting.properties import KEY_SEPARATOR, MessageConst
from rocketq.client.remoting.vocabulary import RETRY_GROUP_TOPIC_PREFIX

__all__ = [
    "POP_ORDER_REVIVE_QUEUE",
    "AckMessageRequestHeader",
    "BatchAck",
    "BatchAckMessageRequestBody",
    "ChangeInvisibleTimeRequestHeader",
    "ChangeInvisibleTimeResponseHeader",
    "ConsumeInitMode",
    "ExtraInfo",
    "NotificationRequestHeader",
    "NotificationResponseHeader",
    "PeekMessageRequestHeader",
    "PollingInfoRequestHeader",
    "PollingInfoResponseHeader",
    "PopCheckpointMark",
    "PopMessageRequestHeader",
    "PopMessageResponseHeader",
    "RetryFlag",
    "bitset_from_bytes",
    "bitset_to_bytes",
    "join_info",
    "mark_popped_messages",
    "msg_offset_info_entry",
    "order_count_info_entry",
    "parse_msg_offset_info",
    "parse_offset_info_map",
    "parse_order_count_info",
    "parse_start_offset_info",
    "pop_retry_topic_of",
    "queue_offset_map_key",
    "queue_offset_order_count_entry",
    "real_topic",
    "retry_flag_of",
    "start_offset_info_entry",
    "start_offset_map_key",
]

#: ``KeyBuilder.POP_ORDER_REVIVE_QUEUE``: the reviveQid of an orderly (FIFO) pop.
POP_ORDER_REVIVE_QUEUE: Final = 999
#: ``ExtraInfoUtil.QUEUE_OFFSET``: orderCountInfo keys of one message start with it.
_QUEUE_OFFSET_MARK: Final = "qo"
_INFO_SEPARATOR: Final = ";"
_MAP_KEY_SEPARATOR: Final = "@"


class ConsumeInitMode(enum.IntEnum):
    """``ConsumeInitMode``: where a group without an offset starts popping a queue."""

    MIN = 0
    MAX = 1


class RetryFlag(enum.Enum):
    """The topic a popped message was read from, as the handle's fifth field says."""

    NORMAL = "0"
    RETRY = "1"
    RETRY_V2 = "2"


def _is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def retry_flag_of(topic: str) -> RetryFlag:
    """``ExtraInfoUtil.getRetry(topic)``: the flag of a topic a message was read from."""
    if _is_pop_retry_topic_v2(topic):
        return RetryFlag.RETRY_V2
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RetryFlag.RETRY
    return RetryFlag.NORMAL


def pop_retry_topic_of(topic: str, group: str, flag: RetryFlag) -> str:
    """``KeyBuilder.buildPopRetryTopicV1/V2``: ``%RETRY%group_topic`` or ``%RETRY%group+topic``."""
    separator = "+" if flag is RetryFlag.RETRY_V2 else "_"
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{separator}{topic}"


def real_topic(topic: str, group: str, flag: RetryFlag) -> str:
    """``ExtraInfoUtil.getRealTopic``: the topic an ack or change must name for a handle's flag."""
    if flag is RetryFlag.NORMAL:
        return topic
    return pop_retry_topic_of(topic, group, flag)


# --------------------------------------------------------------------------- headers


@command_header
class PopMessageRequestHeader(CommandHeader):
    """POP_MESSAGE (200050): lease up to ``max_msg_nums`` messages for ``invisible_time`` ms.

    ``queue_id`` -1 pops from every readable queue; ``poll_time`` ms is the long-polling wait;
    ``born_time`` is the client's clock, with which the broker drops requests that waited too long.
    """

    consumer_group: str = jstr("consumerGroup")
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    max_msg_nums: int = jint("maxMsgNums")
    invisible_time: int = jlong("invisibleTime")
    poll_time: int = jlong("pollTime")
    born_time: int = jlong("bornTime")
    init_mode: int = jint("initMode")
    exp_type: str | None = jstr("expType", default=None)
    exp: str | None = jstr("exp", default=None)
    order: bool = jbool("order", default=False)
    attempt_id: str | None = jstr("attemptId", default=None)
    broker_name: str | None = jstr("bname", default=None)


@command_header
class PopMessageResponseHeader(CommandHeader):
    """The answer to POP_MESSAGE; the three info strings are described in the module docstring."""

    pop_time: int = jlong("popTime")
    invisible_time: int = jlong("invisibleTime")
    revive_qid: int = jint("reviveQid")
    rest_num: int = jlong("restNum")
    start_offset_info: str | None = jstr("startOffsetInfo", default=None)
    msg_offset_info: str | None = jstr("msgOffsetInfo", default=None)
    order_count_info: str | None = jstr("orderCountInfo", default=None)


@command_header
class AckMessageRequestHeader(CommandHeader):
    """ACK_MESSAGE (200051): ``extra_info`` is the handle, ``offset`` the message's queue offset."""

    consumer_group: str = jstr("consumerGroup")
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    extra_info: str = jstr("extraInfo")
    offset: int = jlong("offset")
    broker_name: str | None = jstr("bname", default=None)


@command_header
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): the message becomes visible ``invisible_time`` ms after now."""

    consumer_group: str = jstr("consumerGroup")
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    extra_info: str = jstr("extraInfo")
    offset: int = jlong("offset")
    invisible_time: int = jlong("invisibleTime")
    broker_name: str | None = jstr("bname", default=None)


@command_header
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    """The new checkpoint's times: the new handle is built from them."""

    pop_time: int = jlong("popTime")
    invisible_time: int = jlong("invisibleTime")
    revive_qid: int = jint("reviveQid")


@command_header
class NotificationRequestHeader(CommandHeader):
    """NOTIFICATION (200054): wait up to ``poll_time`` ms until the queue has a message to pop."""

    consumer_group: str = jstr("consumerGroup")
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    poll_time: int = jlong("pollTime")
    born_time: int = jlong("bornTime")
    order: bool = jbool("order", default=False)
    attempt_id: str | None = jstr("attemptId", default=None)
    broker_name: str | None = jstr("bname", default=None)


@command_header
class NotificationResponseHeader(CommandHeader):
    has_msg: bool = jbool("hasMsg")
    polling_full: bool = jbool("pollingFull", default=False)


@command_header
class PollingInfoRequestHeader(CommandHeader):
    """POLLING_INFO (200055): how many pop requests wait on a queue."""

    consumer_group: str = jstr("consumerGroup")
    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    broker_name: str | None = jstr("bname", default=None)


@command_header
class PollingInfoResponseHeader(CommandHeader):
    polling_num: int = jint("pollingNum")


@command_header
class PeekMessageRequestHeader(CommandHeader):
    """PEEK_MESSAGE (200052): read messages a pop would return, without leasing them."""

    topic: str = jstr("topic")
    queue_id: int = jint("queueId")
    max_msg_nums: int = jint("maxMsgNums")
    consumer_group: str = jstr("consumerGroup")
    broker_name: str | None = jstr("bname", default=None)


# --------------------------------------------------------------------------- extraInfo


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ExtraInfo:
    """A parsed ``extraInfo`` / ``POP_CK`` string (the receipt handle of one popped message)."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry_flag: RetryFlag
    broker_name: str
    queue_id: int
    queue_offset: int | None = None
    commit_log_offset: int | None = None

    @classmethod
    def build(
        cls,
        *,
        ck_queue_offset: int,
        pop_time: int,
        invisible_time: int,
        revive_qid: int,
        topic: str,
        broker_name: str,
        queue_id: int,
        queue_offset: int | None = None,
    ) -> ExtraInfo:
        """``ExtraInfoUtil.buildExtraInfo``: the flag comes from the topic the message was read from."""
        return cls(
            ck_queue_offset=ck_queue_offset,
            pop_time=pop_time,
            invisible_time=invisible_time,
            revive_qid=revive_qid,
            retry_flag=retry_flag_of(topic),
            broker_name=broker_name,
            queue_id=queue_id,
            queue_offset=queue_offset,
        )

    @classmethod
    def parse(cls, text: str) -> ExtraInfo:
        """Parse a handle; HeaderError says which field is missing or malformed."""
        fields = text.split(KEY_SEPARATOR)
        if not 7 <= len(fields) <= 9:
            raise HeaderError(
                f"invalid extraInfo (receipt handle) {text!r}: expected 7 to 9 space-separated fields,"
                f" got {len(fields)}; pass the handle a pop returned, unchanged"
            )
        try:
            flag = RetryFlag(fields[4])
        except ValueError:
            raise HeaderError(
                f"invalid extraInfo {text!r}: retry flag {fields[4]!r} is not 0, 1 or 2"
            ) from None
        numbers = [_parse_long(text, name, fields[i]) for i, name in _NUMERIC_FIELDS if i < len(fields)]
        return cls(
            ck_queue_offset=numbers[0],
            pop_time=numbers[1],
            invisible_time=numbers[2],
            revive_qid=numbers[3],
            retry_flag=flag,
            broker_name=fields[5],
            queue_id=numbers[4],
            queue_offset=numbers[5] if len(numbers) > 5 else None,
            commit_log_offset=numbers[6] if len(numbers) > 6 else None,
        )

    def __str__(self) -> str:
        fields = [
            str(self.ck_queue_offset),
            str(self.pop_time),
            str(self.invisible_time),
            str(self.revive_qid),
            self.retry_flag.value,
            self.broker_name,
            str(self.queue_id),
        ]
        if self.queue_offset is not None:
            fields.append(str(self.queue_offset))
            if self.commit_log_offset is not None:
                fields.append(str(self.commit_log_offset))
        return KEY_SEPARATOR.join(fields)

    @property
    def is_order(self) -> bool:
        """``ExtraInfoUtil.isOrder``: the handle of an orderly (FIFO) pop."""
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    @property
    def next_visible_time(self) -> int:
        """When the message becomes visible again unless acked (epoch ms)."""
        return self.pop_time + self.invisible_time

    def real_topic(self, topic: str, group: str) -> str:
        """The topic an ack or change of this handle must name (the pop retry topic for flags 1, 2)."""
        return real_topic(topic, group, self.retry_flag)

    def changed(self, *, offset: int, pop_time: int, invisible_time: int, revive_qid: int) -> ExtraInfo:
        """The handle after CHANGE_MESSAGE_INVISIBLETIME: a new checkpoint starting at the message."""
        return dataclasses.replace(
            self,
            ck_queue_offset=offset,
            pop_time=pop_time,
            invisible_time=invisible_time,
            revive_qid=revive_qid,
            queue_offset=offset,
            commit_log_offset=None,
        )


_NUMERIC_FIELDS: Final = (
    (0, "ckQueueOffset"),
    (1, "popTime"),
    (2, "invisibleTime"),
    (3, "reviveQid"),
    (6, "queueId"),
    (7, "queueOffset"),
    (8, "commitLogOffset"),
)


def _parse_long(text: str, name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise HeaderError(f"invalid extraInfo {text!r}: {name} {raw!r} is not a number") from None


# --------------------------------------------------------------------------- offset info strings


def start_offset_map_key(flag: RetryFlag, queue_id: int) -> str:
    """``getStartOffsetInfoMapKey``: ``flag@queueId``, the key of all three info maps."""
    return f"{flag.value}{_MAP_KEY_SEPARATOR}{queue_id}"


def queue_offset_map_key(flag: RetryFlag, queue_id: int, queue_offset: int) -> str:
    """``getQueueOffsetMapKey``: ``flag@qo<queueId>%<offset>``, one message's orderCountInfo key."""
    return f"{flag.value}{_MAP_KEY_SEPARATOR}{_QUEUE_OFFSET_MARK}{queue_id}%{queue_offset}"


def start_offset_info_entry(topic: str, queue_id: int, start_offset: int) -> str:
    """One ``buildStartOffsetInfo`` entry: ``flag queueId startOffset``."""
    return f"{retry_flag_of(topic).value} {queue_id} {start_offset}"


def msg_offset_info_entry(topic: str, queue_id: int, msg_offsets: Sequence[int]) -> str:
    """One ``buildMsgOffsetInfo`` entry: ``flag queueId o1,o2,...``."""
    return f"{retry_flag_of(topic).value} {queue_id} {','.join(str(o) for o in msg_offsets)}"


def order_count_info_entry(topic: str, queue_id: int, order_count: int) -> str:
    """One ``buildQueueIdOrderCountInfo`` entry: ``flag queueId count``."""
    return f"{retry_flag_of(topic).value} {queue_id} {order_count}"


def queue_offset_order_count_entry(topic: str, queue_id: int, queue_offset: int, order_count: int) -> str:
    """One ``buildQueueOffsetOrderCountInfo`` entry: ``flag qo<queueId>%<offset> count``."""
    return f"{retry_flag_of(topic).value} {_QUEUE_OFFSET_MARK}{queue_id}%{queue_offset} {order_count}"


def join_info(entries: Iterable[str]) -> str | None:
    """Entries joined by ';' as Java's StringBuilder appends them; None when there are none."""
    text = _INFO_SEPARATOR.join(entries)
    return text or None


def parse_offset_info_map(info: str | None, what: str) -> dict[str, str] | None:
    """Split an info string into ``{"flag@queueId": value}``; None for None or ""."""
    if not info:
        return None
    result: dict[str, str] = {}
    for one in info.split(_INFO_SEPARATOR):
        parts = one.split(KEY_SEPARATOR)
        if len(parts) != 3:
            raise HeaderError(f"invalid {what} {info!r}: entry {one!r} is not 'flag queueId value'")
        key = parts[0] + _MAP_KEY_SEPARATOR + parts[1]
        if key in result:
            raise HeaderError(f"invalid {what} {info!r}: duplicate entry for {key}")
        result[key] = parts[2]
    return result


def _to_int(info: str, what: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise HeaderError(f"invalid {what} {info!r}: {raw!r} is not a number") from None


def parse_start_offset_info(info: str | None) -> dict[str, int] | None:
    """``ExtraInfoUtil.parseStartOffsetInfo``."""
    raw = parse_offset_info_map(info, "startOffsetInfo")
    if raw is None or info is None:
        return None
    return {k: _to_int(info, "startOffsetInfo", v) for k, v in raw.items()}


def parse_msg_offset_info(info: str | None) -> dict[str, list[int]] | None:
    """``ExtraInfoUtil.parseMsgOffsetInfo``."""
    raw = parse_offset_info_map(info, "msgOffsetInfo")
    if raw is None or info is None:
        return None
    return {k: [_to_int(info, "msgOffsetInfo", o) for o in v.split(",")] for k, v in raw.items()}


def parse_order_count_info(info: str | None) -> dict[str, int] | None:
    """``ExtraInfoUtil.parseOrderCountInfo``."""
    raw = parse_offset_info_map(info, "orderCountInfo")
    if raw is None or info is None:
        return None
    return {k: _to_int(info, "orderCountInfo", v) for k, v in raw.items()}


# --------------------------------------------------------------------------- POP_CK per message


@dataclasses.dataclass(frozen=True, slots=True)
class PopCheckpointMark:
    """What a pop response says about one message: its handle and (orderly) consume count."""

    pop_ck: str
    first_pop_time: str
    reconsume_times: int


def mark_popped_messages(
    messages: Sequence[StoredMessage],
    response: PopMessageResponseHeader,
    broker_name: str,
    *,
    order: bool,
) -> list[PopCheckpointMark]:
    """The ``POP_CK`` of each popped message, as ``MQClientAPIImpl.processPopResponse`` builds it.

    A message that already carries ``POP_CK`` (the broker re-encoded a retry-topic message) keeps
    it.  Without ``startOffsetInfo`` (an early 5.0 broker) the checkpoint starts at the first
    offset seen of each topic and queue.  ``messages`` are as decoded from the body (their topic
    is the one they were read from); the result is in the same order.
    """
    start = parse_start_offset_info(response.start_offset_info)
    msg_offsets = parse_msg_offset_info(response.msg_offset_info)
    order_counts = parse_order_count_info(response.order_count_info)
    first_pop_time = str(response.pop_time)
    marks: list[PopCheckpointMark] = []
    # one handle prefix per checkpoint (a pop answers up to 32 messages of a few queues)
    prefixes: dict[tuple[str, int], str] = {}
    if start is None:
        for m in messages:
            prefix = prefixes.get((m.topic, m.queue_id))
            if prefix is None:
                flag = retry_flag_of(m.topic)
                prefix = prefixes[(m.topic, m.queue_id)] = _prefix(
                    response, m.queue_offset, flag, broker_name, m.queue_id
                )
            pop_ck = prefix + str(m.queue_offset)
            marks.append(PopCheckpointMark(pop_ck, _first_pop(m, first_pop_time), m.reconsume_times))
        return marks
    # Java's buildQueueOffsetSortedMap: the offsets of each checkpoint key in body order, and
    # indexOf in them; the key of each (topic, queue) is worked out once per response
    key_of: dict[tuple[str, int], tuple[RetryFlag, str]] = {}
    positions: dict[str, dict[int, int]] = {}
    counts: dict[str, int] = {}
    keyed: list[tuple[StoredMessage, str | None, RetryFlag, str]] = []
    pop_ck_key = MessageConst.POP_CK
    for m in messages:
        existing = m.properties.get(pop_ck_key)
        if existing:
            flag = ExtraInfo.parse(existing).retry_flag
            key = start_offset_map_key(flag, m.queue_id)
        else:
            where = (m.topic, m.queue_id)
            known = key_of.get(where)
            if known is None:
                flag = retry_flag_of(m.topic)
                known = key_of[where] = (flag, start_offset_map_key(flag, m.queue_id))
            flag, key = known
        index = counts.get(key, 0)
        counts[key] = index + 1
        positions.setdefault(key, {}).setdefault(m.queue_offset, index)
        keyed.append((m, existing, flag, key))
    ck_prefixes: dict[str, str] = {}
    for m, existing, flag, key in keyed:
        first = m.properties.get(MessageConst.FIRST_POP_TIME) or first_pop_time
        if existing:
            marks.append(PopCheckpointMark(existing, first, m.reconsume_times))
            continue
        prefix = ck_prefixes.get(key)
        if prefix is None:
            if key not in start or msg_offsets is None or key not in msg_offsets:
                raise HeaderError(
                    f"pop response from {broker_name} names no checkpoint for {m.topic} queue {m.queue_id}"
                    f" (startOffsetInfo={response.start_offset_info!r},"
                    f" msgOffsetInfo={response.msg_offset_info!r})"
                )
            prefix = ck_prefixes[key] = _prefix(response, start[key], flag, broker_name, m.queue_id)
        index = positions[key][m.queue_offset]
        offsets = msg_offsets[key]  # type: ignore[index]  # checked with the prefix
        queue_offset = offsets[index] if index < len(offsets) else m.queue_offset
        reconsume = m.reconsume_times
        if order and order_counts is not None:
            count = order_counts.get(queue_offset_map_key(flag, m.queue_id, m.queue_offset))
            if count is None:
                count = order_counts.get(key)
            if count is not None and count > 0:
                reconsume = count
        marks.append(PopCheckpointMark(prefix + str(queue_offset), first, reconsume))
    return marks


def _prefix(
    response: PopMessageResponseHeader, ck_offset: int, flag: RetryFlag, broker_name: str, queue_id: int
) -> str:
    """``buildExtraInfo`` without the message's own offset (the handle's last field)."""
    return (
        f"{ck_offset} {response.pop_time} {response.invisible_time} {response.revive_qid}"
        f" {flag.value} {broker_name} {queue_id} "
    )


def _first_pop(m: StoredMessage, pop_time: str) -> str:
    return m.properties.get(MessageConst.FIRST_POP_TIME) or pop_time


# --------------------------------------------------------------------------- BATCH_ACK body


def bitset_to_bytes(bits: Iterable[int]) -> bytes:
    """``BitSet.toByteArray()``: little-endian bytes up to the highest set bit (b"" when empty)."""
    value = 0
    for bit in bits:
        if bit < 0:
            raise ValueError(f"a BitSet index must be >= 0, got {bit}")
        value |= 1 << bit
    return value.to_bytes((value.bit_length() + 7) // 8, "little")


def bitset_from_bytes(data: bytes) -> list[int]:
    """``BitSet.valueOf(bytes)``: the set bit indices, ascending."""
    value = int.from_bytes(data, "little")
    return [i for i in range(value.bit_length()) if value >> i & 1]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class BatchAck:
    """``BatchAck``: the acks of one checkpoint; ``ack_indexes`` are offsets minus ``start_offset``."""

    consumer_group: str
    topic: str
    retry_flag: RetryFlag
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    ack_indexes: tuple[int, ...]

    def to_json_object(self) -> dict[str, Any]:
        # fastjson writes a bean's fields in name order
        return {
            "b": base64.b64encode(bitset_to_bytes(self.ack_indexes)).decode("ascii"),
            "c": self.consumer_group,
            "it": self.invisible_time,
            "pt": self.pop_time,
            "q": self.queue_id,
            "r": self.retry_flag.value,
            "rq": self.revive_queue_id,
            "so": self.start_offset,
            "t": self.topic,
        }

    @classmethod
    def from_json_object(cls, obj: Mapping[str, Any]) -> BatchAck:
        def get(short: str, long: str) -> Any:
            value = obj.get(short, obj.get(long))
            if value is None:
                raise HeaderError(f"BatchAck {dict(obj)!r}: field {short!r} ({long}) is missing")
            return value

        raw_bits = obj.get("b", obj.get("bitSet"))
        try:
            bits = bitset_from_bytes(base64.b64decode(raw_bits)) if raw_bits else []
            flag = RetryFlag(str(get("r", "retry")))
        except ValueError as exc:
            raise HeaderError(f"BatchAck {dict(obj)!r}: {exc}") from None
        return cls(
            consumer_group=str(get("c", "consumerGroup")),
            topic=str(get("t", "topic")),
            retry_flag=flag,
            start_offset=int(get("so", "startOffset")),
            queue_id=int(get("q", "queueId")),
            revive_queue_id=int(get("rq", "reviveQueueId")),
            pop_time=int(get("pt", "popTime")),
            invisible_time=int(get("it", "invisibleTime")),
            ack_indexes=tuple(bits),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class BatchAckMessageRequestBody:
    """The BATCH_ACK_MESSAGE (200151) body: ``{"acks": [...], "brokerName": ...}``."""

    broker_name: str | None
    acks: tuple[BatchAck, ...]

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"acks": [a.to_json_object() for a in self.acks]}
        if self.broker_name is not None:
            obj["brokerName"] = self.broker_name
        return json.dumps(obj, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, body: bytes) -> BatchAckMessageRequestBody:
        try:
            obj = json.loads(body)
        except ValueError as exc:
            raise HeaderError(f"BATCH_ACK_MESSAGE body is not JSON: {exc}") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("acks", []), list):
            raise HeaderError(f"BATCH_ACK_MESSAGE body is not {{brokerName, acks: [...]}}: {body[:200]!r}")
        acks = tuple(BatchAck.from_json_object(a) for a in obj.get("acks") or [])
        return cls(obj.get("brokerName"), acks)
