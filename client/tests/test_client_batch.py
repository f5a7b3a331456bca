"""Batch sends: validation, UNIQ_KEYs and splitting to the 4 MiB limit."""

from __future__ import annotations

import pytest

from rocketq.client.errors import MQClientError
from rocketq.client.model import Message
from rocketq.client.producer.batch import prepare_batches
from rocketq.client.remoting.batch import decode_batch
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
