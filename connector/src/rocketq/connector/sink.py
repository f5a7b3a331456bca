"""The ``rocketmq`` sink: Spark writer classes and the validation of the written columns.

Accepted columns (any order; unknown columns are rejected when the query starts)::

    body         string | binary              required, not null
    topic        string                       ignored when the 'topic' option is set (the option wins)
    tags         string
    keys         string (space-separated) | array<string>
    properties   map<string,string>           user properties (system keys are dropped)
    shardingKey  string                       routing key (default: the first key)
    queueId      int | bigint                 explicit queue (index into the writable queues)

With ``deliveryGuarantee=exactlyOnce`` the tasks send half messages and ``commit`` ends exactly the
transactions of the accepted attempts, through the sink's durable commit record
(:mod:`rocketq.connector.transactional`, docs/exactly-once.md).

Both writers are Arrow writers (``DataSourceArrowWriter`` / ``DataSourceStreamArrowWriter``): the
executor receives ``pyarrow.RecordBatch``\\ es and never builds a Python object per row.  The
driver-side ``commit`` only aggregates the tasks' :class:`SinkCommitMessage`\\ s (messages were
confirmed by the broker inside ``write()``) in at-least-once mode.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
    StructField,
    StructType,
)

from rocketq.connector.errors import OptionError
from rocketq.connector.sink_options import SinkOptions, parse_sink_options, require_sink_id
from rocketq.connector.value_types import ValueFormat

if TYPE_CHECKING:
    from rocketq.connector.commit_log import HalfBatch
    from rocketq.connector.writer import SendStrategy

# The writer (numpy, the encoders, the client producer) is imported by write() only: Spark builds
# a writer in a planning worker and another for every commit on the driver, processes that only
# validate options and aggregate commit messages (docs/performance.md, time to the first
# micro-batch).

log = logging.getLogger("rocketq.connector")

_STRING_ARRAY = ArrayType(StringType(), True)


def _accepts(name: str, dtype: DataType) -> bool:
    if name == "body":
        return isinstance(dtype, (StringType, BinaryType))
    if name in ("topic", "tags", "shardingKey"):
        return isinstance(dtype, StringType)
    if name == "keys":
        return isinstance(dtype, StringType) or (
            isinstance(dtype, ArrayType) and isinstance(dtype.elementType, StringType)
        )
    if name == "properties":
        return (
            isinstance(dtype, MapType)
            and isinstance(dtype.keyType, StringType)
            and isinstance(dtype.valueType, StringType)
        )
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


def value_as_body(schema: StructType, opts: SinkOptions) -> StructType:
    """The written schema with ``value`` standing for the binary body it is encoded into; a clear
    error for a ``value`` without ``valueFormat``, for both ``body`` and ``value``, and for a
    type the format cannot write."""
    names = schema.fieldNames()
    fmt = opts.value_format
    if "value" not in names:
        if fmt is not ValueFormat.BINARY:
            raise OptionError(
                "valueFormat", f"valueFormat={fmt.value} encodes a 'value' column; there is none"
            )
        return schema
    if fmt is ValueFormat.BINARY:
        raise OptionError(
            "columns",
            "unknown column 'value' with valueFormat=binary: set valueFormat=json, msgpack or string "
            "to encode it into the body, or write the raw bytes as 'body'",
        )
    if "body" in names:
        raise OptionError(
            "columns",
            "write either 'body' (the raw message body) or 'value' (encoded with valueFormat), not both",
        )
    value_type = schema["value"].dataType
    if fmt is ValueFormat.STRING and not isinstance(value_type, StringType):
        raise OptionError(
            "valueFormat", f"valueFormat=string writes a string 'value', not {value_type.simpleString()}"
        )
    if fmt is ValueFormat.JSON and "binary" in value_type.simpleString():
        raise OptionError("valueFormat", "valueFormat=json cannot write binary fields; use msgpack")
    fields = [StructField("body", BinaryType(), False) if f.name == "value" else f for f in schema.fields]
    return StructType(fields)


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Raise :class:`OptionError` for unknown, mistyped or missing columns."""
    schema = value_as_body(schema, opts)  # a 'value' column (valueFormat) is written as the body
    names = [f.name for f in schema.fields]
    unknown = [n for n in names if n not in SINK_COLUMNS]
    if unknown:
        allowed = ", ".join(f"{k} ({v})" for k, v in SINK_COLUMNS.items())
        raise OptionError(
            "columns", f"unknown column(s) {', '.join(unknown)}; the rocketmq sink accepts: {allowed}"
        )
    for f in schema.fields:
        if not _accepts(f.name, f.dataType):
            raise OptionError(
                "columns",
                f"column '{f.name}' has type {f.dataType.simpleString()}, expected {SINK_COLUMNS[f.name]}",
            )
    if "body" not in names:
        raise OptionError("columns", "a 'body' column (string or binary) is required")
    if "topic" not in names and opts.topic is None:
        raise OptionError("topic", "required: set the 'topic' option or write a 'topic' column")


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task sent (all of it confirmed by the brokers before the task returned)."""

    rows: int
    requests: int
    per_queue: dict[str, int] = field(default_factory=dict)
    strategy: dict[str, Any] = field(default_factory=dict)
    #: exactly-once: the half batches this attempt stored, in send order per queue
    handles: list[HalfBatch] = field(default_factory=list)


def make_strategy(opts: SinkOptions, batch: str | None = None) -> SendStrategy:
    """The send strategy of a task (``batch``: the job key of an exactly-once batch write)."""
    if not opts.exactly_once:
        from rocketq.connector.writer import AtLeastOnceStrategy

        return AtLeastOnceStrategy(opts)
    from rocketq.connector.transactional import ExactlyOnceStrategy, WriteIdentity

    return ExactlyOnceStrategy(opts, WriteIdentity.current(require_sink_id(opts), batch))


def _write(
    opts: SinkOptions, iterator: Iterator[pa.RecordBatch], batch: str | None = None
) -> SinkCommitMessage:
    from rocketq.connector.profiling import profiled
    from rocketq.connector.writer import write_batches

    with profiled("write"):
        strategy = make_strategy(opts, batch)
        state = write_batches(opts, iterator, strategy)
    handles = list(getattr(strategy, "handles", []))
    return SinkCommitMessage(state.rows, state.requests, dict(state.per_queue), strategy.summary(), handles)


def _handles(messages: list[WriterCommitMessage | None]) -> list[HalfBatch]:
    return [h for m in messages if isinstance(m, SinkCommitMessage) for h in m.handles]


def _eos_commit(opts: SinkOptions, messages: list[WriterCommitMessage | None], batch: str) -> None:
    from rocketq.connector.profiling import profiled
    from rocketq.connector.transactional import commit_batch

    with profiled("commit"):
        committed, rolled_back = commit_batch(opts, require_sink_id(opts), batch, _handles(messages))
    log.info("rocketmq sink %s: batch %s committed exactly once: %d messages (%d replayed rolled back)",
             opts.sink_id, batch, committed, rolled_back)  # fmt: skip


def _eos_abort(opts: SinkOptions, messages: list[WriterCommitMessage | None], batch: str) -> None:
    from rocketq.connector.transactional import abort_batch

    abort_batch(opts, require_sink_id(opts), batch, _handles(messages))
    log.warning("rocketmq sink %s: batch %s aborted; its half messages are rolled back", opts.sink_id, batch)


def _total(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    rows = sum(m.rows for m in messages if isinstance(m, SinkCommitMessage))
    requests = sum(m.requests for m in messages if isinstance(m, SinkCommitMessage))
    return rows, requests


class _SinkBase:
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_sink_options(options)
        validate_sink_schema(schema, self.opts)


class RocketMQStreamWriter(_SinkBase, DataSourceStreamArrowWriter):
    """``writeStream.format("rocketmq")``: at-least-once (default) or exactly-once, per-queue ordered."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        if self.opts.exactly_once:
            require_sink_id(self.opts)  # fail at start, naming the option

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            _eos_commit(self.opts, messages, str(batchId))
            return
        rows, requests = _total(messages)
        log.info("rocketmq sink: batch %d committed, %d messages in %d requests", batchId, rows, requests)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            _eos_abort(self.opts, messages, str(batchId))
            return
        rows, _ = _total(messages)
        log.warning(
            "rocketmq sink: batch %d aborted; %d messages were already delivered (at-least-once)",
            batchId,
            rows,
        )


class RocketMQBatchWriter(_SinkBase, DataSourceArrowWriter):
    """``df.write.format("rocketmq")``: append only; per-queue ordered; exactly-once = all or nothing.

    Spark reuses the planning-time writer for commit/abort, so the job key made here reaches both
    the tasks and the commit."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        if self.opts.exactly_once and self.opts.sink_id is None:
            import dataclasses

            self.opts = dataclasses.replace(self.opts, sink_id="batchwrites")
        self.job = f"job-{uuid.uuid4().hex[:16]}"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return _write(self.opts, iterator, self.job)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            _eos_commit(self.opts, messages, self.job)
            return
        rows, requests = _total(messages)
        log.info("rocketmq sink: write committed, %d messages in %d requests", rows, requests)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            _eos_abort(self.opts, messages, self.job)
            return
        rows, _ = _total(messages)
        log.warning("rocketmq sink: write aborted; %d messages were already delivered (at-least-once)", rows)
