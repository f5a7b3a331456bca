"""SQL92 subscriptions end to end: MessageSelector.by_sql against real mqnamesrv/mqbroker processes.

The module's broker runs with ``enablePropertyFilter=true``; messages carry user properties ``a``
(a number) and ``b`` (a string).  A concurrent push consumer, an orderly push consumer and a lite
pull consumer, each in its own group, subscribe with the same SQL92 expression and must receive
exactly the matching messages.  A second broker with RocketMQ's default
``enablePropertyFilter=false`` must make the consumers fail with a SubscriptionRefusedError that says
what to set, instead of delivering nothing silently.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client.config import ConsumeFromWhere
from rocketq.client.consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    LitePullConsumer,
    MessageSelector,
    PushConsumer,
    SubscriptionRefusedError,
)
from rocketq.client.errors import MQClientError
from rocketq.client.model import Message, MessageExt
from rocketq.client.producer import Producer
from rocketq.client.testing import create_topic, spawn_broker, spawn_namesrv, wait_for

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
SQL = "a > 5 AND b = 'x'"
TOTAL = 40


def _matches(i: int) -> bool:
    return i % 10 > 5 and i % 2 == 0


EXPECTED = sorted(f"m{i}".encode() for i in range(TOTAL) if _matches(i))


@pytest.fixture(scope="module")
def ns_addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("sql92")
    with spawn_namesrv(tmp) as ns, spawn_broker(tmp, ns.addr, enablePropertyFilter="true") as broker:
        create_topic(ns.addr, "Sql92Orders")
        _produce(ns.addr, "Sql92Orders")
        yield ns.addr
        print(f"--- broker log tail ---\n{broker.log_tail()}")


def _produce(ns_addr: str, topic: str) -> None:
    with Producer(ns_addr, producer_group=f"pg-{topic}") as producer:
        for i in range(TOTAL):
            msg = Message(topic, f"m{i}".encode(), tags="TagA")
            msg.put_user_property("a", str(i % 10))
            msg.put_user_property("b", "x" if i % 2 == 0 else "y")
            producer.send(msg)


def _received_exactly(got: list[bytes], lock: threading.Lock) -> None:
    wait_for(lambda: len(got) >= len(EXPECTED), f"{len(EXPECTED)} matching messages")
    time.sleep(1.0)  # anything that does not match would arrive with (or right after) the rest
    with lock:
        assert sorted(got) == EXPECTED


def test_push_consumer_by_sql_receives_exactly_the_matching_messages(ns_addr: str) -> None:
    got: list[bytes] = []
    lock = threading.Lock()
    consumer = PushConsumer(ns_addr, consumer_group="cg-sql92-push", consume_from_where=FIRST)
    consumer.subscribe("Sql92Orders", MessageSelector.by_sql(SQL))

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(listener)
    consumer.start()
    try:
        _received_exactly(got, lock)
    finally:
        consumer.shutdown()


def test_orderly_push_consumer_by_sql_receives_exactly_the_matching_messages(ns_addr: str) -> None:
    got: list[bytes] = []
    lock = threading.Lock()
    consumer = PushConsumer(ns_addr, consumer_group="cg-sql92-orderly", consume_from_where=FIRST)
    consumer.subscribe("Sql92Orders", MessageSelector.by_sql(SQL))

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        with lock:
            got.extend(m.body for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    consumer.register_message_listener_orderly(listener)
    consumer.start()
    try:
        _received_exactly(got, lock)
    finally:
        consumer.shutdown()


def test_lite_pull_consumer_by_sql_receives_exactly_the_matching_messages(ns_addr: str) -> None:
    got: list[bytes] = []
    consumer = LitePullConsumer(ns_addr, consumer_group="cg-sql92-lite", consume_from_where=FIRST)
    consumer.subscribe("Sql92Orders", MessageSelector.by_sql(SQL))
    with consumer:
        deadline = time.monotonic() + 30
        while len(got) < len(EXPECTED) and time.monotonic() < deadline:
            got += [m.body for m in consumer.poll(500)]
        got += [m.body for m in consumer.poll(1000)]
    assert sorted(got) == EXPECTED


def test_sql_text_as_a_tag_expression_is_refused(ns_addr: str) -> None:
    consumer = PushConsumer(ns_addr, consumer_group="cg-sql92-refused")
    try:
        with pytest.raises(MQClientError, match=r"MessageSelector\.by_sql"):
            consumer.subscribe("Sql92Orders", SQL)
    finally:
        consumer.shutdown()


def test_broker_without_property_filter_makes_sql92_consumers_fail(tmp_path: Path) -> None:
    with spawn_namesrv(tmp_path) as ns, spawn_broker(tmp_path, ns.addr) as broker:
        create_topic(ns.addr, "Sql92Off")
        _produce(ns.addr, "Sql92Off")
        lite = LitePullConsumer(ns.addr, consumer_group="cg-sql92-off", pull_time_delay_when_exception_ms=100)
        lite.subscribe("Sql92Off", MessageSelector.by_sql(SQL))
        # start() asks the broker (CHECK_CLIENT_CONFIG) before any pull, as Java's consumers do
        with pytest.raises(SubscriptionRefusedError, match="enablePropertyFilter=true") as info:
            lite.start()
        assert "refused the SQL92 subscription" in info.value.remark
        _check_push_fails(ns.addr)
        print(f"--- broker log tail ---\n{broker.log_tail()}")


def _check_push_fails(ns_addr: str) -> None:
    """The push consumer has no poll() to raise from: its start() asks the broker first
    (CHECK_CLIENT_CONFIG) and raises with the broker's reason when the broker says no."""
    push = PushConsumer(ns_addr, consumer_group="cg-sql92-off-push", pull_time_delay_when_exception_ms=100)
    push.subscribe("Sql92Off", MessageSelector.by_sql(SQL))
    push.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with pytest.raises(SubscriptionRefusedError) as refused:
        push.start()
    assert "enablePropertyFilter=true" in refused.value.remark
