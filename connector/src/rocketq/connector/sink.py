"""The ``rocketmq`` sink: Spark writer classes and the validation of the written columns.

Accepted columns (any order; unknown columns are rejected when the query starts)::

    body         string | binary              required, not null
    topic        string                       else the 'topic' option (the column wins when set)
    tags         string
    keys         string (space-separated) | array<string>
    properties   map<string,string>           user properties
    shardingKey  string                       routing key (default: the first key)
    queueId      int | bigint                 explicit queue (index into the writable queues)

Both writers are Arrow writers (``DataSourceArrowWriter`` / ``DataSourceStreamArrowWriter``): the
executor receives ``pyarrow.RecordBatch``\\ es and never builds a Python object per row.  The
driver-side ``commit`` only aggregates the tasks' :class:`SinkCommitMessage`\\ s (messages were
confirmed by the broker inside ``write()``); it is where a transactional strategy will commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
)
from rocketq.connector.errors import OptionError
from rocketq.connector.options import SinkOptions, parse_sink_options
from rocketq.connector.writer import AtLeastOnceStrategy, SendStrategy, TaskState, write_batches

log = logging.getLogger("rocketq.connector")

_STRING_ARRAY = ArrayType(StringType(), True)


def _accepts(name: str, dtype: DataType) -> bool:
    if name == "body":
        return isinstance(dtype, (StringType, BinaryType))
    if name in ("topic", "tags", "shardingKey"):
        return isinstance(dtype, StringType)
    if name == "keys":
        return isinstance(dtype, StringType) or (isinstance(dtype, ArrayType) and isinstance(dtype.elementType, StringType))
    if name == "properties":
        return isinstance(dtype, MapType) and isinstance(dtype.keyType, StringType) and isinstance(dtype.valueType, StringType)
    if name == "queueId":
        return isinstance(dtype, (IntegerType, LongType))
    return False


SINK_COLUMNS: dict[str, str] = {
    "body": "string or binary (required)",
    "topic": "string",
    "tags": "string",
    "keys": "string or array<string>",
    "properties": "map<string,string>",
    "shardingKey": "string",
    "queueId": "int or bigint",
}


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Raise :class:`OptionError` for unknown, mistyped or missing columns."""
    names = [f.name for f in schema.fields]
    unknown = [n for n in names if n not in SINK_COLUMNS]
    if unknown:
        allowed = ", ".join(f"{k} ({v})" for k, v in SINK_COLUMNS.items())
        raise OptionError(
            "columns", f"unknown column(s) {', '.join(unknown)}; the rocketmq sink accepts: {allowed}"
        )
    for f in schema.fields:
        if not _accepts(f.name, f.dataType):
            raise OptionError("columns", f"column '{f.name}' has type {f.dataType.simpleString()}, expected {SINK_COLUMNS[f.name]}")
    if "body" not in names:
        raise OptionError("columns", "a 'body' column (string or binary) is required")
    if "topic" not in names and opts.topic is None:
        raise OptionError("topic", "required: set the 'topic' option or write a 'topic' column")


@dataclass
class SinkCommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one task sent (all of it confirmed by the brokers before the task returned)."""

    rows: int
    requests: int
    per_queue: dict[str, int] = field(default_factory=dict)
    strategy: dict[str, Any] = field(default_factory=dict)


def make_strategy(opts: SinkOptions) -> SendStrategy:
    return AtLeastOnceStrategy(opts)


def _write(opts: SinkOptions, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    strategy = make_strategy(opts)
    state: TaskState = write_batches(opts, iterator, strategy)
    return SinkCommitMessage(state.rows, state.requests, dict(state.per_queue), strategy.summary())


def _total(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    rows = sum(m.rows for m in messages if isinstance(m, SinkCommitMessage))
    requests = sum(m.requests for m in messages if isinstance(m, SinkCommitMessage))
    return rows, requests


class _SinkBase:
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        validate_sink_schema(schema, self.opts)


class RocketMQStreamWriter(_SinkBase, DataSourceStreamArrowWriter):  # type: ignore[misc]
    """``writeStream.format("rocketmq")``: at-least-once, per-queue ordered."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows, requests = _total(messages)
        log.info("rocketmq sink: batch %d committed, %d messages in %d requests", batchId, rows, requests)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows, _ = _total(messages)
        log.warning("rocketmq sink: batch %d aborted; %d messages were already delivered (at-least-once)", batchId, rows)


class RocketMQBatchWriter(_SinkBase, DataSourceArrowWriter):  # type: ignore[misc]
    """``df.write.format("rocketmq")``: append only; at-least-once, per-queue ordered."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, requests = _total(messages)
        log.info("rocketmq sink: write committed, %d messages in %d requests", rows, requests)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        rows, _ = _total(messages)
        log.warning("rocketmq sink: write aborted; %d messages were already delivered (at-least-once)", rows)
