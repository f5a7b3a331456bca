"""The Spark connector and the official RocketMQ 5 SDKs on one cluster, through mqproxy.

A NameServer and a broker (rocketq.connector.testing's local cluster) and an ``mqproxy`` in front of
them; pytest-spark's shared ``spark_session``.  Each test runs once with the Python SDK (PyPI
``rocketmq-python-client`` 5.1.2, ``grpc_sdk/python_sdk_spark.py`` in the venv of its own) and once
with the Node.js SDK (npm ``rocketmq-client-nodejs`` 1.0.8, ``grpc_sdk/node_sdk_spark.js``), both
installed under ``~/.cache/rocketq-tests`` by the fixtures of ``test_grpc_python_sdk.py`` (skipped
when the registry cannot be reached, or without node and npm).  The SDK's normal and FIFO
messages are read by ``spark.readStream.format("rocketmq")`` with their ids, tags, keys,
properties and message groups, and a ``df.write.format("rocketmq")``'s rows are received and acked
by the SDK's SimpleConsumer with their tags, keys and properties.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.launcher import spawn_proxy
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.testing import ProcessOutput, ServerProcess
from rocketq.connector.testing import Cluster, create_topic, local_cluster

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark


SCRIPTS = Path(__file__).with_name("grpc_sdk")
SDKS = ("python", "node")


@dataclass(frozen=True)
class Sdk:
    """How to run an SDK's hand-over script: ``command + [mode, ...]`` with ``env``."""

    name: str
    command: list[str]
    env: dict[str, str]


@pytest.fixture(params=SDKS)
def sdk(request: pytest.FixtureRequest, tmp_path: Path) -> Sdk:
    # only the parameter's installation is asked for: no npm without need, and the other runs on
    if request.param == "python":
        python: Path = request.getfixturevalue("sdk_python")
        return Sdk("python", [str(python), str(SCRIPTS / "python_sdk_spark.py")], dict(os.environ))
    modules: Path = request.getfixturevalue("node_modules")
    # HOME: the Node.js SDK writes its log under ~/logs/rocketmq
    env = {**os.environ, "NODE_PATH": str(modules), "HOME": str(tmp_path)}
    return Sdk("node", ["node", str(SCRIPTS / "node_sdk_spark.js")], env)


@dataclass
class Stack:
    cluster: Cluster
    proxy: ServerProcess


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("spark-grpc")
    with local_cluster(tmp / "cluster") as cluster:
        for name in SDKS:
            for topic in (f"{name}-to-spark", f"spark-to-{name}"):
                create_topic(cluster, topic, 4)
        # short long polls keep the SDK's empty receives short
        with spawn_proxy(
            tmp / "proxy",
            cluster.namesrv_addr,
            grpcClientConsumerMinLongPollingTimeoutMillis=1000,
            grpcClientConsumerMaxLongPollingTimeoutMillis=3000,
        ) as px:
            yield Stack(cluster, px)


def test_sdk_messages_are_read_by_the_spark_source(
    spark_session: Any, stack: Stack, sdk: Sdk, tmp_path: Path
) -> None:
    topic = f"{sdk.name}-to-spark"
    run = subprocess.run(
        [*sdk.command, "produce", stack.proxy.addr, topic],
        capture_output=True,
        text=True,
        timeout=120,
        env=sdk.env,
    )
    assert run.returncode == 0, f"SDK failed:\n{run.stderr[-4000:]}\nproxy log:\n{stack.proxy.log_tail()}"
    sent = {s["body"]: s["id"] for s in json.loads(run.stdout.strip().splitlines()[-1])["sent"]}

    df = (
        spark_session.readStream.format("rocketmq")
        .option("nameServer", stack.cluster.namesrv_addr)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        df.writeStream.format("memory").queryName(f"{sdk.name}_to_spark")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    assert query.awaitTermination(300), "the AvailableNow query did not finish within 300 s"
    assert query.exception() is None, query.exception()
    rows = {r.body.decode(): r for r in spark_session.sql(f"select * from {sdk.name}_to_spark").collect()}

    assert set(rows) == set(sent)
    for body, msg_id in sent.items():  # the SDK's message id is the message's UNIQ_KEY
        assert rows[body].uniqKey == msg_id and rows[body].topic == topic
    for i in range(3):
        row = rows[f"sdk-normal-{i}"]
        assert (row.tags, sorted(row.keys), row.properties["p"]) == ("TagS", [f"ka-{i}", f"kb-{i}"], str(i))
        assert MessageConst.SHARDING_KEY not in row.properties
    # FIFO: a message group's messages share one queue, in send order
    for group in ("G1", "G2"):
        fifo = sorted(
            (r for body, r in rows.items() if body.startswith(f"fifo-{group}-")),
            key=lambda r: r.queueOffset,
        )
        assert [r.body.decode() for r in fifo] == [f"fifo-{group}-{i}" for i in range(4)]
        assert {(r.queueId, r.tags, r.properties[MessageConst.SHARDING_KEY]) for r in fifo} == {
            (fifo[0].queueId, "TagF", group)
        }


def test_spark_sink_output_is_received_by_an_sdk_consumer(
    spark_session: Any, stack: Stack, sdk: Sdk, tmp_path: Path
) -> None:
    topic = f"spark-to-{sdk.name}"
    rows = [
        (f"from-spark-{i}", f"TagK{i % 2}", [f"sk-{i}", f"sk2-{i}"], {"origin": "spark", "n": str(i)})
        for i in range(6)
    ]
    stderr_path = tmp_path / "sdk.stderr"
    with stderr_path.open("w") as stderr_file:  # a file: the SDK's log never fills a pipe
        consumer = subprocess.Popen(
            [*sdk.command, "consume", stack.proxy.addr, topic, f"g-spark-{sdk.name}", str(len(rows))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
            env=sdk.env,
        )
    assert consumer.stdin is not None and consumer.stdout is not None
    output = ProcessOutput(consumer.stdout)
    try:
        output.values(["PHASE"], timeout_s=60)  # subscribed: its start offsets are fixed
        df = spark_session.createDataFrame(
            rows, "body string, tags string, keys array<string>, properties map<string,string>"
        )
        df.write.format("rocketmq").option("nameServer", stack.cluster.namesrv_addr).option(
            "topic", topic
        ).mode("append").save()
        consumer.stdin.write("go\n")
        consumer.stdin.flush()
        consumer.wait(120)
        output.wait_ended(10)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(10)
    stderr = stderr_path.read_text(errors="replace")
    assert consumer.returncode == 0, f"SDK failed:\n{stderr[-4000:]}\nproxy log:\n{stack.proxy.log_tail()}"
    out = json.loads(output.lines()[-1])
    got = {r["body"]: r for r in out["received"]}
    assert set(got) == {body for body, _, _, _ in rows}, out["received"]
    for body, tag, keys, props in rows:
        seen = got[body]
        assert (seen["tag"], seen["keys"], seen["attempt"]) == (tag, sorted(keys), 1), seen
        assert {k: seen["props"][k] for k in props} == props, seen
    assert out["late"] == []  # acked: nothing comes back
