"""Helpers for the connector's integration tests and benchmarks.

:func:`local_cluster` starts a real NameServer and broker (``python -m rocketq.namesrv`` /
``python -m rocketq.broker``) in a temporary directory with the launcher
(:mod:`rocketq.client.launcher`), with broker settings suited to Spark reads (large pull batches);
:func:`produce` writes messages to chosen queues with the client producer, and
:func:`produce_fast` writes large volumes through the connector's bulk sink path (no Spark).
:class:`InMemoryQueues` stands in for the broker's queue offsets under a driver's stream reader
(:func:`stream_reader`), for unit tests of offset planning without a broker.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from rocketq.client import launcher
from rocketq.client.admin import Admin
from rocketq.client.errors import NoRouteError
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.testing import wait_for
from rocketq.connector.options import parse_sink_options, parse_source_options
from rocketq.connector.source import RocketMQStreamReader
from rocketq.connector.writer import AtLeastOnceStrategy, write_batches

#: Broker settings that matter for Spark throughput (see docs/connector.md).
SPARK_BROKER_CONF: dict[str, object] = {
    "maxTransferCountOnMessageInMemory": 8192,
    "maxTransferBytesOnMessageInMemory": 8 * 1024 * 1024,
    "defaultTopicQueueNums": 8,
}


@dataclass
class Cluster:
    namesrv_addr: str
    broker_addr: str
    broker_name: str
    tmp: Path


@contextlib.contextmanager
def local_cluster(tmp: Path | str | None = None, **broker_conf: object) -> Iterator[Cluster]:
    """A NameServer and one broker as subprocesses; both are stopped on exit."""
    with contextlib.ExitStack() as stack:
        if tmp is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="rocketq-spark-"))
        conf = {**SPARK_BROKER_CONF, **broker_conf}
        started = stack.enter_context(launcher.local_cluster(tmp, broker_conf=conf))
        yield Cluster(started.namesrv_addr, started.broker_addr, started.broker_name, started.work_dir)


def create_topic(cluster: Cluster, topic: str, queues: int, *, timeout_s: float = 20.0) -> None:
    """Create (or resize) ``topic`` with ``queues`` read/write queues and wait for the route."""
    with Admin(cluster.namesrv_addr) as admin:
        admin.create_topic(
            topic, broker_addr=cluster.broker_addr, read_queue_nums=queues, write_queue_nums=queues
        )

        def routed() -> bool:
            try:
                return sum(qd.read_queue_nums for qd in admin.topic_route(topic).queue_datas) == queues
            except NoRouteError:
                return False

        wait_for(routed, f"the route of {topic} to show {queues} queues", timeout_s, interval_s=0.1)


def produce(
    cluster: Cluster,
    topic: str,
    bodies: Sequence[bytes],
    *,
    queue_ids: Sequence[int] | None = None,
    tags: Sequence[str | None] | None = None,
    keys: Sequence[str | None] | None = None,
) -> None:
    """Send one message per body (to ``queue_ids[i]`` when given) and wait for every answer."""
    with Producer(cluster.namesrv_addr, producer_group="connector-testing") as producer:
        for i, body in enumerate(bodies):
            msg = Message(topic, body, tags=tags[i] if tags else None, keys=keys[i] if keys else None)
            queue = MessageQueue(topic, cluster.broker_name, queue_ids[i]) if queue_ids is not None else None
            producer.send(msg, queue=queue)


def produce_fast(namesrv_addr: str, topic: str, batches: Iterator[pa.RecordBatch]) -> int:
    """Write Arrow batches (sink columns: body, keys, tags, queueId ...) with the bulk sink path."""
    opts = parse_sink_options({"nameServer": namesrv_addr, "topic": topic})
    return write_batches(opts, batches, AtLeastOnceStrategy(opts)).rows


class InMemoryQueues:
    """The queues of one topic (broker ``b`` at ``addr``) with their min and max offsets as the
    broker reports them, in place of the stream reader's broker access; committed offsets are
    recorded, and ``slave`` says whether a slave (its master down) answers."""

    def __init__(self, maxes: dict[int, int], *, topic: str = "t", addr: str = "127.0.0.1:10911") -> None:
        self.topic, self.addr = topic, addr
        self.maxes = dict(maxes)
        self.mins = {q: 0 for q in maxes}
        self.slave = False
        self.committed: dict[tuple[str, int], int] = {}

    def ref(self, q: int) -> MessageQueue:
        return MessageQueue(self.topic, "b", q)

    def recreate(self, q: int, max_offset: int, min_offset: int = 0) -> None:
        """Queue ``q`` now spans ``[min_offset, max_offset)`` (a topic deleted and created again)."""
        self.maxes[q], self.mins[q] = max_offset, min_offset

    def served_by_slave(self, queue: MessageQueue) -> bool:
        return self.slave

    def discover(
        self, topics: Iterable[str], pattern: str | None, *, missing_ok: bool
    ) -> dict[MessageQueue, str]:
        return {self.ref(q): self.addr for q in sorted(self.maxes)}

    def read_queues(self, topic: str, *, missing_ok: bool = False) -> dict[MessageQueue, str]:
        return self.discover([topic], None, missing_ok=missing_ok)

    def max_offset(self, queue: MessageQueue, addr: str) -> int:
        return self.maxes[queue.queue_id]

    def max_offsets(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, int]:
        return {q: self.maxes[q.queue_id] for q in queues}

    def min_offset(self, queue: MessageQueue, addr: str) -> int:
        return self.mins[queue.queue_id]

    def commit_offset(self, queue: MessageQueue, addr: str, group: str, offset: int) -> None:
        self.committed[(group, queue.queue_id)] = offset


def stream_reader(queues: InMemoryQueues, **options: str) -> RocketMQStreamReader:
    """A driver's stream reader over ``queues``' topic (group ``g``) reading ``queues`` instead of
    a broker; ``options`` are source options."""
    base = {"nameServer": "127.0.0.1:9876", "topic": queues.topic, "group": "g"}
    reader = RocketMQStreamReader(parse_source_options({**base, **options}))
    reader._access = queues  # type: ignore[assignment]
    return reader
