"""Typed message values: the ``valueFormat`` codecs of the source and the sink, and ``valueSchema``.

A value schema is a Spark DDL string (``"id bigint, tags array<string>, at timestamp"``), parsed
here into the Arrow type Spark expects for it (:func:`parse_ddl`, pure Python: the Python data
source workers have no JVM to ask), and turned into a Spark type for ``schema()``
(:func:`spark_type`).

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
  body ends), then one Arrow array per schema leaf built from the objects (:func:`from_python`).

When a block fails (a body is not valid in the format, or does not fit the schema), it is cut in
halves until the failing bodies are isolated: good rows keep the bulk path, and every bad row
gets its own error message (:class:`Decoded`).  Encoding is the reverse: JSON text is assembled
with Arrow string kernels (escaping, one join per nesting level), msgpack with one ``Packer``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql.types import DataType


class ValueFormat(enum.Enum):
    BINARY = "binary"
    STRING = "string"
    JSON = "json"
    MSGPACK = "msgpack"


class DecodeErrorPolicy(enum.Enum):
    FAIL = "fail"
    NULL = "null"
    DEAD_LETTER = "deadLetter"
    SKIP = "skip"


class DDLError(ValueError):
    """A value schema that is not a valid Spark DDL type string."""


# -- DDL -------------------------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)+`)|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|('(?:[^'\\]|\\.)*')|([<>(),:]))")
_TS = pa.timestamp("us", tz="UTC")
_SIMPLE: dict[str, pa.DataType] = {
    "string": pa.string(), "binary": pa.binary(), "boolean": pa.bool_(), "bool": pa.bool_(),
    "tinyint": pa.int8(), "byte": pa.int8(), "smallint": pa.int16(), "short": pa.int16(),
    "int": pa.int32(), "integer": pa.int32(), "bigint": pa.int64(), "long": pa.int64(),
    "float": pa.float32(), "real": pa.float32(), "double": pa.float64(), "date": pa.date32(),
    "timestamp": _TS, "timestamp_ltz": _TS, "timestamp_ntz": pa.timestamp("us"),
}  # fmt: skip


_COMPLEX = frozenset({"array", "map", "struct", "decimal", "dec", "numeric", "varchar", "char"})


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise DDLError(f"unexpected {text[pos : pos + 20]!r} at position {pos} of {text!r}")
            self.tokens.append(next(g for g in match.groups() if g is not None))
            pos = match.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.lower() != expected):
            want = expected or "more"
            raise DDLError(f"expected {want!r} but found {token!r} in {self.text!r}")
        self.i += 1
        return token

    def fields(self, end: str | None) -> pa.StructType:
        out: list[pa.Field] = []
        while self.peek() is not None and self.peek() != end:
            name = self.take()
            name = name[1:-1].replace("``", "`") if name.startswith("`") else name
            if self.peek() == ":":
                self.take()
            typ = self.type()
            nullable = True
            if (self.peek() or "").lower() == "not":
                self.take()
                self.take("null")
                nullable = False
            if (self.peek() or "").lower() == "comment":
                self.take()
                self.take()
            out.append(pa.field(name, typ, nullable=nullable))
            if self.peek() == ",":
                self.take()
        if not out:
            raise DDLError(f"no fields in {self.text!r}")
        return pa.struct(out)

    def type(self) -> pa.DataType:
        word = self.take().lower()
        if word in _SIMPLE:
            return _SIMPLE[word]
        if word in ("decimal", "dec", "numeric"):
            if self.peek() != "(":
                return pa.decimal128(10, 0)
            self.take("(")
            precision = int(self.take())
            scale = 0
            if self.peek() == ",":
                self.take()
                scale = int(self.take())
            self.take(")")
            return pa.decimal128(precision, scale)
        if word in ("varchar", "char"):
            self.take("(")
            self.take()
            self.take(")")
            return pa.string()
        if word == "array":
            self.take("<")
            element = self.type()
            self.take(">")
            return pa.list_(pa.field("element", element))
        if word == "map":
            self.take("<")
            key = self.type()
            self.take(",")
            value = self.type()
            self.take(">")
            return pa.map_(pa.field("key", key, nullable=False), pa.field("value", value))
        if word == "struct":
            self.take("<")
            fields = self.fields(">")
            self.take(">")
            return fields
        raise DDLError(f"unknown type {word!r} in {self.text!r}")


def parse_ddl(text: str) -> pa.DataType:
    """A Spark DDL string (``"a int, b struct<c: string>"`` or one type) as Spark's Arrow type."""
    parser = _Parser(text)
    tokens = parser.tokens
    if not tokens:
        raise DDLError("empty type")
    single = len(tokens) == 1 or (tokens[1] in ("<", "(") and tokens[0].lower() in _COMPLEX)
    typ: pa.DataType = parser.type() if single else parser.fields(None)
    if parser.peek() is not None:
        raise DDLError(f"unexpected {parser.peek()!r} in {text!r}")
    return typ


def to_ddl(typ: pa.DataType) -> str:
    """The DDL of an Arrow type made by :func:`parse_ddl` (struct fields as ``name type``)."""
    if pa.types.is_struct(typ):
        parts = [f"`{f.name}`: {to_ddl(f.type)}{'' if f.nullable else ' NOT NULL'}" for f in typ]
        return f"struct<{', '.join(parts)}>"
    if pa.types.is_map(typ):
        return f"map<{to_ddl(typ.key_type)}, {to_ddl(typ.item_type)}>"
    if pa.types.is_list(typ):
        return f"array<{to_ddl(typ.value_type)}>"
    if pa.types.is_decimal(typ):
        return f"decimal({typ.precision},{typ.scale})"
    if pa.types.is_timestamp(typ):
        return "timestamp" if typ.tz else "timestamp_ntz"
    names: dict[pa.DataType, str] = {v: k for k, v in reversed(list(_SIMPLE.items()))}
    return names[typ]


def spark_type(typ: pa.DataType) -> DataType:
    """The Spark type of an Arrow type made by :func:`parse_ddl` (imports pyspark lazily)."""
    from pyspark.sql import types as t

    if pa.types.is_struct(typ):
        return t.StructType([t.StructField(f.name, spark_type(f.type), f.nullable) for f in typ])
    if pa.types.is_map(typ):
        return t.MapType(spark_type(typ.key_type), spark_type(typ.item_type), True)
    if pa.types.is_list(typ):
        return t.ArrayType(spark_type(typ.value_type), True)
    if pa.types.is_decimal(typ):
        return t.DecimalType(typ.precision, typ.scale)
    if pa.types.is_timestamp(typ):
        return t.TimestampType() if typ.tz else t.TimestampNTZType()
    simple: dict[pa.DataType, Any] = {
        pa.string(): t.StringType(), pa.binary(): t.BinaryType(), pa.bool_(): t.BooleanType(),
        pa.int8(): t.ByteType(), pa.int16(): t.ShortType(), pa.int32(): t.IntegerType(),
        pa.int64(): t.LongType(), pa.float32(): t.FloatType(), pa.float64(): t.DoubleType(),
        pa.date32(): t.DateType(),
    }  # fmt: skip
    if typ not in simple:
        raise DDLError(f"no Spark type for {typ}")
    found: DataType = simple[typ]
    return found


def arrow_value_type(fmt: ValueFormat, schema_ddl: str | None) -> pa.DataType | None:
    """The Arrow type of the ``value`` column (None for ``binary``: no column)."""
    if fmt is ValueFormat.BINARY:
        return None
    if fmt is ValueFormat.STRING:
        return pa.string()
    if schema_ddl is None:
        raise DDLError(f"valueFormat={fmt.value} needs a valueSchema")
    return parse_ddl(schema_ddl)


# -- decoding --------------------------------------------------------------------------------

DATA_ERRORS: tuple[type[BaseException], ...] = (
    pa.ArrowException, ValueError, TypeError, OverflowError, KeyError, ArithmeticError,
)  # fmt: skip


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


def _has_map(typ: pa.DataType) -> bool:
    if pa.types.is_map(typ):
        return True
    if pa.types.is_struct(typ):
        return any(_has_map(f.type) for f in typ)
    if pa.types.is_list(typ):
        return _has_map(typ.value_type)
    return False


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
        return pa.ListArray.from_arrays(_list_offsets(arr), flat, type=typ, mask=arr.is_null())
    return pc.cast(arr, typ)


def _list_offsets(arr: pa.Array) -> pa.Array:
    lengths = np.asarray(pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False))
    offsets = np.zeros(len(arr) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.array(offsets)


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
        python = _has_map(typ)

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
    from .msgpack_columns import decode_columns

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
        return _ns_to(ns, typ)
    if sample is None or isinstance(sample, dt.datetime):
        return pa.array(values, typ)
    text = pa.array(values, pa.string())
    try:
        return pc.cast(text, typ)
    except pa.ArrowInvalid:
        return pc.cast(pc.cast(text, pa.timestamp("us")), typ)  # no zone: UTC


def _ns_to(ns: pa.Array, typ: pa.DataType) -> pa.Array:
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


# -- encoding --------------------------------------------------------------------------------

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
        joined = pc.binary_join(pa.ListArray.from_arrays(_list_offsets(arr), flat), ",")
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
    if not _has_map(values.type):
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
