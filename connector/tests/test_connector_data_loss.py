"""failOnDataLoss, case by case: the driver's checks (stream reader against an in-memory stand-in
for the broker's queue offsets) and the executor's (read_range against scripted pull answers)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from rocketq.client.model import PullResult, PullStatus
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.data_loss import Loss, LossKind
from rocketq.connector.errors import DataLossError
from rocketq.connector.options import parse_source_options
from rocketq.connector.planning import QueueRange
from rocketq.connector.reader import read_range
from rocketq.connector.source import RocketMQStreamReader
from rocketq.connector.testing import InMemoryQueues, stream_reader

ADDR = "127.0.0.1:10911"
TOPIC = "t"


def mq(q: int) -> MessageQueue:
    return MessageQueue(TOPIC, "b", q)


def spans(r: RocketMQStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(x.queue_id, x.start, x.end) for p in r.partitions(start, end) for x in p.ranges]


# -- the message ----------------------------------------------------------------------------------


def test_error_names_topic_broker_queue_offsets_and_what_to_do() -> None:
    loss = Loss(LossKind.OFFSETS_BACKWARDS, mq(3), 120, 5, "max offset", None, 0)
    text = str(loss.error())
    for part in (
        "topic 't'",
        "queue b:3",
        "broker b",
        "queue id 3",
        "expected offset 120",
        "found max offset 5",
    ):
        assert part in text, text
    assert "deleted and recreated" in text
    assert "failOnDataLoss=false" in text and "new checkpointLocation" in text


# -- driver: offsets moving backwards (topic deleted and recreated) -----------------------------


def test_backwards_fails_by_default() -> None:
    queues = InMemoryQueues({0: 10, 1: 4})
    r = stream_reader(queues, startingOffsets="earliest")
    start = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    assert start == {"t": {"b:0": 10, "b:1": 4}}
    queues.recreate(0, 3)  # recreated: offsets restart at 0, three new messages
    with pytest.raises(DataLossError) as info:
        r.latestOffset(start, ReadAllAvailable())
    text = str(info.value)
    assert "queue b:0" in text and "expected offset 10" in text and "found max offset 3" in text


def test_backwards_with_fail_false_warns_and_reads_the_new_queue_from_its_min(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queues = InMemoryQueues({0: 10, 1: 4})
    r = stream_reader(queues, startingOffsets="earliest", failOnDataLoss="false")
    start = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    queues.recreate(0, 3)
    with caplog.at_level(logging.WARNING, "rocketq.connector"):
        end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"b:0": 3, "b:1": 4}}  # the end is below the start: the queue restarted
    assert spans(r, start, end) == [(0, 0, 3)]
    assert (
        "expected offset 10, found max offset 3" in caplog.text and "carrying on at offset 0" in caplog.text
    )
    queues.maxes[0] = 5
    assert spans(r, end, r.latestOffset(end, ReadAllAvailable())) == [(0, 3, 5)]


def test_backwards_replayed_after_a_restart_asks_the_broker_for_the_min() -> None:
    """A batch planned before a driver restart (end below start in the offset log) is read again
    from the queue's min offset, without a latestOffset call to remember it."""
    queues = InMemoryQueues({0: 3})
    queues.mins[0] = 1
    r = stream_reader(queues, failOnDataLoss="false")
    assert spans(r, {"t": {"b:0": 10}}, {"t": {"b:0": 3}}) == [(0, 1, 3)]


def test_backwards_to_an_empty_queue_records_the_restart() -> None:
    queues = InMemoryQueues({0: 10})
    r = stream_reader(queues, startingOffsets="earliest", failOnDataLoss="false", minMessagesPerTrigger="5")
    start = {"t": {"b:0": 10}}
    queues.recreate(0, 0)
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"b:0": 0}} and spans(r, start, end) == []


def test_backwards_respects_the_read_limit() -> None:
    queues = InMemoryQueues({0: 10})
    r = stream_reader(queues, failOnDataLoss="false", maxMessagesPerTrigger="2")
    queues.recreate(0, 5)
    end = r.latestOffset({"t": {"b:0": 10}}, ReadMaxRows(2))
    assert end == {"t": {"b:0": 2}}
    assert spans(r, {"t": {"b:0": 10}}, end) == [(0, 0, 2)]


def test_a_lagging_slave_is_not_loss() -> None:
    """The master is down and its slave (ASYNC replication) lacks the last messages: the queue
    waits for the master instead of restarting."""
    queues = InMemoryQueues({0: 10, 1: 4})
    r = stream_reader(queues)
    start = {"t": {"b:0": 10, "b:1": 4}}
    queues.maxes[0], queues.slave = 8, True
    assert r.latestOffset(start, ReadAllAvailable()) is start
    queues.maxes[1] = 6
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"b:0": 10, "b:1": 6}}


def test_offsets_at_the_max_are_not_loss() -> None:
    queues = InMemoryQueues({0: 10})
    r = stream_reader(queues)
    start = {"t": {"b:0": 10}}
    assert r.latestOffset(start, ReadAllAvailable()) is start


# -- driver: a queue that appears after the query started -------------------------------------


def test_new_queue_starting_at_zero_is_not_loss() -> None:
    queues = InMemoryQueues({0: 4})
    r = stream_reader(queues)
    start = r.initialOffset()
    queues.recreate(1, 6)
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"b:0": 4, "b:1": 6}} and spans(r, start, end) == [(1, 0, 6)]


def test_new_queue_above_zero_fails() -> None:
    queues = InMemoryQueues({0: 4})
    r = stream_reader(queues)
    start = r.initialOffset()
    queues.recreate(1, 6, min_offset=2)
    with pytest.raises(DataLossError) as info:
        r.latestOffset(start, ReadAllAvailable())
    assert "queue b:1" in str(info.value) and "found min offset 2" in str(info.value)
    assert "offsets [0, 2) are lost" in str(info.value)


def test_new_queue_above_zero_with_fail_false_starts_at_its_min(caplog: pytest.LogCaptureFixture) -> None:
    queues = InMemoryQueues({0: 4})
    r = stream_reader(queues, failOnDataLoss="false")
    start = r.initialOffset()
    queues.recreate(1, 6, min_offset=2)
    with caplog.at_level(logging.WARNING, "rocketq.connector"):
        end = r.latestOffset(start, ReadAllAvailable())
    assert spans(r, start, end) == [(1, 2, 6)]
    assert "queue b:1" in caplog.text and "carrying on at offset 2" in caplog.text


def test_queues_known_at_the_start_may_begin_above_zero() -> None:
    queues = InMemoryQueues({0: 9})
    queues.mins[0] = 5  # retention ran before the query started: not loss, earliest is 5
    r = stream_reader(queues, startingOffsets="earliest")
    start = r.initialOffset()
    assert start == {"t": {"b:0": 5}}
    assert spans(r, start, r.latestOffset(start, ReadAllAvailable())) == [(0, 5, 9)]


# -- driver: a queue that disappears --------------------------------------------------------------


def test_vanished_queue_fails_naming_it() -> None:
    queues = InMemoryQueues({0: 4, 1: 7})
    r = stream_reader(queues)
    start = r.initialOffset()
    del queues.maxes[1]
    with pytest.raises(DataLossError) as info:
        r.latestOffset(start, ReadAllAvailable())
    assert "queue b:1" in str(info.value) and "expected offset 7, found no such queue" in str(info.value)


def test_vanished_queue_with_fail_false_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    queues = InMemoryQueues({0: 4, 1: 7})
    r = stream_reader(queues, failOnDataLoss="false")
    start = r.initialOffset()
    del queues.maxes[1]
    with caplog.at_level(logging.WARNING, "rocketq.connector"):
        assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"b:0": 4}}
    assert "the queue is no longer read" in caplog.text


# -- executor: retention and a queue that shrank under a running batch --------------------------


class ScriptedPuller:
    """Answers pulls from a script: one PullResult per call."""

    def __init__(self, answers: list[PullResult]) -> None:
        self.answers = list(answers)
        self.asked: list[int] = []

    def pull(self, r: QueueRange, offset: int) -> PullResult:
        self.asked.append(offset)
        return self.answers.pop(0)

    def prefetch(self, r: QueueRange, offset: int) -> None:
        pass


def answer(status: PullStatus, next_begin: int, min_offset: int, max_offset: int) -> PullResult:
    return PullResult(status, next_begin, min_offset, max_offset)


def read(fail: str, r: QueueRange, answers: list[PullResult]) -> ScriptedPuller:
    opts = parse_source_options({"nameServer": "127.0.0.1:9876", "topic": TOPIC, "failOnDataLoss": fail})
    puller = ScriptedPuller(answers)
    assert list(read_range(puller, opts, r)) == []  # type: ignore[arg-type]
    return puller


def test_retention_passed_the_position_fails() -> None:
    r = QueueRange(TOPIC, "b", 0, ADDR, 2, 9)
    with pytest.raises(DataLossError) as info:
        read("true", r, [answer(PullStatus.OFFSET_ILLEGAL, 12, 12, 20)])
    text = str(info.value)
    assert "expected offset 2, found min offset 12" in text and "offsets [2, 9) are lost" in text


def test_retention_with_fail_false_skips_to_the_min(caplog: pytest.LogCaptureFixture) -> None:
    r = QueueRange(TOPIC, "b", 0, ADDR, 2, 9)
    with caplog.at_level(logging.WARNING, "rocketq.connector"):
        puller = read(
            "false",
            r,
            [answer(PullStatus.NO_MATCHED_MSG, 5, 5, 20), answer(PullStatus.NO_MATCHED_MSG, 9, 5, 20)],
        )
    assert puller.asked == [2, 5]
    assert "offsets [2, 5) are lost" in caplog.text


def test_queue_shrank_under_the_batch_fails() -> None:
    r = QueueRange(TOPIC, "b", 0, ADDR, 7, 9)
    with pytest.raises(DataLossError) as info:
        read("true", r, [answer(PullStatus.OFFSET_ILLEGAL, 3, 0, 3)])
    assert "expected offset 7, found max offset 3" in str(info.value)
    assert "offsets [7, 9) are lost" in str(info.value)


def test_queue_shrank_with_fail_false_ends_the_range(caplog: pytest.LogCaptureFixture) -> None:
    r = QueueRange(TOPIC, "b", 0, ADDR, 7, 9)
    with caplog.at_level(logging.WARNING, "rocketq.connector"):
        puller = read("false", r, [answer(PullStatus.OFFSET_ILLEGAL, 3, 0, 3)])
    assert puller.asked == [7] and "max offset 3" in caplog.text
