"""Length-prefixed framing of RocketMQ remoting commands, and an incremental frame decoder.

Every remoting command travels as one frame (all integers big-endian, signed)::

    offset  size  field
    0       4     length        = 4 + header_length + body_length (excludes itself)
    4       1     serialize_type  0 = JSON, 1 = ROCKETMQ (binary header)
    5       3     header_length   (the second int32 is serialize_type << 24 | header_length)
    8       h     header bytes
    8+h     b     body bytes

Theory of operation: :class:`FrameDecoder` keeps one ``bytearray`` and a read offset.  Bytes are
appended as they arrive; complete frames are cut from the offset forward, and consumed bytes are
dropped only when the buffer empties or more than half of it is consumed, so a stream of small
reads costs linear, not quadratic, copying.  A frame is validated as soon as its first eight bytes
are present (length, serialize type, header length), so garbage is rejected before the decoder
waits for up to 16 MiB that will never come.  Frames are returned as ``memoryview`` payloads
(everything after the length field) over immutable ``bytes``, so callers may keep them.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from rocketq.client.errors import FrameError

__all__ = [
    "FRAME_PREFIX",
    "MAX_FRAME_LENGTH",
    "MAX_HEADER_LENGTH",
    "FrameDecoder",
    "SerializeType",
    "encode_frame",
]


class SerializeType(IntEnum):
    """How a frame's header is serialized (the high byte of the second int32)."""

    JSON = 0
    ROCKETMQ = 1


MAX_FRAME_LENGTH: int = 16 * 1024 * 1024
"""Largest accepted value of the length field (which does not count itself)."""

MAX_HEADER_LENGTH: int = 0xFFFFFF
"""The header length shares an int32 with the serialize type and has 24 bits."""

FRAME_PREFIX = struct.Struct(">ii")
"""length, (serialize_type << 24) | header_length."""
assert FRAME_PREFIX.size == 8

_INT32 = struct.Struct(">i")
assert _INT32.size == 4

_LENGTH_SIZE = 4  # the length field itself
_MIN_LENGTH = 4  # a frame holds at least the serialize-type/header-length int32
_COMPACT_MIN = 64 * 1024  # do not bother compacting a tiny buffer
_KNOWN_TYPES = frozenset(int(t) for t in SerializeType)


def encode_frame(header: bytes, body: bytes, serialize_type: SerializeType) -> bytes:
    """Return the whole frame (length field included) for an encoded header and a body."""
    header_length = len(header)
    if header_length > MAX_HEADER_LENGTH:
        raise FrameError(f"header of {header_length} bytes exceeds the 24-bit header length field")
    length = _MIN_LENGTH + header_length + len(body)
    if length > MAX_FRAME_LENGTH:
        raise FrameError(f"frame length {length} exceeds the maximum {MAX_FRAME_LENGTH}")
    return b"".join((FRAME_PREFIX.pack(length, (int(serialize_type) << 24) | header_length), header, body))


def check_prefix(length: int, type_and_header_length: int, max_frame_length: int = MAX_FRAME_LENGTH) -> None:
    """Validate a frame's length field and serialize-type/header-length word; raise FrameError."""
    if length < _MIN_LENGTH:
        raise FrameError(f"frame length {length} is smaller than the minimum {_MIN_LENGTH}")
    if length > max_frame_length:
        raise FrameError(f"frame length {length} exceeds the maximum {max_frame_length}")
    serialize_type = (type_and_header_length >> 24) & 0xFF
    if serialize_type not in _KNOWN_TYPES:
        raise FrameError(f"unknown serialize type {serialize_type} (expected 0 = JSON or 1 = ROCKETMQ)")
    header_length = type_and_header_length & 0xFFFFFF
    if header_length > length - _MIN_LENGTH:
        raise FrameError(
            f"header length {header_length} does not fit in a frame of length {length}"
            f" (at most {length - _MIN_LENGTH})"
        )


class FrameDecoder:
    """Incremental decoder: feed it bytes as they arrive, get back complete frame payloads.

    Each payload is a ``memoryview`` of the frame without its length field, i.e. starting with
    the serialize-type/header-length int32, as :func:`~rocketq.client.remoting.command.decode_command`
    expects.  After a :class:`FrameError` the stream is unusable; the transport must close it.
    """

    __slots__ = ("_buf", "_max", "_need", "_pos")

    def __init__(self, max_frame_length: int = MAX_FRAME_LENGTH) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._max = max_frame_length
        self._need = 0  # total bytes (length field included) of the frame at _pos, 0 = unknown

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a complete frame."""
        return len(self._buf) - self._pos

    def clear(self) -> None:
        """Drop everything buffered and free the buffer's memory (the stream is closed)."""
        self._buf = bytearray()
        self._pos = 0
        self._need = 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Add received bytes; return the payloads of every frame completed by them."""
        if not data:
            return []
        if self._pos == len(self._buf) and isinstance(data, bytes):
            # Fast path: nothing buffered and immutable input; slice frames straight out of it.
            self._buf.clear()
            self._pos = 0
            frames, consumed = self._cut(data, 0, len(data))
            if consumed < len(data):
                self._buf += memoryview(data)[consumed:]
            return frames
        self._buf += data
        buf = self._buf
        end = len(buf)
        if self._need and end - self._pos < self._need:
            return []  # still inside a large frame: do not rescan
        start = self._pos
        frames_at, consumed = self._scan(buf, start, end)
        if not frames_at:
            self._maybe_compact()
            return []
        # One copy of the region holding the complete frames, then zero-copy views into it.
        with memoryview(buf) as whole, whole[start:consumed] as part:
            chunk = memoryview(bytes(part))
        frames = [chunk[a - start : b - start] for a, b in frames_at]
        self._pos = consumed
        self._maybe_compact()
        return frames

    def _cut(self, data: bytes, pos: int, end: int) -> tuple[list[memoryview], int]:
        spans, consumed = self._scan(data, pos, end)
        view = memoryview(data)
        return [view[a:b] for a, b in spans], consumed

    def _scan(self, buf: bytes | bytearray, pos: int, end: int) -> tuple[list[tuple[int, int]], int]:
        """Find complete frames in buf[pos:end]; return their payload spans and the new offset."""
        spans: list[tuple[int, int]] = []
        unpack = FRAME_PREFIX.unpack_from
        need = 0
        while True:
            avail = end - pos
            if avail < FRAME_PREFIX.size:
                if avail >= _LENGTH_SIZE:
                    (length,) = _INT32.unpack_from(buf, pos)
                    if length < _MIN_LENGTH or length > self._max:
                        check_prefix(length, 0, self._max)
                break
            length, word = unpack(buf, pos)
            check_prefix(length, word, self._max)
            need = _LENGTH_SIZE + length
            if avail < need:
                break
            spans.append((pos + _LENGTH_SIZE, pos + need))
            pos += need
            need = 0
        self._need = need
        return spans, pos

    def _maybe_compact(self) -> None:
        buf = self._buf
        if self._pos == len(buf):
            buf.clear()
            self._pos = 0
        elif self._pos > _COMPACT_MIN and self._pos * 2 > len(buf):
            del buf[: self._pos]
            self._pos = 0
