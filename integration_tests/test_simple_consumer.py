"""SimpleConsumer against real mqnamesrv/mqbroker processes: receive, ack, change invisible duration.

The round trip checks what a user of RocketMQ 5's SimpleConsumer relies on: an acked message
never comes back, a shortened invisible duration brings a message back early (from the pop retry
topic, with ``reconsume_times`` raised, and its ack then names the retry topic), an extended one
keeps it hidden and the new handle acks it.  The group test spreads 2 000 messages over two broker
groups and three consumers of one group (one acks each message, two ack in batches): every
message is received and acked exactly once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.admin import Admin
from rocketq.client.consumer import InvalidReceiptHandleError, SimpleConsumer
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.remoting.pop import ConsumeInitMode, ExtraInfo, RetryFlag
from rocketq.client.remoting.properties import MessageConst
from rocketq.client.testing import ServerProcess, create_topic, spawn_broker, spawn_namesrv, wait_for


@pytest.fixture
def namesrv_proc(tmp_path: Path) -> Iterator[ServerProcess]:
    with spawn_namesrv(tmp_path / "ns") as ns:
        yield ns


def _consumer(ns: ServerProcess, group: str, topic: str, **kw: object) -> SimpleConsumer:
    settings: dict[str, object] = {"await_duration_s": 1.0, "init_mode": ConsumeInitMode.MIN, **kw}
    return SimpleConsumer(ns.addr, group, {topic: "*"}, **settings)


def _receive_until(
    consumer: SimpleConsumer, want: int, timeout_s: float, invisible_s: float
) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got.extend(consumer.receive(min(32, want - len(got)), invisible_s))
    return got


def test_receive_ack_change_invisible_duration_round_trip(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    topic = "sc-round-trip"
    with spawn_broker(tmp_path, namesrv_proc.addr):
        create_topic(namesrv_proc.addr, topic, 2)
        with Producer(namesrv_proc.addr, producer_group="pg-sc") as producer:
            for body in (b"acked", b"shortened", b"extended"):
                producer.send(Message(topic, body))
        with _consumer(namesrv_proc, "sc-g", topic) as consumer:
            first = {m.body: m for m in _receive_until(consumer, 3, 20, invisible_s=20)}
            assert set(first) == {b"acked", b"shortened", b"extended"}
            assert {m.reconsume_times for m in first.values()} == {0}
            assert all(m.topic == topic for m in first.values())

            consumer.ack(first[b"acked"])
            old = first[b"extended"].properties[MessageConst.POP_CK]
            new = consumer.change_invisible_duration(first[b"extended"], 60)
            assert new != old and ExtraInfo.parse(new).invisible_time == 60_000
            consumer.change_invisible_duration(first[b"shortened"], 1)

            # the shortened one comes back (from the pop retry topic), nothing else does
            back = _receive_until(consumer, 1, 25, invisible_s=5)
            assert [m.body for m in back] == [b"shortened"]
            again = back[0]
            assert again.topic == topic and again.reconsume_times >= 1
            assert ExtraInfo.parse(again.properties[MessageConst.POP_CK]).retry_flag is not RetryFlag.NORMAL
            consumer.ack(again)  # acked through the retry topic, before its 5 s are over
            consumer.ack(first[b"extended"])  # with the handle the change returned

            with pytest.raises(InvalidReceiptHandleError, match="expired"):
                consumer.ack(first[b"shortened"])  # its first handle ran out long ago
            time.sleep(5.5)  # past the 5 s of the retried message: an ack that failed would show now
            assert _receive_until(consumer, 1, 4, invisible_s=2) == []


def test_three_consumers_of_one_group_receive_2000_once_each(
    tmp_path: Path, namesrv_proc: ServerProcess
) -> None:
    topic, n = "sc-many", 2000
    with (
        spawn_broker(tmp_path, namesrv_proc.addr, brokerName="broker-a"),
        spawn_broker(tmp_path, namesrv_proc.addr, brokerName="broker-b") as broker_b,
    ):
        create_topic(namesrv_proc.addr, topic, 4)  # on the masters the NameServer knows yet
        create_topic(namesrv_proc.addr, topic, 4, broker_addr=broker_b.addr)  # b registers late
        with Admin(namesrv_proc.addr) as admin:
            wait_for(lambda: len(admin.topic_route(topic).broker_datas) == 2, f"{topic} on both brokers")
        with Producer(namesrv_proc.addr, producer_group="pg-sc-many") as producer:
            for i in range(0, n, 50):
                producer.send_batch([Message(topic, f"m{j}".encode()) for j in range(i, i + 50)])
        received: Counter[bytes] = Counter()
        acked: Counter[bytes] = Counter()
        brokers: Counter[str] = Counter()
        errors: list[BaseException] = []
        lock = threading.Lock()

        def consume(index: int) -> None:  # consumer 0 acks each message, the others in batches
            try:
                with _consumer(namesrv_proc, "sc-many-g", topic, await_duration_s=0.5) as consumer:
                    deadline = time.monotonic() + 45
                    while time.monotonic() < deadline:
                        with lock:
                            if sum(acked.values()) >= n:
                                return
                        batch = consumer.receive(32, 6)  # short: an ack that did not take would show below
                        with lock:
                            for m in batch:
                                received[m.body] += 1
                                brokers[ExtraInfo.parse(m.properties[MessageConst.POP_CK]).broker_name] += 1
                        if index == 0:
                            for m in batch:
                                consumer.ack(m)
                        else:
                            consumer.ack_many(batch)
                        with lock:
                            acked.update(m.body for m in batch)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=consume, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert set(acked) == {f"m{i}".encode() for i in range(n)}
        assert [b for b, c in acked.items() if c > 1] == []
        assert [b for b, c in received.items() if c > 1] == []
        assert set(brokers) == {"broker-a", "broker-b"}
        time.sleep(7)  # past every lease: a message whose ack did not take comes back now
        with _consumer(namesrv_proc, "sc-many-g", topic, await_duration_s=0.5) as consumer:
            assert _receive_until(consumer, 1, 4, invisible_s=30) == []
