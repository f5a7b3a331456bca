"""Streaming ETL with the rocketmq source and sink.

Reads JSON order events from a topic, parses them, enriches them with a static customer table,
aggregates every micro-batch per customer (orders, amount) and writes one message per customer
and micro-batch to another topic, keyed by customer (so all of one customer's messages land in
one queue, in order) and tagged with the customer tier.  The micro-batch id travels in the
message property ``batchId``: delivery is at-least-once, so a consumer that must not count a
replayed batch twice keeps the last batch id per customer.  The checkpoint makes the job
restartable from where it stopped.

    python examples/etl_streaming.py --name-server 127.0.0.1:9876 --source orders \\
        --sink customer-totals --checkpoint /tmp/etl-cp [--available-now]

An order event looks like ``{"order_id": 7, "customer": "c3", "amount": 12.5, "ts": 1700000000000}``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

ORDER_SCHEMA = "order_id long, customer string, amount double, ts long"
CUSTOMERS = [("c0", "gold", "EU"), ("c1", "silver", "US"), ("c2", "gold", "US"), ("c3", "bronze", "APAC"),
             ("c4", "silver", "EU")]  # fmt: skip


def build_query(
    spark: Any,
    name_server: str,
    source: str,
    sink: str,
    checkpoint: str,
    *,
    available_now: bool = True,
    max_messages_per_trigger: int = 500,
) -> Any:
    """Define and start the ETL query; returns the StreamingQuery."""
    from pyspark.sql import functions as F

    customers = spark.createDataFrame(CUSTOMERS, "customer string, tier string, region string")
    orders = (
        spark.readStream.format("rocketmq")
        .option("nameServer", name_server)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", str(max_messages_per_trigger))
        .load()
        .select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o"), "storeTimestamp")
        .select("o.*", "storeTimestamp")
        .where(F.col("order_id").isNotNull())  # drop malformed events
    )
    enriched = orders.join(F.broadcast(customers), "customer", "left").fillna(
        {"tier": "unknown", "region": "?"}
    )

    def write_batch(batch: Any, batch_id: int) -> None:
        # Python sinks support append only, so the aggregation is per micro-batch (foreachBatch).
        totals = batch.groupBy("customer", "tier", "region").agg(
            F.count("*").alias("orders"),
            F.round(F.sum("amount"), 2).alias("total"),
            F.max("ts").alias("last_ts"),
        )
        out = totals.select(
            F.to_json(
                F.struct(
                    F.lit(batch_id).alias("batch"), "customer", "tier", "region", "orders", "total", "last_ts"
                )
            ).alias("body"),
            F.col("customer").alias("keys"),
            F.col("tier").alias("tags"),
            F.create_map(F.lit("batchId"), F.lit(str(batch_id))).alias("properties"),
        )  # fmt: skip
        out.write.format("rocketmq").option("nameServer", name_server).option("topic", sink).mode(
            "append"
        ).save()

    writer = (
        enriched.writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", checkpoint)
        .queryName("orders_etl")
    )
    writer = (
        writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="2 seconds")
    )
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name-server", required=True)
    parser.add_argument("--source", default="orders")
    parser.add_argument("--sink", default="customer-totals")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("rocketq-etl")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    query = build_query(spark, args.name_server, args.source, args.sink, args.checkpoint,
                        available_now=args.available_now)  # fmt: skip
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
