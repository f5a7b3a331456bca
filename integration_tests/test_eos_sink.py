"""Exactly-once sink protocol against a real NameServer + broker (SYNC_FLUSH).

The executor strategy is driven directly (no Spark) to play task attempts, failures and replays;
one Spark test covers the batch writer and the start-up error without a sink identity.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rocketq.client.testing import read_topic, wait_for, wait_value
from rocketq.connector.commit_log import CommitLog, HalfBatch
from rocketq.connector.options import parse_sink_options
from rocketq.connector.testing import Cluster, create_topic, local_cluster
from rocketq.connector.transactional import ExactlyOnceStrategy, WriteIdentity, abort_batch, commit_batch
from rocketq.connector.writer import write_batches

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    conf = {
        "flushDiskType": "SYNC_FLUSH",
        "transactionTimeOut": 1000,
        "transactionCheckInterval": 500,
        "diskMaxUsedSpaceRatio": 95,
    }
    with local_cluster(tmp_path_factory.mktemp("eos-cluster"), **conf) as c:
        yield c


def broker_log(cluster: Cluster) -> str:
    return "".join(p.read_text(errors="replace") for p in cluster.tmp.rglob("broker-*.log"))


def read_bodies(cluster: Cluster, topic: str) -> list[str]:
    return sorted(m.body.decode() for m in read_topic(cluster.namesrv_addr, topic))


def attempt(
    cluster: Cluster, sink: str, topic: str, batch: str, rows: list[str], part: int = 0
) -> list[HalfBatch]:
    """One task attempt: send ``rows`` as half messages; returns its handles."""
    opts = parse_sink_options(
        {
            "nameServer": cluster.namesrv_addr,
            "topic": topic,
            "deliveryGuarantee": "exactlyOnce",
            "transactionalId": sink,
            "batchMaxMessages": "4",
        }
    )
    ident = WriteIdentity(sink, batch, os.urandom(8).hex(), part, 0)
    strategy = ExactlyOnceStrategy(opts, ident)
    batch_rows = pa.record_batch({"body": pa.array(rows), "keys": pa.array([r.split(":")[0] for r in rows])})
    write_batches(opts, iter([batch_rows]), strategy)
    return list(strategy.handles)


def opts_of(cluster: Cluster, sink: str, topic: str) -> Any:
    return parse_sink_options(
        {
            "nameServer": cluster.namesrv_addr,
            "topic": topic,
            "deliveryGuarantee": "exactlyOnce",
            "transactionalId": sink,
            "commitTimeoutMs": "3000",
        }
    )


def test_commit_only_accepted_attempts_and_replay_is_a_no_op(cluster: Cluster) -> None:
    create_topic(cluster, "EosT1", 3)
    rows = [f"k{i % 5}:{i}" for i in range(30)]
    failed = attempt(cluster, "t1", "EosT1", "0", rows[:10])  # a first attempt that "died": Spark
    assert failed  # never hands its commit message to the driver
    accepted = attempt(cluster, "t1", "EosT1", "0", rows)
    assert read_bodies(cluster, "EosT1") == []  # half messages are invisible
    opts = opts_of(cluster, "t1", "EosT1")
    assert commit_batch(opts, "t1", "0", accepted) == (30, 0)
    assert read_bodies(cluster, "EosT1") == sorted(rows)
    time.sleep(2.5)  # the failed attempt's halves are checked back: not listed -> ROLLBACK
    assert read_bodies(cluster, "EosT1") == sorted(rows)
    replay = attempt(cluster, "t1", "EosT1", "0", rows)  # driver restart: the batch runs again
    assert commit_batch(opts, "t1", "0", replay) == (30, 30)
    abort_batch(opts, "t1", "0", replay)  # abort of a committed batch never rolls it back
    assert read_bodies(cluster, "EosT1") == sorted(rows)


def test_abort_rolls_back_and_orphans_are_resolved_by_check_back(cluster: Cluster) -> None:
    create_topic(cluster, "EosT2", 2)
    opts = opts_of(cluster, "t2", "EosT2")
    aborted = attempt(cluster, "t2", "EosT2", "0", ["a:1", "a:2"])
    abort_batch(opts, "t2", "0", aborted)
    orphan = attempt(cluster, "t2", "EosT2", "0", ["b:1"])  # batch 0 is never committed ...
    assert orphan
    commit_batch(opts, "t2", "1", attempt(cluster, "t2", "EosT2", "1", ["c:1"]))  # ... batch 1 is
    assert read_bodies(cluster, "EosT2") == ["c:1"]
    # check-backs ask the executor producer: ROLLBACK (orphan)
    wait_for(
        lambda: "END_TRANSACTION (check answer): rollback" in broker_log(cluster),
        "a check-back's rollback in the broker log",
        20,
        interval_s=0.5,
    )
    assert "END_TRANSACTION (check answer): rollback" in broker_log(cluster)
    assert read_bodies(cluster, "EosT2") == ["c:1"]
    log = CommitLog(
        __import__("rocketq.connector.access", fromlist=["x"]).executor_access(cluster.namesrv_addr, 3000),
        "t2",
    )
    assert set(log.refresh().records) == {"1"}


def test_batch_write_exactly_once(spark_session: Any, cluster: Cluster) -> None:
    create_topic(cluster, "EosT3", 4)
    rows = [(f"{i}", f"key{i % 7}") for i in range(500)]
    df = spark_session.createDataFrame(rows, "body string, keys string").repartition(3)
    df.write.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", "EosT3").option(
        "deliveryGuarantee", "exactlyOnce"
    ).mode("append").save()
    assert read_bodies(cluster, "EosT3") == sorted(b for b, _ in rows)


def test_streaming_exactly_once_needs_an_identity(
    spark_session: Any, cluster: Cluster, tmp_path: Path
) -> None:
    df = (
        spark_session.readStream.format("rate")
        .option("rowsPerSecond", 1)
        .load()
        .selectExpr("CAST(value AS STRING) AS body")
    )
    spark_session.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path / "cp"))
    try:
        query = (
            df.writeStream.format("rocketmq")
            .option("nameServer", cluster.namesrv_addr)
            .option("topic", "EosT4")
            .option("deliveryGuarantee", "exactlyOnce")
            .start()
        )
        with pytest.raises(Exception, match="checkpointLocation"):
            query.awaitTermination(60)
            query.stop()
            raise AssertionError("the query ran without a sink identity")
    finally:
        spark_session.conf.unset("spark.sql.streaming.checkpointLocation")


def test_batch_write_exactly_once_to_a_new_topic(spark_session: Any, cluster: Cluster) -> None:
    """No ``create_topic``: the half sends auto-create the topic (autoCreateTopicEnable, the
    broker's default) through the TBW102 template, as the at-least-once sink's sends do."""
    rows = [(f"new-{i}", f"key{i % 5}") for i in range(200)]
    df = spark_session.createDataFrame(rows, "body string, keys string").repartition(2)
    df.write.format("rocketmq").option("nameServer", cluster.namesrv_addr).option(
        "topic", "EosNewTopic"
    ).option("deliveryGuarantee", "exactlyOnce").option("transactionalId", "eos-new-topic").mode(
        "append"
    ).save()
    from rocketq.connector.errors import OptionError

    # the NameServer learns the topic at the broker's registration
    wait_value(
        lambda: read_bodies(cluster, "EosNewTopic") == sorted(b for b, _ in rows),
        "every row in EosNewTopic",
        30,
        interval_s=0.5,
        retry_on=(OptionError,),
    )
    assert read_bodies(cluster, "EosNewTopic") == sorted(b for b, _ in rows)
