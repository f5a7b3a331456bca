"""Batch sends: validation, UNIQ_KEYs and splitting to the 4 MiB limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.client.errors import MQClientError
from rocketq.client.model import Message
from rocketq.client.producer.batch import _encode_items, _uniform_batches, prepare_batches
from rocketq.client.remoting import msgid
from rocketq.client.remoting.batch import ENTRY_OVERHEAD, decode_batch, encode_batch, split_batches
from rocketq.client.remoting.msgid import UniqKeyGenerator


def gen() -> UniqKeyGenerator:
    return UniqKeyGenerator("10.0.0.1", pid=1, seed=1)


def test_one_batch_keeps_order_and_properties() -> None:
    msgs = [Message("T", f"m{i}".encode(), tags="A", keys=["k", str(i)], flag=i) for i in range(3)]
    (batch,) = prepare_batches(msgs, gen())
    decoded = decode_batch(batch.body)
    assert [d.body for d in decoded] == [b"m0", b"m1", b"m2"]
    assert [d.flag for d in decoded] == [0, 1, 2]
    assert decoded[1].properties["TAGS"] == "A" and decoded[1].properties["KEYS"] == "k 1"
    ids = batch.msg_id.split(",")
    assert ids == [d.properties["UNIQ_KEY"] for d in decoded] and len(set(ids)) == 3
    assert all(len(i) == 32 for i in ids)
    assert batch.message.topic == "T" and batch.message.properties["WAIT"] == "true"
    assert batch.count == 3


def test_split_respects_the_size_limit() -> None:
    msgs = [Message("T", bytes(1000)) for _ in range(50)]
    batches = prepare_batches(msgs, gen(), max_size=4096)
    assert sum(b.count for b in batches) == 50 and len(batches) > 1
    assert all(len(b.body) <= 4096 for b in batches)
    four_mib = prepare_batches([Message("T", bytes(1024 * 1024)) for _ in range(9)], gen())
    assert [b.count for b in four_mib] == [3, 3, 3]
    assert all(len(b.body) <= 4 * 1024 * 1024 for b in four_mib)


@pytest.mark.parametrize(
    "msgs",
    [
        [Message("T", b"a"), Message("U", b"b")],
        [Message("T", b"a", delay_time_level=3)],
        [Message("%RETRY%g", b"a")],
        [Message("T", b"a"), Message("T", b"b", wait_store_msg_ok=False)],
    ],
)
def test_invalid_batches_are_rejected(msgs: list[Message]) -> None:
    with pytest.raises(MQClientError) as err:
        prepare_batches(msgs, gen())
    assert err.value.code == 13


def test_a_message_over_the_limit_is_rejected() -> None:
    with pytest.raises(MQClientError):
        prepare_batches([Message("T", bytes(5000))], gen(), max_size=4096)
    assert prepare_batches([], gen()) == []


class _FrozenClock:
    """``time`` for msgid while a test compares two generators: both ids see one millisecond."""

    def __init__(self, now_s: float) -> None:
        self.now_s = now_s

    def time(self) -> float:
        return self.now_s


def _per_message(msgs: list[Message], uniq: UniqKeyGenerator, max_size: int) -> list[tuple[bytes, str, int]]:
    """What the message-by-message path sends: (body, msg_id, count) per request."""
    wait = "true" if msgs[0].wait_store_msg_ok else "false"
    items, ids = _encode_items(msgs, uniq, wait)
    out, start = [], 0
    for chunk in split_batches(items, max_size):
        out.append((encode_batch(chunk), ",".join(ids[start : start + len(chunk)]), len(chunk)))
        start += len(chunk)
    return out


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 300),
    size=st.integers(1, 400),
    flag=st.integers(-(2**31), 2**31 - 1),
    wait=st.booleans(),
    per_request=st.integers(1, 400),
    ip=st.sampled_from(["10.0.0.1", "fe80::1"]),
    counter_start=st.integers(0, 65_535),
)
def test_fixed_size_bulk_sends_encode_as_message_by_message(
    n: int, size: int, flag: int, wait: bool, per_request: int, ip: str, counter_start: int
) -> None:
    """The matrix path (plain messages, one body length, one flag) sends the same bytes, ids and
    request split as the per-message path, the 16-bit counter's wrap included."""
    msgs = [
        Message("T", bytes([i % 251]) * size, flag=flag, wait_store_msg_ok=wait, tags="", keys="")
        for i in range(n)
    ]
    fast, slow = UniqKeyGenerator(ip, pid=1, seed=2), UniqKeyGenerator(ip, pid=1, seed=2)
    for g in (fast, slow):
        g.next_ids(counter_start)
    wait_s = "true" if wait else "false"
    entry = ENTRY_OVERHEAD + size + len(f"WAIT\x01{wait_s}\x02UNIQ_KEY\x01\x02") + len(fast.prefix) + 8 + 4
    max_size = entry * per_request + per_request % 7  # not a multiple of the entry size
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(msgid, "time", _FrozenClock(1_700_000_000.5))
        got = prepare_batches(msgs, fast, max_size)
        assert _uniform_batches(msgs, UniqKeyGenerator(ip, pid=1, seed=2), wait_s, max_size)  # this path
        expected = _per_message(msgs, slow, max_size)
    assert [(b.body, b.msg_id, b.count) for b in got] == expected
    assert all(b.message.properties["WAIT"] == wait_s for b in got)
    decoded = [d for b in got for d in decode_batch(b.body)]
    assert [d.body for d in decoded] == [m.body for m in msgs]
    assert all(d.flag == flag and set(d.properties) == {"WAIT", "UNIQ_KEY"} for d in decoded)


@pytest.mark.parametrize(
    "odd",
    [
        Message("T", b"x" * 10, tags="A"),
        Message("T", b"x" * 10, keys=["k"]),
        Message("T", b"x" * 10, sharding_key="s"),
        Message("T", b"y" * 11),
        Message("T", b"x" * 10, flag=3),
    ],
)
def test_a_batch_that_is_not_uniform_is_encoded_message_by_message(odd: Message) -> None:
    msgs = [Message("T", b"x" * 10) for _ in range(20)]
    msgs.insert(7, odd)
    assert _uniform_batches(msgs, gen(), "true", 4 << 20) is None
    (batch,) = prepare_batches(msgs, gen())
    decoded = decode_batch(batch.body)
    assert decoded[7].body == odd.body and decoded[7].flag == odd.flag
    assert {k: v for k, v in decoded[7].properties.items() if k not in ("WAIT", "UNIQ_KEY")} == {
        k: v for k, v in odd.wire_properties().items() if k != "WAIT"
    }
    assert batch.msg_id.split(",") == [d.properties["UNIQ_KEY"] for d in decoded]
