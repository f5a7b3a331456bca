"""Broker restarts under running clients: clean SIGTERM, and SIGKILL with SYNC_FLUSH.

The broker listens on a fixed free port so that the restarted process has the address the
clients cached.  Checked: nothing acknowledged is lost; a consumer that lives through the restart
carries on where it was; a consumer that starts after the restart resumes from the offsets the
broker had committed (clean stop: exactly; SIGKILL: nothing older than the last offset flush,
``flushConsumerOffsetInterval``, is consumed again).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client import instance as client_instance
from rocketq.client.admin import Admin
from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import ConsumeConcurrentlyStatus, LitePullConsumer, PushConsumer
from rocketq.client.errors import NoRouteError
from rocketq.client.model import Message, MessageExt, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.testing import (
    ServerProcess,
    create_topic,
    free_port,
    spawn_broker,
    spawn_namesrv,
    wait_for,
)

FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
OFFSET_FLUSH_MS = 1000
CLIENT_PERSIST_MS = 300


@pytest.fixture()
def namesrv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServerProcess]:
    monkeypatch.setattr(client_instance, "REBALANCE_INTERVAL_MS", 1000)
    with spawn_namesrv(tmp_path / "ns") as ns:
        yield ns


def _broker_conf(port: int, **extra: Any) -> dict[str, Any]:
    return {
        "listenPort": port,
        "mappedFileSizeCommitLog": 16 << 20,
        "mappedFileSizeConsumeQueue": 20 * 20_000,
        "maxHashSlotNum": 2000,
        "maxIndexNum": 8000,
        "flushConsumerOffsetInterval": OFFSET_FLUSH_MS,
        "channelExpiredTimeout": 10_000,
        **extra,
    }


def _lag(ns_addr: str, group: str, topic: str) -> int:
    with Admin(ns_addr) as admin:
        try:
            return sum(p.lag for p in admin.consumer_progress(group, topic))
        except NoRouteError:
            return -1


class _Recorder:
    """A push consumer that counts what it consumed."""

    def __init__(self, ns_addr: str, group: str, topic: str, name: str) -> None:
        self.seen: Counter[bytes] = Counter()
        self._lock = threading.Lock()
        self.consumer = PushConsumer(
            ns_addr,
            consumer_group=group,
            consume_from_where=FIRST,
            pull_time_delay_when_exception_ms=300,
            client=ClientConfig(
                instance_name=name,
                heartbeat_broker_interval_ms=1000,
                persist_consumer_offset_interval_ms=CLIENT_PERSIST_MS,
                poll_name_server_interval_ms=1000,
            ),
        )
        self.consumer.subscribe(topic, "*")
        self.consumer.register_message_listener(self._listen)
        self.consumer.start()

    def _listen(self, msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with self._lock:
            for m in msgs:
                self.seen[m.body] += 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def has(self, bodies: list[bytes]) -> bool:
        with self._lock:
            return all(b in self.seen for b in bodies)


def _send_all(producer: Producer, topic: str, bodies: list[bytes]) -> None:
    for body in bodies:
        assert producer.send(Message(topic, body)).send_status is SendStatus.SEND_OK


def _send_with_retry(producer: Producer, topic: str, body: bytes, timeout_s: float = 30.0) -> None:
    """Send once the restarted broker is back (the producer's route still points at it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            assert producer.send(Message(topic, body)).send_status is SendStatus.SEND_OK
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_clean_sigterm_restart_consumers_continue(tmp_path: Path, namesrv: ServerProcess) -> None:
    topic, group = "I4Restart", "cg-i4-restart"
    conf = _broker_conf(free_port())
    broker = spawn_broker(tmp_path, namesrv.addr, **conf)
    recorder: _Recorder | None = None
    try:
        create_topic(namesrv.addr, topic, 2)
        first = [b"before-%03d" % i for i in range(100)]
        second = [b"after-%03d" % i for i in range(100)]
        with Producer(namesrv.addr, producer_group="pg-i4-restart") as producer:
            _send_all(producer, topic, first)
            recorder = _Recorder(namesrv.addr, group, topic, "survivor")
            wait_for(lambda: recorder is not None and recorder.has(first), "first half consumed")
            wait_for(lambda: _lag(namesrv.addr, group, topic) == 0, "offsets committed")
            assert broker.terminate() == 0, "clean shutdown"
            broker = spawn_broker(tmp_path, namesrv.addr, **conf)
            _send_with_retry(producer, topic, second[0])
            _send_all(producer, topic, second[1:])
        wait_for(lambda: recorder is not None and recorder.has(second), "second half consumed")
        wait_for(lambda: _lag(namesrv.addr, group, topic) == 0, "offsets committed after restart")
        assert set(recorder.seen) == set(first + second)
        assert max(recorder.seen.values()) == 1, "nothing consumed twice across a clean restart"
        recorder.consumer.shutdown()
        recorder = None
        # a new member of the group starts from the committed offsets: nothing to consume
        late = _Recorder(namesrv.addr, group, topic, "late")
        try:
            time.sleep(2.0)
            assert not late.seen, f"reprocessed after a clean restart: {sorted(late.seen)[:5]}"
        finally:
            late.consumer.shutdown()
    finally:
        if recorder is not None:
            recorder.consumer.shutdown()
        broker.terminate()


def test_sigkill_with_sync_flush_keeps_acked_and_committed(tmp_path: Path, namesrv: ServerProcess) -> None:
    topic, group = "I4Crash", "cg-i4-crash"
    conf = _broker_conf(free_port(), flushDiskType="SYNC_FLUSH")
    broker = spawn_broker(tmp_path, namesrv.addr, **conf)
    recorder: _Recorder | None = None
    try:
        create_topic(namesrv.addr, topic, 2)
        old = [b"old-%03d" % i for i in range(150)]
        recent = [b"recent-%03d" % i for i in range(50)]
        with Producer(namesrv.addr, producer_group="pg-i4-crash") as producer:
            _send_all(producer, topic, old)
            recorder = _Recorder(namesrv.addr, group, topic, "victim")
            wait_for(lambda: recorder is not None and recorder.has(old), "old messages consumed")
            wait_for(lambda: _lag(namesrv.addr, group, topic) == 0, "old offsets committed")
            time.sleep(2 * OFFSET_FLUSH_MS / 1000 + 0.5)  # the broker has written consumerOffset.json
            _send_all(producer, topic, recent)  # every one acknowledged after an fsync
            wait_for(lambda: recorder is not None and recorder.has(recent), "recent messages consumed")
            broker.kill9()
            recorder.consumer.shutdown()  # its last offset commit cannot reach the broker
            recorder = None
            broker = spawn_broker(tmp_path, namesrv.addr, **conf)
            _send_with_retry(producer, topic, b"post-crash")
        # every acknowledged message survived the crash
        drain = LitePullConsumer(
            namesrv.addr, consumer_group="cg-i4-crash-drain", consume_from_where=FIRST, auto_commit=False
        )
        drain.assign(drain.fetch_message_queues(topic))
        drain.start()
        stored: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(stored) < 201 and time.monotonic() < deadline:
                stored.extend(m.body for m in drain.poll(300))
        finally:
            drain.shutdown()
        assert sorted(stored) == sorted([*old, *recent, b"post-crash"])
        # the group resumes from the offsets the broker had flushed: nothing older is reprocessed
        again = _Recorder(namesrv.addr, group, topic, "successor")
        try:
            wait_for(lambda: again.has([b"post-crash"]), "the successor consumes new messages")
            time.sleep(0.5)
            replayed = sorted(b for b in again.seen if b != b"post-crash")
            print(
                f"\nSIGKILL: {len(replayed)} messages consumed again after the crash "
                f"(committed within the last offset flush interval of {OFFSET_FLUSH_MS} ms)"
            )
            assert set(replayed) <= set(recent), (
                f"reprocessed beyond the last commit interval: {replayed[:5]}"
            )
        finally:
            again.consumer.shutdown()
    finally:
        if recorder is not None:
            recorder.consumer.shutdown()
        broker.terminate()
