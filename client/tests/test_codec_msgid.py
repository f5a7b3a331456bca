"""Tests of the offset msgId and UNIQ_KEY ids."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.msgid import (
    UniqKeyGenerator,
    decode_offset_msg_id,
    encode_offset_msg_id,
    new_uniq_key,
    prefix_pid,
    uniq_key_prefix,
    uniq_key_timestamp_ms,
)


def test_offset_msg_id_golden() -> None:
    # 0A000001 = 10.0.0.1, 00002A9F = port 10911, 16 zeros = offset 0
    assert encode_offset_msg_id("10.0.0.1", 10911, 0) == "0A00000100002A9F0000000000000000"
    assert decode_offset_msg_id("0A00000100002A9F0000000000000000") == ("10.0.0.1", 10911, 0)
    assert decode_offset_msg_id("0a00000100002a9f00000000000004d2") == ("10.0.0.1", 10911, 1234)
    v6 = "20010DB800000000000000000000000100002A9F0000000000000064"
    assert encode_offset_msg_id("2001:db8::1", 10911, 100) == v6
    assert decode_offset_msg_id(v6) == ("2001:db8::1", 10911, 100)


@pytest.mark.parametrize(
    "bad", ["", "0A00", "ZZ00000100002A9F0000000000000000", "0A00000100002A9F00000000000000000"]
)
def test_offset_msg_id_bad_input(bad: str) -> None:
    with pytest.raises(MessageFormatError):
        decode_offset_msg_id(bad)
    with pytest.raises(MessageFormatError):
        uniq_key_timestamp_ms(bad)


def test_bad_host() -> None:
    with pytest.raises(MessageFormatError):
        encode_offset_msg_id("broker-a.local", 10911, 0)


@given(st.ip_addresses().map(str), st.integers(0, 65535), st.integers(0, 2**63 - 1))
def test_offset_msg_id_roundtrip(ip: str, port: int, offset: int) -> None:
    msg_id = encode_offset_msg_id(ip, port, offset)
    assert msg_id == msg_id.upper() and len(msg_id) in (32, 56)
    assert decode_offset_msg_id(msg_id) == (ip, port, offset)


def _month_start_ms(now_ms: int) -> int:
    now = dt.datetime.fromtimestamp(now_ms / 1000)
    return int(now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp() * 1000)


def test_uniq_key_layout() -> None:
    gen = UniqKeyGenerator("10.0.0.5", pid=0x12345, seed=1)
    now = _month_start_ms(1700000000000) + 0x01020304
    first, second = gen.next_id(now), gen.next_id(now)
    assert len(first) == 32 and first == first.upper()
    assert first[:8] == "0A000005" and first[8:12] == "2345"  # IP, pid as int16
    assert first[:20] == second[:20] == gen.prefix  # classloader hash fixed per generator
    assert first[20:28] == "01020304"  # ms since the start of the month
    assert (first[28:], second[28:]) == ("0000", "0001")  # counter
    assert uniq_key_timestamp_ms(first, now_ms=now + 5000) == now
    v6 = UniqKeyGenerator("::1").next_id()
    assert len(v6) == 56 and len(new_uniq_key()) == 32


def test_uniq_key_late_in_month_wraps_like_java() -> None:
    start = _month_start_ms(1700000000000)
    late = start + 27 * 86_400_000  # more than 2^31 ms into the month: Java's int wraps
    key = UniqKeyGenerator("10.0.0.5").next_id(late)
    assert uniq_key_timestamp_ms(key, now_ms=late + 1) == late


def test_uniq_keys_are_distinct() -> None:
    gen = UniqKeyGenerator("10.0.0.5")
    keys = {gen.next_id() for _ in range(10000)}
    assert len(keys) == 10000


def test_bulk_uniq_keys_equal_one_by_one() -> None:
    late = _month_start_ms(1700000000000) + 27 * 86_400_000  # the wrapped (unsigned) time part too
    for now in (_month_start_ms(1700000000000) + 0x0A0B0C, late):
        one, bulk = UniqKeyGenerator("10.0.0.5", pid=7, seed=3), UniqKeyGenerator("10.0.0.5", pid=7, seed=3)
        for _ in range(65_530):  # run the 16-bit counter up to its wrap
            one.next_id(now)
        bulk.next_ids(65_530, now)
        assert [one.next_id(now) for _ in range(12)] == bulk.next_ids(12, now)


def test_an_id_block_is_the_ids_next_ids_would_give() -> None:
    now = _month_start_ms(1700000000000) + 0x0A0B0C
    block, bulk = UniqKeyGenerator("10.0.0.5", pid=7, seed=3), UniqKeyGenerator("10.0.0.5", pid=7, seed=3)
    block.next_ids(65_530, now)  # the counter wraps inside the block
    bulk.next_ids(65_530, now)
    head, counters = block.next_id_block(12, now)
    assert [f"{head}{c & 0xFFFF:04X}" for c in counters] == bulk.next_ids(12, now)
    assert block.next_id(now) == bulk.next_id(now)  # the block took exactly 12 counter values


@pytest.mark.parametrize("ip", ["10.1.2.3", "fe80::1"])
def test_uniq_key_prefix_and_pid(ip: str) -> None:
    """The per-process part of an id is the generator's prefix; its pid field the pid's low 16 bits."""
    gen = UniqKeyGenerator(ip, pid=0x12345, seed=3)
    key = gen.next_id()
    assert uniq_key_prefix(key) == gen.prefix
    assert prefix_pid(gen.prefix) == 0x2345
