"""The client against real ``mqnamesrv`` and ``mqbroker`` processes (port 0, temp dirs).

One NameServer and one broker serve the whole module; each test uses its own topic and group.
Covers the blocking and asyncio producers, the lite-pull consumer (assign, seek, commit), the
push consumer (concurrent and orderly), the admin API and the ``mqadmin`` command line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ConsumeFromWhere
from rocketq.client.consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    LitePullConsumer,
    PushConsumer,
)
from rocketq.client.errors import NoRouteError
from rocketq.client.model import Message, MessageExt, SendStatus
from rocketq.client.producer import AsyncProducer, Producer, SelectMessageQueueByHash
from rocketq.client.testing import (
    ServerProcess,
    drain,
    run_mqadmin,
    spawn_broker,
    spawn_namesrv,
    wait_for,
    wait_route,
)

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("client-e2e")
    with spawn_namesrv(tmp) as ns, spawn_broker(tmp, ns.addr) as broker:
        yield ns, broker


@pytest.fixture()
def ns_addr(cluster: tuple[ServerProcess, ServerProcess]) -> str:
    return cluster[0].addr


def test_produce_then_lite_pull_assign_seek_commit(ns_addr: str) -> None:
    with Admin(ns_addr) as admin:
        admin.create_topic("E2ELite", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        wait_route(admin, "E2ELite")  # the broker registers the new topic asynchronously
    with Producer(ns_addr, producer_group="pg-lite") as producer:
        results = [
            producer.send(Message("E2ELite", f"m{i}".encode(), tags="A", keys=f"k{i}")) for i in range(6)
        ]
        assert {r.send_status for r in results} == {SendStatus.SEND_OK}
        batch = producer.send_batch([Message("E2ELite", f"b{i}".encode()) for i in range(4)])
        assert sum(len(r.msg_id.split(",")) for r in batch) == 4
        by_key = producer.send(Message("E2ELite", b"sharded"), selector=SelectMessageQueueByHash(), arg="abc")
        assert by_key.message_queue.queue_id == 96354 % 2
    consumer = LitePullConsumer(
        ns_addr, consumer_group="cg-lite", consume_from_where=FIRST, auto_commit=False
    )
    mqs = sorted(consumer.fetch_message_queues("E2ELite"))
    consumer.assign(mqs)
    consumer.start()
    try:
        got = drain(consumer, 11)
        assert len(got) >= 11, f"polled {len(got)} of 11 messages in time"
        bodies = sorted(m.body for m in got)
        assert bodies == sorted(
            [f"m{i}".encode() for i in range(6)] + [f"b{i}".encode() for i in range(4)] + [b"sharded"]
        )
        assert {m.uniq_key for m in got} >= {r.msg_id for r in results}
        consumer.commit()
        for mq in mqs:
            assert consumer.committed(mq) == max(m.queue_offset for m in got if m.queue_id == mq.queue_id) + 1
        consumer.seek(mqs[0], 0)
        again = drain(consumer, 1)
        assert again[0].queue_offset == 0 and again[0].queue_id == mqs[0].queue_id
    finally:
        consumer.shutdown()
    with Admin(ns_addr) as admin:
        progress = admin.consumer_progress("cg-lite", "E2ELite")
        assert sum(p.lag for p in progress) == 0
        assert admin.query_msg_by_id(results[0].offset_msg_id).body == b"m0"


def test_lite_pull_poll_batch_reads_batches_as_columns_and_commits(ns_addr: str) -> None:
    """The blocking poll_batch against a real broker: batches of same-size messages (the bulk
    read) and of mixed sizes give the same offsets and bodies as the views, and commit."""
    with Admin(ns_addr) as admin:
        admin.create_topic("E2EColumns", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        wait_route(admin, "E2EColumns")
    sent = [f"u{i:04d}".encode() for i in range(300)] + [b"v" * i for i in range(1, 40)]
    with Producer(ns_addr, producer_group="pg-columns") as producer:
        for start in range(0, len(sent), 100):
            producer.send_batch([Message("E2EColumns", body) for body in sent[start : start + 100]])
    consumer = LitePullConsumer(
        ns_addr, consumer_group="cg-columns", consume_from_where=FIRST, auto_commit=False, pull_batch_size=64
    )
    mqs = sorted(consumer.fetch_message_queues("E2EColumns"))
    consumer.assign(mqs)
    consumer.start()
    try:
        got: dict[int, list[tuple[int, bytes]]] = {mq.queue_id: [] for mq in mqs}
        for _ in range(200):  # bounded: 339 messages in pulls of at most 64
            if sum(map(len, got.values())) >= len(sent):
                break
            batch = consumer.poll_batch(2000)
            if batch is None:
                continue
            assert [m.body for m in batch.messages] == batch.bodies
            got[batch.mq.queue_id] += zip(batch.queue_offsets, batch.bodies, strict=True)
        assert sorted(body for pairs in got.values() for _, body in pairs) == sorted(sent)
        for pairs in got.values():
            assert [offset for offset, _ in pairs] == list(range(len(pairs)))  # in queue order, no gap
        consumer.commit()
        assert [consumer.committed(mq) for mq in mqs] == [len(got[mq.queue_id]) for mq in mqs]
    finally:
        consumer.shutdown()


def test_push_consumer_concurrently_and_orderly(ns_addr: str) -> None:
    async def produce() -> None:
        async with AsyncProducer(ns_addr, producer_group="pg-push") as producer:
            for i in range(12):
                await producer.send(
                    Message("E2EPush", f"{i % 3}:{i}".encode(), tags="T" + str(i % 2)),
                    selector=SelectMessageQueueByHash(),
                    arg=str(i % 3),
                )

    asyncio.run(produce())
    seen: list[bytes] = []
    push = PushConsumer(ns_addr, consumer_group="cg-push", consume_from_where=FIRST)
    push.subscribe("E2EPush", "T0 || T1")

    def on_push(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push.register_message_listener(on_push)
    push.start()
    try:
        wait_for(lambda: len(seen) >= 12, "12 messages consumed")
    finally:
        push.shutdown()
    assert sorted(seen) == sorted(f"{i % 3}:{i}".encode() for i in range(12))

    ordered: dict[str, list[int]] = {}
    orderly = PushConsumer(ns_addr, consumer_group="cg-orderly", consume_from_where=FIRST)
    orderly.subscribe("E2EPush", "*")

    def on_msgs(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        for m in msgs:
            key, _, n = m.body.decode().partition(":")
            ordered.setdefault(key, []).append(int(n))
        return ConsumeOrderlyStatus.SUCCESS

    orderly.register_message_listener_orderly(on_msgs)
    orderly.start()
    try:
        wait_for(lambda: sum(len(v) for v in ordered.values()) >= 12, "12 messages consumed orderly")
    finally:
        orderly.shutdown()
    for key, numbers in ordered.items():
        assert numbers == sorted(numbers), f"sharding key {key} out of order: {numbers}"


def test_mqadmin_subcommands(ns_addr: str, cluster: tuple[ServerProcess, ServerProcess]) -> None:
    r = run_mqadmin(
        "updateTopic", "-n", ns_addr, "-c", "DefaultCluster", "-t", "E2EAdmin", "-r", "2", "-w", "2"
    )
    assert r.returncode == 0, r.stderr
    assert "create topic to" in r.stdout
    assert "E2EAdmin" in run_mqadmin("topicList", "-n", ns_addr).stdout
    route = run_mqadmin("topicRoute", "-n", ns_addr, "-t", "E2EAdmin")
    assert route.returncode == 0 and '"writeQueueNums": 2' in route.stdout
    assert "broker-a" in run_mqadmin("clusterList", "-n", ns_addr).stdout
    sent = run_mqadmin(
        "sendMessage", "-n", ns_addr, "-t", "E2EAdmin", "-p", "hello", "-k", "key1", "-c", "TagA"
    )
    assert sent.returncode == 0 and "SEND_OK" in sent.stdout, sent.stderr
    status = run_mqadmin("topicStatus", "-n", ns_addr, "-t", "E2EAdmin")
    assert status.returncode == 0 and "#Max Offset" in status.stdout
    consumed = run_mqadmin("consumeMessage", "-n", ns_addr, "-t", "E2EAdmin", "-c", "5")
    assert (
        consumed.returncode == 0 and "hello" in consumed.stdout and "Consumed 1 messages." in consumed.stdout
    )
    by_key = run_mqadmin("queryMsgByKey", "-n", ns_addr, "-t", "E2EAdmin", "-k", "key1")
    assert by_key.returncode == 0, by_key.stderr
    offset_id = by_key.stdout.splitlines()[1].split()[0]
    by_id = run_mqadmin("queryMsgById", "-n", ns_addr, "-i", offset_id)
    assert by_id.returncode == 0 and "Message Body: hello" in by_id.stdout
    progress = run_mqadmin("consumerProgress", "-n", ns_addr, "-g", "nobody", "-t", "E2EAdmin")
    assert progress.returncode == 0 and "Diff Total: 1" in progress.stdout
    reset = run_mqadmin("resetOffsetByTime", "-n", ns_addr, "-g", "nobody", "-t", "E2EAdmin", "-s", "0")
    assert reset.returncode == 0, reset.stderr
    missing = run_mqadmin("topicRoute", "-n", ns_addr, "-t", "NoSuchTopic")
    assert missing.returncode == 1 and "No route info of this topic: NoSuchTopic" in missing.stderr
    usage = run_mqadmin("topicRoute", "-n", ns_addr)
    assert usage.returncode == 2
    no_target = run_mqadmin("updateTopic", "-n", ns_addr, "-t", "E2EAdmin2")
    assert no_target.returncode == 2
    assert f"knows cluster DefaultCluster (broker-a at {cluster[1].addr}), e.g. -c DefaultCluster" in (
        no_target.stderr
    )
    deleted = run_mqadmin("deleteTopic", "-n", ns_addr, "-c", "DefaultCluster", "-t", "E2EAdmin")
    assert deleted.returncode == 0, deleted.stderr
    with Admin(ns_addr) as admin, pytest.raises(NoRouteError):
        admin.topic_route("E2EAdmin")
