"""The connector where Kafka users expect it, against a real NameServer + broker and local Spark.

One NameServer + broker per module (temp dir, port 0); pytest-spark's shared ``spark_session``.
Checked: two queries on one topic commit to two generated groups of their own, a named group
carries ``startingOffsets=committed`` from one query to the next; ``subscribe``/``assign`` read
what they name; a stream copying ``select("topic", "body", ...)`` with ``.option("topic", "copy")``
writes to ``copy`` (never back into its source) and forwards only user properties; the lag of a
query read with ``maxOffsetsPerTrigger`` is reported by ``rocketq.connector.lag`` and by the
listener of ``examples/streaming_lag.py``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.testing import spawn_broker, spawn_namesrv, wait_for, wait_route
from rocketq.connector import lag
from rocketq.connector.testing import Cluster, create_topic, local_cluster, produce

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "streaming_lag.py"
TLS_TESTS = Path(__file__).with_name("test_tls.py")  # its test CA (made with openssl) is reused
QUERY_WAIT_S = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("kafka-parity")) as c:
        yield c


def fill(cluster: Cluster, topic: str, per_queue: int, queues: int = 4) -> None:
    create_topic(cluster, topic, queues)
    n = per_queue * queues
    produce(
        cluster, topic, [f"{topic}-{i}".encode() for i in range(n)], queue_ids=[i % queues for i in range(n)]
    )


def stream(spark: Any, cluster: Cluster, **options: str) -> Any:
    reader = spark.readStream.format("rocketmq").option("nameServer", cluster.namesrv_addr)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def to_memory(df: Any, name: str, checkpoint: Path) -> Any:
    return (
        df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start()
    )  # fmt: skip


def finish(*queries: Any) -> None:
    for q in queries:
        assert q.awaitTermination(QUERY_WAIT_S), f"query {q.name} did not finish within {QUERY_WAIT_S} s"
        assert q.exception() is None, q.exception()


def committed(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    with Admin(cluster.namesrv_addr) as admin:
        return {p.message_queue.queue_id: p.consumer_offset for p in admin.consumer_progress(group, topic)}


def groups_with_prefix(cluster: Cluster, prefix: str) -> list[str]:
    with Admin(cluster.namesrv_addr) as admin:
        return [g for g in admin.group_list() if g.startswith(prefix)]


def test_two_queries_on_one_topic_commit_to_groups_of_their_own(
    spark_session: Any, cluster: Cluster, tmp_path: Path
) -> None:
    topic = "KpTwoQueries"
    fill(cluster, topic, per_queue=10)
    queries = [
        to_memory(
            stream(spark_session, cluster, topic=topic, startingOffsets="earliest", groupIdPrefix="kp-two"),
            f"kp_two_{i}",
            tmp_path / f"cp{i}",
        )
        for i in range(2)
    ]
    finish(*queries)
    for i in range(2):
        assert spark_session.sql(f"select count(*) from kp_two_{i}").collect()[0][0] == 40
    # one generated group per query: the executors' pulls name the driver's group (it travels in
    # the input partitions), so the broker knows exactly two groups with the prefix
    offsets = {g: committed(cluster, g, topic) for g in groups_with_prefix(cluster, "kp-two-")}
    assert len(offsets) == 2, offsets
    for by_queue in offsets.values():
        assert by_queue == {q: 10 for q in range(4)}


def test_a_named_group_carries_committed_offsets_to_the_next_query(
    spark_session: Any, cluster: Cluster, tmp_path: Path
) -> None:
    topic = "KpNamedGroup"
    fill(cluster, topic, per_queue=5)
    first = stream(spark_session, cluster, subscribe=topic, startingOffsets="earliest", group="kp-named")
    finish(to_memory(first, "kp_named_1", tmp_path / "cp1"))
    assert committed(cluster, "kp-named", topic) == {q: 5 for q in range(4)}
    produce(cluster, topic, [b"new"] * 8, queue_ids=[i % 4 for i in range(8)])
    second = stream(spark_session, cluster, subscribe=topic, startingOffsets="committed", group="kp-named")
    finish(to_memory(second, "kp_named_2", tmp_path / "cp2"))  # a new checkpoint: starts at committed
    assert [r.body for r in spark_session.sql("select body from kp_named_2").collect()] == [b"new"] * 8
    with pytest.raises(Exception, match="set 'group'"):
        stream(spark_session, cluster, subscribe=topic, startingOffsets="committed")


def test_assign_reads_only_the_queues_named(spark_session: Any, cluster: Cluster) -> None:
    topic = "KpAssign"
    fill(cluster, topic, per_queue=6)
    assign = f'{{"{topic}": ["{cluster.broker_name}:1", "{cluster.broker_name}:3"]}}'
    rows = (
        spark_session.read.format("rocketmq").option("nameServer", cluster.namesrv_addr)
        .option("assign", assign).load().select("queueId").collect()
    )  # fmt: skip
    assert sorted(r.queueId for r in rows) == [1] * 6 + [3] * 6


def test_stream_copy_writes_to_the_topic_option_with_user_properties_only(
    spark_session: Any, cluster: Cluster, tmp_path: Path
) -> None:
    source, copy = "KpCopySource", "KpCopy"
    create_topic(cluster, source, 2)
    create_topic(cluster, copy, 2)
    with Producer(cluster.namesrv_addr, producer_group="kp-copy-producer") as producer:
        for i in range(10):
            msg = Message(source, f"m{i}".encode(), tags="src-tag", keys=f"k{i}", properties={"region": "eu"})
            producer.send(msg, queue=MessageQueue(source, cluster.broker_name, i % 2))
    df = stream(spark_session, cluster, topic=source, startingOffsets="earliest", group="kp-copy")
    query = (
        df.selectExpr("topic", "body", "'copied' AS tags", "properties")
        .writeStream.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", copy)
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    )  # fmt: skip
    finish(query)

    def read(topic: str) -> list[Any]:
        rows: list[Any] = (
            spark_session.read.format("rocketmq").option("nameServer", cluster.namesrv_addr)
            .option("topic", topic).load().collect()
        )  # fmt: skip
        return rows

    originals = read(source)
    assert len(originals) == 10  # nothing was written back into the source topic
    copies = read(copy)
    assert sorted(r.body for r in copies) == sorted(f"m{i}".encode() for i in range(10))
    source_ids = {r.uniqKey for r in originals}
    for row in copies:
        assert row.tags == "copied" and row.keys is None  # the row's own columns, not the forwarded map
        assert row.properties["region"] == "eu"
        assert row.uniqKey not in source_ids and row.properties["UNIQ_KEY"] == row.uniqKey


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_lag_of_the_example_listener_and_of_the_progress(
    spark_session: Any, cluster: Cluster, tmp_path: Path
) -> None:
    topic = "KpLag"
    fill(cluster, topic, per_queue=25)  # 100 messages
    example = _load("streaming_lag", EXAMPLE)
    query, listener = example.start_query(
        spark_session, cluster.namesrv_addr, topic, str(tmp_path / "cp"),
        query_name="kp_lag", max_offsets_per_trigger=30,
    )  # fmt: skip
    try:
        finish(query)
        batches = [p for p in query.recentProgress if p.numInputRows]
        assert [p.numInputRows for p in batches] == [30, 30, 30, 10]
        figures = [lag(p) for p in batches]
        assert [f[0].total_offsets_behind_latest for f in figures] == [70, 40, 10, 0]
        assert all(len(f) == 1 and len(f[0].per_queue) == 4 for f in figures)
        assert figures[0][0].max_offsets_behind_latest >= 70 / 4 >= figures[0][0].min_offsets_behind_latest
        assert figures[0][0].metrics()["avgOffsetsBehindLatest"] == 70 / 4
        assert lag(query)[0].metrics() == {
            "minOffsetsBehindLatest": 0, "maxOffsetsBehindLatest": 0, "avgOffsetsBehindLatest": 0.0
        }  # fmt: skip
        # the listener bus delivers progress events asynchronously
        wait_for(lambda: len(listener.seen) >= 4, "the example listener's four progress events", 60)
        assert [s["avgOffsetsBehindLatest"] for s in listener.seen[:4]] == [70 / 4, 40 / 4, 10 / 4, 0.0]
    finally:
        spark_session.streams.removeListener(listener)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_mutual_tls_options_reach_servers_that_require_a_client_certificate(
    spark_session: Any, tmp_path: Path
) -> None:
    tls = _load("tls_helpers", TLS_TESTS)
    pki = tls.make_test_pki(tmp_path / "pki")
    # servers that require a client certificate signed by the test CA; their own outgoing
    # connections (registration) present the server certificate, which is also a client one
    conf = {
        **tls.server_tls_conf(pki, "enforcing"),
        "tls.server.need.client.auth": "require",
        "tls.server.trustCertPath": str(pki.ca),
        "tls.client.certPath": str(pki.server_cert),
        "tls.client.keyPath": str(pki.server_key),
    }
    props = tmp_path / "namesrv.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in conf.items()), encoding="utf-8")
    topic = "KpMutualTls"
    with spawn_namesrv(tmp_path / "ns", "-c", str(props)) as ns, spawn_broker(tmp_path, ns.addr, **conf):
        client = ClientConfig(
            use_tls=True, tls_trust_cert_path=str(pki.ca), tls_cert_path=str(pki.server_cert),
            tls_key_path=str(pki.server_key),
        )  # fmt: skip
        with Admin(ns.addr, config=client) as admin:
            admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
            wait_route(admin, topic)
        options = {"nameServer": ns.addr, "topic": topic, "tls": "true", "tlsTrustCertPath": str(pki.ca)}
        mutual = {**options, "tlsCertPath": str(pki.server_cert), "tlsKeyPath": str(pki.server_key)}
        df = spark_session.createDataFrame([(f"t{i}",) for i in range(20)], "body string")
        df.write.format("rocketmq").options(**mutual).mode("append").save()
        rows = spark_session.read.format("rocketmq").options(**mutual).load().collect()
        assert sorted(r.body for r in rows) == sorted(f"t{i}".encode() for i in range(20))
        without = spark_session.read.format("rocketmq").options(**options, **{"fetchOffset.numRetries": "0"})
        with pytest.raises(Exception, match="no NameServer of"):  # the handshake fails: no client certificate
            without.load().count()
