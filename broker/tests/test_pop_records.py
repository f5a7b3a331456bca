"""The revive-log records against JSON written by hand the way fastjson writes Java's beans.

fastjson sorts a bean's keys by their (annotated) names, omits null fields and adds
``reviveTime`` for ``PopCheckPoint.getReviveTime()``; ``AckMsg`` keys also have long alternate
names that readers must accept.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.broker.pop.records import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    AckMsg,
    PopCheckPoint,
    ReviveRecordError,
    ack_message,
    ck_message,
    decode_record,
)
from rocketq.broker.pop.revive import original_topic
from rocketq.client.remoting.properties import MessageConst

PT = 1_700_000_000_000
JAVA_CK = (
    b'{"bm":0,"bn":"broker-a","c":"CID_G","d":[0,2,5],"it":60000,"n":3,"pt":1700000000000,'
    b'"q":3,"reviveTime":1700000060000,"ro":0,"so":100,"t":"TopicA"}'
)
JAVA_AK = b'{"ao":102,"bn":"broker-a","c":"CID_G","pt":1700000000000,"q":3,"so":100,"t":"TopicA"}'
JAVA_BATCH = (
    b'{"ao":-1,"aol":[100,105],"bn":"broker-a","c":"CID_G","pt":1700000000000,"q":3,"so":100,"t":"TopicA"}'
)

CK = PopCheckPoint(
    start_offset=100,
    pop_time=PT,
    invisible_time=60_000,
    queue_id=3,
    topic="TopicA",
    cid="CID_G",
    queue_offset_diff=(0, 2, 5),
    broker_name="broker-a",
)
AK = AckMsg(
    ack_offset=102,
    start_offset=100,
    consumer_group="CID_G",
    topic="TopicA",
    queue_id=3,
    pop_time=PT,
    broker_name="broker-a",
)
BATCH = AckMsg(
    ack_offset=-1,
    start_offset=100,
    consumer_group="CID_G",
    topic="TopicA",
    queue_id=3,
    pop_time=PT,
    broker_name="broker-a",
    ack_offsets=(100, 105),
)


def test_checkpoint_json_is_fastjsons() -> None:
    assert CK.to_json() == JAVA_CK
    assert decode_record(CK_TAG, JAVA_CK) == CK
    assert CK.queue_offsets == [100, 102, 105]
    assert CK.end_offset == 106
    assert CK.revive_time == PT + 60_000


def test_checkpoint_reader_ignores_unknown_keys_and_takes_rp() -> None:
    doc = JAVA_CK[:-1] + b',"rp":"2","someFutureKey":[1,2]}'
    ck = decode_record(CK_TAG, doc)
    assert isinstance(ck, PopCheckPoint)
    assert ck.re_put_times == "2"
    assert ck.queue_offset_diff == (0, 2, 5)


def test_ack_json_short_and_long_names() -> None:
    assert AK.to_json() == JAVA_AK
    assert decode_record(ACK_TAG, JAVA_AK) == AK
    long_names = (
        b'{"ackOffset":102,"brokerName":"broker-a","consumerGroup":"CID_G","popTime":1700000000000,'
        b'"queueId":3,"startOffset":100,"topic":"TopicA"}'
    )
    assert decode_record(ACK_TAG, long_names) == AK


def test_batch_ack_json() -> None:
    assert BATCH.to_json() == JAVA_BATCH
    back = decode_record(BATCH_ACK_TAG, JAVA_BATCH)
    assert back == BATCH
    assert isinstance(back, AckMsg) and back.offsets == (100, 105)


def _sorted_json(doc: dict[str, Any]) -> bytes:
    return json.dumps(
        {k: v for k, v in doc.items() if v is not None}, sort_keys=True, separators=(",", ":")
    ).encode()


_names = st.text(min_size=1, max_size=12)  # escapes and non-ASCII included: JSON as json.dumps writes it
_longs = st.integers(-(2**63), 2**63 - 1)


@given(
    st.tuples(_longs, _longs, _longs, st.integers(0, 2**31 - 1), _names, _names),
    st.lists(st.integers(0, 10**6), max_size=32),
    st.none() | _names,
    st.none() | _names,
)
def test_checkpoint_json_is_sorted_json_of_its_fields(
    fields: tuple[int, int, int, int, str, str], diff: list[int], bn: str | None, rp: str | None
) -> None:
    so, pt, it, q, topic, cid = fields
    ck = PopCheckPoint(
        start_offset=so, pop_time=pt, invisible_time=it, queue_id=q, topic=topic, cid=cid,
        queue_offset_diff=tuple(diff), broker_name=bn, re_put_times=rp,
    )  # fmt: skip
    doc = {"so": so, "pt": pt, "it": it, "bm": 0, "n": len(diff), "q": q, "t": topic, "c": cid, "ro": 0,
           "d": diff, "reviveTime": pt + it, "bn": bn, "rp": rp}  # fmt: skip
    assert ck.to_json() == _sorted_json(doc)
    assert decode_record(CK_TAG, ck.to_json()) == ck


@given(
    st.tuples(_longs, _longs, _longs, st.integers(0, 2**31 - 1), _names, _names),
    st.lists(_longs, max_size=32),
    st.none() | _names,
)
def test_ack_json_is_sorted_json_of_its_fields(
    fields: tuple[int, int, int, int, str, str], aol: list[int], bn: str | None
) -> None:
    ao, so, pt, q, topic, group = fields
    ack = AckMsg(
        ack_offset=ao, start_offset=so, consumer_group=group, topic=topic, queue_id=q, pop_time=pt,
        broker_name=bn, ack_offsets=tuple(aol),
    )  # fmt: skip
    doc = {"ao": ao, "so": so, "c": group, "t": topic, "q": q, "pt": pt, "bn": bn, "aol": aol or None}
    assert ack.to_json() == _sorted_json(doc)
    assert decode_record(BATCH_ACK_TAG if aol else ACK_TAG, ack.to_json()) == ack


def test_unique_ids_as_pop_message_processor_builds_them() -> None:
    assert CK.unique_id() == "TopicA@3@100@CID_G@1700000000000@broker-a@ck"
    assert AK.unique_id() == "TopicA@3@102@CID_G@1700000000000@broker-a@ack"
    assert BATCH.unique_id() == "TopicA@3@[100, 105]@CID_G@1700000000000@bAck"


def test_record_messages_carry_tag_uniq_key_and_deliver_time() -> None:
    host = ("127.0.0.1", 10911)
    ck_msg = ck_message(CK, revive_topic="rmq_sys_REVIVE_LOG_C", revive_qid=5, now_ms=PT, store_host=host)
    assert (ck_msg.topic, ck_msg.queue_id, ck_msg.body) == ("rmq_sys_REVIVE_LOG_C", 5, JAVA_CK)
    props = dict(ck_msg.properties) if not isinstance(ck_msg.properties, str) else {}
    assert props[MessageConst.TAGS] == CK_TAG
    assert props[MessageConst.UNIQ_KEY] == CK.unique_id()
    assert props[MessageConst.TIMER_DELIVER_MS] == str(PT + 60_000 - 1000)
    ak_msg = ack_message(
        BATCH,
        invisible_time=60_000,
        revive_topic="rmq_sys_REVIVE_LOG_C",
        revive_qid=5,
        now_ms=PT,
        store_host=host,
    )
    props = dict(ak_msg.properties) if not isinstance(ak_msg.properties, str) else {}
    assert props[MessageConst.TAGS] == BATCH_ACK_TAG
    assert props[MessageConst.TIMER_DELIVER_MS] == str(PT + 60_000)


@pytest.mark.parametrize(
    ("tag", "body"),
    [(CK_TAG, b"not json"), (CK_TAG, b'{"so":1}'), (ACK_TAG, b"[1]"), ("other", JAVA_AK)],
)
def test_bad_records_name_the_problem(tag: str, body: bytes) -> None:
    with pytest.raises(ReviveRecordError, match="revive record"):
        decode_record(tag, body)


def test_original_topic_of_pop_retry_topics() -> None:
    assert original_topic("%RETRY%g_x_TopicA", "g_x") == "TopicA"
    assert original_topic("%RETRY%g+TopicA", "g") == "TopicA"
    assert original_topic("TopicA", "g") == "TopicA"
