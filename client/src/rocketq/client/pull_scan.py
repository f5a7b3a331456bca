"""The numpy scan of a pull body: :func:`rocketq.client.remoting.message_view.scan_messages`
with a bulk reader for pulls of same-size messages.

:mod:`rocketq.client.remoting` is a sans-IO codec that imports only the standard library (and
lz4), so its record-by-record scan takes the faster reader as an argument; this module holds the
reader, which reads the header columns of every record at once as one numpy array when every
record has the first one's size and body length, IPv4 hosts and an uncompressed body.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from rocketq.client.remoting import message_view
from rocketq.client.remoting.message import StoredMessage
from rocketq.client.remoting.message_view import (
    _INT32,
    _SET_BODY,
    _SET_POS,
    _SET_QUEUE_OFFSET,
    _SET_SRC,
    LazyMessageExt,
    _new_object,
    _RecordSource,
)
from rocketq.client.remoting.record_layout import (
    COMPRESSED_FLAG,
    HOST_V6_FLAGS,
    IPV4_HEADER_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    MIN_TAIL_SIZE,
    header_dtype_spec,
)

__all__ = ["scan_messages", "scan_uniform", "uniform_columns"]


def scan_messages(
    buf: bytes, *, min_offset: int | None = None, max_offset: int | None = None
) -> list[StoredMessage]:
    """Lazy views of the records of a pull body (:func:`.message_view.scan_messages`), read in
    bulk by :func:`scan_uniform` when it can."""
    return message_view.scan_messages(buf, min_offset=min_offset, max_offset=max_offset, bulk=scan_uniform)


_IPV4_HEADER: Final = np.dtype(header_dtype_spec(0))


def _uniform(buf: bytes) -> tuple[int, list[int], list[bytes]] | None:
    """(record size, queue offsets, bodies) of a pull of same-size records with
    IPv4 hosts and uncompressed bodies, else None.  The header columns are read as one numpy
    array and the bodies cut out by one strided copy (``V`` items become ``bytes`` in C), so no
    Python code runs per record."""
    n = len(buf)
    if n < 2 * MIN_RECORD_SIZE:
        return None
    (size,) = _INT32.unpack_from(buf, 0)
    if size < MIN_RECORD_SIZE or n % size:
        return None
    count = n // size
    rows = np.frombuffer(buf, dtype=np.uint8).reshape(count, size)
    hdr = np.ascontiguousarray(rows[:, :IPV4_HEADER_SIZE]).view(_IPV4_HEADER).ravel()
    body_lens = hdr["body_length"]
    body_len = int(body_lens[0])
    if (
        body_len < 0
        or IPV4_HEADER_SIZE + body_len + MIN_TAIL_SIZE > size
        or (hdr["sys_flag"] & (HOST_V6_FLAGS | COMPRESSED_FLAG)).any()
        or not (hdr["total_size"] == size).all()
        or not (body_lens == body_len).all()
        or not ((hdr["magic"] == MAGIC_V1) | (hdr["magic"] == MAGIC_V2)).all()
    ):
        return None
    if body_len:
        bodies = np.ndarray(
            (count,), dtype=np.dtype(f"V{body_len}"), buffer=buf, offset=IPV4_HEADER_SIZE, strides=(size,)
        ).tolist()
    else:
        bodies = [b""] * count
    return size, hdr["queue_offset"].tolist(), bodies


def uniform_columns(buf: bytes) -> tuple[list[int], list[bytes]] | None:
    """The queue offsets and bodies of a pull of same-size messages (what :func:`scan_uniform`
    accepts), without a view per message; None for any other pull."""
    uniform = _uniform(buf)
    return None if uniform is None else uniform[1:]


def scan_uniform(buf: bytes, src: _RecordSource) -> list[StoredMessage] | None:
    """The pull scan in bulk when every record has the first one's size and body length, IPv4
    hosts and an uncompressed body (a pull of same-size messages): the header columns are read
    as one numpy array, so each message costs its object only.  None otherwise (the
    record-by-record walk then reads it or reports where it is wrong); for every buffer it
    accepts, the views are the walk's."""
    uniform = _uniform(buf)
    if uniform is None:
        return None
    size, queue_offsets, bodies = uniform
    out: list[StoredMessage] = []
    append = out.append
    new, cls = _new_object, LazyMessageExt
    set_src, set_pos = _SET_SRC, _SET_POS
    set_queue_offset, set_body = _SET_QUEUE_OFFSET, _SET_BODY
    for pos, queue_offset, body in zip(range(0, len(buf), size), queue_offsets, bodies, strict=True):
        msg = new(cls)
        set_src(msg, src)
        set_pos(msg, pos)
        set_queue_offset(msg, queue_offset)
        set_body(msg, body)
        append(msg)
    return out
