"""Typed values on the executors, and the poison-message policy (``onDecodeError``).

:class:`ValueStage` runs inside a source task: it decodes the ``body`` column of every pulled
Arrow batch into the ``value`` column (:mod:`rocketq.connector.values`) and decides what happens
to the messages that do not decode:

* ``fail`` (default): the task fails with :class:`DecodeError`, naming topic, broker, queue,
  queue offset, the error and the body's first bytes (hex and printable);
* ``null``: the row keeps a null ``value`` and the error in a ``decodeError`` column;
* ``skip``: the row is dropped, counted and logged;
* ``deadLetter``: the raw message, its origin and the error are sent to ``deadLetterTopic``
  (:mod:`rocketq.connector.deadletter`), and the row is dropped.  The send is confirmed by the broker before
  the batch is handed to Spark, so before the task ends and before the micro-batch's offsets
  can be committed: a failure anywhere makes Spark read the range again and send again.  A dead
  letter can therefore arrive more than once; the origin (topic, broker, queue, offset) is its
  deduplication key.

Counts.  Python data sources cannot report metrics into ``StreamingQueryProgress``; every task
logs its counts, and with ``decodeStatsPath`` writes them to ``<path>/<range digest>.json`` (one
file per task's queue ranges, so a re-executed task overwrites its own file).
:func:`rocketq.connector.deadletter.decode_stats` adds them up for a micro-batch's
``startOffset``/``endOffset``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.connector.errors import ConnectorError
from rocketq.connector.schema import ARROW_SCHEMA, COLUMN_NAMES
from rocketq.connector.values import (
    DATA_ERRORS,
    DDLError,
    Decoded,
    DecodeErrorPolicy,
    ValueFormat,
    arrow_value_type,
    decode_values,
    json_lines,
    parse_ddl,
    spark_type,
    to_ddl,
)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from rocketq.connector.options import SourceOptions
    from rocketq.connector.planning import QueueRange

log = logging.getLogger("rocketq.connector")

_PRINTABLE = frozenset(string.printable) - frozenset("\t\n\r\x0b\x0c")


# -- options ---------------------------------------------------------------------------------

SOURCE_VALUE_KEYS = frozenset(
    {
        "valueformat",
        "valueschema",
        "valueschemainference",
        "ondecodeerror",
        "deadlettertopic",
        "decodestatspath",
        "propertycolumns",
    }
)
SINK_VALUE_KEYS = frozenset({"valueformat"})
_POLICIES = {p.value.lower(): p for p in DecodeErrorPolicy}
MAX_INFERENCE_SAMPLE = 100_000


@dataclass(frozen=True, slots=True)
class ValueOptions:
    """``valueFormat``, ``valueSchema`` and the poison-message policy of a source (or a sink's format)."""

    value_format: ValueFormat = ValueFormat.BINARY
    #: DDL of the ``value`` column (json, msgpack); None for binary and string
    value_schema: str | None = None
    #: ``valueSchemaInference``: messages sampled by ``schema()`` when no valueSchema is given
    inference_sample: int | None = None
    on_decode_error: DecodeErrorPolicy = DecodeErrorPolicy.FAIL
    dead_letter_topic: str | None = None
    #: a directory (seen by the driver and the executors) receiving per-task decode counts
    stats_path: str | None = None
    #: ``propertyColumns``: message properties also given as top-level columns (pushable)
    property_columns: tuple[str, ...] = ()
    #: their types, ``string``, ``int``, ``bigint`` or ``double`` (parallel to property_columns)
    property_types: tuple[str, ...] = ()

    def property_map(self) -> dict[str, str]:
        """Property column name -> its type name."""
        return dict(zip(self.property_columns, self.property_types, strict=True))

    @property
    def typed(self) -> bool:
        return self.value_format is not ValueFormat.BINARY

    def extra_names(self) -> tuple[str, ...]:
        """The names of the columns after the fixed source schema."""
        value: tuple[str, ...] = ()
        if self.typed:
            value = ("value", "decodeError") if self.on_decode_error is DecodeErrorPolicy.NULL else ("value",)
        return value + self.property_columns

    def value_type(self) -> pa.DataType | None:
        return arrow_value_type(self.value_format, self.value_schema)

    def extra_fields(self) -> list[pa.Field]:
        """The columns after the fixed source schema: ``value`` and, for ``onDecodeError=null``,
        ``decodeError``."""
        typ = self.value_type()
        out = [] if typ is None else [pa.field("value", typ)]
        if typ is not None and self.on_decode_error is DecodeErrorPolicy.NULL:
            out.append(pa.field("decodeError", pa.string()))
        return out + [
            pa.field(name, PROPERTY_TYPES[t])
            for name, t in zip(self.property_columns, self.property_types, strict=True)
        ]


def _text(options: dict[str, str], key: str) -> str | None:
    value = options.get(key.lower())
    return None if value is None or not str(value).strip() else str(value).strip()


def _format(options: dict[str, str]) -> ValueFormat:
    from rocketq.connector.errors import OptionError

    text = _text(options, "valueFormat") or "binary"
    try:
        return ValueFormat(text.lower())
    except ValueError:
        known = ", ".join(f.value for f in ValueFormat)
        raise OptionError("valueFormat", f"expected one of {known}, got {text!r}") from None


def parse_value_options(options: dict[str, str], *, topics: tuple[str, ...] = ()) -> ValueOptions:
    """The value options of a source, from lower-cased options (errors name the option)."""
    from rocketq.connector.errors import OptionError

    fmt = _format(options)
    schema = _text(options, "valueSchema")
    sample_text = _text(options, "valueSchemaInference")
    sample = None
    if sample_text is not None:
        if not sample_text.isdigit() or not 1 <= int(sample_text) <= MAX_INFERENCE_SAMPLE:
            raise OptionError(
                "valueSchemaInference", f"expected 1..{MAX_INFERENCE_SAMPLE} messages, got {sample_text!r}"
            )
        sample = int(sample_text)
    if fmt in (ValueFormat.BINARY, ValueFormat.STRING) and (schema or sample):
        raise OptionError("valueSchema", f"only applies to valueFormat=json or msgpack, not {fmt.value}")
    if fmt in (ValueFormat.JSON, ValueFormat.MSGPACK):
        if schema is None and sample is None:
            raise OptionError(
                "valueSchema",
                f"valueFormat={fmt.value} needs the value's type: a DDL string such as "
                "'id bigint, name string', or valueSchemaInference=<messages to sample>",
            )
        if schema is not None:
            try:
                parse_ddl(schema)
            except DDLError as exc:
                raise OptionError("valueSchema", str(exc)) from None
    policy_text = _text(options, "onDecodeError") or "fail"
    policy = _POLICIES.get(policy_text.lower())
    if policy is None:
        known = ", ".join(p.value for p in DecodeErrorPolicy)
        raise OptionError("onDecodeError", f"expected one of {known}, got {policy_text!r}")
    dead = _text(options, "deadLetterTopic")
    if policy is DecodeErrorPolicy.DEAD_LETTER:
        from rocketq.connector.options import TOPIC_RE

        if dead is None:
            raise OptionError("deadLetterTopic", "required with onDecodeError=deadLetter")
        if not TOPIC_RE.match(dead) or len(dead) > 127:
            raise OptionError("deadLetterTopic", f"{dead!r} is not a valid RocketMQ topic name")
        if dead in topics:
            raise OptionError("deadLetterTopic", f"{dead!r} is a topic this query reads")
    elif dead is not None:
        raise OptionError("deadLetterTopic", "only applies to onDecodeError=deadLetter")
    if policy is not DecodeErrorPolicy.FAIL and fmt is ValueFormat.BINARY:
        raise OptionError("onDecodeError", "needs a valueFormat other than binary (binary never fails)")
    stats = _text(options, "decodeStatsPath")
    names, types = _property_columns(options)
    return ValueOptions(fmt, schema, sample, policy, dead, stats, names, types)


_PROPERTY_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
PROPERTY_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "double": pa.float64()
}  # fmt: skip
_TYPE_ALIASES = {"integer": "int", "long": "bigint"}


def _property_columns(options: dict[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``propertyColumns``: ``name[:type]`` items, each becoming a column of that name and type."""
    from rocketq.connector.errors import OptionError

    text = _text(options, "propertyColumns")
    if text is None:
        return (), ()
    names: list[str] = []
    types: list[str] = []
    for item in text.split(","):
        name, _, kind = (part.strip() for part in item.partition(":"))
        kind = _TYPE_ALIASES.get(kind.lower(), kind.lower()) or "string"
        if kind not in PROPERTY_TYPES:
            raise OptionError(
                "propertyColumns", f"{item.strip()!r}: the type must be one of {', '.join(PROPERTY_TYPES)}"
            )
        names.append(name)
        types.append(kind)
    taken = {c.lower(): c for c in (*COLUMN_NAMES, "value", "decodeError")}
    seen: set[str] = set()
    for name in names:
        if not _PROPERTY_NAME.match(name):
            raise OptionError(
                "propertyColumns",
                f"{name!r} is not a property name a column can have: letters, digits, '_' and '$', "
                "not starting with a digit (read other properties as properties['name'])",
            )
        if name.lower() in taken:
            raise OptionError(
                "propertyColumns",
                f"{name!r} would hide the column {taken[name.lower()]!r}; read it as properties['{name}']",
            )
        if name.lower() in seen:
            raise OptionError("propertyColumns", f"{name!r} is listed twice (column names ignore case)")
        seen.add(name.lower())
    return tuple(names), tuple(types)


_NUMBER_TEXT = {
    "int": "^[+-]?[0-9]+$",  # Java's Long.valueOf, so a broker's SQL92 reads the same numbers
    "bigint": "^[+-]?[0-9]+$",
    "double": "^[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?$",  # a subset of Double.valueOf
}


def typed_property(text: pa.Array, kind: str) -> pa.Array:
    """A property column of ``kind`` from its strings: null where the text is not such a number."""
    typ = PROPERTY_TYPES[kind]
    if kind == "string":
        return text
    valid = pc.fill_null(pc.match_substring_regex(text, _NUMBER_TEXT[kind]), False)
    cleaned = pc.if_else(valid, text, pa.scalar(None, pa.string()))
    try:
        return pc.cast(cleaned, typ)
    except pa.ArrowInvalid:  # out of range: those values become null
        values = []
        for v in cleaned.to_pylist():
            number = None if v is None else (int(v) if kind != "double" else float(v))
            values.append(number if kind == "double" or _fits(number, typ) else None)
        return pa.array(values, typ)


def _fits(number: int | float | None, typ: pa.DataType) -> bool:
    bits = typ.bit_width
    return number is not None and -(2 ** (bits - 1)) <= number < 2 ** (bits - 1)


def parse_sink_value_format(options: dict[str, str]) -> ValueFormat:
    """The sink's ``valueFormat`` (the format the ``value`` column is written in)."""
    return _format(options)


def source_schema(opts: SourceOptions) -> StructType:
    """The source schema: the fixed columns, then ``value`` (and ``decodeError``); with
    ``valueSchemaInference`` the value type is inferred from a sample of the topics' messages."""
    from pyspark.sql.types import StructField

    from rocketq.connector.schema import spark_schema

    values = opts.values
    schema = spark_schema()
    if values.typed and values.value_schema is None and values.value_format is not ValueFormat.STRING:
        values = dataclasses.replace(values, value_schema=infer_value_schema(opts))
    for f in values.extra_fields():
        schema.add(StructField(f.name, spark_type(f.type), True))
    return schema


def infer_value_schema(opts: SourceOptions) -> str:
    """``valueSchemaInference``: the DDL of the newest sampled messages that decode."""
    from rocketq.connector.errors import OptionError
    from rocketq.connector.reader import sample_bodies

    values = opts.values
    assert values.inference_sample is not None
    sample = sample_bodies(opts, values.inference_sample)
    typ = infer_type(sample, values.value_format)
    if typ is None:
        raise OptionError(
            "valueSchemaInference",
            f"none of the {len(sample)} sampled messages decodes as {values.value_format.value}; "
            "give valueSchema (a DDL string) instead",
        )
    ddl = to_ddl(typ)
    log.warning(
        "rocketmq source: value schema inferred from %d messages: %s (set valueSchema to pin it)",
        len(sample),
        ddl,
    )
    return ddl


def with_value_schema(opts: SourceOptions, schema: StructType) -> SourceOptions:
    """``opts`` checked against the schema Spark settled on, taking the ``value`` type from it
    (the inferred type, or the user's ``.schema(...)``)."""
    from rocketq.connector.errors import OptionError
    from rocketq.connector.schema import COLUMN_NAMES

    values = opts.values
    names = tuple(schema.fieldNames())[len(COLUMN_NAMES) :]
    wanted = values.extra_names()
    if names != wanted:
        raise OptionError(
            "schema",
            f"after the fixed columns the schema must have {', '.join(wanted) or 'nothing'} "
            f"(valueFormat={values.value_format.value}, onDecodeError={values.on_decode_error.value}); "
            f"got {', '.join(names) or 'nothing'}",
        )
    if values.typed and values.value_format is not ValueFormat.STRING:
        from pyspark.sql.pandas.types import to_arrow_type

        ddl = to_ddl(to_arrow_type(schema["value"].dataType, timezone="UTC"))
        return dataclasses.replace(opts, values=dataclasses.replace(values, value_schema=ddl))
    return opts


# -- inference -------------------------------------------------------------------------------


def _sparkable(typ: pa.DataType) -> pa.DataType:
    """The nearest type :func:`spark_type` knows of an inferred Arrow type."""
    if pa.types.is_struct(typ):
        return pa.struct([pa.field(f.name, _sparkable(f.type)) for f in typ])
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pa.list_(pa.field("element", _sparkable(typ.value_type)))
    if pa.types.is_map(typ):
        return pa.map_(
            pa.field("key", _sparkable(typ.key_type), False), pa.field("value", _sparkable(typ.item_type))
        )
    if pa.types.is_timestamp(typ):
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_integer(typ):
        return pa.int64()
    if pa.types.is_floating(typ):
        return pa.float64()
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return pa.binary()
    if pa.types.is_boolean(typ) or pa.types.is_date32(typ) or pa.types.is_decimal(typ):
        return typ
    return pa.string()  # strings, and fields that were null in every sampled message


def _unified(items: list[Any], infer: Callable[[list[Any]], pa.DataType]) -> pa.DataType:
    """One type for ``items``: ``infer`` of all of them, or, when they disagree (a field that is
    a number here and a string there), the types of the halves, merged largest first; a part
    that contradicts the larger ones is left out."""
    found: list[tuple[int, pa.DataType]] = []

    def go(lo: int, hi: int) -> None:
        try:
            found.append((hi - lo, infer(items[lo:hi])))
        except DATA_ERRORS:
            if hi - lo > 1:
                go(lo, (lo + hi) // 2)
                go((lo + hi) // 2, hi)

    go(0, len(items))
    merged: pa.Schema | None = None
    for _, typ in sorted(found, key=lambda f: -f[0]):
        one = pa.schema([pa.field("v", typ)])
        try:
            merged = one if merged is None else pa.unify_schemas([merged, one], promote_options="permissive")
        except DATA_ERRORS:
            continue
    return pa.null() if merged is None else merged.field("v").type


def _json_type(bodies: list[bytes]) -> pa.DataType:
    import pyarrow.json as pj

    table = pj.read_json(pa.BufferReader(json_lines(pa.array(bodies, pa.binary()))))
    return table.schema.field("v").type


def infer_type(bodies: pa.Array, fmt: ValueFormat) -> pa.DataType | None:
    """The value type of the sampled ``bodies`` that decode (None when none does)."""
    good: list[Any] = []
    if fmt is ValueFormat.JSON:
        for body in bodies.to_pylist():
            try:
                json.loads(body)
            except ValueError:
                continue
            good.append(body)
        return _sparkable(_unified(good, _json_type)) if good else None
    if fmt is ValueFormat.MSGPACK:
        import msgpack

        for body in bodies.to_pylist():
            try:
                good.append(msgpack.unpackb(body, raw=False, timestamp=3, strict_map_key=False))
            except DATA_ERRORS:
                continue
        return _sparkable(_unified(good, lambda objects: pa.array(objects).type)) if good else None
    return None


class DecodeError(ConnectorError):
    """A message body does not decode in ``valueFormat`` (with ``onDecodeError=fail``)."""


def describe_body(body: bytes, width: int = 32) -> str:
    """The first bytes of a body, as hex and as printable text (``.`` for the rest)."""
    head = body[:width]
    text = "".join(c if c in _PRINTABLE else "." for c in head.decode("latin-1"))
    more = f" ... ({len(body)} bytes)" if len(body) > width else f" ({len(body)} bytes)"
    return f"{head.hex(' ')} |{text}|{more}"


def output_schema(values: ValueOptions) -> pa.Schema:
    """The Arrow schema of the batches a source task yields."""
    return pa.schema(list(ARROW_SCHEMA) + values.extra_fields())


@dataclass
class DecodeCounts:
    """What one task decoded."""

    rows: int = 0
    failed: int = 0
    first_error: str | None = None
    per_queue: dict[str, int] = field(default_factory=dict)


class ValueStage:
    """Adds ``value`` (and ``decodeError``) to the batches of one task and applies the policy."""

    def __init__(self, opts: SourceOptions, ranges: Iterable[QueueRange] = ()) -> None:
        self.opts = opts
        self.values = opts.values
        self.typ = self.values.value_type()
        self.schema = output_schema(self.values)
        self.ranges = list(ranges)
        self.counts = DecodeCounts()

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.typ is None:
            return self._with(batch, None, None) if self.values.property_columns else batch
        if batch.num_rows == 0:
            return self._with(batch, pa.array([], self.typ), None)
        decoded = decode_values(batch.column("body"), self.values.value_format, self.typ)
        self.counts.rows += batch.num_rows
        errors = None
        if decoded.errors:
            self._count(batch, decoded)
            policy = self.values.on_decode_error
            if policy is DecodeErrorPolicy.FAIL:
                raise self._fail(batch, decoded)
            if policy is DecodeErrorPolicy.NULL:
                errors = decoded.error_column()
            else:
                if policy is DecodeErrorPolicy.DEAD_LETTER:
                    from rocketq.connector.deadletter import send_dead_letters

                    send_dead_letters(self.opts, batch, decoded)
                keep = np.ones(batch.num_rows, dtype=bool)
                keep[decoded.bad_rows()] = False
                mask = pa.array(keep)
                return self._with(batch.filter(mask), decoded.values.filter(mask), None)
        elif self.values.on_decode_error is DecodeErrorPolicy.NULL:
            errors = pa.nulls(batch.num_rows, pa.string())
        return self._with(batch, decoded.values, errors)

    def _with(
        self, batch: pa.RecordBatch, values: pa.Array | None, errors: pa.Array | None
    ) -> pa.RecordBatch:
        columns = [*batch.columns]
        if values is not None:
            columns.append(values)
            if self.values.on_decode_error is DecodeErrorPolicy.NULL:
                columns.append(errors if errors is not None else pa.nulls(len(values), pa.string()))
        if self.values.property_columns:
            properties = batch.column("properties")
            for name, kind in zip(self.values.property_columns, self.values.property_types, strict=True):
                text = pc.map_lookup(properties, pa.scalar(name, pa.string()), "first")
                columns.append(typed_property(text, kind))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def _count(self, batch: pa.RecordBatch, decoded: Decoded) -> None:
        c = self.counts
        c.failed += len(decoded.errors)
        if c.first_error is None:
            c.first_error = self._where(batch, decoded)
        key = f"{batch.column('topic')[0].as_py()}/{batch.column('brokerName')[0].as_py()}"
        queue_ids = batch.column("queueId").to_numpy()[decoded.bad_rows()]
        for qid, n in zip(*np.unique(queue_ids, return_counts=True), strict=True):
            c.per_queue[f"{key}:{qid}"] = c.per_queue.get(f"{key}:{qid}", 0) + int(n)

    def _where(self, batch: pa.RecordBatch, decoded: Decoded) -> str:
        row = int(decoded.bad_rows()[0])
        topic, broker = batch.column("topic")[row].as_py(), batch.column("brokerName")[row].as_py()
        qid, offset = batch.column("queueId")[row].as_py(), batch.column("queueOffset")[row].as_py()
        body = batch.column("body")[row].as_py()
        return (
            f"topic {topic} broker {broker} queue {qid} queueOffset {offset}: {decoded.errors[row]}; "
            f"body: {describe_body(body)}"
        )

    def _fail(self, batch: pa.RecordBatch, decoded: Decoded) -> DecodeError:
        fmt = self.values.value_format.value
        return DecodeError(
            f"cannot decode a message as valueFormat={fmt}: {self._where(batch, decoded)} "
            f"({len(decoded.errors)} of {batch.num_rows} messages of this pull failed; "
            "set onDecodeError=null, skip or deadLetter to continue past such messages)"
        )

    def finish(self) -> None:
        """Log the task's counts and write them to ``decodeStatsPath``."""
        c = self.counts
        if c.failed:
            log.warning(
                "rocketmq source: %d of %d messages did not decode as %s (onDecodeError=%s%s); first: %s",
                c.failed,
                c.rows,
                self.values.value_format.value,
                self.values.on_decode_error.value,
                f", to {self.values.dead_letter_topic}" if self.values.dead_letter_topic else "",
                c.first_error,
            )
        if self.values.stats_path and self.typ is not None and self.ranges:
            from rocketq.connector.deadletter import write_stats

            write_stats(self.values.stats_path, self.ranges, self.values, c)
