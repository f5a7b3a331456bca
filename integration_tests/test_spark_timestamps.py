"""Timestamp positions against a real broker and a local Spark session: startingTimestamp with
startingOffsetsByTimestampStrategy (a time after every stored message), endingTimestamp and
endingOffsetsByTimestamp bounding batch reads to an exact set of messages.

One NameServer + broker for the module; each test its own topic.  Times come from the broker's
store timestamps (same machine clock); the boundaries are taken between two produce calls with a
pause on either side, so no message is stored at the boundary millisecond.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException

from rocketq.client.testing import wait_for
from rocketq.connector.testing import Cluster, create_topic, local_cluster, produce

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark
QUEUES = 2
PAUSE_S = 0.2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("ts-cluster")) as c:
        yield c


def fill(cluster: Cluster, topic: str, tag: str, per_queue: int) -> set[bytes]:
    bodies = [f"{tag}-{i}".encode() for i in range(per_queue * QUEUES)]
    produce(cluster, topic, bodies, queue_ids=[i % QUEUES for i in range(len(bodies))])
    return set(bodies)


def boundary_ms() -> int:
    """A time strictly between the messages produced before and after this call."""
    time.sleep(PAUSE_S)
    now = int(time.time() * 1000)
    time.sleep(PAUSE_S)
    return now


def batch(spark: Any, cluster: Cluster, topic: str, **options: str) -> set[bytes]:
    reader = spark.read.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    rows = reader.load().select("body").collect()
    bodies = [bytes(r.body) for r in rows]
    assert len(bodies) == len(set(bodies)), "a message was read twice"
    return set(bodies)


def test_ending_timestamp_bounds_a_batch_read(spark_session: Any, cluster: Cluster) -> None:
    topic = "TsEnd"
    create_topic(cluster, topic, QUEUES)
    before = fill(cluster, topic, "before", 5)
    middle = boundary_ms()
    after = fill(cluster, topic, "after", 5)
    assert batch(spark_session, cluster, topic, endingTimestamp=str(middle)) == before
    assert batch(spark_session, cluster, topic, startingTimestamp=str(middle)) == after
    # a time after the last message: every queue is read to its end, the last message included
    future = str(int(time.time() * 1000) + 60_000)
    assert batch(spark_session, cluster, topic, endingTimestamp=future) == before | after
    by_queue = f'{{"{topic}": {{"broker-a:0": {middle}}}}}'  # queue 1 not listed: read to latest
    want = {b for b in before | after if b in before or int(b.split(b"-")[1]) % QUEUES == 1}
    assert batch(spark_session, cluster, topic, endingOffsetsByTimestamp=by_queue) == want
    # a start after the end is a mistake, not an empty read (as Kafka's batch queries)
    with pytest.raises(PySparkException, match=r"starts at offset \d+, after its ending offset \d+"):
        batch(spark_session, cluster, topic, startingTimestamp=str(middle), endingTimestamp="1")


def test_starting_timestamp_in_the_future(spark_session: Any, cluster: Cluster, tmp_path: Path) -> None:
    topic = "TsFuture"
    create_topic(cluster, topic, QUEUES)
    fill(cluster, topic, "old", 3)
    start = boundary_ms()  # after every stored message: the broker's search answers the last one
    with pytest.raises(
        PySparkException, match=r"queue TsFuture/broker-a:\d has no message stored at or after"
    ):
        batch(spark_session, cluster, topic, startingTimestamp=str(start))
    latest = {"startingTimestamp": str(start), "startingOffsetsByTimestampStrategy": "latest"}
    assert batch(spark_session, cluster, topic, **latest) == set()
    df = (
        spark_session.readStream.format("rocketmq").option("nameServer", cluster.namesrv_addr)
        .option("topic", topic).options(**latest).load()
    )  # fmt: skip
    q = (
        df.select("body").writeStream.format("memory").queryName("ts_future")
        .option("checkpointLocation", str(tmp_path / "cp")).start()
    )  # fmt: skip
    try:
        wait_for(lambda: q.lastProgress is not None, "the stream's first progress", 120, interval_s=0.2)
        new = fill(cluster, topic, "new", 3)

        def table() -> set[bytes]:
            return {bytes(r.body) for r in spark_session.sql("select body from ts_future").collect()}

        wait_for(lambda: len(table()) >= len(new), "the stream to read the new messages", 120, interval_s=0.5)
        assert q.exception() is None
        assert table() == new  # nothing old
    finally:
        q.stop()


def test_ending_positions_are_refused_for_streams_and_unknown_options_still_are(
    spark_session: Any, cluster: Cluster, tmp_path: Path
) -> None:
    topic = "TsRefused"
    create_topic(cluster, topic, 1)
    reader = spark_session.readStream.format("rocketmq").option("nameServer", cluster.namesrv_addr)
    df = reader.option("topic", topic).option("endingTimestamp", "1").load()
    with pytest.raises(PySparkException, match=r"'endingTimestamp'.*only applies to batch reads"):
        q = df.writeStream.format("memory").queryName("ts_refused").start()
        try:
            q.awaitTermination(120)
        finally:
            q.stop()
    with pytest.raises(PySparkException, match=r"'endingtimestampz'.*unknown source option"):
        batch(spark_session, cluster, topic, endingTimestampz="1")
