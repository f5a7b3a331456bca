"""mqadmin queryCq and producer against a real NameServer and broker.

queryCq: the units of sent messages (physical offsets from the send results' offset message ids,
sizes equal to the record lengths in the CommitLog file, tags codes = Java hash of the tag),
index/count ranges, a tag-filtered group's eval per unit, a group not online, and the errors for
an unknown topic, an unknown queue and an index past the queue.  producer: a started producer's
group with its client id and language, gone after its shutdown.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.api import MQClientAPI
from rocketq.client.config import ClientConfig
from rocketq.client.model import Message
from rocketq.client.producer import Producer
from rocketq.client.remoting.javahash import java_string_hash
from rocketq.client.remoting.msgid import decode_offset_msg_id
from rocketq.client.remoting.vocabulary import build_subscription
from rocketq.client.testing import (
    ServerProcess,
    broker_store_dir,
    create_topic,
    heartbeat_consumer,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_for,
)

TOPIC = "cq-query-t"
TAGS = ("TagA", "TagB", "TagA", "TagC", "TagA")
UNIT = re.compile(
    r"idx: (\d+)\nConsumeQueueData\{physicOffset=(\d+), physicSize=(\d+), tagsCode=(-?\d+), "
    r"extendDataJson='null', bitMap='null', eval=(true|false), msg='null'\}\n={38}\n"
)


class Cluster:
    def __init__(self, ns: ServerProcess, broker: ServerProcess, store: Path, phys: list[int]) -> None:
        self.ns, self.broker, self.store, self.phys = ns.addr, broker.addr, store, phys


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp: Path = tmp_path_factory.mktemp("cq-producer")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp / "b", ns.addr) as b:
        create_topic(ns.addr, TOPIC, 1)
        with Producer(ns.addr, producer_group="pg-cq-sender") as producer:
            results = [
                producer.send(Message(TOPIC, f"m{i}".encode() * 20, tags=t)) for i, t in enumerate(TAGS)
            ]
        assert [r.queue_offset for r in results] == list(range(len(TAGS)))
        phys = [decode_offset_msg_id(r.offset_msg_id)[2] for r in results]
        yield Cluster(ns, b, broker_store_dir(tmp / "b"), phys)


def ok(*args: str) -> str:
    done = run_mqadmin(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def units(stdout: str) -> list[tuple[int, int, int, int, bool]]:
    found = [(int(i), int(o), int(s), int(t), e == "true") for i, o, s, t, e in UNIT.findall(stdout)]
    assert stdout.count("idx: ") == len(found), stdout
    return found


def record_size(store: Path, phy: int) -> int:
    """The total size field of the CommitLog record at ``phy`` (the first 4 bytes, big-endian)."""
    segments = sorted((store / "commitlog").iterdir())
    chosen = max((p for p in segments if int(p.name) <= phy), key=lambda p: int(p.name))
    with chosen.open("rb") as f:
        f.seek(phy - int(chosen.name))
        return int.from_bytes(f.read(4), "big")


def test_query_cq_lists_the_stored_units(cluster: Cluster) -> None:
    stdout = ok("queryCq", "-n", cluster.ns, "-t", TOPIC, "-q", "0", "-i", "0")  # broker from the route
    assert stdout.startswith("Queue data: \nmax: 5, min: 0\n======================================\n"), stdout
    assert "Subscription data" not in stdout and "Filter data" not in stdout
    found = units(stdout)
    assert [u[0] for u in found] == [0, 1, 2, 3, 4]
    assert [u[1] for u in found] == cluster.phys
    assert [u[2] for u in found] == [record_size(cluster.store, p) for p in cluster.phys]
    assert all(u[2] > 40 for u in found)
    assert [u[3] for u in found] == [java_string_hash(t) for t in TAGS]
    assert not any(u[4] for u in found)  # no group: nothing evaluated

    ranged = units(
        ok("queryCq", "-n", cluster.ns, "-b", cluster.broker, "-t", TOPIC, "-q", "0", "-i", "1", "-c", "2")
    )
    assert [(u[0], u[1]) for u in ranged] == [(1, cluster.phys[1]), (2, cluster.phys[2])]
    tail = units(ok("queryCq", "-n", cluster.ns, "-t", TOPIC, "-q", "0", "-i", "3", "-c", "100"))
    assert [u[0] for u in tail] == [3, 4]
    assert units(ok("queryCq", "-n", cluster.ns, "-t", TOPIC, "-q", "0", "-i", "2", "-c", "0")) == []


def test_query_cq_errors(cluster: Cluster) -> None:
    cases = {
        ("-t", "cq-no-such-topic", "-q", "0", "-i", "0"): "0@cq-no-such-topic is not exist!",
        ("-t", TOPIC, "-q", "7", "-i", "0"): f"7@{TOPIC} is not exist!",
        ("-t", TOPIC, "-q", "0", "-i", "5"): f"Index 5 of 0@{TOPIC} is not exist!",
        ("-t", TOPIC, "-q", "0", "-i", "-1"): f"Index -1 of 0@{TOPIC} is not exist!",
    }
    for args, remark in cases.items():
        done = run_mqadmin("queryCq", "-n", cluster.ns, "-b", cluster.broker, *args)
        assert done.returncode != 0 and remark in done.stderr, (args, done.stdout, done.stderr)
    done = run_mqadmin("queryCq", "-n", cluster.ns, "-t", "cq-no-such-topic", "-q", "0", "-i", "0")
    assert done.returncode != 0 and "cq-no-such-topic" in done.stderr, done.stderr


async def _with_tag_group(ns: str, broker: str, group: str, *argv: str) -> str:
    """Runs mqadmin while a raw client heartbeats ``group`` subscribed to TagA || TagC."""
    api = MQClientAPI(ns)
    try:
        await heartbeat_consumer(api, broker, group, build_subscription(TOPIC, "TagA || TagC"))
        done = await asyncio.to_thread(run_mqadmin, *argv)
    finally:
        await api.close()
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_query_cq_evaluates_a_tag_filtered_group(cluster: Cluster) -> None:
    args = (
        "queryCq",
        "-n",
        cluster.ns,
        "-b",
        cluster.broker,
        "-t",
        TOPIC,
        "-q",
        "0",
        "-i",
        "0",
        "-g",
        "cg-cq-tags",
    )
    stdout = asyncio.run(_with_tag_group(cluster.ns, cluster.broker, "cg-cq-tags", *args))
    head, _, _ = stdout.partition("Queue data: \n")
    assert head.startswith("Subscription data: \n{\n"), stdout
    assert '"subString": "TagA || TagC"' in head and f'"topic": "{TOPIC}"' in head
    rule = "======================================\n"
    assert head.endswith(f"{rule}Filter data: \nnull\n{rule}")
    assert [u[4] for u in units(stdout)] == [t in ("TagA", "TagC") for t in TAGS]

    offline = ok(*args[:-1], "cg-cq-nobody")
    assert offline.startswith(f"Filter data: \ncg-cq-nobody@{TOPIC} is not online!\n"), offline
    assert not any(u[4] for u in units(offline))


def producer_lines(cluster: Cluster) -> list[str]:
    return [
        line
        for line in ok("producer", "-n", cluster.ns, "-b", cluster.broker).splitlines()
        if "pg-cq-live" in line
    ]


def test_producer_lists_running_producers(cluster: Cluster) -> None:
    quick = ClientConfig(heartbeat_broker_interval_ms=1000)  # the first heartbeat comes on the timer
    producer = Producer(cluster.ns, producer_group="pg-cq-live", client=quick)
    producer.start()
    try:
        producer.send(Message(TOPIC, b"live", tags="TagZ"))
        client_id = producer.async_producer.instance.client_id
        wait_for(lambda: bool(producer_lines(cluster)), "pg-cq-live on the broker", 20, interval_s=0.5)
        (line,) = producer_lines(cluster)
        pattern = (
            rf"producer group \(pg-cq-live\) instance : clientId={re.escape(client_id)},"
            r"remoteIP=/127\.0\.0\.1:\d+, language=PYTHON, version=\d+, lastUpdateTimestamp=\d{13}"
        )
        assert re.fullmatch(pattern, line), line
    finally:
        producer.shutdown()
    wait_for(lambda: not producer_lines(cluster), "pg-cq-live gone after shutdown", 20, interval_s=0.5)
