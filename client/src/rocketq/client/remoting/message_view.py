"""Lazy views of received messages: a pull body scanned, each record decoded on first access.

Theory of operation.  A pull answer carries up to ~1000 concatenated CommitLog records (the
layout is :mod:`.record_layout`); decoding each into a :class:`~.message.StoredMessage` (struct
unpack, hosts, body copy, properties dict) costs more than the transport and the broker's read
path together.  :func:`scan_messages` therefore only *scans* the buffer: one unpack per record
reads TOTALSIZE, MAGICCODE, QUEUEOFFSET, SYSFLAG and BODYLENGTH (what ordering, offsets and flow
control need), checks the record lies inside the buffer, and wraps (buffer, position) in a
:class:`LazyMessageExt`.  Body, topic and properties are located and decoded on first access
(validated like the eager decoder, errors carry the position); the other header fields come from
one full :func:`~.message.decode_stored_message` of the record, also on first access.  The views
of one pull share one :class:`_RecordSource` (the buffer, the MIN/MAX_OFFSET stamps, a cache of
decoded topic names).  A view's ``msg_id`` is the producer's ``UNIQ_KEY`` when present, else the
offset msgId, as on :class:`~.message.StoredMessage`.
"""

from __future__ import annotations

import dataclasses
import gc
import struct
from collections.abc import Callable
from typing import Any, Final

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import StoredMessage, decode_stored_message, decompress_body
from rocketq.client.remoting.properties import MessageConst, decode_properties
from rocketq.client.remoting.record_layout import (
    COMPRESSED_FLAG,
    HOST_V6_FLAGS,
    IPV4_HEADER_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    MAGICCODE_POS,
    MIN_RECORD_SIZE,
    MIN_TAIL_SIZE,
    PROPERTIES_LENGTH_SIZE,
    SYSFLAG_POS,
    TOPIC_LENGTH_SIZE_V1,
    TOPIC_LENGTH_SIZE_V2,
    body_length_pos,
    header_struct,
    record_header_size,
)

__all__ = ["LazyMessageExt", "scan_messages"]

#: TOTALSIZE, MAGICCODE, QUEUEOFFSET, SYSFLAG and BODYLENGTH of an all-IPv4 record (the other
#: fields are skipped); BODYLENGTH is re-read at its real place when a host is IPv6.
_SCAN: Final = header_struct(0, ("total_size", "magic", "queue_offset", "sys_flag", "body_length"))
assert _SCAN.size == IPV4_HEADER_SIZE
_INT32: Final = struct.Struct(">i")
_INT16: Final = struct.Struct(">h")
_UINT32: Final = struct.Struct(">I")
_UINT16: Final = struct.Struct(">H")
assert _INT16.size == PROPERTIES_LENGTH_SIZE and _UINT16.size == TOPIC_LENGTH_SIZE_V2
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

    @property
    def total_size(self) -> int:
        return int(_INT32.unpack_from(self._src.buf, self._pos)[0])

    @property
    def magic(self) -> int:
        return int(_UINT32.unpack_from(self._src.buf, self._pos + MAGICCODE_POS)[0])

    @property
    def body_size(self) -> int:
        """Size of the stored (possibly compressed) body, known without copying it."""
        buf, pos = self._src.buf, self._pos
        (sys_flag,) = _INT32.unpack_from(buf, pos + SYSFLAG_POS)
        return int(_INT32.unpack_from(buf, pos + body_length_pos(sys_flag))[0])

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
        if body_pos + MIN_TAIL_SIZE > end:
            raise _format_error(buf, pos, f"total size {total_size} too small for sys flag {sys_flag:#x}")
        (body_len,) = _INT32.unpack_from(buf, pos + body_length_pos(sys_flag))
        p = body_pos + body_len
        if body_len < 0 or p + MIN_TAIL_SIZE > end:
            raise _format_error(buf, pos, f"body length {body_len} overruns the record of {total_size} bytes")
        if self.magic == MAGIC_V1:
            topic_len, p = buf[p], p + TOPIC_LENGTH_SIZE_V1
        else:
            (topic_len,), p = _UINT16.unpack_from(buf, p), p + TOPIC_LENGTH_SIZE_V2
        props_pos = p + topic_len + PROPERTIES_LENGTH_SIZE
        if props_pos > end:
            raise _format_error(buf, pos, f"topic length {topic_len} overruns the record")
        (props_len,) = _INT16.unpack_from(buf, props_pos - PROPERTIES_LENGTH_SIZE)
        if props_len < 0 or props_pos + props_len != end:
            raise _format_error(
                buf, pos, f"properties length {props_len} does not end the record of {total_size} bytes"
            )
        layout = c[_LAYOUT] = (body_pos, body_len, p, topic_len, props_pos, props_len)
        return layout

    @property
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

    @property
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

    body_crc = property(lambda self: self._full().body_crc)
    queue_id = property(lambda self: self._full().queue_id)
    flag = property(lambda self: self._full().flag)
    physical_offset = property(lambda self: self._full().physical_offset)
    sys_flag = property(lambda self: self._full().sys_flag)
    born_timestamp = property(lambda self: self._full().born_timestamp)
    born_host = property(lambda self: self._full().born_host)
    store_timestamp = property(lambda self: self._full().store_timestamp)
    store_host = property(lambda self: self._full().store_host)
    reconsume_times = property(lambda self: self._full().reconsume_times)
    prepared_transaction_offset = property(lambda self: self._full().prepared_transaction_offset)


#: a faster scan for the buffers it recognises (None for the others): see :func:`scan_messages`
BulkScan = Callable[[bytes, "_RecordSource"], "list[StoredMessage] | None"]


def scan_messages(
    buf: bytes,
    *,
    min_offset: int | None = None,
    max_offset: int | None = None,
    bulk: BulkScan | None = None,
) -> list[StoredMessage]:
    """Lazy views of the concatenated records in ``buf`` (a pull body), in order.

    Reads only the sizes, MAGICCODE and QUEUEOFFSET of each record and checks that the record
    lies in the buffer; a bad record raises MessageFormatError (with the position) here, an
    inconsistency inside a record when the field is first read.  ``min_offset``/``max_offset``
    are stamped into each message's properties (MIN_OFFSET/MAX_OFFSET) when they are decoded.
    ``bulk`` reads the buffers it recognises faster (the client passes the numpy scan of
    :mod:`rocketq.client.pull_scan`; this sans-IO codec imports only the standard library), the
    record-by-record walk here reads the others.
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()  # ~2 containers per record: collections would cost more than the scan
    try:
        return _scan(buf, min_offset, max_offset, bulk)
    finally:
        if gc_was_enabled:
            gc.enable()


def _scan(
    buf: bytes, min_offset: int | None, max_offset: int | None, bulk: BulkScan | None
) -> list[StoredMessage]:
    src = _RecordSource(
        buf,
        None if min_offset is None else str(min_offset),
        None if max_offset is None else str(max_offset),
    )
    if bulk is not None:
        uniform = bulk(buf, src)
        if uniform is not None:
            return uniform
    out: list[StoredMessage] = []
    append = out.append
    unpack = _SCAN.unpack_from
    new, cls = _new_object, LazyMessageExt
    set_src, set_pos = _SET_SRC, _SET_POS
    set_queue_offset, set_body = _SET_QUEUE_OFFSET, _SET_BODY
    tail, min_size, ipv4_size = MIN_TAIL_SIZE, MIN_RECORD_SIZE, IPV4_HEADER_SIZE
    n = len(buf)
    pos = 0
    while pos < n:
        if pos + min_size > n:
            decode_stored_message(buf, pos)  # raises the precise error
        size, magic, queue_offset, sys_flag, body_len = unpack(buf, pos)
        header_size = ipv4_size
        if sys_flag & HOST_V6_FLAGS:
            header_size = record_header_size(sys_flag)
            if header_size + tail <= size <= n - pos:
                (body_len,) = _INT32.unpack_from(buf, pos + body_length_pos(sys_flag))
        if (
            (magic != MAGIC_V1 and magic != MAGIC_V2)
            or size < header_size + tail
            or pos + size > n
            or body_len < 0
            or header_size + body_len + tail > size
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
