"""Ordered load for the chaos tests: per-key sender loops, a reading consumer, and the check that
no acknowledged message is lost or replaced and each key's messages stay in order.

:func:`send_key` is a :class:`~rocketq.client.testing.chaos.Load` loop (bind it with
``functools.partial``): it sends one key's messages through a hash selector, so they go to one
queue, and numbers them; the number moves on only at SEND_OK, so along a queue a key's stored
numbers must rise.  :func:`check_acked_stored` compares the :class:`~.chaos.Ledger`'s
acknowledged sends with what a broker holds (the test reads the queues its own way).
:class:`Reader` is a push consumer of the topic that collects the UNIQ_KEYs it read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from rocketq.client.config import ClientConfig, ConsumeFromWhere
from rocketq.client.consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketq.client.model import Message, MessageExt, SendStatus
from rocketq.client.producer import Producer
from rocketq.client.producer.selector import SelectMessageQueueByHash
from rocketq.client.testing.chaos import SEND_ERRORS, Acked, Ledger, broker_port

__all__ = ["Reader", "check_acked_stored", "send_key"]


def send_key(
    producer: Producer,
    topic: str,
    key: str,
    ledger: Ledger,
    stop: threading.Event,
    *,
    body_size: int = 100,
    use_async: bool = False,
    max_s: float = 1800.0,
) -> None:
    """Send ``key``'s messages in order until ``stop`` (at most ``max_s``); the sequence number
    moves on only at SEND_OK.  ``use_async`` sends with ``send_async`` and waits for its future
    before the next one.  Each answer goes into ``ledger``; a raised or refused send counts failed."""
    selector = SelectMessageQueueByHash()
    seq = attempt = 0
    deadline = time.monotonic() + max_s
    while not stop.is_set() and time.monotonic() < deadline:
        attempt += 1
        body = f"{key}:{seq}:{attempt}:".encode().ljust(body_size, b".")
        msg = Message(topic, body, keys=[key])
        sent_at = time.monotonic()
        try:
            if use_async:
                result = producer.send_async(msg, selector=selector, arg=key).result(60)
            else:
                result = producer.send(msg, selector=selector, arg=key)
        except SEND_ERRORS as exc:
            ledger.add_failed(reason=exc)
            time.sleep(0.05)
            continue
        if result.send_status is not SendStatus.SEND_OK:
            ledger.add_failed(reason=result.send_status)
            continue
        mq = result.message_queue
        ledger.add(
            Acked(result.msg_id, result.send_status, mq.queue_id, result.queue_offset, body,
                  broker_port(result.offset_msg_id), sent_at, time.monotonic(), key, seq)
        )  # fmt: skip
        seq += 1


def check_acked_stored(
    acked: list[Acked], stored: Mapping[tuple[int, int], MessageExt], keys: Iterable[str], what: str = ""
) -> None:
    """Assert that no two acknowledged sends name one (queue, offset), that every acknowledged
    message is stored at its place (same UNIQ_KEY and body: 0 lost, 0 replaced), and that each of
    ``keys`` went to one queue with its sequence numbers rising.  ``what`` is added to failures
    (e.g. the seed)."""
    places: dict[tuple[int, int], Acked] = {}
    for a in acked:
        other = places.setdefault((a.queue_id, a.queue_offset), a)
        assert other is a, (
            f"two acknowledged sends name queue offset {a.queue_id}/{a.queue_offset}: {other}, {a}"
        )
    wrong = [
        (place, a.body[:24], None if m is None else (m.msg_id, m.body[:24]))
        for place, a in places.items()
        if (m := stored.get(place)) is None or m.msg_id != a.msg_id or m.body != a.body
    ]
    assert not wrong, (
        f"{len(wrong)} of {len(acked)} acknowledged messages lost or replaced {what}: {wrong[:5]}"
    )
    for key in keys:
        mine = sorted((a for a in acked if a.key == key), key=lambda a: (a.queue_id, a.queue_offset))
        assert len({a.queue_id for a in mine}) <= 1, f"{key} went to several queues {what}"
        seqs = [a.seq for a in mine]
        assert seqs == sorted(set(seqs)), (
            f"{key}: sequence numbers out of order along the queue {what}: {seqs[:50]}"
        )


class Reader:
    """A push consumer of ``topic`` (from the first offset), collecting the UNIQ_KEYs it read."""

    def __init__(self, namesrv_addr: str, topic: str, group: str, client: ClientConfig) -> None:
        self._consumed: set[str] = set()
        self._lock = threading.Lock()
        self.consumer = PushConsumer(
            namesrv_addr, consumer_group=group, client=client, rebalance_interval_ms=1000,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        self.consumer.subscribe(topic, "*")
        self.consumer.register_message_listener(self._on_messages)
        self.consumer.start()

    def _on_messages(self, msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with self._lock:
            self._consumed.update(m.msg_id for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def consumed_ids(self) -> set[str]:
        with self._lock:
            return set(self._consumed)

    def missing(self, wanted: set[str], quiet_s: float = 20.0, max_s: float = 180.0) -> set[str]:
        """The ``wanted`` ids not read once all are read, nothing new came for ``quiet_s``, or
        ``max_s`` passed."""
        seen = self.consumed_ids()
        last_change, deadline = time.monotonic(), time.monotonic() + max_s
        while not wanted <= seen and time.monotonic() - last_change < quiet_s and time.monotonic() < deadline:
            time.sleep(0.5)
            now = self.consumed_ids()
            if len(now) != len(seen):
                seen, last_change = now, time.monotonic()
        return wanted - seen

    def close(self) -> None:
        self.consumer.shutdown()
