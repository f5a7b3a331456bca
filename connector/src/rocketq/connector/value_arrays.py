"""Python objects and numbers into Arrow arrays of a value schema, shared by both msgpack decoders.

:func:`from_python` builds one Arrow array per schema leaf from decoded objects (dicts, lists,
scalars): the row-wise JSON and msgpack decoders (:mod:`rocketq.connector.values`) and the
column-wise msgpack decoder (:mod:`rocketq.connector.msgpack_columns`) for the types it has no
native path for.  :data:`DATA_ERRORS` are the exceptions that mean "this body does not fit the
schema" (as opposed to a bug), which every decoder turns into a per-row error.
"""

from __future__ import annotations

import datetime as dt
import decimal
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DATA_ERRORS: tuple[type[BaseException], ...] = (
    pa.ArrowException, ValueError, TypeError, OverflowError, KeyError, ArithmeticError,
)  # fmt: skip


def list_offsets(arr: pa.Array) -> pa.Array:
    lengths = np.asarray(pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False))
    offsets = np.zeros(len(arr) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.array(offsets)


def _nulls(values: list[Any]) -> pa.Array | None:
    """The validity mask of ``values`` (None when nothing is null)."""
    if None not in values:
        return None
    return pa.array([v is None for v in values], pa.bool_())


def _check(values: list[Any], kind: type | tuple[type, ...], what: str) -> None:
    for v in values:
        if v is not None and not isinstance(v, kind):
            raise TypeError(f"expected {what}, got {type(v).__name__} {str(v)[:40]!r}")


def _offsets(values: list[Any]) -> pa.Array:
    lengths = np.fromiter((0 if v is None else len(v) for v in values), dtype=np.int32, count=len(values))
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.array(offsets)


def _timestamp(values: list[Any], typ: pa.DataType) -> pa.Array:
    """From msgpack Timestamps (unpacked as int nanoseconds), datetimes or ISO-8601 strings."""
    sample = next((v for v in values if v is not None), None)
    if isinstance(sample, int) and not isinstance(sample, bool):
        ns = pa.array(values)
        if not pa.types.is_integer(ns.type):
            raise TypeError("expected timestamps, got a mix of types")
        return ns_to(ns, typ)
    if sample is None or isinstance(sample, dt.datetime):
        return pa.array(values, typ)
    text = pa.array(values, pa.string())
    try:
        return pc.cast(text, typ)
    except pa.ArrowInvalid:
        return pc.cast(pc.cast(text, pa.timestamp("us")), typ)  # no zone: UTC


def ns_to(ns: pa.Array, typ: pa.DataType) -> pa.Array:
    """Integer nanoseconds since the epoch as timestamps of ``typ`` (its unit and zone)."""
    return pc.cast(pc.cast(ns, pa.timestamp("ns", tz=typ.tz)), typ)


def _leaf(values: list[Any], typ: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(typ):
        return _timestamp(values, typ)
    if pa.types.is_date(typ):
        if all(v is None or isinstance(v, str) for v in values):
            return pc.cast(pa.array(values, pa.string()), typ)
        return pa.array(values, typ)
    if pa.types.is_decimal(typ):
        dec = decimal.Decimal
        return pa.array([v if v is None or isinstance(v, dec) else dec(str(v)) for v in values], typ)
    if pa.types.is_integer(typ):
        ints = pa.array(values)  # inferred, so that 1.5 is refused rather than truncated
        if not (pa.types.is_integer(ints.type) or pa.types.is_null(ints.type)):
            raise TypeError(f"expected integers, got {ints.type}")
        return ints.cast(typ)
    if pa.types.is_binary(typ):
        values = [v.encode() if isinstance(v, str) else v for v in values]
    return pa.array(values, typ)  # strings, floats, booleans: pyarrow refuses other types


def from_python(values: list[Any], typ: pa.DataType) -> pa.Array:
    """Arrow array of ``typ`` from decoded objects (dicts, lists, scalars), column by column."""
    if pa.types.is_struct(typ):
        mask = _nulls(values)
        rows = values if mask is None else [{} if v is None else v for v in values]
        get = dict.get  # raises TypeError for a row that is not an object
        children = [from_python(list(map(get, rows, repeat(f.name))), f.type) for f in typ]
        return pa.StructArray.from_arrays(children, fields=list(typ), mask=mask)
    if pa.types.is_list(typ):
        _check(values, (list, tuple), "an array")
        flat = [x for v in values if v is not None for x in v]
        mask = _nulls(values)
        return pa.ListArray.from_arrays(
            _offsets(values), from_python(flat, typ.value_type), type=typ, mask=mask
        )
    if pa.types.is_map(typ):
        _check(values, dict, "an object")
        keys = [k for v in values if v is not None for k in v]
        items = [x for v in values if v is not None for x in v.values()]
        key_arr = from_python([str(k) if pa.types.is_string(typ.key_type) else k for k in keys], typ.key_type)
        arr = pa.MapArray.from_arrays(_offsets(values), key_arr, from_python(items, typ.item_type), type=typ)
        mask = _nulls(values)
        return arr if mask is None else pc.if_else(mask, pa.scalar(None, typ), arr)
    return _leaf(values, typ)
