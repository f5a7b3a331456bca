"""mqadmin checkMsgSendRT, clusterRT and brokerConsumeStats against a real NameServer and broker,
output checked for content (which broker and queue, success counts, offsets and diffs); the
times are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.admin import AsyncAdmin
from rocketq.client.testing import ServerProcess, create_topic, run_mqadmin, spawn_broker, spawn_namesrv

TOPIC = "rt-stats-t"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp: Path = tmp_path_factory.mktemp("rt-stats")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp / "b", ns.addr) as b:
        create_topic(ns.addr, TOPIC, 2)
        yield ns, b


def ok(*args: str) -> str:
    done = run_mqadmin(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_check_msg_send_rt_sends_round_robin(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, _ = cluster
    lines = ok("checkMsgSendRT", "-n", ns.addr, "-t", TOPIC, "-a", "5", "-s", "64").splitlines()
    assert re.fullmatch(r"#Broker Name +#QID +#Send Result +#RT", lines[0]), lines
    rows = [re.fullmatch(r"(\S+) +(\d+) +(true|false) +(\d+)", line) for line in lines[1:6]]
    assert all(rows), lines
    assert [(m[1], int(m[2]), m[3]) for m in rows if m] == [("broker-a", i % 2, "true") for i in range(5)]
    assert re.fullmatch(r"Avg RT: \d+\.\d\d", lines[6]), lines
    print("\n".join(lines))
    done = run_mqadmin("checkMsgSendRT", "-n", ns.addr, "-t", TOPIC, "-a", "0")
    assert done.returncode == 2 and "positive" in done.stderr


def test_cluster_rt_sends_to_each_broker_topic(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, _ = cluster
    lines = ok("clusterRT", "-n", ns.addr, "-a", "3", "-s", "32", "--rounds", "1").splitlines()
    assert re.fullmatch(r"#Cluster Name +#Broker Name +#RT +#successCount +#failCount", lines[0]), lines
    assert len(lines) == 2 and re.fullmatch(r"DefaultCluster +broker-a +\d+\.\d\d +3 +0", lines[1]), lines
    print("\n".join(lines))
    tlog = ok("clusterRT", "-n", ns.addr, "-a", "2", "-c", "DefaultCluster", "-p", "true", "-m", "room1",
              "--rounds", "1")  # fmt: skip
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\|room1\|DefaultCluster\|broker-a\|\d+\n", tlog), tlog
    done = run_mqadmin("clusterRT", "-n", ns.addr, "-c", "NoSuchCluster", "--rounds", "1")
    assert done.returncode == 1 and "cluster [NoSuchCluster] not exist" in done.stderr


async def commit(ns: str, addr: str, group: str, offsets: dict[int, int]) -> dict[int, int]:
    async with AsyncAdmin(ns) as admin:
        for qid, offset in offsets.items():
            await admin.api.update_consumer_offset(addr, group, TOPIC, qid, offset)
        return {qid: await admin.api.get_max_offset(addr, TOPIC, qid) for qid in offsets}


def test_broker_consume_stats_lists_each_group_queue(cluster: tuple[ServerProcess, ServerProcess]) -> None:
    ns, broker = cluster
    ok("checkMsgSendRT", "-n", ns.addr, "-t", TOPIC, "-a", "4")  # at least 2 messages per queue
    maxes = asyncio.run(commit(ns.addr, broker.addr, "cg-bcs", {0: 1, 1: 0}))
    lines = ok("brokerConsumeStats", "-n", ns.addr, "-b", broker.addr).splitlines()
    head = r"#Topic +#Group +#Broker Name +#QID +#Broker Offset +#Consumer Offset +#Diff +#LastTime"
    assert re.fullmatch(head, lines[0]), lines
    rows = {
        int(m[1]): (int(m[2]), int(m[3]), int(m[4]))
        for line in lines[1:]
        if (m := re.fullmatch(rf"{TOPIC} +cg-bcs +broker-a +(\d) +(\d+) +(\d+) +(\d+) +\S.*", line))
    }
    assert rows == {0: (maxes[0], 1, maxes[0] - 1), 1: (maxes[1], 0, maxes[1])}, lines
    total = int(lines[-1].removeprefix("Diff Total: "))
    assert lines[-2] == "" and total >= maxes[0] - 1 + maxes[1]
    high = ok("brokerConsumeStats", "-n", ns.addr, "-b", broker.addr, "-l", str(10**9)).splitlines()
    assert high[1:] == ["", f"Diff Total: {total}"], high
