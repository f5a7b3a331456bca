"""Timer messages across a master failover in controller mode (real controllers, NameServer and
three brokers of one group): a message delivered by the old master is not delivered again by the
new one, and a message due after the failover is delivered by the new master (which starts the
timer service when the controller promotes it and re-reads the replicated timer topic)."""

from __future__ import annotations

import functools
import time
from collections import Counter
from pathlib import Path

from rocketq.client.config import ClientConfig
from rocketq.client.errors import RocketQError
from rocketq.client.model import MessageExt
from rocketq.client.producer import Message, Producer
from rocketq.client.testing.cluster import FAST_FAILOVER_BROKER_CONF, ControllerGroup
from rocketq.client.testing.messaging import create_topic, read_topic
from rocketq.client.testing.wait import wait_for

FAST = ClientConfig(
    poll_name_server_interval_ms=1000, heartbeat_broker_interval_ms=1000, mq_client_api_timeout_ms=2000
)
TOPIC = "TimerFailover"
PROMISE_MS = 2000  # timerPrecisionMs (1000) + 1 s


def now_ms() -> int:
    return int(time.time() * 1000)


def read_when_routed(ns: str, want: set[bytes], timeout_s: float = 60.0) -> list[MessageExt]:
    """The topic's messages once every body of ``want`` is there (a failed read is retried)."""
    deadline = time.monotonic() + timeout_s
    got: list[MessageExt] = []
    while time.monotonic() < deadline:
        try:
            got = read_topic(ns, TOPIC, client=FAST)
        except (RocketQError, TimeoutError):
            got = []
        if want <= {m.body for m in got}:
            return got
        time.sleep(0.3)
    return got


def test_timer_messages_across_a_controller_failover(tmp_path: Path) -> None:
    group = ControllerGroup(
        tmp_path, "broker-timer", broker_conf=FAST_FAILOVER_BROKER_CONF, client=FAST, wait_s=60
    )
    try:
        master, _ = group.wait_master("a master with every broker in sync", group.full_set)
        create_topic(group.namesrv_addr, TOPIC, 2, broker_addr=master, config=FAST)
        for slot in range(len(group.ports)):
            knows = functools.partial(group.knows_topic, group.addr(slot), TOPIC)
            wait_for(knows, f"broker {slot} knows the topic", 60)
        with Producer(group.namesrv_addr, producer_group="pg-timer-fo", client=FAST) as producer:
            early_at, late_at = now_ms() + 2000, now_ms() + 25_000
            producer.send(Message(TOPIC, b"early", deliver_at=early_at))
            producer.send(Message(TOPIC, b"late", deliver_at=late_at))
        got = read_when_routed(group.namesrv_addr, {b"early"})
        assert b"early" in {m.body for m in got}
        time.sleep(1.5)  # the delivered copy replicated (allAckInSyncStateSet acks only in-sync writes)
        killed = now_ms()
        group.broker(group.slot_of(master)).kill9()
        new_master, _ = group.wait_new_master(master)
        promoted = now_ms()
        print(f"{new_master} is master {promoted - killed} ms after the old one was killed")
        assert promoted < late_at - 3000, "the failover took too long for this test's plan"
        got = read_when_routed(group.namesrv_addr, {b"early", b"late"})
        counts = Counter(m.body for m in got)
        assert counts == {b"early": 1, b"late": 1}, counts
        log = group.broker(group.slot_of(new_master)).log_text()
        assert "1 message(s) due before this start were already in their topic" in log, log[-3000:]
        late = next(m for m in got if m.body == b"late")
        assert late_at <= late.store_timestamp <= late_at + PROMISE_MS, late.store_timestamp - late_at
    finally:
        print(group.close())
