"""failOnDataLoss against real brokers: retention that really deletes CommitLog segments, a
queue that appears with its first messages already deleted, a topic deleted and recreated.

The ``lossy`` broker uses tiny segments (64 KiB CommitLog files, 50-unit ConsumeQueue files),
keeps files for 0 hours and may clean at any hour, so old messages vanish within seconds; the
``plain`` broker keeps everything (topics there are deleted and recreated with mqadmin's
deleteTopic/updateTopic requests, which restart the queues' offsets at 0).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException

from rocketq.client.admin import Admin
from rocketq.client.api import BlockingMQClientAPI
from rocketq.client.testing import wait_value
from rocketq.connector.testing import Cluster, create_topic, local_cluster, produce

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark
TOPIC = "LossTopic"

RETENTION = {
    "mappedFileSizeCommitLog": 64 * 1024,
    "maxMessageSize": 16 * 1024,
    "mappedFileSizeConsumeQueue": 50 * 20,
    "fileReservedTime": 0,
    "deleteWhen": ";".join(str(h) for h in range(24)),
    "cleanResourceInterval": 200,
}


@pytest.fixture(scope="module")
def lossy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, int, int]]:
    with local_cluster(tmp_path_factory.mktemp("loss-cluster"), **RETENTION) as c:
        create_topic(c, TOPIC, 1)
        low, high = fill_past_retention(c, TOPIC)
        yield c, low, high


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("recreate-cluster")) as c:
        yield c


def fill_past_retention(c: Cluster, topic: str) -> tuple[int, int]:
    """Write ~430 KiB (several segments) to queue 0 of ``topic`` and wait until retention deleted
    its first messages; the queue's (min, max) offsets then."""
    produce(c, topic, [b"x" * 1000] * 400, queue_ids=[0] * 400)
    with BlockingMQClientAPI(c.namesrv_addr) as api:
        low = wait_value(
            lambda: api.get_min_offset(c.broker_addr, topic, 0) or None,
            "retention to delete a segment",
            60,
            interval_s=0.2,
        )
        high = api.get_max_offset(c.broker_addr, topic, 0)
    assert low > 0, "retention did not delete anything"
    return low, high


def available_now(spark: Any, c: Cluster, tmp: Path, **options: str) -> Any:
    """An AvailableNow query into parquet files under ``tmp/out`` with its checkpoint in
    ``tmp/cp`` (the memory sink cannot restart from a checkpoint)."""
    reader = spark.readStream.format("rocketmq").option("nameServer", c.namesrv_addr)
    df = reader.options(**options).load()
    return (
        df.select("topic", "queueOffset", "body").writeStream.format("parquet")
        .option("path", str(tmp / "out")).option("checkpointLocation", str(tmp / "cp"))
        .trigger(availableNow=True).start()
    )  # fmt: skip


def written(spark: Any, tmp: Path) -> list[Any]:
    return list(spark.read.parquet(str(tmp / "out")).collect())


def finished(q: Any) -> None:
    assert q.awaitTermination(120), "the AvailableNow query did not finish within 120 s"
    assert q.exception() is None, q.exception()


def failed(q: Any) -> str:
    try:
        with pytest.raises(PySparkException) as info:
            q.awaitTermination(120)
        return str(info.value)
    finally:
        q.stop()


def run(spark: Any, c: Cluster, name: str, tmp: Path, fail: str) -> Any:
    df = (
        spark.readStream.format("rocketmq").option("nameServer", c.namesrv_addr).option("topic", TOPIC)
        .option("startingOffsets", '{"LossTopic": {"broker-a:0": 0}}').option("failOnDataLoss", fail).load()
    )  # fmt: skip
    return (
        df.select("queueOffset").writeStream.format("memory").queryName(name)
        .option("checkpointLocation", str(tmp / name)).trigger(availableNow=True).start()
    )  # fmt: skip


def test_fail_on_data_loss_true_fails_naming_queue_and_offsets(
    spark_session: Any, lossy: tuple[Cluster, int, int], tmp_path: Path
) -> None:
    c, _, _ = lossy
    text = failed(run(spark_session, c, "loss_true", tmp_path, "true"))
    assert "LossTopic" in text and "broker-a:0" in text and "[0, " in text, text[-2000:]
    assert "expected offset 0, found min offset" in text and "failOnDataLoss=false" in text, text[-2000:]


def test_fail_on_data_loss_false_skips_lost_range(
    spark_session: Any, lossy: tuple[Cluster, int, int], tmp_path: Path
) -> None:
    c, _, high = lossy
    q = run(spark_session, c, "loss_false", tmp_path, "false")
    assert q.awaitTermination(120) and q.exception() is None
    offsets = [r.queueOffset for r in spark_session.sql("select queueOffset from loss_false").collect()]
    assert offsets and max(offsets) == high - 1
    assert sorted(offsets) == list(range(min(offsets), high))
    assert min(offsets) > 0


@pytest.mark.parametrize("fail", ["true", "false"])
def test_new_queue_whose_first_messages_are_gone(
    spark_session: Any, lossy: tuple[Cluster, int, int], tmp_path: Path, fail: str
) -> None:
    """A topic matching topicPattern appears while the query is stopped, and retention deletes
    its first messages before the query sees it."""
    c, _, _ = lossy
    first, late = f"New{fail}A", f"New{fail}B"
    create_topic(c, first, 1)
    produce(c, first, [b"a"], queue_ids=[0])
    options = {"topicPattern": f"New{fail}.*", "startingOffsets": "earliest", "failOnDataLoss": fail}
    finished(available_now(spark_session, c, tmp_path, **options))
    create_topic(c, late, 1)
    low, high = fill_past_retention(c, late)
    q = available_now(spark_session, c, tmp_path, **options)
    if fail == "true":
        text = failed(q)
        assert f"topic '{late}' queue broker-a:0" in text and "found min offset" in text, text[-2000:]
        return
    finished(q)
    offsets = sorted(r.queueOffset for r in written(spark_session, tmp_path) if r.topic == late)
    assert offsets and offsets[0] >= low > 0 and offsets == list(range(offsets[0], high))


@pytest.mark.parametrize("fail", ["true", "false"])
def test_topic_deleted_and_recreated(spark_session: Any, plain: Cluster, tmp_path: Path, fail: str) -> None:
    """The query read 10 messages; the topic is deleted and recreated (offsets restart at 0) and
    gets 3 new messages: the checkpointed position 10 is above the queue's max offset 3."""
    topic = f"Recreated{fail}"
    create_topic(plain, topic, 1)
    produce(plain, topic, [b"old-%d" % i for i in range(10)], queue_ids=[0] * 10)
    options = {"topic": topic, "startingOffsets": "earliest", "failOnDataLoss": fail}
    finished(available_now(spark_session, plain, tmp_path, **options))
    with Admin(plain.namesrv_addr) as admin:
        admin.delete_topic(topic)
    create_topic(plain, topic, 1)
    new = [b"new-%d" % i for i in range(3)]
    produce(plain, topic, new, queue_ids=[0] * 3)
    q = available_now(spark_session, plain, tmp_path, **options)
    if fail == "true":
        text = failed(q)
        assert f"topic '{topic}' queue broker-a:0" in text, text[-2000:]
        assert "expected offset 10, found max offset 3" in text and "deleted and recreated" in text, text[
            -2000:
        ]
        assert "new checkpointLocation" in text, text[-2000:]
        return
    finished(q)
    rows = sorted((r.queueOffset, bytes(r.body)) for r in written(spark_session, tmp_path))
    old = [(i, b"old-%d" % i) for i in range(10)]
    assert rows == sorted(old + list(enumerate(new)))  # the recreated queue read from offset 0
