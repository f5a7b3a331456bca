"""Running streaming queries ride through a broker restart, a master failover and a NameServer restart.

Each test runs two processing-time queries over one source topic in the shared local Spark
session: one into the exactly-once sink (``deliveryGuarantee=exactlyOnce``, an output topic on a
second cluster that is never faulted, so only the source is under test), one into a memory sink.
Producer threads send numbered messages the whole time; the fault comes while they send:

* a broker SIGKILLed and restarted 8 s later on the same port and store (the NameServer drops it
  from the route meanwhile);
* the master of a controller-mode group of three brokers SIGKILLed (a slave is elected);
* the NameServer SIGKILLed and restarted on its port (empty until the broker registers again).

Then the exactly-once output must hold every record of the source topic exactly once (every
acknowledged message, nothing that was never sent; a message the producer retried after the
fault lost its answer is two records of the source, as in RocketMQ), and the memory sink every
acknowledged message at least once with no gap in any queue's offsets, while both queries are
still running without an exception.  The source's retry options keep their defaults: the
defaults are what is promised to ride through.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.config import ClientConfig
from rocketq.client.model import Message, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.testing import ControllerGroup, create_topic, wait_for
from rocketq.client.testing.chaos import SEND_ERRORS, Ledger, Load
from rocketq.client.testing.messaging import read_topic
from rocketq.client.testing.restartable import RestartableCluster
from rocketq.client.testing.wait import WaitTimeout
from rocketq.connector.testing import SPARK_BROKER_CONF, Cluster, local_cluster

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark

QUEUES = 4
TRIGGER = "500 milliseconds"
SEND_PAUSE_S = 0.05
BROKER_DOWN_S = 8.0
START_S = 180.0  # a first micro-batch of both queries (Spark starts its Python runners)
DRAIN_S = 150.0  # both queries read everything acknowledged (a loaded 2-core machine)
FAST_CLIENT = ClientConfig(
    poll_name_server_interval_ms=1000, heartbeat_broker_interval_ms=1000, mq_client_api_timeout_ms=2000
)


@pytest.fixture(scope="module")
def sink_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Where the exactly-once query writes: never faulted."""
    with local_cluster(tmp_path_factory.mktemp("ride-sink"), flushDiskType="SYNC_FLUSH") as c:
        yield c


def send_loop(producer: Producer, topic: str, ledger: Ledger) -> Callable[[threading.Event], None]:
    """Numbered messages, one at a time; a failed send is not made again (its number is skipped)."""

    def loop(stop: threading.Event) -> None:
        deadline = time.monotonic() + 600
        seq = 0
        while not stop.is_set() and time.monotonic() < deadline:
            seq += 1
            msg = Message(topic, f"{topic}-{seq}".encode())
            sent_at = time.monotonic()
            try:
                result = producer.send(msg)
            except SEND_ERRORS:
                ledger.add_failed()
                time.sleep(0.2)
                continue
            ledger.record([msg], [result], sent_at, time.monotonic())
            time.sleep(SEND_PAUSE_S)

    return loop


#: what Spark says when a Python runner it spawned did not connect back in time (a loaded machine)
SPARK_START_FAILURE = "failed to connect back"


class Queries:
    """The exactly-once query and the memory query over one source topic."""

    def __init__(self, spark: Any, ns_addr: str, topic: str, sink: Cluster, tmp: Path) -> None:
        self.spark, self.ns_addr, self.topic, self.sink, self.tmp = spark, ns_addr, topic, sink, tmp
        self.out_topic = f"{topic}Out"
        self.memory_table = f"ride_{topic.lower()}"
        self.restarts = 0
        create_topic(sink.namesrv_addr, self.out_topic, QUEUES, broker_addr=sink.broker_addr)
        self.eos = self.start_eos()
        wait_for(lambda: self.eos.lastProgress is not None or not self.eos.isActive, "a first batch", START_S)
        self.memory = self.start_memory()  # one at a time: each spawns Python runners

    def source(self, group: str) -> Any:
        return (
            self.spark.readStream.format("rocketmq")
            .option("nameServer", self.ns_addr)
            .option("topic", self.topic)
            .option("group", group)
            .option("startingOffsets", "earliest")
            .load()
        )

    def start_eos(self) -> Any:
        return (
            self.source(f"{self.topic}-eos")
            .select("body")
            .writeStream.format("rocketmq")
            .option("nameServer", self.sink.namesrv_addr)
            .option("topic", self.out_topic)
            .option("deliveryGuarantee", "exactlyOnce")
            .option("checkpointLocation", str(self.tmp / "eos-checkpoint"))
            .trigger(processingTime=TRIGGER)
            .start()
        )

    def start_memory(self) -> Any:
        # a new checkpoint each time: a memory table does not outlive its query
        return (
            self.source(f"{self.topic}-memory")
            .select("body", "queueId", "queueOffset")
            .writeStream.format("memory")
            .queryName(self.memory_table)
            .option("checkpointLocation", str(self.tmp / f"memory-checkpoint-{self.restarts}"))
            .trigger(processingTime=TRIGGER)
            .start()
        )

    def restart_if_spark_failed_to_start(self) -> None:
        """Before the fault only: a query Spark could not start (its Python runner did not
        connect back on a loaded machine) is started again, at most four times in all."""
        for name, start in (("eos", self.start_eos), ("memory", self.start_memory)):
            query = getattr(self, name)
            failed = query.exception()
            if failed is not None and SPARK_START_FAILURE in str(failed) and self.restarts < 4:
                query.stop()
                self.restarts += 1
                setattr(self, name, start())

    def memory_rows(self) -> list[Any]:
        sql = f"select cast(body as string) as id, queueId, queueOffset from {self.memory_table}"
        return list(self.spark.sql(sql).collect())

    def output_ids(self) -> list[str]:
        return [m.body.decode() for m in read_topic(self.sink.namesrv_addr, self.out_topic)]

    def check_alive(self) -> None:
        for q in (self.eos, self.memory):
            active = q.isActive  # before the exception: a query may die between the two calls
            assert q.exception() is None, q.exception()
            assert active, f"{q.name} stopped"

    def stop(self) -> None:
        for q in (self.eos, self.memory):
            q.stop()


def batches_done(q: Any) -> int:
    progress = q.lastProgress
    return -1 if progress is None else int(progress["batchId"])


def ride_through(
    spark: Any,
    ns_addr: str,
    topic: str,
    sink: Cluster,
    tmp: Path,
    fault: Callable[[], None],
    client: ClientConfig,
) -> None:
    """Send while the queries run, play ``fault``, send on, then check what both sinks hold."""
    producer = Producer(ns_addr, producer_group=f"{topic}-producer", send_msg_timeout_ms=3000, client=client)
    producer.start()
    ledger = Ledger()
    load = Load(producer, [send_loop(producer, topic, ledger)])
    queries: Queries | None = None
    try:
        queries = Queries(spark, ns_addr, topic, sink, tmp)

        def reading() -> bool:
            queries.restart_if_spark_failed_to_start()
            queries.check_alive()
            return ledger.count() > 40 and min(batches_done(queries.memory), batches_done(queries.eos)) >= 0

        wait_for(reading, "sends and a first micro-batch of each query", START_S)
        before = batches_done(queries.memory)
        fault()
        sent = ledger.count()
        wait_for(ledger.more_than(SendStatus.SEND_OK, sent + 40), "sends after the fault", 90)
        load.stop_sending()
        acked = {a.body.decode() for a in ledger.acked()}
        answered = sum(ledger.status_counts().values())
        attempted = {f"{topic}-{i}" for i in range(1, answered + ledger.failed + 1)}

        def memory_has_all() -> bool:
            queries.check_alive()
            return acked <= {r["id"] for r in queries.memory_rows()}

        def output_has_all() -> bool:
            queries.check_alive()
            return acked <= set(queries.output_ids())

        wait_for(memory_has_all, "the memory query to read every acknowledged message", DRAIN_S)
        wait_for(output_has_all, "the exactly-once query to write every acknowledged message", DRAIN_S)
        # A send whose answer the fault lost is retried by the producer, so the source topic may
        # hold a message twice (at-least-once delivery, as in RocketMQ): exactly once means the
        # output holds each source record once, i.e. the same multiset of bodies as the source.
        source = Counter(m.body.decode() for m in read_topic(ns_addr, topic))

        def output_is_source() -> bool:
            queries.check_alive()
            return Counter(queries.output_ids()) == source

        try:
            wait_for(output_is_source, "the exactly-once output to equal the source", DRAIN_S, interval_s=0.5)
        except WaitTimeout:
            pass  # the assertions below say how they differ
        queries.check_alive()
        assert batches_done(queries.memory) > before
        output = Counter(queries.output_ids())
        extra = {i: n - source[i] for i, n in output.items() if n > source[i]}
        assert not extra, f"written more often than in the source topic: {sorted(extra.items())[:20]}"
        unwritten = {i: n - output[i] for i, n in source.items() if output[i] < n}
        assert not unwritten, f"in the source topic but not written: {sorted(unwritten.items())[:20]}"
        assert set(output) <= attempted, sorted(set(output) - attempted)[:20]
        # at least once, no gap: every queue's offsets from 0 to the last one read
        offsets: dict[int, set[int]] = {}
        for row in queries.memory_rows():
            offsets.setdefault(int(row["queueId"]), set()).add(int(row["queueOffset"]))
        for queue_id, seen in offsets.items():
            missing = set(range(max(seen) + 1)) - seen
            assert not missing, f"queue {queue_id}: offsets never read: {sorted(missing)[:20]}"
        resent = sum(n - 1 for n in source.values())
        print(f"{topic}: {len(acked)} acknowledged, {ledger.failed} failed, {resent} stored twice by a retry")
    finally:
        load.stop_sending()
        producer.shutdown()
        if queries is not None:
            queries.stop()


def test_a_broker_sigkill_and_restart_on_its_port(
    spark_session: Any, sink_cluster: Cluster, tmp_path: Path
) -> None:
    cluster = RestartableCluster(tmp_path / "cluster", SPARK_BROKER_CONF)
    try:
        topic = "RideBroker"
        create_topic(cluster.namesrv_addr, topic, QUEUES, broker_addr=cluster.broker_addr)

        def fault() -> None:
            cluster.broker.kill9()
            time.sleep(BROKER_DOWN_S)
            cluster.start_broker()

        ride_through(spark_session, cluster.namesrv_addr, topic, sink_cluster, tmp_path, fault, FAST_CLIENT)
    finally:
        print(cluster.close())


def test_a_name_server_restart(spark_session: Any, sink_cluster: Cluster, tmp_path: Path) -> None:
    cluster = RestartableCluster(tmp_path / "cluster", SPARK_BROKER_CONF)
    try:
        topic = "RideNamesrv"
        create_topic(cluster.namesrv_addr, topic, QUEUES, broker_addr=cluster.broker_addr)

        def fault() -> None:
            cluster.namesrv.kill9()
            time.sleep(3.0)
            cluster.start_namesrv()

        ride_through(spark_session, cluster.namesrv_addr, topic, sink_cluster, tmp_path, fault, FAST_CLIENT)
    finally:
        print(cluster.close())


def test_a_master_failover_in_controller_mode(
    spark_session: Any, sink_cluster: Cluster, tmp_path: Path
) -> None:
    group = ControllerGroup(tmp_path / "group", "broker-ride", client=FAST_CLIENT)
    try:
        master, _ = group.wait_master("a master with every broker in sync", group.full_set)
        topic = "RideFailover"
        create_topic(group.namesrv_addr, topic, QUEUES, broker_addr=master)
        for slot in range(len(group.ports)):
            knows = functools.partial(group.knows_topic, group.addr(slot), topic)
            wait_for(knows, f"broker {slot} to know {topic}", 60)

        def fault() -> None:
            group.broker(group.slot_of(master)).kill9()
            group.wait_new_master(master)

        ride_through(spark_session, group.namesrv_addr, topic, sink_cluster, tmp_path, fault, FAST_CLIENT)
    finally:
        print(group.close())
