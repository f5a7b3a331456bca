"""Tests of the remoting frame codec and the incremental FrameDecoder."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.errors import FrameError
from rocketq.client.remoting.frame import MAX_FRAME_LENGTH, FrameDecoder, SerializeType, encode_frame


def _frame(header: bytes, body: bytes, type_byte: int = 0) -> bytes:
    # Built independently of encode_frame: length excludes itself.
    return struct.pack(">ii", 4 + len(header) + len(body), (type_byte << 24) | len(header)) + header + body


def test_encode_frame_layout() -> None:
    frame = encode_frame(b"HDR", b"body!", SerializeType.ROCKETMQ)
    assert frame == bytes.fromhex("0000000c 01000003") + b"HDR" + b"body!"
    assert encode_frame(b"", b"", SerializeType.JSON) == bytes.fromhex("00000004 00000000")


def test_encode_frame_rejects_oversize() -> None:
    with pytest.raises(FrameError, match="exceeds the maximum"):
        encode_frame(b"h", b"x" * MAX_FRAME_LENGTH, SerializeType.JSON)


def test_max_frame_is_accepted() -> None:
    body = b"\0" * (MAX_FRAME_LENGTH - 4)
    frame = encode_frame(b"", body, SerializeType.JSON)
    (payload,) = FrameDecoder().feed(frame)
    assert len(payload) == MAX_FRAME_LENGTH


def test_single_frame_payload_excludes_length() -> None:
    frame = _frame(b"{}", b"xyz")
    (payload,) = FrameDecoder().feed(frame)
    assert bytes(payload) == frame[4:]


def test_multiple_frames_in_one_read() -> None:
    frames = [_frame(b"{}", b"a"), _frame(b"hh", b""), _frame(b"", b"bbbb", 1)]
    payloads = FrameDecoder().feed(b"".join(frames))
    assert [bytes(p) for p in payloads] == [f[4:] for f in frames]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_one_byte_at_a_time(kind: type) -> None:
    frames = [_frame(b"{}", b"hello"), _frame(b"x", b"")]
    stream = b"".join(frames)
    decoder = FrameDecoder()
    out: list[bytes] = []
    for i in range(len(stream)):
        out += [bytes(p) for p in decoder.feed(kind(stream[i : i + 1]))]
    assert out == [f[4:] for f in frames]
    assert decoder.buffered == 0


def test_partial_then_rest_with_next_frame_start() -> None:
    a, b = _frame(b"{}", b"A" * 10), _frame(b"{}", b"B" * 10)
    decoder = FrameDecoder()
    assert decoder.feed(a[:7]) == []
    got = decoder.feed(a[7:] + b[:3])
    assert [bytes(p) for p in got] == [a[4:]]
    assert decoder.buffered == 3
    assert [bytes(p) for p in decoder.feed(b[3:])] == [b[4:]]


def test_payloads_survive_later_feeds_and_input_mutation() -> None:
    decoder = FrameDecoder()
    data = bytearray(_frame(b"{}", b"first") + _frame(b"{}", b"sec"))
    with memoryview(data) as view:
        assert decoder.feed(view[:5]) == []
        payloads = decoder.feed(view[5:])
    data[:] = b"\xff" * len(data)  # the caller reuses its buffer
    decoder.feed(_frame(b"{}", b"x" * 100_000)[:50_000])
    assert [bytes(p) for p in payloads] == [_frame(b"{}", b"first")[4:], _frame(b"{}", b"sec")[4:]]


def test_large_frame_in_chunks_and_compaction() -> None:
    big = _frame(b"{}", bytes(range(256)) * 1000)
    small = _frame(b"{}", b"s")
    stream = (small + big) * 3
    decoder = FrameDecoder()
    out: list[bytes] = []
    for i in range(0, len(stream), 4096):
        out += [bytes(p) for p in decoder.feed(stream[i : i + 4096])]
    assert out == [small[4:], big[4:]] * 3
    assert decoder.buffered == 0


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        (struct.pack(">ii", 3, 0), "frame length 3 is smaller than the minimum 4"),
        (struct.pack(">ii", -1, 0), "frame length -1 is smaller"),
        (struct.pack(">ii", MAX_FRAME_LENGTH + 1, 0), f"frame length {MAX_FRAME_LENGTH + 1} exceeds"),
        (struct.pack(">ii", 10, 7), "header length 7 does not fit in a frame of length 10"),
        (struct.pack(">ii", 10, (2 << 24) | 1), "unknown serialize type 2"),
        (struct.pack(">ii", 10, (0x7F << 24) | 1), "unknown serialize type 127"),
    ],
)
def test_bad_prefix_raises(prefix: bytes, message: str) -> None:
    with pytest.raises(FrameError, match=message):
        FrameDecoder().feed(prefix)


def test_bad_length_rejected_before_the_type_word_arrives() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError, match="exceeds the maximum"):
        decoder.feed(struct.pack(">i", 0x7FFFFFFF))


def test_custom_max_frame_length() -> None:
    decoder = FrameDecoder(max_frame_length=100)
    decoder.feed(_frame(b"", b"x" * 96))
    with pytest.raises(FrameError, match="exceeds the maximum 100"):
        decoder.feed(_frame(b"", b"x" * 97))


def test_error_after_good_frames_in_same_read() -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(_frame(b"{}", b"") + struct.pack(">ii", 2, 0))


def test_empty_feed() -> None:
    assert FrameDecoder().feed(b"") == []


frame_parts = st.tuples(st.binary(max_size=40), st.binary(max_size=200), st.sampled_from([0, 1]))


@settings(max_examples=150, deadline=None)
@given(
    parts=st.lists(frame_parts, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=20),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_random_chunking_round_trip(
    parts: list[tuple[bytes, bytes, int]], cuts: list[int], kind: type
) -> None:
    frames = [_frame(h, b, t) for h, b, t in parts]
    stream = b"".join(frames)
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    decoder = FrameDecoder()
    out: list[bytes] = []
    for start, end in itertools.pairwise(points):
        out += [bytes(p) for p in decoder.feed(kind(stream[start:end]))]
    assert out == [f[4:] for f in frames]
    assert decoder.buffered == 0


@settings(max_examples=100, deadline=None)
@given(
    header=st.binary(max_size=50), body=st.binary(max_size=300), stype=st.sampled_from(list(SerializeType))
)
def test_encode_frame_matches_layout(header: bytes, body: bytes, stype: SerializeType) -> None:
    assert encode_frame(header, body, stype) == _frame(header, body, int(stype))
