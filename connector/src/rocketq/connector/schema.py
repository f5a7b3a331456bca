"""The source's row schema, as a Spark ``StructType`` and as the exact Arrow schema.

``read()`` yields ``pyarrow.RecordBatch``es, and Spark accepts them only if their schema *equals*
``to_arrow_schema(spark_schema, timezone="UTC")``: same column order, ``timestamp[us, tz=UTC]``,
``binary`` (not ``large_binary``), same nullability.  :data:`ARROW_SCHEMA` is written out by hand
(pyarrow only, importable without Spark) and a unit test checks it against Spark's conversion of
:func:`spark_schema`.

Columns, in order::

    topic string, brokerName string, queueId int, queueOffset bigint, msgId string,
    uniqKey string, tags string, keys array<string>, body binary, properties map<string,string>,
    bornTimestamp timestamp, storeTimestamp timestamp, bornHost string, storeHost string,
    reconsumeTimes int, flag int, sysFlag int

``msgId`` is the offset message id (store host + CommitLog offset, 32 upper-case hex digits);
``uniqKey`` the producer's client id (``UNIQ_KEY``).  ``properties`` holds every property of the
message, system ones (``TAGS``, ``KEYS``, ``UNIQ_KEY`` ...) included.  With ``valueFormat`` a
typed ``value`` column (and ``decodeError`` with ``onDecodeError=null``) follows these
(:mod:`rocketq.connector.poison`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

# (name, arrow type, nullable); the Spark types are derived from the same table.
_COLUMNS: tuple[tuple[str, Any, bool], ...] = (
    ("topic", pa.string(), False),
    ("brokerName", pa.string(), False),
    ("queueId", pa.int32(), False),
    ("queueOffset", pa.int64(), False),
    ("msgId", pa.string(), False),
    ("uniqKey", pa.string(), True),
    ("tags", pa.string(), True),
    ("keys", pa.list_(pa.string()), True),
    ("body", pa.binary(), False),
    ("properties", pa.map_(pa.string(), pa.string()), False),
    ("bornTimestamp", pa.timestamp("us", tz="UTC"), False),
    ("storeTimestamp", pa.timestamp("us", tz="UTC"), False),
    ("bornHost", pa.string(), False),
    ("storeHost", pa.string(), False),
    ("reconsumeTimes", pa.int32(), False),
    ("flag", pa.int32(), False),
    ("sysFlag", pa.int32(), False),
)

COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _, _ in _COLUMNS)
ARROW_SCHEMA: pa.Schema = pa.schema(
    [pa.field(name, typ, nullable=nullable) for name, typ, nullable in _COLUMNS]
)

DDL = (
    "topic string not null, brokerName string not null, queueId int not null, queueOffset bigint not null, "
    "msgId string not null, uniqKey string, tags string, keys array<string>, body binary not null, "
    "properties map<string,string> not null, bornTimestamp timestamp not null, "
    "storeTimestamp timestamp not null, bornHost string not null, storeHost string not null, "
    "reconsumeTimes int not null, flag int not null, sysFlag int not null"
)


def spark_schema() -> StructType:
    """The source schema as a Spark StructType (imports pyspark lazily)."""
    from pyspark.sql import types as t

    def spark_type(arrow_type: Any) -> Any:
        if pa.types.is_string(arrow_type):
            return t.StringType()
        if arrow_type == pa.int32():
            return t.IntegerType()
        if arrow_type == pa.int64():
            return t.LongType()
        if pa.types.is_binary(arrow_type):
            return t.BinaryType()
        if pa.types.is_timestamp(arrow_type):
            return t.TimestampType()
        if pa.types.is_map(arrow_type):
            return t.MapType(t.StringType(), t.StringType(), True)
        if pa.types.is_list(arrow_type):
            return t.ArrayType(t.StringType(), True)
        raise TypeError(f"no Spark type for {arrow_type}")  # pragma: no cover

    return t.StructType([t.StructField(name, spark_type(typ), nullable) for name, typ, nullable in _COLUMNS])


def check_requested_schema(schema: Any) -> None:
    """Reject a user ``.schema(...)`` that differs from the fixed source schema (by field names)."""
    from rocketq.connector.errors import OptionError

    names = tuple(getattr(schema, "fieldNames", lambda: [])())
    if names[: len(COLUMN_NAMES)] == COLUMN_NAMES:
        return  # the columns after them (value, propertyColumns) are checked by rocketq.connector.poison
    if names and names != COLUMN_NAMES:
        raise OptionError(
            "schema",
            f"the rocketmq source has a fixed schema ({', '.join(COLUMN_NAMES)}); got {', '.join(names)}",
        )
