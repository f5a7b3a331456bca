"""Unit tests of partition planning."""

from __future__ import annotations

import itertools
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.connector.planning import QueueRange, RocketMQInputPartition, plan_partitions, split_range


def rng(queue: int, start: int, end: int, broker: str = "b") -> QueueRange:
    return QueueRange("t", broker, queue, "127.0.0.1:1", start, end)


def test_empty_ranges_make_no_tasks() -> None:
    assert plan_partitions([rng(0, 5, 5), rng(1, 7, 7)], min_partitions=None, max_partitions=4) == []


def test_one_partition_per_range_when_few() -> None:
    parts = plan_partitions([rng(1, 0, 10), rng(0, 0, 5)], min_partitions=None, max_partitions=4)
    assert [p.ranges for p in parts] == [(rng(0, 0, 5),), (rng(1, 0, 10),)]


def test_many_queues_grouped_into_max_partitions() -> None:
    ranges = [rng(i, 0, 1 + i % 7) for i in range(300)]
    parts = plan_partitions(ranges, min_partitions=None, max_partitions=4)
    assert len(parts) == 4
    assert sorted(r for p in parts for r in p.ranges) == sorted(ranges)
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 7  # balanced


def test_min_partitions_splits_large_ranges_contiguously() -> None:
    parts = plan_partitions([rng(0, 100, 1100), rng(1, 0, 10)], min_partitions=8, max_partitions=16)
    pieces = sorted((r for p in parts for r in p.ranges if r.queue_id == 0), key=lambda r: r.start)
    assert len(pieces) >= 7
    assert pieces[0].start == 100 and pieces[-1].end == 1100
    assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
    assert len(parts) >= 8


def test_split_range_exact() -> None:
    pieces = split_range(rng(0, 0, 10), 3)
    assert [(r.start, r.end) for r in pieces] == [(0, 4), (4, 7), (7, 10)]


def test_partition_pickles_small() -> None:
    p = RocketMQInputPartition((rng(0, 0, 10), rng(1, 3, 4)))
    data = pickle.dumps(p)
    assert pickle.loads(data) == p
    assert len(data) < 600


@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 500)), max_size=60),
    st.integers(1, 9),
    st.integers(0, 12),
)
def test_plan_covers_every_offset_once(spans: list[tuple[int, int]], max_parts: int, min_parts: int) -> None:
    ranges = [rng(i, s, s + n) for i, (s, n) in enumerate(spans)]
    plan = plan_partitions(ranges, min_partitions=min_parts or None, max_partitions=max(max_parts, min_parts))
    covered = sorted((r.queue_id, o) for p in plan for r in p.ranges for o in range(r.start, r.end))
    expected = sorted((r.queue_id, o) for r in ranges for o in range(r.start, r.end))
    assert covered == expected
    assert len(plan) <= max(max_parts, min_parts)
    again = plan_partitions(
        list(reversed(ranges)), min_partitions=min_parts or None, max_partitions=max(max_parts, min_parts)
    )
    assert again == plan  # deterministic


def test_partitions_carry_the_drivers_group_to_the_executors() -> None:
    parts = plan_partitions([rng(0, 0, 10), rng(1, 0, 5)], min_partitions=None, max_partitions=1, group="g-1")
    assert [p.group for p in parts] == ["g-1"]
    assert pickle.loads(pickle.dumps(parts[0])).group == "g-1"
    assert plan_partitions([rng(0, 0, 3)], min_partitions=None, max_partitions=None)[0].group is None


def test_executor_reads_name_the_partitions_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark builds the executors' reader apart from the driver's: a generated group differs
    there, and the pulls must name the driver's group the partition carries."""
    from rocketq.connector import reader
    from rocketq.connector.options import SourceOptions, parse_source_options

    seen: list[str] = []

    class Puller:
        def __init__(self, access: object, opts: SourceOptions) -> None:
            seen.append(opts.group)

        def close(self) -> None:
            pass

    monkeypatch.setattr(reader, "executor_access", lambda *a, **k: None)
    monkeypatch.setattr(reader, "_Puller", Puller)
    opts = parse_source_options({"nameServer": "127.0.0.1:1", "topic": "t"})
    assert opts.group != "driver-group"
    list(reader.read_partition(opts, RocketMQInputPartition((), "driver-group")))
    list(reader.read_partition(opts, RocketMQInputPartition(())))
    assert seen == ["driver-group", opts.group]


def test_small_ranges_share_a_task_up_to_one_pull() -> None:
    # a small micro-batch over many queues: one task, not one per queue (a Python task costs far
    # more than a pull); ranges of a pull or more keep their own task, queue order is kept
    small = [rng(i, 0, 10 + i) for i in range(12)]
    parts = plan_partitions(small, min_partitions=None, max_partitions=None, pack_messages=8192)
    assert [p.ranges for p in parts] == [tuple(small)]
    mixed = [rng(0, 0, 5000), rng(1, 0, 4000), rng(2, 0, 9000), rng(3, 0, 10), rng(4, 0, 20)]
    parts = plan_partitions(mixed, min_partitions=None, max_partitions=None, pack_messages=8192)
    assert [p.ranges for p in parts] == [(mixed[0],), (mixed[1],), (mixed[2],), (mixed[3], mixed[4])]
    assert all(p.size <= 8192 or len(p.ranges) == 1 for p in parts)
    # minPartitions asks for parallelism: no packing then; maxPartitions keeps its own grouping
    assert len(plan_partitions(small, min_partitions=12, max_partitions=None, pack_messages=8192)) >= 12
    assert len(plan_partitions(small, min_partitions=None, max_partitions=3, pack_messages=8192)) == 3
