"""Timer messages end to end, against real mqnamesrv/mqbroker processes.

The product promise: a timer message is put into its topic no earlier than its delivery time and
at most ``timerPrecisionMs`` + 1 s after it (measured on the broker: the store timestamp of the
delivered message), for short delays, for a delay past the roll window (``timerRollWindowSlot=3``,
so an 8 s delay rolls twice), and across a SIGKILL of the broker and a restart; a message due while
the broker is down is delivered after the restart; a recalled message never fires; nothing
delivered before the crash is delivered again.  RECALL_MESSAGE with ``recallMessageEnable=false``
is answered NO_PERMISSION and the message still fires.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketq.client.errors import MQBrokerError
from rocketq.client.model import MessageExt
from rocketq.client.producer import Message, Producer
from rocketq.client.remoting.codes import ResponseCode
from rocketq.client.testing.messaging import create_topic, read_topic
from rocketq.client.testing.restartable import RestartableCluster

PRECISION_MS = 1000
PROMISE_MS = PRECISION_MS + 1000  # latest delivery after the delivery time (the product promise)
WAIT_S = 40.0


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RestartableCluster]:
    c = RestartableCluster(
        tmp_path / "cluster",
        {"timerRollWindowSlot": 3, "recallMessageEnable": "true", "timerPrecisionMs": PRECISION_MS},
    )
    try:
        yield c
    finally:
        print(c.close())


def wait_delivered(ns: str, topic: str, bodies: set[bytes], timeout_s: float = WAIT_S) -> list[MessageExt]:
    """Read ``topic`` until every body of ``bodies`` is there (or the time is up); all its messages."""
    deadline = time.monotonic() + timeout_s
    got: list[MessageExt] = []
    while time.monotonic() < deadline:
        got = read_topic(ns, topic)
        if bodies <= {m.body for m in got}:
            break
        time.sleep(0.2)
    return got


def slot_of(deliver_ms: int) -> int:
    """TIMER_OUT_MS of a delivery time: floored to the precision, an exact multiple one slot earlier."""
    if deliver_ms % PRECISION_MS == 0:
        return deliver_ms - PRECISION_MS
    return deliver_ms // PRECISION_MS * PRECISION_MS


def by_body(messages: list[MessageExt]) -> dict[bytes, MessageExt]:
    return {m.body: m for m in messages}


def assert_on_time(msg: MessageExt, deliver_ms: int, latest_ms: int) -> None:
    late = msg.store_timestamp - deliver_ms
    assert msg.store_timestamp >= deliver_ms, f"{msg.body!r} delivered {-late} ms early"
    assert msg.store_timestamp <= latest_ms, f"{msg.body!r} delivered {late} ms after its time"


def test_timer_messages_fire_on_time_roll_survive_sigkill_and_recall(cluster: RestartableCluster) -> None:
    ns, topic = cluster.namesrv_addr, "TimerOrders"
    create_topic(ns, topic, 4, broker_addr=cluster.broker_addr)
    with Producer(ns, producer_group="pg-timer") as producer:
        t0 = now_ms()
        plan = {b"in-1s": t0 + 1000, b"in-5s": t0 + 5000, b"rolls-8s": t0 + 8000, b"recalled-4s": t0 + 4000}
        results = {body: producer.send(Message(topic, body, deliver_at=at)) for body, at in plan.items()}
        sent_delay = now_ms()
        producer.send(Message(topic, b"delay-2s"), delay=2)
        handle = results[b"recalled-4s"].recall_handle
        assert handle is not None and all(r.recall_handle for r in results.values())
        assert producer.recall(topic, handle) == results[b"recalled-4s"].msg_id

        expected = {b"in-1s", b"in-5s", b"rolls-8s", b"delay-2s"}
        got = by_body(wait_delivered(ns, topic, expected))
        assert expected <= set(got), f"not delivered: {expected - set(got)}"
        for body in (b"in-1s", b"in-5s", b"rolls-8s"):
            assert_on_time(got[body], plan[body], plan[body] + PROMISE_MS)
        assert_on_time(got[b"delay-2s"], sent_delay + 2000 - 200, now_ms())
        rolled = got[b"rolls-8s"].properties
        assert int(rolled["TIMER_ROLL_TIMES"]) >= 1
        assert rolled["TIMER_OUT_MS"] == str(slot_of(plan[b"rolls-8s"]))
        props = got[b"in-1s"].properties
        assert (
            int(props["TIMER_ENQUEUE_MS"]) <= int(props["TIMER_DEQUEUE_MS"]) <= got[b"in-1s"].store_timestamp
        )
        assert "REAL_TOPIC" not in props

        # across a SIGKILL: one message falls due while the broker is down, one after the restart
        t1 = now_ms()
        during, after = t1 + 3000, t1 + 20_000
        producer.send(Message(topic, b"due-while-down", deliver_at=during))
        producer.send(Message(topic, b"due-after-restart", deliver_at=after))
        time.sleep(1.5)  # in the wheel, the checkpoint flushed once
    cluster.broker.kill9()
    killed = now_ms()
    cluster.start_broker()
    restarted = now_ms()
    print(f"broker down for {restarted - killed} ms")
    assert restarted < after - 2000, "the broker took too long to restart for this test's plan"
    final = {b"due-while-down", b"due-after-restart"}
    messages = wait_delivered(ns, topic, final)
    got = by_body(messages)
    assert final <= set(got), f"not delivered after the restart: {final - set(got)}"
    assert_on_time(got[b"due-while-down"], during, max(during, restarted) + PROMISE_MS)
    assert_on_time(got[b"due-after-restart"], after, after + PROMISE_MS)

    counts = Counter(m.body for m in messages)
    assert b"recalled-4s" not in counts
    duplicates = {body: n for body, n in counts.items() if n > 1}
    assert not duplicates, f"delivered twice: {duplicates}"


def test_recall_refused_without_recall_message_enable(tmp_path: Path) -> None:
    cluster = RestartableCluster(tmp_path / "cluster", {"timerMaxDelaySec": 60})
    try:
        ns, topic = cluster.namesrv_addr, "TimerNoRecall"
        create_topic(ns, topic, 2, broker_addr=cluster.broker_addr)
        with Producer(ns, producer_group="pg-timer-2") as producer:
            with pytest.raises(MQBrokerError, match="timer message illegal") as illegal:
                producer.send(Message(topic, b"too-far", delay=61))
            assert illegal.value.code == ResponseCode.MESSAGE_ILLEGAL
            at = now_ms() + 2000
            result = producer.send(Message(topic, b"kept", deliver_at=at))
            assert result.recall_handle is not None
            with pytest.raises(MQBrokerError, match="recallMessageEnable=false") as refused:
                producer.recall(topic, result.recall_handle)
            assert refused.value.code == ResponseCode.NO_PERMISSION
        got = by_body(wait_delivered(ns, topic, {b"kept"}))
        assert set(got) == {b"kept"}
        assert_on_time(got[b"kept"], at, at + PROMISE_MS)
    finally:
        print(cluster.close())
