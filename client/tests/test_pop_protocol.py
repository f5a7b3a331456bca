"""POP wire strings and headers against values taken from RocketMQ's Java sources and a real handle."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import HeaderError
from rocketq.client.remoting.message import StoredMessage
from rocketq.client.remoting.pop import (
    POP_ORDER_REVIVE_QUEUE,
    AckMessageRequestHeader,
    BatchAck,
    BatchAckMessageRequestBody,
    ChangeInvisibleTimeResponseHeader,
    ExtraInfo,
    NotificationResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    RetryFlag,
    bitset_from_bytes,
    bitset_to_bytes,
    join_info,
    mark_popped_messages,
    msg_offset_info_entry,
    order_count_info_entry,
    parse_msg_offset_info,
    parse_order_count_info,
    parse_start_offset_info,
    queue_offset_map_key,
    queue_offset_order_count_entry,
    real_topic,
    retry_flag_of,
    start_offset_info_entry,
    start_offset_map_key,
)
from rocketq.client.remoting.properties import MessageConst

REAL_HANDLE = "2303 1677739894909 120000 1 0 broker-a 2 2303 2308538"


def test_real_handle_parses_and_round_trips() -> None:
    info = ExtraInfo.parse(REAL_HANDLE)
    assert info.ck_queue_offset == 2303
    assert info.pop_time == 1677739894909
    assert info.invisible_time == 120000
    assert info.revive_qid == 1
    assert info.retry_flag is RetryFlag.NORMAL
    assert info.broker_name == "broker-a"
    assert info.queue_id == 2
    assert info.queue_offset == 2303
    assert info.commit_log_offset == 2308538
    assert not info.is_order
    assert info.next_visible_time == 1677739894909 + 120000
    assert str(info) == REAL_HANDLE


def test_build_extra_info_takes_flag_from_topic() -> None:
    # ExtraInfoUtil.buildExtraInfo(ck, popTime, invisible, reviveQid, topic, brokerName, queueId[, offset])
    seven = ExtraInfo.build(
        ck_queue_offset=10,
        pop_time=5,
        invisible_time=60000,
        revive_qid=3,
        topic="%RETRY%g_T",
        broker_name="b",
        queue_id=0,
    )
    assert str(seven) == "10 5 60000 3 1 b 0"
    eight = ExtraInfo.build(
        ck_queue_offset=10,
        pop_time=5,
        invisible_time=60000,
        revive_qid=POP_ORDER_REVIVE_QUEUE,
        topic="%RETRY%g+T",
        broker_name="b",
        queue_id=0,
        queue_offset=12,
    )
    assert str(eight) == "10 5 60000 999 2 b 0 12"
    assert eight.is_order


def test_real_topic_of_retry_flags() -> None:
    assert retry_flag_of("T") is RetryFlag.NORMAL
    assert retry_flag_of("%RETRY%g_T") is RetryFlag.RETRY
    assert retry_flag_of("%RETRY%g+T") is RetryFlag.RETRY_V2
    assert real_topic("T", "g", RetryFlag.NORMAL) == "T"
    assert real_topic("T", "g", RetryFlag.RETRY) == "%RETRY%g_T"
    assert real_topic("T", "g", RetryFlag.RETRY_V2) == "%RETRY%g+T"
    assert ExtraInfo.parse("1 2 3 4 1 b 0 1").real_topic("T", "g") == "%RETRY%g_T"


def test_changed_handle_starts_at_the_message() -> None:
    new = ExtraInfo.parse(REAL_HANDLE).changed(
        offset=2303, pop_time=1677739900000, invisible_time=5000, revive_qid=4
    )
    assert str(new) == "2303 1677739900000 5000 4 0 broker-a 2 2303"


@pytest.mark.parametrize(
    "bad",
    ["", "1 2 3", "1 2 3 4 7 b 0 1", "x 2 3 4 0 b 0 1", "1 2 3 4 0 b 0 1 2 3", "1 2 3 4 0 b q"],
)
def test_bad_handles_are_named(bad: str) -> None:
    with pytest.raises(HeaderError, match="extraInfo"):
        ExtraInfo.parse(bad)


def test_order_count_info_as_extra_info_util_test() -> None:
    # ExtraInfoUtilTest.testOrderCountInfo
    text = join_info(
        [order_count_info_entry("TOPIC", 0, 1), queue_offset_order_count_entry("TOPIC", 0, 1234, 2)]
    )
    assert text == "0 0 1;0 qo0%1234 2"
    parsed = parse_order_count_info(text)
    assert parsed is not None
    assert parsed[start_offset_map_key(RetryFlag.NORMAL, 0)] == 1
    assert parsed[queue_offset_map_key(RetryFlag.NORMAL, 0, 1234)] == 2
    assert queue_offset_map_key(RetryFlag.NORMAL, 0, 1234) == "0@qo0%1234"


def test_start_and_msg_offset_info() -> None:
    start = join_info([start_offset_info_entry("T", 1, 100), start_offset_info_entry("%RETRY%g_T", 0, 7)])
    assert start == "0 1 100;1 0 7"
    assert parse_start_offset_info(start) == {"0@1": 100, "1@0": 7}
    msgs = join_info(
        [msg_offset_info_entry("T", 1, [100, 101, 104]), msg_offset_info_entry("%RETRY%g_T", 0, [7])]
    )
    assert msgs == "0 1 100,101,104;1 0 7"
    assert parse_msg_offset_info(msgs) == {"0@1": [100, 101, 104], "1@0": [7]}
    assert parse_start_offset_info(None) is None
    assert parse_start_offset_info("") is None
    assert join_info([]) is None
    with pytest.raises(HeaderError, match="duplicate"):
        parse_start_offset_info("0 1 1;0 1 2")
    with pytest.raises(HeaderError, match="startOffsetInfo"):
        parse_start_offset_info("0 1")


def test_header_wire_names() -> None:
    req = PopMessageRequestHeader(
        consumer_group="g",
        topic="T",
        queue_id=-1,
        max_msg_nums=32,
        invisible_time=60000,
        poll_time=5000,
        born_time=1,
        init_mode=0,
        exp_type="TAG",
        exp="*",
    )
    assert req.to_ext_fields() == {
        "consumerGroup": "g",
        "topic": "T",
        "queueId": "-1",
        "maxMsgNums": "32",
        "invisibleTime": "60000",
        "pollTime": "5000",
        "bornTime": "1",
        "initMode": "0",
        "expType": "TAG",
        "exp": "*",
        "order": "false",
    }
    resp = PopMessageResponseHeader.from_ext_fields(
        {"popTime": "5", "invisibleTime": "60000", "reviveQid": "2", "restNum": "0", "msgOffsetInfo": "0 1 3"}
    )
    assert resp.revive_qid == 2 and resp.msg_offset_info == "0 1 3" and resp.start_offset_info is None
    ack = AckMessageRequestHeader(
        consumer_group="g", topic="T", queue_id=2, extra_info=REAL_HANDLE, offset=2303
    )
    assert ack.to_ext_fields()["extraInfo"] == REAL_HANDLE
    with pytest.raises(HeaderError, match="reviveQid"):
        ChangeInvisibleTimeResponseHeader.from_ext_fields({"popTime": "1", "invisibleTime": "2"})
    assert NotificationResponseHeader.from_ext_fields({"hasMsg": "true"}).polling_full is False


def _msg(topic: str, queue_id: int, offset: int, **props: str) -> StoredMessage:
    return StoredMessage(
        total_size=0,
        magic=0,
        body_crc=0,
        queue_id=queue_id,
        flag=0,
        queue_offset=offset,
        physical_offset=0,
        sys_flag=0,
        born_timestamp=0,
        born_host=("127.0.0.1", 1),
        store_timestamp=0,
        store_host=("127.0.0.1", 2),
        reconsume_times=0,
        prepared_transaction_offset=0,
        body=b"",
        topic=topic,
        properties=dict(props),
    )


def test_pop_ck_per_message_as_process_pop_response() -> None:
    resp = PopMessageResponseHeader(
        pop_time=1000,
        invisible_time=30000,
        revive_qid=3,
        rest_num=0,
        start_offset_info="0 1 100;1 0 7",
        msg_offset_info="0 1 100,102;1 0 7",
    )
    retried_ck = "5 900 30000 2 1 brk 0 5"
    msgs = [
        _msg("T", 1, 100),
        _msg("T", 1, 102, **{MessageConst.FIRST_POP_TIME: "42"}),
        _msg("%RETRY%g_T", 0, 7),
        _msg("T", 0, 5, **{MessageConst.POP_CK: retried_ck}),
    ]
    marks = mark_popped_messages(msgs, resp, "brk", order=False)
    assert [m.pop_ck for m in marks] == [
        "100 1000 30000 3 0 brk 1 100",
        "100 1000 30000 3 0 brk 1 102",
        "7 1000 30000 3 1 brk 0 7",
        retried_ck,
    ]
    assert [m.first_pop_time for m in marks] == ["1000", "42", "1000", "1000"]


def test_pop_ck_without_start_offset_info_and_order_counts() -> None:
    old = PopMessageResponseHeader(pop_time=1, invisible_time=2, revive_qid=0, rest_num=0)
    marks = mark_popped_messages([_msg("T", 0, 4), _msg("T", 0, 5)], old, "b", order=False)
    assert [m.pop_ck for m in marks] == ["4 1 2 0 0 b 0 4", "4 1 2 0 0 b 0 5"]
    orderly = PopMessageResponseHeader(
        pop_time=1,
        invisible_time=2,
        revive_qid=999,
        rest_num=0,
        start_offset_info="0 0 4",
        msg_offset_info="0 0 4,5",
        order_count_info="0 qo0%4 2;0 qo0%5 0",
    )
    marks = mark_popped_messages([_msg("T", 0, 4), _msg("T", 0, 5)], orderly, "b", order=True)
    assert [m.reconsume_times for m in marks] == [2, 0]
    assert ExtraInfo.parse(marks[0].pop_ck).is_order


def test_bitset_as_java_to_byte_array() -> None:
    # BatchAckTest: offsets startOffset + 1, + 3, + 5 -> bits 1, 3, 5 -> one byte 0b00101010
    assert bitset_to_bytes([1, 3, 5]) == b"\x2a"
    assert bitset_to_bytes([]) == b""
    assert bitset_to_bytes([8]) == b"\x00\x01"
    assert bitset_from_bytes(b"\x2a") == [1, 3, 5]


@given(st.sets(st.integers(0, 2000)))
def test_bitset_round_trip(bits: set[int]) -> None:
    assert bitset_from_bytes(bitset_to_bytes(bits)) == sorted(bits)


def test_batch_ack_body_json() -> None:
    ack = BatchAck(
        consumer_group="DEFAULT_CONSUMER",
        topic="myTopic",
        retry_flag=RetryFlag.NORMAL,
        start_offset=100,
        queue_id=1,
        revive_queue_id=2,
        pop_time=1700000000000,
        invisible_time=5000,
        ack_indexes=(1, 3, 5),
    )
    body = BatchAckMessageRequestBody("broker-a", (ack,)).encode()
    obj = json.loads(body)
    assert obj["brokerName"] == "broker-a"
    assert obj["acks"][0] == {
        "b": base64.b64encode(b"\x2a").decode(),
        "c": "DEFAULT_CONSUMER",
        "it": 5000,
        "pt": 1700000000000,
        "q": 1,
        "r": "0",
        "rq": 2,
        "so": 100,
        "t": "myTopic",
    }
    assert BatchAckMessageRequestBody.decode(body) == BatchAckMessageRequestBody("broker-a", (ack,))
    long_names = {
        "acks": [
            {
                "consumerGroup": "g",
                "topic": "t",
                "retry": "1",
                "startOffset": 3,
                "queueId": 0,
                "reviveQueueId": 0,
                "popTime": 1,
                "invisibleTime": 2,
                "bitSet": "AQ==",
            }
        ]
    }
    decoded = BatchAckMessageRequestBody.decode(json.dumps(long_names).encode())
    assert decoded.broker_name is None and decoded.acks[0].ack_indexes == (0,)
    assert decoded.acks[0].retry_flag is RetryFlag.RETRY
    with pytest.raises(HeaderError, match="missing"):
        BatchAckMessageRequestBody.decode(b'{"acks":[{"c":"g"}]}')
