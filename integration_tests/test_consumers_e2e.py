"""Consuming end to end: clustering rebalance, broadcasting, orderly consumption.

One ``mqnamesrv`` and one ``mqbroker`` serve the module.  Client timers are shortened through
``ClientConfig`` (heartbeat, offset persistence) and ``ConsumerConfig.rebalance_interval_ms``.
Membership changes also trigger an immediate rebalance through the broker's
NOTIFY_CONSUMER_IDS_CHANGED.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.api import MQClientAPI
from rocketq.client.config import ClientConfig, ConsumeFromWhere, MessageModel
from rocketq.client.consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    PushConsumer,
)
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer, SelectMessageQueueByHash
from rocketq.client.remoting.route import MessageQueue
from rocketq.client.testing import ServerProcess, create_topic, spawn_broker, spawn_namesrv, wait_for

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
FAST = ClientConfig(
    heartbeat_broker_interval_ms=1000,
    persist_consumer_offset_interval_ms=500,
    poll_name_server_interval_ms=2000,
)
BROKER_CONF: dict[str, Any] = {
    "mappedFileSizeCommitLog": 16 << 20,
    "mappedFileSizeConsumeQueue": 20 * 20_000,
    "maxHashSlotNum": 2000,
    "maxIndexNum": 8000,
    "flushConsumerOffsetInterval": 1000,
    "rebalanceLockMaxLiveTime": 10_000,
    "channelExpiredTimeout": 10_000,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    tmp = tmp_path_factory.mktemp("e2e-consumers")
    with spawn_namesrv(tmp) as ns, spawn_broker(tmp, ns.addr, **BROKER_CONF) as broker:
        yield ns, broker
        print(f"--- broker log tail ---\n{broker.log_tail()}")


@pytest.fixture()
def ns_addr(cluster: tuple[ServerProcess, ServerProcess]) -> str:
    return cluster[0].addr


def _owned(consumer: PushConsumer, topic: str) -> set[MessageQueue]:
    return {mq for mq in consumer.async_consumer.assigned_queues() if mq.topic == topic}


# ---------------------------------------------------------------------------- clustering


def test_clustering_rebalance_when_consumers_join_and_leave(ns_addr: str) -> None:
    topic, group, total, queues = "I4Rebalance", "cg-i4-rebalance", 600, 8
    create_topic(ns_addr, topic, queues)
    seen: Counter[bytes] = Counter()
    by_consumer: dict[str, int] = defaultdict(int)
    lock = threading.Lock()

    def make(name: str) -> PushConsumer:
        consumer = PushConsumer(
            ns_addr,
            consumer_group=group,
            consume_from_where=FIRST,
            consume_thread_nums=4,
            rebalance_interval_ms=1000,
            client=ClientConfig(
                instance_name=name, heartbeat_broker_interval_ms=1000, persist_consumer_offset_interval_ms=500
            ),
        )
        consumer.subscribe(topic, "*")

        def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
            with lock:
                for m in msgs:
                    seen[m.body] += 1
                by_consumer[name] += len(msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.register_message_listener(listener)
        consumer.start()
        return consumer

    stop_producing = threading.Event()
    produced: list[bytes] = []

    def produce() -> None:
        with Producer(ns_addr, producer_group="pg-i4-rebalance") as producer:
            for i in range(total):
                body = b"r-%04d" % i
                producer.send(Message(topic, body))
                produced.append(body)
                time.sleep(0.008)
        stop_producing.set()

    producer_thread = threading.Thread(target=produce)
    producer_thread.start()
    members = {"c1": make("c1")}
    try:
        time.sleep(0.7)
        members["c2"] = make("c2")
        time.sleep(0.7)
        members["c3"] = make("c3")
        time.sleep(1.0)
        members.pop("c2").shutdown()  # a clean leave: its queues move to the others
        time.sleep(0.7)
        members["c4"] = make("c4")
        time.sleep(0.5)
        members.pop("c3").shutdown()
        producer_thread.join(60)
        assert stop_producing.is_set()
        wait_for(lambda: set(produced) <= set(seen), "every produced message consumed", 30)
        # the group settles: every queue owned by exactly one of the remaining members
        remaining = list(members.values())

        def settled() -> bool:
            owned = [_owned(c, topic) for c in remaining]
            union = set().union(*owned)
            return len(union) == queues and sum(len(o) for o in owned) == queues

        wait_for(settled, "each queue owned by exactly one consumer", 20)
        time.sleep(1.5)  # and it stays so across later rebalance rounds
        assert settled()
        shares = sorted(len(_owned(c, topic)) for c in remaining)
        assert shares == [4, 4]
    finally:
        for c in members.values():
            c.shutdown()
        producer_thread.join(60)
    assert len(produced) == total
    assert set(seen) == set(produced), "nothing lost"
    duplicates = sum(n - 1 for n in seen.values())
    print(
        f"\nrebalance: {total} messages, {duplicates} redelivered across the membership changes; "
        f"per consumer {dict(sorted(by_consumer.items()))}"
    )
    assert len(by_consumer) >= 3, "the messages were shared by the members"


# ---------------------------------------------------------------------------- broadcasting


def test_broadcasting_every_consumer_gets_every_message(ns_addr: str, tmp_path: Path) -> None:
    topic, total = "I4Broadcast", 40
    create_topic(ns_addr, topic, 4)
    got: dict[str, list[bytes]] = defaultdict(list)
    lock = threading.Lock()
    consumers = []
    for n in range(3):
        name = f"b{n}"
        consumer = PushConsumer(
            ns_addr,
            consumer_group="cg-i4-broadcast",
            consume_from_where=FIRST,
            message_model=MessageModel.BROADCASTING,
            offset_store_dir=str(tmp_path),
            rebalance_interval_ms=1000,
            client=ClientConfig(
                instance_name=name, heartbeat_broker_interval_ms=1000, persist_consumer_offset_interval_ms=500
            ),
        )
        consumer.subscribe(topic, "*")

        def listener(msgs: list[MessageExt], ctx: Any, name: str = name) -> ConsumeConcurrentlyStatus:
            with lock:
                got[name].extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.register_message_listener(listener)
        consumers.append(consumer)
    try:
        for c in consumers:
            c.start()
        with Producer(ns_addr, producer_group="pg-i4-broadcast") as producer:
            producer.send_batch([Message(topic, b"bc-%02d" % i) for i in range(total)])
        expected = sorted(b"bc-%02d" % i for i in range(total))
        wait_for(lambda: all(len(got[f"b{n}"]) >= total for n in range(3)), "every consumer got all", 30)
        time.sleep(0.3)
        for n in range(3):
            assert sorted(got[f"b{n}"]) == expected
            assert _owned(consumers[n], topic) == {
                mq for mq in consumers[0].async_consumer.assigned_queues() if mq.topic == topic
            }
    finally:
        for c in consumers:
            c.shutdown()
    # broadcasting offsets live in local files, one per client
    assert len(list(tmp_path.rglob("offsets.json"))) == 3


# ---------------------------------------------------------------------------- orderly


def _foreign_lock(ns_addr: str, broker_addr: str, group: str, mqs: list[MessageQueue]) -> set[MessageQueue]:
    """LOCK_BATCH_MQ as another client id: the queues it could take (locked by nobody else)."""

    async def run() -> set[MessageQueue]:
        api = MQClientAPI(ns_addr, config=ClientConfig(instance_name="intruder"))
        try:
            return await api.lock_batch_mq(broker_addr, group, mqs, 3000)
        finally:
            await api.close()

    return asyncio.run(run())


def test_orderly_one_thread_per_queue_in_order_with_broker_locks(
    ns_addr: str, cluster: tuple[ServerProcess, ServerProcess]
) -> None:
    topic, group, queues, keys, per_key = "I4Orderly", "cg-i4-orderly", 4, 12, 20
    create_topic(ns_addr, topic, queues)
    with Producer(ns_addr, producer_group="pg-i4-orderly") as producer:
        sel = SelectMessageQueueByHash()
        for seq in range(per_key):
            for k in range(keys):
                producer.send(Message(topic, f"k{k}|{seq}".encode()), selector=sel, arg=f"k{k}")
    lock = threading.Lock()
    active: Counter[int] = Counter()
    overlaps: list[int] = []
    offsets: dict[int, list[int]] = defaultdict(list)
    per_key_seq: dict[str, list[int]] = defaultdict(list)
    threads: dict[int, set[tuple[str, int]]] = defaultdict(set)

    def make(name: str) -> PushConsumer:
        consumer = PushConsumer(
            ns_addr,
            consumer_group=group,
            consume_from_where=FIRST,
            consume_thread_nums=4,
            rebalance_interval_ms=1000,
            client=ClientConfig(
                instance_name=name, heartbeat_broker_interval_ms=1000, persist_consumer_offset_interval_ms=500
            ),
        )
        consumer.subscribe(topic, "*")

        def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
            qid = ctx.message_queue.queue_id
            with lock:
                active[qid] += 1
                if active[qid] > 1:
                    overlaps.append(qid)
                threads[qid].add((name, threading.get_ident()))
            time.sleep(0.001)  # widen the window in which a second thread would show up
            with lock:
                for m in msgs:
                    offsets[m.queue_id].append(m.queue_offset)
                    key, _, seq = m.body.decode().partition("|")
                    per_key_seq[key].append(int(seq))
                active[qid] -= 1
            return ConsumeOrderlyStatus.SUCCESS

        consumer.register_message_listener_orderly(listener)
        consumer.start()
        return consumer

    members = [make("o1"), make("o2")]
    try:
        total = keys * per_key
        wait_for(lambda: sum(len(v) for v in offsets.values()) >= total, "all messages consumed orderly", 40)
        # the broker holds the locks: another client of the group cannot take any held queue
        broker_addr = cluster[1].addr
        held = set().union(*(_owned(c, topic) for c in members))
        assert len(held) == queues
        assert _foreign_lock(ns_addr, broker_addr, group, sorted(held)) == set()
    finally:
        for c in members:
            c.shutdown()
    assert not overlaps, f"queues consumed by two threads at once: {overlaps}"
    for qid, offs in offsets.items():
        assert offs == sorted(offs), f"queue {qid} consumed out of offset order"
        assert len(set(offs)) == len(offs), f"queue {qid} consumed twice"
    for key, seqs in per_key_seq.items():
        assert seqs == list(range(per_key)), f"{key}: {seqs}"
    # after shutdown the locks are released (UNLOCK_BATCH_MQ), so another client can take them
    time.sleep(0.3)
    mqs = [MessageQueue(topic, cluster[1].broker_name or "broker-a", q) for q in range(queues)]
    assert _foreign_lock(ns_addr, cluster[1].addr, group, mqs) == set(mqs)
    print(
        f"\norderly: queue -> consumer threads {{q: [(consumer, thread)]}} = "
        f"{ {q: sorted(n for n, _ in v) for q, v in sorted(threads.items())} }"
    )
