"""Tests of the route, cluster, topic config and REGISTER_BROKER bodies."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client.errors import ProtocolError
from rocketq.client.remoting.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    KVTable,
    MessageQueue,
    Perm,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
    body_crc32,
    perm_to_string,
)

# Exactly the two dialects of B.9.
FASTJSON_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"192.168.1.10:10911",1:"192.168.1.11:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
STANDARD_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"192.168.1.10:10911","1":"192.168.1.11:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
EXPECTED_ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
    broker_datas=[
        BrokerData("DefaultCluster", "broker-a", {0: "192.168.1.10:10911", 1: "192.168.1.11:10911"})
    ],
)


def test_route_both_dialects() -> None:
    assert TopicRouteData.from_json(FASTJSON_ROUTE) == EXPECTED_ROUTE
    assert TopicRouteData.from_json(STANDARD_ROUTE) == EXPECTED_ROUTE
    assert EXPECTED_ROUTE.to_json() == STANDARD_ROUTE
    assert EXPECTED_ROUTE.master_addr("broker-a") == "192.168.1.10:10911"
    assert EXPECTED_ROUTE.master_addr("broker-x") is None


def test_queue_expansion() -> None:
    route = TopicRouteData(
        queue_datas=[
            QueueData("broker-b", 2, 3, Perm.READ | Perm.WRITE),
            QueueData("broker-a", 1, 2, Perm.WRITE),
            QueueData("broker-c", 2, 2, Perm.READ | Perm.WRITE),  # no master: not writable
        ],
        broker_datas=[
            BrokerData("c", "broker-a", {0: "a:1"}),
            BrokerData("c", "broker-b", {0: "b:1", 1: "b:2"}),
            BrokerData("c", "broker-c", {1: "c:2"}),
        ],
    )
    assert [q.key for q in route.writable_queues("T")] == [
        "broker-a:0",
        "broker-a:1",
        "broker-b:0",
        "broker-b:1",
        "broker-b:2",
    ]
    assert [q.key for q in route.readable_queues("T")] == [
        "broker-b:0",
        "broker-b:1",
        "broker-c:0",
        "broker-c:1",
    ]
    ordered = TopicRouteData(order_topic_conf="broker-a:2;broker-b:1")
    assert ordered.writable_queues("T") == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-b", 0),
    ]


def test_message_queue_ordering_and_obj() -> None:
    qs = [
        MessageQueue("T", "b", 0),
        MessageQueue("T", "a", 10),
        MessageQueue("S", "z", 1),
        MessageQueue("T", "a", 2),
    ]
    assert sorted(qs) == [
        MessageQueue("S", "z", 1),
        MessageQueue("T", "a", 2),
        MessageQueue("T", "a", 10),
        MessageQueue("T", "b", 0),
    ]
    mq = MessageQueue("t", "b", 0)
    assert (
        mq.to_obj() == {"brokerName": "b", "queueId": 0, "topic": "t"}
        and MessageQueue.from_obj(mq.to_obj()) == mq
    )
    assert len({mq, MessageQueue("t", "b", 0)}) == 1


def test_perm() -> None:
    assert int(Perm.PRIORITY) == 8 and int(Perm.READ) == 4 and int(Perm.WRITE) == 2 and int(Perm.INHERIT) == 1
    assert perm_to_string(6) == "RW-" and perm_to_string(7) == "RWX" and perm_to_string(0) == "---"


def test_old_topic_syn_flag_and_defaults() -> None:
    qd = QueueData.from_obj(
        {"brokerName": "b", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "topicSynFlag": 3}
    )
    assert qd.topic_sys_flag == 3
    assert TopicRouteData.from_json(b"{}") == TopicRouteData()
    with pytest.raises(ProtocolError):
        TopicRouteData.from_json(b"[1]")


def test_cluster_info_fastjson() -> None:
    raw = (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"C"}},'
        b'"clusterAddrTable":{"C":["broker-a"]}}'
    )
    info = ClusterInfo.from_json(raw)
    assert info.broker_addr_table["broker-a"].master_addr == "10.0.0.1:10911"
    assert info.cluster_addr_table == {"C": ["broker-a"]}
    assert ClusterInfo.from_json(info.to_json()) == info


TOPIC_T1 = TopicConfig("T1", 8, 8, 6, "SINGLE_TAG", 0, False, {})
REGISTER_JSON = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},'
    b'"topicConfigTable":{"T1":{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"T1","topicSysFlag":0,"writeQueueNums":8}}}}'
)
REGISTER_BODY = RegisterBrokerBody(
    TopicConfigSerializeWrapper({"T1": TOPIC_T1}, DataVersion(1700000000000, 3, 0)), []
)
# The inflated compressed form (B.10), field by field.
REGISTER_INFLATED = (
    bytes.fromhex("00000038")  # 56 bytes of DataVersion JSON
    + b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}'
    + bytes.fromhex("00000001")  # one topic
    + bytes.fromhex("00000016")  # 22 bytes
    + b"T1 8 8 6 SINGLE_TAG {}"
    + bytes.fromhex("00000002")
    + b"[]"  # filterServerList
)


def test_register_broker_json() -> None:
    assert REGISTER_BODY.to_json() == REGISTER_JSON == REGISTER_BODY.encode(compressed=False)
    assert RegisterBrokerBody.from_json(REGISTER_JSON) == REGISTER_BODY
    assert RegisterBrokerBody.decode(REGISTER_JSON) == REGISTER_BODY


def test_register_broker_compressed() -> None:
    wire = REGISTER_BODY.encode(compressed=True)
    assert zlib.decompress(wire) == REGISTER_INFLATED
    assert wire[:2] == b"\x78\xda"  # zlib header for BEST_COMPRESSION
    assert RegisterBrokerBody.decode(zlib.compress(REGISTER_INFLATED), compressed=True) == REGISTER_BODY
    with_mapping = REGISTER_INFLATED + bytes.fromhex("0000000100000002") + b"{}"
    assert RegisterBrokerBody.decode(zlib.compress(with_mapping), compressed=True).mapping_infos == [{}]
    for cut in range(len(REGISTER_INFLATED)):
        with pytest.raises(ProtocolError):
            RegisterBrokerBody.decode(zlib.compress(REGISTER_INFLATED[:cut]), compressed=True)
    with pytest.raises(ProtocolError):
        RegisterBrokerBody.decode(b"garbage", compressed=True)
    assert body_crc32(b"hi") == 0x58932AAC  # crc32 0xD8932AAC with the sign bit cleared


def test_topic_config_text_and_json() -> None:
    tc = TopicConfig("T2", 4, 2, 4, "MULTI_TAG", 1, True, {"+message.type": "FIFO"})
    assert tc.encode_text() == 'T2 4 2 4 MULTI_TAG {"+message.type":"FIFO"}'
    assert TopicConfig.decode_text(tc.encode_text()) == TopicConfig(
        "T2", 4, 2, 4, "MULTI_TAG", attributes={"+message.type": "FIFO"}
    )
    assert TopicConfig.decode_text("T3 1 1 6 SINGLE_TAG") == TopicConfig("T3", 1, 1, 6)
    assert TopicConfig.from_json(tc.to_json()) == tc
    with pytest.raises(ProtocolError):
        TopicConfig.decode_text("T3 x 1 6 SINGLE_TAG")
    assert DataVersion(5, 1).next_version(9) == DataVersion(9, 2, 0)


def test_kv_table_and_topic_list() -> None:
    assert KVTable({"b": "2", "a": "1"}).to_json() == b'{"table":{"a":"1","b":"2"}}'
    assert KVTable.from_json(b'{"table":{"a":"1"}}') == KVTable({"a": "1"})
    assert TopicList(["b", "a"]).to_json() == b'{"topicList":["a","b"]}'
    assert TopicList.from_json(b'{"topicList":["x"],"brokerAddr":"h:1"}') == TopicList(["x"], "h:1")


names = st.text(
    st.characters(whitelist_categories=["L", "N"], whitelist_characters="-_%"), min_size=1, max_size=12
)
topic_configs = st.builds(
    TopicConfig, names, st.integers(0, 1024), st.integers(0, 1024), st.integers(0, 15),
    st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]), st.just(0), st.just(False),
    st.dictionaries(names, names, max_size=3),
)  # fmt: skip


@given(
    st.lists(
        st.builds(
            QueueData, names, st.integers(0, 64), st.integers(0, 64), st.integers(0, 15), st.integers(0, 7)
        ),
        max_size=4,
    ),
    st.lists(
        st.builds(BrokerData, names, names, st.dictionaries(st.integers(0, 2**62), names, max_size=3)),
        max_size=4,
    ),
)
def test_route_roundtrip(qds: list[QueueData], bds: list[BrokerData]) -> None:
    route = TopicRouteData(qds, bds)
    assert TopicRouteData.from_json(route.to_json()) == route


@given(st.dictionaries(names, topic_configs, max_size=5), st.integers(0, 2**62), st.lists(names, max_size=3))
def test_register_roundtrip(table: dict[str, TopicConfig], counter: int, filters: list[str]) -> None:
    table = {tc.topic_name: tc for tc in table.values()}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1, counter)), filters)
    assert RegisterBrokerBody.decode(body.encode(False)) == body
    assert RegisterBrokerBody.decode(body.encode(True), compressed=True) == body
