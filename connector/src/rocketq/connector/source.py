"""The ``rocketmq`` data source: the DataSource class, the streaming reader and the batch reader.

Where things run (see shared/reference/pyspark-datasource-api.md): ``initialOffset``,
``latestOffset``, ``partitions`` and ``commit`` run on the driver in one long-lived Python process
per query run, on one reader object, which therefore keeps a :class:`BrokerAccess` and the memo of
the initial offsets (Spark calls ``initialOffset`` twice).  ``read`` runs on executors on a
*pickled copy* of a second reader: it uses only the partition and the options.

Offsets are :class:`OffsetMap`\\ s serialised canonically; ``latestOffset`` returns ``start``
itself when nothing is new, so Spark does not run empty micro-batches.  Queues that appear in the
route (new topics matching ``topicPattern``, queues added to a topic) join at their earliest
offset.  Data loss seen on the driver (:mod:`rocketq.connector.data_loss`): a queue that
disappears, a new queue whose min offset is above 0, a queue whose max offset went below the
checkpointed position (topic recreated) fail the query, or with ``failOnDataLoss=false`` are
logged and read on from the offsets still valid (a recreated queue from its new min offset: the
batch's end offset is then *below* its start, which :meth:`partitions` reads as that restart).
Committed offsets go to the broker for ``group`` when Spark commits a batch (and, since Spark
never commits the last batch of an AvailableNow run, also when ``latestOffset`` is called with a
start that is already processed).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.data_loss import Loss, LossKind, report
from rocketq.connector.errors import OptionError
from rocketq.connector.offsets import OffsetMap, queue_text
from rocketq.connector.options import SourceOptions, StartMode, StartSpec, parse_source_options
from rocketq.connector.planning import QueueRange, RocketMQInputPartition, plan_partitions
from rocketq.connector.schema import check_requested_schema
from rocketq.connector.value_schema import source_schema, with_value_schema

if TYPE_CHECKING:
    from rocketq.connector.access import BrokerAccess

# The broker client, the executor's reader and filter pushdown are imported where they are first
# used (the driver's offset calls, read(), pushFilters): Spark imports this module in every Python
# process it starts for the query -- the lookup, each planning worker, the driver's source runner,
# the executors' workers -- and most of them need none of these (docs/performance.md, time to the
# first micro-batch).

log = logging.getLogger("rocketq.connector")


class RocketMQDataSource(DataSource):
    """``spark.readStream.format("rocketmq")`` / ``spark.read`` / ``writeStream`` / ``write``."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        # Runs at load(): validating here makes bad options fail before the query starts.
        return source_schema(parse_source_options(self.options, batch=None))

    def reader(self, schema: StructType) -> DataSourceReader:
        check_requested_schema(schema)
        opts = with_value_schema(parse_source_options(self.options, batch=True), schema)
        return RocketMQPushdownReader(opts) if opts.push_filters else RocketMQBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        check_requested_schema(schema)
        opts = with_value_schema(parse_source_options(self.options, batch=False), schema)
        return RocketMQStreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rocketq.connector.sink import RocketMQBatchWriter

        return RocketMQBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from rocketq.connector.sink import RocketMQStreamWriter

        return RocketMQStreamWriter(self.options, schema)


class _DriverSide:
    """State and broker access shared by the stream and batch readers on the driver."""

    opts: SourceOptions
    _access: BrokerAccess | None
    _addrs: dict[MessageQueue, str]

    def __getstate__(self) -> dict[str, Any]:
        # The executor copy needs only the options; never pickle a live client.
        return {"opts": self.opts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._init(state["opts"])

    def _init(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._access = None
        self._addrs = {}
        self._sql_checked: set[str] = set()

    @property
    def access(self) -> BrokerAccess:
        if self._access is None:
            from rocketq.connector.access import BrokerAccess

            o = self.opts
            self._access = BrokerAccess(
                o.name_server, timeout_ms=o.pull_timeout_ms, client=o.client, retry=o.retry
            )
        return self._access

    def discover(self, *, missing_ok: bool) -> dict[MessageQueue, str]:
        found = self.access.discover(self.opts.topics, self.opts.topic_pattern, missing_ok=missing_ok)
        queues = self.opts.keep_assigned(found)  # option 'assign': only the queues it names
        self._addrs.update(queues)
        self._check_sql_filter(queues)
        return queues

    def _check_sql_filter(self, queues: Mapping[MessageQueue, str]) -> None:
        """``sqlFilter``: every broker read from must accept the expression (checked once per
        broker, when it first appears), so a broker without enablePropertyFilter fails the query
        at start with an error naming the option."""
        if self.opts.sql_filter is None:
            return
        for queue, addr in queues.items():
            if queue.broker_name not in self._sql_checked:
                self.access.check_sql92(queue, addr, self.opts.sql_filter, group=self.opts.group)
                self._sql_checked.add(queue.broker_name)

    def addr_of(self, queue: MessageQueue) -> str:
        if queue not in self._addrs:
            self._addrs.update(self.access.read_queues(queue.topic, missing_ok=True))
        if queue not in self._addrs:
            raise Loss(LossKind.VANISHED, queue, None, None).error()
        return self._addrs[queue]

    def ranges(self, start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> list[QueueRange]:
        out = []
        for queue, until in end.items():
            begin = start.get(queue)
            if begin is None or until <= begin:
                continue
            addr = self.addr_of(queue)
            out.append(QueueRange(queue.topic, queue.broker_name, queue.queue_id, addr, begin, until))
        return out

    def plan(
        self, start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]
    ) -> list[RocketMQInputPartition]:
        o = self.opts
        return plan_partitions(
            self.ranges(start, end),
            min_partitions=o.min_partitions,
            max_partitions=o.max_partitions,
            group=o.group,
            pack_messages=o.pull_batch_size,
        )


def check_start_before_end(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> None:
    """A batch read whose start lies after its end for some queue is a mistake (as Kafka's
    "beginning offset is after the ending offset"), not an empty result."""
    for queue, until in end.items():
        begin = start.get(queue)
        if begin is not None and begin > until:
            raise OptionError(
                "startingOffsets",
                f"queue {queue_text(queue)} starts at offset {begin}, after its ending offset {until}: "
                "give a start (startingOffsets, startingOffsetsByTimestamp, startingTimestamp) at or "
                "before the end (endingOffsets, endingOffsetsByTimestamp, endingTimestamp)",
            )


class RocketMQBatchReader(_DriverSide, DataSourceReader):
    """``spark.read.format("rocketmq")``: from startingOffsets (earliest) to endingOffsets (latest)."""

    def __init__(self, opts: SourceOptions) -> None:
        self._init(opts)

    def partitions(self) -> list[RocketMQInputPartition]:
        from rocketq.connector.positions import resolve_end, resolve_start

        queues = self.discover(missing_ok=False)
        start = resolve_start(self.access, self.opts, self.opts.starting, queues)
        end = resolve_end(self.access, self.opts, self.opts.ending, queues)
        check_start_before_end(start, end)
        # Spark replaces an empty list by InputPartition(None); an empty partition reads nothing
        return self.plan(start, end) or [RocketMQInputPartition(())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from rocketq.connector.profiling import profiled_iter
        from rocketq.connector.reader import read_partition

        assert isinstance(partition, RocketMQInputPartition)
        return profiled_iter("read", read_partition(self.opts, partition))


class RocketMQPushdownReader(RocketMQBatchReader):
    """The batch reader with ``pushFilters`` (option ``pushFilters=true``; Spark calls it only
    with ``spark.sql.python.filterPushdown.enabled=true``).

    Spark pickles this object for the executors after ``pushFilters`` and before
    ``partitions``: what ``read`` needs (the scan, the tag expression) is set in ``pushFilters``;
    ``partitions`` prunes queues and narrows offsets on the driver.
    """

    def __init__(self, opts: SourceOptions) -> None:
        from rocketq.connector.pushdown import PushedScan

        super().__init__(opts)
        self.scan = PushedScan()

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "scan": self.scan}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.scan = state["scan"]

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        from rocketq.connector.pushdown import translate

        user_sql = self.opts.sql_filter
        props = self.opts.values.property_map()
        scan, rest = translate(
            filters, option_tags=self.opts.tags, sql_filter=user_sql is not None, property_columns=props
        )
        if scan.sql is not None:
            expression = scan.sql if user_sql is None else f"({user_sql}) AND {scan.sql}"
            if user_sql is None and not self._brokers_accept(expression):
                log.info(
                    "rocketmq source: a broker refuses SQL92 (enablePropertyFilter=false): "
                    "filters on propertyColumns stay with Spark"
                )
                scan, rest = translate(filters, option_tags=self.opts.tags, sql_filter=False)
            else:
                self.opts = dataclasses.replace(self.opts, sql_filter=expression, sub_expression="*")
        self.scan = scan
        if scan.tags:
            self.opts = dataclasses.replace(self.opts, sub_expression=" || ".join(sorted(scan.tags)))
        log.info(
            "rocketmq source: pushed %d of %d filters (%s); Spark applies %d",
            len(scan.accepted),
            len(filters),
            scan.describe(),
            len(rest),
        )
        return iter(rest)

    def _brokers_accept(self, expression: str) -> bool:
        """Whether every broker of the topics accepts ``expression`` as a SQL92 subscription."""
        first: dict[str, tuple[MessageQueue, str]] = {}
        for queue, addr in self.discover(missing_ok=False).items():
            first.setdefault(queue.broker_name, (queue, addr))
        try:
            for queue, addr in first.values():
                self.access.check_sql92(queue, addr, expression, group=self.opts.group)
        except OptionError:
            return False
        return True

    def partitions(self) -> list[RocketMQInputPartition]:
        from rocketq.connector.positions import narrow_ranges, resolve_end, resolve_start

        if self.scan.empty:
            return [RocketMQInputPartition(())]
        every = self.discover(missing_ok=False)
        start = resolve_start(self.access, self.opts, self.opts.starting, every)
        end = resolve_end(self.access, self.opts, self.opts.ending, every)
        check_start_before_end(start, end)
        queues = {q: a for q, a in every.items() if self.scan.keeps_queue(q)}
        begins, ends = narrow_ranges(self.access, self.scan, queues, start, end)
        # Spark replaces an empty list by InputPartition(None); an empty partition reads nothing
        return self.plan(begins, ends) or [RocketMQInputPartition(())]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from rocketq.connector.pushdown import filter_batches

        return filter_batches(super().read(partition), self.scan.accepted)


class RocketMQStreamReader(_DriverSide, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with admission control, AvailableNow, offset commit and lag reporting."""

    def __init__(self, opts: SourceOptions) -> None:
        self._init(opts)

    def _init(self, opts: SourceOptions) -> None:
        super()._init(opts)
        self._initial: OffsetMap | None = None
        self._latest: OffsetMap | None = None
        self._available_now: OffsetMap | None = None
        self._new_starts: dict[MessageQueue, int] = {}
        self._rebased: dict[MessageQueue, int] = {}  # queues whose offsets went backwards
        self._committed: OffsetMap | None = None
        self._last_batch_at = time.monotonic()

    # -- offsets ---------------------------------------------------------------------------

    def initialOffset(self) -> dict[str, dict[str, int]]:
        if self._initial is None:
            from rocketq.connector.positions import resolve_start

            queues = self.discover(missing_ok=False)
            self._initial = resolve_start(self.access, self.opts, self.opts.starting, queues)
        return self._initial.to_json_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_messages_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        queues = self.discover(missing_ok=True)
        self._available_now = OffsetMap(self.access.max_offsets(queues))

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return self._latest.to_json_dict() if self._latest is not None else None

    def _start_of_new(self, queue: MessageQueue, addr: str) -> int:
        """A queue that joined after the query started reads from its min offset, which is 0
        unless messages were deleted before the query saw the queue (data loss)."""
        if queue not in self._new_starts:
            from rocketq.connector.positions import start_of

            low = start_of(self.access, self.opts, StartSpec(StartMode.EARLIEST), queue, addr)
            if low > 0:
                loss = Loss(LossKind.NEW_QUEUE_TRIMMED, queue, 0, low, "min offset", (0, low), low)
                report(self.opts.fail_on_data_loss, loss)
            self._new_starts[queue] = low
        return self._new_starts[queue]

    def _bases(
        self, start: OffsetMap, queues: Mapping[MessageQueue, str], latest: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        """Where each queue's next batch begins: ``start``, checked against the route and the
        queues' ``latest`` max offsets; new queues at their min offset."""
        bases = dict(start)
        for queue in [q for q in start if q not in queues]:
            report(self.opts.fail_on_data_loss, Loss(LossKind.VANISHED, queue, start[queue], None))
            del bases[queue]
        for queue, addr in queues.items():
            if queue not in bases:
                bases[queue] = self._start_of_new(queue, addr)
            elif latest[queue] < bases[queue]:
                bases[queue] = self._restarted(queue, addr, bases[queue])
        return bases

    def _restarted(self, queue: MessageQueue, addr: str, base: int) -> int:
        """Where a queue whose max offset is below ``base`` goes on: its new min offset when the
        queue really restarted (data loss), ``base`` when a slave lagging behind its master
        (down) answered -- the rest is on the master, as in the executor's reads."""
        found = self.access.max_offset(queue, addr)  # per queue: tells which replica answered
        if found >= base:
            return base
        if self.access.served_by_slave(queue):
            log.info(
                "rocketmq source: %s: the slave serving it has offsets up to %d only, the query is "
                "at %d; waiting for its master",
                queue_text(queue),
                found,
                base,
            )
            return base
        low = self.access.min_offset(queue, addr)
        loss = Loss(LossKind.OFFSETS_BACKWARDS, queue, base, found, "max offset", None, low)
        report(self.opts.fail_on_data_loss, loss)
        self._rebased[queue] = low
        return low

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        start_map = OffsetMap.from_json_dict(start)
        self._commit_quietly(start_map)
        queues = self.discover(missing_ok=True)
        latest = OffsetMap(self.access.max_offsets(queues))  # one request per broker
        self._latest = latest
        bases = self._bases(start_map, queues, latest)
        cap: Mapping[MessageQueue, int] = latest
        if self._available_now is not None:
            snap = self._available_now
            cap = {q: min(latest[q], snap[q]) if q in snap else bases[q] for q in latest}
        from rocketq.connector.positions import limit_offsets

        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = OffsetMap(limit_offsets(bases, cap, max_rows))
        if end == start_map:
            return start
        if self._too_few(start_map, bases, end):
            return start
        self._last_batch_at = time.monotonic()
        return end.to_json_dict()

    def _too_few(self, start: OffsetMap, bases: Mapping[MessageQueue, int], end: OffsetMap) -> bool:
        """``minMessagesPerTrigger``: wait for more rows unless ``maxTriggerDelay`` has passed.

        A change of the queue set (new or vanished queues) always makes a batch, so the offsets
        record it.
        """
        need = self.opts.min_messages_per_trigger
        if need is None or self._available_now is not None or set(end) != set(start):
            return False
        if any(end[q] < start[q] for q in end):  # a queue restarted (data loss): record it now
            return False
        new_rows = sum(end[q] - bases.get(q, end[q]) for q in end)
        waited_ms = (time.monotonic() - self._last_batch_at) * 1000
        return new_rows < need and waited_ms < self.opts.max_trigger_delay_ms

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[RocketMQInputPartition]:
        start_map = OffsetMap.from_json_dict(start)
        end_map = OffsetMap.from_json_dict(end)
        begin = dict(start_map)
        for queue in end_map:
            if queue not in begin:
                begin[queue] = self._start_of_new(queue, self.addr_of(queue))
            elif end_map[queue] < begin[queue]:
                # latestOffset found the queue restarted below start (failOnDataLoss=false) and
                # read it on from its new min offset; after a restart, ask the broker again
                rebased = self._rebased.get(queue)
                if rebased is None:
                    rebased = self.access.min_offset(queue, self.addr_of(queue))
                begin[queue] = min(rebased, end_map[queue])
        return self.plan(begin, end_map)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from rocketq.connector.profiling import profiled_iter
        from rocketq.connector.reader import read_partition

        assert isinstance(partition, RocketMQInputPartition)
        return profiled_iter("read", read_partition(self.opts, partition))

    # -- committed offsets on the broker ----------------------------------------------------

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_quietly(OffsetMap.from_json_dict(end))

    def _commit_quietly(self, offsets: OffsetMap) -> None:
        if not self.opts.commit_offsets or not offsets:
            return
        previous = self._committed or OffsetMap()
        for queue, offset in offsets.items():
            if previous.get(queue) == offset:
                continue
            try:
                self.access.commit_offset(queue, self.addr_of(queue), self.opts.group, offset)
            except Exception as exc:  # best effort: the checkpoint is the source of truth
                log.warning(
                    "rocketmq source: could not commit %s=%d for group %s: %s",
                    queue,
                    offset,
                    self.opts.group,
                    exc,
                )
                return
        self._committed = offsets
