"""Unit tests of the canonical offset model and of admission control arithmetic."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.remoting.vocabulary import MessageQueue
from rocketq.connector.offsets import OffsetMap, parse_queue_key
from rocketq.connector.positions import limit_offsets

queue_refs = st.builds(
    MessageQueue,
    st.sampled_from(["t1", "t2", "orders"]),
    st.sampled_from(["broker-a", "broker-b"]),
    st.integers(0, 40),
)


@given(st.dictionaries(queue_refs, st.integers(0, 2**40), max_size=30))
def test_json_round_trip_is_canonical(items: dict[MessageQueue, int]) -> None:
    m = OffsetMap(items)
    text = json.dumps(m.to_json_dict())
    back = OffsetMap.from_json_dict(json.loads(text))
    assert back == m
    # whatever order the input had, the JSON Spark stores is identical
    assert json.dumps(OffsetMap(dict(reversed(list(items.items())))).to_json_dict()) == text


def test_queue_order_is_numeric() -> None:
    m = OffsetMap({MessageQueue("t", "b", 10): 1, MessageQueue("t", "b", 2): 2, MessageQueue("a", "b", 0): 3})
    assert m.to_json() == '{"a":{"b:0":3},"t":{"b:2":2,"b:10":1}}'


@pytest.mark.parametrize(
    "bad", [[1], {"t": 3}, {"t": {"nocolon": 1}}, {"t": {"b:x": 1}}, {"t": {"b:1": -1}}, {"t": {"b:1": True}}]
)
def test_malformed_offsets(bad: object) -> None:
    with pytest.raises(ValueError):
        OffsetMap.from_json_dict(bad)


def test_queue_key_parse() -> None:
    assert parse_queue_key("t", "broker-a:7") == MessageQueue("t", "broker-a", 7)
    assert parse_queue_key("t", "host:1:7").broker_name == "host:1"


def q(i: int) -> MessageQueue:
    return MessageQueue("t", "b", i)


def test_limit_is_proportional_and_exact() -> None:
    bases = {q(0): 0, q(1): 100, q(2): 5}
    latest = {q(0): 900, q(1): 200, q(2): 5}
    end = limit_offsets(bases, latest, 100)
    taken = {k: end[k] - bases[k] for k in bases}
    assert sum(taken.values()) == 100
    assert taken[q(2)] == 0
    assert taken[q(0)] == 90 and taken[q(1)] == 10


def test_limit_small_budget_many_queues_still_progresses() -> None:
    bases = {q(i): 0 for i in range(10)}
    latest = {q(i): 3 for i in range(10)}
    end = limit_offsets(bases, latest, 4)
    assert sum(end.values()) == 4
    assert all(v <= 3 for v in end.values())


def test_no_limit_reads_everything() -> None:
    bases = {q(0): 4}
    assert limit_offsets(bases, {q(0): 9}, None) == {q(0): 9}
    assert limit_offsets(bases, {q(0): 9}, 100) == {q(0): 9}
    assert limit_offsets(bases, {q(0): 2}, 100) == {q(0): 4}  # never backwards


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=12),
    st.integers(1, 3000),
)
def test_limit_properties(pairs: list[tuple[int, int]], budget: int) -> None:
    bases = {q(i): b for i, (b, _) in enumerate(pairs)}
    latest = {q(i): b + a for i, (b, a) in enumerate(pairs)}
    end = limit_offsets(bases, latest, budget)
    total_avail = sum(a for _, a in pairs)
    assert sum(end[k] - bases[k] for k in bases) == min(budget, total_avail)
    assert all(bases[k] <= end[k] <= latest[k] for k in bases)
    assert end == limit_offsets(dict(reversed(list(bases.items()))), latest, budget)
