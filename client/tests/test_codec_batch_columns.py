"""decode_batch_columns: the broker's column form of a SEND_BATCH_MESSAGE body, against decode_batch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.batch import decode_batch, encode_batch
from rocketq.client.remoting.properties import decode_properties
from rocketq.server.batch_columns import decode_batch_columns

_items = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1),
        st.binary(max_size=64),
        st.dictionaries(
            st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "k"]),
            st.text(alphabet="ab é", min_size=1, max_size=8),
            max_size=3,
        ),
    ),
    max_size=12,
)


@given(_items)
def test_columns_match_decode_batch(items: list[tuple[int, bytes, dict[str, str]]]) -> None:
    body = encode_batch(items)
    cols = decode_batch_columns(body)
    msgs = decode_batch(body)
    assert len(cols) == len(msgs)
    assert cols.flags == [m.flag for m in msgs]
    assert [bytes(b) for b in cols.bodies] == [m.body for m in msgs]
    assert [decode_properties(p) for p in cols.properties] == [m.properties for m in msgs]
    # the walk's bodies are views of the batch; same-size entries' are bytes cut out in C
    assert all(isinstance(b, memoryview) for b in cols.bodies) or all(type(b) is bytes for b in cols.bodies)


def test_columns_keep_raw_properties_and_reject_truncation() -> None:
    body = encode_batch([(7, b"abc", b"TAGS\x01x\x02odd"), (0, b"", b"")])
    cols = decode_batch_columns(bytearray(body))
    assert cols.flags == [7, 0] and cols.properties == [b"TAGS\x01x\x02odd", b""]
    for cut in (1, 5, 23, len(body) - 1):
        with pytest.raises(MessageFormatError, match="position"):
            decode_batch_columns(body[:cut])
    with pytest.raises(MessageFormatError):
        decode_batch_columns(body[:-2] + b"\xff\xff")  # negative properties length


# Same-size entries take the bulk path (one byte matrix); these pin it to the entry-by-entry walk.
_uniform = st.tuples(
    st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=12),
    st.integers(0, 40),
    st.integers(0, 40),
    st.randoms(use_true_random=False),
)


def _uniform_items(
    flags: list[int], body_len: int, props_len: int, rnd: object
) -> list[tuple[int, bytes, bytes]]:
    import random

    assert isinstance(rnd, random.Random)
    return [
        (f, rnd.randbytes(body_len), bytes(rnd.choice(b"ab\x01\x02=") for _ in range(props_len)))
        for f in flags
    ]


@given(_uniform)
def test_uniform_batch_columns_match_the_walk(case: tuple[list[int], int, int, object]) -> None:
    items = _uniform_items(*case)
    body = encode_batch(items)
    cols = decode_batch_columns(body)
    assert list(zip(cols.flags, map(bytes, cols.bodies), cols.properties, strict=True)) == items
    bulk = len(items) > 1  # one entry takes the walk (views of the batch)
    assert all(type(b) is (bytes if bulk else memoryview) for b in cols.bodies)
    assert decode_batch_columns(bytearray(body)).properties == cols.properties


def test_uniform_batch_edge_cases() -> None:
    assert len(decode_batch_columns(b"")) == 0
    # properties with both separators, empty bodies, maximal properties (32767 bytes)
    items = [(7, b"", b"a\x01b\x02c\x01\x02")] * 3 + [(8, b"", b"a\x01b\x02c\x01\x02")]
    cols = decode_batch_columns(encode_batch(items))
    assert cols.flags == [7, 7, 7, 8] and cols.properties == [p for _f, _b, p in items]
    big = [(1, b"x" * 5, b"k" * 32767), (2, b"y" * 5, b"v" * 32767)]
    cols = decode_batch_columns(encode_batch(big))
    assert cols.properties == [b"k" * 32767, b"v" * 32767] and list(map(bytes, cols.bodies)) == [
        b"x" * 5,
        b"y" * 5,
    ]


@pytest.mark.parametrize(
    ("where", "value", "what"),
    [
        (0, 99, "bad batch entry sizes"),  # a later entry's TOTALSIZE
        (16, 3, "properties length"),  # a later entry's BODYLEN (same total)
        (16, -1, "bad batch entry sizes"),
    ],
)
def test_uniform_batch_with_one_bad_entry_is_reported_where_it_is(where: int, value: int, what: str) -> None:
    items = [(0, b"0123456789", b"k\x01v\x02")] * 4
    body = bytearray(encode_batch(items))
    entry = len(body) // 4
    body[2 * entry + where : 2 * entry + where + 4] = value.to_bytes(4, "big", signed=True)
    with pytest.raises(MessageFormatError, match=what) as err:
        decode_batch_columns(bytes(body))
    assert f"position {2 * entry}" in str(err.value)


def test_uniform_batch_with_a_bad_properties_length_is_reported() -> None:
    items = [(0, b"0123456789", b"k\x01v\x02")] * 4
    body = bytearray(encode_batch(items))
    entry = len(body) // 4
    body[3 * entry + 30 : 3 * entry + 32] = (3).to_bytes(2, "big")
    with pytest.raises(MessageFormatError, match="properties length 3"):
        decode_batch_columns(bytes(body))
