"""Tests of the SEND_BATCH_MESSAGE body codec and batch splitting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.batch import (
    BatchItem,
    BatchMessage,
    decode_batch,
    encode_batch,
    encode_batch_entry,
    split_batches,
)

GOLDEN = bytes.fromhex(
    # message 1: TOTALSIZE 31 = 20 + 2 body + 2 + 7 props
    "0000001F" "00000000" "00000000"  # TOTALSIZE, MAGICCODE 0, BODYCRC 0
    "00000000" "00000002" "6D31"  # FLAG 0, BODYLEN 2, b"m1"
    "0007" "54414753" "01" "41" "02"  # PROPLEN 7, "TAGS\x01A\x02"
    # message 2: TOTALSIZE 22, FLAG 5, empty body, no properties
    "00000016" "00000000" "00000000" "00000005" "00000000" "0000"
)  # fmt: skip


def test_golden_two_messages() -> None:
    assert encode_batch([(0, b"m1", {"TAGS": "A"}), (5, b"", {})]) == GOLDEN
    assert decode_batch(GOLDEN) == [BatchMessage(0, b"m1", {"TAGS": "A"}), BatchMessage(5, b"", {})]
    assert decode_batch(memoryview(GOLDEN)) == decode_batch(bytearray(GOLDEN))
    assert encode_batch([]) == b"" and decode_batch(b"") == []


def test_truncation_and_corruption() -> None:
    for cut in range(1, len(GOLDEN)):
        if cut == 31:
            continue  # a whole first entry is a valid batch
        with pytest.raises(MessageFormatError, match="position"):
            decode_batch(GOLDEN[:cut])
    with pytest.raises(MessageFormatError, match="position 31"):
        decode_batch(GOLDEN[:31] + b"\x00\x00\x00\x05" + GOLDEN[35:])
    with pytest.raises(MessageFormatError, match="properties length"):
        decode_batch(GOLDEN[:20] + b"\x00\x00\x00\x03" + GOLDEN[24:])
    with pytest.raises(MessageFormatError):
        encode_batch_entry(0, b"", b"x" * 40000)


def test_split_batches() -> None:
    items: list[BatchItem] = [(0, b"x" * 78, b"") for _ in range(10)]  # 100 bytes each
    groups = split_batches(items, max_bytes=250)
    assert [len(g) for g in groups] == [2, 2, 2, 2, 2]
    assert [len(g) for g in split_batches(items, max_bytes=1000)] == [10]
    assert split_batches([], max_bytes=10) == []
    with pytest.raises(MessageFormatError, match="message 0"):
        split_batches(items, max_bytes=99)


prop_text = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), min_size=1, max_size=10
)
items_strategy = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1),
        st.binary(max_size=50),
        st.dictionaries(prop_text, prop_text, max_size=3),
    ),
    max_size=8,
)


@given(items_strategy)
def test_roundtrip(items: list[tuple[int, bytes, dict[str, str]]]) -> None:
    assert decode_batch(encode_batch(items)) == [BatchMessage(f, b, p) for f, b, p in items]


@given(items_strategy, st.integers(200, 2000))
def test_split_respects_limit(items: list[tuple[int, bytes, dict[str, str]]], limit: int) -> None:
    groups = split_batches(items, max_bytes=limit)
    assert [i for g in groups for i in g] == items
    assert all(len(encode_batch(g)) <= limit for g in groups)


@given(st.binary(max_size=80))
def test_garbage_never_crashes(data: bytes) -> None:
    try:
        decode_batch(data)
    except MessageFormatError:
        pass
