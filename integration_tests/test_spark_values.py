"""Typed values and the poison-message policy against real mqnamesrv/mqbroker processes.

Round trips sink -> source in every ``valueFormat`` (nested structs, arrays, maps, decimals,
timestamps, dates), through the at-least-once and the exactly-once sink; each ``onDecodeError``
policy on a topic mixing good and corrupt messages; and a driver SIGKILLed after its dead letters
were confirmed but before the micro-batch committed (``values_dlq_job.py``), restarted from the
checkpoint: every good row in the exactly-once output once, every bad message in the dead-letter
topic at least once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.testing import SHORT_LIVED_JVM_OPTIONS
from rocketq.connector.deadletter import decode_stats
from rocketq.connector.testing import Cluster, create_topic, local_cluster, produce

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark
HERE = Path(__file__).parent

VALUE_DDL = (
    "id bigint, name string, price decimal(12,3), at timestamp, tags array<string>, "
    "attrs map<string,int>, inner struct<x: double, ys: array<struct<z: int, day: date>>>"
)
N_GOOD = 40
BAD_BODIES = [b"\xff\xfe not json", b"  ", b'{"id": "not a number"}', b"[1, 2", b"\x93\x01\x02\x03"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("values-cluster")) as c:
        yield c


def sample_rows() -> list[tuple[Any, ...]]:
    import datetime as dt
    import decimal

    rows = []
    for i in range(N_GOOD):
        rows.append(
            (
                {
                    "id": i,
                    "name": None if i % 7 == 3 else f'name "{i}"\n\\ é',
                    "price": decimal.Decimal(f"{i}.{i % 1000:03d}"),
                    "at": dt.datetime(2026, 1, 1 + i % 28, 12, 30, 15, 123000 * (i % 8)),
                    "tags": [f"t{i}", None] if i % 2 else [],
                    "attrs": {"a": i, "b": None} if i % 3 else None,
                    "inner": None
                    if i % 5 == 4
                    else {"x": i / 4, "ys": [{"z": i, "day": dt.date(2026, 2, 1 + i % 28)}, None]},
                },
            )
        )
    return rows


def reader(spark: Any, cluster: Cluster, topic: str, **options: str) -> Any:
    r = spark.read.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


@pytest.mark.parametrize(
    ("fmt", "guarantee"), [("json", "atLeastOnce"), ("msgpack", "exactlyOnce"), ("string", "atLeastOnce")]
)
def test_round_trip(spark_session: Any, cluster: Cluster, fmt: str, guarantee: str) -> None:
    topic = f"Values_{fmt}"
    create_topic(cluster, topic, 2)
    if fmt == "string":
        df = spark_session.createDataFrame([(f"text {i} ✓\n",) for i in range(N_GOOD)], "value string")
        options = {"valueFormat": "string"}
    else:
        df = spark_session.createDataFrame(sample_rows(), f"value struct<{VALUE_DDL}>")
        options = {"valueFormat": fmt, "valueSchema": VALUE_DDL}
    (
        df.write.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", topic)
        .option("valueFormat", fmt).option("deliveryGuarantee", guarantee).mode("append").save()
    )  # fmt: skip
    got = reader(spark_session, cluster, topic, **options)
    assert got.schema["value"].dataType == df.schema["value"].dataType
    key = (lambda r: r.value) if fmt == "string" else (lambda r: r.value.id)
    want_rows = sorted(df.collect(), key=key)
    got_rows = sorted(got.select("value", "body").collect(), key=key)
    assert [r.value for r in got_rows] == [r.value for r in want_rows]
    assert all(r.body for r in got_rows)  # the raw body stays


def good_json(i: int) -> bytes:
    return json.dumps({"id": i, "name": f"n{i}", "tags": ["a"], "inner": {"x": 0.5, "ys": []}}).encode()


@pytest.fixture(scope="module")
def mixed(cluster: Cluster) -> tuple[str, list[bytes], set[int]]:
    """A topic of good JSON messages with corrupt ones in between (queue 0 and 1)."""
    topic = "ValuesMixed"
    create_topic(cluster, topic, 2)
    bodies, bad = [], set()
    for i in range(N_GOOD):
        bodies.append(good_json(i))
        if i % 8 == 5:
            bad.add(len(bodies))
            bodies.append(BAD_BODIES[len(bad) % len(BAD_BODIES)])
    produce(cluster, topic, bodies, queue_ids=[i % 2 for i in range(len(bodies))])
    return topic, bodies, bad


def json_options(policy: str, **more: str) -> dict[str, str]:
    return {"valueFormat": "json", "valueSchema": VALUE_DDL, "onDecodeError": policy, **more}


def test_fail_names_the_message(
    spark_session: Any, cluster: Cluster, mixed: tuple[str, list[bytes], set[int]]
) -> None:
    topic, _, _ = mixed
    with pytest.raises(Exception) as info:
        reader(spark_session, cluster, topic, **json_options("fail")).collect()
    text = str(info.value)
    assert "DecodeError" in text and f"topic {topic}" in text and "broker broker-a" in text, text[-3000:]
    assert "queueOffset" in text and "bytes)" in text and "onDecodeError" in text, text[-3000:]


def test_null_and_skip(
    spark_session: Any, cluster: Cluster, mixed: tuple[str, list[bytes], set[int]], tmp_path: Path
) -> None:
    topic, bodies, bad = mixed
    rows = reader(spark_session, cluster, topic, **json_options("null")).collect()
    assert len(rows) == len(bodies)
    failed = [r for r in rows if r.decodeError is not None]
    assert sorted(r.body for r in failed) == sorted(bodies[i] for i in bad)
    assert all(r.value is None for r in failed)
    assert sorted(r.value.id for r in rows if r.decodeError is None) == list(range(N_GOOD))

    stats = tmp_path / "stats"
    kept = reader(spark_session, cluster, topic, **json_options("skip", decodeStatsPath=str(stats))).collect()
    assert sorted(r.value.id for r in kept) == list(range(N_GOOD))
    counts = decode_stats(str(stats))
    assert (counts["failed"], counts["rows"]) == (len(bad), len(bodies)), counts


def test_schema_inference(
    spark_session: Any, cluster: Cluster, mixed: tuple[str, list[bytes], set[int]]
) -> None:
    topic, _, _ = mixed
    df = reader(
        spark_session, cluster, topic, valueFormat="json", valueSchemaInference="100", onDecodeError="skip"
    )
    inferred = df.schema["value"].dataType.simpleString()
    assert (
        inferred == "struct<id:bigint,name:string,tags:array<string>,inner:struct<x:double,ys:array<string>>>"
    )
    assert sorted(r.value.id for r in df.select("value").collect()) == list(range(N_GOOD))


def test_dead_letter(spark_session: Any, cluster: Cluster, mixed: tuple[str, list[bytes], set[int]]) -> None:
    topic, bodies, bad = mixed
    kept = reader(
        spark_session, cluster, topic, **json_options("deadLetter", deadLetterTopic="ValuesMixedDLQ")
    ).collect()
    assert sorted(r.value.id for r in kept) == list(range(N_GOOD))
    letters = reader(spark_session, cluster, "ValuesMixedDLQ").collect()
    assert sorted(r.body for r in letters) == sorted(bodies[i] for i in bad)
    by_offset = {(r.queueId, r.queueOffset): r for r in reader(spark_session, cluster, topic).collect()}
    for letter in letters:
        p = letter.properties
        origin = by_offset[(int(p["originQueueId"]), int(p["originQueueOffset"]))]
        assert (p["originTopic"], p["originBrokerName"], p["originMsgId"]) == (
            topic,
            "broker-a",
            origin.msgId,
        )
        assert origin.body == letter.body and p["decodeError"]


# -- a driver killed between the dead-letter sends and the micro-batch commit ----------------------


def run_job(name_server: str, work: str) -> int:
    """The killed driver (this file run as a script): ValuesMixed -> {"id": value.id} -> ValuesOut,
    exactly once, dead letters to ValuesKillDLQ, Trigger.AvailableNow, one micro-batch."""
    scratch = os.path.join(work, "spark-scratch")  # a SIGKILLed driver leaves its scratch here
    os.makedirs(scratch, exist_ok=True)
    os.environ["TMPDIR"] = scratch
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]").appName("values-dlq-kill")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2").config("spark.local.dir", scratch)
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch} {SHORT_LIVED_JVM_OPTIONS}")
        .getOrCreate()
    )  # fmt: skip
    spark.sparkContext.setLogLevel("ERROR")
    df = (
        spark.readStream.format("rocketmq").option("nameServer", name_server).option("topic", "ValuesMixed")
        .option("startingOffsets", "earliest").option("valueFormat", "json").option("valueSchema", VALUE_DDL)
        .option("onDecodeError", "deadLetter").option("deadLetterTopic", "ValuesKillDLQ").load()
    )  # fmt: skip
    checkpoint = os.path.join(work, "checkpoint")
    query = (
        df.select(F.struct(F.col("value.id").alias("id")).alias("value")).writeStream.format("rocketmq")
        .option("nameServer", name_server).option("topic", "ValuesOut").option("valueFormat", "json")
        .option("deliveryGuarantee", "exactlyOnce").option("checkpointLocation", checkpoint)
        .trigger(availableNow=True).start()
    )  # fmt: skip
    print("QUERY_STARTED", flush=True)
    query.awaitTermination()
    print("QUERY_DONE", flush=True)
    return 0


# The fault is injected from the test side: a sitecustomize on the Spark Python workers' path wraps
# the dead-letter send, notes every confirmed send in a marker file, then (first run) waits to be
# killed, so the driver dies after the dead letters were confirmed and before the batch committed.
SITECUSTOMIZE = """\
import os, time
from rocketq.connector import deadletter as _deadletter

_MARKER = {marker!r}
_PAUSE_S = {pause_s!r}
_send = _deadletter.DeadLetterSink.send


def _send_then_pause(self, batch, decoded):
    sent = _send(self, batch, decoded)
    with open(_MARKER, "a", encoding="utf-8") as out:
        out.write(f"{{os.getpid()}} {{sent}}\\n")
    if _PAUSE_S and not os.path.exists(_MARKER + ".resumed"):
        time.sleep(_PAUSE_S)
    return sent


_deadletter.DeadLetterSink.send = _send_then_pause
"""


def start_job(cluster: Cluster, work: Path, run: int, pause_s: float) -> tuple[subprocess.Popen[bytes], Path]:
    log = work / f"job-{run}.log"
    hooks = work / f"pyhooks-{run}"
    hooks.mkdir(exist_ok=True)
    marker = str(work / "dead-letters.marker")
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE.format(marker=marker, pause_s=float(pause_s)))
    path = os.pathsep.join([str(hooks), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": path}
    proc = subprocess.Popen(
        [sys.executable, __file__, cluster.namesrv_addr, str(work)],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True, env=env,
    )  # fmt: skip
    return proc, log


def test_dead_letters_survive_a_driver_kill(
    spark_session: Any, cluster: Cluster, mixed: tuple[str, list[bytes], set[int]], tmp_path: Path
) -> None:
    _, bodies, bad = mixed
    marker = tmp_path / "dead-letters.marker"
    proc, log = start_job(cluster, tmp_path, 1, pause_s=600)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), (
            f"no dead letter was confirmed; job log:\n{log.read_text(errors='replace')[-3000:]}"
        )
        assert not list((tmp_path / "checkpoint" / "commits").glob("[0-9]*")), "the batch committed already"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    Path(f"{marker}.resumed").touch()  # the restarted job does not pause
    proc, log = start_job(cluster, tmp_path, 2, pause_s=0)
    try:
        assert proc.wait(timeout=300) == 0, log.read_text(errors="replace")[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = Counter(r.body for r in reader(spark_session, cluster, "ValuesOut").collect())
    want = Counter(f'{{"id":{i}}}'.encode() for i in range(N_GOOD))
    assert out == want, f"missing {want - out}; duplicated or unexpected {out - want}"
    letters = reader(spark_session, cluster, "ValuesKillDLQ").collect()
    by_origin = {(r.properties["originQueueId"], r.properties["originQueueOffset"]): r.body for r in letters}
    assert sorted(by_origin.values()) == sorted(bodies[i] for i in bad), "a bad message has no dead letter"
    assert len(letters) >= len(bad)


if __name__ == "__main__":
    sys.exit(run_job(sys.argv[1], sys.argv[2]))
