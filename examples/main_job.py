"""The main job: the streaming ETL example end to end on an embedded NameServer and broker.

1. starts ``mqnamesrv`` and ``mqbroker`` as subprocesses in a temporary directory (port 0) with
   the launcher (:mod:`rocketq.client.launcher`, what ``rocketq dev`` uses) and creates the topics;
2. writes JSON order events to the ``orders`` topic with a Spark batch write, keyed by customer
   (plus one malformed event);
3. runs examples/etl_streaming.py's query with Trigger.AvailableNow (bounded: it processes what
   was there when it started, in micro-batches of at most 500 orders, then stops);
4. reads the ``customer-totals`` topic back, prints what arrived and checks that the per-batch
   totals add up to the produced orders;
5. stops Spark, the broker and the NameServer.

Run it with ``bash .ci/bootstrap main`` (or ``python examples/main_job.py`` inside the venv).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

N_ORDERS = 2000


def sample_orders(n: int, seed: int = 7) -> list[dict[str, object]]:
    rng = random.Random(seed)
    base = int(time.time() * 1000)
    return [
        {
            "order_id": i,
            "customer": f"c{rng.randrange(6)}",
            "amount": round(rng.uniform(1, 200), 2),
            "ts": base + i,
        }
        for i in range(n)
    ]


def expected_totals(orders: list[dict[str, object]]) -> dict[str, tuple[int, float]]:
    acc: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for o in orders:
        acc[str(o["customer"])][0] += 1
        acc[str(o["customer"])][1] += float(o["amount"])  # type: ignore[arg-type]
    return {c: (int(v[0]), round(v[1], 2)) for c, v in acc.items()}


def create_topic(namesrv_addr: str, broker_addr: str, topic: str, queues: int, timeout_s: float = 20) -> None:
    """Create ``topic`` on the broker and wait until the NameServer's route shows its queues."""
    from rocketq.client.admin import Admin
    from rocketq.client.errors import NoRouteError

    with Admin(namesrv_addr) as admin:
        admin.create_topic(topic, broker_addr=broker_addr, read_queue_nums=queues, write_queue_nums=queues)
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(NoRouteError):
                if sum(qd.read_queue_nums for qd in admin.topic_route(topic).queue_datas) == queues:
                    return
            if time.monotonic() > deadline:
                raise SystemExit(f"the route of {topic} did not show {queues} queues in {timeout_s} s")
            time.sleep(0.1)


def main() -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from etl_streaming import build_query  # type: ignore[import-not-found]
    from pyspark.sql import SparkSession

    from rocketq.client.launcher import local_cluster

    orders = sample_orders(N_ORDERS)
    with (
        tempfile.TemporaryDirectory(prefix="rocketq-main-") as tmp,
        local_cluster(Path(tmp) / "cluster") as cluster,
    ):
        print(
            f"[main] NameServer {cluster.namesrv_addr}, broker {cluster.broker_name} at {cluster.broker_addr}"
        )
        create_topic(cluster.namesrv_addr, cluster.broker_addr, "orders", 4)
        create_topic(cluster.namesrv_addr, cluster.broker_addr, "customer-totals", 4)

        spark = (
            SparkSession.builder.master("local[2]").appName("rocketq-main-job")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2").getOrCreate()
        )  # fmt: skip
        spark.sparkContext.setLogLevel("ERROR")
        try:
            events = [(json.dumps(o), str(o["customer"])) for o in orders] + [("{not json", None)]
            (
                spark.createDataFrame(events, "body string, keys string").write.format("rocketmq")
                .option("nameServer", cluster.namesrv_addr).option("topic", "orders").mode("append").save()
            )  # fmt: skip
            print(f"[main] produced {len(events)} events to 'orders' (one malformed)")
            started = time.monotonic()
            query = build_query(
                spark, cluster.namesrv_addr, "orders", "customer-totals", str(Path(tmp) / "checkpoint")
            )
            query.awaitTermination()
            if query.exception() is not None:
                print(f"[main] the ETL query failed: {query.exception()}")
                return 1
            batches = [p.numInputRows for p in query.recentProgress if p.numInputRows]
            elapsed_s = time.monotonic() - started
            print(f"[main] ETL finished in {elapsed_s:.1f} s: micro-batches of {batches} events")

            arrived = (
                spark.read.format("rocketmq")
                .option("nameServer", cluster.namesrv_addr)
                .option("topic", "customer-totals")
                .load()
                .select("queueId", "queueOffset", "keys", "tags", "body")
                .orderBy("queueId", "queueOffset")
                .collect()
            )
            print(
                f"[main] {len(arrived)} messages arrived at 'customer-totals' "
                "(one per customer per micro-batch):"
            )
            per_batch: dict[tuple[str, int], tuple[int, float]] = {}
            for row in arrived:
                value = json.loads(row.body)
                # at-least-once: a replayed micro-batch would repeat (customer, batch); keep one
                per_batch[(value["customer"], int(value["batch"]))] = (
                    int(value["orders"]),
                    float(value["total"]),
                )
                print(
                    f"  queue {row.queueId} offset {row.queueOffset:3d} key={row.keys[0]:3s} "
                    f"tag={row.tags:7s} {row.body.decode()}"
                )
            got: dict[str, tuple[int, float]] = {}
            for (customer, _), (count, total) in sorted(per_batch.items()):
                n, t = got.get(customer, (0, 0.0))
                got[customer] = (n + count, round(t + total, 2))
            want = expected_totals(orders)
            ok = got == want
            print(f"[main] final totals per customer {'match' if ok else 'DO NOT match'} the produced orders")
            return 0 if ok else 1
        finally:
            spark.stop()


if __name__ == "__main__":
    sys.exit(main())
