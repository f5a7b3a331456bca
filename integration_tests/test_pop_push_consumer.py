"""Push consumer on POP (PopPushConsumer) against real mqnamesrv/mqbroker processes.

Two consumers of one group over two broker groups consume 2 000 messages: every message is
handed to a listener and acked once, none comes back after its invisible time.  A listener that
answers RECONSUME_LATER gets the message again with ``reconsume_times`` raised.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.admin import Admin
from rocketq.client.consumer import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from rocketq.client.consumer.listener import MessageListenerConcurrently
from rocketq.client.consumer.pop_push import PopPushConsumer
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.remoting.pop import ConsumeInitMode
from rocketq.client.testing import ServerProcess, create_topic, spawn_broker, spawn_namesrv, wait_for


@pytest.fixture
def namesrv_proc(tmp_path: Path) -> Iterator[ServerProcess]:
    with spawn_namesrv(tmp_path / "ns") as ns:
        yield ns


def _consumer(ns: ServerProcess, group: str, topic: str, **kw: object) -> PopPushConsumer:
    settings: dict[str, object] = {"await_duration_s": 1.0, "init_mode": ConsumeInitMode.MIN, **kw}
    return PopPushConsumer(ns.addr, group, {topic: "*"}, **settings)


def test_two_pop_push_consumers_of_one_group_consume_2000_once_each(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    topic, n = "pp-many", 2000
    with (
        spawn_broker(tmp_path, namesrv_proc.addr, brokerName="broker-a"),
        spawn_broker(tmp_path, namesrv_proc.addr, brokerName="broker-b") as broker_b,
    ):
        create_topic(namesrv_proc.addr, topic, 4)
        create_topic(namesrv_proc.addr, topic, 4, broker_addr=broker_b.addr)  # b may register late
        with Admin(namesrv_proc.addr) as admin:
            wait_for(lambda: len(admin.topic_route(topic).broker_datas) == 2, f"{topic} on both brokers")
        with Producer(namesrv_proc.addr, producer_group="pg-pp-many") as producer:
            for i in range(0, n, 50):
                producer.send_batch([Message(topic, f"m{j}".encode()) for j in range(i, i + 50)])
        seen: Counter[bytes] = Counter()
        per_consumer: Counter[int] = Counter()
        lock = threading.Lock()

        def listener(index: int) -> MessageListenerConcurrently:
            def on(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
                with lock:
                    seen.update(m.body for m in msgs)
                    per_consumer[index] += len(msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            return on

        # a short invisible time: an ack that did not take would bring the message back below
        consumers = [_consumer(namesrv_proc, "pp-many-g", topic, invisible_time_s=8) for _ in range(2)]
        try:
            for i, c in enumerate(consumers):
                c.register_message_listener_concurrently(listener(i))
                c.start()
            wait_for(lambda: len(seen) >= n, "2 000 messages consumed", timeout_s=30)
            time.sleep(9)  # past every lease
        finally:
            for c in consumers:
                c.shutdown()
        assert set(seen) == {f"m{i}".encode() for i in range(n)}
        assert [b for b, c in seen.items() if c > 1] == []
        assert all(per_consumer[i] > 0 for i in range(2)), per_consumer


def test_reconsume_later_brings_the_message_back_with_the_attempt_count_raised(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    topic = "pp-retry"
    with spawn_broker(tmp_path, namesrv_proc.addr):
        create_topic(namesrv_proc.addr, topic, 2)
        with Producer(namesrv_proc.addr, producer_group="pg-pp-retry") as producer:
            for i in range(10):
                producer.send(Message(topic, f"m{i}".encode()))
        attempts: dict[bytes, list[int]] = {}
        lock = threading.Lock()

        def on(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            with lock:
                for m in msgs:
                    attempts.setdefault(m.body, []).append(m.reconsume_times)
                failing = any(m.body in (b"m2", b"m7") and m.reconsume_times < 2 for m in msgs)
            return (
                ConsumeConcurrentlyStatus.RECONSUME_LATER
                if failing
                else ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            )

        consumer = _consumer(namesrv_proc, "pp-retry-g", topic, retry_backoff_s=[1.0])
        consumer.register_message_listener_concurrently(on)
        consumer.start()
        try:
            wait_for(
                lambda: all(len(attempts.get(b, [])) >= 3 for b in (b"m2", b"m7")), "retries", timeout_s=30
            )
            time.sleep(3)  # an acked message would not come back; a failed ack would after 60 s only
        finally:
            consumer.shutdown()
        assert attempts[b"m2"] == [0, 1, 2] and attempts[b"m7"] == [0, 1, 2]
        assert all(attempts[f"m{i}".encode()] == [0] for i in range(10) if i not in (2, 7))
