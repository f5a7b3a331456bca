"""Two broker groups behind two NameServers, a topic spread across both.

Both brokers register with both NameServers (``namesrvAddr=ns1;ns2``); each NameServer, asked
alone, has both routes; a producer given ``"ns1;ns2"`` spreads its messages over both broker
names; a consumer reads all of them; with one NameServer stopped, clients still find the routes
through the other.  With one broker group lost (SIGKILL, no replica), plain sends go to the other
group at once and ordered sends to the lost group's queues fail fast with a clear error.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.admin import Admin
from rocketq.client.config import ConsumeFromWhere
from rocketq.client.consumer import ConsumeConcurrentlyStatus, LitePullConsumer, PushConsumer
from rocketq.client.errors import MQClientError, NoRouteError
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.producer.selector import SelectMessageQueueByHash
from rocketq.client.testing import ServerProcess, drain, spawn_broker, spawn_namesrv, wait_for

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
SMALL: dict[str, Any] = {
    "mappedFileSizeCommitLog": 16 << 20,
    "mappedFileSizeConsumeQueue": 20 * 20_000,
    "maxHashSlotNum": 2000,
    "maxIndexNum": 8000,
}
TOPIC = "I4Spread"
KEYS = tuple(f"key-{i}" for i in range(16))


@pytest.fixture(scope="module")
def two_groups(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ServerProcess]]:
    tmp = tmp_path_factory.mktemp("e2e-two-groups")
    with spawn_namesrv(tmp / "ns1") as ns1, spawn_namesrv(tmp / "ns2") as ns2:
        both = f"{ns1.addr};{ns2.addr}"
        with (
            spawn_broker(tmp / "a", both, brokerName="broker-a", **SMALL) as a,
            spawn_broker(tmp / "b", both, brokerName="broker-b", **SMALL) as b,
        ):
            yield [ns1, ns2, a, b]


def _route_brokers(ns_addr: str, topic: str) -> set[str]:
    with Admin(ns_addr) as admin:
        try:
            return {bd.broker_name for bd in admin.topic_route(topic).broker_datas}
        except NoRouteError:
            return set()


def test_topic_spread_over_two_groups_and_two_namesrvs(two_groups: list[ServerProcess]) -> None:
    ns1, ns2, broker_a, broker_b = two_groups
    both = f"{ns1.addr};{ns2.addr}"
    for ns in (ns1, ns2):  # every broker registered with every NameServer
        with Admin(ns.addr) as admin:
            info = admin.cluster_list()
            assert set(info.cluster_addr_table["DefaultCluster"]) == {"broker-a", "broker-b"}
            assert {bd.master_addr for bd in info.broker_addr_table.values()} == {
                broker_a.addr,
                broker_b.addr,
            }
    with Admin(both) as admin:
        masters = admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        assert sorted(masters) == sorted([broker_a.addr, broker_b.addr])
    for ns_addr in (ns1.addr, ns2.addr):

        def spread(addr: str = ns_addr) -> bool:
            return _route_brokers(addr, TOPIC) == {"broker-a", "broker-b"}

        wait_for(spread, f"route on {ns_addr}")

    total = 200
    sent_to: Counter[str] = Counter()
    with Producer(both, producer_group="pg-i4-spread") as producer:
        queues = producer.fetch_publish_message_queues(TOPIC)
        assert {mq.broker_name for mq in queues} == {"broker-a", "broker-b"} and len(queues) == 8
        for i in range(total - 20):
            sent_to[producer.send(Message(TOPIC, b"s-%03d" % i)).message_queue.broker_name] += 1
        for r in producer.send_batch([Message(TOPIC, b"s-%03d" % i) for i in range(total - 20, total)]):
            sent_to[r.message_queue.broker_name] += len(r.msg_id.split(","))
    assert set(sent_to) == {"broker-a", "broker-b"}
    assert min(sent_to.values()) >= total // 4, f"sends not spread: {sent_to}"

    seen: Counter[bytes] = Counter()
    from_broker: Counter[str] = Counter()
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            for m in msgs:
                seen[m.body] += 1
                from_broker[ctx.message_queue.broker_name] += 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = PushConsumer(both, consumer_group="cg-i4-spread", consume_from_where=FIRST)
    push.subscribe(TOPIC, "*")
    push.register_message_listener(listener)
    push.start()
    try:
        wait_for(lambda: len(seen) >= total, "every message consumed")
        assert {mq.broker_name for mq in push.async_consumer.assigned_queues() if mq.topic == TOPIC} == {
            "broker-a",
            "broker-b",
        }
    finally:
        push.shutdown()
    assert set(seen) == {b"s-%03d" % i for i in range(total)}
    assert from_broker == sent_to


def test_one_namesrv_down_clients_use_the_other(
    tmp_path_factory: pytest.TempPathFactory, two_groups: list[ServerProcess]
) -> None:
    ns1, ns2, _, _ = two_groups
    both = f"{ns1.addr};{ns2.addr}"
    topic = "I4Failover"
    with Admin(both) as admin:
        admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
    wait_for(lambda: _route_brokers(ns2.addr, topic) == {"broker-a", "broker-b"}, "route on ns2")
    ns1.terminate()
    with Producer(both, producer_group="pg-i4-failover") as producer:
        names = {producer.send(Message(topic, b"f-%d" % i)).message_queue.broker_name for i in range(20)}
    assert names == {"broker-a", "broker-b"}
    consumer = LitePullConsumer(both, consumer_group="cg-i4-failover", consume_from_where=FIRST)
    consumer.subscribe(topic, "*")
    consumer.start()
    try:
        got = [m.body for m in drain(consumer, 20, 30, poll_ms=300)]
    finally:
        consumer.shutdown()
    assert sorted(got) == sorted(b"f-%d" % i for i in range(20))


def test_one_group_lost_plain_sends_move_selector_sends_fail_fast(tmp_path: Path) -> None:
    """Two broker groups, one NameServer; broker-b is SIGKILLed and not replaced.  A producer
    started before (never restarted, default client settings) sends plain messages to broker-a at
    once, and a selector send whose key maps to a broker-b queue fails fast, well before its
    timeout, with an error naming the group and the queue and saying why it is not moved
    (docs/failover.md, "Clients during a failover")."""
    topic = "I4LostGroup"
    with (
        spawn_namesrv(tmp_path / "ns") as ns,
        spawn_broker(tmp_path / "a", ns.addr, brokerName="broker-a", **SMALL),
        spawn_broker(tmp_path / "b", ns.addr, brokerName="broker-b", **SMALL) as broker_b,
    ):
        with Admin(ns.addr) as admin:
            admin.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        wait_for(
            lambda: _route_brokers(ns.addr, topic) == {"broker-a", "broker-b"}, "the route of both groups"
        )
        selector = SelectMessageQueueByHash()
        timeout_ms = 10_000
        with Producer(ns.addr, producer_group="pg-lost-group", send_msg_timeout_ms=timeout_ms) as producer:
            placed = {k: producer.send(Message(topic, b"k"), selector=selector, arg=k) for k in KEYS}
            key_b = next(k for k in KEYS if placed[k].message_queue.broker_name == "broker-b")
            key_a = next(k for k in KEYS if placed[k].message_queue.broker_name == "broker-a")
            lost_queue = placed[key_b].message_queue.queue_id
            broker_b.kill9()
            killed = time.monotonic()
            # round-robin over the 4 queues: at least one of these picks a queue of broker-b first
            plain = [producer.send(Message(topic, b"plain")) for _ in range(4)]
            plain_s = time.monotonic() - killed
            assert {r.message_queue.broker_name for r in plain} == {"broker-a"}
            began = time.monotonic()
            with pytest.raises(MQClientError) as lost:
                producer.send(Message(topic, b"ordered"), selector=selector, arg=key_b)
            failed_s = time.monotonic() - began
            text = str(lost.value)
            assert "broker group broker-b" in text and f"queue {lost_queue}" in text, text
            assert "order" in text and "no broker of group broker-b" in text, text
            # keys of broker-a keep their queue; every plain send goes to broker-a
            assert producer.send(Message(topic, b"a"), selector=selector, arg=key_a).message_queue == (
                placed[key_a].message_queue
            )
            names = {producer.send(Message(topic, b"p")).message_queue.broker_name for _ in range(10)}
            assert names == {"broker-a"}
        print(
            f"\n4 plain sends acknowledged {plain_s:.2f} s after the kill; "
            f"the selector send to broker-b failed in {failed_s:.2f} s"
        )
        assert plain_s < 2.5, "the plain sends after the kill did not move to broker-a at once"
        assert failed_s < timeout_ms / 1000 / 3, "the selector send did not fail fast"
