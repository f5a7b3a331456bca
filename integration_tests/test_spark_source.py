"""The rocketmq Spark source against real mqnamesrv/mqbroker processes and a local Spark session.

One NameServer + broker per module (temp dir, port 0); pytest-spark's shared ``spark_session``
(local[2]).  Each test uses its own topics; memory-sink query names are unique per test.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.testing import wait_for
from rocketq.connector.testing import Cluster, create_topic, local_cluster, produce

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark
BROKER = "broker-a"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("src-cluster")) as c:
        yield c


def topic_with(cluster: Cluster, topic: str, per_queue: int, queues: int = 4, tag_of: Any = None) -> None:
    create_topic(cluster, topic, queues)
    n = per_queue * queues
    bodies = [f"{topic}-{i}".encode() for i in range(n)]
    tags = [tag_of(i) for i in range(n)] if tag_of else None
    produce(cluster, topic, bodies, queue_ids=[i % queues for i in range(n)], tags=tags)


def stream(spark: Any, cluster: Cluster, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", topic)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(spark: Any, df: Any, name: str, checkpoint: Path) -> tuple[list[Any], Any]:
    q = (
        df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    assert q.awaitTermination(300), "the AvailableNow query did not finish within 300 s"
    assert q.exception() is None, q.exception()
    return spark.sql(f"select * from {name}").collect(), q


def positions(rows: list[Any]) -> list[tuple[int, int]]:
    return sorted((r.queueId, r.queueOffset) for r in rows)


def test_starting_offsets_modes(spark_session: Any, cluster: Cluster, tmp_path: Path) -> None:
    spark, topic = spark_session, "SrcModes"
    topic_with(cluster, topic, per_queue=10)  # 40 messages, offsets 0..9 per queue
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    produce(cluster, topic, [b"late"] * 8, queue_ids=[i % 4 for i in range(8)])  # offsets 10, 11

    def count(name: str, **opts: str) -> list[Any]:
        rows, _ = run_available_now(spark, stream(spark, cluster, topic, **opts), name, tmp_path / name)
        return rows

    assert len(count("m_earliest", startingOffsets="earliest")) == 48
    json_spec = '{"SrcModes": {"broker-a:0": -2, "broker-a:1": -1, "broker-a:2": 7}}'
    rows = count("m_json", startingOffsets=json_spec)
    assert len(rows) == 12 + 0 + 5 + 12  # queue 3 is not listed: earliest
    assert min(r.queueOffset for r in rows if r.queueId == 2) == 7
    late = count("m_ts", startingTimestamp=str(middle_ms))
    assert sorted(r.body for r in late) == [b"late"] * 8
    by_ts = count("m_ts_q", startingOffsetsByTimestamp=f'{{"SrcModes": {{"broker-a:0": {middle_ms}}}}}')
    assert len(by_ts) == 2 + 3 * 12

    from rocketq.client.api import BlockingMQClientAPI

    with BlockingMQClientAPI(cluster.namesrv_addr) as api:
        api.update_consumer_offset(cluster.broker_addr, "g-committed", topic, 0, 5)
    rows = count("m_committed", startingOffsets="committed", group="g-committed")
    assert len(rows) == 7 + 3 * 12  # queue 0 from its committed offset 5, the others from earliest


def test_starting_latest_reads_only_new(spark_session: Any, cluster: Cluster, tmp_path: Path) -> None:
    topic = "SrcLatest"
    topic_with(cluster, topic, per_queue=3)
    q = (
        stream(spark_session, cluster, topic, startingOffsets="latest").writeStream.format("memory")
        .queryName("m_latest").option("checkpointLocation", str(tmp_path / "cp")).start()
    )  # fmt: skip
    try:
        q.processAllAvailable()
        produce(cluster, topic, [b"new"] * 5, queue_ids=[0, 1, 2, 3, 0])
        q.processAllAvailable()
        rows = spark_session.sql("select * from m_latest").collect()
        assert sorted(r.body for r in rows) == [b"new"] * 5
    finally:
        q.stop()


def test_max_messages_per_trigger_and_committed_offsets(
    spark_session: Any, cluster: Cluster, tmp_path: Path
) -> None:
    topic = "SrcLimit"
    topic_with(cluster, topic, per_queue=25)  # 100
    df = stream(
        spark_session, cluster, topic, startingOffsets="earliest", maxMessagesPerTrigger="30", group="g-limit"
    )
    rows, q = run_available_now(spark_session, df, "m_limit", tmp_path / "cp")
    sizes = [p.numInputRows for p in q.recentProgress if p.numInputRows]
    assert sizes == [30, 30, 30, 10]
    assert len(set(positions(rows))) == 100
    last = q.recentProgress[-1].sources[0]
    assert '"broker-a:0":25' in last.latestOffset.replace(" ", "")  # reportLatestOffset
    from rocketq.client.admin import Admin

    with Admin(cluster.namesrv_addr) as admin:
        progress = admin.consumer_progress("g-limit", topic)
    assert {p.message_queue.queue_id: (p.consumer_offset, p.lag) for p in progress} == {
        i: (25, 0) for i in range(4)
    }


def test_available_now_stops_at_its_start_snapshot(
    spark_session: Any, cluster: Cluster, tmp_path: Path
) -> None:
    topic = "SrcAvail"
    topic_with(cluster, topic, per_queue=20)  # 80 before the start
    stop = threading.Event()

    def keep_producing() -> None:
        # paced: how many messages precede the start snapshot depends on how long Spark takes to
        # start the query, and each of them costs the query micro-batches
        while not stop.wait(0.2):
            produce(cluster, topic, [b"during"] * 4, queue_ids=[0, 1, 2, 3])

    df = stream(spark_session, cluster, topic, startingOffsets="earliest", maxMessagesPerTrigger="40")
    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    try:
        rows, q = run_available_now(spark_session, df, "m_avail", tmp_path / "cp")
    finally:
        stop.set()
        producer.join(30)
    assert all(p.numInputRows <= 40 for p in q.recentProgress)
    assert len(rows) >= 80
    assert len(rows) == len(set(positions(rows)))


def test_queue_added_mid_stream(spark_session: Any, cluster: Cluster, tmp_path: Path) -> None:
    topic = "SrcGrow"
    topic_with(cluster, topic, per_queue=5, queues=2)
    q = (
        stream(spark_session, cluster, topic, startingOffsets="earliest").writeStream.format("memory")
        .queryName("m_grow").option("checkpointLocation", str(tmp_path / "cp")).start()
    )  # fmt: skip
    try:
        q.processAllAvailable()
        assert spark_session.sql("select count(*) c from m_grow").first().c == 10
        create_topic(cluster, topic, 4)
        produce(cluster, topic, [b"q3"] * 6, queue_ids=[3] * 6)
        produce(cluster, topic, [b"q2"] * 2, queue_ids=[2] * 2)

        def all_read() -> bool:
            q.processAllAvailable()
            return bool(spark_session.sql("select count(*) c from m_grow").first().c >= 18)

        wait_for(all_read, "the stream to read the new queues' 8 messages", 60, interval_s=0.2)
        rows = spark_session.sql("select * from m_grow").collect()
        assert len(rows) == 18
        assert sorted(r.queueOffset for r in rows if r.queueId == 3) == list(range(6))  # read from its start
    finally:
        q.stop()


def test_restart_from_checkpoint_no_loss_no_repeat(
    spark_session: Any, cluster: Cluster, tmp_path: Path
) -> None:
    topic = "SrcRestart"
    topic_with(cluster, topic, per_queue=30)  # 120
    cp, out = tmp_path / "cp", str(tmp_path / "out")

    def start(**opts: str) -> Any:
        df = stream(spark_session, cluster, topic, **opts).select("queueId", "queueOffset", "body")
        return df.writeStream.format("parquet").option("path", out).option("checkpointLocation", str(cp))

    q = start(startingOffsets="earliest", maxMessagesPerTrigger="15").start()
    try:
        wait_for(
            lambda: len([p for p in q.recentProgress if p.numInputRows]) >= 2, "two batches with rows", 60
        )
    finally:
        q.stop()
    first = spark_session.read.parquet(out).count()
    assert 0 < first < 120
    produce(cluster, topic, [b"more"] * 8, queue_ids=[i % 4 for i in range(8)])
    q2 = start(startingOffsets="latest").trigger(availableNow=True).start()  # the checkpoint wins
    assert q2.awaitTermination(120) and q2.exception() is None
    both = positions(spark_session.read.parquet(out).collect())
    assert len(both) == len(set(both)) == 128


def test_tag_filter(spark_session: Any, cluster: Cluster, tmp_path: Path) -> None:
    topic = "SrcTags"
    topic_with(cluster, topic, per_queue=6, tag_of=lambda i: ["TagA", "TagB", "TagC"][i % 3])
    df = stream(spark_session, cluster, topic, startingOffsets="earliest", subExpression="TagA || TagC")
    rows, _ = run_available_now(spark_session, df, "m_tags", tmp_path / "cp")
    assert len(rows) == 16
    assert {r.tags for r in rows} == {"TagA", "TagC"}


def test_batch_read_with_ending_offsets_and_partitions(spark_session: Any, cluster: Cluster) -> None:
    topic = "SrcBatch"
    topic_with(cluster, topic, per_queue=10)

    def read(**opts: str) -> Any:
        reader = (
            spark_session.read.format("rocketmq")
            .option("nameServer", cluster.namesrv_addr)
            .option("topic", topic)
        )
        for k, v in opts.items():
            reader = reader.option(k, v)
        return reader.load()

    df = read(
        startingOffsets='{"SrcBatch": {"broker-a:0": 2, "broker-a:1": -2}}',
        endingOffsets='{"SrcBatch": {"broker-a:0": 5, "broker-a:2": 4, "broker-a:3": -1}}',
    )
    got = positions(df.select("queueId", "queueOffset").collect())
    want = [(0, o) for o in range(2, 5)] + [(1, o) for o in range(10)] + [(2, o) for o in range(4)]
    want += [(3, o) for o in range(10)]
    assert got == sorted(want)
    assert read(maxPartitions="1").rdd.getNumPartitions() == 1
    assert read(minPartitions="8").rdd.getNumPartitions() >= 8
    assert read(minPartitions="8").count() == 40
    with pytest.raises(Exception, match="'endingOffsets'"):
        read(endingOffsets='{"SrcBatch": {"broker-a:9": 1}}').count()


def test_batch_read_of_a_topic_without_messages(spark_session: Any, cluster: Cluster) -> None:
    topic = "SrcEmpty"
    create_topic(cluster, topic, 2)
    reader = spark_session.read.format("rocketmq").option("nameServer", cluster.namesrv_addr)
    assert reader.option("topic", topic).load().count() == 0
