"""Driver-side stream reader logic with an in-memory stand-in for the broker (no Spark needed)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from rocketq.connector.errors import DataLossError
from rocketq.connector.planning import RocketMQInputPartition
from rocketq.connector.testing import InMemoryQueues, stream_reader

ADDR = "127.0.0.1:10911"


def test_initial_offset_is_memoised() -> None:
    access = InMemoryQueues({0: 5, 1: 7})
    r = stream_reader(access)  # latest
    first = r.initialOffset()
    access.maxes[0] = 99
    assert r.initialOffset() == first == {"t": {"b:0": 5, "b:1": 7}}


def test_idle_returns_start_object_unchanged() -> None:
    access = InMemoryQueues({0: 5, 1: 7})
    r = stream_reader(access, startingOffsets="earliest")
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"b:0": 5, "b:1": 7}}
    assert r.latestOffset(end, ReadAllAvailable()) is end
    assert r.reportLatestOffset() == {"t": {"b:0": 5, "b:1": 7}}


def test_read_limit_and_partitions() -> None:
    access = InMemoryQueues({0: 30, 1: 10})
    r = stream_reader(access, startingOffsets="earliest", maxMessagesPerTrigger="8")
    assert r.getDefaultReadLimit() == ReadMaxRows(8)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadMaxRows(8))
    assert end == {"t": {"b:0": 6, "b:1": 2}}
    parts = r.partitions(start, end)
    assert [(x.queue_id, x.start, x.end) for p in parts for x in p.ranges] == [(0, 0, 6), (1, 0, 2)]
    assert r.partitions(end, end) == []
    executor_copy = pickle.loads(pickle.dumps(r))
    assert executor_copy._access is None and executor_copy.opts == r.opts
    assert isinstance(parts[0], RocketMQInputPartition)


def test_available_now_never_passes_its_snapshot() -> None:
    access = InMemoryQueues({0: 10})
    r = stream_reader(access, startingOffsets="earliest", maxMessagesPerTrigger="4")
    start = r.initialOffset()
    r.prepareForTriggerAvailableNow()
    access.maxes[0] = 1000
    offsets = [start]
    while True:
        nxt = r.latestOffset(offsets[-1], ReadMaxRows(4))
        if nxt is offsets[-1]:
            break
        offsets.append(nxt)
    assert [o["t"]["b:0"] for o in offsets] == [0, 4, 8, 10]
    assert access.committed[("g", 0)] == 10  # the last batch is committed although Spark never says so


def test_min_messages_wait_for_more_or_the_delay() -> None:
    access = InMemoryQueues({0: 3})
    r = stream_reader(access, startingOffsets="earliest", minMessagesPerTrigger="5", maxTriggerDelay="1h")
    start = r.initialOffset()
    assert r.latestOffset(start, ReadAllAvailable()) is start
    access.maxes[0] = 6
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"b:0": 6}}
    impatient = stream_reader(
        InMemoryQueues({0: 1}), startingOffsets="earliest", minMessagesPerTrigger="5", maxTriggerDelay="0"
    )
    s = impatient.initialOffset()
    assert impatient.latestOffset(s, ReadAllAvailable()) == {"t": {"b:0": 1}}


def test_new_queue_joins_at_earliest() -> None:
    access = InMemoryQueues({0: 4})
    r = stream_reader(
        access, failOnDataLoss="false"
    )  # a new queue above 0 is data loss: test_connector_data_loss
    start = r.initialOffset()
    access.maxes[1] = 6
    access.mins[1] = 2
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"b:0": 4, "b:1": 6}}
    assert [(x.queue_id, x.start, x.end) for p in r.partitions(start, end) for x in p.ranges] == [(1, 2, 6)]


@pytest.mark.parametrize("fail", ["true", "false"])
def test_vanished_queue(fail: str) -> None:
    access = InMemoryQueues({0: 4, 1: 4})
    r = stream_reader(access, failOnDataLoss=fail)
    start: dict[str, Any] = r.initialOffset()
    del access.maxes[1]
    if fail == "true":
        with pytest.raises(DataLossError, match="b:1"):
            r.latestOffset(start, ReadAllAvailable())
    else:
        assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"b:0": 4}}
