"""Public data types of the client API: Message, SendResult, PullResult and their status enums.

``Message`` is what an application builds and sends; :meth:`Message.wire_properties` merges its
fields (tags, keys, delay level, wait flag) with the user properties into the property map that
goes on the wire (B.6).  ``MessageExt`` is a received message: the decoded CommitLog record
(:class:`~rocketq.client.remoting.message.StoredMessage`) with its queue id and offsets; as in
Java its ``msg_id`` is the client message id (``UNIQ_KEY``) that ``SendResult.msg_id`` returned,
``offset_msg_id`` the broker's.  ``PullResult`` keeps the raw pull body; on first access to
``messages`` it scans it into :class:`LazyMessageExt` views (each field decoded on first access,
bodies decompressed; see :mod:`rocketq.client.remoting.message_view`), tag-filtered client-side
when the pull had a tag subscription (the broker filters by tag *hash*, which can collide), with
``MIN_OFFSET`` / ``MAX_OFFSET`` stamped into their properties.  :meth:`PullResult.columns` gives
the queue offsets and bodies alone, without a view per message (a pull of same-size messages is
read in bulk); :class:`PolledBatch` is one pull of one queue in that form, what
``LitePullConsumer.poll_batch`` returns.
``LocalTransactionState`` and ``TransactionSendResult`` are the transactional producer's outcome
types (the state's ``commit_or_rollback`` is the END_TRANSACTION wire value).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property

from rocketq.client.errors import ClientError
from rocketq.client.pull_scan import scan_messages, uniform_columns
from rocketq.client.remoting.message import StoredMessage
from rocketq.client.remoting.message_view import LazyMessageExt
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.route import MessageQueue

__all__ = [
    "LazyMessageExt",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageQueue",
    "PolledBatch",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "TransactionSendResult",
    "scan_messages",
]

MessageExt = StoredMessage
"""A received message (one decoded CommitLog record).  Its ``msg_id`` is the producer's
``UNIQ_KEY`` when the record has one (as Java's consumer-side ``MessageExt.getMsgId()``), else the
offset msgId; ``offset_msg_id`` is always the offset msgId (store host + CommitLog offset)."""

#: Property keys the Message fields own; users set them through the fields, not ``properties``.
_RESERVED = frozenset(
    {
        MessageConst.TAGS,
        MessageConst.KEYS,
        MessageConst.WAIT_STORE_MSG_OK,
        MessageConst.DELAY_TIME_LEVEL,
        MessageConst.UNIQ_KEY,
        MessageConst.SHARDING_KEY,
    }
)


@dataclass(init=False)
class Message:
    """A message to send.

    ``keys`` are business keys (indexed by the broker for ``queryMsgByKey``); ``tags`` is the one
    tag consumers filter on; ``delay_time_level`` 1..18 delays delivery (1s ... 2h);
    ``sharding_key`` is the default argument of the hash selector for ordered sends;
    ``message_group`` (RocketMQ 5's FIFO message group, ``__SHARDINGKEY`` on the wire) is the same
    value under its 5.x name: a producer sending it without a queue or selector picks the queue by
    the group's hash, so the messages of one group keep their order.
    ``deliver_at`` (epoch ms or an aware/naive-local ``datetime``) or ``delay`` (seconds or a
    ``timedelta``) make a timer message (RocketMQ 5: ``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC`` for
    whole seconds, else ``TIMER_DELAY_MS``); the broker delivers it at that time, to a precision of
    its ``timerPrecisionMs``, and answers a ``SendResult.recall_handle``.
    ``properties`` (user properties) is a dict made on first access: a message without any
    allocates none.  An application sending in bulk builds many messages, and a dict each made
    CPython's collector run over the whole heap every few thousand of them.
    """

    __slots__ = (
        "_properties",
        "body",
        "delay",
        "delay_time_level",
        "deliver_at",
        "flag",
        "keys",
        "sharding_key",
        "tags",
        "topic",
        "wait_store_msg_ok",
    )

    topic: str
    body: bytes
    tags: str | None
    keys: str | Sequence[str] | None
    flag: int
    delay_time_level: int
    wait_store_msg_ok: bool
    sharding_key: str | None
    deliver_at: int | datetime | None
    delay: float | timedelta | None
    properties: dict[str, str]  # a property over the ``_properties`` slot (set below the class)

    def __init__(
        self,
        topic: str,
        body: bytes | bytearray | memoryview,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        flag: int = 0,
        delay_time_level: int = 0,
        wait_store_msg_ok: bool = True,
        sharding_key: str | None = None,
        properties: dict[str, str] | None = None,
        deliver_at: int | datetime | None = None,
        delay: float | timedelta | None = None,
        message_group: str | None = None,
    ) -> None:
        # (the usual message, bytes and no delay, takes two comparisons: bulk sends build many)
        if type(body) is not bytes:
            if not isinstance(body, (bytes, bytearray, memoryview)):
                raise ClientError(f"Message.body must be bytes, got {type(body).__name__}")
            body = bytes(body)
        if not topic:
            raise ClientError("Message.topic must not be empty")
        if delay_time_level and not 0 <= delay_time_level <= 255:
            raise ClientError(f"delay_time_level must be 0..255, got {delay_time_level}")
        self.topic = topic
        self.body = body
        self.tags = tags
        self.keys = keys
        self.flag = flag
        self.delay_time_level = delay_time_level
        self.wait_store_msg_ok = wait_store_msg_ok
        if message_group is not None:
            if sharding_key is not None and sharding_key != message_group:
                raise ClientError(
                    f"message_group {message_group!r} and sharding_key {sharding_key!r} are the same"
                    " property (__SHARDINGKEY); give one of them"
                )
            sharding_key = message_group
        self.sharding_key = sharding_key
        self._properties = properties
        self.deliver_at = deliver_at
        self.delay = delay
        if deliver_at is not None or delay is not None:
            timer_properties(deliver_at, delay, delay_time_level)  # validates

    @property
    def message_group(self) -> str | None:
        """RocketMQ 5's message group: the ``sharding_key`` under its 5.x name."""
        return self.sharding_key

    @message_group.setter
    def message_group(self, value: str | None) -> None:
        self.sharding_key = value

    @property
    def has_user_properties(self) -> bool:
        """Whether ``properties`` holds anything (without making the dict)."""
        return bool(self._properties)

    @property
    def keys_str(self) -> str | None:
        """``keys`` as the wire's space-separated string."""
        if self.keys is None:
            return None
        if isinstance(self.keys, str):
            return self.keys or None
        joined = " ".join(k for k in self.keys if k)
        return joined or None

    def put_user_property(self, key: str, value: str) -> None:
        if key in _RESERVED:
            raise ClientError(f"the property {key!r} is reserved; set it through the Message fields")
        self.properties[key] = value

    def wire_properties(self) -> dict[str, str]:
        """The property map sent to the broker (user properties plus the fields above)."""
        props = dict(self._properties) if self._properties else {}
        if self.tags:
            props[MessageConst.TAGS] = self.tags
        keys = self.keys_str
        if keys:
            props[MessageConst.KEYS] = keys
        if self.delay_time_level > 0:
            props[MessageConst.DELAY_TIME_LEVEL] = str(self.delay_time_level)
        if self.sharding_key:
            props[MessageConst.SHARDING_KEY] = self.sharding_key
        props[MessageConst.WAIT_STORE_MSG_OK] = "true" if self.wait_store_msg_ok else "false"
        if self.deliver_at is not None or self.delay is not None:
            props.update(timer_properties(self.deliver_at, self.delay, self.delay_time_level))
        return props


def timer_properties(
    deliver_at: int | datetime | None, delay: float | timedelta | None, delay_time_level: int = 0
) -> dict[str, str]:
    """The timer property of a delivery time or a delay (Java's ``setDeliverTimeMs``,
    ``setDelayTimeSec`` and ``setDelayTimeMs``); ClientError when both are given, with a delay
    level, or negative."""
    if deliver_at is not None and delay is not None:
        raise ClientError("give either deliver_at or delay, not both")
    if delay_time_level > 0:
        raise ClientError(
            "delay_time_level and deliver_at/delay exclude each other (the broker would keep the level)"
        )
    if deliver_at is not None:
        if isinstance(deliver_at, datetime):
            ms = int(deliver_at.timestamp() * 1000)
        elif isinstance(deliver_at, int) and not isinstance(deliver_at, bool):
            ms = deliver_at
        else:
            raise ClientError(f"deliver_at must be epoch milliseconds or a datetime, got {deliver_at!r}")
        if ms < 0:
            raise ClientError(f"deliver_at must not be negative, got {ms}")
        return {MessageConst.TIMER_DELIVER_MS: str(ms)}
    assert delay is not None
    if isinstance(delay, timedelta):
        delay_ms = round(delay.total_seconds() * 1000)
    elif isinstance(delay, (int, float)) and not isinstance(delay, bool):
        delay_ms = round(delay * 1000)
    else:
        raise ClientError(f"delay must be seconds or a timedelta, got {delay!r}")
    if delay_ms < 0:
        raise ClientError(f"delay must not be negative, got {delay!r}")
    if delay_ms % 1000 == 0:
        return {MessageConst.TIMER_DELAY_SEC: str(delay_ms // 1000)}
    return {MessageConst.TIMER_DELAY_MS: str(delay_ms)}


def _get_properties(msg: Message) -> dict[str, str]:
    props = msg._properties
    if props is None:
        props = msg._properties = {}
    return props


def _set_properties(msg: Message, value: dict[str, str]) -> None:
    msg._properties = value


# ``properties`` is a dataclass field (repr, ==, dataclasses.replace see it) read and written
# through this property; assigned here because a class body cannot hold both under one name
setattr(Message, "properties", property(_get_properties, _set_properties, doc="The user properties."))  # noqa: B010


class SendStatus(enum.Enum):
    """Outcome of a stored send; the three non-OK values still mean the message *was* stored."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    """Result of a send: ``msg_id`` is the UNIQ_KEY (comma-joined for a batch)."""

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True
    #: a timer message's handle for ``producer.recall(topic, handle)`` (RocketMQ 5.3.2 brokers)
    recall_handle: str | None = None


class LocalTransactionState(enum.Enum):
    """What a local transaction (or a check of it) decided; RocketMQ spells the last one UNKNOW."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"

    @property
    def commit_or_rollback(self) -> int:
        """END_TRANSACTION's ``commitOrRollback``: 8 commit, 12 rollback, 0 not yet known."""
        return _COMMIT_OR_ROLLBACK[self]


_COMMIT_OR_ROLLBACK = {
    LocalTransactionState.COMMIT_MESSAGE: 0x8,  # MessageSysFlag.TRANSACTION_COMMIT_TYPE
    LocalTransactionState.ROLLBACK_MESSAGE: 0xC,  # TRANSACTION_ROLLBACK_TYPE
    LocalTransactionState.UNKNOW: 0x0,  # TRANSACTION_NOT_TYPE
}


@dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """Result of ``send_message_in_transaction``: the half message's SendResult plus the state the
    local transaction returned (what END_TRANSACTION told the broker).  ``msg_id`` and
    ``transaction_id`` are both the message's UNIQ_KEY."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


class PullStatus(enum.Enum):
    """Outcome of a pull (B.4 mapping of the response code)."""

    FOUND = "FOUND"  # SUCCESS
    NO_NEW_MSG = "NO_NEW_MSG"  # PULL_NOT_FOUND
    NO_MATCHED_MSG = "NO_MATCHED_MSG"  # PULL_RETRY_IMMEDIATELY
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"  # PULL_OFFSET_MOVED: adopt next_begin_offset


@dataclass(frozen=True)
class PullResult:
    """Result of PULL_MESSAGE: offsets from the response header and the raw record bytes."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = 0
    body: bytes = b""
    tags_filter: frozenset[str] | None = None  # client-side re-check of a tag subscription

    @cached_property
    def messages(self) -> list[MessageExt]:
        """The found messages (empty unless FOUND), tag-filtered, as lazy views
        (:class:`LazyMessageExt`: each field is decoded on first access, bodies decompressed)."""
        if self.status is not PullStatus.FOUND or not self.body:
            return []
        msgs = scan_messages(self.body, min_offset=self.min_offset, max_offset=self.max_offset)
        if self.tags_filter is not None:
            tags = self.tags_filter
            msgs = [m for m in msgs if m.tags in tags]
        return msgs

    def columns(self) -> tuple[list[int], list[bytes]]:
        """The queue offsets and bodies of :attr:`messages`, in order, as two lists.

        A pull of same-size messages (IPv4 hosts, uncompressed bodies, no tag re-check) is read
        in bulk without a view per message; any other pull comes from :attr:`messages` (which
        raises MessageFormatError for a record that does not decode)."""
        if self.status is not PullStatus.FOUND or not self.body:
            return [], []
        if self.tags_filter is None:
            uniform = uniform_columns(self.body)
            if uniform is not None:
                return uniform
        msgs = self.messages
        return [m.queue_offset for m in msgs], [m.body for m in msgs]


@dataclass(frozen=True, eq=False)
class PolledBatch:
    """The messages of one pull of one queue as columns (``LitePullConsumer.poll_batch``):
    ``queue_offsets[i]`` and ``bodies[i]`` belong to the i-th message, in queue order.

    A consumer that needs only bodies and offsets reads them here without a message object
    each; :attr:`messages` makes the usual views (:class:`LazyMessageExt`) of the same messages
    for anything else (tags, keys, properties, ids, timestamps)."""

    mq: MessageQueue
    queue_offsets: list[int]
    bodies: list[bytes]
    result: PullResult

    def __len__(self) -> int:
        return len(self.bodies)

    @property
    def next_offset(self) -> int:
        """The queue's consumed offset after this batch (what ``commit()`` stores)."""
        return self.result.next_begin_offset

    @property
    def messages(self) -> list[MessageExt]:
        """The messages as views, as ``poll()`` would have returned them."""
        return self.result.messages
