"""Throughput of the rocketmq Spark source and sink, each next to a ceiling measured in the same run.

* source, batch read: ``spark.read.format("rocketmq")`` of N 100-byte messages into Spark's
  ``noop`` sink, against the same read from an in-memory Python data source that yields the same
  rows (same schema, same number of partitions) as vectorised Arrow batches — the fastest a
  Python source can feed Spark on this machine;
* source, streaming read: ``readStream`` with Trigger.AvailableNow into ``noop``, against the
  in-memory source read as a stream;
* sink: writing N rows (100-byte body + key) with ``format("rocketmq")`` against Spark's ``noop``
  sink on the same DataFrame; the connector-side encoding rate (routing + batch encoding, no
  broker) is printed too, to tell connector cost from broker cost.

Targets (issue 5): source >= 50 % of its ceiling, sink >= 30 % of noop.  A local NameServer and
broker are started with the settings of ``rocketq.connector.testing.SPARK_BROKER_CONF``.

    python benchmarks/spark_bench.py [--messages 2000000] [--queues 8]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

BODY_SIZE = 100


def mem_batches(n: int, topic: str, queue_id: int, chunk: int = 8192) -> Iterator[pa.RecordBatch]:
    """The rows a queue of n messages yields, as the connector's Arrow schema, vectorised."""
    from rocketq.connector.schema import ARROW_SCHEMA

    body = np.frombuffer(b"b" * BODY_SIZE * chunk, dtype=np.uint8)
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        offsets = np.arange(k + 1, dtype=np.int32)

        def strings(w: int, v: bytes, k: int = k, offsets: np.ndarray = offsets) -> pa.Array:
            return pa.Array.from_buffers(pa.string(), k, [None, pa.py_buffer(offsets * np.int32(w)), pa.py_buffer(v * k)])

        ts = pa.array(np.full(k, 1_700_000_000_000_000, dtype=np.int64), pa.timestamp("us", tz="UTC"))
        props = pa.MapArray.from_arrays(pa.array(offsets), pa.array(["WAIT"] * k), pa.array(["true"] * k))
        cols = [
            strings(len(topic), topic.encode()), strings(8, b"broker-a"), pa.array(np.full(k, queue_id, np.int32)),
            pa.array(np.arange(start, start + k, dtype=np.int64)), strings(32, b"0" * 32), strings(32, b"1" * 32),
            pa.nulls(k, pa.string()), pa.nulls(k, pa.list_(pa.string())),
            pa.Array.from_buffers(pa.binary(), k, [None, pa.py_buffer(offsets * np.int32(BODY_SIZE)), pa.py_buffer(body[: k * BODY_SIZE])]),
            props, ts, ts, strings(14, b"127.0.0.1:1234"), strings(14, b"127.0.0.1:1234"),
            pa.array(np.zeros(k, np.int32)), pa.array(np.zeros(k, np.int32)), pa.array(np.zeros(k, np.int32)),
        ]  # fmt: skip
        yield pa.RecordBatch.from_arrays(cols, schema=ARROW_SCHEMA)


def register_memory_source(spark: Any) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
    from rocketq.connector.schema import spark_schema

    class MemPartition(InputPartition):  # type: ignore[misc]
        def __init__(self, queue_id: int, n: int) -> None:
            self.queue_id, self.n = queue_id, n

    def parts(opts: Any) -> list[Any]:
        total, queues, groups = int(opts["messages"]), int(opts["queues"]), int(opts["partitions"])
        per = total // queues
        owners = [[q for q in range(queues) if q % groups == g] for g in range(groups)]
        return [MemPartition(g, per * len(qs)) for g, qs in enumerate(owners) if qs]

    class MemReader(DataSourceReader, DataSourceStreamReader):  # type: ignore[misc]
        def __init__(self, options: Any) -> None:
            self.opts = dict(options)

        def partitions(self, start: Any = None, end: Any = None) -> list[Any]:
            if start is not None and start == end:
                return []
            return parts(self.opts)

        def initialOffset(self) -> dict[str, int]:
            return {"done": 0}

        def latestOffset(self, start: Any, limit: Any) -> dict[str, int]:
            return {"done": 1}

        def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
            return mem_batches(partition.n, "bench", partition.queue_id)

    class MemSource(DataSource):  # type: ignore[misc]
        @classmethod
        def name(cls) -> str:
            return "rocketq_bench_mem"

        def schema(self) -> Any:
            return spark_schema()

        def reader(self, schema: Any) -> Any:
            return MemReader(self.options)

        def streamReader(self, schema: Any) -> Any:
            return MemReader(self.options)

    spark.dataSource.register(MemSource)


def best_of(repeats: int, fn: Any) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def stream_noop(spark: Any, fmt: str, options: dict[str, str], tmp: str) -> None:
    reader = spark.readStream.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    cp = os.path.join(tmp, f"cp-{time.monotonic_ns()}")
    q = reader.load().writeStream.format("noop").option("checkpointLocation", cp).trigger(availableNow=True).start()
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))


def line(what: str, n: int, seconds: float, ceiling_s: float, target: float) -> None:
    rate, ceil = n / seconds, n / ceiling_s
    share = rate / ceil
    mark = "OK " if share >= target else "LOW"
    print(f"{what:34s} {rate:>12,.0f} rows/s   ceiling {ceil:>12,.0f} rows/s   {share:6.1%}  [{mark} target {target:.0%}]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import tempfile

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from rocketq.connector.testing import create_topic, local_cluster, produce_fast

    n, nq = args.messages - args.messages % args.queues, args.queues
    with tempfile.TemporaryDirectory(prefix="rocketq-bench-") as tmp, local_cluster(os.path.join(tmp, "c")) as cluster:
        create_topic(cluster, "bench", nq)
        body = pa.array([b"b" * BODY_SIZE] * 10_000, pa.binary())

        def load() -> Iterator[pa.RecordBatch]:
            for start in range(0, n, 10_000):
                k = min(10_000, n - start)
                yield pa.RecordBatch.from_arrays([body.slice(0, k), pa.array(np.arange(start, start + k) % nq, pa.int32())], names=["body", "queueId"])

        t = time.perf_counter()
        produce_fast(cluster.namesrv_addr, "bench", load())
        print(f"loaded {n:,} messages of {BODY_SIZE} bytes into {nq} queues in {time.perf_counter() - t:.1f} s")

        spark = (
            SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "2g").getOrCreate()
        )  # fmt: skip
        spark.sparkContext.setLogLevel("ERROR")
        register_memory_source(spark)
        parts = str(min(nq, 2))
        rmq = {"nameServer": cluster.namesrv_addr, "topic": "bench", "startingOffsets": "earliest", "maxPartitions": parts}
        mem = {"messages": str(n), "queues": str(nq), "partitions": parts}

        def batch(fmt: str, opts: dict[str, str]) -> None:
            reader = spark.read.format(fmt)
            for k, v in opts.items():
                reader = reader.option(k, v)
            reader.load().write.format("noop").mode("overwrite").save()

        batch("rocketq_bench_mem", mem)  # warm-up
        print(f"\n{n:,} rows, local[2], best of {args.repeats}")
        mem_s = best_of(args.repeats, lambda: batch("rocketq_bench_mem", mem))
        src_s = best_of(args.repeats, lambda: batch("rocketmq", rmq))
        line("source: batch read", n, src_s, mem_s, 0.5)
        mem_stream = best_of(args.repeats, lambda: stream_noop(spark, "rocketq_bench_mem", mem, tmp))
        src_stream = best_of(args.repeats, lambda: stream_noop(spark, "rocketmq", rmq, tmp))
        line("source: streaming read (AvailableNow)", n, src_stream, mem_stream, 0.5)

        data = spark.range(n, numPartitions=2).select(
            F.expr(f"cast(repeat('s', {BODY_SIZE}) as binary)").alias("body"), F.concat(F.lit("k"), (F.col("id") % 1000).cast("string")).alias("keys")
        ).cache()  # fmt: skip
        data.count()
        noop_s = best_of(args.repeats, lambda: data.write.format("noop").mode("overwrite").save())
        sink_s = best_of(1, lambda: data.write.format("rocketmq").option("nameServer", cluster.namesrv_addr)
                         .option("topic", "bench-out").mode("append").save())  # fmt: skip
        line("sink: batch write", n, sink_s, noop_s, 0.3)
        print(f"{'  connector-side encoding only':34s} {encode_rate(nq):>12,.0f} rows/s   (routing + batch encoding, no broker)")
        spark.stop()
    return 0


def encode_rate(nq: int, rows: int = 200_000) -> float:
    from rocketq.connector.encoding import BulkUniqKeys
    from rocketq.connector.options import parse_sink_options
    from rocketq.connector.writer import TargetQueue, TaskState, batch_requests, route_rows

    opts = parse_sink_options({"nameServer": "127.0.0.1:1", "topic": "x"})
    queues = [TargetQueue("x", "broker-a", i, "") for i in range(nq)]
    keys = pa.array([f"k{i % 1000}" for i in range(10_000)])
    batch = pa.RecordBatch.from_arrays([pa.array([b"b" * BODY_SIZE] * 10_000, pa.binary()), keys], names=["body", "keys"])
    uniq = BulkUniqKeys()
    t = time.perf_counter()
    for _ in range(rows // 10_000):
        target = route_rows(batch, queues, TaskState())
        for _request in batch_requests(batch, queues, target, opts, uniq):
            pass
    return rows / (time.perf_counter() - t)


if __name__ == "__main__":
    sys.exit(main())
