"""Pure pieces of the transaction module: config loader, half-message rewrites, op bodies, bitmap."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.broker.store.record_batch import MessageToStore
from rocketq.broker.transaction import TransactionConfig, TransactionConfigError, is_transaction_prepared
from rocketq.broker.transaction.half_message import (
    HALF_TOPIC,
    check_times,
    immunity_ms,
    origin_offset,
    restore_real_message,
    to_half_message,
)
from rocketq.broker.transaction.op_log import DoneOffsets, encode_op_body, make_op_message, parse_op_body
from rocketq.client.remoting.message import (
    StoredMessage,
    SysFlag,
    decode_stored_message,
    encode_stored_message,
)

HOST = ("127.0.0.1", 10911)


def stored(topic: str = HALF_TOPIC, queue_offset: int = 5, sys_flag: int = 0, **props: str) -> StoredMessage:
    raw = encode_stored_message(
        topic=topic,
        queue_id=0,
        born_timestamp=1,
        born_host=HOST,
        store_host=HOST,
        body=b"b",
        sys_flag=sys_flag,
        properties=props,
        queue_offset=queue_offset,
        physical_offset=1234,
    )
    return decode_stored_message(raw)


def test_config_defaults_and_broker_conf_keys() -> None:
    cfg = TransactionConfig()
    assert (cfg.transaction_timeout_ms, cfg.transaction_check_max, cfg.transaction_check_interval_ms) == (
        6000,
        15,
        60000,
    )
    conf = {
        "transactionTimeOut": "3000",
        "transactionCheckMax": " 5",
        "transactionCheckInterval": "30000",
        "brokerName": "b",
    }
    assert TransactionConfig.from_broker_conf(conf) == TransactionConfig(
        transaction_timeout_ms=3000, transaction_check_max=5, transaction_check_interval_ms=30000
    )
    with pytest.raises(TransactionConfigError):
        TransactionConfig.from_broker_conf({"transactionCheckMax": "lots"})
    with pytest.raises(TransactionConfigError):
        TransactionConfig(transaction_check_interval_ms=0)


def test_half_rewrite_resets_the_transaction_bits_and_strips_broker_properties() -> None:
    msg = MessageToStore(
        topic="T",
        queue_id=3,
        body=b"x",
        sys_flag=int(SysFlag.TRANSACTION_PREPARED | SysFlag.COMPRESSED),
        properties="TRAN_MSG\x01true\x02PGROUP\x01G\x02TRANSACTION_CHECK_TIMES\x019\x02"
        "TRAN_PREPARED_QUEUE_OFFSET\x011\x02",
        born_timestamp=1,
        born_host=HOST,
        store_host=HOST,
    )
    assert is_transaction_prepared(msg.properties)
    half = to_half_message(msg)
    assert (half.topic, half.queue_id, half.sys_flag) == (HALF_TOPIC, 0, int(SysFlag.COMPRESSED))
    assert half.properties == {"TRAN_MSG": "true", "PGROUP": "G", "REAL_TOPIC": "T", "REAL_QID": "3"}
    assert not is_transaction_prepared({"TRAN_MSG": "false"}) and not is_transaction_prepared("")


def test_restore_real_message() -> None:
    half = stored(REAL_TOPIC="T", REAL_QID="2", UNIQ_KEY="U", TRAN_MSG="true")
    real = restore_real_message(half, commit_log_offset=1234, prepared_queue_offset=5)
    assert (real.topic, real.queue_id, real.sys_flag, real.prepared_transaction_offset) == ("T", 2, 8, 1234)
    assert real.properties == {"UNIQ_KEY": "U", "TRAN_MSG": "true", "TRAN_PREPARED_QUEUE_OFFSET": "5"}
    with pytest.raises(ValueError):
        restore_real_message(stored(), commit_log_offset=0, prepared_queue_offset=0)


def test_property_parsing_is_lenient_like_java() -> None:
    assert origin_offset(stored(TRAN_PREPARED_QUEUE_OFFSET="2")) == 2
    assert origin_offset(stored(TRAN_PREPARED_QUEUE_OFFSET="x")) == 5
    assert origin_offset(stored(TRAN_PREPARED_QUEUE_OFFSET="9")) == 5  # never after the copy itself
    assert check_times(stored()) == 0 and check_times(stored(TRANSACTION_CHECK_TIMES="4")) == 4
    assert check_times(stored(TRANSACTION_CHECK_TIMES="??")) == 0
    assert immunity_ms(stored(), 6000) is None
    assert immunity_ms(stored(CHECK_IMMUNITY_TIME_IN_SECONDS="30"), 6000) == 30_000
    assert immunity_ms(stored(CHECK_IMMUNITY_TIME_IN_SECONDS="-1"), 6000) == 6000
    assert immunity_ms(stored(CHECK_IMMUNITY_TIME_IN_SECONDS="soon"), 6000) == 6000


def test_op_bodies() -> None:
    assert encode_op_body([12]) == b"12"
    assert encode_op_body([12, 3, 12]) == b"12,3"
    assert parse_op_body(b"12,3") == [12, 3] and parse_op_body(b"7") == [7]
    assert parse_op_body(b"1,,x,-4, 5") == [1, 5]
    with pytest.raises(ValueError):
        encode_op_body([])
    op = make_op_message([4, 1], store_host=HOST, now_ms=99)
    assert op.topic == "RMQ_SYS_TRANS_OP_HALF_TOPIC" and op.body == b"4,1"
    assert op.properties["TAGS"] == "d"  # type: ignore[index]


@given(st.sets(st.integers(min_value=0, max_value=5000)), st.integers(min_value=0, max_value=6000))
def test_done_offsets_matches_a_set(offsets: set[int], trim_at: int) -> None:
    done = DoneOffsets(0)
    for off in offsets:
        done.add(off)
    assert all(off in done for off in offsets)
    assert len(done) == len(offsets)
    assert not any(off in done for off in range(0, 5001, 7) if off not in offsets)
    done.trim(trim_at)
    assert done.base <= trim_at
    assert all(off in done for off in offsets if off >= trim_at)
    assert not any(off in done for off in offsets if off < done.base)


@given(
    st.integers(0, 300),
    st.lists(st.integers(0, 5000), max_size=300),
    st.lists(st.integers(0, 5000), max_size=60),
)
def test_done_offsets_bulk_add_and_lookup_match_single(
    base: int, offsets: list[int], probes: list[int]
) -> None:
    one, bulk = DoneOffsets(base), DoneOffsets(base)
    for off in offsets:
        one.add(off)
    bulk.add_many(offsets[: len(offsets) // 2])
    bulk.add_many(offsets[len(offsets) // 2 :])  # a second call grows the bitmap again
    candidates = [*offsets, *probes, base - 1, base]
    assert (
        bulk.contains_many(candidates)
        == [off in one for off in candidates]
        == [off in bulk for off in candidates]
    )
    assert len(bulk) == len(one)


def test_long_op_bodies_are_encoded_in_bulk_with_the_same_offsets() -> None:
    offsets = [5, *range(95, 1200), 10**12, 7, 96, 3]
    body = encode_op_body(offsets)
    assert sorted(parse_op_body(body)) == sorted(set(offsets))
    assert body == ",".join(map(str, sorted(set(offsets)))).encode()
