"""Vectorised encoding of sink rows into SEND_BATCH_MESSAGE bodies.

Entry layout (defined in :mod:`rocketq.client.remoting.batch`, whose sizes are imported here)::

    0  TOTALSIZE int32 | 4 MAGICCODE int32 = 0 | 8 BODYCRC int32 = 0 | 12 FLAG int32 | 16 BODYLEN int32
   20  BODY | PROPLEN int16 | PROPERTIES (k\\x01v\\x02 ..., UTF-8)

Theory of operation.  The properties string of every row is assembled with Arrow string kernels
(``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``WAIT``, ``__SHARDINGKEY`` and the user's map), never with a
Python loop.  The user's map keeps only user properties: RocketMQ's system property keys
(:data:`SYSTEM_PROPERTY_KEYS`, the keys Java's ``Message.putUserProperty`` refuses) are dropped
from it, so a source row's ``properties`` forwarded as they are cannot override the row's own
columns nor turn a message into a delayed, transactional or timer one.  UNIQ_KEYs are produced
in bulk with the client's per-process prefix.  The entries of all rows are then laid out by one
element-wise Arrow binary join of four columns (head and PROPLEN as numpy byte matrices, body and
properties as they are): a C++ loop of copies, one pass over the bytes rather than a per-byte
region scatter.  Rows are encoded in the order given, so
callers sort them by target queue first; :func:`chunk_bounds` cuts the buffer into request-sized
pieces per queue.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.client.remoting.batch import ENTRY_OVERHEAD
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.remoting.record_layout import MAX_PROPERTIES_SIZE, PROPERTIES_LENGTH_SIZE
from rocketq.connector.errors import SinkError

#: The entry head: TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN (int32 each), then BODY and PROPLEN.
_ENTRY_HEAD_SIZE = ENTRY_OVERHEAD - PROPERTIES_LENGTH_SIZE
_HEAD_INTS = _ENTRY_HEAD_SIZE // 4
_TOTALSIZE, _FLAG, _BODYLEN = 0, 3, 4  # int32 columns of the entry head
assert _HEAD_INTS == 5
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)

#: RocketMQ's system property keys (every ``MessageConst`` key, as Java's ``STRING_HASH_SET``):
#: dropped from a sink row's ``properties`` map, as are keys starting with ``__RMQ.TRANSIENT.``
SYSTEM_PROPERTY_KEYS: frozenset[str] = frozenset(
    value
    for name, value in vars(MessageConst).items()
    if name.isupper() and isinstance(value, str) and name != "TRANSIENT_PREFIX"
)
_SYSTEM_KEYS_ARRAY = pa.array(sorted(SYSTEM_PROPERTY_KEYS), pa.string())


@dataclass(frozen=True, slots=True)
class EncodedRows:
    """Batch entries of n rows, back to back, and where each entry starts."""

    data: bytes
    entry_offsets: npt.NDArray[np.int64]  # n + 1 offsets into data
    uniq_keys: pa.Array  # string, one per row


def _month_start_ms(now_ms: int) -> int:
    now = dt.datetime.fromtimestamp(now_ms / 1000)
    return int(now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp() * 1000)


class BulkUniqKeys:
    """UNIQ_KEYs in bulk: the client generator's prefix + (ms since month start, 16-bit counter)."""

    def __init__(self) -> None:
        from rocketq.client.remoting.msgid import UniqKeyGenerator

        self.prefix = UniqKeyGenerator().prefix.encode("ascii")
        self._next = 0
        self._lock = threading.Lock()

    def take(self, n: int) -> pa.Array:
        now = int(time.time() * 1000)
        with self._lock:
            first = self._next
            self._next += n
        seq = np.arange(first, first + n, dtype=np.int64)
        # When more than 65536 ids fall in one millisecond, the time field moves forward instead
        # of the counter wrapping onto an id already handed out.
        diff = ((now - _month_start_ms(now)) + (seq >> 16) - (first >> 16)) & 0xFFFFFFFF
        raw = np.empty((n, 6), dtype=np.uint8)
        raw[:, :4] = diff.astype(">u4").view(np.uint8).reshape(n, 4)
        raw[:, 4:] = (seq & 0xFFFF).astype(">u2").view(np.uint8).reshape(n, 2)
        hexed = np.empty((n, 12), dtype=np.uint8)
        hexed[:, 0::2] = _HEX[raw >> 4]
        hexed[:, 1::2] = _HEX[raw & 0x0F]
        prefix = np.frombuffer(self.prefix, dtype=np.uint8)
        out = np.concatenate([np.broadcast_to(prefix, (n, len(prefix))), hexed], axis=1)
        width = out.shape[1]
        offsets = np.arange(n + 1, dtype=np.int32) * np.int32(width)
        return pa.Array.from_buffers(
            pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out.tobytes())]
        )


def _entry(name: str, values: pa.Array | None) -> pa.Array | None:
    """``name\\x01value\\x02`` per row, ``""`` where the value is null or empty."""
    if values is None:
        return None
    text = pc.binary_join_element_wise(name + "\x01", values, "\x02", "")
    empty = pc.or_kleene(pc.is_null(values), pc.equal(pc.binary_length(values), 0))
    return pc.if_else(pc.fill_null(empty, True), "", text)


def system_keys(keys: pa.Array) -> pa.Array:
    """Per map key, whether it is a RocketMQ system property key (never null)."""
    system = pc.or_(
        pc.is_in(keys, value_set=_SYSTEM_KEYS_ARRAY),
        pc.starts_with(keys, MessageConst.TRANSIENT_PREFIX),
    )
    return pc.fill_null(system, False)


def _user_properties(props: pa.Array) -> pa.Array:
    """``k\\x01v\\x02...`` of the user properties of a map<string,string> column ("" for null
    maps); system keys and null values are dropped."""
    flat_keys = pc.cast(props.keys, pa.string())
    flat_items = pc.cast(props.items, pa.string())
    entries = pc.binary_join_element_wise(flat_keys, "\x01", pc.fill_null(flat_items, ""), "\x02", "")
    dropped = pc.or_(pc.is_null(flat_items), system_keys(flat_keys))
    entries = pc.if_else(dropped, "", entries)
    offsets = props.offsets
    lists = pa.ListArray.from_arrays(offsets, entries)
    joined = pc.binary_join(lists, "")
    return pc.fill_null(joined, "")


def _check_separators(name: str, values: pa.Array | None) -> None:
    if values is None:
        return
    bad = pc.or_(pc.match_substring(values, "\x01"), pc.match_substring(values, "\x02"))
    if pc.any(pc.fill_null(bad, False)).as_py():
        raise SinkError(f"column '{name}' contains the reserved characters \\x01 or \\x02")


def properties_column(
    n: int,
    *,
    uniq_keys: pa.Array,
    tags: pa.Array | None,
    keys_text: pa.Array | None,
    sharding_key: pa.Array | None,
    user: pa.Array | None,
    suffix: str | None = None,
) -> pa.Array:
    """The wire properties string of every row (``suffix``: encoded properties ending every row)."""
    for name, col in (("tags", tags), ("keys", keys_text), ("shardingKey", sharding_key)):
        _check_separators(name, col)
    parts: list[Any] = [p for p in (_entry("TAGS", tags), _entry("KEYS", keys_text)) if p is not None]
    parts.append(_entry("UNIQ_KEY", uniq_keys))
    parts.append("WAIT\x01true\x02")
    shard = _entry("__SHARDINGKEY", sharding_key)
    if shard is not None:
        parts.append(shard)
    if user is not None:
        _check_separators("properties", pc.cast(user.keys, pa.string()))
        _check_separators("properties", pc.cast(user.items, pa.string()))
        parts.append(_user_properties(user))
    if suffix:
        parts.append(suffix)
    if len(parts) == 1:
        return pa.array([parts[0]] * n, pa.string())
    return pc.binary_join_element_wise(*parts, "")


def _buffers(arr: pa.Array) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """(data bytes, int64 offsets) of a non-null string/binary array (any offset width)."""
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.binary() if pa.types.is_large_binary(arr.type) else pa.string())
    arr = pc.fill_null(arr, "" if pa.types.is_string(arr.type) else b"")
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)
    return data[offsets[0] : offsets[-1]], offsets - offsets[0]


def _large_binary(n: int, offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8] | bytes) -> pa.Array:
    """A large_binary array over ``data`` cut at ``offsets`` (n + 1 of them), without copying."""
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _fixed_width(rows: npt.NDArray[np.uint8]) -> pa.Array:
    """A large_binary array of the rows of a 2-D byte matrix."""
    n, width = rows.shape
    return _large_binary(n, np.arange(n + 1, dtype=np.int64) * width, np.ascontiguousarray(rows))


def encode_rows(bodies: pa.Array, properties: pa.Array, flags: npt.NDArray[np.int32] | None = None) -> bytes:
    """Encode rows into concatenated batch entries (rows in the given order).

    The fixed parts (entry head, PROPLEN) are numpy matrices; Arrow's element-wise binary join
    then lays out head, body, PROPLEN and properties of every row in one C++ pass."""
    body_data, body_off = _buffers(bodies)
    prop_data, prop_off = _buffers(properties)
    n = len(body_off) - 1
    if n == 0:
        return b""
    body_len = np.diff(body_off)
    prop_len = np.diff(prop_off)
    if int(prop_len.max()) > MAX_PROPERTIES_SIZE:
        raise SinkError(
            f"a row's properties take {int(prop_len.max())} bytes, more than {MAX_PROPERTIES_SIZE}"
        )
    heads = np.zeros((n, _HEAD_INTS), dtype=">i4")
    heads[:, _TOTALSIZE] = ENTRY_OVERHEAD + body_len + prop_len
    heads[:, _FLAG] = 0 if flags is None else flags
    heads[:, _BODYLEN] = body_len
    plen = prop_len.astype(">i2")
    joined = pc.binary_join_element_wise(
        _fixed_width(heads.view(np.uint8).reshape(n, _ENTRY_HEAD_SIZE)),
        _large_binary(n, body_off, body_data),
        _fixed_width(plen.view(np.uint8).reshape(n, PROPERTIES_LENGTH_SIZE)),
        _large_binary(n, prop_off, prop_data),
        pa.scalar(b"", pa.large_binary()),
    )
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)
    data: bytes = joined.buffers()[2].to_pybytes()
    return data[int(offsets[0]) : int(offsets[n])]


def entry_sizes(bodies: pa.Array, properties: pa.Array) -> npt.NDArray[np.int64]:
    _, body_off = _buffers(bodies)
    _, prop_off = _buffers(properties)
    return ENTRY_OVERHEAD + np.diff(body_off) + np.diff(prop_off)


def chunk_bounds(sizes: npt.NDArray[np.int64], max_bytes: int, max_messages: int) -> list[tuple[int, int]]:
    """Cut rows ``[0, n)`` into consecutive ``[i, j)`` pieces within both limits."""
    bounds: list[tuple[int, int]] = []
    n = len(sizes)
    if n == 0:
        return bounds
    if int(sizes.max()) > max_bytes:
        raise SinkError(
            f"a message takes {int(sizes.max())} bytes encoded, more than batchMaxBytes={max_bytes}"
        )
    cum = np.concatenate([[0], np.cumsum(sizes)])
    i = 0
    while i < n:
        j = int(np.searchsorted(cum, cum[i] + max_bytes, side="right")) - 1
        j = max(i + 1, min(j, i + max_messages, n))
        bounds.append((i, j))
        i = j
    return bounds
