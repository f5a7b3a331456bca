"""Rebalance strategies give the Java client's exact assignments."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.config import AllocateStrategy
from rocketq.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash,
    allocate_strategy,
    mq_to_java_string,
)
from rocketq.client.remoting.allocate import md5_hash
from rocketq.client.remoting.route import MessageQueue


def mqs(n: int, brokers: int = 1) -> list[MessageQueue]:
    per = max(1, n // brokers)
    out = [MessageQueue("T", f"broker-{chr(97 + i // per)}", i % per) for i in range(n)]
    return sorted(out)


def cids(n: int) -> list[str]:
    return [f"10.0.0.{i}@pid{i}" for i in range(n)]


def ids(result: list[MessageQueue], all_mqs: list[MessageQueue]) -> list[int]:
    return [all_mqs.index(mq) for mq in result]


@pytest.mark.parametrize(
    ("n_mq", "n_cid", "expected"),
    [
        (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (10, 4, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
        (2, 3, [[0], [1], []]),
        (4, 4, [[0], [1], [2], [3]]),
        (9, 3, [[0, 1, 2], [3, 4, 5], [6, 7, 8]]),
        (5, 2, [[0, 1, 2], [3, 4]]),
    ],
)
def test_averagely_matches_java(n_mq: int, n_cid: int, expected: list[list[int]]) -> None:
    all_mqs, all_cids = mqs(n_mq), cids(n_cid)
    strategy = AllocateMessageQueueAveragely()
    got = [ids(strategy("g", c, all_mqs, all_cids), all_mqs) for c in all_cids]
    assert got == expected


def test_by_circle_matches_java() -> None:
    all_mqs, all_cids = mqs(8), cids(3)
    strategy = AllocateMessageQueueAveragelyByCircle()
    got = [ids(strategy("g", c, all_mqs, all_cids), all_mqs) for c in all_cids]
    assert got == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_unknown_client_gets_nothing() -> None:
    all_mqs = mqs(4)
    for strategy in (
        AllocateMessageQueueAveragely(),
        AllocateMessageQueueAveragelyByCircle(),
        AllocateMessageQueueConsistentHash(),
    ):
        assert strategy("g", "stranger", all_mqs, cids(2)) == []
        assert strategy("g", "c", [], ["c"]) == []


def test_md5_hash_is_first_four_digest_bytes() -> None:
    assert md5_hash("") == 0xD41D8CD9
    key = "10.0.0.1@1-3"
    assert md5_hash(key) == int(hashlib.md5(key.encode()).hexdigest()[:8], 16)


def test_java_to_string_of_message_queue() -> None:
    assert mq_to_java_string(MessageQueue("T", "b", 3)) == "MessageQueue [topic=T, brokerName=b, queueId=3]"


def test_consistent_hash_follows_the_ring() -> None:
    """Each queue goes to the owner of the first virtual node at or after its hash."""
    all_mqs, all_cids = mqs(16, 2), cids(3)
    strategy = AllocateMessageQueueConsistentHash(virtual_node_count=10)
    ring = sorted((md5_hash(f"{c}-{i}"), c) for c in all_cids for i in range(10))
    for cid in all_cids:
        expected = []
        for mq in all_mqs:
            h = md5_hash(mq_to_java_string(mq))
            owner = next((c for k, c in ring if k >= h), ring[0][1])
            if owner == cid:
                expected.append(mq)
        assert strategy("g", cid, all_mqs, all_cids) == expected


@given(st.integers(1, 40), st.integers(1, 12), st.sampled_from(list(AllocateStrategy)))
def test_every_queue_is_assigned_exactly_once(n_mq: int, n_cid: int, which: AllocateStrategy) -> None:
    all_mqs, all_cids = mqs(n_mq), cids(n_cid)
    strategy = allocate_strategy(which)
    shares = [strategy("g", c, all_mqs, all_cids) for c in all_cids]
    flat = [mq for share in shares for mq in share]
    assert sorted(flat) == all_mqs
    if which is not AllocateStrategy.CONSISTENT_HASH:
        sizes = [len(s) for s in shares]
        assert max(sizes) - min(sizes) <= 1
    if which is AllocateStrategy.AVG:
        assert sizes == sorted(sizes, reverse=True)  # the first (mq % cid) consumers get one more
