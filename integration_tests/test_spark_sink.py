"""The rocketmq Spark sink against real mqnamesrv/mqbroker processes (batch and streaming)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.connector.testing import Cluster, create_topic, local_cluster, produce

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("sink-cluster")) as c:
        yield c


def read_back(spark: Any, cluster: Cluster, topic: str) -> list[Any]:
    df = (
        spark.read.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", topic).load()
    )
    return list(df.collect())


def test_per_key_order_one_queue_per_key(spark_session: Any, cluster: Cluster) -> None:
    topic = "SinkOrder"
    create_topic(cluster, topic, 6)
    rows = [(f"{seq}", f"key{seq % 11}") for seq in range(3000)]
    df = spark_session.createDataFrame(rows, "body string, keys string")
    # every key in one task, rows of a task in seq order: the sink keeps that order per queue
    df = df.repartition(3, "keys").sortWithinPartitions(df.body.cast("int"))
    df.write.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", topic).option(
        "batchMaxMessages", "64"
    ).mode("append").save()
    got = read_back(spark_session, cluster, topic)
    assert len(got) == 3000
    from rocketq.client.model import Message
    from rocketq.client.producer.selector import SelectMessageQueueByHash
    from rocketq.client.remoting.route import MessageQueue

    mqs = [MessageQueue(topic, cluster.broker_name, i) for i in range(6)]
    by_key: dict[str, list[tuple[int, int, int]]] = {}
    for r in got:
        by_key.setdefault(r.keys[0], []).append((r.queueId, r.queueOffset, int(r.body)))
    for key, items in by_key.items():
        queues = {q for q, _, _ in items}
        assert queues == {SelectMessageQueueByHash()(mqs, Message(topic, b"x"), key).queue_id}, key
        in_queue_order = [seq for _, _, seq in sorted(items)]
        assert in_queue_order == sorted(in_queue_order), key


def test_batch_write_all_columns(spark_session: Any, cluster: Cluster) -> None:
    create_topic(cluster, "SinkCols", 4)
    create_topic(cluster, "SinkCols2", 2)
    df = spark_session.createDataFrame(
        [
            (b"\x00bin", "SinkCols", "TagA", ["k1", "k2"], {"p": "1"}, "shard-1", None),
            (b"two", "SinkCols2", None, [], None, None, 1),
            (b"three", "SinkCols", "TagB", None, {"x": "y"}, None, 3),
        ],
        "body binary, topic string, tags string, keys array<string>, properties map<string,string>, "
        "shardingKey string, queueId int",
    )
    # no 'topic' option: it would win over the column (as in Kafka's sink)
    df.write.format("rocketmq").option("nameServer", cluster.namesrv_addr).mode("append").save()
    first = sorted(read_back(spark_session, cluster, "SinkCols"), key=lambda r: r.body)
    assert [r.body for r in first] == [b"\x00bin", b"three"]
    one, three = first
    assert (one.tags, one.keys, one.properties["p"], one.properties["__SHARDINGKEY"]) == (
        "TagA",
        ["k1", "k2"],
        "1",
        "shard-1",
    )
    assert len(one.uniqKey) == 32 and one.properties["UNIQ_KEY"] == one.uniqKey
    assert (three.tags, three.queueId, three.properties["x"]) == ("TagB", 3, "y")
    (two,) = read_back(spark_session, cluster, "SinkCols2")
    assert (two.body, two.queueId, two.keys) == (b"two", 1, None)


def test_streaming_etl_into_another_topic(spark_session: Any, cluster: Cluster, tmp_path: Path) -> None:
    create_topic(cluster, "SinkIn", 4)
    create_topic(cluster, "SinkOut", 4)
    produce(cluster, "SinkIn", [f"m{i}".encode() for i in range(200)], queue_ids=[i % 4 for i in range(200)],
            keys=[f"u{i % 7}" for i in range(200)])  # fmt: skip
    from pyspark.sql import functions as F

    src = (
        spark_session.readStream.format("rocketmq")
        .option("nameServer", cluster.namesrv_addr)
        .option("topic", "SinkIn")
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "80")
        .load()
    )
    out = src.select(
        F.concat(F.col("body").cast("string"), F.lit("!")).alias("body"), "keys", F.lit("ETL").alias("tags")
    )
    q = (
        out.writeStream.format("rocketmq")
        .option("nameServer", cluster.namesrv_addr)
        .option("topic", "SinkOut")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120) and q.exception() is None
    got = read_back(spark_session, cluster, "SinkOut")
    assert sorted(r.body for r in got) == sorted(f"m{i}!".encode() for i in range(200))
    assert {r.tags for r in got} == {"ETL"}
    assert sum(p.numInputRows for p in q.recentProgress) == 200
