"""Batch read and write with the rocketmq data source.

Writes a DataFrame to a topic (routing rows by key, with tags and user properties), reads a
bounded range of the topic back with ``startingOffsets`` / ``endingOffsets``, copies the
``TagA`` messages to a second topic, and reads the hottest readings through a typed property
column whose filter the broker applies (``propertyColumns`` + ``pushFilters``, SQL92).  Starts its
own NameServer and broker (with ``enablePropertyFilter=true``) unless ``--name-server`` is given.

    python examples/batch_read_write.py [--name-server 127.0.0.1:9876]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def name_server(addr: str | None) -> Iterator[str]:
    if addr:
        yield addr
        return
    from rocketq.client.launcher import local_cluster

    with local_cluster(broker_conf={"enablePropertyFilter": "true"}) as cluster:
        yield cluster.namesrv_addr


def run(spark: Any, ns: str) -> None:
    from pyspark.sql import functions as F

    rows = [(f"reading {i}", f"sensor-{i % 5}", "TagA" if i % 3 == 0 else "TagB", i % 40) for i in range(300)]
    properties = F.create_map(
        F.lit("unit"), F.lit("celsius"), F.lit("celsius"), F.col("celsius").cast("string")
    )
    df = (
        spark.createDataFrame(rows, "body string, keys string, tags string, celsius int")
        .withColumn("properties", properties).drop("celsius")
    )  # fmt: skip
    df.write.format("rocketmq").option("nameServer", ns).option("topic", "readings").mode("append").save()

    everything = spark.read.format("rocketmq").option("nameServer", ns).option("topic", "readings").load()
    print(
        "per queue:", sorted((r.queueId, r["count"]) for r in everything.groupBy("queueId").count().collect())
    )

    first_ten = (
        spark.read.format("rocketmq").option("nameServer", ns).option("topic", "readings")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", json.dumps({"readings": {f"broker-a:{q}": 10 for q in range(4)}}))
        .load()
    )  # fmt: skip
    print("first 10 of each queue:", first_ten.count(), "rows")
    first_ten.select("queueId", "queueOffset", "keys", "tags", F.col("body").cast("string")).show(
        5, truncate=False
    )

    tag_a = (
        spark.read.format("rocketmq").option("nameServer", ns).option("topic", "readings")
        .option("subExpression", "TagA").load()
    )  # fmt: skip
    tag_a.select("body", "keys", "tags", "properties").write.format("rocketmq").option(
        "nameServer", ns
    ).option("topic", "readings-tag-a").mode("append").save()
    copied = (
        spark.read.format("rocketmq")
        .option("nameServer", ns)
        .option("topic", "readings-tag-a")
        .load()
        .count()
    )
    print("copied TagA messages:", copied)

    # A property as a typed column: `celsius >= 38 AND tags = 'TagA'` becomes the broker's SQL92
    # filter (with enablePropertyFilter=true; otherwise Spark filters, with the same result).
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    hot = (
        spark.read.format("rocketmq").option("nameServer", ns).option("topic", "readings")
        .option("propertyColumns", "celsius:int").option("pushFilters", "true").load()
        .where("celsius >= 38 AND tags = 'TagA'")
    )  # fmt: skip
    print("hot TagA readings:", sorted(r.celsius for r in hot.select("celsius").collect()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name-server", default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketq-batch")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with name_server(args.name_server) as ns:
            run(spark, ns)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
