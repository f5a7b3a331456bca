"""failOnDataLoss against a broker whose retention really deletes CommitLog segments.

The broker here uses tiny segments (64 KiB CommitLog files, 50-unit ConsumeQueue files), keeps
files for 0 hours and may clean at any hour, so old messages vanish within seconds.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
        produce(c, TOPIC, [b"x" * 1000] * 400, queue_ids=[0] * 400)  # ~430 KiB: several segments
        from rocketq.client.api import BlockingMQClientAPI

        with BlockingMQClientAPI(c.namesrv_addr) as api:
            low = wait_value(
                lambda: api.get_min_offset(c.broker_addr, TOPIC, 0) or None,
                "retention to delete a segment",
                60,
                interval_s=0.2,
            )
            high = api.get_max_offset(c.broker_addr, TOPIC, 0)
        assert low > 0, "retention did not delete anything"
        yield c, low, high


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
    q = run(spark_session, c, "loss_true", tmp_path, "true")
    with pytest.raises(Exception) as info:
        q.awaitTermination(120)
    text = str(info.value)
    assert "LossTopic" in text and "broker-a:0" in text and "[0, " in text, text[-2000:]
    q.stop()


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
