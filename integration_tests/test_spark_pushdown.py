"""Filter pushdown and SQL92 filters of the rocketmq source against a real broker and local Spark.

One NameServer + broker (``enablePropertyFilter=true``) per module; pytest-spark's shared
``spark_session`` with ``spark.sql.python.filterPushdown.enabled`` switched on for these tests
only.  Every pushed query is checked twice: its rows equal the same query with
``pushFilters=false`` (Spark filters everything), and the broker served fewer messages -- the
difference of its ``msgGetTotalTodayNow`` counter (GET_BROKER_RUNTIME_INFO) around the query.
"""

from __future__ import annotations

import io
import os
import sys
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from rocketq.connector.errors import OptionError
from rocketq.connector.testing import Cluster, create_topic, local_cluster

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
pytestmark = pytest.mark.spark
TOPIC, QUEUES, PER_QUEUE = "PushT", 4, 40
N = QUEUES * PER_QUEUE
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with local_cluster(tmp_path_factory.mktemp("push-cluster"), enablePropertyFilter="true") as c:
        yield c


@pytest.fixture(scope="module")
def middle_ms(cluster: Cluster) -> int:
    """Fill the topic: two halves separated in store time; tag, property ``n`` vary per queue."""
    from rocketq.client.model import Message
    from rocketq.client.producer import Producer
    from rocketq.client.remoting.route import MessageQueue

    create_topic(cluster, TOPIC, QUEUES)
    middle = 0
    with Producer(cluster.namesrv_addr, producer_group="push-test") as producer:
        for i in range(N):
            if i == N // 2:
                time.sleep(0.05)
                middle = int(time.time() * 1000)
                time.sleep(0.05)
            tag = "abcd"[(i // QUEUES) % 4]
            msg = Message(TOPIC, f"m{i}".encode(), tags=tag, properties={"n": str(i % 10)})
            producer.send(msg, queue=MessageQueue(TOPIC, cluster.broker_name, i % QUEUES))
    return middle


@pytest.fixture
def spark(spark_session: Any) -> Iterator[Any]:
    spark_session.conf.set(PUSHDOWN_CONF, "true")
    try:
        yield spark_session
    finally:
        spark_session.conf.set(PUSHDOWN_CONF, "false")


def served(cluster: Cluster) -> int:
    from rocketq.client.admin import Admin

    with Admin(cluster.namesrv_addr) as admin:
        return int(admin.broker_runtime_info(cluster.broker_addr)["msgGetTotalTodayNow"])


def read(spark: Any, cluster: Cluster, **options: str) -> Any:
    reader = spark.read.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", TOPIC)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def rows_and_pulled(cluster: Cluster, df: Any) -> tuple[list[tuple[int, int]], int]:
    before = served(cluster)
    rows = sorted((r.queueId, r.queueOffset) for r in df.select("queueId", "queueOffset").collect())
    return rows, served(cluster) - before


def compare(spark: Any, cluster: Cluster, where: str, **options: str) -> tuple[list[tuple[int, int]], int]:
    """Rows and messages served with pushdown; asserts the rows equal Spark's own filtering."""
    pushed, pulled = rows_and_pulled(
        cluster, read(spark, cluster, pushFilters="true", **options).where(where)
    )
    plain, all_pulled = rows_and_pulled(cluster, read(spark, cluster, **options).where(where))
    assert pushed == plain, f"{where}: pushdown gave {len(pushed)} rows, Spark's filter {len(plain)}"
    assert all_pulled == N, f"without pushdown the whole topic ({N}) is read, the broker served {all_pulled}"
    return pushed, pulled


def test_tags_go_to_the_broker_tag_filter(spark: Any, cluster: Cluster, middle_ms: int) -> None:
    rows, pulled = compare(spark, cluster, "tags IN ('a', 'c')")
    assert len(rows) == N // 2 and pulled == len(rows), (
        f"the broker served {pulled} messages for {len(rows)} rows"
    )


def test_queue_predicates_prune_queues(spark: Any, cluster: Cluster, middle_ms: int) -> None:
    rows, pulled = compare(
        spark, cluster, "queueId IN (1, 3) AND brokerName = 'broker-a' AND topic = 'PushT'"
    )
    assert {q for q, _ in rows} == {1, 3} and pulled == len(rows) == 2 * PER_QUEUE


def test_offset_ranges_narrow_the_pulls(spark: Any, cluster: Cluster, middle_ms: int) -> None:
    rows, pulled = compare(spark, cluster, "queueOffset >= 10 AND queueOffset < 15")
    assert len(rows) == 5 * QUEUES and pulled == len(rows)
    rows, pulled = compare(spark, cluster, "queueOffset IN (3, 30) AND queueId = 2")
    assert rows == [(2, 3), (2, 30)] and pulled == 28  # the hull [3, 31) of one queue, re-checked


def test_store_time_bounds_find_offsets_by_time(spark: Any, cluster: Cluster, middle_ms: int) -> None:
    late = f"storeTimestamp >= timestamp_millis({middle_ms})"
    rows, pulled = compare(spark, cluster, late)
    assert len(rows) == N // 2 and pulled == len(rows)
    early = f"storeTimestamp < timestamp_millis({middle_ms})"
    rows, pulled = compare(spark, cluster, early)
    assert len(rows) == N // 2 and pulled <= len(rows) + QUEUES  # a queue's boundary message at most


def test_explain_shows_pushed_filters_and_unpushable_ones_stay_with_spark(
    spark: Any, cluster: Cluster, middle_ms: int
) -> None:
    df = read(spark, cluster, pushFilters="true").where("tags = 'a' AND properties['n'] = '4'")
    out = io.StringIO()
    with redirect_stdout(out):
        df.explain("formatted")
    plan = out.getvalue()
    assert "PushedFilters: [" in plan and "EqualTo(tags,a)" in plan, plan
    rows, pulled = compare(spark, cluster, "tags = 'a' AND properties['n'] = '4'")
    assert rows and pulled == N // 4  # the tag is pushed, the property lookup is Spark's


def test_property_columns_go_to_sql92(spark: Any, cluster: Cluster, middle_ms: int) -> None:
    rows, pulled = compare(spark, cluster, "n = '3'", propertyColumns="n")
    assert len(rows) == N // 10 and pulled == len(rows), f"served {pulled} for {len(rows)}"
    rows, pulled = compare(
        spark, cluster, "n IN ('1', '2') AND tags = 'a' AND NOT n <=> '2'", propertyColumns="n"
    )
    want = [i for i in range(N) if i % 10 == 1 and (i // QUEUES) % 4 == 0]
    assert len(rows) == len(want) and pulled == len(rows), f"served {pulled} for {len(rows)}"
    rows, pulled = compare(spark, cluster, "n >= 8 OR n < 1", propertyColumns="n:int")  # typed: numbers
    assert len(rows) == 3 * N // 10 and pulled == N, "an OR across conditions is Spark's"
    rows, pulled = compare(spark, cluster, "n > 7 AND n <> 9", propertyColumns="n:int")
    assert len(rows) == N // 10 and pulled == len(rows), f"served {pulled} for {len(rows)}"
    df = read(spark, cluster, pushFilters="true", propertyColumns="n").where("n = '7'")
    out = io.StringIO()
    with redirect_stdout(out):
        df.explain("formatted")
    assert "EqualTo(n,7)" in out.getvalue(), out.getvalue()
    assert {r.n for r in df.select("n").collect()} == {"7"}


def test_sql_filter_batch_and_stream(spark: Any, cluster: Cluster, middle_ms: int, tmp_path: Path) -> None:
    rows, pulled = rows_and_pulled(cluster, read(spark, cluster, sqlFilter="n = 3"))
    plain, _ = rows_and_pulled(cluster, read(spark, cluster).where("properties['n'] = '3'"))
    assert rows == plain and len(rows) == N // 10 and pulled == len(rows), f"served {pulled} for {len(rows)}"
    stream = (
        spark.readStream.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", TOPIC)
        .option("startingOffsets", "earliest").option("sqlFilter", "n BETWEEN 1 AND 2 AND TAGS = 'd'")
        .option("propertyColumns", "n").load()
    )  # fmt: skip
    q = (
        stream.writeStream.format("memory").queryName("push_sql_stream")
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    )  # fmt: skip
    assert q.awaitTermination(120), "the AvailableNow query did not finish"
    assert q.exception() is None, q.exception()
    got = spark.sql("select n, tags from push_sql_stream").collect()  # n: a propertyColumns column
    want = [i for i in range(N) if i % 10 in (1, 2) and "abcd"[(i // QUEUES) % 4] == "d"]
    assert len(got) == len(want) and all(r.n in ("1", "2") and r.tags == "d" for r in got)


def test_sql_filter_is_checked_at_query_start(cluster: Cluster, tmp_path: Path, middle_ms: int) -> None:
    from rocketq.connector.options import parse_source_options
    from rocketq.connector.source import RocketMQStreamReader

    def start(name_server: str, expression: str) -> None:
        opts = parse_source_options({"nameServer": name_server, "topic": TOPIC, "sqlFilter": expression})
        RocketMQStreamReader(opts).initialOffset()

    with pytest.raises(OptionError, match=r"sqlFilter.*refused the SQL92 filter"):
        start(cluster.namesrv_addr, "n >> 3")

    def pushed(name_server: str) -> tuple[str | None, list[Any]]:
        """What a pushdown reader pushes of ``n = '3'`` with propertyColumns=n."""
        from pyspark.sql.datasource import EqualTo

        from rocketq.connector.source import RocketMQPushdownReader

        opts = parse_source_options(
            {"nameServer": name_server, "topic": TOPIC, "propertyColumns": "n"}, batch=True
        )
        reader = RocketMQPushdownReader(opts)
        rest = list(reader.pushFilters([EqualTo(("n",), "3")]))
        return reader.opts.sql_filter, rest

    assert pushed(cluster.namesrv_addr) == ("(n = '3')", [])
    with local_cluster(tmp_path / "plain") as plain:
        create_topic(plain, TOPIC, 1)
        with pytest.raises(OptionError, match=r"'sqlFilter'.*enablePropertyFilter=true"):
            start(plain.namesrv_addr, "n = 3")
        sql, rest = pushed(plain.namesrv_addr)  # SQL92 refused: the filter stays with Spark
        assert sql is None and len(rest) == 1
