"""How fast a streaming query is back after a broker restart, and what its retries cost when nothing fails.

One NameServer and one broker on fixed ports (:class:`rocketq.client.testing.restartable.RestartableCluster`),
a topic of 4 queues, a producer thread sending ``--rate`` messages/s, and a processing-time query
(``--trigger-ms``) from the topic into a memory sink in a local Spark session (``local[2]``).

* **Recovery.**  ``--rounds`` times: SIGKILL the broker, start it again ``--down-s`` later on its
  port and store, and measure from the moment it is back (its boot line: it accepts requests)
  to the end of the query's first micro-batch that read messages after that moment.  Printed
  next to the reference measured in the same run: the broker's own boot time (kill + down time
  excluded), which the user waits for whatever the connector does, and the trigger interval.
  The query keeps the default retry options (the promise is about them).
* **Steady state.**  The same load read by queries in turn, alternating
  ``fetchOffset.numRetries=0`` and the defaults (twice each, ``--steady-s`` seconds per query):
  the median and p90 of the micro-batches' ``latestOffset`` and ``triggerExecution`` times
  (Spark's progress), pooled per setting.  A retry starts only after a failed request, so the two
  must match within noise.

    python benchmarks/spark_ride_through_bench.py [--rounds 3] [--down-s 8] [--rate 200]
                                                  [--trigger-ms 500] [--steady-s 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.testing import create_topic, wait_for
from rocketq.client.testing.chaos import SEND_ERRORS
from rocketq.client.testing.restartable import RestartableCluster
from rocketq.connector.testing import SPARK_BROKER_CONF

TOPIC = "RideBench"
QUEUES = 4


class Feeder(threading.Thread):
    """Sends ``rate`` messages/s until stopped; failed sends are counted and skipped."""

    def __init__(self, ns_addr: str, rate: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(ns_addr, producer_group="ride-bench", send_msg_timeout_ms=3000)
        self.producer.start()
        self.pause_s = 1.0 / rate
        self.stop_event = threading.Event()
        self.sent = self.failed = 0

    def run(self) -> None:
        deadline = time.monotonic() + 3600
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            try:
                self.producer.send(Message(TOPIC, b"x" * 100))
                self.sent += 1
            except SEND_ERRORS:
                self.failed += 1
                time.sleep(0.2)
            time.sleep(self.pause_s)

    def close(self) -> None:
        self.stop_event.set()
        self.join(30)
        self.producer.shutdown()


def spark_session() -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )


def start_query(
    spark: Any, ns_addr: str, name: str, trigger_ms: int, checkpoint: Path, **options: str
) -> Any:
    reader = spark.readStream.format("rocketmq").option("nameServer", ns_addr).option("topic", TOPIC)
    for key, value in {"startingOffsets": "latest", **options}.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .select("queueId", "queueOffset")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{trigger_ms} milliseconds")
        .start()
    )


def finished_at(progress: dict[str, Any]) -> float:
    """Wall-clock end of a micro-batch: its start time plus its triggerExecution time."""
    started = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return started + float(progress["durationMs"].get("triggerExecution", 0)) / 1000


def first_batch_after(query: Any, t: float, timeout_s: float) -> float:
    """Seconds from ``t`` (wall clock) to the end of the first micro-batch that started after it
    and read rows."""
    found: list[float] = []

    def done() -> bool:
        if query.exception() is not None:
            raise AssertionError(f"the query failed: {query.exception()}")
        for p in query.recentProgress:
            started = finished_at(p) - p["durationMs"].get("triggerExecution", 0) / 1000
            if started >= t and p["numInputRows"] > 0:
                found.append(finished_at(p) - t)
                return True
        return False

    wait_for(done, "a micro-batch with rows after the broker's return", timeout_s, interval_s=0.05)
    return found[0]


def recovery(spark: Any, cluster: RestartableCluster, args: argparse.Namespace, tmp: Path) -> None:
    query = start_query(spark, cluster.namesrv_addr, "ride_recovery", args.trigger_ms, tmp / "recovery")
    try:
        first_batch_after(query, time.time(), 120)  # warmed up: the query reads
        boots, back = [], []
        for r in range(args.rounds):
            cluster.broker.kill9()
            time.sleep(args.down_s)
            t0 = time.monotonic()
            cluster.start_broker()  # returns once the broker printed its boot line and answers
            boots.append(time.monotonic() - t0)
            returned = time.time()
            back.append(first_batch_after(query, returned, 180))
            print(
                f"round {r + 1}: broker boot {boots[-1]:.2f} s, first batch {back[-1]:.2f} s after its return"
            )
            time.sleep(3)
        print(
            f"recovery (default retries, broker down {args.down_s:.0f} s + boot): first micro-batch "
            f"{statistics.median(back):.2f} s after the broker is back (median of {len(back)}, "
            f"max {max(back):.2f} s); reference: broker boot {statistics.median(boots):.2f} s, "
            f"trigger interval {args.trigger_ms / 1000:.2f} s"
        )
    finally:
        query.stop()


def durations(query: Any, key: str) -> Iterator[float]:
    for p in query.recentProgress:
        if p["numInputRows"] > 0 and key in p["durationMs"]:
            yield float(p["durationMs"][key])


STEADY_RUNS: tuple[tuple[str, dict[str, str]], ...] = (
    ("fetchOffset.numRetries=0", {"fetchOffset.numRetries": "0"}),
    ("defaults", {}),
)


def steady(spark: Any, cluster: RestartableCluster, args: argparse.Namespace, tmp: Path) -> None:
    """Each setting twice, alternating (the first query also warms Spark up), every micro-batch
    with rows pooled per setting."""
    pooled: dict[str, dict[str, list[float]]] = {label: {} for label, _ in STEADY_RUNS}
    for run in range(2 * len(STEADY_RUNS)):
        label, options = STEADY_RUNS[run % len(STEADY_RUNS)]
        name = f"ride_steady_{run}"
        query = start_query(spark, cluster.namesrv_addr, name, args.trigger_ms, tmp / name, **options)
        try:
            time.sleep(args.steady_s)
            if query.exception() is not None:
                raise AssertionError(f"the query failed: {query.exception()}")
            for key in ("latestOffset", "triggerExecution"):
                pooled[label].setdefault(key, []).extend(durations(query, key))
        finally:
            query.stop()
    for label, by_key in pooled.items():
        line = []
        for key, values in by_key.items():
            ms = sorted(values)
            if ms:
                p90 = ms[int(0.9 * (len(ms) - 1))]
                line.append(f"{key} median {statistics.median(ms):.0f} ms p90 {p90:.0f} ms")
        batches = len(by_key.get("triggerExecution", []))
        print(f"steady state, {label}: {batches} batches; " + "; ".join(line))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--down-s", type=float, default=8.0)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--trigger-ms", type=int, default=500)
    parser.add_argument("--steady-s", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rocketq-ride-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        cluster = RestartableCluster(tmp / "cluster", SPARK_BROKER_CONF)
        feeder: Feeder | None = None
        try:
            create_topic(cluster.namesrv_addr, TOPIC, QUEUES, broker_addr=cluster.broker_addr)
            feeder = Feeder(cluster.namesrv_addr, args.rate)
            feeder.start()
            spark = spark_session()
            steady(spark, cluster, args, tmp)
            recovery(spark, cluster, args, tmp)
            print(f"producer: {feeder.sent} sent, {feeder.failed} failed (during the restarts)")
        finally:
            if feeder is not None:
                feeder.close()
            cluster.close()


if __name__ == "__main__":
    main()
