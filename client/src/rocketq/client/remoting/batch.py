"""SEND_BATCH_MESSAGE body codec (``MessageDecoder.encodeMessages``) and batch splitting.

Field diagram of one inner message (big-endian); the body is a plain concatenation of them::

    0  TOTALSIZE   int32   size of this entry, these 4 bytes included (= 22 + body + properties)
    4  MAGICCODE   int32   0 (the client does not set it)
    8  BODYCRC     int32   0 (the client does not set it; the broker computes the stored CRC)
   12  FLAG        int32   Message.flag
   16  BODYLEN     int32   then BODY
   ..  PROPLEN     int16   then PROPERTIES (``k\\x01v\\x02`` UTF-8, <= 32767 bytes)

Theory of operation.  All messages of a batch share topic and queue (those travel in the request
header); each entry carries only flag, body and properties.  Decoding checks every length against
the buffer and raises :class:`MessageFormatError` with the position on truncation.
:func:`decode_batch_columns` is the broker's bulk form: flags, zero-copy body slices and raw
properties bytes as three lists, with no per-message dataclass or property parsing.  Batches are
never compressed and must stay within the broker's ``maxMessageSize`` (4 MiB by default), which
:func:`split_batches` enforces on the encoded size.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.properties import MAX_PROPERTIES_SIZE, decode_properties, encode_properties_bytes

ENTRY_HEAD: Final = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
PROPLEN: Final = struct.Struct(">h")
assert ENTRY_HEAD.size == 20 and PROPLEN.size == 2
ENTRY_OVERHEAD: Final = ENTRY_HEAD.size + PROPLEN.size
DEFAULT_MAX_BATCH_BYTES: Final = 4 * 1024 * 1024

PropertiesLike = bytes | str | Mapping[str, str | None]
#: One message of a batch: (flag, body, properties).
BatchItem = tuple[int, bytes, PropertiesLike]


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One decoded inner message of a batch body."""

    flag: int
    body: bytes
    properties: dict[str, str]


def _props_bytes(properties: PropertiesLike) -> bytes:
    if isinstance(properties, bytes):
        data = properties
    elif isinstance(properties, str):
        data = properties.encode()
    else:
        return encode_properties_bytes(properties)
    if len(data) > MAX_PROPERTIES_SIZE:
        raise MessageFormatError(f"properties are {len(data)} bytes, more than {MAX_PROPERTIES_SIZE}")
    return data


def encode_batch_entry(flag: int, body: bytes, properties: PropertiesLike) -> bytes:
    """Encode one inner message."""
    return encode_batch(((flag, body, properties),))


def encode_batch(messages: Iterable[BatchItem]) -> bytes:
    """Encode a SEND_BATCH_MESSAGE body from ``(flag, body, properties)`` items (bodies may be
    any buffer; properties bytes within the size limit are used as they are)."""
    pieces: list[bytes] = []
    add = pieces.extend
    pack, pack_len = ENTRY_HEAD.pack, PROPLEN.pack
    try:
        for flag, body, properties in messages:
            props = (
                properties
                if type(properties) is bytes and len(properties) <= MAX_PROPERTIES_SIZE
                else _props_bytes(properties)
            )
            add(
                (
                    pack(ENTRY_OVERHEAD + len(body) + len(props), 0, 0, flag, len(body)),
                    body,
                    pack_len(len(props)),
                    props,
                )
            )
    except struct.error as exc:
        raise MessageFormatError(f"batch entry field out of range: {exc}") from exc
    return b"".join(pieces)


def decode_batch(buf: bytes | bytearray | memoryview) -> list[BatchMessage]:
    """Decode a batch body; raises MessageFormatError (with the position) on any inconsistency."""
    out: list[BatchMessage] = []
    n = len(buf)
    pos = 0
    while pos < n:
        if pos + ENTRY_OVERHEAD > n:
            raise _error(buf, pos, "truncated batch entry header")
        total, _magic, _crc, flag, body_len = ENTRY_HEAD.unpack_from(buf, pos)
        end = pos + total
        body_end = pos + ENTRY_HEAD.size + body_len
        if total < ENTRY_OVERHEAD or end > n or body_len < 0 or body_end + 2 > end:
            raise _error(buf, pos, f"bad batch entry sizes (total {total}, body {body_len})")
        (props_len,) = PROPLEN.unpack_from(buf, body_end)
        if props_len < 0 or body_end + 2 + props_len != end:
            raise _error(buf, pos, f"properties length {props_len} does not end the entry of {total} bytes")
        body = bytes(buf[pos + ENTRY_HEAD.size : body_end])
        out.append(BatchMessage(flag, body, decode_properties(buf[body_end + 2 : end])))
        pos = end
    return out


@dataclass(frozen=True, slots=True)
class BatchColumns:
    """A batch body decoded as columns, for the broker's bulk append path.

    ``bodies`` are zero-copy ``memoryview`` slices of the batch body (``bytes`` copies where a
    bulk decoder cut them out in C); ``properties`` are the raw ``k\x01v\x02`` bytes of each
    message as sent (not parsed).
    """

    flags: list[int]
    bodies: list[memoryview] | list[bytes]
    properties: list[bytes]

    def __len__(self) -> int:
        return len(self.flags)


def decode_batch_columns(
    buf: bytes | bytearray | memoryview,
    bulk: Callable[[bytes, memoryview], BatchColumns | None] | None = None,
) -> BatchColumns:
    """Decode a batch body into columns without per-message objects beyond the slices.

    Validation is the same as :func:`decode_batch` (MessageFormatError with the position).
    ``bulk`` is a faster decoder for the bodies it recognises (None for the others, which the
    entry-by-entry walk here then decodes): the broker passes the numpy one of
    :mod:`rocketq.server.batch_columns`, as this sans-IO codec imports only the standard library.
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    view = memoryview(data)
    if bulk is not None:
        uniform = bulk(data, view)
        if uniform is not None:
            return uniform
    flags: list[int] = []
    bodies: list[memoryview] = []
    props: list[bytes] = []
    unpack = ENTRY_HEAD.unpack_from
    n = len(data)
    pos = 0
    while pos < n:
        if pos + ENTRY_OVERHEAD > n:
            raise _error(data, pos, "truncated batch entry header")
        total, _magic, _crc, flag, body_len = unpack(data, pos)
        end = pos + total
        body_end = pos + 20 + body_len
        if total < ENTRY_OVERHEAD or end > n or body_len < 0 or body_end + 2 > end:
            raise _error(data, pos, f"bad batch entry sizes (total {total}, body {body_len})")
        props_len = (data[body_end] << 8) | data[body_end + 1]
        if props_len >= 0x8000 or body_end + 2 + props_len != end:
            raise _error(data, pos, f"properties length {props_len} does not end the entry of {total} bytes")
        flags.append(flag)
        bodies.append(view[pos + 20 : body_end])
        props.append(data[body_end + 2 : end])
        pos = end
    return BatchColumns(flags, bodies, props)


def append_properties(buf: bytes | bytearray | memoryview, suffix: bytes) -> tuple[bytes, BatchColumns]:
    """The batch ``buf`` with ``suffix`` (encoded ``k\x01v\x02`` pairs) ending every entry's
    properties, and the columns of ``buf`` as decoded.  Raises :class:`MessageFormatError` if
    ``buf`` is malformed or an entry's properties would exceed 32767 bytes."""
    cols = decode_batch_columns(buf)
    items = zip(cols.flags, cols.bodies, [p + suffix for p in cols.properties], strict=True)
    return encode_batch(items), cols  # type: ignore[arg-type]  # memoryview bodies: the join copies them


def _error(buf: bytes | bytearray | memoryview, pos: int, what: str) -> MessageFormatError:
    shown = bytes(buf[pos : pos + 24]).hex()
    return MessageFormatError(f"{what} at position {pos} (body of {len(buf)} bytes; bytes there: {shown})")


def batch_entry_size(body_len: int, properties_len: int) -> int:
    """Encoded size of one inner message."""
    return ENTRY_OVERHEAD + body_len + properties_len


def split_batches(
    messages: Sequence[BatchItem], max_bytes: int = DEFAULT_MAX_BATCH_BYTES
) -> list[list[BatchItem]]:
    """Split messages, in order, into groups whose encoded batch body fits in ``max_bytes``.

    A single message that alone exceeds ``max_bytes`` raises MessageFormatError.
    """
    if all(type(item[2]) is bytes for item in messages):  # encoded properties: measure in bulk
        total = ENTRY_OVERHEAD * len(messages) + sum(len(i[1]) + len(i[2]) for i in messages)
        if total <= max_bytes:
            return [list(messages)] if messages else []
    batches: list[list[BatchItem]] = []
    current: list[BatchItem] = []
    size = 0
    for index, item in enumerate(messages):
        entry = batch_entry_size(len(item[1]), len(_props_bytes(item[2])))
        if entry > max_bytes:
            raise MessageFormatError(
                f"message {index} encodes to {entry} bytes, more than the batch limit {max_bytes}"
            )
        if current and size + entry > max_bytes:
            batches.append(current)
            current, size = [], 0
        current.append(item)
        size += entry
    if current:
        batches.append(current)
    return batches
