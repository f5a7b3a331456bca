"""Partition planning: turning a micro-batch's queue ranges into Spark input partitions.

A micro-batch reads, per ConsumeQueue, the offsets ``[start, end)``.  Planning:

1. drops empty ranges (no task at all for a queue without new messages);
2. with ``minPartitions``, splits large ranges so there are at least that many pieces (pieces
   of one queue stay contiguous and ordered);
3. by default makes one Spark task per piece (Kafka's rule: the Python worker planning a read
   cannot see the cluster's parallelism, so no cap is guessed), except that ranges smaller than
   one pull (``pullBatchSize``) share a task, in queue order, up to one pull's worth of messages:
   a Python task costs some tens of milliseconds, a pull about one, so a small micro-batch over
   many queues (the first one of a new query, a trickle of messages) is one task, not one per
   queue; with ``maxPartitions`` groups the pieces into at most that many tasks, balancing
   message counts (largest piece first into the lightest task); ties are broken by queue order
   so the plan is deterministic for given offsets, which keeps a replayed micro-batch identical.

An :class:`RocketMQInputPartition` carries only plain data (addresses, topic, broker, queue,
offsets), so it pickles small and ``read()`` on an executor needs nothing from the driver.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition


@dataclass(frozen=True, order=True, slots=True)
class QueueRange:
    """Offsets ``[start, end)`` of one ConsumeQueue, and the broker address to pull from."""

    topic: str
    broker_name: str
    queue_id: int
    broker_addr: str
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)

    @property
    def queue_key(self) -> str:
        return f"{self.broker_name}:{self.queue_id}"


@dataclass(frozen=True)
class RocketMQInputPartition(InputPartition):
    """One Spark task: a tuple of queue ranges read one after another."""

    ranges: tuple[QueueRange, ...]
    #: the consumer group the driver planned with (a generated group is made once per query run on
    #: the driver; Spark builds the executors' reader apart from it, so the group travels here)
    group: str | None = None

    def __post_init__(self) -> None:
        # InputPartition.__init__(value) is not called by the dataclass; keep its attribute.
        object.__setattr__(self, "value", None)

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


def split_range(r: QueueRange, pieces: int) -> list[QueueRange]:
    """Split ``r`` into ``pieces`` contiguous ranges of (nearly) equal size."""
    pieces = max(1, min(pieces, r.size))
    step, extra = divmod(r.size, pieces)
    out: list[QueueRange] = []
    start = r.start
    for i in range(pieces):
        end = start + step + (1 if i < extra else 0)
        out.append(QueueRange(r.topic, r.broker_name, r.queue_id, r.broker_addr, start, end))
        start = end
    return out


def split_for_min_partitions(ranges: Sequence[QueueRange], min_partitions: int) -> list[QueueRange]:
    """Kafka's ``minPartitions`` rule: split each range in proportion to its share of the total."""
    total = sum(r.size for r in ranges)
    if total == 0 or len(ranges) >= min_partitions:
        return list(ranges)
    out: list[QueueRange] = []
    for r in ranges:
        pieces = max(1, math.ceil(r.size * min_partitions / total))
        out.extend(split_range(r, pieces))
    return out


def group_ranges(ranges: Sequence[QueueRange], max_partitions: int) -> list[tuple[QueueRange, ...]]:
    """Bin-pack ranges into at most ``max_partitions`` groups with balanced message counts.

    Inside a group, ranges keep queue order (topic, broker, queue, start), so pieces of one
    queue are read in offset order by one task when they share it.
    """
    if len(ranges) <= max_partitions:
        return [(r,) for r in ranges]
    order = sorted(range(len(ranges)), key=lambda i: (-ranges[i].size, i))
    heap: list[tuple[int, int]] = [(0, g) for g in range(max_partitions)]
    members: list[list[int]] = [[] for _ in range(max_partitions)]
    for i in order:
        load, g = heapq.heappop(heap)
        members[g].append(i)
        heapq.heappush(heap, (load + ranges[i].size, g))
    groups = [tuple(ranges[i] for i in sorted(m)) for m in members if m]
    groups.sort(key=lambda g: _sort_key(g[0]))
    return groups


def _sort_key(r: QueueRange) -> tuple[str, str, int, int]:
    return (r.topic, r.broker_name, r.queue_id, r.start)


def pack_small(ranges: Sequence[QueueRange], pack_messages: int) -> list[tuple[QueueRange, ...]]:
    """Consecutive ranges (in the given order) grouped while a group holds at most
    ``pack_messages`` messages; a range of that size or more stays alone."""
    groups: list[tuple[QueueRange, ...]] = []
    current: list[QueueRange] = []
    total = 0
    for r in ranges:
        if current and total + r.size > pack_messages:
            groups.append(tuple(current))
            current, total = [], 0
        current.append(r)
        total += r.size
    if current:
        groups.append(tuple(current))
    return groups


def plan_partitions(
    ranges: Sequence[QueueRange],
    *,
    min_partitions: int | None,
    max_partitions: int | None,
    group: str | None = None,
    pack_messages: int | None = None,
) -> list[RocketMQInputPartition]:
    """The input partitions of one micro-batch (empty ranges dropped; ``max_partitions=None``:
    one partition per range, or with ``pack_messages`` (and no ``min_partitions``) small ranges
    packed up to that many messages per partition), each naming the consumer ``group`` its
    pulls use."""
    live = sorted((r for r in ranges if r.size > 0), key=_sort_key)
    if not live:
        return []
    if min_partitions:
        live = split_for_min_partitions(live, min_partitions)
    if max_partitions is None:
        if pack_messages and not min_partitions:
            return [RocketMQInputPartition(members, group) for members in pack_small(live, pack_messages)]
        return [RocketMQInputPartition((r,), group) for r in live]
    cap = max(max_partitions, min_partitions or 0)
    return [RocketMQInputPartition(members, group) for members in group_ranges(live, cap)]
