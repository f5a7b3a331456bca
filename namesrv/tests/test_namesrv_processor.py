"""Unit tests of the NameServer request processors (no sockets: handlers are called directly)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from rocketq.client.errors import HeaderError
from rocketq.client.remoting.codes import RequestCode, ResponseCode
from rocketq.client.remoting.command import RemotingCommand
from rocketq.client.remoting.vocabulary import NAMESPACE_ORDER_TOPIC_CONFIG as ORDER_TOPIC_CONFIG
from rocketq.namesrv import bodies
from rocketq.namesrv.config import NamesrvConfig, load_config_file
from rocketq.namesrv.errors import NamesrvConfigError, RegisterBodyError
from rocketq.namesrv.kvconfig import KvConfigManager
from rocketq.namesrv.processor import NamesrvProcessor
from rocketq.namesrv.routeinfo import QueueConf, RouteInfoManager
from rocketq.server.properties import parse_properties

Q = QueueConf(4, 4, 6, 0)


def make(order: bool = False) -> NamesrvProcessor:
    return NamesrvProcessor(NamesrvConfig(order_message_enable=order), RouteInfoManager(), KvConfigManager())


def call(
    p: NamesrvProcessor, code: int, ext: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    request = RemotingCommand.request(code, ext, body)
    request.opaque = 5
    response = p.handlers()[code](request, None)
    assert response.opaque == 5 and response.is_response
    return response


def register_ext(
    name: str = "broker-a", bid: int = 0, addr: str = "127.0.0.1:10911", **extra: str
) -> dict[str, str]:
    ext = {
        "brokerName": name,
        "brokerAddr": addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": addr.replace("10911", "10912"),
        "brokerId": str(bid),
    }
    ext.update(extra)
    return ext


def test_register_json_body_then_route_is_standard_json() -> None:
    p = make()
    body = bodies.encode_register_body((1, 1, 0), {"TopicTest": Q, "Other": QueueConf(8, 8, 4, 0)})
    resp = call(p, RequestCode.REGISTER_BROKER, register_ext(bodyCrc32=str(bodies.body_crc32(body))), body)
    assert resp.code == ResponseCode.SUCCESS and resp.body == b""
    resp = call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    assert resp.code == ResponseCode.SUCCESS
    assert resp.body == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster",'
        b'"enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
        b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    )


def test_register_compressed_body_and_slave_response_header() -> None:
    p = make()
    body = bodies.encode_register_body((1, 2, 0), {"T": Q}, ["fs:1"], compressed=True)
    resp = call(p, RequestCode.REGISTER_BROKER, register_ext(compressed="true"), body)
    assert resp.code == ResponseCode.SUCCESS
    resp = call(p, RequestCode.REGISTER_BROKER, register_ext(bid=1, addr="127.0.0.2:10911"), b"")
    assert resp.ext_fields == {"haServerAddr": "127.0.0.1:10912", "masterAddr": "127.0.0.1:10911"}
    route = json.loads(call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911", "1": "127.0.0.2:10911"}
    assert route["filterServerTable"] == {"127.0.0.1:10911": ["fs:1"]}
    assert route["queueDatas"][0]["readQueueNums"] == 4


def test_register_body_crc_mismatch_and_corrupt_bodies() -> None:
    p = make()
    body = bodies.encode_register_body((1, 1, 0), {"T": Q})
    resp = call(p, RequestCode.REGISTER_BROKER, register_ext(bodyCrc32="12345"), body)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "crc32 not match"
    assert call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).code == ResponseCode.TOPIC_NOT_EXIST
    with pytest.raises(RegisterBodyError):
        call(p, RequestCode.REGISTER_BROKER, register_ext(compressed="true"), b"not zlib")
    with pytest.raises(RegisterBodyError):
        call(
            p,
            RequestCode.REGISTER_BROKER,
            register_ext(compressed="true"),
            zlib.compress(b"\x00\x00\x01\x00{}"),
        )
    with pytest.raises(RegisterBodyError):
        call(p, RequestCode.REGISTER_BROKER, register_ext(), b"{not json")
    with pytest.raises(HeaderError):
        call(p, RequestCode.REGISTER_BROKER, {"brokerName": "x"}, body)


def test_unknown_topic_remark_and_order_topic_conf() -> None:
    p = make(order=True)
    resp = call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark == "No topic route info in name server for the topic: Nope"
    call(p, RequestCode.PUT_KV_CONFIG, {"namespace": ORDER_TOPIC_CONFIG, "key": "T", "value": "broker-a:4"})
    resp = call(
        p, RequestCode.REGISTER_BROKER, register_ext(), bodies.encode_register_body((1, 1, 0), {"T": Q})
    )
    assert json.loads(resp.body) == {"table": {"T": "broker-a:4"}}
    route = json.loads(call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).body)
    assert route["orderTopicConf"] == "broker-a:4"


def test_kv_config_requests() -> None:
    p = make()
    assert call(p, RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}).code == 0
    assert call(p, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}).ext_fields == {"value": "v"}
    resp = call(p, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})
    assert json.loads(resp.body) == {"table": {"k": "v"}}
    assert call(p, RequestCode.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}).code == 0
    resp = call(p, RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
    assert resp.code == ResponseCode.QUERY_NOT_FOUND and resp.remark == "No config item, Namespace: ns Key: k"
    assert (
        call(p, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"}).code == ResponseCode.QUERY_NOT_FOUND
    )


def test_cluster_topic_lists_delete_perm_and_data_version() -> None:
    p = make()
    body = bodies.encode_register_body((7, 3, 0), {"T": Q, "U": Q})
    call(p, RequestCode.REGISTER_BROKER, register_ext(), body)
    info = json.loads(call(p, RequestCode.GET_BROKER_CLUSTER_INFO).body)
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
    assert json.loads(call(p, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body) == {
        "topicList": ["T", "U"]
    }
    assert json.loads(call(p, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}).body) == {
        "topicList": ["T", "U"]
    }
    assert call(p, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "U"}).code == 0
    assert call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "U"}).code == ResponseCode.TOPIC_NOT_EXIST
    assert call(p, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}).ext_fields == {
        "wipeTopicCount": "1"
    }
    assert (
        json.loads(call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).body)["queueDatas"][0]["perm"]
        == 4
    )
    assert call(p, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}).ext_fields == {
        "addTopicCount": "1"
    }
    qdv = register_ext()
    del qdv["haServerAddr"]
    same = b'{"counter":3,"stateVersion":0,"timestamp":7}'
    resp = call(p, RequestCode.QUERY_DATA_VERSION, qdv, same)
    assert resp.ext_fields == {"changed": "false"} and json.loads(resp.body)["counter"] == 3
    resp = call(p, RequestCode.QUERY_DATA_VERSION, qdv, b'{"counter":4,"timestamp":7}')
    assert resp.ext_fields == {"changed": "true"}
    assert call(p, RequestCode.UNREGISTER_BROKER, qdv).code == 0
    assert json.loads(call(p, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body) == {"topicList": []}
    assert b"listenPort=9876" in call(p, RequestCode.GET_NAMESRV_CONFIG).body


def test_config_file_keys_and_validation(tmp_path: Path) -> None:
    path = tmp_path / "namesrv.properties"
    path.write_text(
        "# comment\nlistenPort = 19876\nscanNotActiveBrokerInterval=200\nbrokerChannelExpiredTime: 2000\n"
        "orderMessageEnable=TRUE\nserializeType=ROCKETMQ\nclientRequestThreadPoolNums=8\nbogusKey=1\n"
    )
    config, unknown = load_config_file(path)
    assert (config.listen_port, config.scan_not_active_broker_interval_ms) == (19876, 200)
    assert config.broker_channel_expired_time_ms == 2000 and config.order_message_enable
    assert config.serialize_type.name == "ROCKETMQ" and unknown == ["bogusKey"]
    assert parse_properties("a=b=c\n!x\nflag") == {"a": "b=c", "flag": ""}
    with pytest.raises(NamesrvConfigError):
        NamesrvConfig(listen_port=70000)
    with pytest.raises(NamesrvConfigError):
        load_config_file(tmp_path / "missing.properties")


def test_broker_heartbeat_and_elected_master_registration() -> None:
    p = make()
    old = bodies.encode_register_body((1, 1, 1), {"T": Q})
    new = bodies.encode_register_body((1, 2, 2), {"T": Q})
    assert (
        call(p, RequestCode.REGISTER_BROKER, register_ext(addr="h:10911"), old).code == ResponseCode.SUCCESS
    )
    call(p, RequestCode.REGISTER_BROKER, register_ext(bid=2, addr="g:10911"), old)
    resp = call(p, RequestCode.REGISTER_BROKER, register_ext(bid=0, addr="g:10911"), new)
    assert resp.code == ResponseCode.SUCCESS
    route = json.loads(call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "g:10911"}
    # the old master, stale (epoch 1), registers as id 0 again: refused, the route is unchanged
    resp = call(p, RequestCode.REGISTER_BROKER, register_ext(addr="h:10911"), old)
    assert resp.code == ResponseCode.SUCCESS and "masterAddr" not in resp.ext_fields
    route = json.loads(call(p, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "g:10911"}
    hb = {"clusterName": "DefaultCluster", "brokerAddr": "g:10911", "brokerName": "broker-a", "brokerId": "0"}
    assert call(p, RequestCode.BROKER_HEARTBEAT, hb).code == ResponseCode.SUCCESS
    with pytest.raises(HeaderError):
        call(p, RequestCode.BROKER_HEARTBEAT, {"brokerName": "broker-a"})
