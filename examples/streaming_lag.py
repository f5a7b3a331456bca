"""Watch a streaming query's lag with a StreamingQueryListener and rocketq.connector.lag.

Spark's Kafka source reports ``minOffsetsBehindLatest`` / ``maxOffsetsBehindLatest`` /
``avgOffsetsBehindLatest`` as source metrics.  A Python data source cannot, so the rocketmq source
reports the brokers' max offsets as ``latestOffset`` in every progress, and
``rocketq.connector.lag`` turns a progress into the same figures (plus the offsets behind of every
queue).  This example registers a listener that prints them after every micro-batch while a query
copies a topic to the console, in micro-batches of ``--max-offsets-per-trigger`` messages.

    python examples/streaming_lag.py --name-server 127.0.0.1:9876 --topic orders \\
        --checkpoint /tmp/lag-cp [--available-now]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from rocketq.connector import lag


class LagListener(StreamingQueryListener):
    """Prints (and keeps) the Kafka-named lag figures of every progress of the watched query."""

    def __init__(self, query_name: str) -> None:
        self.query_name = query_name
        self.seen: list[dict[str, float | int]] = []  # one entry per progress, first source
        self.lock = threading.Lock()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if progress.name != self.query_name:
            return
        for source in lag(progress):
            figures = source.metrics()
            print(f"batch {progress.batchId} source {source.index}: {figures} per queue {source.per_queue}")
            if source.index == 0:
                with self.lock:
                    self.seen.append(figures)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass


def start_query(
    spark: Any,
    name_server: str,
    topic: str,
    checkpoint: str,
    *,
    query_name: str = "rocketmq_lag",
    max_offsets_per_trigger: int = 1000,
    available_now: bool = True,
) -> tuple[Any, LagListener]:
    """Register the listener and start the query; returns (StreamingQuery, listener)."""
    listener = LagListener(query_name)
    spark.streams.addListener(listener)
    df = (
        spark.readStream.format("rocketmq")
        .option("nameServer", name_server)
        .option("subscribe", topic)  # Kafka's option names work too
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .load()
    )
    writer = (
        df.selectExpr("queueId", "queueOffset", "CAST(body AS STRING) AS body")
        .writeStream.format("console")
        .queryName(query_name)
        .option("checkpointLocation", checkpoint)
        .option("numRows", 3)
    )
    every = {"availableNow": True} if available_now else {"processingTime": "5 seconds"}
    writer = writer.trigger(**every)
    return writer.start(), listener


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name-server", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=1000)
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketq-lag")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    query, _ = start_query(
        spark, args.name_server, args.topic, args.checkpoint,
        max_offsets_per_trigger=args.max_offsets_per_trigger, available_now=args.available_now,
    )  # fmt: skip
    query.awaitTermination()
    print("last progress:", [s.metrics() for s in lag(query)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
