"""decode_batch_columns: the broker's column form of a SEND_BATCH_MESSAGE body, against decode_batch."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import MessageFormatError
from rocketq.client.remoting.batch import decode_batch, decode_batch_columns, encode_batch
from rocketq.client.remoting.properties import decode_properties

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
    assert all(isinstance(b, memoryview) for b in cols.bodies)


def test_columns_keep_raw_properties_and_reject_truncation() -> None:
    body = encode_batch([(7, b"abc", b"TAGS\x01x\x02odd"), (0, b"", b"")])
    cols = decode_batch_columns(bytearray(body))
    assert cols.flags == [7, 0] and cols.properties == [b"TAGS\x01x\x02odd", b""]
    for cut in (1, 5, 23, len(body) - 1):
        with pytest.raises(MessageFormatError, match="position"):
            decode_batch_columns(body[:cut])
    with pytest.raises(MessageFormatError):
        decode_batch_columns(body[:-2] + b"\xff\xff")  # negative properties length
