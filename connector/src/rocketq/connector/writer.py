"""Executor side of the sink: route rows to queues, encode them in bulk, send them in order.

For each Arrow batch of a task: every row gets a target queue (``queueId`` if given, else the
stable hash of its sharding key — ``shardingKey``, else its first key — exactly as the client's
``SelectMessageQueueByHash``: ``abs(javaHashCode(key)) % len(writableQueues)``; rows with no key
are spread round-robin).  Rows are stably sorted by queue, encoded into SEND_BATCH_MESSAGE bodies
(:mod:`rocketq.connector.encoding`) and cut into requests of at most ``batchMaxMessages`` /
``batchMaxBytes``.

Ordering and delivery.  Requests of one queue form a chain: a request is sent only after the
previous one of the same queue was confirmed (one in-flight request per queue), so a task's rows
of one queue are stored in row order; different queues proceed in parallel (up to
``maxInflightQueues`` threads).  ``write()`` returns only when every request is confirmed; any
failure left after retries fails the task (no silent drop).  Retries resend the same request to
the same queue, which can duplicate it: delivery is at-least-once.

The send itself is a :class:`SendStrategy` over the client producer's entry points (which own the
request header, the route lookup with ``TBW102`` auto-creation of a new topic, and the typed
errors): :class:`AtLeastOnceStrategy` sends plain batches (``Producer.send_encoded_batch``), the
exactly-once strategy half batches (``TransactionProducer.send_half_batch``); the connector keeps
only the Arrow routing, encoding and ordering.

With ``valueFormat`` the ``value`` column is first encoded into the ``body`` of every row, in bulk
(:func:`encode_value_column`, :mod:`rocketq.connector.values`), for both strategies.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.client.config import ClientConfig
from rocketq.connector.encoding import BulkUniqKeys, chunk_bounds, encode_rows, entry_sizes, properties_column
from rocketq.connector.errors import SinkError
from rocketq.connector.sink_options import SinkOptions
from rocketq.connector.value_encoding import encode_values
from rocketq.connector.value_types import ValueFormat

if TYPE_CHECKING:
    from rocketq.client.producer import Producer
    from rocketq.client.remoting.vocabulary import MessageQueue

log = logging.getLogger("rocketq.connector")


@dataclass(frozen=True, slots=True)
class TargetQueue:
    """A writable queue of a topic, as the producer's route lists it."""

    topic: str
    broker_name: str
    queue_id: int

    @property
    def key(self) -> str:
        return f"{self.topic}/{self.broker_name}:{self.queue_id}"

    @property
    def message_queue(self) -> MessageQueue:
        from rocketq.client.remoting.vocabulary import MessageQueue

        return MessageQueue(self.topic, self.broker_name, self.queue_id)


@dataclass(frozen=True, slots=True)
class Request:
    """One SEND_BATCH_MESSAGE: ``count`` encoded entries for one queue.

    When the strategy asked for a ``row_suffix``, ``entry_ends`` holds where each entry ends in
    ``body`` and ``uniq_keys`` the entries' UNIQ_KEYs."""

    queue: TargetQueue
    body: bytes
    count: int
    entry_ends: npt.NDArray[np.int64] | None = None
    uniq_keys: list[str] | None = None


class SendStrategy(Protocol):
    """How a request reaches the broker (plain sends, or transactional half messages), through
    the client producer's entry points; ``producer`` also lists a topic's writable queues.

    A strategy may have a ``row_suffix`` attribute: properties text (``k\x01v\x02...``) that the
    encoder appends to every row, so that the strategy need not rewrite the entries."""

    @property
    def producer(self) -> Producer: ...

    def send(self, request: Request) -> None: ...

    def summary(self) -> dict[str, Any]: ...


class AtLeastOnceStrategy:
    """``Producer.send_encoded_batch``, retried on the same queue on retriable errors."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.producer = sink_producer(opts.name_server, opts.producer_group, opts.client, trace=opts.trace)

    def send(self, request: Request) -> None:
        from rocketq.client.errors import RocketQError

        q = request.queue
        for attempt in range(self.opts.send_retries + 1):
            try:
                self.producer.send_encoded_batch(
                    q.message_queue, request.body, count=request.count, timeout_ms=self.opts.send_timeout_ms
                )
                return
            except RocketQError as exc:
                if not exc.retriable or attempt == self.opts.send_retries:
                    raise SinkError(
                        f"sending {request.count} messages to {q.key} failed after {attempt + 1} "
                        f"attempt(s): {exc}"
                    ) from exc
                time.sleep(0.1 * (attempt + 1))

    def summary(self) -> dict[str, Any]:
        return {"guarantee": "at_least_once"}


_ProducerKey = tuple[int, str, str, ClientConfig | None, tuple[bool, str | None]]
#: (pid, NameServer, group, client settings, trace) -> started producer, least recently used first
_PRODUCERS: OrderedDict[_ProducerKey, Producer] = OrderedDict()
_PRODUCERS_LOCK = threading.Lock()
#: producers kept per worker; the least recently used beyond it is shut down (a worker that ran
#: many sinks, or one sink whose settings changed, does not keep every old producer's connections)
MAX_CACHED_PRODUCERS = 8


def _after_fork_in_child() -> None:
    # a lock some other thread held at the fork would stay held in the child for good, and the
    # parent's producers (their threads did not fork) are not the child's to use or shut down
    global _PRODUCERS_LOCK
    _PRODUCERS_LOCK = threading.Lock()
    _PRODUCERS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def sink_producer(
    name_server: str,
    group: str,
    client: ClientConfig | None = None,
    *,
    trace: tuple[bool, str | None] = (False, None),
) -> Producer:
    """The process-wide started producer of ``group`` (Python workers are reused across tasks);
    ``trace`` is (enableMsgTrace, traceTopic).  At most :data:`MAX_CACHED_PRODUCERS` are kept,
    the least recently used beyond that shut down; a forked child never uses its parent's."""
    from rocketq.client.producer import Producer

    key = (os.getpid(), name_server, group, client, trace)
    evicted: list[Producer] = []
    with _PRODUCERS_LOCK:
        producer = _PRODUCERS.get(key)
        if producer is not None:
            _PRODUCERS.move_to_end(key)
            return producer
        producer = Producer(
            name_server,
            producer_group=group,
            client=client or ClientConfig(),
            enable_msg_trace=trace[0],
            custom_trace_topic=trace[1],
        )
        producer.start()
        _PRODUCERS[key] = producer
        while len(_PRODUCERS) > MAX_CACHED_PRODUCERS:
            evicted.append(_PRODUCERS.popitem(last=False)[1])
    for old in evicted:  # outside the lock: a shutdown sends the last heartbeats
        try:
            old.shutdown()
        except Exception as exc:  # a producer that cannot shut down cleanly is dropped all the same
            log.warning("shutting down an evicted sink producer failed: %s", exc)
    return producer


# -- routing -----------------------------------------------------------------------------------


def writable_queues(producer: Producer, topic: str) -> list[TargetQueue]:
    """The topic's writable queues in the client producer's order (brokers by name, queue ids);
    a topic with no route yet gets the auto-creation template's, as for every producer send."""
    from rocketq.client.errors import RocketQError

    try:
        queues = producer.fetch_publish_message_queues(topic)
    except RocketQError as exc:
        raise SinkError(f"cannot find the writable queues of topic {topic!r}: {exc}") from exc
    if not queues:
        raise SinkError(f"topic {topic!r} has no writable queue")
    return [TargetQueue(mq.topic, mq.broker_name, mq.queue_id) for mq in queues]


def first_keys(keys: pa.Array) -> pa.Array:
    """The first key of every row (string column: space-separated; or array<string>)."""
    if pa.types.is_list(keys.type) or pa.types.is_large_list(keys.type):
        offsets = np.asarray(keys.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        lengths = np.diff(offsets)
        valid = (lengths > 0) & ~np.asarray(keys.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        idx = pa.array(np.where(valid, offsets[:-1], 0), mask=~valid)
        return keys.values.take(idx) if len(keys.values) else pa.nulls(len(keys), pa.string())
    parts = pc.split_pattern(pc.utf8_trim_whitespace(keys), " ", max_splits=1)
    first = pc.list_element(parts, 0)
    return pc.if_else(pc.equal(pc.utf8_length(first), 0), pa.scalar(None, pa.string()), first)


def hash_indices(shard: pa.Array, n_queues: int) -> npt.NDArray[np.int64]:
    """``abs(javaHashCode(key)) % n_queues`` per row; -1 where the key is null or empty."""
    from rocketq.client.remoting.javahash import java_string_hash

    shard = pc.if_else(pc.equal(pc.utf8_length(shard), 0), pa.scalar(None, pa.string()), shard)
    encoded = pc.dictionary_encode(shard)
    hashes = np.array([java_string_hash(s) for s in encoded.dictionary.to_pylist()], dtype=np.int64)
    idx = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    out = np.full(len(shard), -1, dtype=np.int64)
    has = idx >= 0
    out[has] = np.abs(hashes[idx[has]]) % n_queues
    return out


@dataclass
class TaskState:
    """What one ``write()`` call keeps between Arrow batches."""

    queues: dict[str, list[TargetQueue]] = field(default_factory=dict)
    round_robin: int = 0
    rows: int = 0
    requests: int = 0
    per_queue: dict[str, int] = field(default_factory=dict)


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    i = batch.schema.get_field_index(name)
    return batch.column(i) if i >= 0 else None


def route_rows(batch: pa.RecordBatch, queues: list[TargetQueue], state: TaskState) -> npt.NDArray[np.int64]:
    """Target queue index of every row of ``batch`` (all rows of one topic)."""
    n, nq = batch.num_rows, len(queues)
    target = np.full(n, -1, dtype=np.int64)
    qid = _column(batch, "queueId")
    if qid is not None:
        target = np.asarray(
            pc.fill_null(qid.cast(pa.int64()), -1).to_numpy(zero_copy_only=False), dtype=np.int64
        )
        if (target >= nq).any() or (target < -1).any():
            bad = int(target[(target >= nq) | (target < -1)][0])
            raise SinkError(
                f"queueId {bad} is out of range: topic {queues[0].topic} has {nq} writable queues"
            )
    shard = _column(batch, "shardingKey")
    keys = _column(batch, "keys")
    key_col = shard if shard is not None else None
    if keys is not None:
        first = first_keys(keys)
        key_col = first if key_col is None else pc.coalesce(key_col, first)
    if key_col is not None:
        need = target < 0
        if need.any():
            hashed = hash_indices(key_col.cast(pa.string()), nq)
            target = np.where(need, hashed, target)
    free = np.flatnonzero(target < 0)
    if len(free):
        target[free] = (state.round_robin + np.arange(len(free))) % nq
        state.round_robin = (state.round_robin + len(free)) % nq
    return target


def batch_requests(
    batch: pa.RecordBatch,
    queues: list[TargetQueue],
    target: npt.NDArray[np.int64],
    opts: SinkOptions,
    uniq: BulkUniqKeys,
    suffix: str | None = None,
) -> Iterator[Request]:
    """Encode the rows of one topic, sorted by queue, and cut them into requests (``suffix``: the
    strategy's ``row_suffix``, ending every row's properties)."""
    order = np.argsort(target, kind="stable")
    sorted_batch = batch.take(pa.array(order))
    keys = _column(sorted_batch, "keys")
    keys_text = None
    if keys is not None:
        keys_text = pc.binary_join(keys, " ") if pa.types.is_list(keys.type) else keys.cast(pa.string())
    body = _column(sorted_batch, "body")
    assert body is not None
    if pc.any(pc.is_null(body)).as_py():
        raise SinkError("column 'body' contains nulls; every message needs a body")
    body = body.cast(pa.binary()) if pa.types.is_string(body.type) else body
    tags = _column(sorted_batch, "tags")
    shard = _column(sorted_batch, "shardingKey")
    uniq_keys = uniq.take(sorted_batch.num_rows)
    props = properties_column(
        sorted_batch.num_rows, uniq_keys=uniq_keys, tags=tags, keys_text=keys_text,
        sharding_key=shard, user=_column(sorted_batch, "properties"), suffix=suffix,
    )  # fmt: skip
    sizes = entry_sizes(body, props)
    data = encode_rows(body, props)
    byte_off = np.concatenate([[0], np.cumsum(sizes)])
    sorted_target = target[order]
    cuts = np.flatnonzero(np.diff(sorted_target)) + 1
    starts = np.concatenate([[0], cuts]).astype(np.int64)
    ends = np.concatenate([cuts, [len(sorted_target)]]).astype(np.int64)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        queue = queues[int(sorted_target[s])]
        for i, j in chunk_bounds(sizes[s:e], opts.batch_max_bytes, opts.batch_max_messages):
            body_bytes = data[int(byte_off[s + i]) : int(byte_off[s + j])]
            if suffix is None:
                yield Request(queue, body_bytes, j - i)
            else:
                yield Request(
                    queue,
                    body_bytes,
                    j - i,
                    entry_ends=np.cumsum(sizes[s + i : s + j]),
                    uniq_keys=uniq_keys.slice(s + i, j - i).to_pylist(),
                )


class OrderedSender:
    """Sends requests with at most one in flight per queue, in submission order per queue."""

    def __init__(self, strategy: SendStrategy, max_threads: int) -> None:
        self.strategy = strategy
        self.pool = cf.ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="rocketmq-sink")
        self.last: dict[str, cf.Future[None]] = {}
        self.pending: list[cf.Future[None]] = []
        self.max_pending = 4 * max_threads

    def _send_after(self, previous: cf.Future[None] | None, request: Request) -> None:
        if previous is not None:
            previous.result()  # the same queue's previous request must be confirmed first
        self.strategy.send(request)

    def submit(self, request: Request) -> None:
        # ThreadPoolExecutor starts tasks in submission order, so `previous` is always running
        # or done when a task waits on it: the chain cannot deadlock.
        future = self.pool.submit(self._send_after, self.last.get(request.queue.key), request)
        self.last[request.queue.key] = future
        self.pending.append(future)
        if len(self.pending) > self.max_pending:
            self.pending.pop(0).result()

    def finish(self) -> None:
        try:
            for future in self.pending:
                future.result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


def write_batches(
    opts: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    strategy: SendStrategy,
    state: TaskState | None = None,
) -> TaskState:
    """``write()`` body shared by the streaming and batch writers."""
    state = state or TaskState()
    uniq = _uniq_keys()
    suffix: str | None = getattr(strategy, "row_suffix", None)
    sender = OrderedSender(strategy, opts.max_inflight_queues)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if opts.value_format is not ValueFormat.BINARY:
                batch = encode_value_column(batch, opts.value_format)
            for topic, rows in _split_by_topic(batch, opts.topic):
                if topic not in state.queues:
                    state.queues[topic] = writable_queues(strategy.producer, topic)
                queues = state.queues[topic]
                target = route_rows(rows, queues, state)
                for request in batch_requests(rows, queues, target, opts, uniq, suffix):
                    sender.submit(request)
                    state.requests += 1
                    state.per_queue[request.queue.key] = (
                        state.per_queue.get(request.queue.key, 0) + request.count
                    )
                state.rows += rows.num_rows
    finally:
        sender.finish()
    return state


def _split_by_topic(batch: pa.RecordBatch, option_topic: str | None) -> Iterator[tuple[str, pa.RecordBatch]]:
    """The rows of each topic: the ``topic`` option wins over a ``topic`` column (as Kafka's sink),
    so a source row's ``topic`` selected along never sends a copy back into its own topic."""
    topics = _column(batch, "topic")
    if option_topic is not None or topics is None:
        assert option_topic is not None
        yield option_topic, batch
        return
    if pc.any(pc.is_null(topics)).as_py():
        raise SinkError("column 'topic' has nulls: set the 'topic' option or give every row a topic")
    unique = pc.unique(topics).to_pylist()
    if len(unique) == 1:
        yield str(unique[0]), batch
        return
    for topic in sorted(str(t) for t in unique):
        yield topic, batch.filter(pc.equal(topics, topic))


_UNIQ: BulkUniqKeys | None = None


def _uniq_keys() -> BulkUniqKeys:
    global _UNIQ
    if _UNIQ is None:
        _UNIQ = BulkUniqKeys()
    return _UNIQ


# -- typed values (valueFormat) ----------------------------------------------------------------


def encode_value_column(batch: pa.RecordBatch, fmt: ValueFormat) -> pa.RecordBatch:
    """``batch`` with its ``value`` column encoded (``valueFormat``) into a ``body`` column."""
    i = batch.schema.get_field_index("value")
    if i < 0:
        raise SinkError(f"valueFormat={fmt.value} writes a 'value' column; the rows have none")
    try:
        body = encode_values(batch.column(i), fmt)
    except (TypeError, ValueError, pa.ArrowException) as exc:
        raise SinkError(f"cannot encode column 'value' as valueFormat={fmt.value}: {exc}") from exc
    return batch.set_column(i, pa.field("body", pa.binary(), nullable=False), body)
