"""Driver process of the exactly-once kill test: topic A -> transform -> topic B, exactly once.

Run by integration_tests/test_eos_kill.py as a separate process (so it can be SIGKILLed and
restarted from its checkpoint)::

    python eos_etl_job.py <nameServer> <checkpoint dir> <work dir>

It builds its own ``local[2,3]`` SparkSession (3 task attempts, so an injected first-attempt
failure is retried), prints ``QUERY_STARTED`` when a query runs, and processes everything in A
with ``Trigger.AvailableNow`` in micro-batches of ``maxMessagesPerTrigger`` rows.  The transform
UDF raises once in partition 0 of each of batches 1..12, on the first task attempt that evaluates
it (appending a line to ``<work dir>/injected.log`` first, which records that the batch had its
failure: a first attempt that failed earlier for another reason, e.g. a killed broker, must not
cost the batch its injected failure).  A query that fails (a broker was killed) is restarted from
the checkpoint in the same process; the process exits 0 once a run completes.
"""

from __future__ import annotations

import os
import sys
import time

from rocketq.client.testing import SHORT_LIVED_JVM_OPTIONS

FAIL_BATCHES = frozenset(range(1, 13))
ROWS_PER_BATCH = 60


def transform(body: str) -> str:
    """The job's deterministic transform (the test recomputes it independently)."""
    key, seq = body.split(":")
    return f"{key.upper()}:{seq}:{int(seq) * 7 % 1000}"


def main() -> int:
    name_server, checkpoint, work = sys.argv[1:4]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # A SIGKILLed driver runs no shutdown hook: keep every scratch directory of Spark (block
    # manager, artifacts, Python temp files) under the work dir, which the test removes.
    scratch = os.path.join(work, "spark-scratch")
    os.makedirs(scratch, exist_ok=True)
    os.environ["TMPDIR"] = scratch
    from pyspark import TaskContext
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    injected_log = os.path.join(work, "injected.log")
    injected: set[int] = set()  # batches known to have had their failure (this worker process)

    def udf_body(body: str) -> str:
        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0:
            batch = int(ctx.getLocalProperty("streaming.sql.batchId") or -1)
            if batch in FAIL_BATCHES and batch not in injected:
                if os.path.exists(injected_log):
                    with open(injected_log) as f:
                        injected.update(int(line.split()[0]) for line in f if line.strip())
                if batch not in injected:
                    injected.add(batch)
                    with open(injected_log, "a") as f:
                        f.write(f"{batch} {ctx.partitionId()} {ctx.attemptNumber()} {ctx.taskAttemptId()}\n")
                    raise RuntimeError(
                        f"injected failure: batch {batch} partition 0 attempt {ctx.attemptNumber()}"
                    )
        return transform(body)

    spark = (
        SparkSession.builder.master("local[2,3]").appName("eos-kill")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "5s").config("spark.local.dir", scratch)
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch} {SHORT_LIVED_JVM_OPTIONS}")
        .getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    fn = F.udf(udf_body, StringType())
    for run in range(30):
        df = (
            spark.readStream.format("rocketmq").option("nameServer", name_server).option("topic", "EosA")
            .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", str(ROWS_PER_BATCH))
            .option("pullTimeoutMs", "3000").load()
        )  # fmt: skip
        out = df.select(fn(F.col("body").cast("string")).alias("body"), F.col("keys")[0].alias("keys"))
        query = (
            out.writeStream.format("rocketmq")
            .option("nameServer", name_server)
            .option("topic", "EosB")
            .option("deliveryGuarantee", "exactlyOnce")
            .option("checkpointLocation", checkpoint)
            .option("sendTimeoutMs", "3000")
            .option("commitTimeoutMs", "3000")
            .trigger(availableNow=True)
            .start()
        )
        print(f"QUERY_STARTED run={run}", flush=True)
        try:
            query.awaitTermination()
            print("QUERY_DONE", flush=True)
            return 0
        except Exception as exc:
            print(f"QUERY_FAILED run={run}: {str(exc)[:300]}", flush=True)
            time.sleep(1.0)
    return 1


if __name__ == "__main__":
    sys.exit(main())
