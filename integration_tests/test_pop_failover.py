"""POP consumption across a master failover in controller mode (real controllers, NameServer and
three brokers of one group): messages left un-acked before the master is SIGKILLed come back from
the new master after their invisible time (its revive service replays the replicated revive log),
nothing the producer had sent is lost, and a message whose ack was answered before the kill is not
delivered again: the master answers a POP and an ACK once their revive-log records are on the
in-sync slaves (allAckInSyncStateSet), as it answers a send."""

from __future__ import annotations

import functools
import time
from collections import Counter
from pathlib import Path

from rocketq.client.config import ClientConfig
from rocketq.client.consumer import SimpleConsumer
from rocketq.client.errors import RocketQError
from rocketq.client.producer import Message, Producer
from rocketq.client.remoting.pop import ConsumeInitMode
from rocketq.client.testing.cluster import FAST_FAILOVER_BROKER_CONF, ControllerGroup
from rocketq.client.testing.messaging import create_topic
from rocketq.client.testing.wait import wait_for

FAST = ClientConfig(
    poll_name_server_interval_ms=1000, heartbeat_broker_interval_ms=1000, mq_client_api_timeout_ms=2000
)
TOPIC = "PopFailover"
GROUP = "cg-pop-fo"
INVISIBLE_S = 4.0
LEFT_UNACKED = 5


def send(producer: Producer, bodies: list[bytes], deadline: float) -> None:
    """Every body sent (a send failing during the failover is retried until ``deadline``)."""
    for body in bodies:
        while True:
            try:
                producer.send(Message(TOPIC, body))
                break
            except (RocketQError, TimeoutError):
                assert time.monotonic() < deadline, f"could not send {body!r}"
                time.sleep(0.3)


def test_pop_across_a_controller_failover(tmp_path: Path) -> None:
    group = ControllerGroup(
        tmp_path, "broker-pop", broker_conf=FAST_FAILOVER_BROKER_CONF, client=FAST, wait_s=60
    )
    consumer: SimpleConsumer | None = None
    try:
        master, _ = group.wait_master("a master with every broker in sync", group.full_set)
        create_topic(group.namesrv_addr, TOPIC, 2, broker_addr=master, config=FAST)
        for slot in range(len(group.ports)):
            knows = functools.partial(group.knows_topic, group.addr(slot), TOPIC)
            wait_for(knows, f"broker {slot} knows the topic", 60)
        before = [f"m{i}".encode() for i in range(40)]
        after = [f"m{i}".encode() for i in range(40, 60)]
        consumer = SimpleConsumer(
            group.namesrv_addr,
            GROUP,
            {TOPIC: "*"},
            await_duration_s=1.0,
            init_mode=ConsumeInitMode.MIN,
            config=FAST,
        )
        consumer.start()
        acked_at: dict[bytes, float] = {}
        unacked: set[bytes] = set()
        with Producer(group.namesrv_addr, producer_group="pg-pop-fo", client=FAST) as producer:
            send(producer, before, time.monotonic() + 30)
            deadline = time.monotonic() + 30
            while len(acked_at) + len(unacked) < len(before) and time.monotonic() < deadline:
                for msg in consumer.receive(8, INVISIBLE_S):
                    if msg.body in acked_at or msg.body in unacked:
                        continue  # a redelivery before the kill (not expected, harmless)
                    if len(unacked) < LEFT_UNACKED:
                        unacked.add(msg.body)
                    else:
                        consumer.ack(msg)
                        acked_at[msg.body] = time.monotonic()
            assert len(acked_at) + len(unacked) == len(before), (len(acked_at), len(unacked))
            killed = time.monotonic()
            group.broker(group.slot_of(master)).kill9()
            new_master, _ = group.wait_new_master(master)
            print(f"{new_master} is master {time.monotonic() - killed:.1f} s after the kill")
            send(producer, after, time.monotonic() + 30)
        first_pop: float | None = None
        received: Counter[bytes] = Counter()
        done: set[bytes] = set(acked_at)
        want = set(before) | set(after)
        deadline = time.monotonic() + 45
        while done != want and time.monotonic() < deadline:
            try:
                batch = consumer.receive(16, INVISIBLE_S)
            except (RocketQError, TimeoutError):
                time.sleep(0.3)
                continue
            if batch and first_pop is None:
                first_pop = time.monotonic()
            for msg in batch:
                received[msg.body] += 1
                consumer.ack(msg)
                done.add(msg.body)
        assert done == want, f"lost: {sorted(want - done)}"
        assert unacked <= set(received), unacked - set(received)
        again = {b: n for b, n in received.items() if b in acked_at}
        assert first_pop is not None
        print(
            f"new master served a pop {first_pop - killed:.1f} s after the kill; "
            f"{sum(again.values())} redelivery(ies) of messages acked before the kill {again}"
        )
        assert not again, f"delivered again although their acks were answered before the kill: {again}"
    finally:
        if consumer is not None:
            consumer.shutdown()
        print(group.close())
