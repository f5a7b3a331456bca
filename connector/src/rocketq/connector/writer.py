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

The send itself is a :class:`SendStrategy`; :class:`AtLeastOnceStrategy` sends plain batches.  A
transactional strategy (half messages committed by the driver) can plug in without touching
routing, encoding or ordering.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.connector.encoding import BulkUniqKeys, chunk_bounds, encode_rows, entry_sizes, properties_column
from rocketq.connector.errors import SinkError
from rocketq.connector.options import SinkOptions

if TYPE_CHECKING:
    from rocketq.client.api import BlockingMQClientAPI

CREATE_TOPIC_KEY = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4


@dataclass(frozen=True, slots=True)
class TargetQueue:
    topic: str
    broker_name: str
    queue_id: int
    addr: str

    @property
    def key(self) -> str:
        return f"{self.topic}/{self.broker_name}:{self.queue_id}"


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
    """How a request reaches the broker (plain sends, or transactional half messages).

    A strategy may have a ``row_suffix`` attribute: properties text (``k\x01v\x02...``) that the
    encoder appends to every row, so that the strategy need not rewrite the entries."""

    def send(self, api: BlockingMQClientAPI, request: Request) -> None: ...

    def summary(self) -> dict[str, Any]: ...


class AtLeastOnceStrategy:
    """SEND_BATCH_MESSAGE, retried on the same queue on retriable errors."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def send(self, api: BlockingMQClientAPI, request: Request) -> None:
        from rocketq.client.errors import RocketQError
        from rocketq.client.model import Message
        from rocketq.client.remoting.headers import SendMessageRequestHeaderV2

        q = request.queue
        header = SendMessageRequestHeaderV2(
            producer_group=self.opts.producer_group, topic=q.topic, default_topic=CREATE_TOPIC_KEY,
            default_topic_queue_nums=DEFAULT_TOPIC_QUEUE_NUMS, queue_id=q.queue_id, sys_flag=0,
            born_timestamp=int(time.time() * 1000), flag=0, properties="WAIT\x01true\x02", reconsume_times=0,
            batch=True, broker_name=q.broker_name,
        )  # fmt: skip
        carrier = Message(q.topic, b"\0")
        for attempt in range(self.opts.send_retries + 1):
            try:
                api.send_message(q.addr, q.broker_name, carrier, header, self.opts.send_timeout_ms, body=request.body)
                return
            except RocketQError as exc:
                if not exc.retriable or attempt == self.opts.send_retries:
                    raise SinkError(
                        f"sending {request.count} messages to {q.key} at {q.addr} failed after {attempt + 1} "
                        f"attempt(s): {exc}"
                    ) from exc
                time.sleep(0.1 * (attempt + 1))

    def summary(self) -> dict[str, Any]:
        return {"guarantee": "at_least_once"}


# -- routing -----------------------------------------------------------------------------------


def writable_queues(api: BlockingMQClientAPI, topic: str) -> list[TargetQueue]:
    """The topic's writable queues in the client producer's order (brokers by name, queue ids)."""
    import dataclasses

    from rocketq.client.errors import NoRouteError
    from rocketq.client.producer.fault import TopicPublishInfo

    try:
        route = api.get_topic_route(topic)
    except NoRouteError:
        # Like the client producer: send through the auto-creation template (broker-side
        # autoCreateTopicEnable creates the topic with DEFAULT_TOPIC_QUEUE_NUMS queues).
        template = api.get_topic_route(CREATE_TOPIC_KEY)
        nums = DEFAULT_TOPIC_QUEUE_NUMS
        queue_datas = [
            dataclasses.replace(qd, read_queue_nums=min(nums, qd.read_queue_nums), write_queue_nums=min(nums, qd.read_queue_nums))
            for qd in template.queue_datas
        ]
        route = dataclasses.replace(template, queue_datas=queue_datas)
    info = TopicPublishInfo.from_route(topic, route)
    masters = {bd.broker_name: bd.broker_addrs.get(0) for bd in route.broker_datas}
    out = [TargetQueue(topic, mq.broker_name, mq.queue_id, masters[mq.broker_name] or "") for mq in info.message_queues]
    if not out:
        raise SinkError(f"topic {topic!r} has no writable queue")
    return out


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
        target = np.asarray(pc.fill_null(qid.cast(pa.int64()), -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        if (target >= nq).any() or (target < -1).any():
            bad = int(target[(target >= nq) | (target < -1)][0])
            raise SinkError(f"queueId {bad} is out of range: topic {queues[0].topic} has {nq} writable queues")
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
    batch: pa.RecordBatch, queues: list[TargetQueue], target: npt.NDArray[np.int64], opts: SinkOptions, uniq: BulkUniqKeys,
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
                yield Request(queue, body_bytes, j - i, entry_ends=np.cumsum(sizes[s + i : s + j]),
                              uniq_keys=uniq_keys.slice(s + i, j - i).to_pylist())


class OrderedSender:
    """Sends requests with at most one in flight per queue, in submission order per queue."""

    def __init__(self, api: BlockingMQClientAPI, strategy: SendStrategy, max_threads: int) -> None:
        self.api = api
        self.strategy = strategy
        self.pool = cf.ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="rocketmq-sink")
        self.last: dict[str, cf.Future[None]] = {}
        self.pending: list[cf.Future[None]] = []
        self.max_pending = 4 * max_threads

    def _send_after(self, previous: cf.Future[None] | None, request: Request) -> None:
        if previous is not None:
            previous.result()  # the same queue's previous request must be confirmed first
        self.strategy.send(self.api, request)

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
    opts: SinkOptions, batches: Iterator[pa.RecordBatch], strategy: SendStrategy, state: TaskState | None = None
) -> TaskState:
    """``write()`` body shared by the streaming and batch writers."""
    from rocketq.connector.access import executor_access

    api = executor_access(opts.name_server, opts.send_timeout_ms).api
    state = state or TaskState()
    uniq = _uniq_keys()
    suffix: str | None = getattr(strategy, "row_suffix", None)
    sender = OrderedSender(api, strategy, opts.max_inflight_queues)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            for topic, rows in _split_by_topic(batch, opts.topic):
                if topic not in state.queues:
                    state.queues[topic] = writable_queues(api, topic)
                queues = state.queues[topic]
                target = route_rows(rows, queues, state)
                for request in batch_requests(rows, queues, target, opts, uniq, suffix):
                    sender.submit(request)
                    state.requests += 1
                    state.per_queue[request.queue.key] = state.per_queue.get(request.queue.key, 0) + request.count
                state.rows += rows.num_rows
    finally:
        sender.finish()
    return state


def _split_by_topic(batch: pa.RecordBatch, default_topic: str | None) -> Iterator[tuple[str, pa.RecordBatch]]:
    topics = _column(batch, "topic")
    if topics is None:
        assert default_topic is not None
        yield default_topic, batch
        return
    if default_topic is not None:
        topics = pc.fill_null(topics, default_topic)
    elif pc.any(pc.is_null(topics)).as_py():
        raise SinkError("column 'topic' has nulls and no 'topic' option gives a default")
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
