"""Bulk decoding of pulled record bytes into Arrow record batches in the source schema.

A pull response body is the broker's CommitLog records concatenated (see the field diagram in
:mod:`rocketq.client.remoting.record_layout`, where every position used here comes from).  The
fast path here never builds a Python object per message: one tight Python loop finds the record
starts (TOTALSIZE chain), and every other step is a bulk numpy or Arrow operation over all
records of the pull at once.

Theory of operation.  Variable-length pieces (the IPv4 record heads, bodies, property blocks,
property names and values) are cut out of the pull buffer with :func:`take_slices`: an Arrow
binary array whose offsets alternate between "slice" and "gap" elements is laid over the buffer
without copying, and Arrow's ``take`` of the even elements copies the slices into one compact
array (one ``memcpy`` per slice in C++).  The heads are then viewed as one numpy structured
array; the ``k\\x01v\\x02`` properties of all records are tokenised together into one Arrow
``map<string,string>`` column, from which ``tags``, ``keys`` and ``uniqKey`` are taken by one
dictionary lookup of the property names.  The fast path covers what a pull normally returns:
IPv4 hosts and well-formed properties (each entry exactly one ``\\x01`` and one ``\\x02``,
non-empty key and value, valid UTF-8).  Compressed bodies (zlib, LZ4) are decompressed one by
one.  Anything else (IPv6 hosts, odd properties) goes through :func:`rocketq.client.remoting.
message.decode_records_columnar`, the client's reference decoder, so both paths give the same
rows; the unit tests compare them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.message import decode_records_columnar, decompress_body
from rocketq.client.remoting.properties import split_keys
from rocketq.client.remoting.record_layout import (
    COMPRESSED_FLAG,
    HOST_V6_FLAGS,
    IPV4,
    IPV4_HEADER_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    MIN_TAIL_SIZE,
    PROPERTIES_LENGTH_SIZE,
    TOPIC_LENGTH_SIZE_V1,
    TOPIC_LENGTH_SIZE_V2,
    header_dtype_spec,
)
from rocketq.connector.schema import ARROW_SCHEMA

U8 = npt.NDArray[np.uint8]
I64 = npt.NDArray[np.int64]

BODY = IPV4_HEADER_SIZE  # where the body of an IPv4 record starts
_MIN_RECORD = MIN_RECORD_SIZE
_SIZE = struct.Struct(">i")  # TOTALSIZE
_OFFSET_LEN = np.dtype(">i8").itemsize  # PHYSICALOFFSET
_V6_BITS = HOST_V6_FLAGS
_COMPRESSED = COMPRESSED_FLAG
# The two upper-case hex digits of each byte value, as one uint16 per value (memory order = text
# order whatever the endianness, since it is a view of the digit pairs).
_HEX2 = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), dtype=np.uint16)
_TS_TYPE = pa.timestamp("us", tz="UTC")
_WANTED_PROPS = pa.array(["KEYS", "TAGS", "UNIQ_KEY"], pa.string())
_KEYS, _TAGS, _UNIQ = 0, 1, 2


@dataclass(frozen=True, slots=True)
class DecodedChunk:
    """Rows of one pull (after the range cut and tag filter) and where the pull stopped."""

    batch: pa.RecordBatch
    last_queue_offset: int  # queue offset of the last record decoded (before filtering), -1 if none
    records_seen: int  # records inside the range (before the tag filter)


def record_starts(buf: bytes | memoryview) -> list[int]:
    """Start positions of the concatenated records (validates the TOTALSIZE chain)."""
    starts: list[int] = record_starts_array(buf).tolist()
    return starts


def _uniform_starts(buf: bytes | memoryview) -> I64 | None:
    """The starts if every record has the size of the first one (checked in bulk), else None."""
    n = len(buf)
    first = _SIZE.unpack_from(buf, 0)[0] if n >= 4 else 0
    if first < _MIN_RECORD or n % first or n // first < 2:
        return None
    sizes = np.ndarray(shape=(n // first,), dtype=">i4", buffer=buf, strides=(first,))
    if not (sizes == first).all():
        return None
    return np.arange(0, n, first, dtype=np.int64)


def record_starts_array(buf: bytes | memoryview) -> I64:
    """:func:`record_starts` as an int64 array.

    A pull of same-sized records (one producer, fixed-size payloads) is recognised with one
    strided numpy comparison; otherwise a tight Python loop walks the chain (~0.2 µs a record).
    """
    uniform = _uniform_starts(buf)
    if uniform is not None:
        return uniform
    starts: list[int] = []
    append = starts.append
    unpack = _SIZE.unpack_from
    n = len(buf)
    pos = 0
    size = 0
    try:
        while pos < n:
            size = unpack(buf, pos)[0]
            if size < _MIN_RECORD:
                break
            append(pos)
            pos += size
    except struct.error:
        raise MessageFormatError(f"truncated record at {pos}: {bytes(buf[pos : pos + 16]).hex()}") from None
    if pos != n:
        at = starts[-1] if pos > n else pos
        raise MessageFormatError(f"bad record size {size} at {at}: {bytes(buf[at : at + 16]).hex()}")
    return np.asarray(starts, dtype=np.int64)


# The fixed head of an IPv4 record, read for all records at once as one structured array; each host
# (IPv4 + port, big-endian) is read as one uint64, ``ip << 32 | port``.
_HOSTS = ("born_host", "store_host")
_HEAD = np.dtype([(name, ">u8" if name in _HOSTS else fmt) for name, fmt in header_dtype_spec(IPV4.kind)])
assert _HEAD.itemsize == BODY and IPV4.born_host_len == IPV4.store_host_len == np.dtype(">u8").itemsize
assert _HEAD.fields is not None and _HEAD.fields["store_host"][1] == IPV4.store_host_pos


def _native(column: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return column.astype(column.dtype.newbyteorder("="))


def take_slices(data: pa.Buffer, starts: I64, lengths: I64, typ: Any = None) -> pa.Array:
    """The slices ``data[starts[i]:starts[i]+lengths[i]]`` as one compact binary/string array.

    The slices must be sorted and must not overlap.  No Python per slice: an array of
    alternating slice and gap elements is laid over ``data`` (zero copy) and Arrow's ``take``
    copies the even elements out, about 0.1 µs per slice plus the bytes.
    """
    typ = pa.binary() if typ is None else typ
    n = len(starts)
    if n == 0:
        return pa.array([], typ)
    bounds = np.empty(2 * n, dtype=np.int32)
    bounds[0::2] = starts
    bounds[1::2] = starts + lengths
    laid = pa.Array.from_buffers(typ, 2 * n - 1, [None, pa.py_buffer(bounds), data])
    return laid.take(pa.array(np.arange(0, 2 * n - 1, 2, dtype=np.int32)))


def _values_of(array: pa.Array) -> tuple[pa.Buffer, npt.NDArray[np.int32]]:
    """Data buffer and offsets (rebased to 0) of a compact binary/string array."""
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32, count=len(array) + 1, offset=array.offset * 4)
    if offsets[0] != 0:
        offsets = offsets - offsets[0]
    data = buffers[2] if buffers[2] is not None else pa.py_buffer(b"")
    return data, offsets


def read_heads(data: pa.Buffer, starts: I64) -> npt.NDArray[Any]:
    """The fixed heads of the records at ``starts`` as a structured array (IPv4 layout)."""
    heads, _ = _values_of(take_slices(data, starts, np.full(len(starts), BODY, dtype=np.int64)))
    return np.frombuffer(heads, dtype=_HEAD, count=len(starts))


def _constant_string(value: str, n: int) -> pa.Array:
    raw = np.frombuffer(value.encode("utf-8"), dtype=np.uint8)
    offsets = (np.arange(n + 1, dtype=np.int32) * len(raw)).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(np.tile(raw, n))])


def _hex_strings(raw: U8) -> pa.Array:
    """Upper-case hex of each row of a (n, w) uint8 matrix, as a string array."""
    n, width = raw.shape
    out = np.take(_HEX2, raw).view(np.uint8).reshape(n * 2 * width)  # np.take: 10x fancy indexing
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(2 * width)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def _host_label(v: int) -> str:
    ip, port = v >> 32, v & 0xFFFFFFFF
    return f"{ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}:{port}"


def _host_strings(ip_port: npt.NDArray[np.uint64]) -> pa.Array:
    """``"a.b.c.d:port"`` for packed ``ip << 32 | port`` values (few distinct values)."""
    if len(ip_port) and (ip_port == ip_port[0]).all():
        return _constant_string(_host_label(int(ip_port[0])), len(ip_port))
    uniq, inverse = np.unique(ip_port, return_inverse=True)
    labels = [_host_label(v) for v in uniq.tolist()]
    indices = pa.array(inverse.astype(np.int32).ravel())
    return pa.DictionaryArray.from_arrays(indices, pa.array(labels, pa.string())).dictionary_decode()


@dataclass(frozen=True, slots=True)
class _Props:
    map_array: pa.Array
    tags: pa.Array
    uniq: pa.Array
    keys: pa.Array


def _lookups(names: pa.Array, values: pa.Array, rec_of_entry: I64, n: int) -> list[pa.Array]:
    """Per record, the values of ``KEYS``, ``TAGS`` and ``UNIQ_KEY`` (null if absent)."""
    code = pc.index_in(names, value_set=_WANTED_PROPS).fill_null(-1).to_numpy(zero_copy_only=False)
    out = []
    for wanted in (_KEYS, _TAGS, _UNIQ):
        hit = np.flatnonzero(code == wanted)
        if len(hit) == 0:
            out.append(pa.nulls(n, pa.string()))
            continue
        idx = np.full(n, -1, dtype=np.int64)
        idx[rec_of_entry[hit]] = hit
        out.append(values.take(pa.array(idx, mask=idx < 0)))
    return out


def _is_utf8(data: pa.Buffer, size: int) -> bool:
    whole = pa.Array.from_buffers(
        pa.string(), 1, [None, pa.py_buffer(np.array([0, size], dtype=np.int32)), data]
    )
    try:
        whole.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def parse_properties_bulk(data: pa.Buffer, offsets: npt.NDArray[np.int32]) -> _Props | None:
    """Tokenise the concatenated properties of all records; None if the fast path does not apply."""
    n = len(offsets) - 1
    size = int(offsets[-1])
    raw = np.frombuffer(data, dtype=np.uint8, count=size)
    separators = np.flatnonzero(raw <= 2)  # one pass; \x00 is ordinary text
    kinds = raw[separators]
    pos1 = separators[kinds == 1]
    pos2 = separators[kinds == 2]
    m = len(pos2)
    if len(pos1) != m or not (pos1 < pos2).all() or not (pos2[:-1] < pos1[1:]).all():
        return None
    ends = offsets[1:].astype(np.int64)
    nonempty = ends > offsets[:-1]
    if (m and not (raw[ends[nonempty] - 1] == 2).all()) or (not m and nonempty.any()):
        return None
    entry_starts = np.empty(m, dtype=np.int64)
    if m:
        entry_starts[0] = 0
        entry_starts[1:] = pos2[:-1] + 1
    key_len = pos1 - entry_starts
    value_len = pos2 - pos1 - 1
    if m and (key_len.min() == 0 or value_len.min() == 0):
        return None  # an empty key or value: Java drops such entries; leave it to the slow path
    if not _is_utf8(data, size):
        return None  # separators are ASCII, so every name and value is UTF-8 if the whole is
    names = take_slices(data, entry_starts, key_len, pa.string())
    values = take_slices(data, pos1 + 1, value_len, pa.string())
    entry_offsets = np.searchsorted(pos2, offsets, side="left").astype(np.int32)
    map_array = pa.MapArray.from_arrays(pa.array(entry_offsets), names, values)
    rec_of_entry = np.repeat(np.arange(n, dtype=np.int64), np.diff(entry_offsets))
    keys_text, tags, uniq = _lookups(names, values, rec_of_entry, n)
    keys = pc.split_pattern(keys_text, " ")
    flat = keys.flatten()
    if len(flat) and pc.any(pc.equal(pc.utf8_length(flat), 0)).as_py():
        keys = pa.array(
            [None if k is None else split_keys(k) for k in keys_text.to_pylist()], pa.list_(pa.string())
        )
    return _Props(map_array=map_array, tags=tags, uniq=uniq, keys=keys.cast(ARROW_SCHEMA.field("keys").type))


def _bodies(data: pa.Buffer, starts: I64, body_len: I64, sys_flag: npt.NDArray[np.int32]) -> pa.Array:
    body = take_slices(data, starts + BODY, body_len)
    compressed = np.flatnonzero(sys_flag & _COMPRESSED)
    if len(compressed) == 0:
        return body
    values: list[bytes] = body.to_pylist()
    for i in compressed.tolist():
        values[i] = decompress_body(values[i], int(sys_flag[i]))
    return pa.array(values, pa.binary())


def _props_ranges(a: U8, starts: I64, heads: npt.NDArray[Any]) -> tuple[I64, I64] | None:
    body_len = _native(heads["body_length"]).astype(np.int64)
    tpos = starts + BODY + body_len
    if len(tpos) and (int(body_len.min()) < 0 or int(tpos.max()) + MIN_TAIL_SIZE > len(a)):
        return None
    v2 = heads["magic"] == MAGIC_V2
    tlen = a[tpos].astype(np.int64)
    if v2.any():
        tlen = np.where(v2, (tlen << 8) | a[tpos + 1], tlen)
    ppos = tpos + np.where(v2, TOPIC_LENGTH_SIZE_V2, TOPIC_LENGTH_SIZE_V1) + tlen
    if len(ppos) and int(ppos.max()) + PROPERTIES_LENGTH_SIZE > len(a):
        return None
    plen = (a[ppos].astype(np.int64) << 8) | a[ppos + 1]
    pstart = ppos + PROPERTIES_LENGTH_SIZE
    if not (pstart + plen == starts + _native(heads["total_size"])).all():
        return None
    return pstart, plen


def _fast_batch(
    buf: pa.Buffer, starts: I64, heads: npt.NDArray[Any], topic: str, broker_name: str
) -> pa.RecordBatch | None:
    sys_flag = _native(heads["sys_flag"])
    if not np.isin(heads["magic"], (MAGIC_V1, MAGIC_V2)).all() or (sys_flag & _V6_BITS).any():
        return None
    a = np.frombuffer(buf, dtype=np.uint8)
    ranges = _props_ranges(a, starts, heads)
    if ranges is None:
        return None
    pdata, poffsets = _values_of(take_slices(buf, ranges[0], ranges[1]))
    props = parse_properties_bulk(pdata, poffsets)
    if props is None:
        return None
    n = len(starts)
    # the offset msgId: store host (IP + port) then the physical offset, in hex
    host_len = IPV4.store_host_len
    msg_id_raw = np.empty((n, host_len + _OFFSET_LEN), dtype=np.uint8)
    hosts = np.ascontiguousarray(heads["store_host"])
    msg_id_raw[:, :host_len] = hosts.view(np.uint8).reshape(n, host_len)
    offsets = np.ascontiguousarray(heads["physical_offset"])
    msg_id_raw[:, host_len:] = offsets.view(np.uint8).reshape(n, _OFFSET_LEN)
    columns = [
        _constant_string(topic, n),
        _constant_string(broker_name, n),
        pa.array(_native(heads["queue_id"])),
        pa.array(_native(heads["queue_offset"])),
        _hex_strings(msg_id_raw),
        props.uniq,
        props.tags,
        props.keys,
        _bodies(buf, starts, _native(heads["body_length"]).astype(np.int64), sys_flag),
        props.map_array,
        pa.array(_native(heads["born_timestamp"]) * 1000, _TS_TYPE),
        pa.array(_native(heads["store_timestamp"]) * 1000, _TS_TYPE),
        _host_strings(_native(heads["born_host"])),
        _host_strings(_native(heads["store_host"])),
        pa.array(_native(heads["reconsume_times"])),
        pa.array(_native(heads["flag"])),
        pa.array(sys_flag),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def batch_from_columns(cols: dict[str, list[Any]], broker_name: str) -> pa.RecordBatch:
    """Build a batch from :func:`decode_records_columnar` output (the reference/slow path)."""
    n = len(cols["queue_offset"])
    props: list[dict[str, str]] = cols["properties"]
    physical, store_hosts = cols["physical_offset"], cols["store_host"]
    msg_ids = []
    for host, offset in zip(store_hosts, physical, strict=True):
        from rocketq.client.remoting.msgid import encode_offset_msg_id

        ip, _, port = host.rpartition(":")
        msg_ids.append(encode_offset_msg_id(ip, int(port), offset))
    keys = [split_keys(p.get("KEYS")) if "KEYS" in p else None for p in props]
    arrays = [
        pa.array(cols["topic"], pa.string()),
        pa.array([broker_name] * n, pa.string()),
        pa.array(cols["queue_id"], pa.int32()),
        pa.array(cols["queue_offset"], pa.int64()),
        pa.array(msg_ids, pa.string()),
        pa.array([p.get("UNIQ_KEY") for p in props], pa.string()),
        pa.array([p.get("TAGS") for p in props], pa.string()),
        pa.array(keys, ARROW_SCHEMA.field("keys").type),
        pa.array(cols["body"], pa.binary()),
        pa.array([list(p.items()) for p in props], ARROW_SCHEMA.field("properties").type),
        pa.array(np.asarray(cols["born_timestamp"], dtype=np.int64) * 1000, _TS_TYPE),
        pa.array(np.asarray(cols["store_timestamp"], dtype=np.int64) * 1000, _TS_TYPE),
        pa.array(cols["born_host"], pa.string()),
        pa.array(store_hosts, pa.string()),
        pa.array(cols["reconsume_times"], pa.int32()),
        pa.array(cols["flag"], pa.int32()),
        pa.array(cols["sys_flag"], pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def decode_pull_body(
    buf: bytes,
    *,
    topic: str,
    broker_name: str,
    end_offset: int | None = None,
    tags: frozenset[str] | None = None,
    force_slow: bool = False,
) -> DecodedChunk:
    """Decode a pull body into rows with ``queueOffset < end_offset`` whose tag is in ``tags``."""
    data = pa.py_buffer(buf)
    starts = record_starts_array(buf)
    if not len(starts):
        return DecodedChunk(empty_batch(), -1, 0)
    heads = read_heads(data, starts)  # queue offsets sit at the same place in v4 and v6
    qoff = _native(heads["queue_offset"])
    if end_offset is not None:
        cut = int(np.searchsorted(qoff, end_offset, side="left"))
        if cut < len(starts):
            starts, heads, qoff = starts[:cut], heads[:cut], qoff[:cut]
    if not len(starts):
        return DecodedChunk(empty_batch(), -1, 0)
    batch = None if force_slow else _fast_batch(data, starts, heads, topic, broker_name)
    if batch is None:
        stop = int(starts[-1]) + int(_native(heads["total_size"])[-1])
        batch = batch_from_columns(decode_records_columnar(memoryview(buf)[:stop]), broker_name)
    if tags is not None:
        batch = batch.filter(
            pc.fill_null(pc.is_in(batch.column("tags"), pa.array(sorted(tags), pa.string())), False)
        )
    return DecodedChunk(batch, int(qoff[-1]), len(starts))


def empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in ARROW_SCHEMA], schema=ARROW_SCHEMA)
