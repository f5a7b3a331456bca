"""Encoding typed message values: the sink's ``valueFormat`` codecs over a ``value`` column.

JSON text is assembled with Arrow string kernels (escaping, one join per nesting level), with no
Python object per row; msgpack goes through one ``Packer`` over the column's Python values (maps
as dicts).  A null value becomes JSON/msgpack ``null``, so every row gets a body.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from rocketq.connector.value_arrays import list_offsets
from rocketq.connector.value_types import ValueFormat, has_map

_CONTROL = re.compile("[\x00-\x1f]")


def _quote(strings: pa.Array) -> pa.Array:
    """JSON string literals of a string column (nulls stay null)."""
    s = pc.replace_substring(strings, "\\", "\\\\")
    s = pc.replace_substring(s, '"', '\\"')
    if pc.any(pc.match_substring_regex(s, "[\\x00-\\x1f]")).as_py():
        present = {c for v in s.to_pylist() if v is not None for c in _CONTROL.findall(v)}
        for char in sorted(present):
            s = pc.replace_substring(s, char, f"\\u{ord(char):04x}")
    return pc.binary_join_element_wise('"', s, '"', "")


def _json_text(arr: pa.Array) -> pa.Array:
    """The JSON text of every element (``null`` for nulls), as a non-null string column."""
    typ = arr.type
    if pa.types.is_struct(typ):
        parts: list[Any] = []
        for i, f in enumerate(typ):
            parts.append(("{" if i == 0 else ",") + json.dumps(f.name) + ":")
            parts.append(_json_text(pc.struct_field(arr, [i])))
        parts.append("}" if len(typ) else "{}")
        text = pc.binary_join_element_wise(*parts, "")
    elif pa.types.is_list(typ) or pa.types.is_map(typ):
        if pa.types.is_map(typ):
            arr = arr.view(pa.list_(pa.field("e", pa.struct([typ.key_field, typ.item_field]), False)))
            entries = pc.list_flatten(arr)
            key_text = _json_text(pc.cast(pc.struct_field(entries, [0]), pa.string()))
            flat = pc.binary_join_element_wise(key_text, _json_text(pc.struct_field(entries, [1])), ":")
        else:
            flat = _json_text(pc.list_flatten(arr))
        joined = pc.binary_join(pa.ListArray.from_arrays(list_offsets(arr), flat), ",")
        opening, closing = ("{", "}") if pa.types.is_map(typ) else ("[", "]")
        text = pc.binary_join_element_wise(opening, joined, closing, "")
    elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
        text = _quote(pc.cast(arr, pa.string()))
    elif pa.types.is_timestamp(typ):
        fmt = "%Y-%m-%dT%H:%M:%SZ" if typ.tz else "%Y-%m-%dT%H:%M:%S"
        text = _quote(pc.strftime(arr, format=fmt))
    elif pa.types.is_date(typ):
        text = _quote(pc.cast(arr, pa.string()))
    elif pa.types.is_floating(typ):
        finite = pc.is_finite(arr)
        text = pc.if_else(finite, pc.cast(arr, pa.string()), pa.scalar(None, pa.string()))
    elif pa.types.is_integer(typ) or pa.types.is_boolean(typ) or pa.types.is_decimal(typ):
        text = pc.cast(arr, pa.string())
    else:
        raise TypeError(f"valueFormat=json cannot write {typ} values (use msgpack for binary data)")
    return pc.fill_null(pc.if_else(arr.is_null(), pa.scalar(None, pa.string()), text), "null")


def _msgpack_default(obj: Any) -> Any:
    if isinstance(obj, decimal.Decimal):
        return str(obj)
    if isinstance(obj, (dt.date, dt.datetime)):
        return obj.isoformat()
    raise TypeError(f"valueFormat=msgpack cannot write {type(obj).__name__}")


def encode_values(values: pa.Array, fmt: ValueFormat) -> pa.Array:
    """Bodies (binary, non-null; a null value becomes JSON/msgpack ``null``) of a value column."""
    if fmt is ValueFormat.STRING:
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
            raise TypeError(f"valueFormat=string writes a string 'value' column, not {values.type}")
        return pc.cast(values, pa.binary())
    if fmt is ValueFormat.JSON:
        return pc.cast(_json_text(values), pa.binary())
    if fmt is ValueFormat.MSGPACK:
        import msgpack

        packer = msgpack.Packer(datetime=True, use_bin_type=True, default=_msgpack_default)
        pack = packer.pack
        if pa.types.is_map(values.type):
            return pa.array([None if v is None else pack(dict(v)) for v in values.to_pylist()], pa.binary())
        return pa.array([pack(v) for v in _maps_as_dicts(values)], pa.binary())
    raise ValueError(f"no encoding for valueFormat={fmt.value}")


def _maps_as_dicts(values: pa.Array) -> list[Any]:
    """``to_pylist`` with maps as dicts (pyarrow gives lists of pairs)."""
    if not has_map(values.type):
        return list(values.to_pylist())
    return [_fix_maps(v, values.type) for v in values.to_pylist()]


def _fix_maps(v: Any, typ: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_map(typ):
        return {k: _fix_maps(x, typ.item_type) for k, x in v}
    if pa.types.is_struct(typ):
        return {f.name: _fix_maps(v[f.name], f.type) for f in typ}
    if pa.types.is_list(typ):
        return [_fix_maps(x, typ.value_type) for x in v]
    return v
