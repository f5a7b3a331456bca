"""Decoding typed message values: the source's ``valueFormat`` codecs over a column of bodies.

Theory of operation.  Decoding works on a whole Arrow ``binary`` column of bodies at once:

* ``string``: one UTF-8 validating cast;
* ``json``: the bodies, their newlines replaced by spaces (a raw newline can only be whitespace
  in valid JSON), are laid end to end with ``\\n`` between them and read by one
  ``pyarrow.json.read_json`` call with an explicit schema (types the JSON reader does not
  convert itself, dates, are read as strings and cast after).  Schemas with maps, which the
  JSON reader cannot produce, go through ``json.loads`` and the Python-object path below;
* ``msgpack``: column-wise, with numpy over all bodies at once (:mod:`.msgpack_columns`); the
  bodies it flags (anything it does not handle natively or exactly) go row-wise: one
  ``msgpack.Unpacker`` over their concatenated bodies (each object must end exactly where its
  body ends), then one Arrow array per schema leaf built from the objects
  (:func:`rocketq.connector.value_arrays.from_python`).

When a block fails (a body is not valid in the format, or does not fit the schema), it is cut in
halves until the failing bodies are isolated: good rows keep the bulk path, and every bad row
gets its own error message (:class:`Decoded`).  Types and schemas are
:mod:`rocketq.connector.value_types`; encoding is :mod:`rocketq.connector.value_encoding`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.connector.msgpack_columns import decode_columns
from rocketq.connector.value_arrays import DATA_ERRORS, from_python, list_offsets
from rocketq.connector.value_types import ValueFormat, has_map


@dataclass(frozen=True, slots=True)
class Decoded:
    """Typed values of a column of bodies; ``errors`` has a message at each row that failed."""

    values: pa.Array  # null where the row failed
    errors: dict[int, str]

    def error_column(self) -> pa.Array:
        """A string column: the error of each failed row, null elsewhere."""
        idx = np.full(len(self.values), -1, dtype=np.int64)
        messages = list(self.errors.values())
        if messages:
            idx[np.fromiter(self.errors.keys(), dtype=np.int64, count=len(messages))] = np.arange(
                len(messages)
            )
        return pa.array(messages, pa.string()).take(pa.array(idx, mask=idx < 0))

    def bad_rows(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        return np.fromiter(sorted(self.errors), dtype=np.int64, count=len(self.errors))


def _isolate(
    bodies: pa.Array, typ: pa.DataType, block: Callable[[pa.Array], pa.Array], errors: dict[int, str]
) -> pa.Array:
    """``block(bodies)``, or, when it fails, the halves of ``bodies`` decoded separately, down to
    single rows, each failing row becoming a null with its error in ``errors``."""
    pieces: list[pa.Array] = []

    def go(lo: int, hi: int) -> None:
        try:
            pieces.append(block(bodies.slice(lo, hi - lo)))
        except DATA_ERRORS as exc:
            if hi - lo == 1:
                errors[lo] = f"{type(exc).__name__}: {exc}"
                pieces.append(pa.nulls(1, typ))
                return
            mid = (lo + hi) // 2
            go(lo, mid)
            go(mid, hi)

    if len(bodies):
        go(0, len(bodies))
    if len(pieces) == 1:
        return pieces[0]
    return pa.concat_arrays(pieces) if pieces else pa.array([], typ)


def _string_block(bodies: pa.Array) -> pa.Array:
    return pc.cast(bodies, pa.string())


def _json_read_type(typ: pa.DataType) -> pa.DataType:
    """What pyarrow's JSON reader is asked for: ``typ`` with dates as strings."""
    if pa.types.is_date(typ):
        return pa.string()
    if pa.types.is_struct(typ):
        return pa.struct([pa.field(f.name, _json_read_type(f.type), f.nullable) for f in typ])
    if pa.types.is_list(typ):
        return pa.list_(pa.field("element", _json_read_type(typ.value_type)))
    return typ


def json_lines(bodies: pa.Array) -> pa.Buffer:
    """The bodies end to end as lines ``{"v":<body>}``, newlines inside replaced by spaces.

    The wrapping makes a line hold exactly one value per body: an empty body, or a body of two
    values, is then invalid JSON instead of zero or two rows."""
    text = bodies
    for char in ("\n", "\r"):
        if pc.any(pc.match_substring(text, char)).as_py():
            text = pc.replace_substring(text, char, " ")
    joined = pc.binary_join_element_wise(b'{"v":', text, b"}\n", b"")
    offsets = np.frombuffer(
        joined.buffers()[1], dtype=np.int32, count=len(joined) + 1, offset=joined.offset * 4
    )
    data: pa.Buffer = joined.buffers()[2]
    return data.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))


def _json_block(bodies: pa.Array, typ: pa.DataType) -> pa.Array:
    import pyarrow.json as pj

    read_type = _json_read_type(typ)
    data = json_lines(bodies)
    table = pj.read_json(
        pa.BufferReader(data),
        read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, data.size + 1)),
        parse_options=pj.ParseOptions(
            explicit_schema=pa.schema([pa.field("v", read_type)]), unexpected_field_behavior="ignore"
        ),
    )
    if table.num_rows != len(bodies):
        raise ValueError(f"{table.num_rows} JSON values in {len(bodies)} bodies")
    column = table.column(0)
    return _fix_json_types(column.combine_chunks() if column.num_chunks != 1 else column.chunk(0), typ)


def _fix_json_types(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    if arr.type == typ:
        return arr
    if pa.types.is_date(typ):
        return pc.cast(arr, typ)
    if pa.types.is_struct(typ):
        children = [_fix_json_types(arr.field(i), f.type) for i, f in enumerate(typ)]
        return pa.StructArray.from_arrays(children, fields=list(typ), mask=arr.is_null())
    if pa.types.is_list(typ):
        flat = _fix_json_types(pc.list_flatten(arr), typ.value_type)
        return pa.ListArray.from_arrays(list_offsets(arr), flat, type=typ, mask=arr.is_null())
    return pc.cast(arr, typ)


def _json_python_block(bodies: pa.Array, typ: pa.DataType) -> pa.Array:
    loads = json.loads
    return from_python([loads(b) for b in bodies.to_pylist()], typ)


def _unpack_all(bodies: pa.Array) -> list[Any]:
    """The msgpack object of every body, with one Unpacker over the concatenated bodies."""
    import msgpack

    buffers = bodies.buffers()
    raw = np.frombuffer(buffers[1], dtype=np.int32, count=len(bodies) + 1, offset=bodies.offset * 4)
    offsets = raw - raw[0]
    size = int(offsets[-1])
    unpacker = msgpack.Unpacker(
        raw=False, timestamp=2, strict_map_key=False, use_list=False, max_buffer_size=max(size, 1)
    )
    if size:
        unpacker.feed(memoryview(buffers[2])[int(raw[0]) : int(raw[-1])])
    objects: list[Any] = []
    ends: list[int] = []
    append, tell = objects.append, unpacker.tell
    for obj in unpacker:
        append(obj)
        ends.append(tell())
    if len(ends) != len(bodies) or not np.array_equal(np.asarray(ends), offsets[1:]):
        raise ValueError("a body is not exactly one msgpack object")
    return objects


def _msgpack_block(bodies: pa.Array, typ: pa.DataType) -> pa.Array:
    return from_python(_unpack_all(bodies), typ)


def decode_values(bodies: pa.Array, fmt: ValueFormat, typ: pa.DataType) -> Decoded:
    """Decode a binary column of bodies into a column of ``typ`` (see the module docstring)."""
    errors: dict[int, str] = {}
    block: Callable[[pa.Array], pa.Array]
    if fmt is ValueFormat.STRING:
        block = _string_block
    elif fmt is ValueFormat.JSON:
        python = has_map(typ)

        def block(b: pa.Array) -> pa.Array:
            return _json_python_block(b, typ) if python else _json_block(b, typ)
    elif fmt is ValueFormat.MSGPACK:
        return _msgpack_columns(bodies, typ)
    else:
        raise ValueError(f"no decoding for valueFormat={fmt.value}")
    values = _isolate(bodies, typ, block, errors)
    return Decoded(values, errors)


def _msgpack_columns(bodies: pa.Array, typ: pa.DataType) -> Decoded:
    """msgpack bodies decoded column-wise (:mod:`.msgpack_columns`); the rows it flags, and
    whole batches it leaves, decoded row-wise with :func:`_msgpack_block`."""
    errors: dict[int, str] = {}

    def block(b: pa.Array) -> pa.Array:
        return _msgpack_block(b, typ)

    fast = decode_columns(bodies, typ)
    if fast is None:
        return Decoded(_isolate(bodies, typ, block, errors), errors)
    values, flagged = fast
    if not flagged.size:
        return Decoded(values, errors)
    flagged_errors: dict[int, str] = {}
    slow = _isolate(bodies.take(pa.array(flagged)), typ, block, flagged_errors)
    for i, message in flagged_errors.items():
        errors[int(flagged[i])] = message
    index = np.arange(len(bodies))
    index[flagged] = len(bodies) + np.arange(flagged.size)
    return Decoded(pa.concat_arrays([values, slow]).take(pa.array(index)), errors)


# -- Python objects -> Arrow, one array per schema leaf ---------------------------------------
