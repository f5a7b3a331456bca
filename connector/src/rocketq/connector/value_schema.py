"""The type of a source's ``value`` column, settled on the driver at ``schema()`` time.

:func:`source_schema` is the schema a source declares: the fixed columns, then ``value`` (and
``decodeError``) and the ``propertyColumns``.  Without a ``valueSchema``, ``valueSchemaInference``
samples the newest messages of the topics (:func:`rocketq.connector.reader.sample_bodies`) and
infers the value type from the ones that decode (:func:`infer_type`): JSON through pyarrow's
reader, msgpack through pyarrow's inference over the unpacked objects, both widened to types
Spark has.  :func:`with_value_schema` then takes the value type from the schema Spark settled on
(the inferred one, or the user's ``.schema(...)``), so the executors decode into exactly it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any

import msgpack
import pyarrow as pa
import pyarrow.json as pj
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructField, StructType

from rocketq.connector.errors import OptionError
from rocketq.connector.options import SourceOptions
from rocketq.connector.schema import COLUMN_NAMES, spark_schema
from rocketq.connector.value_arrays import DATA_ERRORS
from rocketq.connector.value_types import ValueFormat, spark_type, to_ddl

log = logging.getLogger("rocketq.connector")


def source_schema(opts: SourceOptions) -> StructType:
    """The source schema: the fixed columns, then ``value`` (and ``decodeError``); with
    ``valueSchemaInference`` the value type is inferred from a sample of the topics' messages."""
    values = opts.values
    schema = spark_schema()
    if values.typed and values.value_schema is None and values.value_format is not ValueFormat.STRING:
        values = dataclasses.replace(values, value_schema=infer_value_schema(opts))
    for f in values.extra_fields():
        schema.add(StructField(f.name, spark_type(f.type), True))
    return schema


def infer_value_schema(opts: SourceOptions) -> str:
    """``valueSchemaInference``: the DDL of the newest sampled messages that decode."""
    from rocketq.connector.reader import sample_bodies  # the broker client: only when inferring

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
        ddl = to_ddl(to_arrow_type(schema["value"].dataType, timezone="UTC"))
        return dataclasses.replace(opts, values=dataclasses.replace(values, value_schema=ddl))
    return opts


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
    from rocketq.connector.values import json_lines

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
        for body in bodies.to_pylist():
            try:
                good.append(msgpack.unpackb(body, raw=False, timestamp=3, strict_map_key=False))
            except DATA_ERRORS:
                continue
        return _sparkable(_unified(good, lambda objects: pa.array(objects).type)) if good else None
    return None
