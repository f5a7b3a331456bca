"""Consumer lag per (group, topic): RocketMQ 5's ConsumerLagCalculator arithmetic.

For every queue of the topic where the group has a committed offset ``commit`` (queues it never
committed are skipped: there is no position to measure from), with ``max`` the queue's max offset
and ``pull`` the next offset of the group's last pull on this broker (``commit`` if it never
pulled here since boot):

* lag messages  = max - commit   (stored, not yet acknowledged)
* in-flight     = pull - commit  (pulled, not yet acknowledged)
* ready         = max - pull     (stored, not yet pulled)
* lag latency   = now - store time of the earliest unacknowledged message (over the queues)
* queueing latency = now - store time of the earliest message not yet pulled

The sums over the queues give one row per (group, topic).  Store reads only (thread-safe), no
broker tables: the caller passes a :class:`GroupTopic` copy taken on the broker's loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

__all__ = ["GroupTopic", "LagRow", "QueueReader", "calculate_lag"]


class QueueReader(Protocol):
    """What the calculation reads from the store (``MessageStore`` has these)."""

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int: ...


@dataclass(frozen=True, slots=True)
class GroupTopic:
    """One group's progress on one topic, copied from the broker's tables."""

    group: str
    topic: str
    queue_nums: int
    committed: Mapping[int, int]
    pulled: Mapping[int, int]


@dataclass(frozen=True, slots=True)
class LagRow:
    group: str
    topic: str
    lag_messages: int
    lag_latency_ms: int
    inflight_messages: int
    ready_messages: int
    queueing_latency_ms: int


def calculate_lag(store: QueueReader, items: Iterable[GroupTopic], now_ms: int) -> Iterator[LagRow]:
    """One :class:`LagRow` per item that has at least one committed queue."""
    for item in items:
        lag = inflight = ready = 0
        earliest_unacked = earliest_unpulled = 0
        measured = False
        queue_ids = set(range(item.queue_nums)) | set(item.committed)
        for queue_id in sorted(queue_ids):
            commit = item.committed.get(queue_id, -1)
            if commit < 0:
                continue
            measured = True
            max_offset = max(int(store.get_max_offset_in_queue(item.topic, queue_id)), 0)
            pull = min(max(item.pulled.get(queue_id, commit), commit), max(max_offset, commit))
            lag += max(max_offset - commit, 0)
            inflight += pull - commit
            ready += max(max_offset - pull, 0)
            if commit < max_offset:
                earliest_unacked = _earliest(
                    earliest_unacked, store.get_store_time(item.topic, queue_id, commit)
                )
            if pull < max_offset:
                earliest_unpulled = _earliest(
                    earliest_unpulled, store.get_store_time(item.topic, queue_id, pull)
                )
        if not measured:
            continue
        yield LagRow(
            group=item.group,
            topic=item.topic,
            lag_messages=lag,
            lag_latency_ms=max(now_ms - earliest_unacked, 0) if earliest_unacked else 0,
            inflight_messages=inflight,
            ready_messages=ready,
            queueing_latency_ms=max(now_ms - earliest_unpulled, 0) if earliest_unpulled else 0,
        )


def _earliest(current: int, timestamp: int) -> int:
    if timestamp <= 0:  # deleted or unknown: says nothing about the time
        return current
    return timestamp if current == 0 else min(current, timestamp)
