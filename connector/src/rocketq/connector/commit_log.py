"""The exactly-once sink's durable commit record: one small topic per sink, read by driver and executors.

Theory of operation.  Before the driver ends the transactions of a micro-batch it appends a
:class:`CommitRecord` ``{sink, batch, writes, handles}`` to ``RQ_SINK_COMMITS_<sink_id>`` (one
queue, on the first master by broker name) with a synchronous send; with ``SYNC_FLUSH`` the
broker answers after the flush, so the record is durable before any COMMIT is sent.  The record
is the single truth of "batch N of this sink is committed, with exactly these half batches":

* ``writes`` maps each accepted task attempt (``write_id``) to the request numbers whose half
  batches it confirmed; a half message is committed iff the ``(write_id, req)`` of its ``__RQ_TXN``
  property (:class:`TxnTag`) is listed;
* ``handles`` are the :class:`HalfBatch`\\ es to end, so a replayed batch (driver restart) can
  re-send COMMIT for them even when the broker has parked them.

:func:`decide` is the pure check-back rule used by executors (:mod:`.transactional`): listed ->
COMMIT; the batch has a record but the half is not listed -> ROLLBACK (failed, speculative or
replayed attempt); no record but a record of a later batch exists -> ROLLBACK (an orphan of a
batch that can no longer commit, since Spark runs batch N+1 only after N committed); otherwise
UNKNOW (the batch may still commit).  Bodies are zlib-compressed JSON.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig
from rocketq.client.errors import NoPermissionError, RocketQError
from rocketq.client.model import LocalTransactionState, Message, PullStatus, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.message import iter_stored_messages
from rocketq.client.remoting.route import TopicRouteData
from rocketq.client.remoting.vocabulary import MASTER_ID, MessageQueue
from rocketq.connector.access import BrokerAccess
from rocketq.connector.errors import SinkError

log = logging.getLogger("rocketq.connector.eos")

COMMIT_TOPIC_PREFIX = "RQ_SINK_COMMITS_"
RECORD_TAG = "commit"
MAX_RECORD_BYTES = 3 * 1024 * 1024  # below the broker's 4 MiB maxMessageSize
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # the broker's maxMessageSize
RECORD_VERSION = 1
PROP_SINK = "__RQ_SINK"  # on commit records
PROP_BATCH = "__RQ_BATCH"  # on commit records
#: on every half (and committed) message of an exactly-once sink: who sent it, see :class:`TxnTag`
PROP_TXN = "__RQ_TXN"
REQ_WIDTH = 10  # digits of the request number: a resend renumbers an encoded batch in place


@dataclass(frozen=True, slots=True)
class TxnTag:
    """The ``__RQ_TXN`` value of a half message: ``<req>:<attempt>:<partition>:<write_id>:<batch>:<sink>``.

    ``req`` is written with :data:`REQ_WIDTH` digits and comes first; the sink id (the only
    free-form part) comes last, so the value splits unambiguously on the first five colons."""

    sink: str
    batch: str
    write_id: str
    partition: int
    attempt: int
    req: int

    def text(self) -> str:
        req = f"{self.req:0{REQ_WIDTH}d}"
        return f"{req}:{self.attempt}:{self.partition}:{self.write_id}:{self.batch}:{self.sink}"

    @classmethod
    def parse(cls, text: str | None) -> TxnTag | None:
        """The tag of a ``__RQ_TXN`` value, or None if it is not one."""
        parts = (text or "").split(":", 5)
        if len(parts) != 6 or not all(p.isdigit() for p in parts[:3]) or not all(parts[3:]):
            return None
        req, attempt, partition, write_id, batch, sink = parts
        return cls(sink, batch, write_id, int(partition), int(attempt), int(req))


def commit_topic(sink_id: str) -> str:
    topic = COMMIT_TOPIC_PREFIX + sink_id
    assert len(topic) <= 127
    return topic


def producer_group(sink_id: str) -> str:
    return f"rq-eos-{sink_id}"


def record_producer_group(sink_id: str) -> str:
    """The producer group of the driver's commit-record sends: not the sink's transactional group,
    so that a broker never picks the driver's connection to ask a half message's check-back."""
    return f"rq-eos-commit-{sink_id}"


@dataclass(frozen=True, slots=True)
class HalfBatch:
    """Half messages stored by one request on one queue: the client's ``HalfBatchResult`` plus
    the task attempt (``write_id``) and send attempt (``req``) that stored them.

    ``ranged``: contiguous half offsets from ``first_half_offset`` (rocketq brokers); otherwise
    ``half_offsets`` lists them (Apache RocketMQ: one transaction per message).
    """

    topic: str
    broker_addr: str
    broker_name: str
    queue_id: int
    first_half_offset: int
    count: int
    first_commit_log_offset: int
    msg_ids: tuple[str, ...]
    transaction_ids: tuple[str, ...]
    write_id: str = ""
    req: int = 0
    ranged: bool = True
    half_offsets: tuple[int, ...] = ()
    data_bytes: int = 0

    def to_obj(self) -> dict[str, Any]:
        return {
            "t": self.topic, "a": self.broker_addr, "b": self.broker_name, "q": self.queue_id,
            "h": self.first_half_offset, "n": self.count, "c": self.first_commit_log_offset,
            "m": list(self.msg_ids), "x": list(self.transaction_ids), "w": self.write_id, "r": self.req,
            "g": self.ranged, "hs": list(self.half_offsets), "d": self.data_bytes,
        }  # fmt: skip

    @classmethod
    def from_obj(cls, o: dict[str, Any]) -> HalfBatch:
        return cls(
            str(o["t"]), str(o["a"]), str(o["b"]), int(o["q"]), int(o["h"]), int(o["n"]), int(o["c"]),
            tuple(o["m"]), tuple(o["x"]), str(o["w"]), int(o["r"]), bool(o.get("g", True)),
            tuple(int(v) for v in o.get("hs") or ()), int(o.get("d", 0)),
        )  # fmt: skip

    @property
    def ident(self) -> tuple[str, int]:
        return self.write_id, self.req


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """Batch ``batch`` of sink ``sink`` is committed with exactly these task attempts and halves."""

    sink: str
    batch: str
    writes: dict[str, tuple[int, ...]]
    handles: tuple[HalfBatch, ...]
    committed_at_ms: int = 0

    @classmethod
    def of(cls, sink: str, batch: str, handles: list[HalfBatch]) -> CommitRecord:
        writes: dict[str, list[int]] = {}
        for h in handles:
            writes.setdefault(h.write_id, []).append(h.req)
        return cls(
            sink,
            batch,
            {w: tuple(sorted(r)) for w, r in writes.items()},
            tuple(handles),
            int(time.time() * 1000),
        )

    def lists(self, write_id: str, req: int) -> bool:
        return req in self.writes.get(write_id, ())

    def to_body(self) -> bytes:
        obj = {
            "v": RECORD_VERSION, "sink": self.sink, "batch": self.batch,
            "writes": {w: list(r) for w, r in self.writes.items()},
            "handles": [h.to_obj() for h in self.handles], "at": self.committed_at_ms,
        }  # fmt: skip
        body = zlib.compress(json.dumps(obj, separators=(",", ":")).encode(), 6)
        if len(body) > MAX_RECORD_BYTES:
            raise SinkError(
                f"the commit record of batch {self.batch} takes {len(body)} bytes (> {MAX_RECORD_BYTES}): "
                "lower the rows per micro-batch (e.g. the source's maxMessagesPerTrigger)"
            )
        return body

    @classmethod
    def from_body(cls, body: bytes) -> CommitRecord:
        o = json.loads(zlib.decompress(body))
        return cls(
            str(o["sink"]),
            str(o["batch"]),
            {str(w): tuple(int(x) for x in r) for w, r in o["writes"].items()},
            tuple(HalfBatch.from_obj(h) for h in o["handles"]),
            int(o.get("at", 0)),
        )


def batch_number(batch: str) -> int | None:
    """The micro-batch id of a streaming batch key; None for a batch-write job key."""
    return int(batch) if batch.lstrip("-").isdigit() else None


@dataclass
class CommitIndex:
    """The records of one sink read so far (first record of a batch wins), and where to read on."""

    records: dict[str, CommitRecord] = field(default_factory=dict)
    max_batch: int = -1
    next_offset: int = 0

    def add(self, record: CommitRecord) -> None:
        if record.batch in self.records:
            return  # a second record of a batch (a racing commit) never overrides the first
        self.records[record.batch] = record
        number = batch_number(record.batch)
        if number is not None:
            self.max_batch = max(self.max_batch, number)


def decide(index: CommitIndex, batch: str, write_id: str, req: int) -> LocalTransactionState:
    """The check-back answer for a half message of ``(batch, write_id, req)`` (module docstring)."""
    record = index.records.get(batch)
    if record is not None:
        return (
            LocalTransactionState.COMMIT_MESSAGE
            if record.lists(write_id, req)
            else LocalTransactionState.ROLLBACK_MESSAGE
        )
    number = batch_number(batch)
    if number is not None and index.max_batch > number:
        return LocalTransactionState.ROLLBACK_MESSAGE
    return LocalTransactionState.UNKNOW


class CommitLog:
    """Reads and appends the commit records of one sink through a :class:`BrokerAccess`."""

    def __init__(
        self,
        access: BrokerAccess,
        sink_id: str,
        *,
        timeout_ms: int = 10_000,
        client: ClientConfig | None = None,
    ) -> None:
        self.access = access
        #: the sink's client settings (TLS, ACL credentials): ``access`` was built with the same
        self.client = client
        self.sink_id = sink_id
        self.topic = commit_topic(sink_id)
        self.timeout_ms = timeout_ms
        self.index = CommitIndex()
        self._lock = threading.Lock()
        self._addr: tuple[str, str] | None = None  # (broker name, master address)
        self._producer: Producer | None = None  # the driver's, made by its first append

    # -- location ----------------------------------------------------------------------------

    def _locate(self, *, create: bool) -> tuple[str, str] | None:
        if self._addr is not None:
            return self._addr
        route = self.access.route(self.topic, missing_ok=True)
        if route is None or not route.queue_datas:
            if not create:
                return None
            self._create()
            route = self._wait_route()
        masters = {bd.broker_name: bd.broker_addrs.get(MASTER_ID) for bd in route.broker_datas}
        name = sorted(qd.broker_name for qd in route.queue_datas)[0]
        addr = masters.get(name)
        if not addr:
            raise SinkError(f"commit-log topic {self.topic}: broker {name} has no master")
        self._addr = (name, addr)
        return self._addr

    def prepare(self) -> None:
        """Find (or create) the commit-log topic; a clear SinkError when that is not allowed.

        Called by the driver before it records a batch, so that a refusal (an ACL account without
        admin rights) fails the batch before anything may have been stored."""
        with self._lock:
            self._locate(create=True)

    def _create(self) -> None:
        info = self.access.api.get_broker_cluster_info(self.timeout_ms)
        masters = sorted(
            (bd.broker_name, bd.master_addr) for bd in info.broker_addr_table.values() if bd.master_addr
        )
        if not masters:
            raise SinkError("no master broker to hold the exactly-once commit log")
        try:
            with Admin(self.access.name_server, config=self.client) as admin:
                admin.create_topic(
                    self.topic, broker_addr=masters[0][1], read_queue_nums=1, write_queue_nums=1
                )
        except NoPermissionError as exc:
            raise SinkError(
                f"the exactly-once sink cannot create its commit-log topic {self.topic}: the broker "
                f"refused ({exc.remark or exc}). With ACL on, create it beforehand with an admin "
                f"account (mqadmin updateTopic -t {self.topic} -r 1 -w 1 ...) and give the sink's "
                f"account PUB|SUB on it and SUB on group rq-eos-reader-{self.sink_id} "
                "(docs/security.md), or use an admin account"
            ) from exc
        log.info("created the commit-log topic %s on %s", self.topic, masters[0][0])

    def _wait_route(self) -> TopicRouteData:
        deadline = time.monotonic() + max(self.timeout_ms / 1000, 5.0)
        while True:
            route = self.access.route(self.topic, missing_ok=True)
            if route is not None and route.queue_datas:
                return route
            if time.monotonic() > deadline:
                raise SinkError(f"the commit-log topic {self.topic} did not appear in the NameServer route")
            time.sleep(0.1)

    # -- read ----------------------------------------------------------------------------------

    def refresh(self) -> CommitIndex:
        """Read records appended since the last call (none if the topic does not exist yet)."""

        with self._lock:
            where = self._locate(create=False)
            if where is None:
                return self.index
            name, addr = where
            queue = MessageQueue(self.topic, name, 0)
            while True:
                result = self.access.pull(
                    queue, addr, self.index.next_offset, group=f"rq-eos-reader-{self.sink_id}", max_nums=256,
                    max_bytes=8 * 1024 * 1024, sub_expression="*", timeout_ms=self.timeout_ms,
                )  # fmt: skip
                if result.status is PullStatus.OFFSET_ILLEGAL:
                    self.index.next_offset = result.next_begin_offset
                    continue
                if result.status is not PullStatus.FOUND:
                    return self.index
                for msg in iter_stored_messages(result.body):
                    self._add(msg.body, msg.queue_offset)
                self.index.next_offset = result.next_begin_offset

    def _add(self, body: bytes, offset: int) -> None:
        try:
            record = CommitRecord.from_body(body)
        except (ValueError, KeyError, TypeError, zlib.error) as exc:
            log.warning(
                "commit log %s: skipping an unreadable record at offset %d: %s", self.topic, offset, exc
            )
            return
        if record.sink == self.sink_id:
            self.index.add(record)

    def find(self, batch: str) -> CommitRecord | None:
        """The record of ``batch``, reading the topic up to its end first."""
        return self.refresh().records.get(batch)

    # -- append --------------------------------------------------------------------------------

    def _record_producer(self) -> Producer:
        """The producer of this sink's commit records: one queue, sent as they are (the body is
        compressed already), to the master the client finds for the queue's broker."""
        if self._producer is None:
            producer = Producer(
                self.access.name_server,
                producer_group=record_producer_group(self.sink_id),
                client=self.client or ClientConfig(),
                send_msg_timeout_ms=self.timeout_ms,
                default_topic_queue_nums=1,
                compress_msg_body_over_howmuch=MAX_MESSAGE_BYTES,
                max_message_size=MAX_MESSAGE_BYTES,
            )
            producer.start()
            self._producer = producer
        return self._producer

    def append(self, record: CommitRecord) -> None:
        """Synchronous send of ``record``; returns once the broker stored it (flushed with SYNC_FLUSH)."""
        body = record.to_body()
        name, _ = self._locate(create=True) or ("", "")
        msg = Message(
            self.topic,
            body,
            tags=RECORD_TAG,
            keys=f"{record.sink}:{record.batch}",
            properties={PROP_SINK: record.sink, PROP_BATCH: record.batch},
        )
        try:
            result = self._record_producer().send(msg, queue=MessageQueue(self.topic, name, 0))
        except RocketQError as exc:
            raise SinkError(
                f"appending the commit record of batch {record.batch} to {self.topic} failed: {exc}"
            ) from exc
        if result.send_status is not SendStatus.SEND_OK:
            # FLUSH_DISK_TIMEOUT & co: stored but not confirmed durable; the caller fails the
            # commit, and a replay finds (or not) the record and acts on what is really there.
            raise SinkError(
                f"commit record of batch {record.batch}: broker answered {result.send_status.value}"
            )
