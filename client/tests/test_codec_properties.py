"""Tests of the message properties codec (k\\x01v\\x02...)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.properties import (
    MAX_PROPERTIES_SIZE,
    MessageConst,
    decode_properties,
    encode_properties,
    encode_properties_bytes,
    find_property,
    split_keys,
)


def test_golden_encoding() -> None:
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "SKIP": None, "UNIQ_KEY": "ÄB"}
    # T A G S 01 T a g A 02 | K E Y S 01 k 1 20 k 2 02 | U N I Q _ K E Y 01 C3 84 B 02
    expected = bytes.fromhex(
        "54414753" "01" "54616741" "02"
        "4B455953" "01" "6B31206B32" "02"
        "554E49515F4B4559" "01" "C384" "42" "02"
    )  # fmt: skip
    assert encode_properties_bytes(props) == expected
    assert encode_properties(props) == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ÄB\x02"
    assert decode_properties(expected) == {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ÄB"}
    assert encode_properties({}) == ""


def test_java_decoding_rules() -> None:
    # Short segments, segments without \x01, empty keys and empty values are all ignored.
    raw = "ab\x02\x01xyz\x02k\x01\x02kk\x01\x02a\x01b\x02x\x01y\x01z\x02last\x01v"
    assert decode_properties(raw) == {"a": "b", "x": "y\x01z", "last": "v"}
    assert decode_properties(b"") == {} and decode_properties(memoryview(b"A\x01B\x02")) == {"A": "B"}
    assert decode_properties(b"K\x01\xff\x02") == {"K": "\ufffd"}  # invalid UTF-8 replaced as in Java


def test_separator_in_key_or_value_is_rejected() -> None:
    with pytest.raises(MessageFormatError):
        encode_properties({"a\x01": "b"})
    with pytest.raises(MessageFormatError):
        encode_properties({"a": "b\x02"})


def test_size_limit() -> None:
    assert len(encode_properties_bytes({"K": "v" * (MAX_PROPERTIES_SIZE - 3)})) == MAX_PROPERTIES_SIZE
    with pytest.raises(MessageFormatError, match="32767"):
        encode_properties_bytes({"K": "v" * (MAX_PROPERTIES_SIZE - 2)})


def test_message_const_names() -> None:
    assert MessageConst.UNIQ_KEY == "UNIQ_KEY" and MessageConst.WAIT_STORE_MSG_OK == "WAIT"
    assert MessageConst.DELAY_TIME_LEVEL == "DELAY" and MessageConst.REAL_QUEUE_ID == "REAL_QID"
    assert (
        MessageConst.TRANSACTION_ID == "__transactionId__" and MessageConst.FIRST_POP_TIME == "1ST_POP_TIME"
    )
    assert MessageConst.CRC32 == "__CRC32#" and MessageConst.SHARDING_KEY == "__SHARDINGKEY"
    assert split_keys("a  b c") == ["a", "b", "c"] and split_keys(None) == []


text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), min_size=1)


@given(st.dictionaries(text, text))
def test_roundtrip(props: dict[str, str]) -> None:
    assert decode_properties(encode_properties(props)) == props
    data = encode_properties(props).encode()
    if len(data) <= MAX_PROPERTIES_SIZE:
        assert decode_properties(encode_properties_bytes(props)) == props


@given(st.text())
def test_decode_never_raises(raw: str) -> None:
    result = decode_properties(raw)
    assert all(k and v and "\x02" not in k + v and "\x01" not in k for k, v in result.items())


@given(
    st.lists(
        st.sampled_from(
            ["A\x01x", "A\x01", "A\x01y\x01z", "B\x01A\x01q", "AA\x01w", "A", "", "é\x01é", "A\x01é"]
        ),
        max_size=6,
    ),
    st.booleans(),
)
def test_find_property_agrees_with_decoding(segments: list[str], trailing: bool) -> None:
    data = ("\x02".join(segments) + ("\x02" if trailing and segments else "")).encode()
    for key in ("A", "B", "é"):
        assert find_property(data, key) == decode_properties(data).get(key)
