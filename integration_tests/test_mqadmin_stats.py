"""mqadmin statsAll and exportMetrics, and VIEW_BROKER_STATS_DATA behind them, against a real
NameServer and broker: after known traffic (sends, a group's pulls, another's POPs) the printed and exported
figures are those counts, and an unknown item gets Java's error.

One cluster for the module.  The broker samples its stats windows every 8 s (minute window) and
2 s (hour and day windows) instead of Java's 10 s / 10 min / 1 h (``ROCKETQ_STATS_SAMPLING_MS``),
so the minute window (7 snapshots) spans 48 s: long enough for the commands to see the traffic's
TPS once the fixture saw it counted, without waiting for real minutes.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.admin import AsyncAdmin
from rocketq.client.admin_stats import view_broker_stats_data
from rocketq.client.consumer import SimpleConsumer
from rocketq.client.errors import MQBrokerError
from rocketq.client.model import Message, MessageExt, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.remoting.broker_stats import BrokerStatsData, StatsName
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.remoting.pop import ConsumeInitMode
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    produce_and_consume,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_value,
)

TOPIC, IDLE, GROUP, LAGGING = "stats-t", "stats-idle-t", "stats-cg", "stats-lagging-cg"
POP_TOPIC, POP_GROUP = "stats-pop-t", "stats-pop-cg"
CONSUMED, IDLE_SENT, POPPED = 12, 3, 4
#: every message stored, and every message read, by the traffic of the fixture
SENT, READ = CONSUMED + IDLE_SENT + POPPED, CONSUMED + POPPED
SAMPLING = {"ROCKETQ_STATS_SAMPLING_MS": "8000,2000,2000"}


def view(ns: str, broker: str, name: str, key: str) -> BrokerStatsData:
    async def go() -> BrokerStatsData:
        async with AsyncAdmin(ns) as admin:
            return await view_broker_stats_data(admin.api, broker, name, key)

    return asyncio.run(go())


def counted(ns: str, broker: str, name: str, key: str, expected: int) -> bool:
    """The item counted ``expected`` in both its minute and day windows."""
    try:
        data = view(ns, broker, name, key)
    except MQBrokerError:
        return False
    return data.stats_minute.sum == expected and data.stats_day.sum == expected


def send(ns: str, topic: str, n: int) -> None:
    with Producer(ns, producer_group=f"pg-{topic}-extra") as producer:
        results = [producer.send(Message(topic, f"x{i}".encode())) for i in range(n)]
    assert {r.send_status for r in results} == {SendStatus.SEND_OK}


def commit_zero(ns: str, broker: str, group: str) -> None:
    """``group`` committed offset 0 on both queues of TOPIC: it consumes it and lags by all of it."""

    async def go() -> None:
        async with AsyncAdmin(ns) as admin:
            for qid in (0, 1):
                await admin.api.update_consumer_offset(broker, group, TOPIC, qid, 0)

    asyncio.run(go())


def pop_all(ns: str) -> None:
    """POPPED messages of POP_TOPIC received and acked by a SimpleConsumer of POP_GROUP."""
    got: list[MessageExt] = []
    settings: dict[str, object] = {"await_duration_s": 1.0, "init_mode": ConsumeInitMode.MIN}
    with SimpleConsumer(ns, POP_GROUP, {POP_TOPIC: "*"}, **settings) as c:
        for _ in range(20):  # bounded: at most ~20 long polls of 1 s
            got += c.receive(POPPED - len(got), 30.0)
            if len(got) >= POPPED:
                break
        for msg in got:
            c.ack(msg)
    assert len(got) == POPPED


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """A cluster after the traffic: CONSUMED sends to TOPIC, all pulled by GROUP; LAGGING holds
    offsets 0 on TOPIC and read nothing; IDLE_SENT sends to IDLE that nobody consumes; POPPED
    sends to POP_TOPIC, all popped by POP_GROUP.  Returned
    once the stats counted it.  (No send to TOPIC after GROUP's consumer stopped: its last
    long-polling pull, still parked at the broker, would return and count them, in Java too.)"""
    tmp: Path = tmp_path_factory.mktemp("mqadmin-stats")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp / "b", ns.addr, env=SAMPLING) as b:
        create_topic(ns.addr, TOPIC, 2)
        create_topic(ns.addr, IDLE, 1)
        create_topic(ns.addr, POP_TOPIC, 1)
        produce_and_consume(ns.addr, TOPIC, group=GROUP, n=CONSUMED)
        commit_zero(ns.addr, b.addr, LAGGING)
        send(ns.addr, IDLE, IDLE_SENT)
        send(ns.addr, POP_TOPIC, POPPED)
        pop_all(ns.addr)
        for name, key, n in (
            (StatsName.TOPIC_PUT_NUMS, TOPIC, CONSUMED),
            (StatsName.GROUP_GET_NUMS, f"{TOPIC}@{GROUP}", CONSUMED),
            (StatsName.TOPIC_PUT_NUMS, IDLE, IDLE_SENT),
            (StatsName.GROUP_GET_NUMS, f"{POP_TOPIC}@{POP_GROUP}", POPPED),
        ):
            wait_value(lambda: counted(ns.addr, b.addr, name, key, n), f"{name} {key} = {n}", 20)  # noqa: B023
        yield ns, b


def ok(*args: str) -> str:
    done = run_mqadmin(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


ROW = re.compile(r"(\S+) +(\S+) +(\d+) +(\d+\.\d\d) +(\d+\.\d\d) +(\d+) +(\d+)")
IDLE_ROW = re.compile(r"(\S+) +0 +(\d+\.\d\d) +(\d+) +NO_CONSUMER")


def test_stats_all_prints_each_topic_and_group_with_24_hour_counts_and_tps(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    ns, _ = cluster
    lines = ok("statsAll", "-n", ns.addr).splitlines()
    print("\n".join(lines))
    head = r"#Topic +#Consumer Group +#Accumulation +#InTPS +#OutTPS +#InMsg24Hour +#OutMsg24Hour"
    assert re.fullmatch(head, lines[0]), lines
    # Java's widths: %-64s  %-64s %12s %11s %11s %14s %14s (#Accumulation is 13 characters)
    assert lines[0].index("#Consumer Group") == 66 and len(lines[0]) == 66 + 64 + 14 + 2 * 12 + 2 * 15
    idle = {m[1]: m for line in lines[1:] if (m := IDLE_ROW.fullmatch(line))}
    # TOPIC, one row per group: its lag, the TPS of the last minute, what was sent and pulled
    by_group = {(m[1], m[2]): m for line in lines[1:] if (m := ROW.fullmatch(line))}
    row = by_group[TOPIC, GROUP]
    assert (int(row[3]), int(row[6]), int(row[7])) == (0, CONSUMED, CONSUMED), row[0]
    assert float(row[4]) > 0 and float(row[5]) > 0, row[0]
    lagging = by_group[TOPIC, LAGGING]
    assert (int(lagging[3]), int(lagging[6]), int(lagging[7])) == (CONSUMED, CONSUMED, 0), lagging[0]
    assert lagging[4] == row[4] and lagging[5] == "0.00", lagging[0]
    # IDLE: nobody consumes it
    assert IDLE in idle and int(idle[IDLE][3]) == IDLE_SENT and float(idle[IDLE][2]) > 0, lines
    assert not any(line.startswith(("%RETRY%", "%DLQ%")) for line in lines), lines
    assert "TBW102" in idle, lines  # without -a: every topic, traffic or not

    active = ok("statsAll", "-n", ns.addr, "-a").splitlines()
    listed = {line.split()[0] for line in active[1:]}
    assert listed == {TOPIC, IDLE, POP_TOPIC}, active
    pop = by_group[POP_TOPIC, POP_GROUP]  # POP reads count as the group's reads
    assert (int(pop[6]), int(pop[7])) == (POPPED, POPPED) and float(pop[5]) > 0, pop[0]
    one = ok("statsAll", "-n", ns.addr, "-t", TOPIC).splitlines()
    assert [line.split()[:2] for line in one[1:]] == [[TOPIC, GROUP], [TOPIC, LAGGING]], one


def test_export_metrics_writes_the_brokers_figures(
    cluster: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    ns, _ = cluster
    out = ok("exportMetrics", "-n", ns.addr, "-c", "DefaultCluster", "-f", str(tmp_path / "x"))
    path = tmp_path / "x" / "metrics.json"
    assert out.strip() == f"export {path} success"
    doc = json.loads(path.read_text(encoding="utf-8"))
    print(json.dumps(doc, indent=1))
    quota = doc["evaluateReport"]["broker-a"]["runtimeQuota"]
    assert quota["oneDayNum"] == {
        "normalOneDayInNum": SENT,
        "normalOneDayOutNum": READ,
        "transOneDayInNum": 0,
        "scheduleOneDayInNum": 0,
    }
    tps = quota["tps"]
    assert tps["normalInTps"] > 0 and tps["normalOutTps"] > 0
    assert tps["transInTps"] == 0 and tps["scheduleInTps"] == 0
    assert quota["topicSize"] == 3 and quota["groupSize"] == 2, quota
    assert float(quota["diskRatio"]["commitLogDiskRatio"]) >= 0
    assert doc["totalData"]["totalOneDayNum"] == quota["oneDayNum"]
    assert doc["totalData"]["totalTps"]["totalNormalInTps"] == tps["normalInTps"]
    version = doc["evaluateReport"]["broker-a"]["runtimeVersion"]
    assert version["rocketmqVersion"] == "V4_9_4" and version["clientInfo"] == []
    done = run_mqadmin("exportMetrics", "-n", ns.addr, "-c", "NoSuchCluster", "-f", str(tmp_path))
    assert done.returncode == 1 and "NoSuchCluster does not exist" in done.stderr, done.stderr


def test_view_broker_stats_data_answers_the_item_or_javas_error(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    ns, broker = cluster
    data = view(ns.addr, broker.addr, StatsName.TOPIC_PUT_SIZE, TOPIC)
    assert data.stats_day.sum > 0 and data.stats_day.avgpt > 0
    put = view(ns.addr, broker.addr, StatsName.BROKER_PUT_NUMS, "DefaultCluster")
    assert put.stats_day.sum == SENT and put.stats_day.avgpt == 0
    with pytest.raises(MQBrokerError) as err:
        view(ns.addr, broker.addr, StatsName.GROUP_GET_NUMS, f"{TOPIC}@no-such-group")
    assert err.value.code == ResponseCode.SYSTEM_ERROR
    assert err.value.remark == f"The stats <GROUP_GET_NUMS> <{TOPIC}@no-such-group> not exist"


def test_deleting_a_topic_or_group_drops_its_stats_items(
    cluster: tuple[ServerProcess, ServerProcess],
) -> None:
    """Last in the module: it deletes IDLE and POP_GROUP, whose counts the tests above read."""
    ns, broker = cluster
    assert counted(ns.addr, broker.addr, StatsName.TOPIC_PUT_NUMS, IDLE, IDLE_SENT)
    ok("deleteTopic", "-n", ns.addr, "-t", IDLE)
    with pytest.raises(MQBrokerError):
        view(ns.addr, broker.addr, StatsName.TOPIC_PUT_NUMS, IDLE)
    key = f"{POP_TOPIC}@{POP_GROUP}"
    assert counted(ns.addr, broker.addr, StatsName.GROUP_GET_NUMS, key, POPPED)
    ok("deleteSubGroup", "-n", ns.addr, "-b", broker.addr, "-g", POP_GROUP)
    for name in (StatsName.GROUP_GET_NUMS, StatsName.GROUP_GET_SIZE):
        with pytest.raises(MQBrokerError):
            view(ns.addr, broker.addr, name, key)
    assert counted(ns.addr, broker.addr, StatsName.TOPIC_PUT_NUMS, TOPIC, CONSUMED)  # others stay
