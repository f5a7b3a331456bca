"""Bulk extraction of what dispatch needs from message properties: tags codes and index key hashes.

Dispatch needs, per record, the ConsumeQueue tags code (Java ``hashCode`` of ``TAGS``) and the
IndexFile key hashes (``abs(hashCode("topic#" + key))`` for every space-separated ``KEYS`` value and
the ``UNIQ_KEY``).  Decoding every properties string into a dict costs microseconds per message;
this module finds the three keys in the raw bytes of a whole batch at once with numpy.

Theory of operation.  The properties of the batch are joined with ``\\x02`` (so messages never
share a segment) and viewed as one ``uint8`` array.  Segments are the runs between ``\\x02``; a
segment counts (as in :func:`rocketq.client.remoting.properties.decode_properties`) when its first
``\\x01`` has a non-empty key before it and a non-empty value after it, and the last counting
segment of a key wins.  Java's ``String.hashCode`` is a polynomial in 31, so the hash of each value
is one gather, one multiply by a power table and one segmented sum (``add.reduceat``) in
wrapping ``uint32`` arithmetic; an index key's hash is ``hash(prefix) * 31**len(key) + hash(key)``,
so ``"topic#" + key`` strings are never built (:func:`index_key_hashes`).  Values holding
non-ASCII bytes (where UTF-8 bytes are not UTF-16 code units) fall back to the scalar reference
functions, value by value.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import as_strided

from rocketq.client.remoting.javahash import java_string_hash
from rocketq.client.remoting.properties import KEY_SEPARATOR, MessageConst
from rocketq.client.remoting.record_layout import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

Buffer = bytes | bytearray | memoryview
I64 = npt.NDArray[np.int64]
#: what a scan finds: (tags codes per record, key hashes, key lengths, key records)
Scan = tuple[I64, I64, I64, I64]

_NV, _PS = NAME_VALUE_SEPARATOR.encode(), PROPERTY_SEPARATOR.encode()
_NV_CODE, _PS_CODE = ord(NAME_VALUE_SEPARATOR), ord(PROPERTY_SEPARATOR)
assert 0 < _NV_CODE < _PS_CODE  # one ``<=`` comparison finds both separators

_pow31_table = np.ones(1, dtype=np.uint32)


def pow31(n: int) -> npt.NDArray[np.uint32]:
    """``31**i mod 2**32`` for ``i < n`` (at least; the table grows on demand)."""
    global _pow31_table
    if len(_pow31_table) < n:
        size = max(n, 2 * len(_pow31_table), 256)
        table = np.empty(size, dtype=np.uint32)
        table[0] = 1
        with np.errstate(over="ignore"):
            np.multiply.accumulate(np.full(size - 1, 31, dtype=np.uint32), out=table[1:])
        _pow31_table = table
    return _pow31_table


_pow31_u64_table = np.ones(1, dtype=np.uint64)


def _pow31_u64(n: int) -> npt.NDArray[np.uint64]:
    """:func:`pow31` as uint64 (kept, not converted per call)."""
    global _pow31_u64_table
    if len(_pow31_u64_table) < n:
        _pow31_u64_table = pow31(n).astype(np.uint64)
    return _pow31_u64_table


def _general_hashes(a: npt.NDArray[np.uint8], starts: I64, lens: I64) -> npt.NDArray[np.uint32]:
    """Java hash (mod 2**32) of byte ranges of any length: per-byte gather, powers, segmented sum."""
    total = int(lens.sum())
    offs = np.cumsum(lens) - lens
    pos = np.arange(total)
    idx = np.repeat(starts - offs, lens) + pos
    dist = np.repeat(offs + lens - 1, lens) - pos
    with np.errstate(over="ignore"):
        prod = a[idx].astype(np.uint32) * pow31(int(lens.max()) + 1)[dist]
    return np.add.reduceat(prod, offs, dtype=np.uint32)


_MAX_GROUPS = 12
_MAX_HORNER = 96
_PAD = 128
_ZERO_PAD = bytes(_PAD)


def segment_hashes(a: npt.NDArray[np.uint8], starts: I64, lens: I64) -> npt.NDArray[np.uint32]:
    """Java hash (mod 2**32) of the ASCII byte ranges ``a[s:s+len]``; every len must be > 0."""
    return _padded_hashes(np.concatenate((np.zeros(_PAD, dtype=np.uint8), a)), starts, lens)


def _padded_hashes(padded: npt.NDArray[np.uint8], starts: I64, lens: I64) -> npt.NDArray[np.uint32]:
    """:func:`segment_hashes` of ``a = padded[_PAD:]`` (``padded`` starts with ``_PAD`` zero bytes).

    Ranges are grouped by length (keys and tags come in few lengths).  A group of length L is one
    row gather from a strided window view (L bytes per row) times the column of ``31**(L-1-j) mod
    2**32``: one integer matrix product per group, no per-byte index arrays.  The products are
    summed in uint64 without overflow (L * 255 * 2**32 < 2**64 for L <= _MAX_HORNER) and reduced
    mod 2**32 once, which equals Java's wrapping ``int`` arithmetic.  Many distinct or long
    lengths take the per-byte path.
    """
    lo, hi = int(lens.min()), int(lens.max())
    lengths = [lo] if lo == hi else np.unique(lens).tolist()  # one length: the usual case, no sort
    if len(lengths) > _MAX_GROUPS or hi > _MAX_HORNER:
        return _general_hashes(padded[_PAD:], starts, lens)
    out = np.empty(len(starts), dtype=np.uint32)
    powers = _pow31_u64(hi)
    for length in lengths:
        sel = np.flatnonzero(lens == length) if len(lengths) > 1 else slice(None)
        windows = as_strided(padded, shape=(len(padded) - length + 1, length), strides=(1, 1))[
            starts[sel] + _PAD
        ]
        out[sel] = (windows.astype(np.uint64) @ powers[length - 1 :: -1]) & np.uint64(0xFFFFFFFF)
    return out


def _abs_java(h: npt.NDArray[np.uint32]) -> I64:
    signed = h.view(np.int32).astype(np.int64)
    return np.where(signed == -(2**31), 0, np.abs(signed))


def _last_per_message(msg: I64) -> npt.NDArray[np.bool_]:
    keep = np.ones(len(msg), dtype=bool)
    keep[:-1] = msg[1:] != msg[:-1]
    return keep


def _words(joined: bytes, dtype: str) -> npt.NDArray[np.unsignedinteger[Any]]:
    """A read-only view where element ``p`` is the big-endian word starting at byte ``_PAD + p``."""
    size = np.dtype(dtype).itemsize
    return np.ndarray(
        shape=(len(joined) - _PAD - size + 1,), dtype=dtype, buffer=joined, offset=_PAD, strides=(1,)
    )


def _matching(
    words: npt.NDArray[np.unsignedinteger[Any]],
    seg_start: I64,
    key_len: I64,
    valid: npt.NDArray[np.bool_],
    name: bytes,
) -> npt.NDArray[np.intp]:
    """Indexes of the valid segments whose key is exactly ``name`` (4 or 8 bytes)."""
    cand = np.flatnonzero(valid & (key_len == len(name)))
    if not len(cand):
        return cand
    out: npt.NDArray[np.intp] = cand[words[seg_start[cand]] == int.from_bytes(name, "big")]
    return out


class PropsColumn(Sequence[bytes]):
    """The properties of consecutive records of one buffer, as a column: record ``i``'s are
    ``data[starts[i] : starts[i] + lens[i]]``.  A slave's dispatch hints carry their properties
    so (ha/replica_hints.py): :meth:`joined` copies a run of equal records for
    :func:`scan_joined` with one strided copy instead of a bytes slice per record."""

    __slots__ = ("_at", "_parent", "_scans", "data", "lens", "starts")

    def __init__(self, data: Buffer, starts: I64, lens: I64) -> None:
        self.data, self.starts, self.lens = data, starts, lens
        self._parent: PropsColumn | None = None
        self._at = 0
        self._scans: dict[bool, Scan | None] = {}

    def part(self, i0: int, i1: int) -> PropsColumn:
        """Records ``i0:i1`` of this column; their :func:`scan_uniform` is a slice of this
        column's, when this column has one layout (a replicated chunk of one producer's batches,
        cut into runs by queue: the chunk is scanned once)."""
        out = PropsColumn(self.data, self.starts[i0:i1], self.lens[i0:i1])
        out._parent, out._at = self, i0
        return out

    def uniform_scan(self, index_enabled: bool) -> Scan | None:
        """:func:`scan_uniform` of this column (computed once)."""
        if index_enabled not in self._scans:
            if self._parent is not None and (whole := self._parent.uniform_scan(index_enabled)) is not None:
                self._scans[index_enabled] = _slice_scan(whole, self._at, len(self))
            else:
                self._scans[index_enabled] = scan_uniform(self, index_enabled)
        return self._scans[index_enabled]

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> bytes: ...

    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        a = int(self.starts[i])
        return bytes(self.data[a : a + int(self.lens[i])])

    def rows(self) -> npt.NDArray[np.uint8] | None:
        """The records' properties as the rows of one zero-copy strided view, when they have one
        length at a fixed stride (the usual run: a batch of equal messages); else None."""
        n, starts, lens = len(self.starts), self.starts, self.lens
        if n == 0:
            return None
        width, stride = int(lens[0]), int(starts[1] - starts[0]) if n > 1 else 0
        if width < 0 or int(starts[0]) < 0 or int(starts[0]) + stride * (n - 1) + width > len(self.data):
            return None  # (the spans of records that are no records: not a view of this buffer)
        if n > 1 and not (stride >= width and (lens == width).all() and (np.diff(starts) == stride).all()):
            return None
        return np.ndarray(
            (n, width), dtype=np.uint8, buffer=self.data, offset=int(starts[0]), strides=(stride, 1)
        )

    def joined(self) -> bytes:
        """``PROPERTY_SEPARATOR.join(self)``.

        A run of equal-length properties at a fixed stride (:meth:`rows`) is copied with the
        separators as one more column; other runs are sliced record by record."""
        n, starts, lens = len(self.starts), self.starts, self.lens
        if n == 0:
            return b""
        rows = self.rows() if n > 1 else None
        if rows is not None:
            out = np.empty((n, rows.shape[1] + 1), dtype=np.uint8)
            out[:, :-1] = rows
            out[:, -1] = _PS_CODE
            return out.tobytes()[:-1]
        data = self.data
        ends = (starts + lens).tolist()
        return _PS.join([data[a:b] for a, b in zip(starts.tolist(), ends, strict=True)])


def join_properties(parts: Sequence[Sequence[Buffer]]) -> bytes:
    """``PROPERTY_SEPARATOR.join`` of the records of all ``parts``, in order."""
    return _PS.join(p.joined() if isinstance(p, PropsColumn) else _PS.join(p) for p in parts if len(p))


def scan_properties(
    props: Sequence[Buffer] | PropsColumn, lens: I64, index_enabled: bool = True
) -> tuple[I64, I64, I64, I64]:
    """``(tags_codes[n], key_hashes[m], key_lengths[m], key_records[m])`` for the properties of many records.

    ``lens`` holds ``len(props[i])``.  Keys are in dispatch order: record by record, the ``KEYS``
    values left to right, then the ``UNIQ_KEY``.  ``key_hashes`` are the Java hashes of the keys
    alone (unsigned 32-bit) and ``key_lengths`` their length in UTF-16 units: combine them with the
    topic prefix with :func:`index_key_hashes`.
    """
    if isinstance(props, PropsColumn):
        uniform = props.uniform_scan(index_enabled)
        if uniform is not None:
            return uniform
    return scan_joined(join_properties([props]), lens, index_enabled)


def _slice_scan(scan: Scan, at: int, n: int) -> Scan:
    """The part of a uniform scan (the same number of keys per record) for records ``at:at+n``."""
    tags, hashes, lens, recs = scan
    per = len(hashes) // len(tags) if len(tags) else 0
    k0, k1 = at * per, (at + n) * per
    return tags[at : at + n], hashes[k0:k1], lens[k0:k1], recs[k0:k1] - at


def scan_uniform(column: PropsColumn, index_enabled: bool = True) -> Scan | None:
    """:func:`scan_properties` of a column whose records share one properties layout, or None.

    A producer's batch repeats one set of properties with a per-message ``UNIQ_KEY`` of fixed
    length: the records' properties are the rows of one strided view (:meth:`PropsColumn.rows`)
    that differ only in a few columns inside some values.  Then every row has the first row's
    segments, so the first row is parsed once (with :func:`scan_joined`'s rules) and a value's
    hash is a constant, or the constant hash of its unchanging head combined with one small
    matrix product over the columns from the first that differs.  None (use
    :func:`scan_joined`) when the rows are not one view, differ outside the values of counting
    segments or by a separator, have a ``KEYS`` value whose spaces move, or non-ASCII bytes in a
    value that dispatch hashes.
    """
    rows = column.rows()
    if rows is None:
        return None
    n, width = rows.shape
    first = rows[0].tobytes()
    names, values = _counting_values(first)
    differs = _differing_columns(rows) if n > 1 and width else []
    # per value span: the first and last column where rows differ (none: the value is constant)
    moved: dict[tuple[int, int], tuple[int, int]] = {}
    for col in differs:
        span = _span_of(values, col)
        if span is None:
            return None  # a key, a separator or a non-counting segment differs
        m0, _ = moved.get(span, (col, col))
        moved[span] = (m0, col)
    hashed = set(names.values())
    for span, (m0, m1) in moved.items():
        cols = rows[:, m0 : m1 + 1]
        if bool((cols == _PS_CODE).any()):
            return None  # a row splits the segment
        if span in hashed and bool((cols >= 0x80).any()):
            return None  # UTF-16 lengths and hashes need the scalar path
        if span == names.get(_KEYS) and bool((cols == _SPACE).any()):
            return None  # a row's keys may split differently
    tags = np.zeros(n, dtype=np.int64)
    if _TAGS in names:
        tag_hash = _column_hashes(rows, first, names[_TAGS], moved.get(names[_TAGS]))
        if tag_hash is None:
            return None
        tags[:] = (
            tag_hash.astype(np.uint32).view(np.int32)
            if isinstance(tag_hash, np.ndarray)
            else _to_int32(tag_hash)
        )
    empty = np.zeros(0, dtype=np.int64)
    if not index_enabled:
        return tags, empty, empty, empty
    key_spans: list[tuple[int, int]] = []
    if _KEYS in names:
        v0, v1 = names[_KEYS]
        key_spans += [(v0 + m.start(), v0 + m.end()) for m in _TOKEN.finditer(first[v0:v1])]
    if _UNIQ in names:
        key_spans.append(names[_UNIQ])
    if not key_spans:
        return tags, empty, empty, empty
    columns: list[I64 | int] = []
    for k0, k1 in key_spans:
        owner = names[_UNIQ] if (k0, k1) == names.get(_UNIQ) else names[_KEYS]
        h = _column_hashes(rows, first, (k0, k1), moved.get(owner))
        if h is None:
            return None
        columns.append(h)
    matrix = np.empty((n, len(columns)), dtype=np.int64)
    for j, c in enumerate(columns):
        matrix[:, j] = c
    lengths = np.tile(np.array([k1 - k0 for k0, k1 in key_spans], dtype=np.int64), n)
    return tags, matrix.ravel(), lengths, np.repeat(np.arange(n, dtype=np.int64), len(columns))


_TAGS, _KEYS, _UNIQ = (
    name.encode() for name in (MessageConst.TAGS, MessageConst.KEYS, MessageConst.UNIQ_KEY)
)
_NAMES = (_TAGS, _KEYS, _UNIQ)
_SPACE = ord(KEY_SEPARATOR)
_TOKEN = re.compile(b"[^" + re.escape(KEY_SEPARATOR.encode()) + b"]+")
_MASK32 = np.uint64(0xFFFFFFFF)


def _to_int32(value: int) -> int:
    return value - (1 << 32) if value >= 1 << 31 else value


def _counting_values(props: bytes) -> tuple[dict[bytes, tuple[int, int]], list[tuple[int, int]]]:
    """The value spans of one record's counting segments (a key before the first ``\\x01``, a
    value after it, both non-empty): those of TAGS, KEYS and UNIQ_KEY (the last segment of a key
    wins) by name, and all of them in order."""
    names: dict[bytes, tuple[int, int]] = {}
    values: list[tuple[int, int]] = []
    pos = 0
    for seg in props.split(_PS):
        i = seg.find(_NV)
        if i > 0 and len(seg) - i > 1:
            span = (pos + i + 1, pos + len(seg))
            values.append(span)
            if seg[:i] in _NAMES:
                names[seg[:i]] = span
        pos += len(seg) + 1
    return names, values


def _differing_columns(rows: npt.NDArray[np.uint8]) -> list[int]:
    """The columns where some row differs from the first: the rows are copied into 8-byte words
    (zero padded), so the comparison and the reduction over the rows handle 8 columns at once."""
    n, width = rows.shape
    words = np.zeros((n, -(-width // 8) * 8), dtype=np.uint8)
    words[:, :width] = rows
    w64 = words.view(np.uint64)
    acc = np.bitwise_or.reduce(w64[1:] ^ w64[0], axis=0)
    out: list[int] = np.flatnonzero(acc.view(np.uint8)[:width]).tolist()
    return out


def _span_of(values: list[tuple[int, int]], col: int) -> tuple[int, int] | None:
    for v0, v1 in values:
        if v0 <= col < v1:
            return v0, v1
    return None


def _column_hashes(
    rows: npt.NDArray[np.uint8],
    first: bytes,
    span: tuple[int, int],
    moved: tuple[int, int] | None,
) -> I64 | int | None:
    """Java hash (uint32 value) of the bytes ``span`` of every row: one int when they are the
    same in all rows, else an array; None if they are not ASCII.  ``moved``: the first and last
    column where rows differ in the value holding ``span`` (None: nowhere)."""
    v0, v1 = span
    if not first[v0:v1].isascii():
        return None
    m0, m1 = moved if moved is not None else (v1, v0)
    if m0 >= v1 or m1 < v0:
        return java_string_hash(first[v0:v1].decode()) & 0xFFFFFFFF
    m0 = max(m0, v0)
    tail = v1 - m0
    if tail > _MAX_HORNER:
        return None  # a long changing value: scan_joined hashes it cheaper
    head = java_string_hash(first[v0:m0].decode()) & 0xFFFFFFFF
    powers = _pow31_u64(tail + 1)
    varying = rows[:, m0:v1].astype(np.uint64) @ powers[tail - 1 :: -1]
    out: I64 = ((varying + np.uint64(head) * powers[tail]) & _MASK32).astype(np.int64)
    return out


def scan_joined(body: bytes, lens: I64, index_enabled: bool = True) -> tuple[I64, I64, I64, I64]:
    """:func:`scan_properties` of records whose properties are already joined (:func:`join_properties`);
    ``lens`` holds the length of each record's properties."""
    tags_codes = np.zeros(len(lens), dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    if _NV not in body:
        return tags_codes, empty, empty, empty
    joined = b"".join((_ZERO_PAD, body, _ZERO_PAD[:8]))  # trailing pad: 8-byte word reads stay in bounds
    padded = np.frombuffer(joined, dtype=np.uint8)
    a = padded[_PAD : _PAD + len(body)]
    msg_start = np.cumsum(lens + 1) - (lens + 1)
    marks = np.flatnonzero(a <= _PS_CODE)  # one pass finds both separators (and NULs, dropped next)
    kinds = a[marks]
    seps = marks[kinds == _PS_CODE]
    ones = marks[kinds == _NV_CODE]
    seg_start = np.concatenate(([0], seps + 1))
    seg_end = np.append(seps, len(a))
    first_one = np.append(ones, len(a))[np.searchsorted(ones, seg_start)]
    key_len = first_one - seg_start
    valid = (first_one < seg_end) & (key_len > 0) & (seg_end - first_one > 1)
    ascii_ok = joined.isascii()

    w4 = _words(joined, ">u4")
    tag_segs = _matching(w4, seg_start, key_len, valid, _TAGS)
    if len(tag_segs):
        t_msg = np.searchsorted(msg_start, seg_start[tag_segs], side="right") - 1
        keep = _last_per_message(t_msg)
        tag_segs, t_msg = tag_segs[keep], t_msg[keep]
        v_start = first_one[tag_segs] + 1
        hashes, _ = _value_hashes(padded, v_start, seg_end[tag_segs] - v_start, ascii_ok)
        tags_codes[t_msg] = hashes.astype(np.uint32).view(np.int32)
    if not index_enabled:
        return tags_codes, empty, empty, empty
    return (
        tags_codes,
        *_index_keys(joined, padded, msg_start, seg_start, seg_end, first_one, key_len, valid, ascii_ok),
    )


def index_key_hashes(prefix_hashes: I64, key_hashes: I64, key_lengths: I64) -> I64:
    """IndexFile hashes ``abs(hashCode(prefix + key))`` from the prefix and key hashes (all uint32 values)."""
    with np.errstate(over="ignore"):
        full = prefix_hashes.astype(np.uint32) * pow31(int(key_lengths.max()) + 1)[
            key_lengths
        ] + key_hashes.astype(np.uint32)
    return _abs_java(full.astype(np.uint32))


def _value_hashes(padded: npt.NDArray[np.uint8], starts: I64, lens: I64, ascii_ok: bool) -> tuple[I64, I64]:
    """Java hashes (uint32 values) and UTF-16 lengths of the UTF-8 byte ranges ``a[s:s+len]``."""
    a = padded[_PAD:]  # (may include the trailing pad: the ranges never reach it)
    if ascii_ok or not bool((a[_ranges_index(starts, lens)] >= 0x80).any()):
        return _padded_hashes(padded, starts, lens).astype(np.int64), lens
    data = a.tobytes()
    texts = [
        str(data[s : s + n], "utf-8", "replace") for s, n in zip(starts.tolist(), lens.tolist(), strict=True)
    ]
    hashes = np.array([java_string_hash(t) & 0xFFFFFFFF for t in texts], dtype=np.int64)
    units = np.array([len(t.encode("utf-16-be", "surrogatepass")) // 2 for t in texts], dtype=np.int64)
    return hashes, units


def _ranges_index(starts: I64, lens: I64) -> I64:
    total = int(lens.sum())
    offs = np.cumsum(lens) - lens
    return np.repeat(starts - offs, lens) + np.arange(total)


def _index_keys(
    joined: bytes,
    padded: npt.NDArray[np.uint8],
    msg_start: I64,
    seg_start: I64,
    seg_end: I64,
    first_one: I64,
    key_len: I64,
    valid: npt.NDArray[np.bool_],
    ascii_ok: bool,
) -> tuple[I64, I64, I64]:
    """(hashes, UTF-16 lengths, records) of the KEYS tokens and UNIQ_KEY of each record, in dispatch order."""
    a = padded[_PAD:]
    starts_l: list[I64] = []
    lens_l: list[I64] = []
    msgs_l: list[I64] = []
    kinds_l: list[I64] = []
    key_segs = _matching(_words(joined, ">u4"), seg_start, key_len, valid, _KEYS)
    if len(key_segs):
        k_msg = np.searchsorted(msg_start, seg_start[key_segs], side="right") - 1
        keep = _last_per_message(k_msg)
        key_segs, k_msg = key_segs[keep], k_msg[keep]
        v_start = first_one[key_segs] + 1
        t_start, t_len, t_msg = _tokens(a, v_start, seg_end[key_segs] - v_start, k_msg)
        if len(t_start):
            starts_l.append(t_start)
            lens_l.append(t_len)
            msgs_l.append(t_msg)
            kinds_l.append(np.zeros(len(t_start), dtype=np.int64))
    uniq_segs = _matching(_words(joined, ">u8"), seg_start, key_len, valid, _UNIQ)
    if len(uniq_segs):
        u_msg = np.searchsorted(msg_start, seg_start[uniq_segs], side="right") - 1
        keep = _last_per_message(u_msg)
        uniq_segs, u_msg = uniq_segs[keep], u_msg[keep]
        u_start = first_one[uniq_segs] + 1
        starts_l.append(u_start)
        lens_l.append(seg_end[uniq_segs] - u_start)
        msgs_l.append(u_msg)
        kinds_l.append(np.ones(len(u_start), dtype=np.int64))
    if not starts_l:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    if len(starts_l) == 1:
        starts, lens, msgs = starts_l[0], lens_l[0], msgs_l[0]
    else:
        starts, lens, msgs = np.concatenate(starts_l), np.concatenate(lens_l), np.concatenate(msgs_l)
        order = np.argsort(msgs * 2 + np.concatenate(kinds_l), kind="stable")
        starts, lens, msgs = starts[order], lens[order], msgs[order]
    hashes, units = _value_hashes(padded, starts, lens, ascii_ok)
    return hashes, units, msgs


def _tokens(a: npt.NDArray[np.uint8], v_start: I64, v_len: I64, v_msg: I64) -> tuple[I64, I64, I64]:
    """(start, length, record) of the space-separated, non-empty tokens of the given value ranges."""
    idx = _ranges_index(v_start, v_len)
    chars = a[idx]
    spaces = chars == 0x20
    if not spaces.any():
        return v_start, v_len, v_msg  # the usual case: one key per value
    is_tok = ~spaces
    offs = np.cumsum(v_len) - v_len
    head = np.zeros(len(chars), dtype=bool)
    head[offs] = True  # a value's first byte starts a token even if the previous value ended with one
    prev_tok = np.concatenate(([False], is_tok[:-1])) & ~head
    tail = np.zeros(len(chars), dtype=bool)
    tail[offs + v_len - 1] = True
    next_tok = np.concatenate((is_tok[1:], [False])) & ~tail
    t0 = np.flatnonzero(is_tok & ~prev_tok)
    t1 = np.flatnonzero(is_tok & ~next_tok)
    owner = np.repeat(v_msg, v_len)
    return idx[t0], t1 - t0 + 1, owner[t0]
