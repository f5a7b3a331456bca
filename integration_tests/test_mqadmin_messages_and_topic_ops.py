"""mqadmin's message reading and topic/group commands against a real NameServer and broker, output
checked: queryMsgByUniqueKey (the message and its body file), queryMsgByOffset, printMsg (tag
filter, time window, no body), updateTopicPerm (the route's permission changes), updateOrderConf
(put/get/delete of the NameServer's ORDER_TOPIC_CONFIG item), allocateMQ and cloneGroupOffset
(the destination group's committed offsets equal the source's).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketq.client.admin import Admin, AsyncAdmin
from rocketq.client.admin_topic_ops import get_order_conf
from rocketq.client.model import Message, SendResult
from rocketq.client.producer import Producer
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.client.testing import ServerProcess, create_topic, run_mqadmin, spawn_broker, spawn_namesrv
from rocketq.client.testing.wait import wait_for

TOPIC = "admin-read-t"


@dataclass
class Cluster:
    namesrv: ServerProcess
    broker: ServerProcess
    sent: list[SendResult]

    @property
    def ns(self) -> str:
        return self.namesrv.addr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("admin-read")
    with spawn_namesrv(tmp / "ns") as ns, spawn_broker(tmp / "b", ns.addr) as b:
        create_topic(ns.addr, TOPIC, 2)
        with Producer(ns.addr, producer_group="pg-admin-read") as producer:
            sent = [
                producer.send(
                    Message(TOPIC, f"body-{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB", keys=f"k{i}"),
                    queue=MessageQueue(TOPIC, "broker-a", i % 2),
                )
                for i in range(6)
            ]
        yield Cluster(ns, b, sent)


def ok(*args: str) -> str:
    done = run_mqadmin(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fields(stdout: str) -> dict[str, str]:
    """``%-20s %s`` lines as label -> value."""
    return {line[:20].strip(): line[21:] for line in stdout.splitlines() if line.strip()}


def test_query_msg_by_unique_key_prints_the_message_and_writes_its_body(cluster: Cluster) -> None:
    third = cluster.sent[2]
    got = fields(ok("queryMsgByUniqueKey", "-n", cluster.ns, "-i", third.msg_id, "-t", TOPIC))
    assert got["Topic:"] == TOPIC and got["Tags:"] == "[TagA]" and got["Keys:"] == "[k2]"
    assert int(got["Queue ID:"]) == third.message_queue.queue_id
    assert int(got["Queue Offset:"]) == third.queue_offset
    assert f"UNIQ_KEY={third.msg_id}" in got["Properties:"]
    assert Path(got["Message Body Path:"]).read_bytes() == b"body-2"
    done = run_mqadmin("queryMsgByUniqueKey", "-n", cluster.ns, "-i", "0" * 32, "-t", TOPIC)
    assert done.returncode == 1 and "no message with msgId" in done.stderr


def test_query_msg_by_offset_prints_the_message_there(cluster: Cluster) -> None:
    fifth = cluster.sent[5]
    qid, offset = fifth.message_queue.queue_id, fifth.queue_offset
    stdout = ok(
        "queryMsgByOffset", "-n", cluster.ns, "-t", TOPIC, "-b", "broker-a", "-i", str(qid), "-o", str(offset)
    )
    got = fields(stdout)
    assert got["OffsetID:"] == fifth.offset_msg_id
    assert got["Message Body:"] == "body-5" and got["Keys:"] == "[k5]"
    args = ("queryMsgByOffset", "-n", cluster.ns, "-t", TOPIC, "-b", "broker-a", "-i", str(qid), "-o", "999")
    done = run_mqadmin(*args)
    assert done.returncode == 1 and "no message at offset 999" in done.stderr
    done = run_mqadmin("queryMsgByOffset", "-n", cluster.ns, "-t", TOPIC, "-b", "nope", "-i", "0", "-o", "0")
    assert done.returncode == 1 and "'nope'" in done.stderr


def test_print_msg_filters_by_tag_and_time(cluster: Cluster) -> None:
    stdout = ok("printMsg", "-n", cluster.ns, "-t", TOPIC)
    heads = re.findall(r"^minOffset=(\d+), maxOffset=(\d+), MessageQueue \[topic=(\S+), brokerName=broker-a, "
                       r"queueId=(\d)\]$", stdout, re.M)  # fmt: skip
    assert heads == [("0", "3", TOPIC, "0"), ("0", "3", TOPIC, "1")], stdout
    bodies = re.findall(r"^MSGID: (\S+) MessageExt \[.*\] BODY: (\S+)$", stdout, re.M)
    assert sorted(b for _, b in bodies) == [f"body-{i}" for i in range(6)]
    assert {m for m, _ in bodies} == {r.msg_id for r in cluster.sent}
    assert stdout.count("-" * 56) == 2

    tag_a = ok("printMsg", "-n", cluster.ns, "-t", TOPIC, "-s", "TagA", "-d", "false")
    assert re.findall(r"BODY: (.*)$", tag_a, re.M) == ["NOT PRINT BODY"] * 3
    assert {m for m in re.findall(r"^MSGID: (\S+)", tag_a, re.M)} == {r.msg_id for r in cluster.sent[::2]}

    before = ok("printMsg", "-n", cluster.ns, "-t", TOPIC, "-e", "1")  # ends before every store time
    assert "MSGID:" not in before and before.count("minOffset=0, maxOffset=0, MessageQueue") == 2, before
    since = ok("printMsg", "-n", cluster.ns, "-t", TOPIC, "-b", str(int(time.time() * 1000) - 3_600_000))
    assert len(re.findall(r"^MSGID: ", since, re.M)) == 6
    done = run_mqadmin("printMsg", "-n", cluster.ns, "-t", TOPIC, "-c", "no-such-charset")
    assert done.returncode == 2 and "unknown charset" in done.stderr


def route_perm(ns: str, topic: str) -> int:
    with Admin(ns) as admin:
        (qd,) = admin.topic_route(topic).queue_datas
        return qd.perm


def test_update_topic_perm_changes_the_route(cluster: Cluster) -> None:
    topic, addr = "admin-perm-t", cluster.broker.addr
    create_topic(cluster.ns, topic, 2)
    assert route_perm(cluster.ns, topic) == 6
    stdout = ok("updateTopicPerm", "-n", cluster.ns, "-t", topic, "-p", "4", "-b", addr)
    assert stdout == f"update topic perm from 6 to 4 in {addr} success.\n"
    wait_for(lambda: route_perm(cluster.ns, topic) == 4, "perm 4 in the route", 30)
    assert ok("updateTopicPerm", "-n", cluster.ns, "-t", topic, "-p", "4", "-b", addr).startswith(
        "new perm equals to the old one!"
    )
    stdout = ok("updateTopicPerm", "-n", cluster.ns, "-t", topic, "-p", "6", "-c", "DefaultCluster")
    assert stdout == f"update topic perm from 4 to 6 in {addr} success.\n"
    wait_for(lambda: route_perm(cluster.ns, topic) == 6, "perm 6 in the route", 30)
    done = run_mqadmin("updateTopicPerm", "-n", cluster.ns, "-t", topic, "-p", "6")
    assert done.returncode == 2 and "give -b brokerAddr" in done.stderr
    done = run_mqadmin("updateTopicPerm", "-n", cluster.ns, "-t", topic, "-p", "6", "-b", "127.0.0.1:1")
    assert done.returncode == 1 and "not the master" in done.stderr


def test_update_order_conf_put_get_delete(cluster: Cluster) -> None:
    ns = cluster.ns
    stdout = ok("updateOrderConf", "-n", ns, "-t", TOPIC, "-m", "put", "-v", "broker-a:2")
    assert stdout == f"update orderConf success. topic=[{TOPIC}], orderConf=[broker-a:2]\n"
    stdout = ok("updateOrderConf", "-n", ns, "-t", TOPIC, "-m", "get")
    assert stdout == f"get orderConf success. topic=[{TOPIC}], orderConf=[broker-a:2]\n"
    assert (
        ok("updateOrderConf", "-n", ns, "-t", TOPIC, "-m", "delete")
        == f"delete orderConf success. topic=[{TOPIC}]\n"
    )
    assert asyncio.run(order_conf(ns, TOPIC)) is None
    done = run_mqadmin("updateOrderConf", "-n", ns, "-t", TOPIC, "-m", "put", "-v", "broker-a")
    assert done.returncode == 1 and "bad orderConf" in done.stderr
    done = run_mqadmin("updateOrderConf", "-n", ns, "-t", TOPIC, "-m", "put")
    assert done.returncode == 2 and "-v" in done.stderr


async def order_conf(ns: str, topic: str) -> str | None:
    async with AsyncAdmin(ns) as admin:
        return await get_order_conf(admin, topic)


def test_allocate_mq_spreads_the_queues_averagely(cluster: Cluster) -> None:
    topic = "admin-alloc-t"
    create_topic(cluster.ns, topic, 4)
    doc = json.loads(ok("allocateMQ", "-n", cluster.ns, "-t", topic, "-i", "10.0.0.1,10.0.0.2"))
    ids = {cid: [(mq["brokerName"], mq["queueId"]) for mq in mqs] for cid, mqs in doc["result"].items()}
    assert ids == {
        "10.0.0.1": [("broker-a", 0), ("broker-a", 1)],
        "10.0.0.2": [("broker-a", 2), ("broker-a", 3)],
    }


async def commit_and_read(ns: str, addr: str, commits: dict[int, int], group: str) -> dict[int, int | None]:
    async with AsyncAdmin(ns) as admin:
        for qid, offset in commits.items():
            await admin.api.update_consumer_offset(addr, "cg-clone-src", TOPIC, qid, offset)
        return {qid: await admin.api.query_consumer_offset(addr, group, TOPIC, qid) for qid in (0, 1)}


def test_clone_group_offset_copies_the_committed_offsets(cluster: Cluster) -> None:
    addr = cluster.broker.addr
    assert asyncio.run(commit_and_read(cluster.ns, addr, {0: 2, 1: 1}, "cg-clone-src")) == {0: 2, 1: 1}
    stdout = ok("cloneGroupOffset", "-n", cluster.ns, "-s", "cg-clone-src", "-d", "cg-clone-dst", "-t", TOPIC)
    assert stdout == (
        f"clone group offset success. srcGroup[cg-clone-src], destGroup=[cg-clone-dst], topic[{TOPIC}], "
        "queues[2]\n"
    )
    assert asyncio.run(commit_and_read(cluster.ns, addr, {}, "cg-clone-dst")) == {0: 2, 1: 1}
