"""Executor side of the source: pull exactly the planned ranges and yield Arrow record batches.

``read_partition`` runs in a Spark executor's Python worker on a pickled reader; it sees only the
:class:`RocketMQInputPartition` (plain data) and the parsed options.  For each queue range
``[start, end)`` it pulls from the broker with large requests (``pullBatchSize`` messages /
``pullMaxBytes`` bytes), decodes each response in bulk (:mod:`rocketq.connector.records`) and
yields one RecordBatch per pull, cut at ``end``.  Reading is deterministic: the same range gives
the same rows, so a replayed micro-batch reads the same messages.  With ``valueFormat`` every
batch then gets its typed ``value`` column (:func:`with_values`, :mod:`rocketq.connector.poison`).

Data loss.  The pull response carries the queue's current ``minOffset`` and ``maxOffset``; when
the range starts below the min (retention deleted the messages) or the queue now ends before the
range does (deleted and recreated while the batch ran), the reader raises :class:`DataLossError`
naming topic, broker, queue and offsets (:mod:`rocketq.connector.data_loss`), or with
``failOnDataLoss=false`` logs a warning and continues from the first offset still stored.

Replicas.  :class:`BrokerAccess` pulls from a slave of the group while the master is down;
queue offsets are the same on every replica.  A slave that lags behind the planned end (ASYNC
replication, master down) fails the task with BrokerUnavailableError instead of declaring the
missing offsets lost: they are on the master and are read when it is back (a retried task, or
the query restarted from its checkpoint), so nothing is skipped.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import logging
import time
from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa

from rocketq.client.model import PullResult, PullStatus
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.access import BrokerAccess, executor_access
from rocketq.connector.data_loss import Loss, LossKind, report
from rocketq.connector.errors import BrokerUnavailableError, DataLossError
from rocketq.connector.offsets import queue_text
from rocketq.connector.options import SourceOptions
from rocketq.connector.planning import QueueRange, RocketMQInputPartition
from rocketq.connector.records import decode_pull_body

log = logging.getLogger("rocketq.connector")

# A pull that finds "no new message" below the planned end means the data is not there (yet):
# the broker may still be dispatching it to the ConsumeQueue; give it this long before deciding.
NO_NEW_MSG_GRACE_S = 5.0


def _trimmed(opts: SourceOptions, queue: MessageQueue, offset: int, min_offset: int, end: int) -> None:
    """Retention deleted ``[offset, min_offset)`` before it was read."""
    lost = (offset, min(min_offset, end))
    loss = Loss(LossKind.RETENTION, queue, offset, min_offset, "min offset", lost, min_offset)
    report(opts.fail_on_data_loss, loss)


def _shrank(opts: SourceOptions, queue: MessageQueue, offset: int, max_offset: int, end: int) -> None:
    """The queue ends at ``max_offset``, before the planned ``end``: ``[offset, end)`` is gone."""
    loss = Loss(LossKind.QUEUE_SHRANK, queue, offset, max_offset, "max offset", (offset, end), end)
    report(opts.fail_on_data_loss, loss)


def _slave_behind(queue: MessageQueue, slave_max: int, end: int) -> str:
    # not lost: the slave lags its master, which is down and still holds the rest
    return (
        f"{queue_text(queue)}: the slave serving it while its master is down has offsets up to "
        f"{slave_max} only, "
        f"the range ends at {end}; the rest is on the master: retry when it is back"
    )


def _wait_for_replica(access: BrokerAccess, opts: SourceOptions, queue: MessageQueue, behind: int) -> int:
    """Back off as ``fetchOffset.retryIntervalMs`` says and fetch the route again (a new master may
    be elected, the old one back), before the lagging slave's range is pulled again."""
    time.sleep(opts.retry.delay_ms(behind) / 1000)
    access.refresh_route(queue.topic)
    return behind + 1


class _Puller:
    """Pulls for one partition, with one request prefetched while the previous one is decoded.

    A prefetched pull is used only if the reader asks for exactly that range and offset next;
    otherwise (data loss skips, a range cut short) it is dropped and the pull is made again.
    """

    def __init__(self, access: BrokerAccess, opts: SourceOptions) -> None:
        self.access = access
        self.opts = opts
        self.pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="rocketmq-prefetch")
        self.ahead: tuple[QueueRange, int, cf.Future[PullResult]] | None = None

    def _pull(self, r: QueueRange, offset: int) -> PullResult:
        queue = MessageQueue(r.topic, r.broker_name, r.queue_id)
        return self.access.pull(
            queue,
            r.broker_addr,
            offset,
            group=self.opts.group,
            max_nums=min(self.opts.pull_batch_size, r.end - offset),
            max_bytes=self.opts.pull_max_bytes,
            sub_expression=self.opts.pull_expression,
            expression_type=self.opts.pull_expression_type,
            timeout_ms=self.opts.pull_timeout_ms,
        )

    def pull(self, r: QueueRange, offset: int) -> PullResult:
        ahead, self.ahead = self.ahead, None
        if ahead is not None and ahead[0] == r and ahead[1] == offset:
            return ahead[2].result()
        if ahead is not None:
            ahead[2].cancel()
        return self._pull(r, offset)

    def prefetch(self, r: QueueRange, offset: int) -> None:
        if offset < r.end:
            self.ahead = (r, offset, self.pool.submit(self._pull, r, offset))

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def read_range(
    puller: _Puller, opts: SourceOptions, r: QueueRange, following: QueueRange | None = None
) -> Iterator[pa.RecordBatch]:
    """Yield the rows of one queue range, one RecordBatch per pull.

    While a pull is decoded the next one is already requested: the rest of this range, or the
    start of ``following`` (the partition's next range) once this one is fully requested.
    """
    queue = MessageQueue(r.topic, r.broker_name, r.queue_id)
    tags = opts.tags
    offset = r.start
    waited_since: float | None = None
    behind = 0  # waits for a lagging slave's master (or a caught-up replica), within fetchOffset.*
    while offset < r.end:
        res = puller.pull(r, offset)
        if offset < res.min_offset and res.status is not PullStatus.NO_NEW_MSG:
            _trimmed(opts, queue, offset, res.min_offset, r.end)
            offset = res.min_offset
            continue
        if res.status is PullStatus.FOUND:
            waited_since = None
            if offset < res.next_begin_offset < r.end:
                puller.prefetch(r, res.next_begin_offset)
            elif res.next_begin_offset >= r.end and following is not None:
                puller.prefetch(following, following.start)
            chunk = decode_pull_body(
                res.body, topic=r.topic, broker_name=r.broker_name, end_offset=r.end, tags=tags
            )
            if chunk.batch.num_rows:
                yield chunk.batch
            nxt = max(res.next_begin_offset, chunk.last_queue_offset + 1)
        elif res.status is PullStatus.NO_MATCHED_MSG:
            waited_since = None
            nxt = res.next_begin_offset
            if nxt <= offset and puller.access.served_by_slave(queue):
                if behind < opts.retry.num_retries:
                    behind = _wait_for_replica(puller.access, opts, queue, behind)
                    continue
                raise BrokerUnavailableError(_slave_behind(queue, res.max_offset, r.end))
        elif res.status is PullStatus.OFFSET_ILLEGAL:
            if offset >= res.max_offset:
                _shrank(opts, queue, offset, res.max_offset, r.end)
                return
            nxt = res.next_begin_offset
        else:  # NO_NEW_MSG below the planned end
            if offset < res.min_offset:
                _trimmed(opts, queue, offset, res.min_offset, r.end)
                offset = res.min_offset
                continue
            if res.max_offset <= offset:
                now = time.monotonic()
                waited_since = waited_since or now
                if now - waited_since < NO_NEW_MSG_GRACE_S:
                    time.sleep(0.05)
                    continue
                if puller.access.served_by_slave(queue):
                    if behind < opts.retry.num_retries:
                        behind = _wait_for_replica(puller.access, opts, queue, behind)
                        continue
                    raise BrokerUnavailableError(_slave_behind(queue, res.max_offset, r.end))
                _shrank(opts, queue, offset, res.max_offset, r.end)
                return
            nxt = res.next_begin_offset
        if nxt <= offset:
            raise DataLossError(
                queue.topic, queue.key, f"the broker did not advance past offset {offset} ({res.status})"
            )
        offset = nxt


def read_partition(opts: SourceOptions, partition: RocketMQInputPartition) -> Iterator[pa.RecordBatch]:
    """``read()`` body shared by the stream and batch readers.  Pulls and trace records name the
    group the driver planned with (the partition's), not one generated for the executors' reader."""
    if partition.group is not None and partition.group != opts.group:
        opts = dataclasses.replace(opts, group=partition.group)
    puller = _Puller(executor_access(opts.name_server, opts.pull_timeout_ms, opts.client, opts.retry), opts)
    try:
        ranges = partition.ranges
        batches = (
            batch
            for i, r in enumerate(ranges)
            for batch in read_range(puller, opts, r, ranges[i + 1] if i + 1 < len(ranges) else None)
        )
        traced: Iterator[pa.RecordBatch] = batches
        if opts.enable_msg_trace:  # imported here: the trace producer is heavy and rarely used
            from rocketq.connector.tracing import traced_batches

            traced = traced_batches(opts, batches)
        yield from with_values(opts, ranges, traced)
    finally:
        puller.close()


def with_values(
    opts: SourceOptions, ranges: Sequence[QueueRange], batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The batches with their ``value`` column (``valueFormat``) and ``propertyColumns``, bad
    messages handled per ``onDecodeError`` (:mod:`rocketq.connector.poison`); dead letters are
    confirmed before the batch that dropped them is yielded."""
    if not opts.values.extra_names():
        yield from batches
        return
    from rocketq.connector.poison import ValueStage  # typed values only

    stage = ValueStage(opts, ranges)
    for batch in batches:
        out = stage.apply(batch)
        if out.num_rows:
            yield out
    stage.finish()


def sample_bodies(opts: SourceOptions, limit: int) -> pa.Array:
    """Up to ``limit`` bodies, the newest of each queue (an equal share per queue), for
    ``valueSchemaInference`` at ``schema()`` time on the driver."""
    access = BrokerAccess(
        opts.name_server, timeout_ms=opts.pull_timeout_ms, client=opts.client, retry=opts.retry
    )
    puller = _Puller(access, opts)
    bodies: list[pa.Array] = []
    try:
        queues = access.discover(opts.topics, opts.topic_pattern, missing_ok=True)
        share = max(1, limit // max(1, len(queues)))
        for queue, addr in queues.items():
            high = access.max_offset(queue, addr)
            low = max(access.min_offset(queue, addr), high - share)
            if high > low:
                r = QueueRange(queue.topic, queue.broker_name, queue.queue_id, addr, low, high)
                bodies.extend(batch.column("body") for batch in read_range(puller, opts, r))
    finally:
        puller.close()
        access.close()
    sample = pa.concat_arrays(bodies) if bodies else pa.array([], pa.binary())
    return sample.slice(0, limit)
