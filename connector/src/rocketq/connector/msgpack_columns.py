"""Columnar msgpack decoding: a column of msgpack bodies into an Arrow array of a schema, with
numpy operations over all messages at once instead of one Python object per message.

Theory of operation.  The bodies are one byte buffer and their offsets.  Decoding keeps one
*cursor* per message (an int64 array of byte positions) and moves all cursors together, one
msgpack object at a time: read the type bytes at every cursor (one gather), look up kind, header
size and fixed length in 256-entry tables, read the length fields of the variable-size objects,
and compute where every object ends.  Scalars of a schema leaf become one numpy array (integers
and floats from big-endian views, strings and binaries as Arrow offsets plus one gather of their
bytes).  A struct is a msgpack map: entry ``j`` of every map is handled in one step (its key
compared with the field names, its value parsed as that field's type), so a schema of F fields
costs about F steps per column of messages, not per message.  An array is handled the same way,
element ``j`` of every array per step.  Keys the schema does not name are skipped (their strings
still checked for valid UTF-8, as the row-wise decoder would).  Types without a native path here
(decimals, dates, maps) are cut out at their byte ranges and decoded with ``msgpack.unpackb`` and
:func:`~rocketq.connector.value_arrays.from_python`, per value.

A message is *flagged* instead of decoded when anything is not exactly what the native path
handles: a wrong or unexpected type byte, a number out of range, a body ending early or late,
invalid UTF-8, a duplicate key, a timestamp the cast would refuse.  The caller decodes flagged
messages with the row-wise decoder (:func:`rocketq.connector.values.decode_values`), which gives
them their value or their exact error, so this module only has to be right about the messages it
does not flag; a property test compares both decoders on random and corrupted bodies.  A batch
whose shape needs too many steps (very long arrays, deep unknown values) gives up as a whole
(:class:`GiveUp`) and goes row-wise too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from rocketq.connector.value_arrays import DATA_ERRORS, from_python, ns_to

I64 = np.int64
Ints = np.ndarray[Any, np.dtype[np.int64]]
Mask = np.ndarray[Any, np.dtype[np.bool_]]

# kinds of a type byte
BAD, NIL, BOOL, UINT, INT, FLOAT, STR, BIN, EXT, ARRAY, MAP = range(11)
MIN_ROWS = 32  # below this the row-wise decoder is as fast
STEP_FLOOR = 64  # vectorized steps a batch may take, plus one per 4 rows (a step costs ~4 rows)
PAD = 32  # zero bytes after the bodies, so header gathers past a body's end stay in the buffer


def _tables() -> tuple[np.ndarray[Any, np.dtype[np.uint8]], Ints, Ints, Ints]:
    """Per type byte: kind, bytes of its length field, fixed length (payload or count), and the
    extra header bytes after the length field (an ext's type code)."""
    kind = np.zeros(256, np.uint8)
    nlen = np.zeros(256, I64)
    fixed = np.zeros(256, I64)
    extra = np.zeros(256, I64)
    kind[0x00:0x80] = UINT
    kind[0xE0:0x100] = INT
    kind[0x80:0x90], fixed[0x80:0x90] = MAP, np.arange(16)
    kind[0x90:0xA0], fixed[0x90:0xA0] = ARRAY, np.arange(16)
    kind[0xA0:0xC0], fixed[0xA0:0xC0] = STR, np.arange(32)
    kind[0xC0] = NIL
    kind[0xC2:0xC4] = BOOL
    sized = ((0xC4, BIN, 1), (0xC5, BIN, 2), (0xC6, BIN, 4), (0xD9, STR, 1), (0xDA, STR, 2), (0xDB, STR, 4),
             (0xDC, ARRAY, 2), (0xDD, ARRAY, 4), (0xDE, MAP, 2), (0xDF, MAP, 4))  # fmt: skip
    for code, k, n in sized:
        kind[code], nlen[code] = k, n
    for code, n in ((0xC7, 1), (0xC8, 2), (0xC9, 4)):
        kind[code], nlen[code], extra[code] = EXT, n, 1
    for code, n in ((0xD4, 1), (0xD5, 2), (0xD6, 4), (0xD7, 8), (0xD8, 16)):
        kind[code], fixed[code], extra[code] = EXT, n, 1
    for code, n in ((0xCA, 4), (0xCB, 8)):
        kind[code], fixed[code] = FLOAT, n
    for base, k in ((0xCC, UINT), (0xD0, INT)):
        kind[base : base + 4], fixed[base : base + 4] = k, (1, 2, 4, 8)
    return kind, nlen, fixed, extra


KIND, NLEN, FIXED, EXTRA = _tables()
HEAD = 1 + NLEN + EXTRA  # header bytes before the payload or the first element
VARIABLE = NLEN > 0
_INT_CODES = {
    0xCC: ">u1",
    0xCD: ">u2",
    0xCE: ">u4",
    0xCF: ">u8",
    0xD0: ">i1",
    0xD1: ">i2",
    0xD2: ">i4",
    0xD3: ">i8",
}
_INT_RANGE = {pa.int8(): 2**7, pa.int16(): 2**15, pa.int32(): 2**31}
_TS_FACTOR = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_MAX_SEC = (2**63 - 1) // 10**9 - 1
_UNPACK_OPTIONS: dict[str, Any] = {"raw": False, "timestamp": 2, "strict_map_key": False, "use_list": False}


class GiveUp(Exception):
    """The batch needs more vectorized steps than decoding it row by row would cost."""


class Header:
    """The msgpack object headers at a set of positions (one entry per position)."""

    __slots__ = ("code", "kind", "length", "start")

    def __init__(self, dec: Decoder, pos: Ints) -> None:
        code = dec.d[pos]
        self.code = code
        self.kind = KIND[code]
        self.length: Ints = FIXED[code]  # payload bytes, or element count of a container
        var = np.flatnonzero(VARIABLE[code])
        if var.size:
            field = dec.read(">u4", pos[var] + 1).astype(I64)
            self.length[var] = field >> ((4 - NLEN[code[var]]) * 8)
        self.start: Ints = pos + HEAD[code]  # payload, or first element

    def end(self) -> Ints:
        """Where each (non-container) object ends."""
        return self.start + self.length


class Decoder:
    """One batch of bodies: the padded byte buffer and the bookkeeping shared by all steps."""

    def __init__(self, d: np.ndarray[Any, np.dtype[np.uint8]], rows: int) -> None:
        self.d = d
        self.views: dict[str, np.ndarray[Any, Any]] = {}
        self.steps = 0
        self.budget = rows // 4 + STEP_FLOOR
        self.late_bad: list[Ints] = []  # top-level rows flagged after the fact (invalid UTF-8)
        self.texts: list[tuple[Ints, Ints, Ints]] = []  # (rows, starts, lengths) to check as UTF-8

    def read(self, dtype: str, at: Ints) -> np.ndarray[Any, Any]:
        """The big-endian numbers (``dtype`` as in numpy, e.g. ``>u4``) starting at byte ``at``."""
        view = self.views.get(dtype)
        if view is None:  # an unaligned view: element i starts at byte i
            size = int(dtype[-1])
            view = np.ndarray((len(self.d) - size + 1,), np.dtype(dtype), self.d, 0, (1,))
            self.views[dtype] = view
        return view[at]

    def step(self) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise GiveUp

    # -- dispatch ---------------------------------------------------------------------------

    def parse(self, typ: pa.DataType, pos: Ints, lim: Ints, row: Ints) -> tuple[pa.Array, Ints, Mask]:
        """The values of ``typ`` at ``pos`` (each object must end by ``lim``): the array, where
        each object ended, and which ones were decoded natively (the others are flagged)."""
        self.step()
        if pa.types.is_struct(typ):
            return self.struct(typ, pos, lim, row)
        if pa.types.is_list(typ):
            return self.array(typ, pos, lim, row)
        if pa.types.is_integer(typ) or pa.types.is_floating(typ):
            return self.number(typ, pos, lim)
        if pa.types.is_boolean(typ):
            return self.boolean(pos, lim)
        if pa.types.is_string(typ) or pa.types.is_binary(typ):
            return self.text(typ, pos, lim, row)
        if pa.types.is_timestamp(typ):
            return self.timestamp(typ, pos, lim)
        return self.objects(typ, pos, lim, row)

    # -- leaves -----------------------------------------------------------------------------

    def number(self, typ: pa.DataType, pos: Ints, lim: Ints) -> tuple[pa.Array, Ints, Mask]:
        h = Header(self, pos)
        end = h.end()
        nil = h.kind == NIL
        floating = pa.types.is_floating(typ)
        ok = (pos < lim) & (end <= lim)
        ints = np.zeros(len(pos), I64)
        small = h.code < 0x80
        ints[small] = h.code[small]
        neg = h.code >= 0xE0
        ints[neg] = h.code[neg].astype(I64) - 256
        present = np.flatnonzero(np.bincount(h.code, minlength=256))
        is_int = small | neg
        floats = np.zeros(len(pos), np.float64) if floating else None
        for code in present.tolist():
            if code < 0x80 or code >= 0xE0:
                continue
            sel = np.flatnonzero(h.code == code)
            if code in _INT_CODES:
                raw = self.read(_INT_CODES[code], h.start[sel])
                if code == 0xCF:  # uint64: above int64 is refused by the row-wise decoder's cast
                    ok[sel[raw > np.uint64(2**63 - 1)]] = False
                ints[sel] = raw.astype(I64)
                is_int[sel] = True
            elif floats is not None and code in (0xCA, 0xCB):
                floats[sel] = self.read(">f4" if code == 0xCA else ">f8", h.start[sel])
            elif code != 0xC0:
                ok[sel] = False  # booleans, strings, ...: the row-wise decoder says what is wrong
        if floats is None:
            bound = _INT_RANGE.get(typ)
            if bound is not None:
                ok &= (ints >= -bound) & (ints < bound)
            values: np.ndarray[Any, Any] = ints
        else:  # integers only where exact, as pyarrow converts them (2^53 for doubles, 2^24 floats)
            exact = 2**53 if typ == pa.float64() else 2**24
            ok &= ~is_int | ((ints >= -exact) & (ints <= exact))
            values = np.where(is_int, ints, floats) if is_int.any() else floats
            if typ == pa.float32():
                with np.errstate(over="ignore"):
                    values = values.astype(np.float32)  # to nearest, inf beyond, as pyarrow does
        end[nil] = pos[nil] + 1
        arr = pa.array(values, typ if floats is not None else pa.int64(), mask=nil)
        return (arr if arr.type == typ else arr.cast(typ, safe=False)), end, ok

    def boolean(self, pos: Ints, lim: Ints) -> tuple[pa.Array, Ints, Mask]:
        code = self.d[pos]
        nil = code == 0xC0
        ok = (pos < lim) & (nil | (code == 0xC2) | (code == 0xC3))
        return pa.array(code == 0xC3, pa.bool_(), mask=nil), pos + 1, ok

    def text(self, typ: pa.DataType, pos: Ints, lim: Ints, row: Ints) -> tuple[pa.Array, Ints, Mask]:
        h = Header(self, pos)
        end = h.end()
        nil = h.kind == NIL
        ok = (pos < lim) & (end <= lim) & (nil | (h.kind == (STR if pa.types.is_string(typ) else BIN)))
        take = ok & ~nil
        arr = self.bytes_array(np.where(take, h.start, pos), np.where(take, h.length, 0), ~nil)
        if pa.types.is_string(typ):
            arr = arr.view(pa.string())
            try:
                arr.validate(full=True)
            except pa.ArrowInvalid:
                ok[_not_utf8(arr)] = False
        return arr, end, ok

    def bytes_array(self, start: Ints, lengths: Ints, valid: Mask) -> pa.Array:
        """A binary array of the byte ranges ``[start, start + length)``, which must be in
        ascending order and not overlap: a view of the buffer with the ranges and the gaps between
        them as alternate elements, of which one ``take`` keeps the ranges."""
        n = len(start)
        offsets = np.empty(2 * n + 1, np.int32)
        offsets[0 : 2 * n : 2] = start
        offsets[1 : 2 * n : 2] = start + lengths
        offsets[2 * n] = offsets[2 * n - 1] if n else 0
        both = pa.Array.from_buffers(pa.binary(), 2 * n, [None, pa.py_buffer(offsets), pa.py_buffer(self.d)])
        return both.take(pa.array(np.arange(0, 2 * n, 2), mask=None if valid.all() else ~valid))

    def timestamp(self, typ: pa.DataType, pos: Ints, lim: Ints) -> tuple[pa.Array, Ints, Mask]:
        h = Header(self, pos)
        end = h.end()
        nil = h.kind == NIL
        ns, valid, inside = self.unix_ns(h)
        ok = (pos < lim) & (end <= lim) & (nil | (valid & inside))
        ok &= ns % _TS_FACTOR[typ.unit] == 0  # the row-wise cast refuses to truncate
        end[nil] = pos[nil] + 1
        ns[~ok] = 0
        return ns_to(pa.array(ns, pa.int64(), mask=nil), typ), end, ok

    def unix_ns(self, h: Header) -> tuple[Ints, Mask, Mask]:
        """Nanoseconds of msgpack timestamps (ext type -1, 4, 8 or 12 bytes), where each is a valid
        timestamp, and where its nanoseconds fit an int64."""
        d = self.d
        ok = (h.kind == EXT) & (d[np.maximum(h.start - 1, 0)] == 0xFF)
        sec = np.zeros(len(h.code), I64)
        nsec = np.zeros(len(h.code), I64)
        for size in (4, 8, 12):
            sel = np.flatnonzero(ok & (h.length == size))
            if not sel.size:
                continue
            at = h.start[sel]
            if size == 4:
                sec[sel] = self.read(">u4", at).astype(I64)
            elif size == 8:
                word = self.read(">u8", at)
                sec[sel] = (word & np.uint64(2**34 - 1)).astype(I64)
                nsec[sel] = (word >> np.uint64(34)).astype(I64)
            else:
                nsec[sel] = self.read(">u4", at).astype(I64)
                sec[sel] = self.read(">i8", at + 4)
        ok &= np.isin(h.length, (4, 8, 12)) & (nsec < 10**9)
        inside = (sec >= -_MAX_SEC) & (sec <= _MAX_SEC)  # else not an int64 of nanoseconds
        return np.where(inside, sec, 0) * 10**9 + nsec, ok, inside

    def objects(self, typ: pa.DataType, pos: Ints, lim: Ints, row: Ints) -> tuple[pa.Array, Ints, Mask]:
        """Types without a native path: each value unpacked from its byte range."""
        import msgpack

        end, ok = self.skip(pos, lim, row)
        view = memoryview(self.d.data)
        values: list[Any] = []
        for i, (s, e, good) in enumerate(zip(pos.tolist(), end.tolist(), ok.tolist(), strict=True)):
            value = None
            if good:
                try:
                    value = msgpack.unpackb(view[s:e], **_UNPACK_OPTIONS)
                except DATA_ERRORS:
                    ok[i] = False
            values.append(value)
        try:
            return from_python(values, typ), end, ok
        except DATA_ERRORS:
            return pa.nulls(len(pos), typ), end, np.zeros(len(pos), bool)

    # -- containers -------------------------------------------------------------------------

    def array(self, typ: pa.DataType, pos: Ints, lim: Ints, row: Ints) -> tuple[pa.Array, Ints, Mask]:
        h = Header(self, pos)
        nil = h.kind == NIL
        is_array = h.kind == ARRAY
        ok = (pos < lim) & (nil | is_array) & (h.start <= lim)
        count = np.where(ok & is_array, h.length, 0)
        ok &= count <= lim - h.start  # every element takes a byte at least
        count[~ok] = 0
        offsets = np.zeros(len(pos) + 1, I64)
        np.cumsum(count, out=offsets[1:])
        cur = np.where(is_array, h.start, pos + 1)
        pieces: list[pa.Array] = []
        places: list[Ints] = []
        for j in range(int(count.max(initial=0))):
            live = np.flatnonzero(ok & (count > j))
            if not live.size:
                break
            arr, end, good = self.parse(typ.value_type, cur[live], lim[live], row[live])
            pieces.append(arr)
            places.append(offsets[live] + j)
            cur[live] = end
            ok[live[~good]] = False
        values = _assemble(pieces, places, int(offsets[-1]), typ.value_type)
        mask = pa.array(nil) if nil.any() else None
        return (
            pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, type=typ, mask=mask),
            cur,
            ok,
        )

    def struct(self, typ: pa.StructType, pos: Ints, lim: Ints, row: Ints) -> tuple[pa.Array, Ints, Mask]:
        n = len(pos)
        h = Header(self, pos)
        nil = h.kind == NIL
        is_map = h.kind == MAP
        ok = (pos < lim) & (nil | is_map) & (h.start <= lim)
        count = np.where(ok & is_map, h.length, 0)
        ok &= 2 * count <= lim - h.start
        cur = np.where(is_map, h.start, pos + 1)
        fields = list(typ)
        names = [_chunks(f.name.encode()) for f in fields]
        seen = np.zeros((len(fields), n), bool)
        pieces: list[list[pa.Array]] = [[] for _ in fields]
        places: list[list[Ints]] = [[] for _ in fields]
        for j in range(int(count.max(initial=0))):
            entry = ok & (count > j)
            whole = bool(entry.all())  # the common case: every map has entry j
            ids = np.arange(n) if whole else np.flatnonzero(entry)
            if not ids.size:
                break
            self.step()
            at_key, limit = (cur, lim) if whole else (cur[ids], lim[ids])
            key = Header(self, at_key)
            key_end = key.end()
            good = (at_key < limit) & (key.kind == STR) & (key_end <= limit)
            ok[ids[~good]] = False
            which = self.match_keys(key, good, names, j)
            unknown = np.flatnonzero(good & (which < 0))
            if unknown.size:  # keys the schema does not name: UTF-8 checked, value skipped
                sel = ids[unknown]
                self.texts.append((row[sel], key.start[unknown], key.length[unknown]))
                end, skipped = self.skip(key_end[unknown], lim[sel], row[sel])
                cur[sel] = end
                ok[sel[~skipped]] = False
            first = int(which[0])
            if first >= 0 and bool((which == first).all()):
                groups: list[tuple[int, Ints | None]] = [(first, None)]
            else:
                present = np.flatnonzero(np.bincount(which[which >= 0], minlength=len(fields)))
                groups = [(f, np.flatnonzero(which == f)) for f in present.tolist()]
            for f, at in groups:
                everyone = whole and at is None
                sel = ids if at is None else ids[at]
                dup = seen[f] if everyone else seen[f, sel]
                if dup.any():  # a key twice: the row-wise decoder keeps the last
                    ok[sel[dup]] = False
                seen[f, sel] = True
                args = (
                    (key_end, lim, row)
                    if everyone
                    else (key_end if at is None else key_end[at], lim[sel], row[sel])
                )
                arr, end, parsed = self.parse(fields[f].type, *args)
                pieces[f].append(arr)
                places[f].append(sel)
                cur[sel] = end
                if not parsed.all():
                    ok[sel[~parsed]] = False
        children = [_assemble(pieces[f], places[f], n, field.type) for f, field in enumerate(fields)]
        mask = pa.array(nil) if nil.any() else None
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask), cur, ok

    def match_keys(self, key: Header, good: Mask, names: list[tuple[int, list[Any]]], j: int) -> Ints:
        """The field each key names (-1: none), trying the field at the entry's own place first."""
        which = np.full(len(good), -1, I64)
        todo = np.flatnonzero(good)
        everyone = todo.size == len(good)
        for t in range(len(names)):
            if not todo.size:
                break
            f = (j + t) % len(names)
            size, chunks = names[f]
            hit = key.length[todo] == size
            cand: Ints | None = None if everyone and bool(hit.all()) else todo[hit]  # None: every key
            for at, value, mask in chunks:  # compared only where the key has the name's length
                starts = key.start if cand is None else key.start[cand]
                eq = (self.read(">u8", starts + at) & mask) == value
                if cand is None:
                    cand = None if bool(eq.all()) else np.flatnonzero(eq)
                else:
                    cand = cand[eq]
            if cand is None:
                which[:] = f
                break
            which[cand] = f
            todo = todo[which[todo] < 0]
            everyone = False
        return which

    def skip(self, pos: Ints, lim: Ints, row: Ints) -> tuple[Ints, Mask]:
        """Where the object at each position ends, whatever it is; strings are checked as UTF-8
        and timestamps as the row-wise decoder checks them."""
        cur = pos.copy()
        pending = np.ones(len(pos), I64)
        ok = np.ones(len(pos), bool)
        live = np.arange(len(pos))
        while live.size:
            self.step()
            at, limit = cur[live], lim[live]
            h = Header(self, at)
            container = (h.kind == ARRAY) | (h.kind == MAP)
            nxt = np.where(container, h.start, h.end())
            more = np.where(h.kind == ARRAY, h.length, np.where(h.kind == MAP, 2 * h.length, 0))
            bad = (at >= limit) | (h.kind == BAD) | (nxt > limit) | (more > limit - nxt)
            text = np.flatnonzero(~bad & (h.kind == STR))
            if text.size:
                self.texts.append((row[live[text]], h.start[text], h.length[text]))
            ext = np.flatnonzero(~bad & (h.kind == EXT))
            if ext.size:
                stamp = self.d[h.start[ext] - 1] == 0xFF
                if stamp.any():
                    _, valid, _ = self.unix_ns(h)
                    bad[ext[stamp & ~valid[ext]]] = True
            cur[live] = nxt
            pending[live] += more - 1
            ok[live[bad]] = False
            live = live[~bad & (pending[live] > 0)]
        return cur, ok

    def check_texts(self) -> None:
        """Flag the rows whose strings (values and keys) are not valid UTF-8."""
        if not self.texts:
            return
        rows = np.concatenate([t[0] for t in self.texts])
        starts = np.concatenate([t[1] for t in self.texts])
        lengths = np.concatenate([t[2] for t in self.texts])
        if not rows.size:
            return
        order = np.argsort(starts, kind="stable")
        arr = self.bytes_array(starts[order], lengths[order], np.ones(len(rows), bool)).view(pa.string())
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid:
            self.late_bad.append(rows[order][_not_utf8(arr)])


def _not_utf8(arr: pa.Array) -> Ints:
    """The positions of the values of a string array that are not valid UTF-8 (a slow scan, for
    an array that failed validation)."""
    bad = []
    for i, value in enumerate(arr.view(pa.binary()).to_pylist()):
        try:
            if value is not None:
                value.decode()
        except UnicodeDecodeError:
            bad.append(i)
    return np.asarray(bad, I64)


def _chunks(name: bytes) -> tuple[int, list[tuple[int, np.uint64, np.uint64]]]:
    """A key's length and its bytes as big-endian 8-byte words (offset, value, mask)."""
    chunks = []
    for at in range(0, len(name), 8):
        part = name[at : at + 8]
        shift = 8 * (8 - len(part))
        chunks.append(
            (
                at,
                np.uint64(int.from_bytes(part, "big") << shift),
                np.uint64(((1 << (8 * len(part))) - 1) << shift),
            )
        )
    return len(name), chunks


def _assemble(pieces: list[pa.Array], places: list[Ints], total: int, typ: pa.DataType) -> pa.Array:
    """One array of ``total`` values from pieces whose values belong at ``places`` (the places
    no piece fills are null)."""
    if not pieces:
        return pa.nulls(total, typ)
    values = pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
    at = places[0] if len(places) == 1 else np.concatenate(places)
    if len(at) == total and (total == 0 or (at[0] == 0 and bool((np.diff(at) == 1).all()))):
        return values
    index = np.full(total, -1, I64)
    index[at] = np.arange(len(at))
    return values.take(pa.array(index, mask=index < 0))


def decode_columns(bodies: pa.Array, typ: pa.DataType) -> tuple[pa.Array, Ints] | None:
    """``typ`` values of a binary column of msgpack bodies and the rows flagged for row-wise
    decoding, or None when this batch is better decoded row by row."""
    n = len(bodies)
    if n < MIN_ROWS or bodies.null_count or not pa.types.is_binary(bodies.type):
        return None
    buffers = bodies.buffers()
    raw = np.frombuffer(buffers[1], dtype=np.int32, count=n + 1, offset=bodies.offset * 4).astype(I64)
    d = np.zeros(int(raw[-1] - raw[0]) + PAD, np.uint8)
    if buffers[2] is not None:
        d[: len(d) - PAD] = np.frombuffer(buffers[2], np.uint8, count=len(d) - PAD, offset=int(raw[0]))
    starts, ends = raw[:-1] - raw[0], raw[1:] - raw[0]
    decoder = Decoder(d, n)
    try:
        values, end, ok = decoder.parse(typ, starts, ends, np.arange(n))
        decoder.check_texts()
    except GiveUp:
        return None
    ok &= end == ends  # exactly one object per body
    bad = ~ok
    for rows in decoder.late_bad:
        bad[rows] = True
    return values, np.flatnonzero(bad)
