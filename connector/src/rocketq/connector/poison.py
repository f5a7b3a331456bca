"""The executor's value stage: typed values of pulled batches, and the poison-message policy.

:class:`ValueStage` runs inside a source task: it decodes the ``body`` column of every pulled
Arrow batch into the ``value`` column (:mod:`rocketq.connector.values`), adds the
``propertyColumns``, and decides what happens to the messages that do not decode
(``onDecodeError``):

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
``startOffset``/``endOffset``.  The value type a source declares is settled on the driver
(:mod:`rocketq.connector.value_schema`).
"""

from __future__ import annotations

import logging
import string
from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.connector.deadletter import DeadLetterSink, DecodeCounts, write_stats
from rocketq.connector.errors import ConnectorError
from rocketq.connector.options import PROPERTY_TYPES, SourceOptions, ValueOptions
from rocketq.connector.planning import QueueRange
from rocketq.connector.schema import ARROW_SCHEMA
from rocketq.connector.value_types import DecodeErrorPolicy
from rocketq.connector.values import Decoded, decode_values

log = logging.getLogger("rocketq.connector")

_PRINTABLE = frozenset(string.printable) - frozenset("\t\n\r\x0b\x0c")


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


class ValueStage:
    """Adds ``value`` (and ``decodeError``) to the batches of one task and applies the policy."""

    def __init__(self, opts: SourceOptions, ranges: Iterable[QueueRange] = ()) -> None:
        self.opts = opts
        self.values = opts.values
        self.typ = self.values.value_type()
        self.schema = output_schema(self.values)
        self.ranges = list(ranges)
        self.counts = DecodeCounts()
        dead_letters = opts.dead_letter_sink()
        self.dead_letters = None if dead_letters is None else DeadLetterSink(dead_letters)

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
                    assert self.dead_letters is not None  # options: deadLetterTopic goes with deadLetter
                    self.dead_letters.send(batch, decoded)
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
            write_stats(self.values.stats_path, self.ranges, self.values, c)
