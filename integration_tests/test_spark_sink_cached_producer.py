"""The sink's cached producer follows a broker that moved to a new port between two writes.

Spark reuses its Python workers across tasks and jobs, and the sink keeps one started producer per
worker and settings (``writer.sink_producer``, ``transactional.executor_producer``), so the second
of two writes in one Spark session sends through the producer the first one started, with the
route it cached.  Between the writes the broker is SIGKILLed and a new broker process of the same
name and cluster starts on a new port over the same store; the NameServer's route shows the new
address before the second write starts.  Every row of both writes must then be in the topic
exactly once: the cached producer did not keep sending to the dead address (that write would fail)
and its first tries there stored nothing twice.

That the producer really was reused is checked from the messages: every row's ``UNIQ_KEY`` starts
with its writer process's prefix (IP, pid, random bits: :class:`rocketq.connector.encoding.BulkUniqKeys`,
one per process), and at least one prefix shows up in both writes.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.errors import NoRouteError, RocketQError
from rocketq.client.model import MessageExt
from rocketq.client.remoting.msgid import prefix_pid, uniq_key_prefix
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.testing import WaitTimeout, create_topic, free_port, read_topic, wait_for, wait_value
from rocketq.client.testing.restartable import RestartableCluster

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark

QUEUES = 4
ROWS = 2000
PARTITIONS = 4
ROUTE_S = 60.0  # the new broker registers at start; a loaded 2-core machine
READ_S = 60.0  # the restarted broker recovered and dispatched the first write


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RestartableCluster]:
    c = RestartableCluster(tmp_path / "cluster")
    try:
        yield c
    finally:
        print(c.close())


def master_addr(ns_addr: str, topic: str, broker_name: str) -> str | None:
    with Admin(ns_addr) as admin:
        try:
            return admin.topic_route(topic).master_addr(broker_name)
        except NoRouteError:
            return None


def move_broker(cluster: RestartableCluster, topic: str) -> tuple[str, str]:
    """SIGKILL the broker, start it on a new port over its store; wait for the route to show it."""
    old = cluster.broker_addr
    cluster.broker.kill9()
    cluster.broker_conf["listenPort"] = free_port()
    cluster.start_broker()
    new = cluster.broker_addr
    assert new != old
    wait_for(
        lambda: master_addr(cluster.namesrv_addr, topic, cluster.broker_name) == new,
        f"the route of {topic} to show the moved broker at {new}",
        ROUTE_S,
        interval_s=0.2,
    )
    return old, new


def write(spark: Any, cluster: RestartableCluster, topic: str, tag: str, options: dict[str, str]) -> None:
    rows = [(f"{tag}-{i}",) for i in range(ROWS)]
    df = spark.createDataFrame(rows, "body string").repartition(PARTITIONS)
    writer = df.write.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", topic)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def read_all(cluster: RestartableCluster, topic: str) -> list[MessageExt]:
    """Every message of ``topic``, once all 2 x ROWS are readable (or what there is after READ_S)."""

    def probe() -> list[MessageExt] | None:
        got = read_topic(cluster.namesrv_addr, topic, max_msg_nums=1024)
        return got if len(got) >= 2 * ROWS else None

    try:
        return wait_value(
            probe, f"{2 * ROWS} messages in {topic}", READ_S, interval_s=0.5, retry_on=(RocketQError,)
        )
    except WaitTimeout:  # what there is: the assertions name what is missing
        return read_topic(cluster.namesrv_addr, topic, max_msg_nums=1024)


def prefixes(messages: list[MessageExt], tag: str) -> set[str]:
    mine = [m for m in messages if m.body.decode().startswith(f"{tag}-")]
    keys = [m.properties.get(MessageConst.UNIQ_KEY) for m in mine]
    assert keys and all(keys), f"messages of write {tag} without a UNIQ_KEY"
    return {uniq_key_prefix(str(k)) for k in keys}


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="atLeastOnce"),
        pytest.param(
            {"deliveryGuarantee": "exactlyOnce", "transactionalId": "moved-broker"}, id="exactlyOnce"
        ),
    ],
)
def test_cached_producer_follows_a_moved_broker(
    spark_session: Any, cluster: RestartableCluster, options: dict[str, str]
) -> None:
    topic = "CachedProducer"
    create_topic(cluster.namesrv_addr, topic, QUEUES, broker_addr=cluster.broker_addr)
    started = time.monotonic()
    write(spark_session, cluster, topic, "w1", options)
    first_s = time.monotonic() - started
    old, new = move_broker(cluster, topic)
    moved_s = time.monotonic() - started - first_s
    write(spark_session, cluster, topic, "w2", options)
    second_s = time.monotonic() - started - first_s - moved_s

    got = read_all(cluster, topic)
    counts = Counter(m.body.decode() for m in got)
    expected = {f"{tag}-{i}" for tag in ("w1", "w2") for i in range(ROWS)}
    missing = sorted(expected - counts.keys())
    twice = sorted(body for body, n in counts.items() if n > 1)
    unexpected = sorted(counts.keys() - expected)
    assert not missing and not twice and not unexpected, (
        f"{len(missing)} rows missing (e.g. {missing[:5]}), {len(twice)} twice (e.g. {twice[:5]}), "
        f"{len(unexpected)} never written (e.g. {unexpected[:5]})"
    )
    first, second = prefixes(got, "w1"), prefixes(got, "w2")
    shared = first & second
    pids = sorted(prefix_pid(p) for p in shared)  # the low 16 bits of the pid, as in Java's ids
    print(
        f"broker {old} -> {new}; write 1 {first_s:.1f} s, move {moved_s:.1f} s, write 2 {second_s:.1f} s; "
        f"writer processes: {len(first)} in write 1, {len(second)} in write 2, {len(shared)} in both "
        f"(pids & 0xFFFF {pids})"
    )
    assert shared, (
        "no Python worker wrote in both writes (Spark started new workers), so the cached producer "
        f"was not exercised: write 1 {sorted(first)}, write 2 {sorted(second)}"
    )
