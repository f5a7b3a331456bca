"""Timestamp positions: startingTimestamp / startingOffsetsByTimestamp with
startingOffsetsByTimestampStrategy, and a batch read's endingTimestamp / endingOffsetsByTimestamp,
against an in-memory broker that answers SEARCH_OFFSET_BY_TIMESTAMP as RocketMQ does (a time
after every message gives the last message) and pulls with real stored-record bytes."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import pytest

from rocketq.client.model import PullResult, PullStatus
from rocketq.client.remoting.message import encode_stored_message
from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.errors import OptionError
from rocketq.connector.option_positions import TimestampStrategy
from rocketq.connector.options import SourceOptions, parse_source_options
from rocketq.connector.positions import first_stored_at_or_after, resolve_end, resolve_start

ADDR = "127.0.0.1:10911"
NS = "127.0.0.1:9876"


def mq(q: int) -> MessageQueue:
    return MessageQueue("t", "b", q)


class TimedQueues:
    """Queues of topic ``t`` on broker ``b``: per queue, the store times of its messages from
    offset ``mins[q]`` on."""

    timeout_ms = 1000

    def __init__(self, times: dict[int, list[int]], mins: dict[int, int] | None = None) -> None:
        self.times = times
        self.mins = mins or {q: 0 for q in times}
        self.pulls = 0

    def discover(
        self, topics: Iterable[str], pattern: str | None, *, missing_ok: bool
    ) -> dict[MessageQueue, str]:
        return {mq(q): ADDR for q in sorted(self.times)}

    def min_offset(self, queue: MessageQueue, addr: str) -> int:
        return self.mins[queue.queue_id]

    def max_offset(self, queue: MessageQueue, addr: str) -> int:
        return self.mins[queue.queue_id] + len(self.times[queue.queue_id])

    def search_offset(self, queue: MessageQueue, addr: str, timestamp_ms: int) -> int:
        times, low = self.times[queue.queue_id], self.mins[queue.queue_id]
        if not times:
            return low
        return low + min(bisect.bisect_left(times, timestamp_ms), len(times) - 1)

    def pull(self, queue: MessageQueue, addr: str, offset: int, *, max_nums: int, **_: object) -> PullResult:
        self.pulls += 1
        low, high = self.min_offset(queue, addr), self.max_offset(queue, addr)
        if offset >= high:
            return PullResult(PullStatus.NO_NEW_MSG, offset, low, high)
        records = [
            encode_stored_message(
                topic="t", queue_id=queue.queue_id, born_timestamp=0, born_host=("127.0.0.1", 1),
                store_host=("127.0.0.1", 10911), body=b"x", queue_offset=o,
                store_timestamp=self.times[queue.queue_id][o - low],
            )
            for o in range(offset, min(high, offset + max_nums))
        ]  # fmt: skip
        return PullResult(PullStatus.FOUND, offset + len(records), low, high, body=b"".join(records))


def opts(batch: bool | None = True, **options: str) -> SourceOptions:
    return parse_source_options({"nameServer": NS, "topic": "t", "group": "g", **options}, batch=batch)


def starts(broker: TimedQueues, **options: str) -> dict[int, int]:
    o = opts(True, **options)
    found = resolve_start(broker, o, o.starting, broker.discover([], None, missing_ok=False))  # type: ignore[arg-type]
    return {q.queue_id: v for q, v in found.items()}


def ends(broker: TimedQueues, **options: str) -> dict[int, int]:
    o = opts(True, **options)
    found = resolve_end(broker, o, o.ending, broker.discover([], None, missing_ok=False))  # type: ignore[arg-type]
    return {q.queue_id: v for q, v in found.items()}


# -- options ------------------------------------------------------------------------------------


def test_strategy_option() -> None:
    assert opts(startingTimestamp="5").starting.strategy is TimestampStrategy.ERROR
    o = opts(startingTimestamp="5", startingOffsetsByTimestampStrategy="LATEST")
    assert o.starting.strategy is TimestampStrategy.LATEST
    with pytest.raises(OptionError, match=r"startingOffsetsByTimestampStrategy.*'error' or 'latest'"):
        opts(startingTimestamp="5", startingOffsetsByTimestampStrategy="earliest")


def test_ending_timestamp_options_and_precedence() -> None:
    assert opts(endingTimestamp="100").ending.timestamp_ms == 100
    by = opts(endingOffsetsByTimestamp='{"t": {"b:0": 7}}').ending
    assert by.timestamps is not None and dict(by.timestamps) == {mq(0): 7} and not by.latest
    both = opts(endingTimestamp="100", endingOffsetsByTimestamp='{"t": {"b:0": 7}}', endingOffsets="latest")
    assert both.ending.timestamp_ms == 100 and both.ending.option == "endingTimestamp"
    with pytest.raises(OptionError, match=r"endingTimestamp.*integer"):
        opts(endingTimestamp="soon")
    with pytest.raises(OptionError, match="endingOffsetsByTimestamp"):
        opts(endingOffsetsByTimestamp='{"t": {"b:0": -1}}')


@pytest.mark.parametrize(
    "option, value", [("endingTimestamp", "100"), ("endingOffsetsByTimestamp", '{"t": {"b:0": 7}}')]
)
def test_ending_timestamps_are_refused_for_streams(option: str, value: str) -> None:
    with pytest.raises(OptionError, match=rf"'{option}'.*only applies to batch reads"):
        opts(batch=False, **{option: value})
    assert opts(batch=None, **{option: value})  # schema() time: not yet known


def test_unknown_options_are_still_refused() -> None:
    with pytest.raises(OptionError, match=r"'endingtimestampp'.*unknown source option"):
        opts(endingTimestampp="1")


# -- the search ---------------------------------------------------------------------------------


def test_search_checks_the_stored_time_of_the_last_message() -> None:
    broker = TimedQueues({0: [10, 20, 30]})
    find = first_stored_at_or_after
    assert find(broker, mq(0), ADDR, 5, group="g").offset == 0  # type: ignore[arg-type]
    assert find(broker, mq(0), ADDR, 20, group="g").offset == 1  # type: ignore[arg-type]
    assert find(broker, mq(0), ADDR, 30, group="g").offset == 2  # type: ignore[arg-type]
    after = find(broker, mq(0), ADDR, 31, group="g")  # type: ignore[arg-type]
    assert (after.offset, after.end, after.last_stored_ms) == (None, 3, 30)
    empty = find(TimedQueues({0: []}, {0: 4}), mq(0), ADDR, 1, group="g")  # type: ignore[arg-type]
    assert (empty.offset, empty.end, empty.last_stored_ms) == (None, 4, None)


def test_search_walks_on_when_the_broker_answers_an_older_message() -> None:
    class Older(TimedQueues):
        def search_offset(self, queue: MessageQueue, addr: str, timestamp_ms: int) -> int:
            return 0

    broker = Older({0: [10, 20, 30, 40]})
    assert first_stored_at_or_after(broker, mq(0), ADDR, 35, group="g").offset == 3  # type: ignore[arg-type]


# -- starting positions -------------------------------------------------------------------------


def test_starting_timestamp_between_messages() -> None:
    broker = TimedQueues({0: [10, 20, 30], 1: [15, 25]}, {0: 0, 1: 100})
    assert starts(broker, startingTimestamp="20") == {0: 1, 1: 101}


def test_starting_timestamp_in_the_future_errors_naming_the_queue() -> None:
    broker = TimedQueues({0: [10, 20, 30], 1: [15, 25]})
    with pytest.raises(OptionError) as info:
        starts(broker, startingTimestamp="26")
    text = str(info.value)
    assert "'startingTimestamp'" in text and "t/b:1" in text and "stored at 25" in text
    assert "startingOffsetsByTimestampStrategy=latest" in text


def test_starting_timestamp_in_the_future_with_latest_starts_at_the_end() -> None:
    broker = TimedQueues({0: [10, 20, 30], 1: [15, 25]}, {0: 0, 1: 7})
    assert starts(broker, startingTimestamp="26", startingOffsetsByTimestampStrategy="latest") == {0: 2, 1: 9}
    assert starts(broker, startingTimestamp="999", startingOffsetsByTimestampStrategy="latest") == {
        0: 3,
        1: 9,
    }


def test_empty_queue_has_no_message_after_any_time() -> None:
    broker = TimedQueues({0: [10], 1: []}, {0: 0, 1: 5})
    with pytest.raises(OptionError, match=r"t/b:1 has no message.*it holds no message"):
        starts(broker, startingTimestamp="1")
    assert starts(broker, startingTimestamp="1", startingOffsetsByTimestampStrategy="latest") == {0: 0, 1: 5}


def test_starting_offsets_by_timestamp_uses_the_strategy_too() -> None:
    broker = TimedQueues({0: [10, 20, 30], 1: [15, 25]})
    spec = '{"t": {"b:0": 20, "b:1": 99}}'
    with pytest.raises(OptionError, match=r"'startingOffsetsByTimestamp'.*t/b:1"):
        starts(broker, startingOffsetsByTimestamp=spec)
    latest = starts(broker, startingOffsetsByTimestamp=spec, startingOffsetsByTimestampStrategy="latest")
    assert latest == {0: 1, 1: 2}
    assert starts(broker, startingOffsetsByTimestamp='{"t": {"b:0": 20}}') == {
        0: 1,
        1: 0,
    }  # unlisted: earliest


# -- ending positions ---------------------------------------------------------------------------


def test_ending_timestamp_is_exclusive() -> None:
    broker = TimedQueues({0: [10, 20, 20, 30], 1: [25]})
    assert ends(broker, endingTimestamp="20") == {0: 1, 1: 0}
    assert ends(broker, endingTimestamp="21") == {0: 3, 1: 0}


def test_ending_timestamp_after_the_last_message_ends_at_the_queue_end() -> None:
    broker = TimedQueues({0: [10, 20, 30], 1: [25], 2: []}, {0: 0, 1: 4, 2: 9})
    assert ends(broker, endingTimestamp="30") == {0: 2, 1: 5, 2: 9}
    assert ends(broker, endingTimestamp="31") == {0: 3, 1: 5, 2: 9}
    assert ends(broker, endingTimestamp="5") == {0: 0, 1: 4, 2: 9}


def test_ending_offsets_by_timestamp_per_queue_and_unlisted_at_latest() -> None:
    broker = TimedQueues({0: [10, 20, 30], 1: [15, 25]})
    assert ends(broker, endingOffsetsByTimestamp='{"t": {"b:0": 15}}') == {0: 1, 1: 2}
    with pytest.raises(OptionError, match=r"'endingOffsetsByTimestamp'.*queue t/b:7 does not exist"):
        ends(broker, endingOffsetsByTimestamp='{"t": {"b:7": 15}}')


def test_a_batch_start_after_its_end_is_refused() -> None:
    from rocketq.client.remoting.vocabulary import MessageQueue
    from rocketq.connector.source import check_start_before_end

    q0, q1 = MessageQueue("t", "b", 0), MessageQueue("t", "b", 1)
    check_start_before_end({q0: 3, q1: 5}, {q0: 3, q1: 9})  # empty and non-empty ranges are fine
    with pytest.raises(OptionError, match=r"t/b:1 starts at offset 6, after its ending offset 5"):
        check_start_before_end({q0: 0, q1: 6}, {q0: 3, q1: 5})
