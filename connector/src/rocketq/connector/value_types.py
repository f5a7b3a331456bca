"""Value formats and value schemas: ``valueFormat``, ``onDecodeError``, and Spark DDL types.

A value schema is a Spark DDL string (``"id bigint, tags array<string>, at timestamp"``), parsed
here into the Arrow type Spark expects for it (:func:`parse_ddl`, pure Python: the Python data
source workers have no JVM to ask), written back as DDL (:func:`to_ddl`) and turned into a Spark
type for ``schema()`` (:func:`spark_type`).  The codecs that use these types are
:mod:`rocketq.connector.values` (decoding) and :mod:`rocketq.connector.value_encoding`.
"""

from __future__ import annotations

import enum
import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa

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


def has_map(typ: pa.DataType) -> bool:
    """Whether ``typ`` holds a map anywhere (pyarrow's JSON reader cannot produce maps)."""
    if pa.types.is_map(typ):
        return True
    if pa.types.is_struct(typ):
        return any(has_map(f.type) for f in typ)
    if pa.types.is_list(typ):
        return has_map(typ.value_type)
    return False
