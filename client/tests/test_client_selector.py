"""Message queue selectors: the sharding-key hash is Java's, stable across processes."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import ClientError
from rocketq.client.model import Message
from rocketq.client.producer.selector import (
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
    SelectMessageQueueByRoundRobin,
    java_hash_code,
)
from rocketq.client.remoting.route import MessageQueue

MQS = [MessageQueue("T", "b", i) for i in range(8)]
MSG = Message("T", b"x")


def java_rem(a: int, n: int) -> int:
    """Java's truncating ``%``."""
    r = abs(a) % n
    return -r if a < 0 else r


@pytest.mark.parametrize(
    ("key", "java_hash"),
    [("abc", 96354), ("", 0), ("polygenelubricants", -(2**31)), ("你好", 652829), ("Aa", 2112), ("BB", 2112)],
)
def test_java_string_hash_code(key: str, java_hash: int) -> None:
    assert java_hash_code(key) == java_hash


def test_int_hash_codes_follow_java() -> None:
    assert java_hash_code(42) == 42  # Integer.hashCode
    assert java_hash_code(-7) == -7
    big = 2**40 + 5  # Long.hashCode = (int)(v ^ (v >>> 32))
    assert java_hash_code(big) == (big ^ (big >> 32)) & 0xFFFFFFFF
    assert java_hash_code(True) == 1231


def test_hash_selector_golden_values() -> None:
    select = SelectMessageQueueByHash()
    assert select(MQS, MSG, "abc").queue_id == 96354 % 8 == 2
    assert select(MQS, MSG, "polygenelubricants").queue_id == 0  # Integer.MIN_VALUE % 8 == 0
    assert select(MQS[:3], MSG, -7).queue_id == 1  # Java: -7 % 3 = -1 -> abs -> 1


@given(st.text(max_size=30), st.integers(1, 64))
def test_hash_selector_is_javas_abs_of_remainder(key: str, n: int) -> None:
    queues = [MessageQueue("T", "b", i) for i in range(n)]
    got = SelectMessageQueueByHash()(queues, MSG, key)
    assert got.queue_id == abs(java_rem(reference_hash(key), n))


def reference_hash(s: str) -> int:
    """String.hashCode written out: s[0]*31^(n-1) + ... over UTF-16 code units, int32 wrap."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i : i + 2], "big")) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_hash_selector_defaults_to_the_sharding_key() -> None:
    msg = Message("T", b"x", sharding_key="abc")
    assert SelectMessageQueueByHash()(MQS, msg, None).queue_id == 2
    with pytest.raises(ClientError):
        SelectMessageQueueByHash()(MQS, MSG, None)
    with pytest.raises(ClientError):
        SelectMessageQueueByHash()(MQS, MSG, 1.5)


def test_round_robin_and_random() -> None:
    rr = SelectMessageQueueByRoundRobin()
    assert [rr(MQS[:3], MSG, None).queue_id for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    rnd = SelectMessageQueueByRandom(random.Random(1))
    assert {rnd(MQS, MSG, None).queue_id for _ in range(200)} == set(range(8))
    with pytest.raises(ClientError):
        rr([], MSG, None)
