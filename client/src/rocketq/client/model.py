"""Public data types of the client API: Message, SendResult, PullResult and their status enums.

``Message`` is what an application builds and sends; :meth:`Message.wire_properties` merges its
fields (tags, keys, delay level, wait flag) with the user properties into the property map that
goes on the wire (B.6).  ``MessageExt`` is a received message: the decoded CommitLog record
(:class:`~rocketq.client.remoting.message.StoredMessage`) with its queue id and offsets; its
``uniq_key`` is the client message id that ``SendResult.msg_id`` returned, ``offset_msg_id`` the
broker's.  ``PullResult`` keeps the raw pull body; on first access to ``messages`` it scans it into
:class:`LazyMessageExt` views (each field decoded on first access, bodies decompressed; see the
theory of operation above :data:`_SCAN`), tag-filtered client-side when the pull had a tag
subscription (the broker filters by tag *hash*, which can collide), with ``MIN_OFFSET`` /
``MAX_OFFSET`` stamped into their properties.
``LocalTransactionState`` and ``TransactionSendResult`` are the transactional producer's outcome
types (the state's ``commit_or_rollback`` is the END_TRANSACTION wire value).
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from rocketq.client.errors import ClientError, MessageFormatError
from rocketq.client.remoting.message import (
    MAGIC_V1,
    MAGIC_V2,
    QUEUEOFFSET_POS,
    SYSFLAG_POS,
    StoredMessage,
    decode_stored_message,
    decompress_body,
    record_header_size,
)
from rocketq.client.remoting.properties import MessageConst, decode_properties
from rocketq.client.remoting.route import MessageQueue

__all__ = [
    "LazyMessageExt",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageQueue",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "TransactionSendResult",
    "scan_messages",
]

MessageExt = StoredMessage
"""A received message (one decoded CommitLog record)."""

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


@dataclass(slots=True)
class Message:
    """A message to send.

    ``keys`` are business keys (indexed by the broker for ``queryMsgByKey``); ``tags`` is the one
    tag consumers filter on; ``delay_time_level`` 1..18 delays delivery (1s ... 2h);
    ``sharding_key`` is the default argument of the hash selector for ordered sends.
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | Sequence[str] | None = None
    flag: int = 0
    delay_time_level: int = 0
    wait_store_msg_ok: bool = True
    sharding_key: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.body, (bytes, bytearray, memoryview)):
            raise ClientError(f"Message.body must be bytes, got {type(self.body).__name__}")
        self.body = bytes(self.body)
        if not self.topic:
            raise ClientError("Message.topic must not be empty")
        if not 0 <= self.delay_time_level <= 255:
            raise ClientError(f"delay_time_level must be 0..255, got {self.delay_time_level}")

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
        props = dict(self.properties)
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
        return props


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


# ---------------------------------------------------------------------------- received messages
#
# Theory of operation of the lazy view.  A pull answer carries up to ~1000 concatenated CommitLog
# records; decoding each into a StoredMessage (struct unpack, hosts, body copy, properties dict)
# costs ~5 us per record, more than the transport and the broker's read path together.
# PullResult.messages therefore only *scans* the buffer: one unpack per record reads TOTALSIZE,
# MAGICCODE and QUEUEOFFSET (what ordering, offsets and flow control need), checks the record
# lies inside the buffer, and wraps (buffer, position) in a LazyMessageExt.  Body, topic and
# properties are located and decoded on first access (validated like the eager decoder, errors
# carry the position); the other header fields come from one full decode_stored_message of the
# record, also on first access.  The views of one pull share one _RecordSource (the buffer, the
# MIN/MAX_OFFSET stamps, a cache of decoded topic names).

#: TOTALSIZE, MAGICCODE, (BODYCRC QUEUEID FLAG), QUEUEOFFSET, (PHYSICALOFFSET), SYSFLAG, (BORNTIMESTAMP
#: .. PREPAREDTXOFFSET), BODYLENGTH: the whole fixed part of an all-IPv4 record; BODYLENGTH is
#: re-read at its real place when a host is IPv6.
_SCAN: Final = struct.Struct(">iI12xq8xi44xi")
_IPV4_HEADER_SIZE: Final = record_header_size(0)
assert _SCAN.size == _IPV4_HEADER_SIZE == 88 and QUEUEOFFSET_POS == 20 and SYSFLAG_POS == 36
_INT32: Final = struct.Struct(">i")
_INT16: Final = struct.Struct(">h")
_UINT32: Final = struct.Struct(">I")
_UINT16: Final = struct.Struct(">H")
#: TOTALSIZE .. BODYLENGTH of an all-IPv4 record, then a 1-byte topic length and PROPERTIESLENGTH.
_MIN_RECORD_SIZE: Final = record_header_size(0) + 1 + 2
_HOST_V6_FLAGS: Final = 0x30  # SysFlag.BORNHOST_V6 | STOREHOST_V6
COMPRESSED_FLAG: Final = 0x1  # SysFlag.COMPRESSED as a plain int (IntFlag arithmetic is slow)
_new_object = object.__new__
_set_slot = object.__setattr__

# indexes of LazyMessageExt._more, the caches of the fields read less often than the body
_LAYOUT, _TOPIC, _PROPS, _FULL = range(4)


class _RecordSource:
    """What the views of one pull share: the record bytes and the per-pull properties."""

    __slots__ = ("buf", "max_offset", "min_offset", "topics")

    def __init__(self, buf: bytes, min_offset: str | None, max_offset: str | None) -> None:
        self.buf = buf
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.topics: dict[bytes, str] = {}


def _format_error(buf: bytes, pos: int, what: str) -> MessageFormatError:
    shown = buf[pos : pos + 32].hex()
    return MessageFormatError(f"{what} at position {pos} (buffer of {len(buf)} bytes; bytes there: {shown})")


class LazyMessageExt(StoredMessage):
    """A received message decoded on demand: a :class:`StoredMessage` (same fields, same
    properties, ``isinstance`` holds) whose fields are read from the pulled bytes on first access.

    ``queue_offset`` and ``body`` (decompressed) are set when the view is made; ``topic`` and
    ``properties`` are located and decoded on first access and cached; ``total_size``, ``magic``
    and ``body_size`` are read from the record when asked; any other header field triggers one
    full decode of the record.  ``dataclasses.replace``, ``copy`` and ``pickle`` give a plain
    (eager) StoredMessage.  Built by :func:`scan_messages`, not by hand.
    """

    # One GC-tracked object per message and four slot stores (no per-message cache container
    # until a field other than the body is read): a pull makes up to ~1000 of these.
    __slots__ = ("_more", "_pos", "_src")
    _src: _RecordSource
    _pos: int
    _more: list[Any]

    def __new__(cls, *args: Any, **kwargs: Any) -> StoredMessage:  # type: ignore[misc]
        # The dataclass constructor path (dataclasses.replace) builds an eager StoredMessage.
        return StoredMessage(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (StoredMessage, tuple(getattr(self, f.name) for f in dataclasses.fields(StoredMessage)))

    # -- fixed header fields read from the record --------------------------------------------

    @property  # type: ignore[override]
    def total_size(self) -> int:
        return int(_INT32.unpack_from(self._src.buf, self._pos)[0])

    @property  # type: ignore[override]
    def magic(self) -> int:
        return int(_UINT32.unpack_from(self._src.buf, self._pos + 4)[0])

    @property
    def body_size(self) -> int:
        """Size of the stored (possibly compressed) body, known without copying it."""
        buf, pos = self._src.buf, self._pos
        (sys_flag,) = _INT32.unpack_from(buf, pos + SYSFLAG_POS)
        return int(_INT32.unpack_from(buf, pos + record_header_size(sys_flag) - 4)[0])

    # -- topic and properties, located without a full decode ----------------------------------

    def _caches(self) -> list[Any]:
        try:
            return self._more
        except AttributeError:
            more: list[Any] = [None, None, None, None]
            _set_slot(self, "_more", more)
            return more

    def _layout(self) -> tuple[int, int, int, int, int, int]:
        """(body pos, body len, topic pos, topic len, properties pos, properties len), validated."""
        c = self._caches()
        layout: tuple[int, int, int, int, int, int] | None = c[_LAYOUT]
        if layout is not None:
            return layout
        buf = self._src.buf
        pos = self._pos
        total_size = self.total_size
        end = pos + total_size
        (sys_flag,) = _INT32.unpack_from(buf, pos + SYSFLAG_POS)
        body_pos = pos + record_header_size(sys_flag)
        if body_pos + 3 > end:
            raise _format_error(buf, pos, f"total size {total_size} too small for sys flag {sys_flag:#x}")
        (body_len,) = _INT32.unpack_from(buf, body_pos - 4)
        p = body_pos + body_len
        if body_len < 0 or p + 3 > end:
            raise _format_error(buf, pos, f"body length {body_len} overruns the record of {total_size} bytes")
        if self.magic == MAGIC_V1:
            topic_len, p = buf[p], p + 1
        else:
            (topic_len,), p = _UINT16.unpack_from(buf, p), p + 2
        props_pos = p + topic_len + 2
        if props_pos > end:
            raise _format_error(buf, pos, f"topic length {topic_len} overruns the record")
        (props_len,) = _INT16.unpack_from(buf, props_pos - 2)
        if props_len < 0 or props_pos + props_len != end:
            raise _format_error(
                buf, pos, f"properties length {props_len} does not end the record of {total_size} bytes"
            )
        layout = c[_LAYOUT] = (body_pos, body_len, p, topic_len, props_pos, props_len)
        return layout

    @property  # type: ignore[override]
    def topic(self) -> str:
        c = self._caches()
        topic: str | None = c[_TOPIC]
        if topic is None:
            _, _, topic_pos, topic_len, _, _ = self._layout()
            src = self._src
            raw = src.buf[topic_pos : topic_pos + topic_len]
            topic = src.topics.get(raw)
            if topic is None:
                try:
                    topic = src.topics[raw] = str(raw, "utf-8")
                except UnicodeDecodeError:
                    raise _format_error(src.buf, self._pos, "topic is not UTF-8") from None
            c[_TOPIC] = topic
        return topic

    @property  # type: ignore[override]
    def properties(self) -> dict[str, str]:
        c = self._caches()
        props: dict[str, str] | None = c[_PROPS]
        if props is None:
            props_pos, props_len = self._layout()[4:]
            src = self._src
            props = decode_properties(src.buf[props_pos : props_pos + props_len])
            if src.min_offset is not None:
                props[MessageConst.MIN_OFFSET] = src.min_offset
            if src.max_offset is not None:
                props[MessageConst.MAX_OFFSET] = src.max_offset
            c[_PROPS] = props
        return props

    # -- everything else: one full decode of the record --------------------------------------

    def _full(self) -> StoredMessage:
        c = self._caches()
        full: StoredMessage | None = c[_FULL]
        if full is None:
            full = c[_FULL] = decode_stored_message(self._src.buf, self._pos, decompress=False)
        return full

    body_crc = property(lambda self: self._full().body_crc)  # type: ignore[assignment]
    queue_id = property(lambda self: self._full().queue_id)  # type: ignore[assignment]
    flag = property(lambda self: self._full().flag)  # type: ignore[assignment]
    physical_offset = property(lambda self: self._full().physical_offset)  # type: ignore[assignment]
    sys_flag = property(lambda self: self._full().sys_flag)  # type: ignore[assignment]
    born_timestamp = property(lambda self: self._full().born_timestamp)  # type: ignore[assignment]
    born_host = property(lambda self: self._full().born_host)  # type: ignore[assignment]
    store_timestamp = property(lambda self: self._full().store_timestamp)  # type: ignore[assignment]
    store_host = property(lambda self: self._full().store_host)  # type: ignore[assignment]
    reconsume_times = property(lambda self: self._full().reconsume_times)  # type: ignore[assignment]
    prepared_transaction_offset = property(  # type: ignore[assignment]
        lambda self: self._full().prepared_transaction_offset
    )


def scan_messages(
    buf: bytes, *, min_offset: int | None = None, max_offset: int | None = None
) -> list[StoredMessage]:
    """Lazy views of the concatenated records in ``buf`` (a pull body), in order.

    Reads only TOTALSIZE, MAGICCODE and QUEUEOFFSET of each record and checks that the record
    lies in the buffer; a bad record raises MessageFormatError (with the position) here, an
    inconsistency inside a record when the field is first read.  ``min_offset``/``max_offset``
    are stamped into each message's properties (MIN_OFFSET/MAX_OFFSET) when they are decoded.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # ~2 containers per record: collections would cost more than the scan
    try:
        return _scan(buf, min_offset, max_offset)
    finally:
        if gc_was_enabled:
            gc.enable()


def _scan(buf: bytes, min_offset: int | None, max_offset: int | None) -> list[StoredMessage]:
    src = _RecordSource(
        buf,
        None if min_offset is None else str(min_offset),
        None if max_offset is None else str(max_offset),
    )
    out: list[StoredMessage] = []
    append = out.append
    unpack = _SCAN.unpack_from
    new, cls = _new_object, LazyMessageExt
    set_src, set_pos = _SET_SRC, _SET_POS
    set_queue_offset, set_body = _SET_QUEUE_OFFSET, _SET_BODY
    n = len(buf)
    pos = 0
    while pos < n:
        if pos + _MIN_RECORD_SIZE > n:
            decode_stored_message(buf, pos)  # raises the precise error
        size, magic, queue_offset, sys_flag, body_len = unpack(buf, pos)
        header_size = _IPV4_HEADER_SIZE
        if sys_flag & _HOST_V6_FLAGS:
            header_size = record_header_size(sys_flag)
            if header_size + 3 <= size <= n - pos:
                (body_len,) = _INT32.unpack_from(buf, pos + header_size - 4)
        if (
            (magic != MAGIC_V1 and magic != MAGIC_V2)
            or size < header_size + 3
            or pos + size > n
            or body_len < 0
            or header_size + body_len + 3 > size
        ):
            decode_stored_message(buf, pos)  # raises the precise error
            raise _format_error(buf, pos, "bad record header")  # pragma: no cover
        body = buf[pos + header_size : pos + header_size + body_len]
        if sys_flag & COMPRESSED_FLAG:
            try:
                body = decompress_body(body, sys_flag)
            except MessageFormatError as exc:
                raise _format_error(buf, pos, f"compressed body does not decompress ({exc})") from None
        msg = new(cls)
        set_src(msg, src)
        set_pos(msg, pos)
        set_queue_offset(msg, queue_offset)
        set_body(msg, body)
        append(msg)
        pos += size
    return out


# The slot descriptors the scan stores through (a quarter cheaper than object.__setattr__ by name).
_SET_SRC: Final[Any] = vars(LazyMessageExt)["_src"].__set__
_SET_POS: Final[Any] = vars(LazyMessageExt)["_pos"].__set__
_SET_QUEUE_OFFSET: Final[Any] = vars(StoredMessage)["queue_offset"].__set__
_SET_BODY: Final[Any] = vars(StoredMessage)["body"].__set__
