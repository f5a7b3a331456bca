"""Producer queue choice: round-robin over a topic's writable queues, with latency fault tolerance.

:class:`TopicPublishInfo` is the producer's view of one topic's route: the master queues of every
writable broker, expanded from ``writeQueueNums`` in broker-name order, and a round-robin counter
that starts at a random value (as Java's ``ThreadLocalIndex``).

:class:`LatencyFaultTolerance` remembers, per broker name, the latency of the last send and until
when the broker should be avoided.  :class:`MQFaultStrategy` maps a send latency to a
not-available duration with RocketMQ's table (``sendLatencyFaultEnable``)::

    latency >=   50   100   550  1000   2000   3000   15000  ms
    avoid for     0     0   30s   60s   120s   180s    600s

A failed send counts as 30 000 ms when the failure isolates the broker (a transport error), so a
broker that refused a connection is avoided for 10 minutes unless every broker is faulty.  The
queue choice follows ``MQFaultStrategy.selectOneMessageQueue`` of 4.9.x: take the next queue
whose broker is available (and on a retry, not the broker that just failed); if none is, pick
the least-bad broker (``pickOneAtLeast``); else plain round-robin.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rocketq.client.config import LATENCY_MAX_MS, NOT_AVAILABLE_DURATION_MS
from rocketq.client.remoting.route import MessageQueue, TopicRouteData

__all__ = ["FaultItem", "LatencyFaultTolerance", "MQFaultStrategy", "TopicPublishInfo"]

Clock = Callable[[], int]

ISOLATION_LATENCY_MS = 30_000


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class _Counter:
    """A thread-safe incrementing index starting at a random non-negative value."""

    def __init__(self, start: int | None = None) -> None:
        self._it = itertools.count(random.randrange(1 << 20) if start is None else start)
        self._lock = threading.Lock()

    def get_and_increment(self) -> int:
        with self._lock:
            return next(self._it)


@dataclass(frozen=True, slots=True)
class TopicPublishInfo:
    """The writable message queues of one topic, for the producer."""

    topic: str
    message_queues: tuple[MessageQueue, ...]
    order_topic: bool
    route: TopicRouteData | None
    send_which_queue: _Counter
    from_template: bool = False  # built from the TBW102 route: the topic is not registered yet

    @classmethod
    def from_route(cls, topic: str, route: TopicRouteData, *, start: int | None = None) -> TopicPublishInfo:
        """Java ``topicRouteData2TopicPublishInfo``: masters only, brokers sorted by name."""
        mqs = route.writable_queues(topic)
        return cls(topic, tuple(mqs), bool(route.order_topic_conf), route, _Counter(start))

    def ok(self) -> bool:
        return bool(self.message_queues)

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round-robin; on a retry, skip queues of ``last_broker_name`` if another broker exists."""
        mqs = self.message_queues
        index = self.send_which_queue.get_and_increment()
        if last_broker_name is not None:
            for i in range(len(mqs)):
                mq = mqs[(index + i) % len(mqs)]
                if mq.broker_name != last_broker_name:
                    return mq
            index = self.send_which_queue.get_and_increment()
        return mqs[index % len(mqs)]

    def write_queue_nums_of(self, broker_name: str) -> int:
        """``getQueueIdByBroker``: the broker's writeQueueNums in this route, -1 if absent."""
        if self.route is not None:
            for qd in self.route.queue_datas:
                if qd.broker_name == broker_name:
                    return qd.write_queue_nums
        return -1


@dataclass(slots=True)
class FaultItem:
    """Latency record of one broker: avoid it until ``start_timestamp_ms``."""

    name: str
    current_latency_ms: int
    start_timestamp_ms: int

    def is_available(self, now_ms: int) -> bool:
        return now_ms - self.start_timestamp_ms >= 0

    def sort_key(self, now_ms: int) -> tuple[int, int, int]:
        """Java FaultItem.compareTo: available first, then lower latency, then earlier recovery."""
        return (0 if self.is_available(now_ms) else 1, self.current_latency_ms, self.start_timestamp_ms)


class LatencyFaultTolerance:
    """Per-broker fault table (Java ``LatencyFaultToleranceImpl``)."""

    def __init__(self, clock: Clock = _now_ms) -> None:
        self._items: dict[str, FaultItem] = {}
        self._clock = clock
        self._which_item_worst = _Counter()

    def update_fault_item(self, name: str, current_latency_ms: int, not_available_duration_ms: int) -> None:
        start = self._clock() + not_available_duration_ms
        item = self._items.get(name)
        if item is None:
            self._items[name] = FaultItem(name, current_latency_ms, start)
        else:
            item.current_latency_ms = current_latency_ms
            item.start_timestamp_ms = start

    def is_available(self, name: str) -> bool:
        item = self._items.get(name)
        return item is None or item.is_available(self._clock())

    def remove(self, name: str) -> None:
        self._items.pop(name, None)

    def items(self) -> list[FaultItem]:
        return list(self._items.values())

    def pick_one_at_least(self) -> str | None:
        """A broker to try when all are faulty: one of the better half, rotating."""
        now = self._clock()
        ranked = sorted(self._items.values(), key=lambda it: it.sort_key(now))
        if not ranked:
            return None
        half = len(ranked) // 2
        if half <= 0:
            return ranked[0].name
        return ranked[self._which_item_worst.get_and_increment() % half].name


class MQFaultStrategy:
    """Queue selection with optional latency fault avoidance (``send_latency_fault_enable``)."""

    def __init__(
        self,
        *,
        enabled: bool = False,
        latency_max_ms: Sequence[int] = LATENCY_MAX_MS,
        not_available_duration_ms: Sequence[int] = NOT_AVAILABLE_DURATION_MS,
        clock: Clock = _now_ms,
    ) -> None:
        self.enabled = enabled
        self.latency_max_ms = tuple(latency_max_ms)
        self.not_available_duration_ms = tuple(not_available_duration_ms)
        self.fault_tolerance = LatencyFaultTolerance(clock)

    def compute_not_available_duration(self, current_latency_ms: int) -> int:
        for limit, duration in zip(
            reversed(self.latency_max_ms), reversed(self.not_available_duration_ms), strict=True
        ):
            if current_latency_ms >= limit:
                return duration
        return 0

    def update_fault_item(self, broker_name: str, current_latency_ms: int, isolation: bool) -> None:
        if self.enabled:
            latency = ISOLATION_LATENCY_MS if isolation else current_latency_ms
            duration = self.compute_not_available_duration(latency)
            self.fault_tolerance.update_fault_item(broker_name, current_latency_ms, duration)

    def forget(self, broker_name: str) -> None:
        """Drop ``broker_name``'s fault record (its master changed: the record was the old one's)."""
        self.fault_tolerance.remove(broker_name)

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        if not self.enabled:
            return info.select_one_message_queue(last_broker_name)
        mqs = info.message_queues
        index = info.send_which_queue.get_and_increment()
        for i in range(len(mqs)):
            mq = mqs[(index + i) % len(mqs)]
            if self.fault_tolerance.is_available(mq.broker_name) and (
                last_broker_name is None or mq.broker_name != last_broker_name
            ):
                return mq
        not_best = self.fault_tolerance.pick_one_at_least()
        if not_best is not None:
            write_queue_nums = info.write_queue_nums_of(not_best)
            if write_queue_nums > 0:
                queue_id = info.send_which_queue.get_and_increment() % write_queue_nums
                return MessageQueue(info.topic, not_best, queue_id)
            self.fault_tolerance.remove(not_best)
        return info.select_one_message_queue(last_broker_name)
