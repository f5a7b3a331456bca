"""Throughput of the rocketmq Spark source and sink, each next to a ceiling measured in the same run.

What is compared (N messages of 100 bytes in 8 queues of one local broker, ``local[2]``):

* **How rows are consumed.**  Every read, ours and the ceilings', ends in the same action:
  one aggregate that reads every one of the 17 columns (``count(1)``, ``sum(length(body))``,
  ``sum(size(properties))``, ``max(bornTimestamp)`` ... ``collect()``).  Spark's ``noop`` sink
  was measured against it: for a Python source it costs nearly as much (the JVM converts every
  Arrow batch it receives into rows either way; noop is ~25 % faster on this machine), so it
  is not what inflated the old ceiling (see below); it is printed once, for the ceiling, but
  the aggregate is used because it also verifies the row count.
* **Ceiling = the same rows from memory.**  Before the timed runs the benchmark pulls every
  stored message once and keeps two in-memory copies in the page cache of a temp directory:
  the raw record bytes of each pull, and the Arrow record batches the connector decodes from
  them (Arrow IPC files, memory-mapped).  Two in-memory Python data sources replay them with
  the same 17-column schema, the same values and the same number of partitions as the
  connector:

  - ``ceiling`` yields the pre-decoded batches (zero copy): the fastest any Python data source
    can feed these rows to Spark.  **The targets are computed against it**, because it is the
    strictest reference: it contains neither the broker nor the decoding;
  - ``no broker`` decodes the stored record bytes with the connector's decoder
    (:mod:`rocketq.connector.records`) — the connector minus broker and network; printed to
    split our cost into "decode" and "broker + pull".

  An ordinary in-memory source building its batches from Python lists would be a slower
  reference (about 2x slower than vectorised batches, shared/reference/pyspark-datasource-api.md
  §6) and would flatter our share; it is therefore not used.
* **Every timed read is checked**: the aggregate also counts the rows and the run fails unless
  it saw all N.  (The previous version of this benchmark had a ceiling source whose reader
  class was also a ``DataSourceStreamReader``; Spark plans *no partitions* for such a batch
  read, so its "10 M rows/s" batch ceiling read nothing.)
* **Streaming** runs the same three sources with ``readStream`` + Trigger.AvailableNow (one
  micro-batch) and the same aggregate in ``foreachBatch``.
* **Sink**: writing N rows (100-byte body + key) with ``format("rocketmq")`` against the client's
  own batch produce rate measured in the same run (``AsyncProducer.send_batch`` of 1024 such
  messages, 4 in flight: what the broker takes from one client, the sink's bound); Spark's
  ``noop`` sink on the same cached DataFrame and the connector-side encoding rate (routing +
  batch encoding, no broker) are printed too.
* **Time to the first micro-batch** (``--first-batch-only``, or part of a full run): a topic of
  100 messages in 8 queues read by a streaming query into the memory sink, into a Python no-op
  sink (what any Python sink costs Spark) and into the rocketmq sink, from ``start()`` to the
  query's first progress, next to a minimal Python streaming source
  (one partition of 100 tuples, the legacy ``latestOffset()``) into the memory sink.  *Cold*: each
  query in a new process (new JVM, Spark session and Python workers); *warm*: one session that
  already ran every case once.  The cases alternate, medians are printed.

Also printed: the broker's CPU seconds per million messages during our batch read (the broker
shares the two cores with Spark here) and the decode rate of one core without Spark.  The
machine is shared and noisy: the best of ``--repeats`` runs is reported with the spread.

* **Typed values** (``valueFormat``, issue 17): M messages (``--value-messages``) of a
  ~100-byte JSON object, and the same objects as msgpack, each topic read twice in the same run:
  as plain binary (``count``, ``sum(length(body))``) and typed with ``valueFormat`` +
  ``valueSchema`` (an aggregate over every field of ``value``).  Typed rows/s are printed as a
  share of the binary read of the same messages.  ``--values-only`` runs just this part.

Targets (issue 32): reads >= 60 % of their ceilings, the sink >= 70 % of the client's batch
produce, the first micro-batch <= 1.3x the minimal source's and the rocketmq sink adding <= 1 s
over the memory sink; issue 17: typed reads >= 50 % of the binary read for json, >= 60 % for
msgpack.  On a shared machine compare the figures of one run with each other, not across runs.
The broker runs with ``rocketq.connector.testing.SPARK_BROKER_CONF`` (8192 messages / 8 MiB per
pull).

    python benchmarks/spark_bench.py [--messages 2000000] [--queues 8] [--repeats 2]
                                     [--value-messages 500000] [--values-only]
                                     [--first-batch-only] [--first-batch-repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

BODY_SIZE = 100
#: One aggregate reading every column of the source schema (and counting the rows, checked).
EVERY_COLUMN = [
    "count(1)",
    "sum(length(topic))",
    "sum(length(brokerName))",
    "sum(queueId)",
    "sum(queueOffset)",
    "sum(length(msgId))",
    "sum(length(uniqKey))",
    "count(tags)",
    "sum(size(keys))",
    "sum(length(body))",
    "sum(size(properties))",
    "max(bornTimestamp)",
    "max(storeTimestamp)",
    "sum(length(bornHost))",
    "sum(length(storeHost))",
    "sum(reconsumeTimes)",
    "sum(flag)",
    "sum(sysFlag)",
]


# -- the in-memory copies ---------------------------------------------------------------------


def snapshot(namesrv: str, topic: str, out: Path) -> int:
    """Pull every message of ``topic`` once; store, per queue, the raw pull bodies and the batches."""
    from rocketq.connector.access import BrokerAccess
    from rocketq.connector.options import parse_source_options
    from rocketq.connector.planning import QueueRange, RocketMQInputPartition
    from rocketq.connector.reader import read_partition
    from rocketq.connector.schema import ARROW_SCHEMA

    opts = parse_source_options({"nameServer": namesrv, "topic": topic}, batch=True)
    access = BrokerAccess(namesrv)
    rows = 0
    for queue, addr in sorted(access.read_queues(topic).items()):
        end = access.max_offset(queue, addr)
        part = RocketMQInputPartition((QueueRange(topic, queue.broker_name, queue.queue_id, addr, 0, end),))
        with (
            pa.OSFile(str(out / f"q{queue.queue_id}.arrow"), "wb") as sink,
            pa.ipc.new_file(sink, ARROW_SCHEMA) as w,
        ):
            for batch in read_partition(opts, part):
                w.write_batch(batch)
                rows += batch.num_rows
        with open(out / f"q{queue.queue_id}.rec", "wb") as f:
            offset = 0
            while offset < end:
                res = access.pull(
                    queue,
                    addr,
                    offset,
                    group=opts.group,
                    max_nums=opts.pull_batch_size,
                    max_bytes=opts.pull_max_bytes,
                    sub_expression="*",
                    timeout_ms=10_000,
                )
                f.write(len(res.body).to_bytes(4, "big") + res.body)
                offset = res.next_begin_offset
    access.close()
    return rows


def replay(path: str, mode: str) -> Iterator[pa.RecordBatch]:
    """The batches of one queue from its in-memory copy (page cache, memory-mapped)."""
    if mode == "ceiling":
        source = pa.memory_map(path + ".arrow")
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)
        return
    from rocketq.connector.records import decode_pull_body

    with open(path + ".rec", "rb") as f:
        raw = memoryview(f.read())
    pos = 0
    while pos < len(raw):
        size = int.from_bytes(raw[pos : pos + 4], "big")
        yield decode_pull_body(raw[pos + 4 : pos + 4 + size], topic="bench", broker_name="broker-a").batch  # type: ignore[arg-type]
        pos += 4 + size


def register_memory_source(spark: Any) -> None:
    """``format("rocketq_bench_mem")`` options: ``dir``, ``queues``, ``partitions``, ``mode``."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

    from rocketq.connector.schema import spark_schema

    class MemPartition(InputPartition):
        def __init__(self, paths: list[str]) -> None:
            self.paths = paths

    # Two classes: Spark plans no partitions at all for a batch read whose reader is *also* a
    # DataSourceStreamReader (plan_data_source_read.py), so one class for both would read nothing.
    class MemReader(DataSourceReader):
        def __init__(self, options: Any) -> None:
            self.opts = dict(options)

        def partitions(self) -> list[Any]:
            queues, groups, base = int(self.opts["queues"]), int(self.opts["partitions"]), self.opts["dir"]
            owners = [[f"{base}/q{q}" for q in range(queues) if q % groups == g] for g in range(groups)]
            return [MemPartition(paths) for paths in owners if paths]

        def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
            for path in partition.paths:
                yield from replay(path, self.opts["mode"])

    class MemStreamReader(DataSourceStreamReader):
        def __init__(self, options: Any) -> None:
            self.batch = MemReader(options)

        def initialOffset(self) -> dict[str, int]:
            return {"done": 0}

        def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, int]:
            return {"done": 1}

        def partitions(self, start: Any, end: Any) -> list[Any]:
            return [] if start == end else self.batch.partitions()

        def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
            return self.batch.read(partition)

    class MemSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketq_bench_mem"

        def schema(self) -> Any:
            return spark_schema()

        def reader(self, schema: Any) -> Any:
            return MemReader(self.options)

        def streamReader(self, schema: Any) -> Any:
            return MemStreamReader(self.options)

    spark.dataSource.register(MemSource)


# -- measuring ---------------------------------------------------------------------------------


def timed(repeats: int, fn: Callable[[], object]) -> list[float]:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def rates(n: int, times: list[float]) -> str:
    best, worst = n / min(times), n / max(times)
    return f"{best:>11,.0f} rows/s (spread {worst:,.0f}-{best:,.0f})"


def line(
    what: str, n: int, ours: list[float], ceiling: list[float], target: float, label: str = "ceiling"
) -> None:
    share = min(ceiling) / min(ours)
    mark = "OK " if share >= target else "LOW"
    print(f"{what:40s} {rates(n, ours)}")
    print(f"{'  ' + label:40s} {rates(n, ceiling)}   ours = {share:6.1%}  [{mark} target {target:.0%}]")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def decode_rate(base: Path, queues: int) -> float:
    rows, t = 0, time.process_time()
    for q in range(queues):
        rows += sum(b.num_rows for b in replay(str(base / f"q{q}"), "records"))
    return rows / (time.process_time() - t)


@contextlib.contextmanager
def cluster(tmp: Path) -> Iterator[tuple[str, str, int]]:
    """NameServer + broker (Spark settings); yields (namesrv address, broker address, broker pid)."""
    from rocketq.client.testing import spawn_broker, spawn_namesrv
    from rocketq.connector.testing import SPARK_BROKER_CONF

    # The disk may be shared: other jobs' files must not make the broker refuse writes (at 90 %
    # by default) or delete the benchmark's CommitLog early (at 85 %).
    conf = {**SPARK_BROKER_CONF, "diskMaxUsedSpaceRatio": 99, "diskSpaceCleanForciblyRatio": 99,
            "diskSpaceWarningLevelRatio": 99}  # fmt: skip
    with spawn_namesrv(tmp) as ns, spawn_broker(tmp, ns.addr, **conf) as broker:  # type: ignore[arg-type]
        yield ns.addr, broker.addr, broker.pid


def load(namesrv: str, n: int, nq: int) -> None:
    from rocketq.connector.testing import produce_fast

    body = pa.array([b"b" * BODY_SIZE] * 10_000, pa.binary())

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, n, 10_000):
            k = min(10_000, n - start)
            queue_ids = pa.array(np.arange(start, start + k) % nq, pa.int32())
            yield pa.RecordBatch.from_arrays([body.slice(0, k), queue_ids], names=["body", "queueId"])

    produce_fast(namesrv, "bench", batches())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--partitions", type=int, default=2, help="maxPartitions of the reads (default: the 2 cores)"
    )
    parser.add_argument("--value-messages", type=int, default=500_000, help="messages per value format")
    parser.add_argument("--values-only", action="store_true", help="only the typed-value reads")
    parser.add_argument(
        "--first-batch-only", action="store_true", help="only the time to the first micro-batch"
    )
    parser.add_argument("--first-batch-repeats", type=int, default=3, help="cold and warm runs of each case")
    argv = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if argv[:1] == ["--first-batch-child"]:  # one cold measurement, in its own process
        import json

        case, namesrv, out_topic, tmp_dir = argv[1:5]
        print(json.dumps(first_batch(new_session(), case, namesrv, out_topic, Path(tmp_dir))))
        return 0
    args = parser.parse_args(argv)
    n, nq = args.messages - args.messages % args.queues, args.queues
    with tempfile.TemporaryDirectory(prefix="rocketq-bench-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "c").mkdir()
        (tmp / "mem").mkdir()
        with cluster(tmp / "c") as (namesrv, broker_addr, broker_pid):
            from rocketq.connector.testing import Cluster, create_topic

            if args.values_only:
                run_values(args, namesrv, broker_addr, tmp)
                return 0
            if args.first_batch_only:
                run_first_batch(args, namesrv, broker_addr, tmp)
                return 0
            create_topic(Cluster(namesrv, broker_addr, "broker-a", tmp / "c"), "bench", nq)
            t = time.perf_counter()
            load(namesrv, n, nq)
            print(
                f"loaded {n:,} messages of {BODY_SIZE} bytes into {nq} queues "
                f"in {time.perf_counter() - t:.1f} s"
            )
            if snapshot(namesrv, "bench", tmp / "mem") != n:
                raise RuntimeError("the snapshot of the topic does not hold every message")
            print(
                "decode only (connector, 1 core, no Spark, no broker): "
                f"{decode_rate(tmp / 'mem', nq):,.0f} rows/s"
            )
            run_spark(args, n, nq, namesrv, broker_pid, tmp)
            run_values(args, namesrv, broker_addr, tmp)
            run_first_batch(args, namesrv, broker_addr, tmp)
    return 0


def run_spark(args: Any, n: int, nq: int, namesrv: str, broker_pid: int, tmp: Path) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    register_memory_source(spark)
    parts = str(min(nq, args.partitions))
    rmq = {"nameServer": namesrv, "topic": "bench", "startingOffsets": "earliest", "maxPartitions": parts}
    mem = {"dir": str(tmp / "mem"), "queues": str(nq), "partitions": parts}
    ceiling, no_broker = {**mem, "mode": "ceiling"}, {**mem, "mode": "records"}

    def frame(fmt: str, opts: dict[str, str], stream: bool = False) -> Any:
        reader = spark.readStream.format(fmt) if stream else spark.read.format(fmt)
        for k, v in opts.items():
            reader = reader.option(k, v)
        return reader.load()

    def consume(df: Any) -> None:
        rows = df.selectExpr(*EVERY_COLUMN).collect()[0][0]
        if rows != n:  # a fast read of the wrong rows proves nothing
            raise RuntimeError(f"read {rows:,} rows instead of {n:,}")

    def batch(fmt: str, opts: dict[str, str]) -> None:
        consume(frame(fmt, opts))

    def stream(fmt: str, opts: dict[str, str]) -> None:
        cp = str(tmp / f"cp-{time.monotonic_ns()}")
        q = (
            frame(fmt, opts, stream=True).writeStream.option("checkpointLocation", cp)
            .foreachBatch(lambda df, _id: consume(df)).trigger(availableNow=True).start()
        )  # fmt: skip
        q.awaitTermination()
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))

    r = args.repeats
    batch("rocketq_bench_mem", ceiling)  # warm-up: JVM, Python workers, page cache
    batch("rocketmq", rmq)
    print(f"\n{n:,} rows, local[2], {parts} partitions, every column aggregated; best of {r}")
    noop = timed(r, lambda: frame("rocketq_bench_mem", ceiling).write.format("noop").mode("overwrite").save())
    print(f"{'(ceiling into the noop sink instead)':40s} {rates(n, noop)}")
    ceil_b = timed(r, lambda: batch("rocketq_bench_mem", ceiling))
    nob_b = timed(r, lambda: batch("rocketq_bench_mem", no_broker))
    cpu0 = cpu_seconds(broker_pid)
    ours_b = timed(r, lambda: batch("rocketmq", rmq))
    broker_cpu = (cpu_seconds(broker_pid) - cpu0) / (r * n) * 1e6
    line("source: batch read", n, ours_b, ceil_b, 0.6)
    print(f"{'  no broker (decode stored bytes)':40s} {rates(n, nob_b)}")
    print(f"{'  broker CPU during our read':40s} {broker_cpu:11.2f} s per million messages")
    ceil_s = timed(r, lambda: stream("rocketq_bench_mem", ceiling))
    nob_s = timed(r, lambda: stream("rocketq_bench_mem", no_broker))
    ours_s = timed(r, lambda: stream("rocketmq", rmq))
    line("source: streaming read (AvailableNow)", n, ours_s, ceil_s, 0.6)
    print(f"{'  no broker (decode stored bytes)':40s} {rates(n, nob_s)}")

    data = (
        spark.range(n, numPartitions=2)
        .select(
            F.expr(f"cast(repeat('s', {BODY_SIZE}) as binary)").alias("body"),
            F.concat(F.lit("k"), (F.col("id") % 1000).cast("string")).alias("keys"),
        )
        .cache()
    )
    data.count()
    noop_w = timed(r, lambda: data.write.format("noop").mode("overwrite").save())
    sink = timed(
        1,
        lambda: (
            data.write.format("rocketmq")
            .option("nameServer", namesrv)
            .option("topic", "bench-out")
            .mode("append")
            .save()
        ),
    )
    client_rate = client_produce_rate(namesrv, "bench-client")
    print(f"{'sink: batch write':40s} {rates(n, sink)}")
    share = n / min(sink) / client_rate
    mark = "OK " if share >= 0.7 else "LOW"
    print(f"{'  client batch produce (broker bound)':40s} {client_rate:>11,.0f} rows/s"
          f"{'':34s}   ours = {share:6.1%}  [{mark} target 70%]")  # fmt: skip
    print(f"{'  noop sink (Spark alone)':40s} {rates(n, noop_w)}")
    print(
        f"{'  connector-side encoding only':40s} {encode_rate(nq):>11,.0f} rows/s"
        " (routing + batch encoding, no broker)"
    )


def client_produce_rate(namesrv: str, topic: str, seconds: float = 5.0) -> float:
    """The client's own batch produce rate, the broker's bound for the sink: ``AsyncProducer.send_batch``
    of batches of 1024 messages like the sink's rows (100-byte body, one of 1000 keys), 4 in
    flight (the sink's tasks send one request per queue at a time on each of 2 cores)."""
    import asyncio

    from rocketq.client.model import Message
    from rocketq.client.producer import AsyncProducer

    body = b"s" * BODY_SIZE

    async def run() -> tuple[int, float]:
        async with AsyncProducer(namesrv, producer_group="bench-client") as producer:
            await producer.send_batch([Message(topic, body, keys=f"k{i}") for i in range(1024)])  # warm-up
            sent = 0
            deadline = time.perf_counter() + seconds

            async def worker() -> None:
                nonlocal sent
                while time.perf_counter() < deadline:
                    await producer.send_batch(
                        [Message(topic, body, keys=f"k{i % 1000}") for i in range(1024)]
                    )
                    sent += 1024

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(4)))
            return sent, time.perf_counter() - start

    sent, elapsed = asyncio.run(run())
    return sent / elapsed


def encode_rate(nq: int, rows: int = 200_000) -> float:
    from rocketq.connector.encoding import BulkUniqKeys
    from rocketq.connector.options import parse_sink_options
    from rocketq.connector.writer import TargetQueue, TaskState, batch_requests, route_rows

    opts = parse_sink_options({"nameServer": "127.0.0.1:1", "topic": "x"})
    queues = [TargetQueue("x", "broker-a", i) for i in range(nq)]
    keys = pa.array([f"k{i % 1000}" for i in range(10_000)])
    batch = pa.RecordBatch.from_arrays(
        [pa.array([b"b" * BODY_SIZE] * 10_000, pa.binary()), keys], names=["body", "keys"]
    )
    uniq = BulkUniqKeys()
    t = time.perf_counter()
    for _ in range(rows // 10_000):
        target = route_rows(batch, queues, TaskState())
        for _request in batch_requests(batch, queues, target, opts, uniq):
            pass
    return rows / (time.perf_counter() - t)


# -- time to the first micro-batch --------------------------------------------------------------

#: Messages in the topic the first-batch queries read (the README's stream reads 100).
FIRST_BATCH_ROWS = 100
FIRST_BATCH_CASES = ("minimal", "rocketq->memory", "rocketq->python-noop", "rocketq->rocketq")


def register_minimal_source(spark: Any) -> None:
    """``format("rocketq_bench_minimal")``: the smallest useful Python streaming source (one
    partition of ``FIRST_BATCH_ROWS`` (body, queueId) tuples in its first micro-batch), the
    reference for the time to the first micro-batch."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class MinimalStreamReader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"offset": 0}

        def latestOffset(self) -> dict[str, int]:  # type: ignore[override]  # the legacy, simplest form
            return {"offset": FIRST_BATCH_ROWS}

        def partitions(self, start: Any, end: Any) -> list[Any]:
            return [InputPartition((start["offset"], end["offset"]))]

        def read(self, partition: Any) -> Iterator[tuple[bytes, int]]:
            low, high = partition.value
            for i in range(low, high):
                yield (b"b" * BODY_SIZE, i % 8)

    class MinimalSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketq_bench_minimal"

        def schema(self) -> str:
            return "body binary, queueId int"

        def streamReader(self, schema: Any) -> Any:
            return MinimalStreamReader()

    spark.dataSource.register(MinimalSource)


def register_noop_sink(spark: Any) -> None:
    """``format("rocketq_bench_noop_sink")``: a Python streaming sink that only reads its Arrow
    batches: what any Python sink costs Spark (worker, planning, commit runner), without ours."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

    class NoopWriter(DataSourceStreamArrowWriter):
        def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
            for _ in iterator:
                pass
            return WriterCommitMessage()

        def commit(self, messages: list[Any], batchId: int) -> None:
            pass

    class NoopSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketq_bench_noop_sink"

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:
            return NoopWriter()

    spark.dataSource.register(NoopSink)


def new_session() -> Any:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def first_batch(spark: Any, case: str, namesrv: str, out_topic: str, tmp: Path) -> tuple[float, float]:
    """(load() seconds, seconds from ``start()`` to the query's first progress) of one query."""
    t = time.perf_counter()
    if case == "minimal":
        register_minimal_source(spark)
        df = spark.readStream.format("rocketq_bench_minimal").load()
    else:
        df = (
            spark.readStream.format("rocketmq").option("nameServer", namesrv)
            .option("topic", "first").option("startingOffsets", "earliest").load()
        )  # fmt: skip
    loaded = time.perf_counter() - t
    name = f"first_{time.monotonic_ns()}"
    cp = str(tmp / f"cp-{name}")
    if case == "rocketq->python-noop":
        register_noop_sink(spark)
        writer = df.select("body").writeStream.format("rocketq_bench_noop_sink")
        writer = writer.option("checkpointLocation", cp)
    elif case == "rocketq->rocketq":
        writer = (
            df.select("body").writeStream.format("rocketmq").option("nameServer", namesrv)
            .option("topic", out_topic).option("checkpointLocation", cp)
        )  # fmt: skip
    else:
        writer = (
            df.select("body").writeStream.format("memory").queryName(name).option("checkpointLocation", cp)
        )
    t = time.perf_counter()
    query = writer.start()
    try:
        deadline = t + 300
        while query.lastProgress is None:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{case}: no progress after 300 s")
            time.sleep(0.01)
        elapsed = time.perf_counter() - t
        rows = query.lastProgress["numInputRows"]
    finally:
        query.stop()
    if rows != FIRST_BATCH_ROWS:
        raise RuntimeError(f"{case}: the first micro-batch read {rows} rows instead of {FIRST_BATCH_ROWS}")
    return loaded, elapsed


def cold_first_batch(case: str, namesrv: str, out_topic: str, tmp: Path) -> tuple[float, float]:
    """:func:`first_batch` in a new process: a new JVM, a new Spark session, new Python workers."""
    import json
    import subprocess

    cmd = [sys.executable, __file__, "--first-batch-child", case, namesrv, out_topic, str(tmp)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"cold {case} failed:\n{done.stderr[-3000:]}")
    loaded, elapsed = json.loads(done.stdout.strip().splitlines()[-1])
    return float(loaded), float(elapsed)


def run_first_batch(args: Any, namesrv: str, broker_addr: str, tmp: Path) -> None:
    """Time from ``start()`` to the first progress, cold and warm, each case next to the minimal
    Python source of the same run."""
    from rocketq.connector.testing import Cluster, create_topic, produce_fast

    cluster_ = Cluster(namesrv, broker_addr, "broker-a", tmp / "c")
    create_topic(cluster_, "first", 8)
    body = pa.array([b"f" * BODY_SIZE] * FIRST_BATCH_ROWS, pa.binary())
    queue_ids = pa.array(np.arange(FIRST_BATCH_ROWS) % 8, pa.int32())
    produce_fast(namesrv, "first", iter([pa.RecordBatch.from_arrays([body, queue_ids], ["body", "queueId"])]))
    r = args.first_batch_repeats
    cold: dict[str, list[tuple[float, float]]] = {c: [] for c in FIRST_BATCH_CASES}
    warm: dict[str, list[tuple[float, float]]] = {c: [] for c in FIRST_BATCH_CASES}
    for i in range(r):  # alternate the cases: the machine's speed drifts
        for case in FIRST_BATCH_CASES:
            cold[case].append(cold_first_batch(case, namesrv, f"first-out-c{i}", tmp))
    spark = new_session()
    for case in FIRST_BATCH_CASES:  # warm-up of every path
        first_batch(spark, case, namesrv, "first-out-w", tmp)
    for _ in range(r):
        for case in FIRST_BATCH_CASES:
            warm[case].append(first_batch(spark, case, namesrv, "first-out-w", tmp))
    spark.stop()
    print(f"\ntime to the first micro-batch ({FIRST_BATCH_ROWS} messages, local[2]; median of {r}; "
          "start() to the first progress, load() in brackets)")  # fmt: skip
    for label, runs in (("cold (new process and session)", cold), ("warm (session reused)", warm)):
        med = {c: statistics.median(e for _, e in runs[c]) for c in FIRST_BATCH_CASES}
        loads = {c: statistics.median(lo for lo, _ in runs[c]) for c in FIRST_BATCH_CASES}
        ref = med["minimal"]
        print(f"  {label}")
        for case in FIRST_BATCH_CASES:
            each = ", ".join(f"{e:.2f}" for _, e in runs[case])
            share = "" if case == "minimal" else f"  {med[case] / ref:4.2f}x minimal [target <= 1.30x]"
            print(f"    {case:18s} {med[case]:6.2f} s ({loads[case]:.2f} s) runs {each}{share}")
        extra = med["rocketq->rocketq"] - med["rocketq->memory"]
        spark_part = med["rocketq->python-noop"] - med["rocketq->memory"]
        print(f"    rocketq sink over the memory sink: {extra:+.2f} s [target <= +1.00 s]; "
              f"a Python no-op sink over it: {spark_part:+.2f} s")  # fmt: skip


# -- typed values ------------------------------------------------------------------------------

VALUE_SCHEMA = "id bigint, customer string, amount double, qty int, tags array<string>, at timestamp"
VALUE_AGGREGATE = [
    "count(1)", "sum(value.id)", "sum(length(value.customer))", "sum(value.amount)", "sum(value.qty)",
    "sum(size(value.tags))", "max(value.at)",
]  # fmt: skip
BINARY_AGGREGATE = ["count(1)", "sum(length(body))"]


def value_batches(n: int, nq: int, fmt: Any) -> Iterator[pa.RecordBatch]:
    """Sink batches of ``n`` encoded values (a ~100-byte JSON object), spread over ``nq`` queues."""
    import datetime as dt

    from rocketq.connector.value_encoding import encode_values
    from rocketq.connector.value_types import parse_ddl

    typ = parse_ddl(VALUE_SCHEMA)
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for start in range(0, n, 10_000):
        ids = range(start, min(n, start + 10_000))
        values = pa.array(
            [{"id": i, "customer": f"customer-{i % 5000:05d}", "amount": i % 10_000 / 100, "qty": i % 9,
              "tags": ["retail", "eu"], "at": at} for i in ids],
            typ,
        )  # fmt: skip
        queue_ids = pa.array(np.arange(start, start + len(values)) % nq, pa.int32())
        yield pa.RecordBatch.from_arrays([encode_values(values, fmt), queue_ids], names=["body", "queueId"])


def run_values(args: Any, namesrv: str, broker_addr: str, tmp: Path) -> None:
    """Typed reads (json, msgpack) next to the binary read of the same messages."""
    from pyspark.sql import SparkSession

    from rocketq.connector.testing import Cluster, create_topic, produce_fast
    from rocketq.connector.value_types import ValueFormat

    n, nq, r = args.value_messages, args.queues, args.repeats
    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g").getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    parts = str(min(nq, args.partitions))
    print(f"\ntyped values: {n:,} messages per format, local[2], {parts} partitions; best of {r}")
    for fmt, target in ((ValueFormat.JSON, 0.5), (ValueFormat.MSGPACK, 0.6)):
        topic = f"bench-{fmt.value}"
        create_topic(Cluster(namesrv, broker_addr, "broker-a", tmp / "c"), topic, nq)
        produce_fast(namesrv, topic, value_batches(n, nq, fmt))
        base = {"nameServer": namesrv, "topic": topic, "startingOffsets": "earliest", "maxPartitions": parts}
        typed = {**base, "valueFormat": fmt.value, "valueSchema": VALUE_SCHEMA}

        def read(opts: dict[str, str], aggregate: list[str]) -> None:
            reader = spark.read.format("rocketmq")
            for k, v in opts.items():
                reader = reader.option(k, v)
            rows = reader.load().selectExpr(*aggregate).collect()[0][0]
            if rows != n:
                raise RuntimeError(f"read {rows:,} rows instead of {n:,}")

        read(base, BINARY_AGGREGATE)  # warm-up
        binary = timed(r, lambda: read(base, BINARY_AGGREGATE))  # noqa: B023
        decoded = timed(r, lambda: read(typed, VALUE_AGGREGATE))  # noqa: B023
        line(f"source: {fmt.value} values, typed", n, decoded, binary, target, f"binary read ({fmt.value})")
        alone = f"  {fmt.value} decode only (1 core, no Spark)"
        print(f"{alone:40s} {value_decode_rate(fmt):>11,.0f} rows/s")
    spark.stop()


def value_decode_rate(fmt: Any, rows: int = 100_000) -> float:
    from rocketq.connector.value_types import parse_ddl
    from rocketq.connector.values import decode_values

    bodies = pa.concat_arrays([b.column("body") for b in value_batches(rows, 1, fmt)])
    typ = parse_ddl(VALUE_SCHEMA)
    t = time.perf_counter()
    for start in range(0, rows, 8192):
        decode_values(bodies.slice(start, 8192), fmt, typ)
    return rows / (time.perf_counter() - t)


if __name__ == "__main__":
    sys.exit(main())
