"""rocketq through Spark Connect: a real Connect server, clients that do not have rocketq.

The server (``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``,
``local[2]``) runs with a Python that has rocketq; the first client is a separate virtual
environment that reaches pyspark and the Connect client's dependencies but not rocketq
(``import rocketq`` fails there).  Through ``SparkSession.builder.remote("sc://...")`` it runs a
batch read and an AvailableNow stream into a rocketq sink, relying on the server's automatic
lookup.  A second client, which has rocketq, uses :func:`rocketq.connector.connect.register_remote`
(server probe + ``spark.dataSource.register`` over Connect).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.launcher import free_port
from rocketq.client.testing import SHORT_LIVED_JVM_OPTIONS
from rocketq.connector.testing import Cluster, create_topic, local_cluster, produce

_spec = importlib.util.spec_from_file_location("spark_deploy", Path(__file__).parent / "spark_deploy.py")
assert _spec is not None and _spec.loader is not None
deploy: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(deploy)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = 30
CLIENT_TIMEOUT_S = 300.0

# Runs in a venv without rocketq: everything rocketq does happens on the server.
CLIENT_WITHOUT_ROCKETQ = r"""
import json, sys
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

url, name_server, in_topic, out_topic, checkpoint = sys.argv[1:6]
try:
    import rocketq.connector
except ModuleNotFoundError:
    pass
else:
    raise SystemExit("this client must not be able to import rocketq")
spark = SparkSession.builder.remote(url).getOrCreate()
rows = (spark.read.format("rocketmq").option("nameServer", name_server).option("topic", in_topic).load()
        .select(F.col("body").cast("string").alias("body")).collect())
print("BATCH " + json.dumps(sorted(r["body"] for r in rows)), flush=True)
stream = (spark.readStream.format("rocketmq").option("nameServer", name_server).option("topic", in_topic)
          .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "12")
          .option("pullTimeoutMs", "30000").load())
query = (stream.select(F.upper(F.col("body").cast("string")).alias("body"), F.col("keys"))
         .writeStream.format("rocketmq").option("nameServer", name_server).option("topic", out_topic)
         .option("checkpointLocation", checkpoint).option("sendTimeoutMs", "20000")
         .trigger(availableNow=True).start())
query.awaitTermination()
print("STREAM " + json.dumps([p.numInputRows for p in query.recentProgress]), flush=True)
spark.stop()
"""

# Runs with rocketq installed on the client: the explicit, checked registration.
CLIENT_WITH_ROCKETQ = r"""
import dataclasses, json, sys
from pyspark.sql import SparkSession
from rocketq.connector.connect import register_remote

url, name_server, in_topic = sys.argv[1:4]
spark = SparkSession.builder.remote(url).getOrCreate()
info = register_remote(spark)
print("PROBE " + json.dumps(dataclasses.asdict(info)), flush=True)
reader = spark.read.format("rocketmq").option("nameServer", name_server).option("topic", in_topic)
count = reader.load().count()
print("COUNT " + json.dumps([count]), flush=True)
spark.stop()
"""


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("spark-connect")
    yield path
    for bulky in (path / "client-venv", path / "scratch", path / "rocketmq"):
        shutil.rmtree(bulky, ignore_errors=True)


@pytest.fixture(scope="module")
def mq(work_dir: Path) -> Iterator[Cluster]:
    with local_cluster(work_dir / "rocketmq", autoCreateTopicEnable=True) as cluster:
        create_topic(cluster, "ConnectIn", 2)
        produce(cluster, "ConnectIn", [f"c{i % 3}:{i}".encode() for i in range(ROWS)],
                keys=[f"c{i % 3}" for i in range(ROWS)])  # fmt: skip
        yield cluster


@pytest.fixture(scope="module")
def connect_url(work_dir: Path) -> Iterator[str]:
    """``sc://`` URL of a Spark Connect server (local[2]) whose Python is ours (it has rocketq)."""
    port = free_port()
    # the launcher treats the Connect server as a daemon: its heap is SPARK_DAEMON_MEMORY, not --driver-memory
    python = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env = deploy.spark_env(work_dir, SPARK_DAEMON_MEMORY="1g", **python)
    args = [str(deploy.spark_home() / "bin" / "spark-submit"),
            "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name", "rocketq-connect-test", "--master", "local[2]",
            "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.driver.extraJavaOptions={SHORT_LIVED_JVM_OPTIONS}",
            "--conf", "spark.sql.shuffle.partitions=2",
            "--conf", f"spark.local.dir={work_dir / 'scratch'}"]  # fmt: skip
    server = deploy.Daemon("connect-server", args, env, work_dir / "connect-server.log")
    try:
        server.wait_for(r"Spark Connect server started at")
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.kill()


def run_client(python: Path | str, script: str, args: list[str], work: Path, tag: str) -> str:
    path = work / f"{tag}.py"
    path.write_text(script, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "PYSPARK_PYTHON")}
    env["TMPDIR"] = str(work)
    try:
        done = subprocess.run(
            [str(python), str(path), *args], capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, env=env
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"client {tag} did not finish in {CLIENT_TIMEOUT_S} s: {exc.stderr!r}") from exc
    assert done.returncode == 0, (
        f"client {tag} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-6000:]}"
    )
    return done.stdout


def printed(out: str, prefix: str) -> list[Any]:
    (line,) = [ln for ln in out.splitlines() if ln.startswith(prefix + " ")]
    value = json.loads(line[len(prefix) + 1 :])
    assert isinstance(value, list | dict)
    return value if isinstance(value, list) else [value]


def test_client_without_rocketq_batch_and_stream(connect_url: str, mq: Cluster, work_dir: Path) -> None:
    client_python = deploy.deps_only_venv(work_dir / "client-venv")
    run = work_dir / "client-a"
    run.mkdir()
    args = [connect_url, mq.namesrv_addr, "ConnectIn", "ConnectOut", str(run / "checkpoint")]
    out = run_client(client_python, CLIENT_WITHOUT_ROCKETQ, args, run, "client_without_rocketq")

    assert printed(out, "BATCH") == sorted(f"c{i % 3}:{i}" for i in range(ROWS))
    batches = printed(out, "STREAM")
    assert sum(batches) == ROWS and len(batches) >= 3, f"rows per micro-batch: {batches}"
    assert deploy.read_topic(mq, "ConnectOut") == sorted((f"C{i % 3}:{i}", f"c{i % 3}") for i in range(ROWS))


def test_register_remote_from_a_client_with_rocketq(connect_url: str, mq: Cluster, work_dir: Path) -> None:
    run = work_dir / "client-b"
    run.mkdir()
    out = run_client(
        sys.executable, CLIENT_WITH_ROCKETQ, [connect_url, mq.namesrv_addr, "ConnectIn"], run, "reg"
    )
    (probe,) = printed(out, "PROBE")
    assert isinstance(probe, dict)
    assert probe["executable"] == sys.executable, probe
    assert probe["error"] is None and probe["lookup_visible"], probe
    assert printed(out, "COUNT") == [ROWS]


def test_probe_explains_a_python_without_rocketq(tmp_path: Path) -> None:
    """The probe register_remote runs on the server, run here in a Python that lacks rocketq."""
    from rocketq.connector.connect import PROBE_SOURCE, ServerPython, explain_missing

    bare = deploy.deps_only_venv(tmp_path / "bare-venv")
    script = PROBE_SOURCE + "\nprint(rocketq_server_probe())\n"
    done = subprocess.run([str(bare), "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    info = ServerPython.from_json(done.stdout)
    assert info.executable == str(bare) and not info.ok
    assert info.error == "ModuleNotFoundError: No module named 'rocketq'" and not info.lookup_visible
    message = explain_missing(info)
    assert str(bare) in message and "-m pip install rocketq-" in message and "restart the server" in message
