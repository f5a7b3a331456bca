"""Exactly-once sends: half messages from executors, COMMIT/ROLLBACK from the driver, check-backs.

Theory of operation (docs/exactly-once.md).  Every Spark task attempt gets a fresh ``write_id``;
its rows go out as *half messages* (invisible to consumers) tagged with one property, ``__RQ_TXN``
(:class:`~rocketq.connector.commit_log.TxnTag`: the sink, the batch, the write id, the partition,
the task attempt and the request number, that is the number of the send attempt
within the task: a retried request gets a new number, so a maybe-stored first try is never
mistaken for the accepted one).  Each confirmed request yields a :class:`HalfBatch` handle that
travels to the driver in the task's commit message.  The routing, encoding and per-queue ordering
are the at-least-once writer's (one in-flight request per queue, in row order).

Half batches go through the client's batched transaction API
(:mod:`rocketq.client.producer.transaction_batch`): ``send_half_batch`` of a ``PreparedHalfBatch``
(the request's encoded rows, sent as they are) stores a request's rows at
contiguous half offsets and ``end_transaction_batch`` ends a queue's ranges with one request and
one store append on rocketq brokers, so a commit is atomic per queue; against Apache RocketMQ the
client falls back to one transaction per message (not atomic per queue).

Executors keep one :class:`~rocketq.client.producer.TransactionProducer` per (NameServer, sink)
for the life of the Python worker, whose check listener answers the broker's check-backs from the
sink's commit log (:func:`rocketq.connector.commit_log.decide`), so halves of failed or
speculative attempts are resolved without the writer that sent them.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rocketq.client.model import LocalTransactionState
from rocketq.connector.commit_log import (
    PROP_TXN,
    REQ_WIDTH,
    CommitLog,
    CommitRecord,
    HalfBatch,
    TxnTag,
    decide,
    producer_group,
)
from rocketq.connector.errors import SinkError
from rocketq.connector.sink_options import SinkOptions

if TYPE_CHECKING:
    from rocketq.client.api import BlockingMQClientAPI
    from rocketq.client.config import ClientConfig
    from rocketq.client.model import MessageExt
    from rocketq.client.producer import TransactionProducer
    from rocketq.client.producer.transaction_batch import HalfBatchResult
    from rocketq.connector.writer import Request

log = logging.getLogger("rocketq.connector.eos")


@dataclass(frozen=True, slots=True)
class WriteIdentity:
    """Who sends: the sink, the batch key, this task attempt."""

    sink_id: str
    batch: str
    write_id: str
    partition: int
    attempt: int

    @classmethod
    def current(cls, sink_id: str, batch: str | None) -> WriteIdentity:
        """From the running Spark task (``batch`` None: the streaming batch id local property)."""
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        if batch is None:
            value = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
            if value is None:
                raise SinkError(
                    "exactly-once streaming write outside a micro-batch (no streaming.sql.batchId)"
                )
            batch = str(value)
        return cls(sink_id, batch, uuid.uuid4().hex[:16], partition, attempt)

    def tag(self, req: int) -> TxnTag:
        return TxnTag(self.sink_id, self.batch, self.write_id, self.partition, self.attempt, req)


def row_suffix(ident: WriteIdentity, group: str) -> tuple[str, int]:
    """The properties every half message of ``ident`` ends with (request number 0) and the
    distance from the end of an entry back to the first digit of its request number.

    ``TRAN_MSG`` and ``PGROUP`` come last: the broker's bulk commit expects the properties from
    ``PGROUP`` on to be the same for every message of a queue (``rocketq.broker.transaction.bulk_commit``)."""
    from rocketq.client.remoting.properties import PROPERTY_SEPARATOR, MessageConst, encode_properties

    after = encode_properties({MessageConst.TRANSACTION_PREPARED: "true", MessageConst.PRODUCER_GROUP: group})
    value = ident.tag(0).text()
    text = encode_properties({PROP_TXN: value}) + after
    return text, len(after.encode()) + len(PROPERTY_SEPARATOR) + len(value.encode())


def renumber(request: Request, req: int, tail: int) -> bytes:
    """``request.body`` with every entry's request number set to ``req``.

    ``tail``: see :func:`row_suffix`."""
    if request.entry_ends is None or request.uniq_keys is None:
        raise SinkError(
            "an exactly-once request must be encoded with the strategy's row_suffix (no entry ends)"
        )
    body = bytearray(request.body)
    at = request.entry_ends - tail
    np.frombuffer(body, dtype=np.uint8)[at[:, None] + np.arange(REQ_WIDTH)] = np.frombuffer(
        f"{req:0{REQ_WIDTH}d}".encode(), dtype=np.uint8
    )
    return bytes(body)


class ExactlyOnceStrategy:
    """The :class:`~rocketq.connector.writer.SendStrategy` of ``deliveryGuarantee=exactlyOnce``."""

    def __init__(self, opts: SinkOptions, ident: WriteIdentity) -> None:
        self.opts = opts
        self.ident = ident
        self.group = producer_group(ident.sink_id)
        self.handles: list[HalfBatch] = []
        self._lock = threading.Lock()
        self._req = itertools.count()
        self.producer = executor_producer(
            opts.name_server, ident.sink_id, opts.send_timeout_ms, trace=opts.trace, client=opts.client
        )
        #: the writer encodes every row with these properties; send() sets the request number
        self.row_suffix, self._tail = row_suffix(ident, self.group)

    def send(self, request: Request) -> None:
        from rocketq.client.errors import RocketQError
        from rocketq.client.producer import PreparedHalfBatch

        q = request.queue
        for attempt in range(self.opts.send_retries + 1):
            req = next(self._req)  # a fresh number per try: an unconfirmed try is never committed
            try:
                batch = PreparedHalfBatch(renumber(request, req, self._tail), tuple(request.uniq_keys or ()))
                result = self.producer.send_half_batch(
                    q.message_queue, batch, timeout_ms=self.opts.send_timeout_ms
                )
                handle = from_client_result(result, self.ident.write_id, req)
                with self._lock:
                    self.handles.append(handle)
                return
            except RocketQError as exc:
                if not exc.retriable or attempt == self.opts.send_retries:
                    raise SinkError(
                        f"half send of {request.count} messages to {q.key} failed after {attempt + 1} "
                        f"attempt(s): {exc}"
                    ) from exc
                time.sleep(0.1 * (attempt + 1))

    def summary(self) -> dict[str, Any]:
        return {"guarantee": "exactly_once", "sink": self.ident.sink_id, "batch": self.ident.batch,
                "write_id": self.ident.write_id}  # fmt: skip


def from_client_result(result: HalfBatchResult, write_id: str, req: int) -> HalfBatch:
    """A connector :class:`HalfBatch` (the client's handle plus who sent it) from a ``HalfBatchResult``.

    A ranged handle keeps only its first msgId and transaction id: ending a range needs no more
    (``transaction_batch._end_ranged``), and handles travel in Spark commit messages and commit
    records, where one id per row would cost more than the rows' sending."""
    keep = 1 if result.ranged else len(result.msg_ids)
    return HalfBatch(
        result.topic,
        result.broker_addr,
        result.broker_name,
        result.queue_id,
        result.first_half_offset,
        result.count,
        result.first_commit_log_offset,
        result.msg_ids[:keep],
        result.transaction_ids[:keep],
        write_id,
        req,
        result.ranged,
        result.half_offsets,
        result.data_bytes,
    )


def to_client_result(handle: HalfBatch) -> HalfBatchResult:
    """The client's ``HalfBatchResult`` of ``handle``."""
    from rocketq.client.producer.transaction_batch import HalfBatchResult

    return HalfBatchResult(
        broker_addr=handle.broker_addr,
        broker_name=handle.broker_name,
        topic=handle.topic,
        queue_id=handle.queue_id,
        first_half_offset=handle.first_half_offset,
        count=handle.count,
        first_commit_log_offset=handle.first_commit_log_offset,
        msg_ids=handle.msg_ids,
        transaction_ids=handle.transaction_ids,
        ranged=handle.ranged,
        half_offsets=handle.half_offsets,
        data_bytes=handle.data_bytes,
    )


# -- ending transactions (driver) -------------------------------------------------------------


def end_handles(
    api: BlockingMQClientAPI,
    group: str,
    handles: Sequence[HalfBatch],
    state: LocalTransactionState,
    timeout_ms: int,
) -> None:
    """COMMIT or ROLLBACK every half of ``handles``, confirmed by the brokers; raises on failure.

    One ranged two-way END_TRANSACTION per (broker, topic, queue) on rocketq brokers (the queue's
    halves become visible in one append); per-message ENDs, in order, on Apache RocketMQ.  Queues
    are ended :data:`COMMIT_PARALLEL_QUEUES` at a time (the next as soon as one is done): a large
    ranged commit keeps a thread of the broker's send executor busy, and more parallel ones would
    wait in its queue until the broker drops them as busy; two let the broker's second core work
    while the first holds the GIL."""
    from rocketq.client.producer.transaction_batch import end_transaction_batch_blocking

    results = [to_client_result(h) for h in handles]
    end_transaction_batch_blocking(
        api, group, results, state, timeout_ms=timeout_ms, parallel=COMMIT_PARALLEL_QUEUES
    )


#: queues ended at the same time by :func:`end_handles`
COMMIT_PARALLEL_QUEUES = 2


# -- executor-side producers and check-backs -----------------------------------------------------


class CheckResolver:
    """The check listener: answers a half message's check-back from its sink's commit log.

    A COMMIT answer ends one half message, so answering COMMIT alone would break the per-queue
    order the sink promises: check-backs are answered by several threads (and several executor
    processes) in any order, and can race the driver's ranged commit of the same queue (a replay
    after a driver restart always does).  So before answering COMMIT the resolver commits every
    half the record lists for that half's queue with one ranged request (atomic per queue on the
    broker, halves in send order), after which the COMMIT answer is a no-op; if that fails the
    answer is UNKNOW and the broker asks again.  (Apache RocketMQ brokers, without ranged ends,
    get the plain answer: a repeated COMMIT there would store messages twice.)"""

    def __init__(self, name_server: str, timeout_ms: int, client: ClientConfig | None = None) -> None:
        self.name_server = name_server
        self.timeout_ms = timeout_ms
        self.client = client  # the sink's TLS and ACL settings, for the commit log and ranged commits
        self._logs: dict[str, CommitLog] = {}
        self._lock = threading.Lock()
        self._committed: set[tuple[str, str, str, str, int]] = set()  # (sink, batch, broker, topic, queue)

    def commit_log(self, sink_id: str) -> CommitLog:
        from rocketq.connector.access import executor_access

        with self._lock:
            found = self._logs.get(sink_id)
            if found is None:
                access = executor_access(self.name_server, self.timeout_ms, self.client)
                found = self._logs[sink_id] = CommitLog(
                    access, sink_id, timeout_ms=self.timeout_ms, client=self.client
                )
            return found

    def __call__(self, msg: MessageExt) -> LocalTransactionState:
        tag = TxnTag.parse(msg.properties.get(PROP_TXN))
        if tag is None:
            return LocalTransactionState.UNKNOW  # not a sink's half message
        commit_log = self.commit_log(tag.sink)
        state = decide(commit_log.index, tag.batch, tag.write_id, tag.req)
        if state is LocalTransactionState.UNKNOW:
            state = decide(commit_log.refresh(), tag.batch, tag.write_id, tag.req)
        if state is LocalTransactionState.COMMIT_MESSAGE:
            state = self._commit_queue(commit_log, tag.batch, tag.write_id, tag.req)
        log.info(
            "check-back of sink %s batch %s write %s req %d: %s",
            tag.sink,
            tag.batch,
            tag.write_id,
            tag.req,
            state.value,
        )
        return state

    def _commit_queue(
        self, commit_log: CommitLog, batch: str, write_id: str, req: int
    ) -> LocalTransactionState:
        """COMMIT every half of ``batch``'s record on the queue of half batch ``(write_id, req)``, in order.

        COMMIT_MESSAGE once they are (the answer is then a no-op), UNKNOW if that failed."""
        record = commit_log.index.records[batch]
        mine = next((h for h in record.handles if h.ident == (write_id, req)), None)
        if mine is None or not mine.ranged:
            # no handle to order it with, or Apache RocketMQ: there a repeated COMMIT stores the
            # message again, so only the asked half is committed (no per-queue order there anyway)
            return LocalTransactionState.COMMIT_MESSAGE
        key = (record.sink, batch, mine.broker_addr, mine.topic, mine.queue_id)
        with self._lock:
            if key in self._committed:
                return LocalTransactionState.COMMIT_MESSAGE
        queue = [h for h in record.handles if h.ranged and (h.broker_addr, h.topic, h.queue_id) == key[2:]]
        try:
            end_handles(commit_log.access.api, producer_group(record.sink), queue,
                        LocalTransactionState.COMMIT_MESSAGE, self.timeout_ms)  # fmt: skip
        except Exception as exc:
            log.warning(
                "check-back of batch %s: COMMIT of its %d half batches on %s:%d failed "
                "(answering UNKNOW): %s",
                batch,
                len(queue),
                mine.topic,
                mine.queue_id,
                exc,
            )
            return LocalTransactionState.UNKNOW
        with self._lock:
            if len(self._committed) >= 4096:  # only a memo: forgetting costs one no-op ranged request
                self._committed.clear()
            self._committed.add(key)
        return LocalTransactionState.COMMIT_MESSAGE


#: (pid, NameServer, sink, check listener timeout, trace, client settings): a changed setting or a
#: forked worker gets its own producer, never one built with other settings
_PRODUCERS: dict[
    tuple[int, str, str, int, tuple[bool, str | None], ClientConfig | None], TransactionProducer
] = {}
_PRODUCERS_LOCK = threading.Lock()
# Never evicted: a sink's producer answers the broker's check-backs of its half messages, and a
# half nobody answers is rolled back after the broker's last check.


def _after_fork_in_child() -> None:
    # a lock some other thread held at the fork would stay held in the child for good, and the
    # parent's producers (their threads did not fork) are not the child's to use
    global _PRODUCERS_LOCK
    _PRODUCERS_LOCK = threading.Lock()
    _PRODUCERS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def executor_producer(
    name_server: str,
    sink_id: str,
    timeout_ms: int,
    *,
    trace: tuple[bool, str | None] = (False, None),
    client: ClientConfig | None = None,
) -> TransactionProducer:
    """The process-wide transactional producer of a sink: kept alive to answer check-backs;
    ``trace`` is (enableMsgTrace, traceTopic); ``client`` the sink's TLS and ACL settings, used by
    the producer (half sends, check-back answers) and by its check listener."""
    from rocketq.client.config import ClientConfig
    from rocketq.client.producer import TransactionProducer

    key = (os.getpid(), name_server, sink_id, timeout_ms, trace, client)
    with _PRODUCERS_LOCK:
        producer = _PRODUCERS.get(key)
        if producer is None:
            producer = TransactionProducer(
                name_server,
                producer_group=producer_group(sink_id),
                check_listener=CheckResolver(name_server, timeout_ms, client),
                client=client or ClientConfig(),
                check_thread_pool_max_size=2,
                enable_msg_trace=trace[0],
                custom_trace_topic=trace[1],
            )
            producer.start()
            _PRODUCERS[key] = producer
        return producer


# -- the driver's commit protocol ----------------------------------------------------------------

_UNCERTAIN: set[tuple[str, str]] = set()  # (sink, batch) whose record append has an unknown outcome
_DRIVER_LOGS: dict[tuple[int, str, str, ClientConfig | None], CommitLog] = {}


def driver_commit_log(opts: SinkOptions, sink_id: str) -> CommitLog:
    from rocketq.connector.access import executor_access

    key = (os.getpid(), opts.name_server, sink_id, opts.client)
    found = _DRIVER_LOGS.get(key)
    if found is None:
        access = executor_access(opts.name_server, opts.commit_timeout_ms, opts.client)
        found = _DRIVER_LOGS[key] = CommitLog(
            access, sink_id, timeout_ms=opts.commit_timeout_ms, client=opts.client
        )
    return found


def _append_settled(commit_log: CommitLog, record: CommitRecord, deadline_s: float) -> CommitRecord:
    """Append ``record`` until a record of its batch is readable; returns the one that won.

    A failed append may still have been stored; appending the same content again is harmless
    (the first record of a batch wins and every copy made here is identical)."""
    key = (record.sink, record.batch)
    _UNCERTAIN.add(key)
    last: Exception | None = None
    while True:
        appended = False
        try:
            commit_log.append(record)
            appended = True
        except SinkError as exc:
            last = exc
        # A stored record becomes readable once the broker has dispatched it (milliseconds): look
        # again soon, then back off; re-append only after that (or at once if the append failed).
        delay = 0.005
        for _ in range(8 if appended else 1):
            try:
                found = commit_log.find(record.batch)
                if found is not None:
                    _UNCERTAIN.discard(key)
                    return found
            except Exception as exc:  # the broker may be restarting
                last = exc
            if time.monotonic() > deadline_s:
                raise SinkError(f"could not store the commit record of batch {record.batch}: {last}")
            time.sleep(delay if appended else 0.5)
            delay = min(2 * delay, 0.25)


def commit_batch(opts: SinkOptions, sink_id: str, batch: str, handles: list[HalfBatch]) -> tuple[int, int]:
    """Commit ``handles`` as batch ``batch`` exactly once; (messages committed, messages rolled back).

    Idempotent: when the batch already has a record (a replay after a driver restart) the recorded
    halves are committed again (a no-op on the broker if done) and ``handles`` not in it are
    rolled back."""
    commit_log = driver_commit_log(opts, sink_id)
    group = producer_group(sink_id)
    record = commit_log.find(batch)
    if record is None:
        commit_log.prepare()  # a refused topic creation fails here, before the record may exist
        deadline = time.monotonic() + 3 * opts.commit_timeout_ms / 1000
        record = _append_settled(commit_log, CommitRecord.of(sink_id, batch, handles), deadline)
    else:
        log.warning(
            "rocketmq sink %s: batch %s was already committed; replayed halves are rolled back",
            sink_id,
            batch,
        )
    api = commit_log.access.api
    _commit_until(api, group, record.handles, opts.commit_timeout_ms)
    extra = [h for h in handles if not record.lists(h.write_id, h.req)]
    _rollback_quietly(api, group, extra, opts.commit_timeout_ms)
    _UNCERTAIN.discard((sink_id, batch))
    return sum(h.count for h in record.handles), sum(h.count for h in extra)


def _commit_until(
    api: BlockingMQClientAPI, group: str, handles: Sequence[HalfBatch], timeout_ms: int
) -> None:
    """COMMIT ``handles``, retrying (busy broker, lost connection) for up to 3 timeouts.

    Repeating a COMMIT is harmless on rocketq brokers: ended offsets are skipped."""
    deadline = time.monotonic() + 3 * timeout_ms / 1000
    delay = 0.2
    while True:
        try:
            end_handles(api, group, handles, LocalTransactionState.COMMIT_MESSAGE, timeout_ms)
            return
        except Exception as exc:
            if time.monotonic() + delay > deadline:
                raise SinkError(f"COMMIT of {len(handles)} half batches failed: {exc}") from exc
            log.warning("COMMIT of %d half batches failed, retrying: %s", len(handles), exc)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def abort_batch(opts: SinkOptions, sink_id: str, batch: str, handles: list[HalfBatch]) -> None:
    """Roll back ``handles`` unless the batch is (or may be) committed; never raises."""
    if (sink_id, batch) in _UNCERTAIN:
        log.warning(
            "rocketmq sink %s: abort of batch %s: its commit record may exist; left to check-backs",
            sink_id,
            batch,
        )
        return
    try:
        record = driver_commit_log(opts, sink_id).find(batch)
    except Exception as exc:  # check-backs and the replay resolve the halves
        log.warning(
            "rocketmq sink %s: abort of batch %s cannot read the commit log (%s); left to check-backs",
            sink_id,
            batch,
            exc,
        )
        return
    try:
        if record is not None:
            commit_batch(opts, sink_id, batch, handles)  # committed already: finish it
        else:
            _rollback_quietly(
                driver_commit_log(opts, sink_id).access.api,
                producer_group(sink_id),
                handles,
                opts.commit_timeout_ms,
            )
    except Exception as exc:
        log.warning(
            "rocketmq sink %s: abort of batch %s incomplete (%s); left to check-backs", sink_id, batch, exc
        )


def _rollback_quietly(
    api: BlockingMQClientAPI, group: str, handles: Sequence[HalfBatch], timeout_ms: int
) -> None:
    """ROLLBACK is an optimisation (check-backs roll these back too): failures are only logged."""
    try:
        end_handles(api, group, handles, LocalTransactionState.ROLLBACK_MESSAGE, timeout_ms)
    except Exception as exc:
        log.warning(
            "rollback of %d half batches failed (check-backs will roll them back): %s", len(handles), exc
        )
